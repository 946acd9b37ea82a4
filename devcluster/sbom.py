"""The image's software bill of materials: a CycloneDX 1.5 JSON document, read from its files.

``scripts/build-image`` runs it on the image it built (mounted), the release workflow on the
released image (exported): ``python3 -P devcluster/sbom.py ROOTFS --name REF --lock
requirements.txt --output FILE``. It lists

- every Python distribution in the image's virtual environment (``opt/venv``'s ``*.dist-info``),
  as ``pkg:pypi`` components, the sweeper's own wheel included;
- every Debian package the base records as installed: ``var/lib/dpkg/status`` (a base built
  by dpkg, such as the public python image) and ``var/lib/dpkg/status.d/`` (one stanza per
  package, as distroless images and the extract-built base of ``scripts/build-image`` have it),
  as ``pkg:deb`` components.

With ``--lock`` it also checks that every package the lock pins is in the image at that exact
version, and exits 1 naming those that are not: an SBOM that misses a locked package is a
build that did not install from the lock.

Standard library only, and run as a file, never imported through the ``devcluster`` package
(which needs the Kubernetes client): the release runner has a bare ``python3``. The output is a
function of the files alone (no timestamp, a serial number derived from the content), so two
builds of the same image write the same SBOM.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import re
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPEC_VERSION = "1.5"
SITE_PACKAGES = "opt/venv/lib/python*/site-packages"
_LOCK_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


@dataclass(frozen=True, order=True, slots=True)
class Package:
    """One component: a Python distribution or a Debian package.

    Attributes:
        ecosystem: ``pypi`` or ``deb``.
        name: The name as its ecosystem spells it (PyPI names normalised, PEP 503).
        version: The exact version.
        purl: The package URL that scanners match on.
        license: An SPDX expression, when the package declares one.
    """

    ecosystem: str
    name: str
    version: str
    purl: str
    license: str | None = None


def normalise(name: str) -> str:
    """A PyPI name as PEP 503 compares them: ``PyYAML`` and ``pyyaml`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def python_packages(root: Path) -> Iterator[Package]:
    """The distributions installed in the image's virtual environment."""
    parser = email.parser.HeaderParser()
    for metadata in sorted(root.glob(f"{SITE_PACKAGES}/*.dist-info/METADATA")):
        headers = parser.parsestr(metadata.read_text(encoding="utf-8", errors="replace"))
        name, version = normalise(headers["Name"] or ""), headers["Version"] or ""
        if name and version:
            expression = headers["License-Expression"]
            yield Package("pypi", name, version, f"pkg:pypi/{name}@{version}", expression)


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                continue  # a continuation line (a description): not needed here
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if fields.get("Package"):
            yield fields


def debian_packages(root: Path) -> Iterator[Package]:
    """The Debian packages the image's dpkg database records as installed."""
    dpkg = root / "var" / "lib" / "dpkg"
    texts = [
        p.read_text(encoding="utf-8", errors="replace") for p in [dpkg / "status"] if p.is_file()
    ]
    status_d = dpkg / "status.d"
    if status_d.is_dir():
        texts += [
            p.read_text(encoding="utf-8", errors="replace") for p in sorted(status_d.iterdir())
        ]
    distro = _distro(root)
    for text in texts:
        for fields in _stanzas(text):
            if fields.get("Status", "install ok installed") != "install ok installed":
                continue
            name, version = fields["Package"], fields.get("Version", "")
            arch = fields.get("Architecture", "all")
            qualifiers = f"arch={arch}" + (f"&distro={distro}" if distro else "")
            yield Package("deb", name, version, f"pkg:deb/debian/{name}@{version}?{qualifiers}")


def _distro(root: Path) -> str:
    for candidate in (root / "etc" / "os-release", root / "usr" / "lib" / "os-release"):
        if candidate.is_file():
            fields = dict(
                line.split("=", 1)
                for line in candidate.read_text(encoding="utf-8").splitlines()
                if "=" in line
            )
            if fields.get("ID", "").strip('"') == "debian" and "VERSION_ID" in fields:
                return "debian-" + fields["VERSION_ID"].strip('"')
    return ""


def document(name: str, packages: list[Package]) -> dict[str, Any]:
    """The CycloneDX document for an image and its packages.

    Args:
        name: The image's reference, the document's subject.
        packages: Its components.

    Returns:
        The JSON-ready document.
    """
    components = []
    for package in sorted(set(packages)):
        component: dict[str, Any] = {
            "type": "library",
            "bom-ref": package.purl,
            "name": package.name,
            "version": package.version,
            "purl": package.purl,
        }
        if package.license:
            component["licenses"] = [{"expression": package.license}]
        components.append(component)
    digest = hashlib.sha256(json.dumps([name, components]).encode()).hexdigest()
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{uuid.UUID(digest[:32])}",
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "devcluster/sbom.py"}]},
            "component": {"type": "container", "bom-ref": name, "name": name},
        },
        "components": components,
    }


def locked(lock: Path) -> dict[str, str]:
    """The ``name==version`` pins of a requirements lock, by normalised name."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = _LOCK_PIN.match(line)
        if match:
            pins[normalise(match.group(1))] = match.group(2)
    return pins


def missing_from(sbom: dict[str, Any], pins: dict[str, str]) -> list[str]:
    """The locked ``name==version`` pins that the SBOM has no PyPI component for."""
    listed = {
        (c["name"], c["version"])
        for c in sbom["components"]
        if str(c.get("purl", "")).startswith("pkg:pypi/")
    }
    return [f"{n}=={v}" for n, v in sorted(pins.items()) if (normalise(n), v) not in listed]


def main(argv: list[str] | None = None) -> int:
    """Write the SBOM of an unpacked image; 1 when a locked package is not in it, 2 on misuse."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="the image's unpacked root file system")
    parser.add_argument("--name", required=True, help="the image's reference")
    parser.add_argument("--output", type=Path, required=True, help="where to write the JSON")
    parser.add_argument("--lock", type=Path, help="a requirements lock whose pins must be in it")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"sbom: {args.root}: not a directory", file=sys.stderr)
        return 2
    packages = [*python_packages(args.root), *debian_packages(args.root)]
    sbom = document(args.name, packages)
    partial = args.output.with_name(args.output.name + ".tmp")
    partial.write_text(json.dumps(sbom, indent=1) + "\n", encoding="utf-8")
    partial.replace(args.output)  # never a half-written SBOM beside the archive
    python = sum(p.ecosystem == "pypi" for p in packages)
    print(
        f"sbom: {args.output}: {python} Python and {len(packages) - python} Debian packages",
        file=sys.stderr,
    )
    if args.lock is not None:
        absent = missing_from(sbom, locked(args.lock))
        if absent:
            print(f"sbom: locked but not in the image: {', '.join(absent)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
