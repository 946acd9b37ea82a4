"""The real Training Operator v1.9.4 CRD schemas, as a validator of the status the sweeper writes.

The CRDs are the operator's own, copied from its Go module into the binary cache by
``scripts/build-binaries`` (found through ``devcluster.operator_crds``, like the e2e tests
do). The ``status`` part of each kind's ``openAPIV3Schema`` is checked the way kube-apiserver
checks a structural schema on a ``/status`` write:

- ``jsonschema`` for types, ``required`` and formats, with ``date-time`` checked as the
  apiserver does (RFC 3339, a time zone required) and the int32/int64 ranges;
- ``unknown_fields``: fields the schema does not declare would not be rejected but silently
  pruned by the apiserver, so the written status would not be what the sweeper meant.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jsonschema
import yaml

from devcluster import operator_crds

_RFC3339 = re.compile(
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)"
    r"(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$"
)
_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("date-time")
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or bool(_RFC3339.match(value))


@_FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


# Served up to operator v1.8.x only, so the pinned v1.9.4 has no CRD for it. Its status is the
# same Go type as every kind's (JobStatus, pkg/apis/kubeflow.org/v1/common_types.go at v1.8.1),
# so PyTorchJob's schema stands in; the e2e tests write it to the real v1.8.1 CRD.
_STAND_INS = {"MXJob": "PyTorchJob"}


@functools.cache
def _crds() -> dict[str, dict[str, Any]]:
    """Every real CRD by its kind, each file parsed once (they are large)."""
    crds = (
        yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        for path in operator_crds.crd_files()
    )
    return {crd["spec"]["names"]["kind"]: crd for crd in crds}


@functools.cache
def status_schema(kind: str) -> dict[str, Any]:
    """The ``status`` schema of ``kind`` at ``kubeflow.org/v1`` from its real CRD."""
    kind = _STAND_INS.get(kind, kind)
    crd = _crds().get(kind)
    if crd is None:
        raise LookupError(f"no CRD for kind {kind}")
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    return schema


def validation_errors(kind: str, status: dict[str, Any]) -> list[str]:
    """Why the apiserver would reject ``status`` for ``kind`` (empty when it would accept it)."""
    validator = jsonschema.Draft7Validator(status_schema(kind), format_checker=_FORMATS)
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '<status>'}: {e.message}"
        for e in validator.iter_errors(status)
    ]


def unknown_fields(kind: str, document: Any) -> list[str]:
    """Paths in ``document`` the ``status`` schema does not declare (the apiserver prunes them)."""
    found: list[str] = []
    _walk(status_schema(kind), document, "status", found)
    return found


def _walk(schema: dict[str, Any], value: Any, path: str, found: list[str]) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            if properties is not None and key in properties:
                _walk(properties[key], child, f"{path}.{key}", found)
            elif isinstance(additional, dict):
                _walk(additional, child, f"{path}.{key}", found)
            else:
                found.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{index}]", found)
