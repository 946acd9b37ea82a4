"""The rules file (``--policy``) and a job's view under its rule."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from sweeper.core.decide import due_at, judge
from sweeper.core.errors import EXIT_CONFIG, ConfigError
from sweeper.core.families import KIND_NAMES
from sweeper.core.jobs import DeadlineSource, Job, parse_job
from sweeper.core.kinds import EXCLUDE_ANNOTATION
from sweeper.core.model import Action, ActionKind, ActionMode, Enforcement, Why
from sweeper.core.patches import failure_message
from sweeper.core.platform import (
    Platform,
    PlatformRule,
    Requirement,
    Selector,
    apply,
    load_platform,
)
from tests.unit.objects import KIND, NOW, condition, job

RULES = """
rules:
  - name: gpu-tenants
    namespaceSelector:
      matchLabels: {platform.example.com/tier: gpu}
      matchExpressions:
        - {key: team, operator: In, values: [a, b]}
    kinds: [PyTorchJob, TrainJob]
    defaultDeadline: 24h
    maxDeadline: 72h
    warnBefore: 30m
    startDeadline: 15m
    reclaimFailedAfter: 1h
  - name: sandbox
    namespaceSelector:
      matchExpressions:
        - {key: sandbox, operator: Exists}
    maxDeadline: 1h
    allowExemption: true
  - name: rest
    defaultDeadline: 7200
"""


def view(deadline: int | None = 3600, *, excluded: bool = False) -> Job:
    annotations = {EXCLUDE_ANNOTATION: "true"} if excluded else None
    return parse_job(job(deadline=deadline, annotations=annotations), KIND["PyTorchJob"])


def test_the_design_example_loads_in_order() -> None:
    platform = load_platform(RULES, "--policy rules.yaml", KIND_NAMES)
    assert [rule.name for rule in platform.rules] == ["gpu-tenants", "sandbox", "rest"]
    gpu = platform.rules[0]
    assert gpu == PlatformRule(
        name="gpu-tenants",
        selector=Selector(
            (("platform.example.com/tier", "gpu"),),
            (Requirement("team", "In", frozenset({"a", "b"})),),
        ),
        kinds=frozenset({"PyTorchJob", "TrainJob"}),
        default_deadline=86400.0,
        max_deadline=259200.0,
        allow_exemption=False,
        warn_before=1800.0,
        start_deadline=900.0,
        reclaim_failed_after=3600.0,
    )
    assert platform.rules[2].selector == Selector()
    assert platform.rules[2].start_deadline is None


@pytest.mark.parametrize(
    ("labels", "kind", "expected"),
    [
        ({"platform.example.com/tier": "gpu", "team": "a"}, "PyTorchJob", "gpu-tenants"),
        ({"platform.example.com/tier": "gpu", "team": "c"}, "PyTorchJob", "rest"),
        ({"platform.example.com/tier": "gpu", "team": "a"}, "TFJob", "rest"),
        ({"platform.example.com/tier": "gpu", "team": "a", "sandbox": ""}, "TFJob", "sandbox"),
        ({"team": "a"}, "PyTorchJob", "rest"),
        ({}, "MPIJob", "rest"),
    ],
    ids=[
        "every-condition",
        "In-misses",
        "kind-not-listed",
        "Exists-with-empty-value",
        "matchLabels-misses",
        "catch-all",
    ],
)
def test_the_first_matching_rule_wins(labels: dict[str, str], kind: str, expected: str) -> None:
    rule = load_platform(RULES, "f", KIND_NAMES).match(labels, kind)
    assert rule is not None
    assert rule.name == expected


def test_no_rule_matches_without_a_catch_all() -> None:
    platform = load_platform(
        "rules:\n  - name: only\n    namespaceSelector: {matchLabels: {a: b}}\n", "f", KIND_NAMES
    )
    assert platform.match({"a": "c"}, "PyTorchJob") is None
    assert load_platform("rules: []\n", "f", KIND_NAMES) == Platform()


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (Requirement("k", "In", frozenset({"x"})), {"k": "x"}, True),
        (Requirement("k", "In", frozenset({"x"})), {}, False),
        (Requirement("k", "NotIn", frozenset({"x"})), {"k": "x"}, False),
        (Requirement("k", "NotIn", frozenset({"x"})), {"k": "y"}, True),
        (Requirement("k", "NotIn", frozenset({"x"})), {}, True),
        (Requirement("k", "Exists"), {"k": ""}, True),
        (Requirement("k", "Exists"), {}, False),
        (Requirement("k", "DoesNotExist"), {}, True),
        (Requirement("k", "DoesNotExist"), {"k": "x"}, False),
    ],
    ids=[
        "In",
        "In-absent",
        "NotIn",
        "NotIn-other",
        "NotIn-absent-matches",
        "Exists",
        "Exists-absent",
        "DoesNotExist",
        "DoesNotExist-present",
    ],
)
def test_match_expressions_as_kubernetes_reads_them(
    requirement: Requirement, labels: dict[str, str], expected: bool
) -> None:
    assert requirement.matches(labels) is expected


RULE = PlatformRule("gpu", default_deadline=600.0, max_deadline=3600.0, warn_before=60.0)


@pytest.mark.parametrize(
    ("declared", "deadline", "source"),
    [
        (None, 600, DeadlineSource.DEFAULT),
        (1800, 1800, DeadlineSource.JOB),
        (3600, 3600, DeadlineSource.JOB),
        (3601, 3600, DeadlineSource.CAP),
        (-5, -5, DeadlineSource.JOB),
        # Beyond what Go's time.Duration holds either way: longer than any cap.
        (22446744074, 3600, DeadlineSource.CAP),
        (-22446744074, 3600, DeadlineSource.CAP),
    ],
    ids=[
        "default",
        "own-within-cap",
        "own-at-cap",
        "own-over-cap",
        "negative-own",
        "own-overflowing-go-duration",
        "negative-own-overflowing-go-duration",
    ],
)
def test_the_effective_deadline(
    declared: int | None, deadline: int, source: DeadlineSource
) -> None:
    applied = apply(view(declared), RULE)
    assert (applied.deadline_seconds, applied.declared_seconds, applied.deadline_source) == (
        deadline,
        declared,
        source,
    )
    assert (applied.rule, applied.warn_before) == ("gpu", 60.0)


def test_a_cap_alone_bounds_a_job_declaring_none() -> None:
    applied = apply(view(None), PlatformRule("cap", max_deadline=3600.0))
    assert (applied.deadline_seconds, applied.deadline_source) == (3600, DeadlineSource.CAP)


def test_a_rule_without_deadlines_leaves_a_job_without_one_without_one() -> None:
    applied = apply(view(None), PlatformRule("exempt-only", allow_exemption=True))
    assert (applied.deadline_seconds, applied.deadline, applied.rule) == (None, None, "exempt-only")


def test_without_a_rule_the_view_is_unchanged() -> None:
    original = view(3600, excluded=True)
    assert apply(original, None) is original
    assert original.declared_seconds == original.deadline_seconds == 3600


@pytest.mark.parametrize(
    ("allow", "excluded", "refused"),
    [(True, True, False), (False, False, True)],
    ids=["allowed", "forbidden"],
)
def test_the_exclude_annotation_is_honoured_only_where_the_rule_allows(
    allow: bool, excluded: bool, refused: bool
) -> None:
    applied = apply(view(excluded=True), replace(RULE, allow_exemption=allow))
    assert (applied.excluded, applied.exemption_refused) == (excluded, refused)
    plain = apply(view(), replace(RULE, allow_exemption=allow))
    assert (plain.excluded, plain.exemption_refused) == (False, False)


def test_applying_again_starts_from_the_job_own_fields() -> None:
    original = view(None, excluded=True)
    first = apply(original, RULE)
    again = apply(first, PlatformRule("loose", default_deadline=7200.0, allow_exemption=True))
    assert (again.deadline_seconds, again.deadline_source, again.excluded) == (
        7200,
        DeadlineSource.DEFAULT,
        True,
    )
    assert apply(first, RULE) == first
    assert apply(first, None) == original


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "--policy r.yaml: expected a mapping with one key, rules"),
        ("rules: []\nextra: 1\n", "--policy r.yaml: expected a mapping with one key, rules"),
        ("rules: {a: 1}\n", "--policy r.yaml: rules: expected a list of rules"),
        ("rules: [\n", "--policy r.yaml: not YAML (line 2)"),
        ("rules:\n  - {}\n", "--policy r.yaml: rules[0]: name: None: expected a DNS label"),
        ("rules:\n  - name: Big\n", "--policy r.yaml: rules[0]: name: 'Big': expected a DNS label"),
        (
            "rules:\n  - {name: a}\n  - {name: a}\n",
            "--policy r.yaml: rule a: name: used by an earlier rule",
        ),
        (
            "rules:\n  - {name: gpu, maxDeadline: 3x}\n",
            "--policy r.yaml: rule gpu: maxDeadline: '3x' is not a duration",
        ),
        (
            "rules:\n  - {name: gpu, maxDedline: 3h}\n",
            "--policy r.yaml: rule gpu: maxDedline: unknown field",
        ),
        (
            "rules:\n  - {name: gpu, defaultDeadline: 0}\n",
            "--policy r.yaml: rule gpu: defaultDeadline: 0 must be positive",
        ),
        (
            "rules:\n  - {name: gpu, defaultDeadline: 1.5}\n",
            "--policy r.yaml: rule gpu: defaultDeadline: 1.5: not a whole number of seconds",
        ),
        (
            "rules:\n  - {name: gpu, warnBefore: true}\n",
            "--policy r.yaml: rule gpu: warnBefore: True: not a duration",
        ),
        (
            "rules:\n  - {name: gpu, startDeadline: 0}\n",
            "--policy r.yaml: rule gpu: startDeadline: 0 must be positive",
        ),
        (
            "rules:\n  - {name: gpu, startDeadline: soon}\n",
            "--policy r.yaml: rule gpu: startDeadline: ",
        ),
        (
            "rules:\n  - {name: gpu, reclaimFailedAfter: -5m}\n",
            "--policy r.yaml: rule gpu: reclaimFailedAfter: ",
        ),
        (
            "rules:\n  - {name: gpu, reclaimFailedAfter: false}\n",
            "--policy r.yaml: rule gpu: reclaimFailedAfter: False: not a duration",
        ),
        (
            "rules:\n  - {name: gpu, defaultDeadline: 2h, maxDeadline: 1h}\n",
            "--policy r.yaml: rule gpu: defaultDeadline: '2h' is longer than maxDeadline '1h'",
        ),
        (
            "rules:\n  - {name: gpu, allowExemption: 'yes'}\n",
            "--policy r.yaml: rule gpu: allowExemption: 'yes': expected true or false",
        ),
        (
            "rules:\n  - {name: gpu, kinds: [PytorchJob]}\n",
            "--policy r.yaml: rule gpu: kinds: 'PytorchJob': not a kind",
        ),
        (
            "rules:\n  - {name: gpu, kinds: []}\n",
            "--policy r.yaml: rule gpu: kinds: expected a non-empty list",
        ),
        (
            "rules:\n  - {name: gpu, namespaceSelector: {matchLabel: {a: b}}}\n",
            "--policy r.yaml: rule gpu: namespaceSelector: matchLabel: unknown field",
        ),
        (
            "rules:\n  - {name: gpu, namespaceSelector: {matchLabels: {a: true}}}\n",
            "--policy r.yaml: rule gpu: namespaceSelector: matchLabels: expected a mapping",
        ),
        (
            "rules:\n  - name: gpu\n    namespaceSelector:\n"
            "      matchExpressions: [{key: a, operator: in, values: [b]}]\n",
            "--policy r.yaml: rule gpu: namespaceSelector: matchExpressions[0]: operator: 'in'",
        ),
        (
            "rules:\n  - name: gpu\n    namespaceSelector:\n"
            "      matchExpressions: [{key: a, operator: In}]\n",
            "--policy r.yaml: rule gpu: namespaceSelector: matchExpressions[0]: values: In needs",
        ),
        (
            "rules:\n  - name: gpu\n    namespaceSelector:\n"
            "      matchExpressions: [{key: a, operator: Exists, values: [b]}]\n",
            "--policy r.yaml: rule gpu: namespaceSelector: matchExpressions[0]: values: Exists",
        ),
    ],
    ids=[
        "not-a-mapping",
        "extra-top-level-key",
        "rules-not-a-list",
        "not-yaml",
        "no-name",
        "name-not-a-dns-label",
        "duplicate-name",
        "bad-duration",
        "typo-in-a-field",
        "zero-duration",
        "fractional-deadline",
        "bool-duration",
        "zero-startDeadline",
        "startDeadline-not-a-duration",
        "negative-reclaimFailedAfter",
        "bool-reclaimFailedAfter",
        "default-over-cap",
        "allow-not-a-bool",
        "unknown-kind",
        "empty-kinds",
        "typo-in-selector",
        "label-value-not-a-string",
        "bad-operator",
        "In-without-values",
        "Exists-with-values",
    ],
)
def test_a_bad_rules_file_is_one_line_naming_file_rule_and_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_platform(text, "--policy r.yaml", KIND_NAMES)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
    assert raised.value.exit_code == EXIT_CONFIG


def test_an_empty_file_is_refused_and_an_empty_rules_key_is_no_rules() -> None:
    with pytest.raises(ConfigError):
        load_platform("", "f", KIND_NAMES)
    assert load_platform("rules:\n", "f", KIND_NAMES) == Platform()


@pytest.mark.parametrize("action", list(ActionMode), ids=[a.value for a in ActionMode])
def test_a_v1_job_past_a_deadline_it_does_not_carry_is_failed_whatever_the_action(
    action: ActionMode,
) -> None:
    enforcement = Enforcement(action=action)
    applied = apply(view(None), RULE)  # started 2 h ago, the rule's default is 10 min
    entry = judge(applied, NOW, enforcement)
    assert isinstance(entry, Action)
    assert (entry.kind, entry.why) == (ActionKind.FAIL, Why.PLATFORM_DEADLINE)
    assert entry.detail == "1h50m past its deadline (10m00s, the default of platform rule gpu)"
    assert due_at(applied, NOW, enforcement) == NOW - timedelta(minutes=110)


@pytest.mark.parametrize("declared", [22446744074, -22446744074])
def test_a_deadline_no_controller_can_represent_is_failed_at_the_cap_never_skipped(
    declared: int,
) -> None:
    capped = apply(view(declared), PlatformRule("gpu", max_deadline=3600.0))
    entry = judge(capped, NOW, Enforcement())
    assert (entry.decision, entry.reason) == ("fail", "platform-deadline")
    assert due_at(capped, NOW, Enforcement()) == NOW - timedelta(hours=1)
    # Without a cap (a default alone does not apply: the job declares one), never due.
    uncapped = apply(view(declared), PlatformRule("rest", default_deadline=600.0))
    entry = judge(uncapped, NOW, Enforcement())
    assert (entry.decision, entry.reason) == ("skip", "not-yet-due")
    assert entry.detail.startswith(f"due never: activeDeadlineSeconds {declared} overflows")
    assert due_at(uncapped, NOW, Enforcement()) is None


def test_a_job_the_sweeper_failed_under_a_rule_has_its_pods_reclaimed() -> None:
    message = failure_message("train", source="10m00s, the default of platform rule gpu")
    raw = job(deadline=None, conditions=[condition("Failed", message=message)])
    applied = apply(parse_job(raw, KIND["PyTorchJob"]), RULE)
    assert (applied.failed_by_deadline, applied.failed_by_sweeper) == (True, True)
    entry = judge(applied, NOW, Enforcement())
    assert (entry.decision, entry.reason) == ("terminate-pods", "failed-by-deadline")
