"""Any replica answers a gate: the standby forwards verdict requests to the leader
(artifactcheck/control/forward.py, docs/verdict-api.md "Two replicas").

Two real controllers on one fake API server; each serves its own HTTP server on
loopback. Where a test needs a leader that is gone or misbehaves, the Lease is held by
a "ghost" identity whose published address is a closed port, a raw socket that never
answers, or another standby: the states a kill -9, a hung process or a stale Lease
record leave behind.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from gate_support import Gate, GateCluster, started, valid

from artifactcheck.clients.kube import micro_time
from artifactcheck.control.api import MAX_CONCURRENT
from artifactcheck.control.forward import (
    ANSWERED_BY,
    FORWARDED_BY,
    format_address,
    parse_leader_address,
)
from artifactcheck.control.lease import LEADER_ADDRESS, LeaseRecord
from artifactcheck.model.names import LEASE_NAME
from artifactcheck_sim.cluster import wait_for

CHECK = "/verdicts/v1/namespaces/shop/artifactchecks/web"
CANARY_SELECTOR = "rollouts-pod-template-hash=7f4b"


def call(
    base: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One request: (status, JSON body, headers), whatever the status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path, data=data, method="GET" if data is None else "POST", headers=headers or {}
    )
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=70) as resp:  # noqa: S310 - loopback
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read()), dict(exc.headers)


def forwards(gate: Gate, outcome: str) -> float:
    """The standby's artifactcheck_verdict_api_forwards_total{outcome}."""
    value = gate.running.controller.metrics.registry.get_sample_value(
        "artifactcheck_verdict_api_forwards_total", {"outcome": outcome}
    )
    return value or 0.0


def lease_api(cluster: GateCluster) -> Any:
    from kubernetes.client import CoordinationV1Api

    return CoordinationV1Api(cluster.api.api_client())


def hold_lease(cluster: GateCluster, address: str | None, *, age: float = 0.0) -> None:
    """The Lease held by "ghost" (renewed ``age`` seconds ago, for an hour), which
    publishes ``address``: created, or rewritten when it exists."""
    api = lease_api(cluster)
    renewed = micro_time(datetime.now(UTC) - timedelta(seconds=age))
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": LEASE_NAME,
            "namespace": cluster.namespace,
            "annotations": {} if address is None else {LEADER_ADDRESS: address},
        },
        "spec": {
            "holderIdentity": "ghost",
            "leaseDurationSeconds": 3600 if age < 3600 else 1,
            "acquireTime": renewed,
            "renewTime": renewed,
        },
    }
    try:
        api.read_namespaced_lease(LEASE_NAME, cluster.namespace)
    except Exception:  # noqa: BLE001 - absent: create it
        api.create_namespaced_lease(cluster.namespace, body)
        return
    api.patch_namespaced_lease(LEASE_NAME, cluster.namespace, body)


def published(cluster: GateCluster) -> str | None:
    lease = lease_api(cluster).read_namespaced_lease(LEASE_NAME, cluster.namespace)
    annotations = lease.metadata.annotations or {}
    value: str | None = annotations.get(LEADER_ADDRESS)
    return value


class Listener:
    """A raw TCP socket on loopback that accepts, records what it was sent, and never
    answers: a leader whose process hangs."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.connections = 0
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self._held.append(conn)
            conn.settimeout(5)
            try:
                self.received.append(conn.recv(65536))
            except OSError:
                self.received.append(b"")

    def close(self) -> None:
        self.sock.close()
        for conn in self._held:
            conn.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    lis = Listener()
    yield lis
    lis.close()


def closed_port() -> int:
    """A loopback port nobody listens on any more (connections are refused): the
    port of a leader killed with -9."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        port: int = s.getsockname()[1]
    return port


def test_standby_answers_with_the_leaders_status_and_body(cluster: GateCluster, gate: Gate) -> None:
    cluster.add_stable(2)
    cluster.add_canary(1, serves="1.4.1")  # the canary serves the stable bytes: failed
    cluster.add_check()
    gate.settled(CHECK)
    # The leader publishes the address of the server it serves /metrics on (at its
    # next renewal: this test started the server after the controller).
    wait_for(lambda: published(cluster) == f"127.0.0.1:{gate.server.port}", timeout=10)
    with started(cluster, identity="ctl-b", lead=False) as standby:
        wait_for(lambda: standby.running.controller.leader() is not None, timeout=10)
        assert not standby.running.controller.is_leader
        for path in (CHECK, CHECK + "?selector=" + CANARY_SELECTOR):
            direct = call(gate.base, path)
            via = call(standby.base, path)
            assert via[:2] == direct[:2], path
            assert via[2][ANSWERED_BY] == direct[2][ANSWERED_BY] == "ctl-a"
        assert direct[0] == 200 and valid(direct[1])["result"] == "failed"
        # A request that is wrong: the standby says so itself, as the leader would.
        direct = call(gate.base, CHECK + "?selector=a%20b")
        via = call(standby.base, CHECK + "?selector=a%20b")
        assert via[:2] == direct[:2] and via[0] == 400
        assert (via[2][ANSWERED_BY], direct[2][ANSWERED_BY]) == ("ctl-b", "ctl-a")
        # An unknown check: the leader's 404, not the standby's own.
        path = "/verdicts/v1/namespaces/shop/artifactchecks/nope"
        status, doc, headers = call(standby.base, path)
        assert (status, valid(doc)["reason"], headers[ANSWERED_BY]) == (
            404,
            "CheckNotFound",
            "ctl-a",
        )
        # Flagger's webhook, not fresh: the leader's 412 and document.
        hook = {
            "name": "web",
            "namespace": "shop",
            "phase": "pre-rollout",
            "metadata": {"check": "web", "selector": CANARY_SELECTOR, "fresh": "false"},
        }
        direct = call(gate.base, "/verdicts/v1/flagger", body=hook)
        via = call(standby.base, "/verdicts/v1/flagger", body=hook)
        assert via[:2] == direct[:2] and via[0] == 412
        assert valid(via[1])["result"] == "failed"
        # A fresh check through the standby: the leader checks the pods again.
        status, doc, headers = call(standby.base, CHECK + "?fresh=true&timeout=20s")
        assert (status, valid(doc)["fresh"], headers[ANSWERED_BY]) == (200, True, "ctl-a")
        assert forwards(standby, "forwarded") == 5  # 2 GETs, the 404, the hook, the fresh
        assert forwards(gate, "forwarded") == 0  # the leader forwards nothing


def test_a_forwarded_request_is_never_forwarded_again(
    cluster: GateCluster, listener: Listener
) -> None:
    """A stale Lease record names a replica that is a standby too: it answers from its
    own memory (503 NotLeader), it does not forward the request on."""
    cluster.add_canary(1)
    cluster.add_check()
    hold_lease(cluster, f"127.0.0.1:{listener.port}")
    with (
        started(cluster, identity="ctl-a", lead=False) as a,
        started(cluster, identity="ctl-b", lead=False) as b,
    ):
        hold_lease(cluster, f"127.0.0.1:{b.server.port}")
        for ctl in (a, b):
            wait_for(lambda c=ctl: "shop/web" in c.running.controller.checks, timeout=10)
            wait_for(
                lambda c=ctl: (
                    (c.running.controller.leader() or None)
                    and c.running.controller.leader().port == b.server.port
                ),  # type: ignore[union-attr]
                timeout=10,
            )
        status, doc, headers = call(a.base, CHECK)
        assert (status, valid(doc)["reason"], headers[ANSWERED_BY]) == (503, "NotLeader", "ctl-b")
        assert headers["Retry-After"] == "1"
        assert forwards(a, "forwarded") == 1
        assert forwards(b, "forwarded") + forwards(b, "leader_unreachable") == 0
        # A client that sets the header itself gets the replica's own answer.
        status, doc, headers = call(b.base, CHECK, headers={FORWARDED_BY: "someone"})
        assert (status, doc["reason"], headers[ANSWERED_BY]) == (503, "NotLeader", "ctl-b")
        assert forwards(b, "forwarded") == 0
    assert listener.connections == 0


def test_dead_leader_is_a_fast_503(cluster: GateCluster) -> None:
    """The Lease still names a leader whose port refuses connections (kill -9): the
    standby answers 503 LeaderUnreachable at the first refusal, long before the lease
    could expire (an hour), and tries exactly once."""
    cluster.add_canary(1)
    cluster.add_check()
    port = closed_port()
    hold_lease(cluster, f"127.0.0.1:{port}")
    with started(cluster, identity="ctl-b", lead=False) as standby:
        wait_for(lambda: standby.running.controller.leader() is not None, timeout=10)
        status, doc, headers = call(standby.base, CHECK + "?fresh=true&timeout=30s")
        assert (status, valid(doc)["reason"]) == (503, "LeaderUnreachable"), doc
        assert "ghost" in doc["message"] and f"127.0.0.1:{port}" in doc["message"]
        assert headers["Retry-After"] == "1" and headers[ANSWERED_BY] == "ctl-b"
        assert forwards(standby, "leader_unreachable") == 1
        assert forwards(standby, "forwarded") == 0
        assert not standby.running.controller.is_leader  # no take-over happened meanwhile


def test_hung_leader_is_bounded_by_the_requests_own_timeout(
    cluster: GateCluster, listener: Listener
) -> None:
    """A leader that accepts and never answers: the standby sends the request once,
    marked as forwarded, and gives up after the leader's own bound (503)."""
    cluster.add_canary(1)
    cluster.add_check()
    hold_lease(cluster, f"127.0.0.1:{listener.port}")
    with started(cluster, identity="ctl-b", lead=False) as standby:
        wait_for(lambda: standby.running.controller.leader() is not None, timeout=10)
        status, doc, _ = call(standby.base, CHECK + "?selector=" + CANARY_SELECTOR)
        assert (status, valid(doc)["reason"]) == (503, "LeaderUnreachable")
        assert "timed out" in doc["message"]
    assert listener.connections == 1
    sent = listener.received[0].decode()
    assert sent.startswith(f"GET {CHECK}?selector={CANARY_SELECTOR} HTTP/1.1\r\n")
    assert f"\r\n{FORWARDED_BY}: ctl-b\r\n" in sent


@pytest.mark.parametrize(
    "address", [None, "http://127.0.0.1:{port}/", "127.0.0.1", "127.0.0.1:99999"]
)
def test_leader_without_a_usable_address_is_a_503_without_a_connection(
    cluster: GateCluster, listener: Listener, address: str | None
) -> None:
    cluster.add_canary(1)
    cluster.add_check()
    hold_lease(cluster, address and address.format(port=listener.port))
    with started(cluster, identity="ctl-b", lead=False) as standby:
        ctl = standby.running.controller
        wait_for(lambda: ctl.lock.observed and ctl.lock.observed.holder == "ghost", timeout=10)
        status, doc, _ = call(standby.base, CHECK)
        assert (status, valid(doc)["reason"]) == (503, "LeaderUnknown")
        assert forwards(standby, "leader_unknown") == 1
    assert listener.connections == 0


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("holder", "renewed", "address", "expected"),
    [
        ("ghost", NOW - timedelta(seconds=14), "10.0.0.7:8080", "10.0.0.7:8080"),
        ("ghost", NOW - timedelta(seconds=15), "10.0.0.7:8080", None),  # expired at 15 s
        ("ghost", None, "10.0.0.7:8080", None),  # never renewed
        ("me", NOW, "10.0.0.7:8080", None),  # this replica leads: never to itself
        (None, NOW, "10.0.0.7:8080", None),  # released
        ("ghost", NOW, None, None),  # no address published
    ],
)
def test_who_a_standby_forwards_to(
    holder: str | None, renewed: datetime | None, address: str | None, expected: str | None
) -> None:
    record = LeaseRecord(holder=holder, address=address, renewed=renewed, duration=15)
    assert record.other_leader("me", NOW) == expected


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("10.0.0.7:8080", ("10.0.0.7", 8080)),
        ("[fd00::7]:8080", ("fd00::7", 8080)),
        ("pod.example:80", ("pod.example", 80)),
        ("10.0.0.7", None),
        ("10.0.0.7:0", None),
        ("10.0.0.7:65536", None),
        ("http://10.0.0.7:8080", None),
        ("a@b:80", None),
        (":80", None),
    ],
)
def test_published_addresses(text: str, parsed: tuple[str, int] | None) -> None:
    assert parse_leader_address(text) == parsed
    if parsed is not None:
        assert parse_leader_address(format_address(*parsed)) == parsed


def test_the_address_leaves_with_the_leader(cluster: GateCluster) -> None:
    """A leader that hands over at shutdown removes its address with its identity: a
    standby never forwards to a replica that let go."""
    cluster.add_canary(1)
    cluster.add_check()
    with started(cluster, identity="ctl-a") as leader:
        wait_for(lambda: published(cluster) == f"127.0.0.1:{leader.server.port}", timeout=10)
    lease = lease_api(cluster).read_namespaced_lease(LEASE_NAME, cluster.namespace)
    assert lease.spec.holder_identity is None
    assert published(cluster) is None


def test_a_slow_leader_never_blocks_the_standbys_own_probes(
    cluster: GateCluster, listener: Listener
) -> None:
    """Fifty gates ask a standby whose leader accepts and never answers: at most
    MAX_CONCURRENT forwards wait on the leader at once (the rest are answered 429 at
    once), and meanwhile the standby's /healthz, /readyz and /metrics answer within 1 s."""
    cluster.add_canary(1)
    cluster.add_check()
    hold_lease(cluster, f"127.0.0.1:{listener.port}")
    with started(cluster, identity="ctl-b", lead=False) as standby:
        wait_for(lambda: standby.running.controller.leader() is not None, timeout=10)
        wait_for(lambda: standby.running.controller.synced, timeout=10)
        answers: list[tuple[int, str, float]] = []

        def gate() -> None:
            t0 = time.monotonic()
            status, doc, _ = call(standby.base, CHECK)
            answers.append((status, doc["reason"], time.monotonic() - t0))

        gates = [threading.Thread(target=gate) for _ in range(50)]
        for t in gates:
            t.start()
        wait_for(lambda: listener.connections >= MAX_CONCURRENT, timeout=10)
        slowest = 0.0
        for _ in range(10):  # while the forwards hang (the leader's bound: 6 s)
            for path in ("/healthz", "/readyz", "/metrics"):
                t0 = time.monotonic()
                with urllib.request.urlopen(standby.base + path, timeout=5) as resp:  # noqa: S310
                    assert resp.status == 200
                slowest = max(slowest, time.monotonic() - t0)
            time.sleep(0.1)
        for t in gates:
            t.join(timeout=30)
    assert slowest < 1.0, slowest
    assert listener.connections == MAX_CONCURRENT
    refused = [seconds for status, _, seconds in answers if status == 429]
    assert len(refused) == 50 - MAX_CONCURRENT and max(refused) < 1.0
    waited = [(status, reason) for status, reason, _ in answers if status != 429]
    assert waited == [(503, "LeaderUnreachable")] * MAX_CONCURRENT
