"""GPUs held for nothing: what a pod holds, what a job does with its pods, what a rule reclaims."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sweeper.core.errors import ConfigError
from sweeper.core.families import FAMILIES, Family
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.trainer import TRAINER_VERSION, TRAINJOB
from sweeper.core.held import (
    Held,
    HeldState,
    Load,
    classify,
    explain_held,
    graces,
    is_gpu,
    may_act,
    overrule,
    parse_gpu_resources,
    parse_pod_load,
    reclaim,
    start_warning,
    watched,
)
from sweeper.core.jobs import Job, Owned, parse_owned
from sweeper.core.kinds import GPU_RESOURCES
from sweeper.core.model import Action, ActionKind, Skip, SkipReason, Why
from sweeper.core.platform import PlatformRule
from tests.unit.objects import KIND, NOW, stamp

UID = "uid-tf"
STUCK_AFTER = 600.0
FINISHED_AFTER = 120.0


def pod(
    name: str = "train-worker-0",
    *,
    phase: str = "Running",
    node: str | None = "node-a",
    scheduled_ago: float | None = 3600,
    gpus: Any = 1,
    resource: str = "nvidia.com/gpu",
    owner: str = UID,
    deleting: bool = False,
    init_gpus: Any = None,
    created_ago: float | None = None,
) -> dict[str, Any]:
    """A pod of the job (uid ``owner``); Running on a node, scheduled an hour ago, 1 GPU."""
    container: dict[str, Any] = {"name": "main"}
    if gpus is not None:
        container["resources"] = {"limits": {resource: gpus}, "requests": {"cpu": "1"}}
    spec: dict[str, Any] = {"containers": [container]}
    if init_gpus is not None:
        spec["initContainers"] = [{"name": "init", "resources": {"limits": {resource: init_gpus}}}]
    if node is not None:
        spec["nodeName"] = node
    conditions = []
    if scheduled_ago is not None:
        at = stamp(NOW - timedelta(seconds=scheduled_ago))
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": at})
    else:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    metadata: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "ownerReferences": [{"uid": owner, "controller": True, "kind": "TFJob"}],
    }
    if deleting:
        metadata["deletionTimestamp"] = stamp(NOW)
    if created_ago is not None:
        metadata["creationTimestamp"] = stamp(NOW - timedelta(seconds=created_ago))
    return {
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": phase, "conditions": conditions},
    }


def pending(name: str, created_ago: float | None = None) -> dict[str, Any]:
    """A pod the scheduler left Pending: Unschedulable, on no node."""
    return pod(name, phase="Pending", node=None, scheduled_ago=None, created_ago=created_ago)


def load_of(*pods: dict[str, Any], patterns: tuple[str, ...] = GPU_RESOURCES) -> Load:
    load = Load()
    for raw in pods:
        owned = parse_owned(raw)
        assert owned is not None
        load.add(parse_pod_load(raw, owned, patterns))
    return load


def tfjob(**fields: Any) -> Job:
    return replace(Job(KIND["TFJob"], "v1", "team-a", "train", UID), **fields)


def trainjob(**fields: Any) -> Job:
    return replace(Job(TRAINJOB, TRAINER_VERSION, "team-a", "train", UID), **fields)


FAILED_AGO = NOW - timedelta(seconds=3600)
FINISHED = {"finished": "Failed", "finished_at": FAILED_AGO}


def verdict(job: Job, *pods: dict[str, Any]) -> tuple[str, int, int] | None:
    held = classify(
        job, load_of(*pods), NOW, stuck_after=STUCK_AFTER, finished_after=FINISHED_AFTER
    )
    if held is None:
        return None
    return held.state.value, held.gpus, held.pods


CASES = [
    pytest.param(
        tfjob(),
        [pod("w0"), pod("w1"), pending("w2")],
        ("stuck-starting", 2, 3),
        id="half-started-gang-holds-its-placed-gpus",
    ),
    pytest.param(
        tfjob(),
        [pod("w0", scheduled_ago=STUCK_AFTER - 1), pending("w1")],
        None,
        id="within-stuck-after",
    ),
    pytest.param(
        tfjob(),
        [pod("w0", scheduled_ago=STUCK_AFTER), pending("w1")],
        ("stuck-starting", 1, 2),
        id="exactly-stuck-after-is-stuck",
    ),
    pytest.param(
        tfjob(),
        [pod("w0", scheduled_ago=STUCK_AFTER + 50), pod("w1", scheduled_ago=5), pending("w2")],
        ("stuck-starting", 2, 3),
        id="clock-starts-at-the-first-pod-scheduled",
    ),
    pytest.param(
        tfjob(),
        [pod("w0", phase="Pending"), pending("w1")],
        ("stuck-starting", 1, 2),
        id="a-pod-bound-and-creating-holds-its-gpu",
    ),
    pytest.param(tfjob(), [pod("w0"), pod("w1")], None, id="all-running"),
    pytest.param(
        tfjob(), [pending("w0"), pending("w1")], ("waiting", 0, 2), id="nothing-placed-waits"
    ),
    pytest.param(
        tfjob(suspended=True), [pod("w0"), pending("w1")], None, id="suspended-is-not-stuck"
    ),
    pytest.param(tfjob(deleting=True), [pod("w0"), pending("w1")], None, id="being-deleted"),
    pytest.param(
        tfjob(malformed="spec"), [pod("w0"), pending("w1")], None, id="malformed-never-judged"
    ),
    pytest.param(
        tfjob(),
        [pod("w0", scheduled_ago=None), pending("w1")],
        None,
        id="unknown-schedule-time-is-never-past-the-grace",
    ),
    pytest.param(
        tfjob(**FINISHED),
        [pod("w0"), pod("w1", phase="Succeeded"), pending("w2")],
        ("finished-holding", 1, 2),
        id="failed-keeps-running-and-pending-pods",
    ),
    pytest.param(
        tfjob(finished="Succeeded", finished_at=FAILED_AGO),
        [pod("chief")],
        ("finished-holding", 1, 1),
        id="succeeded-keeps-a-running-pod",
    ),
    pytest.param(
        tfjob(finished="Failed", finished_at=NOW - timedelta(seconds=FINISHED_AFTER - 1)),
        [pod("w0")],
        None,
        id="within-the-grace-after-the-end",
    ),
    pytest.param(
        tfjob(finished="Failed", finished_at=NOW - timedelta(seconds=FINISHED_AFTER)),
        [pod("w0")],
        ("finished-holding", 1, 1),
        id="exactly-the-grace-after-the-end",
    ),
    pytest.param(
        tfjob(**FINISHED, failed_by_deadline=True),
        [pod("w0")],
        None,
        id="a-deadline-failure-is-the-deadline-rules",
    ),
    pytest.param(
        tfjob(finished="Failed"), [pod("w0")], None, id="unknown-end-is-never-past-the-grace"
    ),
    pytest.param(
        tfjob(**FINISHED),
        [pod("w0", phase="Failed"), pod("w1", phase="Succeeded")],
        None,
        id="finished-pods-hold-nothing",
    ),
    pytest.param(
        tfjob(**FINISHED),
        [pod("w0", deleting=True)],
        None,
        id="a-pod-being-deleted-is-on-its-way",
    ),
    pytest.param(
        tfjob(**FINISHED),
        [pod("w0", gpus=None), pod("w1", gpus=2)],
        ("finished-holding", 2, 2),
        id="gpu-less-pods-count-as-pods-only",
    ),
    pytest.param(
        tfjob(replicas=3),
        [pod("w0", created_ago=3600), pod("w1", created_ago=3600)],
        ("stuck-starting", 2, 3),
        id="a-pod-its-controller-never-created-waits",
    ),
    pytest.param(
        tfjob(replicas=3),
        [pod("w0", created_ago=3600), pod("w1", created_ago=STUCK_AFTER - 1)],
        None,
        id="its-controller-still-creating-pods-within-the-grace",
    ),
    pytest.param(
        tfjob(replicas=3),
        [pod("w0", created_ago=3600), pod("w1", created_ago=STUCK_AFTER)],
        ("stuck-starting", 2, 3),
        id="exactly-the-grace-after-its-last-pod-created",
    ),
    pytest.param(
        tfjob(),
        [pod("w0", created_ago=7200), pending("w1", created_ago=60)],
        None,
        id="a-pod-just-re-created-restarts-the-clock",
    ),
    pytest.param(
        tfjob(replicas=2),
        [pod("w0"), pod("w1", phase="Succeeded")],
        None,
        id="a-finished-pod-was-created",
    ),
    pytest.param(
        tfjob(replicas=2),
        [pod("w0"), pod("w1", deleting=True)],
        None,
        id="a-pod-being-deleted-was-created",
    ),
    pytest.param(
        tfjob(replicas=3), [pod("w0"), pod("w1")], ("stuck-starting", 2, 3), id="no-creation-time"
    ),
    pytest.param(
        tfjob(replicas=3),
        [pending("w0"), pending("w1")],
        ("waiting", 0, 3),
        id="nothing-placed-waits-for-the-uncreated-too",
    ),
    pytest.param(
        tfjob(**FINISHED, replicas=3),
        [pod("w0")],
        ("finished-holding", 1, 1),
        id="a-finished-job-misses-nothing",
    ),
]


@pytest.mark.parametrize(("job", "pods", "expected"), CASES)
def test_classify(job: Job, pods: list[dict[str, Any]], expected: object) -> None:
    assert verdict(job, *pods) == expected


def test_no_pods_nothing_to_report() -> None:
    assert classify(tfjob(), None, NOW, stuck_after=0, finished_after=0) is None
    assert classify(tfjob(), Load(), NOW, stuck_after=0, finished_after=0) is None


GPU_CASES = [
    pytest.param(pod(gpus=2), 2, id="limit"),
    pytest.param(pod(gpus="4"), 4, id="quantity-string"),
    pytest.param(pod(gpus="500m"), 0, id="fraction-is-no-device"),
    pytest.param(pod(gpus=True), 0, id="bool-is-no-quantity"),
    pytest.param(pod(gpus=-1), 0, id="negative-is-none"),
    pytest.param(pod(gpus=1, resource="amd.com/gpu"), 1, id="amd"),
    pytest.param(pod(gpus=3, resource="nvidia.com/mig-1g.5gb"), 3, id="mig-profile"),
    pytest.param(pod(gpus=1, resource="example.com/fpga"), 0, id="not-a-gpu"),
    pytest.param(pod(gpus=1, init_gpus=2), 2, id="an-init-container-asking-more"),
    pytest.param(pod(gpus=2, init_gpus=1), 2, id="an-init-container-asking-less"),
]


@pytest.mark.parametrize(("raw", "gpus"), GPU_CASES)
def test_pod_gpus(raw: dict[str, Any], gpus: int) -> None:
    owned = parse_owned(raw)
    assert owned is not None
    assert parse_pod_load(raw, owned, GPU_RESOURCES).gpus == gpus


def test_requests_and_limits_of_a_container_are_not_added() -> None:
    raw = pod(gpus=2)
    raw["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = 2
    raw["spec"]["containers"].append(
        {"name": "side", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    )
    owned = parse_owned(raw)
    assert owned is not None
    assert parse_pod_load(raw, owned, GPU_RESOURCES).gpus == 3


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    ["spec", "status", "containers", "resources", "limits", "nodeName"]
                ),
                inner,
                max_size=3,
            )
        ),
        max_leaves=12,
    )
)
def test_a_hostile_pod_never_raises(raw: object) -> None:
    owned = Owned("p", "u", "Running", UID)
    load = parse_pod_load(raw, owned, GPU_RESOURCES)
    assert load.gpus >= 0


PATTERN_CASES = [
    pytest.param("nvidia.com/gpu", ("nvidia.com/gpu",), id="one"),
    pytest.param(
        " nvidia.com/gpu, nvidia.com/mig-*,nvidia.com/gpu ",
        ("nvidia.com/gpu", "nvidia.com/mig-*"),
        id="spaces-and-repeats",
    ),
]


@pytest.mark.parametrize(("text", "names"), PATTERN_CASES)
def test_parse_gpu_resources(text: str, names: tuple[str, ...]) -> None:
    assert parse_gpu_resources(text) == names


@pytest.mark.parametrize(
    "text", ["", " , ", "gpu", "nvidia.com/", "NVIDIA.com/gpu", "nvidia.com/g*u", "a/b c"]
)
def test_parse_gpu_resources_refuses(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^--gpu-resources: .*resource") as error:
        parse_gpu_resources(text)
    assert "\n" not in str(error.value)


def test_is_gpu() -> None:
    assert is_gpu("nvidia.com/mig-2g.10gb", GPU_RESOURCES)
    assert not is_gpu("nvidia.com/gpus", ("nvidia.com/gpu",))


RULE = PlatformRule("gpu-tenants", start_deadline=900.0, reclaim_failed_after=1800.0)


def held(state: HeldState, seconds: float, job: Job | None = None) -> Held:
    waiting = (Owned("w2", "u2", "Pending", UID),)
    since = NOW - timedelta(seconds=seconds)
    return Held(job or tfjob(), state, since, seconds, 2, waiting, 2)


RECLAIM_CASES = [
    pytest.param(held(HeldState.STUCK, 900), RULE, (ActionKind.FAIL, Why.START_DEADLINE), id="at"),
    pytest.param(held(HeldState.STUCK, 899.9), RULE, None, id="before-startDeadline"),
    pytest.param(held(HeldState.STUCK, 9000), None, None, id="no-rule-reports-only"),
    pytest.param(held(HeldState.STUCK, 9000), PlatformRule("r"), None, id="a-rule-without-the-key"),
    pytest.param(
        held(HeldState.STUCK, 9000, tfjob(queued=True)), RULE, None, id="kueue-decides-its-own"
    ),
    pytest.param(
        held(HeldState.FINISHED, 1800, tfjob(**FINISHED)),
        RULE,
        (ActionKind.TERMINATE_PODS, Why.FINISHED_HOLDING),
        id="finished-at-reclaimFailedAfter",
    ),
    pytest.param(
        held(HeldState.FINISHED, 1799, tfjob(**FINISHED)),
        RULE,
        None,
        id="finished-before-reclaimFailedAfter",
    ),
    pytest.param(
        held(
            HeldState.FINISHED, 9000, tfjob(**FINISHED, kind=MPIJOB, version=MPI_OPERATOR_VERSION)
        ),
        RULE,
        None,
        id="mpi-operator-recreates-workers-until-completionTime",
    ),
    pytest.param(
        held(
            HeldState.FINISHED,
            9000,
            tfjob(**FINISHED, version=MPI_OPERATOR_VERSION, completed=True),
        ),
        RULE,
        (ActionKind.TERMINATE_PODS, Why.FINISHED_HOLDING),
        id="mpi-operator-after-completionTime",
    ),
    pytest.param(
        Held(tfjob(), HeldState.WAITING, None, 0.0, 0, (), 0),
        RULE,
        None,
        id="waiting-is-never-acted-on",
    ),
    pytest.param(
        held(HeldState.FINISHED, 9000, trainjob(finished="Complete", finished_at=FAILED_AGO)),
        RULE,
        (ActionKind.DELETE_JOBSET, Why.FINISHED_HOLDING),
        id="a-complete-trainjob-loses-its-jobset",
    ),
    pytest.param(
        held(HeldState.FINISHED, 9000, trainjob(**FINISHED)),
        RULE,
        None,
        id="the-trainer-re-creates-the-jobset-of-a-trainjob-failed-otherwise",
    ),
    pytest.param(
        held(HeldState.STUCK, 9000, trainjob()), RULE, None, id="the-trainer-undoes-a-start-fail"
    ),
]


@pytest.mark.parametrize(("entry", "rule", "expected"), RECLAIM_CASES)
def test_reclaim(entry: Held, rule: PlatformRule | None, expected: object) -> None:
    action = reclaim(entry, rule)
    assert (None if action is None else (action.kind, action.why)) == expected


def test_start_deadline_names_the_rule_the_pods_and_the_gpus() -> None:
    action = reclaim(held(HeldState.STUCK, 960), RULE)
    assert action is not None
    assert action.seconds_overdue == 60
    assert "platform rule gpu-tenants" in action.detail
    assert "w2" in action.detail
    assert "2 GPU(s) freed" in action.detail


def test_start_deadline_counts_the_pods_never_created() -> None:
    entry = replace(held(HeldState.STUCK, 960), missing=2)
    assert entry.pods == 5
    action = reclaim(entry, RULE)
    assert action is not None
    assert "3 pod(s) never started (w2, 2 not created)" in action.detail


def test_reclaim_failed_after_names_the_rule_the_pods_and_the_gpus() -> None:
    action = reclaim(held(HeldState.FINISHED, 2000, tfjob(**FINISHED)), RULE)
    assert action is not None
    assert action.targets is None  # the executor reads them again
    assert action.detail.endswith("gpu-tenants: 3 pod(s) holding 2 GPU(s)")


EXPLAIN_CASES = [
    pytest.param(
        held(HeldState.STUCK, 960),
        RULE,
        "stuck-starting for 16m00s: 2 pod(s) placed holding 2 GPU(s), waiting: w2; "
        "startDeadline 15m00s of platform rule gpu-tenants",
        id="stuck-under-a-rule",
    ),
    pytest.param(
        held(HeldState.STUCK, 960),
        None,
        "stuck-starting for 16m00s: 2 pod(s) placed holding 2 GPU(s), waiting: w2; "
        "reported only: no platform rule sets startDeadline",
        id="stuck-without-a-rule",
    ),
    pytest.param(
        held(HeldState.STUCK, 960, tfjob(queued=True)),
        RULE,
        "stuck-starting for 16m00s: 2 pod(s) placed holding 2 GPU(s), waiting: w2; "
        "Kueue's job: its waitForPodsReady decides, the sweeper never ends it",
        id="kueue",
    ),
    pytest.param(
        held(HeldState.FINISHED, 7200, tfjob(**FINISHED)),
        PlatformRule("r"),
        "finished-holding for 2h00m: 2 pod(s) placed holding 2 GPU(s), waiting: w2; "
        "reported only: no platform rule sets reclaimFailedAfter",
        id="finished-rule-without-the-key",
    ),
    pytest.param(
        held(HeldState.STUCK, 960, trainjob()),
        RULE,
        "stuck-starting for 16m00s: 2 pod(s) placed holding 2 GPU(s), waiting: w2; "
        "reported only: its controller would re-create what the sweeper deletes",
        id="trainer-re-creates",
    ),
    pytest.param(
        Held(tfjob(), HeldState.WAITING, None, 0.0, 0, (Owned("w0", "u", "Pending", UID),), 0),
        RULE,
        "waiting: none of its 1 pod(s) placed (w0); it holds nothing",
        id="waiting",
    ),
]


@pytest.mark.parametrize(("entry", "rule", "text"), EXPLAIN_CASES)
def test_explain_held(entry: Held, rule: PlatformRule | None, text: str) -> None:
    assert explain_held(entry, rule) == text


OVERRULE_CASES = [
    pytest.param(Skip(tfjob(), SkipReason.NO_DEADLINE), True, id="no-deadline-overruled"),
    pytest.param(Skip(tfjob(), SkipReason.OPTED_OUT), False, id="opted-out-stays-alone"),
    pytest.param(Skip(tfjob(), SkipReason.MANAGED_ELSEWHERE), False, id="foreign-stays-alone"),
]


@pytest.mark.parametrize(("entry", "acted"), OVERRULE_CASES)
def test_overrule_replaces_only_a_skip_for_lack_of_anything_due(entry: Skip, acted: bool) -> None:
    result = overrule(entry, held(HeldState.STUCK, 960), RULE)
    assert isinstance(result, Action) is acted
    assert may_act(entry.job, entry, RULE) is acted


def test_an_action_of_the_deadline_rules_comes_first() -> None:
    action = Action(tfjob(), ActionKind.TOUCH, Why.OVERDUE, 5.0)
    assert overrule(action, held(HeldState.STUCK, 960), RULE) is action
    assert overrule(Skip(tfjob(), SkipReason.NO_DEADLINE), None, RULE).decision == "skip"


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        pytest.param(tfjob(), True, id="running"),
        pytest.param(tfjob(suspended=True), False, id="suspended"),
        pytest.param(tfjob(**FINISHED), True, id="finished"),
        pytest.param(tfjob(**FINISHED, failed_by_deadline=True), False, id="deadline-failed"),
        pytest.param(tfjob(deleting=True), False, id="deleting"),
        pytest.param(tfjob(malformed="spec"), False, id="malformed"),
    ],
)
def test_watched(job: Job, expected: bool) -> None:
    assert watched(job) is expected


def test_may_act_needs_the_key_for_the_jobs_state() -> None:
    skip = Skip(tfjob(**FINISHED), SkipReason.FINISHED)
    assert may_act(skip.job, skip, RULE)
    assert not may_act(skip.job, skip, PlatformRule("r", start_deadline=60))
    assert not may_act(skip.job, skip, None)


def test_graces_are_the_flags_or_the_rules_keys_when_shorter() -> None:
    assert graces(600, 120, None) == (600, 120)
    assert graces(600, 120, RULE) == (600, 120)
    assert graces(7200, 86400, RULE) == (900, 1800)
    assert graces(7200, 86400, PlatformRule("r")) == (7200, 86400)


WARNS = PlatformRule("gpu-tenants", start_deadline=900.0, warn_before=300.0)


@pytest.mark.parametrize(
    ("seconds", "rule", "due"),
    [
        pytest.param(599.9, WARNS, False, id="before-the-warning"),
        pytest.param(600.0, WARNS, True, id="exactly-warnBefore-ahead"),
        pytest.param(899.9, WARNS, True, id="until-the-end"),
        pytest.param(900.0, WARNS, False, id="at-startDeadline-it-ends-instead"),
        pytest.param(700.0, RULE, False, id="a-rule-that-does-not-warn"),
        pytest.param(700.0, None, False, id="no-rule"),
    ],
)
def test_start_warning(seconds: float, rule: PlatformRule | None, due: bool) -> None:
    assert bool(start_warning(held(HeldState.STUCK, seconds), rule)) is due


def test_no_start_warning_for_a_kueue_job_nor_a_finished_one() -> None:
    assert not start_warning(held(HeldState.STUCK, 700, tfjob(queued=True)), WARNS)
    assert not start_warning(held(HeldState.FINISHED, 700, tfjob(**FINISHED)), WARNS)


def test_a_rule_that_warns_makes_the_job_stuck_from_the_warning() -> None:
    assert graces(3600, 120, WARNS) == (600, 120)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.NAME)
@pytest.mark.parametrize("completed", [False, True])
@pytest.mark.parametrize("finished", ["Failed", "Succeeded", "Complete", None])
def test_which_controller_re_creates_the_pods_the_sweeper_deletes(
    family: Family, completed: bool, finished: str | None
) -> None:
    # mpi-operator a finished MPIJob's workers until it writes completionTime (the sweeper's
    # own fail writes it); the trainer the JobSet of any TrainJob but a Complete one (it drops
    # a Failed condition not its deadline's, then re-applies the JobSet).
    kind, version = family.SERVES[0]
    job = tfjob(
        kind=kind, version=version, completed=completed, finished=finished, finished_at=FAILED_AGO
    )
    recreates = {
        "mpi-operator": finished is not None and not completed,
        "trainer": finished in ("Failed", None),
    }.get(family.NAME, False)
    assert family.recreates_pods(job) is recreates
