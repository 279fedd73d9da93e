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


def _cluster() -> GateCluster:
    """A cluster on loopback addresses no other test of the session uses."""
    n = next(_net)
    return GateCluster(
        first_host=f"127.71.{n}.1",
        cdn_host=f"127.71.{200 + n}.1",
        release_host=f"127.71.{100 + n}.1",
    )


@pytest.fixture
def cluster() -> Iterator[GateCluster]:
    with _cluster() as c:
        yield c


@pytest.fixture
def gate(cluster: GateCluster) -> Iterator[Gate]:
    """The controller running against ``cluster`` (add pods and checks before or after)."""
    with started(cluster) as running:
        yield running


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[GateCluster]:
    """One cluster for a module's tests that change nothing in it.

    Requests that are refused (a bad payload, a bad path, a wrong method, a line too
    long) leave the cluster and the controller as they were; starting both for each of
    them cost about a second a case. A module sets it up once (pods and a check) in a
    fixture of its own built on this one and :func:`shared_gate`.
    """
    with pytest.MonkeyPatch.context() as env:
        env.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        env.delenv("KUBERNETES_SERVICE_PORT", raising=False)
        with _cluster() as c:
            yield c


@pytest.fixture(scope="module")
def shared_gate(shared_cluster: GateCluster) -> Iterator[Gate]:
    """The controller running against :func:`shared_cluster`."""
    with started(shared_cluster) as running:
        yield running
