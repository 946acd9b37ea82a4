"""devcluster.mounts: a controller in a mount namespace of its own, and the probe for it.

``private_mounts`` is what lets two harness operators run side by side (each its own
``/tmp/k8s-webhook-server``) and what keeps Kueue's metrics certificate off the machine (its
``/etc/kueue/metrics/certs`` exists in Kueue's namespace only). The argv is checked as text; as
root the tests also run it and look at both sides of the namespace.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from devcluster import binaries, kueue, mounts, operator

UNSHARE = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c"]


def script_of(argv: list[str]) -> list[list[str]]:
    """The wrapper's shell steps, each split into words, after the fixed prefix is checked."""
    assert argv[: len(UNSHARE)] == UNSHARE
    assert argv[len(UNSHARE) + 1] == "devcluster-mounts"  # $0 of the shell: its error prefix
    return [shlex.split(step) for step in argv[len(UNSHARE)].split(" && ")]


@pytest.fixture
def probe_afresh() -> Iterator[None]:
    """The probe's once-per-process answer forgotten before and after the test."""
    mounts.private_mounts_available.cache_clear()
    yield
    mounts.private_mounts_available.cache_clear()


# --- the argv -----------------------------------------------------------------------------------


def test_an_existing_target_is_bound_then_the_shell_becomes_the_controller(tmp_path: Path) -> None:
    target, source = tmp_path / "target dir", tmp_path / "source"
    target.mkdir()

    argv = mounts.private_mounts({target: source}, ["/bin/ctl", "--flag=1"])

    assert script_of(argv) == [["mount", "--bind", str(source), str(target)], ["exec", "$@"]]
    assert argv[-2:] == ["/bin/ctl", "--flag=1"]


def test_a_missing_target_is_made_in_an_overlay_of_its_nearest_existing_ancestor(
    tmp_path: Path,
) -> None:
    ancestor, scratch, source = tmp_path / "etc", tmp_path / "scratch", tmp_path / "certs"
    ancestor.mkdir()
    first, second = ancestor / "kueue" / "metrics" / "certs", ancestor / "kueue" / "other"

    argv = mounts.private_mounts({first: source, second: source}, ["ctl"], scratch=scratch)

    upper, work = scratch / "0-upper", scratch / "0-work"
    assert script_of(argv) == [
        ["mount", "-t", "tmpfs", "devcluster", str(scratch)],
        ["mkdir", str(upper), str(work)],
        [
            "mount",
            "-t",
            "overlay",
            "devcluster",
            "-o",
            f"lowerdir={ancestor},upperdir={upper},workdir={work}",
            str(ancestor),
        ],
        ["mkdir", "-p", str(first)],
        ["mount", "--bind", str(source), str(first)],
        ["mkdir", "-p", str(second)],
        ["mount", "--bind", str(source), str(second)],
        ["exec", "$@"],
    ]


def test_a_missing_target_without_a_scratch_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a scratch"):
        mounts.private_mounts({tmp_path / "missing": tmp_path}, ["ctl"])


def test_the_operator_binds_its_certificate_root_on_the_hard_coded_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operator, "private_mounts_available", lambda: True)
    cp: Any = SimpleNamespace(kubeconfig=tmp_path / "kubeconfig", workdir=tmp_path)
    the_operator = operator.Operator(cp, binary=tmp_path / "training-operator")

    argv = the_operator._argv(webhook_port=1)

    steps = script_of(argv)
    # A plain bind on a target that exists: never an overlay of /tmp, which holds the source.
    assert steps == [
        ["mount", "--bind", str(tmp_path / "k8s-webhook-server"), str(operator.CERT_DIR.parent)],
        ["exec", "$@"],
    ]
    assert argv[len(UNSHARE) + 2] == str(tmp_path / "training-operator")
    assert the_operator.cert_dir == tmp_path / "k8s-webhook-server" / "serving-certs"


@pytest.mark.parametrize(
    ("private", "wrapped"),
    [
        pytest.param(True, True, id="root: its own namespace, the workdir's certificate"),
        pytest.param(False, False, id="no private mounts: the real directory, as before"),
    ],
)
def test_kueue_reads_its_metrics_certificate_from_its_workdir_when_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private: bool, wrapped: bool
) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    hard_coded = etc / "kueue" / "metrics" / "certs"
    monkeypatch.setattr(kueue, "METRICS_CERT_DIR", hard_coded)
    monkeypatch.setattr(mounts, "private_mounts_available", lambda: private)
    monkeypatch.setattr(binaries, "find", lambda name: tmp_path / name)
    cp: Any = SimpleNamespace(kubeconfig=tmp_path / "kubeconfig", workdir=tmp_path)
    the_kueue = kueue.Kueue(cp)

    argv = the_kueue._argv(tmp_path / "config.yaml")

    controller = [str(tmp_path / "kueue"), f"--config={tmp_path / 'config.yaml'}"]
    controller.append("--zap-log-level=info")
    assert argv[-3:] == controller
    if wrapped:
        assert the_kueue.metrics_cert_dir == tmp_path / "kueue" / "metrics-certs"
        steps = script_of(argv)
        assert steps[2][-1] == str(etc)  # the overlay: /etc/kueue exists in the namespace only
        assert ["mount", "--bind", str(the_kueue.metrics_cert_dir), str(hard_coded)] in steps
    else:
        assert the_kueue.metrics_cert_dir == hard_coded
        assert argv == controller


# --- the probe ----------------------------------------------------------------------------------


def refuse_to_run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    raise AssertionError("the probe ran a child although it could not work")


@pytest.mark.usefixtures("probe_afresh")
def test_without_root_there_are_no_private_mounts_and_nothing_is_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(subprocess, "run", refuse_to_run)

    assert mounts.private_mounts_available() is False


@pytest.mark.usefixtures("probe_afresh")
def test_without_unshare_there_are_no_private_mounts_and_nothing_is_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "unshare" else "/bin/x")
    monkeypatch.setattr(subprocess, "run", refuse_to_run)

    assert mounts.private_mounts_available() is False


@pytest.mark.usefixtures("probe_afresh")
@pytest.mark.parametrize(
    ("outcome", "available"),
    [
        pytest.param(0, True, id="the trial child saw both binds"),
        pytest.param(1, False, id="the trial child failed (no overlay, say)"),
        pytest.param(OSError("no /bin/sh"), False, id="the trial child did not start"),
    ],
)
def test_the_probe_tries_once_per_process_and_believes_the_trial(
    monkeypatch: pytest.MonkeyPatch, outcome: int | OSError, available: bool
) -> None:
    trials: list[list[str]] = []

    def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        trials.append(argv)
        if isinstance(outcome, OSError):
            raise outcome
        return subprocess.CompletedProcess(argv, outcome, b"", b"mount: permission denied")

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(subprocess, "run", run)

    assert mounts.private_mounts_available() is available
    assert mounts.private_mounts_available() is available
    [trial] = trials
    steps = script_of(trial)
    assert any(step[:3] == ["mount", "-t", "overlay"] for step in steps), "a missing target"
    assert sum(step[:2] == ["mount", "--bind"] for step in steps) == 2


# --- for real, as root --------------------------------------------------------------------------


def run_in_namespace(binds: dict[Path, Path], scratch: Path, shell: str) -> str:
    argv = mounts.private_mounts(binds, ["/bin/sh", "-c", shell], scratch=scratch)
    done = subprocess.run(argv, capture_output=True, timeout=30, check=True, text=True)
    return done.stdout


@pytest.mark.usefixtures("probe_afresh")
def test_as_root_a_missing_target_exists_in_the_namespace_only(tmp_path: Path) -> None:
    if not mounts.private_mounts_available():
        pytest.skip("no private mounts here (needs root, unshare and overlayfs)")
    source, scratch = tmp_path / "source", tmp_path / "scratch"
    for directory in (source, scratch):
        directory.mkdir()
    (source / "tls.crt").write_text("certificate\n", encoding="utf-8")
    # Kueue's own case: a directory under /etc that the machine does not have.
    top = Path("/etc") / f"devcluster-test-{uuid.uuid4().hex[:8]}"
    target = top / "metrics" / "certs"

    seen = run_in_namespace({target: source}, scratch, f"cat {target}/tls.crt; ls -A /etc")

    certificate, *etc = seen.splitlines()
    assert certificate == "certificate"
    assert {p.name for p in Path("/etc").iterdir()} <= set(etc), "the rest of /etc is as it was"
    assert not top.exists()
    assert list(scratch.iterdir()) == []  # the overlay's layers were on the child's tmpfs
