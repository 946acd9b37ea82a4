"""The harness itself: what ``devcluster.ControlPlane`` promises the other e2e tests."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import kubernetes.client
import kubernetes.config
import pytest

import devcluster.binaries
from devcluster import ApiError, BinaryMissing, ControlPlane, ControlPlaneError, audit, binaries
from tests.e2e.clusters import (
    KUBEFLOW_PLURALS,
    SKIP_REASON,
    binaries_missing,
    require_binaries,
    start_control_plane,
    wait_gone,
)

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
KINDS = {"TFJob", "PyTorchJob", "XGBoostJob", "MPIJob", "PaddleJob", "JAXJob"}


def client_for(kubeconfig: Path) -> kubernetes.client.ApiClient:
    client: kubernetes.client.ApiClient = kubernetes.config.new_client_from_config(  # type: ignore[no-untyped-call]  # unannotated in the client
        config_file=str(kubeconfig)
    )
    return client


def who(api: kubernetes.client.ApiClient) -> kubernetes.client.V1UserInfo:
    """Who the apiserver says the client is (a SelfSubjectReview)."""
    review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review(
        kubernetes.client.V1SelfSubjectReview(
            api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"
        )
    )
    assert review.status is not None
    assert review.status.user_info is not None
    return review.status.user_info


# --- the build table ----------------------------------------------------------------------------


def test_versions_come_from_the_wrapper_modules():
    assert {name: t.version for name, t in binaries.targets().items()} == {
        "etcd": "v3.6.16",
        "kube-apiserver": "v1.36.3",
        "kubectl": "v1.36.3",
        "helm": "v3.22.0",
        "training-operator": "v1.9.4",
        "actionlint": "v1.7.12",
        "kubelet": "v1.36.3",
        "kube-controller-manager": "v1.36.3",
        "kube-scheduler": "v1.36.3",
        "kube-proxy": "v1.36.3",
        "containerd": "v2.4.2",
        "containerd-shim-runc-v2": "v2.4.2",
        "ctr": "v2.4.2",
        "runc": "v1.5.3",
        "kueue": "v0.17.0",
        "mpi-operator": "v0.8.2",
        "trainer": "v2.3.0",
        "jobset": "v0.12.0",
    }


def test_a_missing_binary_names_the_command_that_builds_it(monkeypatch, tmp_path):
    monkeypatch.setattr(binaries, "cache_dir", lambda: tmp_path)
    with pytest.raises(BinaryMissing, match=r"run scripts/build-binaries etcd \(needs Go 1\.26\)"):
        binaries.find("etcd")


@pytest.mark.parametrize(
    ("ci", "outcome", "message"),
    [
        ("true", pytest.fail.Exception, "e2e tests must run in CI: etcd v3.6.16 is not built"),
        ("", pytest.skip.Exception, SKIP_REASON),
    ],
    ids=["ci-fails", "locally-skips"],
)
def test_missing_binaries_fail_in_ci_and_skip_locally(monkeypatch, ci, outcome, message):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=re.escape(message)):
        binaries_missing(BinaryMissing("etcd v3.6.16 is not built"))


def test_the_apiserver_reports_the_pinned_version(control_plane):
    assert control_plane.request("GET", "/version")["gitVersion"] == binaries.version(
        "kube-apiserver"
    )


# --- security set-up ----------------------------------------------------------------------------


def test_only_the_secure_port_serves(control_plane):
    port = int(control_plane.server.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/api")
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    assert response.status == 400
    assert b"HTTPS" in body


def test_the_admin_kubeconfig_is_in_system_masters(control_plane):
    assert "system:masters" in (who(client_for(control_plane.kubeconfig)).groups or [])


def test_rbac_denies_a_user_without_bindings(control_plane, namespace):
    api = client_for(control_plane.user_kubeconfig("nobody", []))
    with pytest.raises(kubernetes.client.ApiException) as denied:
        kubernetes.client.CoreV1Api(api).list_namespaced_pod(namespace)
    assert denied.value.status == 403


def test_a_user_kubeconfig_authenticates_as_that_user_and_groups(control_plane):
    api = client_for(control_plane.user_kubeconfig("alice", ["team-a", "team-b"]))
    user = who(api)
    assert user.username == "alice"
    assert {"team-a", "team-b"} <= set(user.groups or [])


def test_a_token_request_token_authenticates_as_the_service_account(control_plane, namespace):
    token = control_plane.service_account_token(namespace, "robot")
    api = client_for(control_plane.token_kubeconfig(token, "robot"))
    assert who(api).username == f"system:serviceaccount:{namespace}:robot"


def test_kubectl_works_with_a_user_kubeconfig(control_plane):
    kubeconfig = control_plane.user_kubeconfig("kubectl-user", ["system:masters"])
    out = subprocess.run(
        [
            str(binaries.find("kubectl")),
            "--kubeconfig",
            str(kubeconfig),
            "get",
            "crd",
            "-o",
            "name",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert {line.split("/")[1] for line in out.stdout.split()} == {
        f"{p}.kubeflow.org" for p in KUBEFLOW_PLURALS
    }


# --- audit log ----------------------------------------------------------------------------------


def test_the_audit_log_has_one_event_per_request_attributed_to_its_user(control_plane, namespace):
    since = control_plane.audit_offset()
    api = client_for(control_plane.user_kubeconfig("auditee", ["system:masters"]))
    kubernetes.client.CoreV1Api(api).list_namespaced_config_map(namespace)
    kubernetes.client.CoreV1Api(api).read_namespace(namespace)

    events = control_plane.audit_events(user="auditee", since=since)

    assert [(e["verb"], e["requestURI"].split("?")[0]) for e in events] == [
        ("list", f"/api/v1/namespaces/{namespace}/configmaps"),
        ("get", f"/api/v1/namespaces/{namespace}"),
    ]
    assert {e["stage"] for e in events} == {"ResponseComplete"}
    assert {e["level"] for e in events} == {"Metadata"}


def test_audit_events_since_a_cursor_leave_out_earlier_requests(control_plane, namespace):
    api = client_for(control_plane.user_kubeconfig("cursor-user", ["system:masters"]))
    kubernetes.client.CoreV1Api(api).list_namespaced_secret(namespace)
    since = control_plane.audit_offset()
    kubernetes.client.CoreV1Api(api).list_namespaced_service(namespace)

    assert [
        e["objectRef"]["resource"]
        for e in control_plane.audit_events(user="cursor-user", since=since)
    ] == ["services"]


@pytest.mark.parametrize(
    ("content", "offset"),
    [
        (b"", 0),
        (b'{"a": 1}\n', 9),
        (b'{"a": 1}\n{"b": 2}\n{"c"', 18),
        (b"x" * 100_000 + b"\n" + b"y" * 70_000, 100_001),
    ],
    ids=["empty", "one-line", "partial-last-line", "long-tail"],
)
def test_the_audit_cursor_stops_before_a_line_still_being_written(tmp_path, content, offset):
    log = tmp_path / "audit.log"
    log.write_bytes(content)
    assert audit.end_offset(log) == offset


def test_reading_events_leaves_out_a_line_still_being_written(tmp_path):
    log = tmp_path / "audit.log"
    log.write_bytes(b'{"user": {"username": "a"}}\n{"user": {"username": "b"}}\n{"user": {')
    assert [e["user"]["username"] for e in audit.read_events(log)] == ["a", "b"]
    assert audit.read_events(log, user="b", since=audit.end_offset(log)) == []


def test_reading_events_leaves_out_a_torn_line_and_says_so(tmp_path, caplog):
    log = tmp_path / "audit.log"
    log.write_bytes(
        b'{"user": {"username": "a"}}\n\x00\x00ername": "b"}}\n{"user": {"username": "c"}}\n'
    )
    assert [e["user"]["username"] for e in audit.read_events(log)] == ["a", "c"]
    assert "left out 1 line(s) that are not JSON" in caplog.text


# --- CRDs ---------------------------------------------------------------------------------------


def test_the_six_training_operator_kinds_are_served(control_plane):
    resources = control_plane.request("GET", "/apis/kubeflow.org/v1")["resources"]
    assert {r["kind"] for r in resources if "/" not in r["name"]} == KINDS
    assert {r["name"] for r in resources if r["name"].endswith("/status")} == {
        f"{p}/status" for p in KUBEFLOW_PLURALS
    }


def test_installing_the_crds_again_changes_nothing(control_plane):
    before = {
        crd["metadata"]["name"]: crd["metadata"]["resourceVersion"]
        for crd in control_plane.request(
            "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        )["items"]
    }
    names = control_plane.install_crds()
    after = {
        crd["metadata"]["name"]: crd["metadata"]["resourceVersion"]
        for crd in control_plane.request(
            "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        )["items"]
    }
    assert sorted(names) == sorted(f"{p}.kubeflow.org" for p in KUBEFLOW_PLURALS)
    assert after == before


def test_a_job_status_is_written_through_the_status_subresource(control_plane, namespace):
    custom = kubernetes.client.CustomObjectsApi(control_plane.api())
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "demo"},
        "spec": {
            "runPolicy": {"activeDeadlineSeconds": 60},
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}},
                }
            },
        },
        "status": {"startTime": "2020-01-01T00:00:00Z"},
    }
    custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", job)
    created = custom.get_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", "demo"
    )
    assert isinstance(created, dict)
    assert "status" not in created  # the main resource ignores status, as for the operator

    status = {
        "startTime": "2020-01-01T00:00:00Z",
        "conditions": [{"type": "Running", "status": "True"}],
    }
    custom.patch_namespaced_custom_object_status(
        "kubeflow.org", "v1", namespace, "pytorchjobs", "demo", {"status": status}
    )
    written = custom.get_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", "demo"
    )
    assert isinstance(written, dict)
    assert written["status"] == status


def test_an_unexpected_status_raises_api_error_with_the_servers_message(control_plane):
    with pytest.raises(ApiError, match="not found") as error:
        control_plane.request("GET", "/api/v1/namespaces/does-not-exist")
    assert error.value.status == 404


# --- lifecycle ----------------------------------------------------------------------------------


def test_stop_leaves_no_process_and_no_directory():
    cp = start_control_plane(crds=False)
    pids = [p.pid for p in cp.processes]
    cp.stop()
    assert wait_gone(pids) == []
    assert not cp.workdir.exists()


def test_a_failed_start_shows_the_log_tail_and_cleans_up(monkeypatch, tmp_path):
    fake_etcd = tmp_path / "etcd"
    fake_etcd.write_text(
        "#!/bin/sh\necho 'etcd: simulated failure to open the data dir' >&2\nexit 3\n"
    )
    fake_etcd.chmod(0o755)
    real_find = devcluster.binaries.find
    monkeypatch.setattr(
        devcluster.binaries, "find", lambda name: fake_etcd if name == "etcd" else real_find(name)
    )
    require_binaries("kube-apiserver")

    with pytest.raises(ControlPlaneError, match="simulated failure to open the data dir") as error:
        ControlPlane.start(crds=False)

    workdir = Path(str(error.value).split("log (", 1)[1].split("/logs/", 1)[0])
    assert "etcd exited with code 3" in str(error.value)
    assert not workdir.exists()


_HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from devcluster import ControlPlane
    cp = ControlPlane.start(crds=False)
    pids = [p.pid for p in cp.processes]
    print(json.dumps({"workdir": str(cp.workdir), "pids": pids}), flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm-cleans-up", "sigkill-kills-children"]
)
def test_a_killed_holder_leaves_no_process_behind(sig):
    require_binaries("etcd", "kube-apiserver")
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    ) as holder:
        try:
            assert holder.stdout is not None
            started = json.loads(holder.stdout.readline())
            holder.send_signal(sig)
            holder.wait(60)
        finally:
            if holder.poll() is None:
                holder.kill()

    assert wait_gone(started["pids"]) == []
    if sig == signal.SIGTERM:
        # Only a catchable signal lets the holder remove its directory; after SIGKILL the
        # kernel kills the children (PR_SET_PDEATHSIG) but nobody is left to clean up.
        assert not Path(started["workdir"]).exists()
    else:
        subprocess.run(["rm", "-rf", started["workdir"]], check=True)


def test_scripts_devcluster_up_prints_a_working_kubeconfig_and_down_removes_everything(tmp_path):
    env = dict(
        os.environ,
        XDG_CACHE_HOME=str(tmp_path),  # a state directory of its own, beside any real devcluster
        SWEEPER_BIN_CACHE=str(binaries.cache_dir()),
    )
    script = REPO / "scripts" / "devcluster"
    require_binaries("etcd", "kube-apiserver")

    up = subprocess.run(
        [str(script), "up"], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    try:
        assert up.returncode == 0, up.stderr
        path_line, export_line = up.stdout.splitlines()
        assert export_line == f"export KUBECONFIG={path_line}"
        # One state directory per checkout (<folder>-<hash of its path>) under the cache.
        (state_file,) = (tmp_path / "kubeflow-deadline-sweeper" / "devcluster").glob("*/state.json")
        state = json.loads(state_file.read_text())
        crds = kubernetes.client.ApiextensionsV1Api(
            client_for(Path(path_line))
        ).list_custom_resource_definition()
        assert len(crds.items) == 6
        status = subprocess.run(
            [str(script), "status"], capture_output=True, text=True, env=env, check=False
        )
        assert status.returncode == 0
    finally:
        down = subprocess.run(
            [str(script), "down"], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    assert down.returncode == 0, down.stderr
    assert wait_gone([state["pid"], *(p["pid"] for p in state["processes"])]) == []
    assert not Path(state["workdir"]).exists()
    assert not Path(path_line).exists()
    assert (
        subprocess.run(
            [str(script), "status"], capture_output=True, env=env, check=False
        ).returncode
        == 1
    )
