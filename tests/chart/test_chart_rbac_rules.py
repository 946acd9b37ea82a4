"""RBAC: exactly the rules each action needs, cluster-wide or per listed namespace.

tests/e2e/test_chart_rbac.py proves on a real API server that these rules are enough and that
each one is needed.
"""

from __future__ import annotations

from typing import Any

import pytest

PLURALS = ["tfjobs", "pytorchjobs", "xgboostjobs", "mpijobs", "paddlejobs", "jaxjobs", "mxjobs"]
STATUS = [f"{p}/status" for p in PLURALS]


def rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, object]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


EVENTS = rule("", ["events"], ["create"])
# A job failed by its deadline has its pods reclaimed whatever the action (v1.9.4 keeps them).
PODS = rule("", ["pods", "services"], ["list", "delete"])
V1 = {"families": ["training-operator"]}
TOUCH = [
    rule("kubeflow.org", PLURALS, ["list", "patch"]),
    PODS,
    EVENTS,
]
FAIL = [
    rule("kubeflow.org", PLURALS, ["get", "list"]),
    rule("kubeflow.org", STATUS, ["patch"]),
    rule("", ["pods", "services"], ["list", "delete"]),
    EVENTS,
]
AUTO = [
    rule("kubeflow.org", PLURALS, ["get", "list", "patch"]),
    rule("kubeflow.org", STATUS, ["patch"]),
    rule("", ["pods", "services"], ["list", "delete"]),
    EVENTS,
]
READ_ONLY_TOUCH = [
    rule("kubeflow.org", PLURALS, ["list"]),
    rule("", ["pods", "services"], ["list"]),
]
READ_ONLY_FAIL = [
    rule("kubeflow.org", PLURALS, ["get", "list"]),
    rule("", ["pods", "services"], ["list"]),
]


@pytest.mark.parametrize(
    ("values", "rules"),
    [
        pytest.param({"action": "touch"}, TOUCH, id="touch"),
        pytest.param({"action": "fail"}, FAIL, id="fail"),
        pytest.param({"action": "auto"}, AUTO, id="auto"),
        pytest.param({"action": "touch", "dryRun": "server"}, TOUCH, id="touch-server-dry-run"),
        pytest.param({"action": "fail", "dryRun": "server"}, FAIL, id="fail-server-dry-run"),
        pytest.param({"action": "touch", "dryRun": True}, READ_ONLY_TOUCH, id="touch-dry-run"),
        pytest.param({"action": "fail", "dryRun": True}, READ_ONLY_FAIL, id="fail-dry-run"),
        pytest.param({"action": "auto", "dryRun": "client"}, READ_ONLY_FAIL, id="auto-dry-run"),
    ],
)
def test_cluster_role_grants_exactly_what_the_action_needs(render, values, rules):
    rendered = render({**V1, **values})

    assert rendered.one("ClusterRole")["rules"] == rules


def test_listed_kinds_narrow_every_rule(render):
    rendered = render({**V1, "action": "auto", "kinds": ["MPIJob", "PyTorchJob"]})

    assert rendered.one("ClusterRole")["rules"] == [
        rule("kubeflow.org", ["pytorchjobs", "mpijobs"], ["get", "list", "patch"]),
        rule("kubeflow.org", ["pytorchjobs/status", "mpijobs/status"], ["patch"]),
        rule("", ["pods", "services"], ["list", "delete"]),
        EVENTS,
    ]


MPI = [
    rule("kubeflow.org", ["mpijobs"], ["get", "list", "patch"]),
    rule("kubeflow.org", ["mpijobs/status"], ["patch"]),
    PODS,
    rule("batch", ["jobs"], ["get", "patch"]),
    EVENTS,
]
# The pods of its JobSets' Jobs are listed, never deleted: each pass sums the GPUs they hold.
JOBSET_PODS = rule("", ["pods"], ["list"])
TRAINER = [
    rule("trainer.kubeflow.org", ["trainjobs"], ["list"]),
    rule("jobset.x-k8s.io", ["jobsets"], ["list", "delete"]),
    JOBSET_PODS,
    EVENTS,
]


@pytest.mark.parametrize(
    ("values", "rules"),
    [
        pytest.param({"families": ["mpi-operator"]}, MPI, id="mpi-operator"),
        pytest.param({"families": ["trainer"]}, TRAINER, id="trainer"),
        pytest.param(
            {"families": ["trainer"], "mode": "watch"},
            [
                rule("trainer.kubeflow.org", ["trainjobs"], ["get", "list", "watch"]),
                *TRAINER[1:],
            ],
            id="trainer-watch",
        ),
        pytest.param(
            {"families": ["trainer"], "dryRun": True},
            [
                rule("trainer.kubeflow.org", ["trainjobs"], ["list"]),
                rule("jobset.x-k8s.io", ["jobsets"], ["list"]),
                JOBSET_PODS,
            ],
            id="trainer-dry-run-deletes-nothing",
        ),
        pytest.param(
            {"families": ["training-operator", "mpi-operator", "trainer"], "kinds": ["TFJob"]},
            [rule("kubeflow.org", ["tfjobs"], ["list", "patch"]), PODS, EVENTS],
            id="kinds-narrow-the-families",
        ),
    ],
)
def test_each_family_gets_the_grant_its_clean_up_needs_and_no_other(render, values, rules):
    rendered = render(values)

    assert rendered.one("ClusterRole")["rules"] == rules


RULES = {"policy": {"rules": [{"name": "gpu", "defaultDeadline": "1h"}]}}
NAMESPACES = rule("", ["namespaces"], ["list"])


@pytest.mark.parametrize(
    ("values", "rules"),
    [
        pytest.param(
            {"families": ["mpi-operator"], **RULES},
            [*MPI, NAMESPACES],
            id="mpi-operator-writes-the-launchers-deadline",
        ),
        pytest.param(
            {"families": ["trainer"], **RULES},
            [
                rule("trainer.kubeflow.org", ["trainjobs"], ["get", "list", "patch"]),
                rule("trainer.kubeflow.org", ["trainjobs/status"], ["patch"]),
                *TRAINER[1:],
                NAMESPACES,
            ],
            id="trainer-writes-a-missing-deadline-and-fails-at-a-cap",
        ),
        pytest.param(
            {"families": ["mpi-operator", "trainer"], "dryRun": True, **RULES},
            [
                rule("kubeflow.org", ["mpijobs"], ["get", "list"]),
                rule("", ["pods", "services"], ["list"]),
                rule("batch", ["jobs"], ["get"]),
                rule("trainer.kubeflow.org", ["trainjobs"], ["get", "list"]),
                rule("jobset.x-k8s.io", ["jobsets"], ["list"]),
                NAMESPACES,
            ],
            id="dry-run-writes-no-deadline",
        ),
    ],
)
def test_a_platform_deadline_gets_the_grants_each_family_enforces_it_with(render, values, rules):
    assert render(values).one("ClusterRole")["rules"] == rules


def test_no_jobset_delete_unless_the_trainer_family_is_on(render):
    rendered = render({"families": ["training-operator", "mpi-operator"]})
    rules = rendered.one("ClusterRole")["rules"]

    assert not [r for r in rules if "jobsets" in r["resources"]]
    assert not [r for r in rules if "trainjobs" in r["resources"]]
    assert "--reclaim-grace=120" not in rendered.args


def selection(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith(("--kind", "--family"))]


def test_a_family_selection_sweeps_its_kinds_only(render):
    # --family, not --kind: MPIJob is the Training Operator's kind at v1 and mpi-operator's at
    # v2beta1, so --kind=MPIJob would sweep mpi-operator's MPIJobs without their grant.
    assert selection(render().args) == []
    assert selection(render(V1).args) == ["--family=training-operator"]
    assert selection(render({"families": ["trainer", "mpi-operator"]}).args) == [
        "--family=trainer",
        "--family=mpi-operator",
    ]
    assert selection(render({**V1, "kinds": ["MPIJob", "TrainJob"]}).args) == [
        "--kind=MPIJob",
        "--family=training-operator",
    ]
    assert selection(render({"kinds": ["TrainJob", "TFJob"]}).args) == [
        "--kind=TFJob",
        "--kind=TrainJob",
    ]


def test_cluster_role_binding_binds_the_release_service_account(render):
    rendered = render()
    binding = rendered.one("ClusterRoleBinding")
    account = rendered.one("ServiceAccount")

    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": rendered.one("ClusterRole")["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "sweeper"}
    ]
    assert rendered.pod_spec["serviceAccountName"] == account["metadata"]["name"]


@pytest.mark.parametrize(("action", "rules"), [("touch", TOUCH), ("fail", FAIL), ("auto", AUTO)])
def test_namespaced_mode_grants_a_role_per_namespace_and_nothing_cluster_wide(
    render, action, rules
):
    rendered = render({**V1, "action": action, "namespaces": ["team-a", "team-b"]})

    assert rendered.of_kind("ClusterRole") == []
    assert rendered.of_kind("ClusterRoleBinding") == []
    roles = rendered.of_kind("Role")
    bindings = rendered.of_kind("RoleBinding")
    assert [r["metadata"]["namespace"] for r in roles] == ["team-a", "team-b"]
    assert [b["metadata"]["namespace"] for b in bindings] == ["team-a", "team-b"]
    for role, binding in zip(roles, bindings, strict=True):
        assert role["rules"] == rules
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"][0]["namespace"] == "sweeper"
    assert [a for a in rendered.args if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"action": a, "namespaces": ns, "dryRun": d}, id=f"{a}-{len(ns)}ns-{d}")
        for a in ("touch", "fail", "auto")
        for ns in ([], ["team-a"])
        for d in (False, True, "server")
    ],
)
def test_no_rule_uses_a_wildcard_or_reaches_secrets(render, values):
    rendered = render(values)
    roles = rendered.of_kind("ClusterRole") + rendered.of_kind("Role")
    rules = [r for role in roles for r in role["rules"]]

    assert rules
    for r in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in r[field]
        assert "secrets" not in r["resources"]
        assert set(r["verbs"]) <= {"get", "list", "patch", "create", "delete"}
        assert "resourceNames" not in r
        assert "nonResourceURLs" not in r


def test_rbac_can_be_left_to_the_operator_of_the_cluster(render):
    rendered = render({"rbac": {"create": False}})

    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        assert rendered.of_kind(kind) == []


def test_an_existing_service_account_is_bound_but_not_created(render):
    rendered = render({"serviceAccount": {"create": False, "name": "platform-sweeper"}})

    assert rendered.of_kind("ServiceAccount") == []
    assert rendered.one("ClusterRoleBinding")["subjects"][0]["name"] == "platform-sweeper"
    assert rendered.pod_spec["serviceAccountName"] == "platform-sweeper"


def test_an_existing_service_account_must_be_named(render_error):
    error = render_error({"serviceAccount": {"create": False}})

    assert "serviceAccount.name is required when serviceAccount.create is false" in error


def test_rules_that_select_trainjobs_only_grant_no_write_on_other_job_statuses(render):
    # The review's reproduction: every family on, the rules select TrainJobs only. A
    # kubeflow.org job no rule can select is judged by its own deadline: touched, never failed
    # by the sweeper. A launcher Job still gets an MPIJob's own deadline added late.
    rendered = render({"policy": {"rules": [{"name": "tj-only", "kinds": ["TrainJob"]}]}})
    rules = rendered.one("ClusterRole")["rules"]

    assert rules == [
        rule("kubeflow.org", PLURALS, ["get", "list", "patch"]),
        rule("kubeflow.org", ["mpijobs/status"], ["patch"]),
        PODS,
        rule("batch", ["jobs"], ["get", "patch"]),
        rule("trainer.kubeflow.org", ["trainjobs"], ["get", "list", "patch"]),
        rule("trainer.kubeflow.org", ["trainjobs/status"], ["patch"]),
        TRAINER[1],  # its JobSets' pods are in PODS' list
        EVENTS,
        NAMESPACES,
    ]


def writes(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Each (group, resource, verb) a rule list grants that writes."""
    return {
        (group, resource, verb)
        for r in rules
        for group in r["apiGroups"]
        for resource in r["resources"]
        for verb in r["verbs"]
        if verb not in ("get", "list", "watch")
    }


@pytest.mark.parametrize(
    ("kinds", "added"),
    [
        pytest.param(
            ["PyTorchJob"], {("kubeflow.org", "pytorchjobs/status", "patch")}, id="pytorchjob"
        ),
        # mpi-operator's family patches mpijobs/status (a gang without a launcher) and launcher
        # Jobs (a deadline added late) anyway.
        pytest.param(["MPIJob"], set(), id="mpijob"),
        pytest.param(
            ["TrainJob"],
            {
                ("trainer.kubeflow.org", "trainjobs", "patch"),
                ("trainer.kubeflow.org", "trainjobs/status", "patch"),
            },
            id="trainjob",
        ),
        pytest.param(
            ["PyTorchJob", "TFJob"],
            {("kubeflow.org", f"{p}/status", "patch") for p in ("pytorchjobs", "tfjobs")},
            id="two-kinds",
        ),
    ],
)
def test_a_platform_write_is_granted_on_the_kinds_a_rule_can_select_only(render, kinds, added):
    # Under action touch the only write on a job without rules is the touch annotation; the
    # rules add what enforces a default or a cap, on the kinds they can select.
    ruled = {"policy": {"rules": [{"name": "r", "kinds": kinds}]}}

    before = writes(render({}).one("ClusterRole")["rules"])
    after = writes(render(ruled).one("ClusterRole")["rules"])

    assert after - before == added
    assert before <= after


def batch_jobs(rules: list[dict[str, Any]]) -> list[list[str]]:
    """The verbs of each rule on jobs.batch."""
    return [r["verbs"] for r in rules if r["apiGroups"] == ["batch"] and r["resources"] == ["jobs"]]


@pytest.mark.parametrize(
    ("values", "verbs"),
    [
        # mpi-operator copies an MPIJob's deadline into its launcher Job only when it creates
        # it: a deadline added or shortened later is the sweeper's to write, rules or none.
        pytest.param({}, [["get", "patch"]], id="default-families-no-rules"),
        pytest.param({"families": ["mpi-operator"]}, [["get", "patch"]], id="mpi-operator"),
        pytest.param(
            {"families": ["mpi-operator"], "dryRun": "server"}, [["get", "patch"]], id="server"
        ),
        pytest.param({"families": ["mpi-operator"], "dryRun": True}, [["get"]], id="dry-run"),
        pytest.param({"families": ["training-operator"]}, [], id="training-operator"),
        pytest.param({"kinds": ["TFJob", "TrainJob"]}, [], id="no-mpijob-among-the-kinds"),
    ],
)
def test_a_launchers_deadline_is_writable_whenever_mpi_operator_is_swept(render, values, verbs):
    assert batch_jobs(render(values).one("ClusterRole")["rules"]) == verbs
