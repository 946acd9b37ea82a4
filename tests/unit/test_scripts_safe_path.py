"""Every in-repo Python script is run with ``-P`` (or as a module with ``-m``).

``python path/to/script.py`` puts the script's own directory first on ``sys.path``, so a module
beside it shadows the standard library's of the same name: ``devcluster/operator.py`` is
imported as ``operator`` by the standard library itself, and ``devcluster/sbom.py`` run that way
failed on a fresh clone (``cannot import name 'eq' from partially initialized module
'operator'``). ``-P`` (Python 3.11) leaves that directory out. The scan reads every tracked
text file: the scripts, CI, the Dockerfile, and the docs and docstrings that tell a person
what to type.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_self_contained import REPO, _texts

# An interpreter, its options, then a path ending in .py: the options must include -P (or -I,
# isolated mode, which implies it).
_RUN = re.compile(
    r"(?<![\w./-])(?:[\w./$\"{}-]*/)?python(?:3(?:\.\d+)?)?[\"']?"
    r"(?P<options>(?:[ \t]+-[A-Za-z]+)*)[ \t]+[\"']?(?P<script>[^\s\"'-][^\s\"']*\.py)\b"
)


def unsafe_runs(text: str) -> list[str]:
    """The script paths ``text`` runs with the script's directory first on ``sys.path``."""
    return [
        m["script"]
        for m in _RUN.finditer(text)
        if not any(set(option) & {"P", "I"} for option in m["options"].split())
    ]


@pytest.mark.parametrize(
    ("line", "unsafe"),
    [
        pytest.param(
            'python3 "$here/devcluster/sbom.py" "$root" --name "$ref"',
            ["$here/devcluster/sbom.py"],
            id="build-image-before",
        ),
        pytest.param(
            "  python3 devcluster/sbom.py rootfs --lock x", ["devcluster/sbom.py"], id="ci"
        ),
        pytest.param("``python devcluster/binaries.py``", ["devcluster/binaries.py"], id="doc"),
        pytest.param(".venv/bin/python -u benchmarks/x.py", ["benchmarks/x.py"], id="venv-option"),
        pytest.param('python3 -P "$here/devcluster/binaries.py" rows', [], id="dash-p"),
        pytest.param("python3 -I devcluster/sbom.py", [], id="isolated"),
        pytest.param("python3 -u -P devcluster/sbom.py", [], id="dash-p-later"),
        pytest.param("python -m devcluster.sbom ROOT", [], id="module"),
        pytest.param("python3 -c 'import json,sys; print(1)'", [], id="code"),
        pytest.param("python3.11 site-packages are copied", [], id="prose"),
        pytest.param("/usr/bin/python3.11 /opt/x.pyc", [], id="pyc"),
    ],
)
def test_the_scan_finds_a_script_run_without_dash_p(line: str, unsafe: list[str]) -> None:
    assert unsafe_runs(line) == unsafe


def test_no_in_repo_script_runs_with_its_directory_on_sys_path() -> None:
    found = [
        (name, script)
        for name, text in _texts()
        if Path(name).name != Path(__file__).name  # its examples
        for script in unsafe_runs(text)
    ]

    assert found == []


def test_run_without_dash_p_devcluster_shadows_the_standard_library() -> None:
    # -S: no site-packages hook imports the real operator first, as on a bare image build.
    def run(*options: str) -> subprocess.CompletedProcess[str]:
        script = REPO / "devcluster" / "sbom.py"
        argv = [sys.executable, "-S", *options, str(script), "--help"]
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)

    bare, safe = run(), run("-P")

    # The import that breaks differs by Python ('operator' on 3.11 and 3.12, 'collections' on
    # 3.13), but it always runs through devcluster/operator.py.
    assert "partially initialized module" in bare.stderr
    assert f"{REPO / 'devcluster' / 'operator.py'}" in bare.stderr
    assert (safe.returncode, safe.stderr) == (0, "")
