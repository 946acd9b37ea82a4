"""Unit-test isolation: the CLI configures logging globally; every test starts from scratch.

freezegun patches ``datetime`` in every loaded module when a test freezes time; the Kubernetes
client (loaded by the tests that go through ``sweeper.k8s.kube``) builds pydantic models lazily and
must not see a fake ``datetime`` class, so freezegun leaves it alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import freezegun
import pytest

from sweeper.logs import LOGGER

freezegun.configure(extend_ignore_list=["kubernetes", "pydantic", "pydantic_core", "urllib3"])


@pytest.fixture(autouse=True)
def _fresh_sweeper_logger() -> Iterator[None]:
    yield
    logger = logging.getLogger(LOGGER)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.propagate = True
    logger.setLevel(logging.NOTSET)
