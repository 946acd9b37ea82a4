"""The import contracts cover modules nobody told them about.

lint-imports runs on a copy of the tree with probe modules added the way a newcomer would add
them. The contracts are stated over whole packages (only ``sweeper.k8s.connection.client`` may
import the client, only ``sweeper.cli`` click, only ``sweeper.k8s.decode`` msgspec, every module
of ``sweeper`` has its layer, the harness and the property-test oracle keep away from
``sweeper.core.kinds`` and ``sweeper.core.families``), so each probe breaks its contract
without being named anywhere. Two runs in all: lint-imports takes seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

CLIENT = "Only sweeper.k8s.connection.client talks HTTP; nothing imports kubernetes"
CLICK = "Only sweeper.cli imports click"
HOUSE = "The house: each layer of sweeper imports only the layers below it"
CORE = "The decision core does no I/O"
ORACLE = "The harness and the property-test oracle do not import sweeper's constants"
MSGSPEC = "Only sweeper.k8s.decode imports msgspec"
CONTRACTS = (CLIENT, CLICK, HOUSE, CORE, ORACLE, MSGSPEC)

# Each probe: a file added (or appended to), and what lint-imports must then say under which
# contract.
PROBES = [
    pytest.param(
        "sweeper/probe_client.py",
        "import kubernetes.client\n",
        CLIENT,
        "sweeper.probe_client -> kubernetes",
        id="new-module-imports-kubernetes",
    ),
    pytest.param(
        "sweeper/probe_http.py",
        "import urllib3\n",
        CLIENT,
        "sweeper.probe_http -> urllib3",
        id="new-module-imports-urllib3",
    ),
    pytest.param(
        "sweeper/k8s/kube.py",
        "import kubernetes\n",
        CLIENT,
        "sweeper.k8s.kube -> kubernetes",
        id="the-requests-import-kubernetes",
    ),
    pytest.param(
        "sweeper/k8s/connection/client.py",
        "import kubernetes\n",
        CLIENT,
        "sweeper.k8s.connection.client -> kubernetes",
        id="the-http-glue-imports-kubernetes",
    ),
    pytest.param(
        "sweeper/probe_click.py",
        "import click\n",
        CLICK,
        "sweeper.probe_click -> click",
        id="new-module-imports-click",
    ),
    pytest.param(
        "sweeper/probe_msgspec.py",
        "import msgspec\n",
        MSGSPEC,
        "sweeper.probe_msgspec -> msgspec",
        id="new-module-imports-msgspec",
    ),
    pytest.param(
        "sweeper/probe_click.py", "", HOUSE, "- sweeper.probe_click", id="new-module-has-no-layer"
    ),
    pytest.param(
        "sweeper/core/decide.py",
        "import sweeper.oneshot.run\n",
        HOUSE,
        "sweeper.core.decide -> sweeper.oneshot.run",
        id="core-imports-a-layer-above",
    ),
    pytest.param(
        "sweeper/core/decide.py",
        "",
        CORE,
        "sweeper.core.decide -> sweeper.oneshot.run",
        id="core-imports-the-run",
    ),
    pytest.param(
        "devcluster/probe.py",
        "from sweeper.core import kinds\n",
        ORACLE,
        "devcluster.probe -> sweeper.core.kinds",
        id="harness-imports-the-constants",
    ),
    pytest.param(
        "tests/property/probe.py",
        "from sweeper.core.families import KINDS\n",
        ORACLE,
        "tests.property.probe -> sweeper.core.families",
        id="oracle-imports-the-constants",
    ),
]


def lint_copy(tree: Path, probes: list[tuple[str, str]]) -> dict[str, str]:
    """Run lint-imports on a copy of what it checks, with the probes appended.

    Returns:
        Each contract's name and what lint-imports said about it (``KEPT``, or the report).
    """
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis")
    for package in ("sweeper", "devcluster", "tests/property"):
        shutil.copytree(ROOT / package, tree / package, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tree)
    for relative, text in probes:
        with (tree / relative).open("a") as file:
            file.write(text)
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    said = {name: "KEPT" for name in CONTRACTS if f"{name} KEPT" in result.stdout}
    broken = result.stdout.partition("Broken contracts")[2]
    for name in CONTRACTS:
        if f"{name} BROKEN" in result.stdout:
            section = broken.partition(f"\n{name}\n")[2]
            ends = [section.find(f"\n{other}\n") for other in CONTRACTS]
            said[name] = section[: min([end for end in ends if end >= 0], default=None)]
    assert set(said) == set(CONTRACTS), result.stdout + result.stderr
    return said


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    probes = [(str(param.values[0]), str(param.values[1])) for param in PROBES]
    return lint_copy(tmp_path_factory.mktemp("probed"), probes)


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    assert lint_copy(tmp_path, []) == dict.fromkeys(CONTRACTS, "KEPT")


@pytest.mark.parametrize(("path", "text", "contract", "report"), PROBES)
def test_a_probe_breaks_its_contract(
    probed: dict[str, str], path: str, text: str, contract: str, report: str
) -> None:
    assert report in probed[contract]
