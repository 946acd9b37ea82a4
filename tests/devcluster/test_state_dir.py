"""``scripts/devcluster``'s state belongs to one checkout: no clone's ``down`` stops another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.__main__ import CHECKOUT, state_dir


def test_two_checkouts_have_two_state_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    one, other = tmp_path / "a" / "repo", tmp_path / "b" / "repo"
    one.mkdir(parents=True)
    other.mkdir(parents=True)

    assert state_dir(one) != state_dir(other)
    assert state_dir(one) == state_dir(one)
    parent = tmp_path / "cache" / "kubeflow-deadline-sweeper" / "devcluster"
    assert state_dir(one).parent == state_dir(other).parent == parent
    assert state_dir(one).name.startswith("repo-")


def test_the_default_is_this_checkout() -> None:
    assert (CHECKOUT / "devcluster" / "__main__.py").is_file()
    assert state_dir() == state_dir(CHECKOUT)
