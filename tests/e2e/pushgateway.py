"""A real Prometheus Pushgateway on 127.0.0.1 for the metrics tests (Debian's package).

``scripts/test`` installs it when it runs as root; otherwise the tests skip locally and fail in
CI, as the other e2e binaries do.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from prometheus_client.parser import text_string_to_metric_families

NAMES = ("prometheus-pushgateway", "pushgateway")


def require(*names: str) -> str:
    """The path of the first binary found, or skip (locally) / fail (``CI=true``)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    reason = f"{' or '.join(names)} not found (Debian: apt-get install {names[0]})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"metrics tests must run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running() -> Iterator[str]:
    """Start a Pushgateway without persistence; yield its URL; stop it."""
    binary = require(*NAMES)
    url = f"http://127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [binary, f"--web.listen-address={url.removeprefix('http://')}", "--persistence.file="],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:  # noqa: S310
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                if process.poll() is not None or time.monotonic() > until:
                    process.kill()
                    _, err = process.communicate(timeout=10)
                    raise RuntimeError(f"pushgateway did not start: {err[-2000:]}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.communicate(timeout=10)  # reaps it and closes the pipe


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Read every sample the Pushgateway exposes, by (name, sorted labels)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as answer:  # noqa: S310
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
