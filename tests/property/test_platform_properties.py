"""Properties of a job's view under a platform rule (``sweeper.core.platform.apply``).

Whatever the job and the rule: the effective deadline never exceeds the cap nor lengthens a
deadline the job declares; a job within its rule's cap is judged exactly as without a policy;
and re-applying starts from the job's own fields (a relabelled Namespace re-judges a view).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sweeper.core.decide import judge
from sweeper.core.jobs import DeadlineSource, Job, parse_job
from sweeper.core.kinds import lookup
from sweeper.core.model import Policy
from sweeper.core.platform import PlatformRule, apply
from tests.property.strategies import ORIGIN, job_cases, policies

seconds = st.one_of(st.none(), st.integers(1, 10**7).map(float))


@st.composite
def rules(draw: st.DrawFn) -> PlatformRule:
    default, cap = draw(seconds), draw(seconds)
    if default is not None and cap is not None and default > cap:
        default, cap = cap, default
    return PlatformRule(
        name=draw(st.sampled_from(["gpu", "rest"])),
        default_deadline=default,
        max_deadline=cap,
        allow_exemption=draw(st.booleans()),
        warn_before=draw(seconds),
    )


jobs = job_cases(ORIGIN).map(lambda case: parse_job(case.raw(), lookup(case.kind.name)))


@given(jobs, rules())
def test_the_effective_deadline_is_within_the_cap_and_never_longer_than_the_job_own(
    job: Job, rule: PlatformRule
) -> None:
    applied = apply(job, rule)
    effective, own = applied.deadline_seconds, job.deadline_seconds
    assert applied.declared_seconds == own
    if rule.max_deadline is not None:
        assert effective is not None
        assert effective <= rule.max_deadline
    if own is not None:
        assert effective is not None
        assert effective <= own
    if applied.deadline_source is DeadlineSource.JOB:
        assert effective == own


@given(jobs, rules(), policies)
def test_a_job_within_its_rule_is_judged_as_without_a_policy(
    job: Job, rule: PlatformRule, policy: Policy
) -> None:
    applied = apply(job, rule)
    if applied.deadline_source is not DeadlineSource.JOB or applied.exemption_refused:
        return
    before, after = judge(job, ORIGIN, policy), judge(applied, ORIGIN, policy)
    assert (type(before), before.reason, before.detail) == (type(after), after.reason, after.detail)


@given(jobs, rules(), rules())
def test_applying_again_starts_from_the_job_own_fields(
    job: Job, first: PlatformRule, second: PlatformRule
) -> None:
    assert apply(apply(job, first), second) == apply(job, second)
    assert apply(apply(job, first), None) == job
