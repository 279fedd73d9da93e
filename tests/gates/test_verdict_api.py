"""The verdict API on the real controller's HTTP server (docs/verdict-api.md).

Every answer, verdicts and errors alike, is validated against
docs/verdict-api.schema.json.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from gate_support import CANARY, STABLE, Gate, GateCluster, raw, request, started, valid

from artifactcheck.control.api import MAX_CONCURRENT, VerdictApi
from artifactcheck.control.health import HEAD_DEADLINE, MAX_CONNECTIONS, HealthServer
from artifactcheck.judge.decide import History
from artifactcheck.model.selectors import LabelSelector, SelectorError
from artifactcheck.model.values import Instance, Report
from artifactcheck_sim.cluster import wait_for

CHECK = "/verdicts/v1/namespaces/shop/artifactchecks/web"


def get(gate: Gate, path: str) -> tuple[int, dict[str, Any]]:
    status, doc = gate.get(path)
    return status, valid(doc)


@pytest.fixture(scope="module")
def refusing(shared_cluster: GateCluster, shared_gate: Gate) -> Gate:
    """A checked canary on the module's shared controller, for the tests whose requests
    are refused: they change nothing, so one controller serves them all."""
    shared_cluster.add_canary(1)
    shared_cluster.add_check()
    shared_gate.settled(CHECK)
    return shared_gate


def test_whole_check_counts_versions_and_quarantine(cluster: GateCluster, gate: Gate) -> None:
    stable = cluster.add_stable(4)
    bad = cluster.add_pod(
        version=STABLE,
        replicaset="web-6c9d",
        serves=CANARY,
        labels={"rollouts-pod-template-hash": "6c9d"},
    ).name
    canary = cluster.add_canary(2)
    cluster.add_check(interval=0.5, policy={"mode": "quarantine", "confirmations": 1})
    doc = wait_for(lambda: (d := gate.settled(CHECK))["quarantined"] and d, timeout=30)
    valid(doc)
    assert doc["result"] == "failed" and doc["selector"] is None
    assert doc["quarantined"] == [f"shop/{bad}"]
    assert doc["pods"] == {"selected": 7, "total": 7}
    assert doc["counts"]["consistent"] == 6 and doc["counts"]["mismatch"] == 1
    versions = {v["version"]: v for v in doc["versions"]}
    assert versions[STABLE]["pods"] == 5 and versions[STABLE]["counts"] == {
        "consistent": 4,
        "mismatch": 1,
    }
    assert versions[CANARY] == {"version": CANARY, "pods": 2, "counts": {"consistent": 2}}
    assert doc["expectationSuspect"] is False
    assert doc["lastCheckTime"] >= doc["cycleStartTime"]
    names = {i["name"] for i in doc["instances"]}
    assert names == {f"shop/{n}" for n in [*stable, *canary, bad]}
    # the stable ReplicaSet's own answer fails; the canary's passes
    status, doc = get(gate, CHECK + "?selector=rollouts-pod-template-hash=6c9d")
    assert (status, doc["result"]) == (200, "failed")
    status, doc = get(gate, CHECK + "?selector=rollouts-pod-template-hash=7f4b")
    assert (status, doc["result"], doc["pods"]["selected"]) == (200, "passed", 2)


def test_selector_grammar_picks_pods(cluster: GateCluster, gate: Gate) -> None:
    cluster.add_stable(2)
    cluster.add_canary(1)
    cluster.add_check()
    gate.settled(CHECK)
    for selector, n in [
        ("rollouts-pod-template-hash in (6c9d, 7f4b)", 3),
        ("rollouts-pod-template-hash notin (6c9d)", 1),
        ("rollouts-pod-template-hash!=6c9d,app=web", 1),
        ("app.kubernetes.io/version==1.4.1", 2),
        ("!rollouts-pod-template-hash", 0),
        ("rollouts-pod-template-hash", 3),
    ]:
        status, doc = get(gate, CHECK + "?selector=" + selector.replace(" ", "%20"))
        assert (status, doc["pods"]["selected"]) == (200, n), selector
    status, doc = get(gate, CHECK + "?selector=app=nobody")
    assert (doc["result"], doc["reason"]) == (
        "inconclusive",
        "no ready pod of the check matches the selector",
    )


def test_held_out_of_traffic_when_verification_is_impossible(
    cluster: GateCluster, gate: Gate
) -> None:
    """The release source is down from the start and the gate must not fail open: the
    gated pods stay out of traffic, and the verdict says nobody can tell."""
    cluster.release_source_down()
    pods = cluster.add_canary(2)
    cluster.add_check(knownVersions=[], policy={"gateFailOpen": False})
    doc = valid(gate.settled(CHECK))
    assert doc["result"] == "inconclusive"
    assert sorted(doc["heldOutOfTraffic"]) == sorted(f"shop/{n}" for n in pods)
    assert all(i["heldOutOfTraffic"] and not i["verified"] for i in doc["instances"])


def test_suspect_expectation_is_reported_and_fails(cluster: GateCluster, gate: Gate) -> None:
    cluster.add_pod(version=CANARY, replicaset="web-7f4b")
    for _ in range(3):
        cluster.add_pod(version=CANARY, replicaset="web-7f4b", serves=STABLE)
    cluster.add_check()
    doc = valid(gate.settled(CHECK))
    assert doc["expectationSuspect"] is True
    assert doc["result"] == "failed"


def test_fresh_check_observes_the_pods_again(cluster: GateCluster, gate: Gate) -> None:
    """A pod that drifts after its last check: only a fresh check sees it."""
    (pod,) = cluster.add_canary(1)
    cluster.add_check(interval=3600)
    assert gate.settled(CHECK)["result"] == "passed"
    cluster.pods[pod].site.overrides.update({"assets/index-DbDROF-m.js": b"console.log('rebuilt')"})
    status, doc = get(gate, CHECK)
    assert (status, doc["result"], doc["fresh"]) == (200, "passed", False)  # last cycle's
    status, doc = get(gate, CHECK + "?fresh=true&timeout=20s")
    assert (status, doc["result"], doc["fresh"]) == (200, "failed", True)


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        (CHECK + "?selector=app%20in%20(web", 400, "BadSelector"),
        (CHECK + "?selector=-bad-=x", 400, "BadSelector"),
        (CHECK + "?selector=" + "a%3D1," * 300 + "b", 400, "BadSelector"),  # > 1,024 characters
        (CHECK + "?fresh=maybe", 400, "BadParameter"),
        (CHECK + "?fresh=true&timeout=soon", 400, "BadTimeout"),
        # no URL or host is ever taken from the request
        (CHECK + "?url=http://169.254.169.254/", 400, "BadQuery"),
        (CHECK + "?host=evil.example", 400, "BadQuery"),
        ("/verdicts/v1/namespaces/shop/artifactchecks/nope", 404, "CheckNotFound"),
        ("/verdicts/v1/namespaces/Shop_/artifactchecks/web", 400, "BadName"),
        ("/verdicts/v1/namespaces/shop/checks/web", 404, "NotFound"),
        ("/verdicts/v1/", 404, "NotFound"),
        ("/nothing", 404, "NotFound"),
    ],
)
def test_errors_are_json_with_a_reason(refusing: Gate, path: str, status: int, reason: str) -> None:
    got, doc = get(refusing, path)
    assert (got, doc["reason"]) == (status, reason), doc


def test_methods(refusing: Gate) -> None:
    status, doc = request("POST", refusing.base + CHECK, b"{}")
    assert (status, valid(doc)["reason"]) == (405, "MethodNotAllowed")
    status, doc = request("DELETE", refusing.base + CHECK)
    assert (status, valid(doc)["reason"]) == (501, "NotImplemented")


def test_standby_answers_with_the_leaders_verdicts(cluster: GateCluster, gate: Gate) -> None:
    """The standby forwards to the leader (tests/gates/test_forwarding.py)."""
    cluster.add_canary(1)
    cluster.add_check()
    gate.settled(CHECK)
    with started(cluster, identity="ctl-b", lead=False) as standby:
        wait_for(lambda: "shop/web" in standby.running.controller.checks, timeout=10)
        assert not standby.running.controller.is_leader
        status, doc = wait_for(lambda: (r := get(standby, CHECK))[0] == 200 and r, timeout=10)
        assert (status, doc["result"]) == (200, "passed")
        status, doc = get(standby, "/verdicts/v1/namespaces/shop/artifactchecks/nope")
        assert (status, doc["reason"]) == (404, "CheckNotFound")


def test_wait_for_a_fresh_check_is_bounded(cluster: GateCluster) -> None:
    """The namespace's request budget is spent: the fresh check waits for it, and the
    request gives up at its timeout (504), while probes still answer."""
    cluster.add_canary(2)
    cluster.add_check()
    with started(cluster, requests_per_minute=1) as gate:
        gate.settled(CHECK)
        t0 = time.monotonic()
        status, doc = get(gate, CHECK + "?fresh=true&timeout=1.5s")
        assert (status, doc["reason"]) == (504, "WaitTimedOut")
        # at its timeout, not when the budget refills (a minute at 1 per minute)
        assert 1.4 < time.monotonic() - t0 < 30
        # a timeout above the cap is cut to it, not refused
        assert get(gate, CHECK + "?fresh=false&timeout=1h")[0] == 200


def test_concurrent_requests_are_bounded_and_probes_keep_room(cluster: GateCluster) -> None:
    cluster.add_canary(1)
    cluster.add_check()
    with started(cluster, requests_per_minute=1) as gate:
        gate.settled(CHECK)
        api = gate.server.api
        assert isinstance(api, VerdictApi)
        answers: list[int] = []
        waiting = [
            threading.Thread(
                target=lambda: answers.append(gate.get(CHECK + "?fresh=true&timeout=4s")[0])
            )
            for _ in range(MAX_CONCURRENT)
        ]
        for t in waiting:
            t.start()
        wait_for(lambda: api._slots._value == 0, timeout=10)
        status, doc = get(gate, CHECK)
        assert (status, doc["reason"]) == (429, "TooManyRequests")
        assert raw(gate.server.port, b"GET /healthz HTTP/1.0\r\n\r\n").startswith("HTTP/1.0 200")
        for t in waiting:
            t.join(timeout=20)
        assert answers == [504] * MAX_CONCURRENT
        assert get(gate, CHECK)[0] == 200


def _hold_the_limit(port: int, server: HealthServer) -> list[socket.socket] | None:
    """``MAX_CONNECTIONS`` idle connections the server holds at once, or None when it
    took so long to accept them (a loaded machine) that the first could reach their head
    deadline before the last is in: the scenario below needs all of them held together.

    The sockets' own timeout is well past the head deadline: the 408 may come late under
    load, and the bound asserted is the test's, not the socket's."""
    idle = [
        socket.create_connection(("127.0.0.1", port), timeout=HEAD_DEADLINE + 10)
        for _ in range(MAX_CONNECTIONS)
    ]
    try:
        wait_for(lambda: server.connections == MAX_CONNECTIONS, timeout=HEAD_DEADLINE / 2)
    except TimeoutError:
        for s in idle:
            s.close()
        wait_for(lambda: server.connections == 0, timeout=HEAD_DEADLINE + 15)
        return None
    return idle


def test_connections_are_bounded_and_the_slowest_make_room(refusing: Gate) -> None:
    """Clients that connect and say nothing hold a connection each, up to the limit;
    the next one closes the oldest of them (it is still sending its head), so a probe
    that sends its request at once is answered; the idle ones are closed at the head
    deadline with a 408."""
    port = refusing.server.port
    for _ in range(3):
        idle = _hold_the_limit(port, refusing.server)
        if idle is not None:
            break
    else:
        pytest.fail(f"the server never held {MAX_CONNECTIONS} connections at once")
    try:
        assert raw(port, b"GET /healthz HTTP/1.0\r\n\r\n").startswith("HTTP/1.0 200")
        assert idle[0].recv(1024) == b""  # the oldest was closed to make room, unanswered
        t0 = time.monotonic()
        answer = idle[-1].recv(4096).decode()
        assert answer.startswith("HTTP/1.0 408") and "RequestTimeout" in answer
        assert time.monotonic() - t0 <= HEAD_DEADLINE + 1
    finally:
        for s in idle:
            s.close()
    wait_for(lambda: refusing.server.connections == 0, timeout=15)


def test_a_trickled_head_is_cut_at_its_deadline(refusing: Gate) -> None:
    """One header byte a second keeps every read short, but not the whole head: the
    connection is answered 408 at the head deadline, not after the client's last byte."""
    head = b"GET /healthz HTTP/1.1\r\nX-Slow: " + b"a" * 100
    with socket.create_connection(("127.0.0.1", refusing.server.port), timeout=0.5) as s:
        t0 = time.monotonic()
        answer = b""
        for byte in head:
            try:
                s.sendall(bytes([byte]))
                answer = s.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if answer:
                break
        held = time.monotonic() - t0
    assert answer.startswith(b"HTTP/1.0 408"), answer
    assert HEAD_DEADLINE - 0.5 <= held <= HEAD_DEADLINE + 1


def test_request_line_and_headers_are_bounded(refusing: Gate) -> None:
    long_line = b"GET " + CHECK.encode() + b"?selector=" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n"
    answer = raw(refusing.server.port, long_line)
    assert answer.startswith("HTTP/1.0 414") and '"reason": "RequestLineTooLong"' in answer
    headers = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 1000) for i in range(20))
    answer = raw(refusing.server.port, b"GET /healthz HTTP/1.1\r\n" + headers + b"\r\n")
    assert answer.startswith("HTTP/1.0 431") and '"reason": "HeadersTooLarge"' in answer
    doc = json.loads(answer.split("\r\n\r\n", 1)[1])
    valid(doc)
    # a selector within bounds but over the selector limit is a 400, not a crash
    status, doc = get(refusing, CHECK + "?selector=" + "a" * 1100)
    assert (status, doc["reason"]) == (400, "BadSelector")


# -- before the first cycle: a controller whose check has no results yet ---------------


@dataclass
class _State:
    namespace: str = "shop"
    name: str = "web"
    pods: dict[str, Instance] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    last_report: Report | None = None
    opened: set[str] = field(default_factory=set)
    history: History = field(default_factory=History)


@dataclass
class _Controller:
    checks: dict[str, _State]
    refused: dict[str, object] = field(default_factory=dict)
    is_leader: bool = True


def test_not_yet_checked_and_not_running() -> None:
    ctl = _Controller(checks={"shop/web": _State()}, refused={"shop/bad": object()})
    loop = asyncio.new_event_loop()
    server = HealthServer(
        host="127.0.0.1",
        port=0,
        live=None,
        ready=None,
        metrics=None,
        api=VerdictApi(ctl, loop=lambda: loop if loop.is_running() else None),
    ).start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        status, doc = request("GET", base + CHECK)
        assert (status, valid(doc)["reason"]) == (503, "NotRunning")
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        wait_for(loop.is_running, timeout=5)
        status, doc = request("GET", base + CHECK)
        assert (status, valid(doc)["reason"]) == (503, "NotYetChecked")
        status, doc = request("GET", base + "/verdicts/v1/namespaces/shop/artifactchecks/bad")
        assert (status, valid(doc)["reason"]) == (404, "CheckRefused")
        ctl.is_leader = False
        status, doc = request("GET", base + CHECK + "?fresh=true&timeout=1s")
        assert (status, valid(doc)["reason"]) == (503, "NotLeader")
    finally:
        server.stop()
        loop.call_soon_threadsafe(loop.stop)
        time.sleep(0.1)
        loop.close()


# -- the selector grammar -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("", {"a": "1"}, True),
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a in (1, 2),b", {"a": "2", "b": "x"}, True),
        ("a notin (1,2)", {"a": "3"}, True),
        ("!a", {"a": "1"}, False),
        ("example.com/tier=web", {"example.com/tier": "web"}, True),
        ("a=", {"a": ""}, True),
        ("replicas>2", {"replicas": "3"}, True),  # kubectl's Gt/Lt, as the API server takes them
        ("replicas<2", {"replicas": "3"}, False),
    ],
)
def test_selectors(text: str, labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.parse(text).matches(labels) is matches


@pytest.mark.parametrize(
    "text", ["a in (1", "a in ()", "a=1,", "a b", "=1", "a=(", "a in 1", "-a=1", "a=b c"]
)
def test_bad_selectors(text: str) -> None:
    with pytest.raises(SelectorError):
        LabelSelector.parse(text)
