"""Properties of a job's view under a platform rule (``sweeper.core.platform.apply``).

Whatever the job and the rule: the effective deadline never exceeds the cap nor lengthens a
deadline the job declares; a job within its rule's cap is judged exactly as without a policy;
re-applying starts from the job's own fields (a relabelled Namespace re-judges a view); and a
cap is a cap on the decision too: whatever deadline a job declares, none evades it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from sweeper.core.decide import judge
from sweeper.core.families import lookup
from sweeper.core.jobs import DeadlineSource, Job, parse_job
from sweeper.core.model import Enforcement, Skip, SkipReason
from sweeper.core.platform import PlatformRule, apply
from tests.property.strategies import (
    LARGEST_VALID_DEADLINE,
    ORIGIN,
    graces,
    job_cases,
    policies,
    rfc3339,
)

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
    job: Job, rule: PlatformRule, enforcement: Enforcement
) -> None:
    applied = apply(job, rule)
    if applied.deadline_source is not DeadlineSource.JOB or applied.exemption_refused:
        return
    before, after = judge(job, ORIGIN, enforcement), judge(applied, ORIGIN, enforcement)
    assert (type(before), before.reason, before.detail) == (type(after), after.reason, after.detail)


@given(jobs, rules(), rules())
def test_applying_again_starts_from_the_job_own_fields(
    job: Job, first: PlatformRule, second: PlatformRule
) -> None:
    assert apply(apply(job, first), second) == apply(job, second)
    assert apply(apply(job, first), None) == job


# A job of each family as its controller stores it, started at ORIGIN: (kind, apiVersion).
FAMILIES = (
    ("PyTorchJob", "kubeflow.org/v1"),
    ("MPIJob", "kubeflow.org/v2beta1"),
    ("TrainJob", "trainer.kubeflow.org/v1alpha1"),
)
# What a job may declare: nothing, any deadline a controller holds, and any beyond it either
# way (its time.Duration wraps: 22446744074 s is about 127 years to the controllers).
declared_deadlines = st.one_of(
    st.none(),
    st.integers(-(10**7), 10**7),
    st.integers(-LARGEST_VALID_DEADLINE, LARGEST_VALID_DEADLINE),
    st.integers(min_value=LARGEST_VALID_DEADLINE + 1, max_value=2**80),
    st.integers(min_value=-(2**80), max_value=-LARGEST_VALID_DEADLINE - 1),
    st.sampled_from([22446744074, LARGEST_VALID_DEADLINE + 1, -LARGEST_VALID_DEADLINE - 1]),
)


def started(kind: str, api_version: str, declared: int | None) -> dict[str, Any]:
    """A running job of ``kind`` started (a TrainJob: created) at ORIGIN, declaring ``declared``."""
    meta = {"name": "j", "namespace": "team-a", "uid": "u", "creationTimestamp": rfc3339(ORIGIN)}
    if kind == "TrainJob":
        spec: dict[str, Any] = {"runtimeRef": {"name": "torch"}}
        if declared is not None:
            spec["activeDeadlineSeconds"] = declared
        return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}
    enforcement = {} if declared is None else {"activeDeadlineSeconds": declared}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": meta,
        "spec": {"runPolicy": enforcement},
        "status": {"startTime": rfc3339(ORIGIN)},
    }


@given(
    family=st.sampled_from(FAMILIES),
    declared=declared_deadlines,
    cap=st.integers(1, 10**7),
    default=st.one_of(st.none(), st.integers(1, 10**7)),
    enforcement=policies,
    grace=graces,
    after=st.integers(0, 10**6),
)
def test_no_declared_deadline_evades_a_cap(
    *,
    family: tuple[str, str],
    declared: int | None,
    cap: int,
    default: int | None,
    enforcement: Enforcement,
    grace: float,
    after: int,
) -> None:
    """Under a rule with ``maxDeadline``, a running job judged at or after its start + the cap +
    ``--grace`` is never skipped as ``malformed`` or ``not-yet-due``: its effective deadline, at
    most the cap, has passed, whatever it declares (none, negative, or beyond what Go's
    ``time.Duration`` holds either way). The job is started (a TrainJob: created), not finished,
    suspended, resuming, being deleted, opted out or managed elsewhere."""
    kind, api_version = family
    rule = PlatformRule("gpu", default_deadline=min(default or cap, cap), max_deadline=cap)
    enforcement = Enforcement(
        action=enforcement.action, grace=grace, escalate_after=enforcement.escalate_after
    )
    job = apply(
        parse_job(started(kind, api_version, declared), lookup(kind), api_version.split("/")[1]),
        rule,
    )
    now = ORIGIN + timedelta(seconds=cap + grace + after)
    entry = judge(job, now, enforcement)
    note(f"{kind} declaring {declared}, cap {cap}, at start + {cap + grace + after}s: {entry}")
    assert job.deadline_seconds is not None and job.deadline_seconds <= cap
    assert not (
        isinstance(entry, Skip) and entry.why in (SkipReason.MALFORMED, SkipReason.NOT_YET_DUE)
    ), "a capped job past its cap was skipped as malformed or never due"
