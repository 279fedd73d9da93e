"""Fixtures of the gate tests: a GateCluster and the real controller on it
(gate_support.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from gate_support import Gate, GateCluster, started

_net = itertools.count(1)


@pytest.fixture(autouse=True)
def _no_in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


@pytest.fixture
def cluster() -> Iterator[GateCluster]:
    n = next(_net)
    with GateCluster(
        first_host=f"127.71.{n}.1",
        cdn_host=f"127.71.{200 + n}.1",
        release_host=f"127.71.{100 + n}.1",
    ) as c:
        yield c


@pytest.fixture
def gate(cluster: GateCluster) -> Iterator[Gate]:
    """The controller running against ``cluster`` (add pods and checks before or after)."""
    with started(cluster) as running:
        yield running
