"""What a scanner sees in the image ``scripts/build-image`` built: its Debian packages.

The runtime base is unpacked from Debian's packages without dpkg (it has no shell to run
their maintainer scripts), so ``scripts/build-image`` writes one dpkg control stanza per
package to ``/var/lib/dpkg/status.d/``, the layout distroless images use and that trivy,
grype and syft read. Without it a scanner reports an image with no OS packages at all, and
every CVE in its OpenSSL or glibc goes unseen. Read here from the OCI archive itself, layer by
layer, as a scanner reads it; no container engine needed. Needs the images (root builds them);
skips locally without them and fails in CI.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import IO

import pytest

import sweeper
from devcluster.node import NodeUnavailable, images
from tests.node import cluster

pytestmark = [pytest.mark.e2e, pytest.mark.node]

REPO = Path(__file__).resolve().parents[2]
STATUS_D = "var/lib/dpkg/status.d/"


def _layers(archive: Path) -> dict[str, bytes | None]:
    """Every path of the image's file system (later layers win) and a status file's bytes."""
    files: dict[str, bytes | None] = {}
    with tarfile.open(archive) as oci:

        def blob(digest: str) -> IO[bytes]:
            member = oci.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}")
            assert member is not None
            return member

        index = json.load(oci.extractfile("index.json"))  # type: ignore[arg-type]  # present
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"])) as tar:
                for member in tar:
                    name = member.name.removeprefix("./")
                    data = None
                    if name.startswith(STATUS_D) and member.isfile():
                        read = tar.extractfile(member)
                        data = read.read() if read is not None else None
                    files[name] = data
    return files


@pytest.fixture(scope="module")
def image_files() -> dict[str, bytes | None]:
    try:
        built = images()
    except NodeUnavailable as e:
        cluster.unavailable(str(e))
        raise  # unreachable: unavailable always raises
    return _layers(built["sweeper"].archive)


def _stanzas(files: dict[str, bytes | None]) -> dict[str, dict[str, str]]:
    found = {}
    for name, data in files.items():
        if name.startswith(STATUS_D) and data is not None:
            fields = {}
            for line in data.decode().splitlines():
                key, sep, value = line.partition(": ")
                if sep and not line.startswith(" "):
                    fields[key] = value
            found[name.removeprefix(STATUS_D)] = fields
    return found


def test_the_interpreter_and_the_libraries_it_loads_are_listed_with_versions(
    image_files: dict[str, bytes | None],
) -> None:
    packages = _stanzas(image_files)

    for package in ("python3.11-minimal", "libpython3.11-stdlib", "libc6", "libssl3", "zlib1g"):
        assert package in packages, f"{package} not in {sorted(packages)}"
        fields = packages[package]
        assert fields["Package"] == package
        assert fields["Version"]
        assert fields["Architecture"] in {"amd64", "arm64", "all"}
        assert fields["Status"] == "install ok installed"
    assert packages["libssl3"]["Source"] == "openssl"  # how scanners map to security trackers


def test_packages_whose_files_were_trimmed_away_are_not_listed(
    image_files: dict[str, bytes | None],
) -> None:
    """dpkg and tar are unpacked, then removed: a scanner must not report their CVEs."""
    packages = _stanzas(image_files)

    assert "dpkg" not in packages
    assert "tar" not in packages
    assert "bin/tar" not in image_files
    assert "usr/bin/dpkg" not in image_files


def test_the_sbom_beside_the_archive_lists_every_locked_and_every_debian_package(
    image_files: dict[str, bytes | None],
) -> None:
    """scripts/build-image writes sweeper.cdx.json next to sweeper.tar (devcluster/sbom.py)."""
    sbom = json.loads(
        (images()["sweeper"].archive.parent / "sweeper.cdx.json").read_text(encoding="utf-8")
    )
    assert (sbom["bomFormat"], sbom["specVersion"]) == ("CycloneDX", "1.5")
    listed = {(c["purl"].split("/")[0], c["name"], c["version"]) for c in sbom["components"]}
    lock = (REPO / "requirements.txt").read_text(encoding="utf-8")
    pins = re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+)", lock, re.MULTILINE)
    assert {"click", "urllib3", "msgspec"} <= {name for name, _version in pins}  # not vacuous
    for name, version in pins:
        assert ("pkg:pypi", re.sub(r"[-_.]+", "-", name), version) in listed, name
    assert ("pkg:pypi", "kubeflow-deadline-sweeper", sweeper.__version__) in listed
    for package, fields in _stanzas(image_files).items():
        assert ("pkg:deb", package, fields["Version"]) in listed, package
