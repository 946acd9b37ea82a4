"""Fixtures for the tests on a real node (``devcluster.node``): marker ``node``.

``node`` starts one single-node cluster for the session: etcd, kube-apiserver, the controller
manager and scheduler, containerd with runc, the kubelet and kube-proxy in a network namespace
of their own, with the images ``scripts/build-image`` built. It needs root, the node's
binaries and Debian packages; without them the tests skip locally with the reason, and fail in
CI (``CI=true``), where a skipped node suite would hide everything it exists to prove.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster import BinaryMissing
from devcluster.node import Node
from devcluster.operator import Operator
from tests import summary
from tests.e2e import clusters
from tests.node import cluster


@pytest.fixture(scope="session")
def node(request: pytest.FixtureRequest) -> Iterator[Node]:
    """One real node (and its control plane) for the whole session."""
    started = cluster.start_node()
    summary.record(request.config, "devcluster", f"node started in {started.describe_timings()}")
    with started:
        yield started


@pytest.fixture(scope="session")
def node_operator(node: Node) -> Iterator[Operator]:
    """The real Training Operator v1.9.4 against the node's control plane."""
    try:
        op = Operator.start(node.control_plane)
    except BinaryMissing as e:
        clusters.binaries_missing(e)
        raise  # unreachable: binaries_missing always raises
    with op:
        yield op


def pytest_configure(config: pytest.Config) -> None:
    """Register ``scenario``: the chart test's scenario, set up with the others at once."""
    config.addinivalue_line(
        "markers",
        "scenario(name): the scenario of tests.node.scenarios this node test asserts on",
    )
