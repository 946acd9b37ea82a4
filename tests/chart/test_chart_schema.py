"""values.schema.json: a mistyped or out-of-range value fails at install time, naming the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "chart"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        # Mistyped keys.
        pytest.param({"dryrun": True}, "properties 'dryrun' not allowed", id="key-dryrun"),
        pytest.param({"namespace": ["a"]}, "properties 'namespace' not allowed", id="key-ns"),
        pytest.param({"image": {"tags": "1"}}, "properties 'tags' not allowed", id="key-nested"),
        pytest.param({"resources": {"limit": {}}}, "properties 'limit' not allowed", id="key-deep"),
        # Enums.
        pytest.param({"action": "delete"}, "at '/action': value must be one of", id="enum-action"),
        pytest.param({"terminatePods": "running"}, "at '/terminatePods'", id="enum-terminate-pods"),
        pytest.param({"dryRun": "yes"}, "at '/dryRun'", id="enum-dry-run"),
        pytest.param({"kinds": ["JobSet"]}, "at '/kinds/0'", id="enum-kind"),
        pytest.param({"families": ["kueue"]}, "at '/families/0'", id="enum-family"),
        pytest.param({"families": []}, "families", id="no-family"),
        pytest.param(
            {"operatorVersion": "v1.9.5"}, "at '/operatorVersion'", id="operator-version-unknown"
        ),
        pytest.param(
            {"operatorVersion": "1.9.4"}, "at '/operatorVersion'", id="operator-version-without-v"
        ),
        pytest.param({"logFormat": "yaml"}, "at '/logFormat'", id="enum-log-format"),
        pytest.param({"output": "yaml"}, "at '/output'", id="enum-output"),
        pytest.param({"image": {"pullPolicy": "always"}}, "at '/image/pullPolicy'", id="enum-pull"),
        # Numbers out of bounds or of the wrong type.
        pytest.param({"intervalSeconds": 45}, "at '/intervalSeconds'", id="interval-45"),
        pytest.param({"intervalSeconds": 5}, "at '/intervalSeconds'", id="interval-5"),
        pytest.param({"intervalSeconds": "60"}, "at '/intervalSeconds'", id="interval-string"),
        pytest.param({"grace": -1}, "at '/grace'", id="grace-negative"),
        pytest.param({"escalateAfter": 1.5}, "at '/escalateAfter'", id="escalate-fraction"),
        pytest.param({"retouchAfter": 0}, "at '/retouchAfter'", id="retouch-after-zero"),
        pytest.param({"retouchLimit": -1}, "at '/retouchLimit'", id="retouch-limit-negative"),
        pytest.param({"maxActions": 0}, "at '/maxActions'", id="max-actions-zero"),
        pytest.param({"backoffLimit": 10}, "at '/backoffLimit'", id="backoff-limit-high"),
        pytest.param({"startingDeadlineSeconds": 5}, "'/startingDeadlineSeconds'", id="sds-low"),
        pytest.param({"ttlSecondsAfterFinished": 0}, "'/ttlSecondsAfterFinished'", id="ttl-zero"),
        pytest.param({"runAsUser": 0}, "at '/runAsUser'", id="root-user"),
        # Shapes.
        pytest.param({"namespaces": "team-a"}, "at '/namespaces'", id="namespaces-string"),
        pytest.param({"namespaces": ["Team_A"]}, "at '/namespaces/0'", id="namespace-invalid"),
        pytest.param({"namespaces": ["a", "a"]}, "at '/namespaces'", id="namespace-twice"),
        pytest.param({"extraArgs": [""]}, "at '/extraArgs/0'", id="extra-arg-empty"),
        pytest.param({"image": {"digest": "abc"}}, "at '/image/digest'", id="digest-malformed"),
        pytest.param({"podLabels": {"team": 1}}, "at '/podLabels/team'", id="label-not-string"),
    ],
)
def test_schema_refuses(render_error, values, message):
    error = render_error(values)

    assert "values don't meet the specifications of the schema" in error
    assert message in error


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param({"dryRun": True, "action": "auto", "maxActions": 5}, id="try-it-first"),
        pytest.param({"dryRun": "server", "grace": 300, "escalateAfter": 600}, id="server-dry-run"),
        pytest.param({"maxActions": None, "startingDeadlineSeconds": None}, id="explicit-nulls"),
        pytest.param(
            {"image": {"repository": "r.example/s", "tag": "1", "digest": "sha256:" + "a" * 64}},
            id="digest",
        ),
        pytest.param({"resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}, id="resources"),
        pytest.param({"extraArgs": ["--clock=local", "--page-size=100"]}, id="extra-args"),
        pytest.param({"extraArgs": ["--clock", "local"]}, id="extra-args-flag-then-value"),
    ],
)
def test_schema_accepts(render, values):
    assert render(values).cronjob


def _schema_keys(schema: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for name, sub in schema.get("properties", {}).items():
        if sub.get("additionalProperties") is False and "properties" in sub and name != "resources":
            keys |= _schema_keys(sub, f"{prefix}{name}.")
        else:
            keys.add(prefix + name)
    return keys


def _value_keys(values: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for name, value in values.items():
        sub = schema["properties"].get(name, {})
        if isinstance(value, dict) and "properties" in sub and name != "resources":
            keys |= _value_keys(value, sub, f"{prefix}{name}.")
        else:
            keys.add(prefix + name)
    return keys


def test_schema_and_values_yaml_describe_the_same_keys():
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    assert schema["additionalProperties"] is False
    assert _value_keys(values, schema) == _schema_keys(schema) - {"global"}


def test_chart_readme_documents_every_value():
    schema = json.loads((CHART / "values.schema.json").read_text())
    readme = (CHART / "README.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`")
        for line in readme.splitlines()
        if line.startswith("| `")
    }

    assert rows == _schema_keys(schema) - {"global"}
