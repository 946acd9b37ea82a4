"""devcluster/sbom.py: the image's CycloneDX SBOM, from its files, and the lock it must cover.

Run as the build and the release run it: a file, by a bare interpreter, on a root file system
(here one laid out as the image's: a venv's dist-info directories, dpkg's status and status.d).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SBOM = REPO / "devcluster" / "sbom.py"
LOCK = REPO / "requirements.txt"
SITE = "opt/venv/lib/python3.11/site-packages"


def dist_info(root: Path, name: str, version: str, license_expression: str | None = None) -> None:
    folder = root / SITE / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    if license_expression:
        lines.append(f"License-Expression: {license_expression}")
    (folder / "METADATA").write_text("\n".join(lines) + "\n\nThe description.\n")


def image_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    dist_info(root, "PyYAML", "6.0.4", "MIT")
    dist_info(root, "kubeflow-deadline-sweeper", "0.1.0", "Apache-2.0")
    dpkg = root / "var" / "lib" / "dpkg"
    (dpkg / "status.d").mkdir(parents=True)
    (dpkg / "status").write_text(
        "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9+deb12u13\n"
        "Architecture: amd64\nDescription: GNU C Library\n a continuation line\n\n"
        "Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0\nArchitecture: all\n"
    )
    (dpkg / "status.d" / "python3.11-minimal").write_text(
        "Package: python3.11-minimal\nVersion: 3.11.2-6+deb12u6\nArchitecture: amd64\n"
        "Status: install ok installed\n"
    )
    (root / "etc").mkdir()
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    return root


def run(root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # A bare interpreter, isolated (-I): the file must need nothing but the standard library.
    return subprocess.run(
        [
            *(sys.executable, "-I", str(SBOM), str(root)),
            *("--name", "img:1", "--output", str(out), *extra),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def components(out: Path) -> dict[str, dict[str, Any]]:
    document = json.loads(out.read_text())
    assert (document["bomFormat"], document["specVersion"]) == ("CycloneDX", "1.5")
    return {c["purl"]: c for c in document["components"]}


def test_python_and_debian_packages_are_listed_with_their_package_urls(tmp_path: Path) -> None:
    out = tmp_path / "sbom.json"
    done = run(image_root(tmp_path), out)
    assert done.returncode == 0, done.stderr
    found = components(out)
    assert sorted(found) == [
        "pkg:deb/debian/libc6@2.36-9+deb12u13?arch=amd64&distro=debian-12",
        "pkg:deb/debian/python3.11-minimal@3.11.2-6+deb12u6?arch=amd64&distro=debian-12",
        "pkg:pypi/kubeflow-deadline-sweeper@0.1.0",
        "pkg:pypi/pyyaml@6.0.4",
    ]
    assert found["pkg:pypi/pyyaml@6.0.4"]["licenses"] == [{"expression": "MIT"}]
    assert "2 Python and 2 Debian packages" in done.stderr


def test_the_same_files_make_the_same_document(tmp_path: Path) -> None:
    root = image_root(tmp_path)
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    assert run(root, first).returncode == run(root, second).returncode == 0
    assert first.read_bytes() == second.read_bytes()


def test_a_locked_package_missing_from_the_image_fails_naming_it(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        "pyyaml==6.0.4 \\\n    --hash=sha256:00\nclick==8.5.1 \\\n    --hash=sha256:11\n"
    )
    done = run(image_root(tmp_path), tmp_path / "sbom.json", "--lock", str(lock))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == "sbom: locked but not in the image: click==8.5.1"


def test_every_pin_of_the_real_lock_is_read(tmp_path: Path) -> None:
    # A root holding exactly the lock's packages passes its own lock: the lock's format (hashes,
    # continuation lines, comments) is read whole, every pin of it.
    pins = [
        line.split(" ")[0].split("==")
        for line in LOCK.read_text().splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    ]
    # Not vacuous: the direct dependencies the image needs are among them.
    assert {"click", "urllib3", "msgspec"} <= {name for name, _version in pins}
    root = tmp_path / "root"
    for name, version in pins:
        dist_info(root, name, version)
    assert run(root, tmp_path / "sbom.json", "--lock", str(LOCK)).returncode == 0
    dropped = root / SITE / f"{pins[0][0].replace('-', '_')}-{pins[0][1]}.dist-info"
    (dropped / "METADATA").unlink()
    done = run(root, tmp_path / "sbom.json", "--lock", str(LOCK))
    assert done.returncode == 1
    assert f"{pins[0][0]}=={pins[0][1]}" in done.stderr


@pytest.mark.parametrize("argv", [["/nonexistent"]], ids=["missing-root"])
def test_a_root_that_is_not_a_directory_exits_two(tmp_path: Path, argv: list[str]) -> None:
    done = run(Path(argv[0]), tmp_path / "sbom.json")
    assert done.returncode == 2
    assert done.stderr == "sbom: /nonexistent: not a directory\n"
