"""Quarantine, release, flags, Events, cordons and the leader Lease, over real HTTP.

Each test reads the objects back from the fake API server, so what is pinned is the
state a cluster would show (conditions merged by type, annotations, Events with their
counts, node spec), and counts the write requests to prove idempotence and dry-run.

Event deduplication, as implemented: one Event object per (object, reason). Flagging an
already-flagged pod again writes nothing; a new episode (flag, unflag, flag) reuses the
same Event and bumps its ``count`` (2) and ``lastTimestamp``, as client-go's correlator
does. A restarted controller finds the flag annotations and emits nothing: it reads
the pod's Event once, which names the episode it counted (the pod's ``flagged-at``), so
a replica killed between marking the pod and recording the Event is followed by one
that records it, once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s

from artifactcheck.act.kube_actor import KubeActor
from artifactcheck.act.kube_actor import cordoned_by_us as nodes_cordoned
from artifactcheck.act.kube_events import ANN_EPISODE, Episodes
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.control.lease import LeaseLock
from artifactcheck.discover.kube_pods import discover_pods
from artifactcheck.judge.decide import History, decide, recover_state
from artifactcheck.model.errors import ConfigError, DependencyError
from artifactcheck.model.names import (
    ANN_CORDON_REASON,
    ANN_CORDONED,
    ANN_FLAGGED_AT,
    ANN_QUARANTINED,
    ANN_REASON,
    ANN_STREAK,
    ANN_VERDICT,
)
from artifactcheck.model.settings import KubernetesSource, PolicySettings
from artifactcheck.model.values import Action, ActionKind, Instance, InstanceResult, Verdict

GATE = "artifactcheck.io/content-verified"
T0 = datetime(2024, 6, 1, 12, 0, 0, tzinfo=UTC)
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
FAST = (1.0, 2.0)
#: caplog levels are set on our own logger: another test (the CLI) may have raised the
#: level of the "artifactcheck" logger, and records must still reach caplog.
LOGGER = "artifactcheck.act.kube_actor"


class Clock:
    """The actor's injected clock; ``hook`` runs once on the next reading."""

    def __init__(self) -> None:
        self.now = T0
        self.hook: Any = None

    def __call__(self) -> datetime:
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


class Loop:
    """Runs coroutines of the asynchronous client to their end, in one event loop per
    test, so a client's connections are reused from one step to the next; the clients
    made for the test are closed in it when the test ends."""

    def __init__(self, runner: asyncio.Runner) -> None:
        self.runner = runner
        self.closing: list[Callable[[], Awaitable[None]]] = []

    def __call__(self, coro: Awaitable[T]) -> T:
        return self.runner.run(coro)  # type: ignore[arg-type]


T = TypeVar("T")
#: The running test's loop (set by the autouse fixture ``run``).
LOOP: list[Loop] = []


@pytest.fixture(autouse=True)
def run() -> Iterator[Loop]:
    with asyncio.Runner() as runner:
        loop = Loop(runner)
        LOOP.append(loop)
        try:
            yield loop
            for close in loop.closing:
                runner.run(close())
        finally:
            LOOP.remove(loop)


def lease_lock(run: Loop, api: k8s.ApiClient, **options: Any) -> LeaseLock:
    lock = LeaseLock(api_client=api, namespace="default", **options)
    run.closing.append(lock.aclose)
    return lock


def kube_http(api: k8s.ApiClient) -> KubeHttp:
    """An asynchronous client to the fake API server, closed when the test ends."""
    client = KubeHttp.like(api, timeout=FAST)
    LOOP[-1].closing.append(client.aclose)
    return client


class Driven:
    """An actor whose coroutines each run to their end in the test's loop, so a test
    reads as the sequence of actions it checks."""

    def __init__(self, actor: KubeActor) -> None:
        self.actor = actor

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.actor, name)
        if not inspect.iscoroutinefunction(found):
            return found
        return lambda *args, **kwargs: LOOP[-1](found(*args, **kwargs))


def actor(api: k8s.ApiClient, clock: Clock | None = None, **policy: Any) -> Any:
    return Driven(
        KubeActor(
            kube=kube_http(api),
            policy=PolicySettings(**policy),
            controller_name="artifactcheck-7d9f-x1",
            clock=clock or Clock(),
            request_timeout=FAST,
        )
    )


def cordoned_by_us(api: k8s.ApiClient) -> set[str]:
    return LOOP[-1](nodes_cordoned(kube_http(api)))


def pod(server, name: str, namespace: str = "default") -> dict[str, Any]:
    obj = server.get("v1", "Pod", namespace, name)
    assert obj is not None
    return obj


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"]["conditions"]}


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def events(server, **fields: str) -> list[dict[str, Any]]:
    selector = ",".join(f"{k}={v}" for k, v in fields.items())
    return server.list("v1", "Event", None, field_selector=selector)


def instance(api, name: str) -> Instance:
    found = {i.name: i for i in discover_pods(KubernetesSource(ready_only=False), api_client=api)}
    return found[f"default/{name}"]


def state(api, name: str):
    inst = instance(api, name)
    result = InstanceResult(instance=inst, verdict=Verdict.CONSISTENT, reason="-")
    return recover_state(result)


# --------------------------------------------------------------------------- quarantine


def test_quarantine_sets_only_the_gate_condition(server, api, make_pod, writes, clock) -> None:
    make_pod("web-1", gate_status="True", annotations={"team": "storefront"})
    before = pod(server, "web-1")
    server.reset_requests()

    files = ["assets/index-DkJcOLVa.js", "assets/index-CQbHzygI.css"]
    done = actor(api, clock).quarantine(
        "default",
        "web-1",
        reason="ContentMismatch",
        message="reports 1.4.2, serves 1.4.1",
        files=files,
    )

    assert done is True
    assert writes() == [
        ("PATCH", "/api/v1/namespaces/default/pods/web-1/status"),
        ("PATCH", "/api/v1/namespaces/default/pods/web-1"),
    ]
    after = pod(server, "web-1")
    gate = conditions(after).pop(GATE)
    assert gate == {
        "type": GATE,
        "status": "False",
        "reason": "ContentMismatch",
        "message": "reports 1.4.2, serves 1.4.1; files: "
        "assets/index-DkJcOLVa.js, assets/index-CQbHzygI.css",
        "lastTransitionTime": "2024-06-01T12:00:00Z",
    }
    others_before = {t: c for t, c in conditions(before).items() if t != GATE}
    others_after = {t: c for t, c in conditions(after).items() if t != GATE}
    assert others_after == others_before  # kubelet's conditions untouched
    assert after["spec"] == before["spec"]
    ann = annotations(after)
    assert ann["team"] == "storefront"
    assert ann[ANN_QUARANTINED] == "true"
    assert ann[ANN_VERDICT] == "mismatch"
    assert "assets/index-DkJcOLVa.js" in ann[ANN_REASON]
    assert ann["artifactcheck.io/checked-at"] == "2024-06-01T12:00:00Z"
    # what a restarted controller recovers from the cluster
    assert state(api, "web-1").quarantined is True
    assert instance(api, "web-1").gate_status == "False"


def test_quarantine_warns_and_release_informs(server, api, make_pod, caplog) -> None:
    make_pod("web-1", gate_status="True")
    kube = actor(api)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        kube.quarantine("default", "web-1", message="differs")
        kube.release("default", "web-1")
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert said == [
        ("WARNING", "quarantined pod default/web-1: ContentMismatch: differs"),
        (
            "INFO",
            "released pod default/web-1: ContentVerified: content matches the expected release",
        ),
    ]


def test_a_gate_moved_is_logged_even_if_its_mark_is_never_written(
    server, api, make_pod, caplog
) -> None:
    """The gate moves traffic: a stop or a failure before the mark must not hide it."""
    make_pod("web-1", gate_status="True")
    server.inject("PATCH", r"/pods/web-1$", 503)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        with pytest.raises(DependencyError, match="answered 503"):
            actor(api).quarantine("default", "web-1", message="differs")
    assert conditions(pod(server, "web-1"))[GATE]["status"] == "False"
    assert ANN_QUARANTINED not in annotations(pod(server, "web-1"))
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert ("WARNING", "quarantined pod default/web-1: ContentMismatch: differs") in said


def test_quarantine_twice_writes_nothing(server, api, make_pod, writes, clock) -> None:
    make_pod("web-1", gate_status="True")
    kube = actor(api, clock)
    assert kube.quarantine("default", "web-1", message="differs", files=["a.js"])
    server.reset_requests()
    clock.advance(60)
    assert kube.quarantine("default", "web-1", message="differs", files=["a.js"]) is False
    assert writes() == []
    # a new message is written, but the transition time stays the first one
    assert kube.quarantine("default", "web-1", message="differs", files=["a.js", "b.js"])
    gate = conditions(pod(server, "web-1"))[GATE]
    assert gate["message"] == "differs; files: a.js, b.js"
    assert gate["lastTransitionTime"] == "2024-06-01T12:00:00Z"


def test_quarantine_message_names_a_bounded_number_of_files(server, api, make_pod) -> None:
    make_pod("web-1", gate_status="True")
    files = [f"assets/chunk-{n:03d}.js" for n in range(40)]
    actor(api).quarantine("default", "web-1", message="differs", files=files)
    message = conditions(pod(server, "web-1"))[GATE]["message"]
    assert "assets/chunk-000.js" in message
    assert message.endswith("(+30 more)")
    assert len(message) <= 1024


def test_pod_without_the_gate_can_only_be_flagged(server, api, make_pod, writes, caplog) -> None:
    make_pod("plain", gate=False)
    assert instance(api, "plain").has_readiness_gate is False
    server.reset_requests()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert actor(api).quarantine("default", "plain", message="differs") is False
    assert writes() == []
    assert "no readiness gate" in caplog.text
    assert actor(api).flag("default", "plain", verdict="mismatch", message="differs") is True


def test_release_opens_the_gate_again(server, api, make_pod, writes, clock) -> None:
    make_pod("web-1", gate_status="True")
    kube = actor(api, clock)
    kube.quarantine("default", "web-1", message="differs", files=["a.js"])
    clock.advance(120)

    assert kube.release("default", "web-1") is True

    after = pod(server, "web-1")
    assert conditions(after)[GATE] == {
        "type": GATE,
        "status": "True",
        "reason": "ContentVerified",
        "message": "content matches the expected release",
        "lastTransitionTime": "2024-06-01T12:02:00Z",
    }
    assert ANN_QUARANTINED not in annotations(after)
    assert state(api, "web-1").quarantined is False
    server.reset_requests()
    assert kube.release("default", "web-1") is False
    assert writes() == []


def test_gate_mode_opens_verified_pods_and_fails_open(server, api, make_pod, writes) -> None:
    make_pod("new-1", gate_status=None, ready=True, ip="127.0.0.31")
    make_pod("new-2", gate_status=None, ready=True, ip="127.0.0.32")
    kube = actor(api)
    server.reset_requests()

    verified = Action(ActionKind.RELEASE, "default/new-1", "consistent again")
    assert kube.apply(verified, instance(api, "new-1"), verdict="consistent")
    open_anyway = Action(
        ActionKind.RELEASE,
        "default/new-2",
        "verification impossible (dependency down): failing open",
    )
    assert kube.apply(open_anyway, None, verdict="inconclusive")

    assert conditions(pod(server, "new-1"))[GATE]["reason"] == "ContentVerified"
    assert conditions(pod(server, "new-2"))[GATE]["status"] == "True"
    assert conditions(pod(server, "new-2"))[GATE]["reason"] == "VerificationUnavailable"
    # opening a gate is one status write: no quarantine annotation to remove
    assert [w for w in writes() if w[0] == "PATCH"] == [
        ("PATCH", "/api/v1/namespaces/default/pods/new-1/status"),
        ("PATCH", "/api/v1/namespaces/default/pods/new-2/status"),
    ]


def test_release_fails_open_by_the_typed_flag_not_by_its_text(server, api, make_pod) -> None:
    """``Action.fail_open`` decides ``VerificationUnavailable``; the reason is only prose."""
    make_pod("new-1", gate_status=None, ready=True, ip="127.0.0.31")
    make_pod("new-2", gate_status=None, ready=True, ip="127.0.0.32")
    kube = actor(api)

    unverified = Action(
        ActionKind.RELEASE, "default/new-1", "content not verified (names only)", fail_open=True
    )
    assert kube.apply(unverified, None, verdict="consistent")
    says_so = Action(ActionKind.RELEASE, "default/new-2", "was failing open, verified now")
    assert kube.apply(says_so, None, verdict="consistent")

    assert conditions(pod(server, "new-1"))[GATE]["reason"] == "VerificationUnavailable"
    assert conditions(pod(server, "new-2"))[GATE]["reason"] == "ContentVerified"


# --------------------------------------------------------------------------- flags, events


def test_flag_twice_makes_one_event(server, api, make_pod, writes) -> None:
    uid = make_pod("web-1")["metadata"]["uid"]
    kube = actor(api)
    assert kube.flag("default", "web-1", verdict="mismatch", message="serves 1.4.1", streak=2)
    assert (
        kube.flag("default", "web-1", verdict="mismatch", message="serves 1.4.1", streak=2) is False
    )

    (event,) = events(server, **{"involvedObject.uid": uid})
    assert event["type"] == "Warning"
    assert event["reason"] == "ContentMismatch"
    assert event["count"] == 1
    assert event["message"] == "serves 1.4.1"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "web-1",
        "namespace": "default",
        "uid": uid,
    }
    assert event["source"] == {"component": "artifactcheck"}
    assert event["reportingComponent"] == "artifactcheck"
    assert event["reportingInstance"] == "artifactcheck-7d9f-x1"
    assert event["metadata"]["namespace"] == "default"
    assert [m for m, p in writes() if p.endswith("/events")] == ["POST"]
    ann = annotations(pod(server, "web-1"))
    assert ann[ANN_VERDICT] == "mismatch"
    assert ann[ANN_STREAK] == "2"
    assert ann["artifactcheck.io/flagged-at"]
    assert state(api, "web-1").flagged is True


def test_a_new_episode_bumps_the_same_event(server, api, make_pod, clock) -> None:
    uid = make_pod("web-1")["metadata"]["uid"]
    kube = actor(api, clock)
    kube.flag("default", "web-1", verdict="mismatch", message="first")
    clock.advance(600)
    assert kube.unflag("default", "web-1") is True
    assert ANN_VERDICT not in annotations(pod(server, "web-1"))
    clock.advance(600)
    assert kube.flag("default", "web-1", verdict="mismatch", message="again")

    (event,) = events(server, **{"involvedObject.uid": uid, "reason": "ContentMismatch"})
    assert event["count"] == 2
    assert event["message"] == "again"
    assert event["lastTimestamp"] == "2024-06-01T12:20:00Z"
    # seen by kubectl-style queries too
    listed = k8s.CoreV1Api(api).list_namespaced_event(
        "default", field_selector="involvedObject.name=web-1,type=Warning"
    )
    assert [(e.reason, e.count) for e in listed.items] == [("ContentMismatch", 2)]


def test_another_reason_is_another_event(server, api, make_pod) -> None:
    uid = make_pod("web-1")["metadata"]["uid"]
    kube = actor(api)
    kube.flag("default", "web-1", verdict="drift", message="runs 1.4.1, desired 1.4.2")
    kube.flag("default", "web-1", verdict="cdn-missing", message="not on the CDN", files=["a.js"])
    reasons = sorted(e["reason"] for e in events(server, **{"involvedObject.uid": uid}))
    assert reasons == ["CdnMissing", "ContentDrift"]


def test_restarted_controller_repeats_no_event(server, api, make_pod, writes) -> None:
    make_pod("web-1")
    actor(api).flag("default", "web-1", verdict="mismatch", message="differs")
    server.reset_requests()
    restarted = actor(api)  # a new process: no memory but the cluster's
    assert restarted.flag("default", "web-1", verdict="mismatch", message="differs") is False
    assert writes() == []
    assert len(events(server, reason="ContentMismatch")) == 1


def _flag(kube: KubeActor, message: str = "differs") -> bool:
    return kube.flag("default", "web-1", verdict="mismatch", message=message)


def test_killed_after_marking_the_pod_its_successor_records_the_event(
    server, api, make_pod, writes
) -> None:
    """The pod is marked first; a replica gone before its Event (here: the POST fails)
    leaves a flagged pod whose Event the next replica records once, on first sight."""
    make_pod("web-1")
    server.inject("POST", r"/events", 500)
    with pytest.raises(DependencyError):
        _flag(actor(api))
    assert annotations(pod(server, "web-1"))[ANN_FLAGGED_AT]
    assert events(server, reason="ContentMismatch") == []
    successor = actor(api)  # a new process: no memory but the cluster's
    assert _flag(successor) is True
    (event,) = events(server, reason="ContentMismatch")
    assert event["count"] == 1
    flagged_at = annotations(pod(server, "web-1"))[ANN_FLAGGED_AT]
    assert event["metadata"]["annotations"] == {ANN_EPISODE: flagged_at}
    server.reset_requests()
    assert _flag(successor) is False  # recorded by this process: the Event not read again
    assert [p for _m, p in server.requests if "/events" in p] == []
    assert _flag(actor(api)) is False  # a third process reads the Event once, writes nothing
    assert writes() == []
    assert events(server, reason="ContentMismatch")[0]["count"] == 1


def test_killed_before_marking_the_pod_no_event_is_counted_twice(
    server, api, make_pod, clock
) -> None:
    """A replica gone before it marked the pod (the annotation PATCH fails) has posted
    no Event yet: the successor's flag, seconds later, is the episode's only Event."""
    make_pod("web-1")
    server.inject("PATCH", r"/pods/web-1(\?|$)", 500)
    with pytest.raises(DependencyError):
        _flag(actor(api, clock))
    assert events(server, reason="ContentMismatch") == []
    clock.advance(5)
    assert _flag(actor(api, clock)) is True
    (event,) = events(server, reason="ContentMismatch")
    assert event["count"] == 1


def test_an_episode_counted_before_a_crash_is_not_counted_again(
    server, api, make_pod, clock
) -> None:
    """Second episode: the Event's count was bumped, then the replica died before it
    knew; its successor finds the episode mark on the Event and leaves the count at 2."""
    make_pod("web-1")
    first = actor(api, clock)
    _flag(first)
    clock.advance(600)
    first.unflag("default", "web-1")
    clock.advance(600)
    assert _flag(first, "again") is True
    assert events(server, reason="ContentMismatch")[0]["count"] == 2
    assert _flag(actor(api, clock), "again") is False
    (event,) = events(server, reason="ContentMismatch")
    assert event["count"] == 2
    assert event["metadata"]["annotations"][ANN_EPISODE] == "2024-06-01T12:20:00Z"


def test_an_event_without_an_episode_mark_counted_its_pods_episode(
    server, api, make_pod, writes
) -> None:
    """Events written before the mark existed were posted before their pod's flag: a
    flagged pod's unmarked Event counted the episode (no bump after an upgrade)."""
    make_pod("web-1")
    _flag(actor(api))
    (event,) = events(server, reason="ContentMismatch")
    del event["metadata"]["annotations"]
    server.update(event)
    server.reset_requests()
    assert _flag(actor(api)) is False
    assert writes() == []
    assert events(server, reason="ContentMismatch")[0]["count"] == 1


def test_episodes_remembered_are_bounded() -> None:
    memo = Episodes(limit=2)
    for i in range(3):
        memo.remember(("default", f"web-{i}"), "t")
    assert len(memo) == 2 and memo.get(("default", "web-0")) is None
    memo.forget(("default", "web-2"))
    assert memo.get(("default", "web-2")) is None and memo.get(("default", "web-1")) == "t"


def test_unflag_keeps_other_annotations(server, api, make_pod, writes) -> None:
    make_pod("web-1", gate_status="True", annotations={"team": "storefront"})
    kube = actor(api)
    kube.flag("default", "web-1", verdict="mismatch", message="differs", streak=3)
    kube.quarantine("default", "web-1", message="differs")
    assert kube.unflag("default", "web-1") is True
    ann = annotations(pod(server, "web-1"))
    assert ann["team"] == "storefront"
    assert ann[ANN_QUARANTINED] == "true"
    assert not {ANN_VERDICT, ANN_REASON, ANN_STREAK} & set(ann)
    server.reset_requests()
    assert kube.unflag("default", "web-1") is False
    assert writes() == []


def test_record_streak_writes_only_changes(server, api, make_pod, writes) -> None:
    make_pod("web-1")
    kube = actor(api)
    server.reset_requests()
    assert kube.record_streak(instance(api, "web-1"), 0) is False
    assert server.requests[1:] == []  # the discovery only: unchanged costs nothing

    assert kube.record_streak(instance(api, "web-1"), 1) is True
    assert annotations(pod(server, "web-1"))[ANN_STREAK] == "1"
    assert state(api, "web-1").streak == 1  # what a restarted controller recovers
    server.reset_requests()
    assert kube.record_streak(instance(api, "web-1"), 1) is False
    assert writes() == []
    stale = instance(api, "web-1")
    assert kube.record_streak(stale, 2) is True
    assert kube.record_streak(stale, 2) is False  # re-read: already 2, nothing written
    assert state(api, "web-1").streak == 2
    assert kube.record_streak(instance(api, "web-1"), 0) is True
    assert ANN_STREAK not in annotations(pod(server, "web-1"))


def test_record_streak_stops_at_the_confirmations(server, api, make_pod, writes) -> None:
    """A pod that stays bad must not be patched every cycle: beyond the confirmations
    a longer streak changes no decision, so the persisted value stops growing."""
    make_pod("web-1")
    kube = actor(api, confirmations=3)
    for streak in range(1, 8):
        kube.record_streak(instance(api, "web-1"), streak)
    assert annotations(pod(server, "web-1"))[ANN_STREAK] == "3"
    assert len(writes()) == 3
    assert state(api, "web-1").streak == 3  # still confirmed after a restart


# --------------------------------------------------------------------------- nodes


def test_cordon_and_uncordon_our_node(server, api, make_node, writes) -> None:
    node_uid = make_node("node-a")["metadata"]["uid"]
    make_node("node-b")
    kube = actor(api, cordon_nodes=True, max_cordoned_nodes=1)

    assert kube.cordon("node-a", reason="3 pods of 1.4.2 serve stale content") is True
    node = server.get("v1", "Node", None, "node-a")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][ANN_CORDONED] == "true"
    assert "stale content" in node["metadata"]["annotations"][ANN_CORDON_REASON]
    (event,) = events(server, **{"involvedObject.kind": "Node"})
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "node-a",
        "uid": node_uid,
    }
    assert (event["type"], event["reason"]) == ("Warning", "NodeCordoned")
    assert cordoned_by_us(api) == {"node-a"}

    server.reset_requests()
    assert kube.cordon("node-a", reason="again") is False  # already ours
    assert kube.cordon("node-b", reason="another") is False  # cap of 1 reached
    assert writes() == []
    assert not server.get("v1", "Node", None, "node-b")["spec"].get("unschedulable")

    assert kube.uncordon("node-a") is True
    node = server.get("v1", "Node", None, "node-a")
    assert node["spec"]["unschedulable"] is False
    assert ANN_CORDONED not in (node["metadata"].get("annotations") or {})
    assert kube.cordoned_by_us() == set()
    assert sorted(e["reason"] for e in events(server, **{"involvedObject.name": "node-a"})) == [
        "NodeCordoned",
        "NodeUncordoned",
    ]
    assert kube.cordon("node-b", reason="now there is room") is True


def test_never_touches_a_node_someone_else_cordoned(server, api, make_node, writes, caplog) -> None:
    make_node("node-x", unschedulable=True, annotations={"ops/maintenance": "disk"})
    kube = actor(api, cordon_nodes=True)
    server.reset_requests()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert kube.uncordon("node-x") is False
        assert kube.cordon("node-x", reason="stale") is False
    assert writes() == []
    node = server.get("v1", "Node", None, "node-x")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"] == {"ops/maintenance": "disk"}
    assert "did not cordon" in caplog.text
    assert "not by artifactcheck" in caplog.text
    assert cordoned_by_us(api) == set()


def test_cordon_is_off_unless_the_policy_enables_it(server, api, make_node) -> None:
    make_node("node-a")
    server.reset_requests()
    assert actor(api).cordon("node-a", reason="stale") is False
    assert server.requests == []


# --------------------------------------------------------------------------- apply, dry-run


ALL_ACTIONS = [
    Action(ActionKind.FLAG, "default/web-1", "differs", files=("a.js",)),
    Action(ActionKind.QUARANTINE, "default/web-1", "differs", files=("a.js",)),
    Action(ActionKind.RELEASE, "default/web-1", "consistent again"),
    Action(ActionKind.UNFLAG, "default/web-1", "consistent again"),
    Action(ActionKind.CORDON, "node-a", "stale image"),
    Action(ActionKind.UNCORDON, "node-a", "consistent again"),
]


def test_dry_run_actions_are_never_sent(server, api, make_pod, make_node) -> None:
    make_pod("web-1", gate_status="True")
    make_node("node-a")
    kube = actor(api, cordon_nodes=True)
    server.reset_requests()
    for action in ALL_ACTIONS:
        dry = Action(action.kind, action.target, action.reason, dry_run=True, files=action.files)
        assert kube.apply(dry, None, verdict="mismatch") is False
    assert server.requests == []


def test_dry_run_policy_sends_nothing(server, api, make_pod, make_node) -> None:
    make_pod("web-1", gate_status="True")
    make_node("node-a")
    kube = actor(api, dry_run=True, cordon_nodes=True)
    server.reset_requests()
    for action in ALL_ACTIONS:
        assert kube.apply(action, None) is False
    assert kube.quarantine("default", "web-1", message="x") is False
    assert kube.flag("default", "web-1", verdict="mismatch", message="x") is False
    assert server.requests == []
    inst = instance(api, "web-1")
    server.reset_requests()
    assert kube.record_streak(inst, 3) is False
    assert server.requests == []


def test_apply_dispatches_every_kind(server, api, make_pod, make_node) -> None:
    make_pod("web-1", gate_status="True")
    make_node("node-a")
    kube = actor(api, cordon_nodes=True)
    inst = instance(api, "web-1")
    assert kube.apply(Action(ActionKind.NONE, "default/web-1", "-"), inst) is False
    for action in ALL_ACTIONS:
        assert kube.apply(action, inst, verdict="mismatch") is True, action
    after = pod(server, "web-1")
    assert conditions(after)[GATE]["status"] == "True"
    assert not {ANN_VERDICT, ANN_QUARANTINED} & set(annotations(after))
    assert server.get("v1", "Node", None, "node-a")["spec"]["unschedulable"] is False
    with pytest.raises(ConfigError, match="namespace/name"):
        kube.apply(Action(ActionKind.FLAG, "web-1", "differs"), None)


def test_decide_then_apply_quarantines_exactly_the_drifted_pod(server, api, make_pod) -> None:
    for n in range(10):
        make_pod(f"web-{n}", gate_status="True", ip=f"127.0.0.{40 + n}")
    policy = PolicySettings(mode="quarantine")
    kube = Driven(KubeActor(kube=kube_http(api), policy=policy, request_timeout=FAST))
    history = History()
    for cycle in range(2):
        found = discover_pods(KubernetesSource(), api_client=api)
        results = [
            InstanceResult(
                instance=i,
                verdict=Verdict.MISMATCH if i.name == "default/web-3" else Verdict.CONSISTENT,
                reason="reports 1.4.2, serves 1.4.1",
            )
            for i in found
        ]
        decision = decide(results, policy=policy, history=history, now=1000.0 + 60 * cycle)
        history = decision.history
        by_name = {r.instance.name: r for r in results}
        for action in decision.actions:
            result = by_name[action.target]
            kube.apply(action, result.instance, result)  # as the controller calls it

    gates = {
        p["metadata"]["name"]: conditions(p)[GATE]["status"]
        for p in server.list("v1", "Pod", "default")
    }
    assert [name for name, status in gates.items() if status == "False"] == ["web-3"]
    (event,) = events(server, type="Warning")
    assert event["reason"] == "ContentMismatch"  # named from the result's verdict


# --------------------------------------------------------------------------- failures


def test_a_real_conflict_is_reread_and_retried_once(server, api, make_pod, clock, caplog) -> None:
    make_pod("web-1", gate_status="True")

    def kubelet_writes_meanwhile() -> None:  # between our GET and our PATCH
        server.patch_status(
            "v1",
            "Pod",
            "default",
            "web-1",
            {"status": {"conditions": [{"type": "example.com/warm", "status": "True"}]}},
            patch_type="strategic",
        )

    clock.hook = kubelet_writes_meanwhile
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert actor(api, clock).quarantine("default", "web-1", message="differs") is True
    assert re.search(r"quarantine pod default/web-1: conflict .* retrying once", caplog.text)
    after = conditions(pod(server, "web-1"))
    assert after[GATE]["status"] == "False"
    assert after["example.com/warm"]["status"] == "True"  # the other writer's change survived


def test_a_persistent_conflict_is_a_dependency_error(server, api, make_pod) -> None:
    make_pod("web-1", gate_status="True")
    server.inject("PATCH", r"/pods/web-1/status", 409, times=2)
    with pytest.raises(DependencyError, match="still conflicting"):
        actor(api).quarantine("default", "web-1", message="differs")


def test_api_server_down_is_a_dependency_error(server, api, make_pod, make_node, run) -> None:
    make_pod("web-1", gate_status="True")
    make_node("node-a")
    kube = actor(api, cordon_nodes=True)
    lock = lease_lock(run, api, request_timeout=FAST)
    server.pause()
    try:
        for attempt in (
            lambda: kube.quarantine("default", "web-1", message="differs"),
            lambda: kube.release("default", "web-1"),
            lambda: kube.flag("default", "web-1", verdict="mismatch", message="differs"),
            lambda: kube.cordon("node-a", reason="stale"),
            lambda: run(lock.try_acquire_or_renew("a", 15, T0)),
        ):
            with pytest.raises(DependencyError, match="unreachable"):
                attempt()
    finally:
        server.resume()
    assert kube.quarantine("default", "web-1", message="differs") is True


@pytest.mark.parametrize(
    ("method", "path", "status", "error", "text"),
    [
        ("PATCH", r"/pods/web-1/status", 500, DependencyError, "answered 500"),
        ("PATCH", r"/pods/web-1/status", 429, DependencyError, "answered 429"),
        ("PATCH", r"/pods/web-1/status", 422, ConfigError, "rejected"),
        ("PATCH", r"/pods/web-1$", 403, ConfigError, "RBAC"),
        ("GET", r"/pods/web-1$", 503, DependencyError, "answered 503"),
    ],
)
def test_write_errors_are_translated(server, api, make_pod, method, path, status, error, text):
    make_pod("web-1", gate_status="True")
    server.inject(method, path, status)
    with pytest.raises(error, match=text):
        actor(api).quarantine("default", "web-1", message="differs")


def test_event_rbac_error_is_a_config_error(server, api, make_pod) -> None:
    make_pod("web-1")
    server.inject("POST", r"/events", 403)
    with pytest.raises(ConfigError, match="create event"):
        actor(api).flag("default", "web-1", verdict="mismatch", message="differs")


def test_a_pod_that_is_gone_is_nothing_to_do(server, api, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert actor(api).quarantine("default", "gone", message="differs") is False
        assert actor(api).uncordon("no-such-node") is False
    assert "pod default/gone is gone" in caplog.text


# --------------------------------------------------------------------------- leader lease


def lease(server) -> dict[str, Any]:
    obj = server.get("coordination.k8s.io/v1", "Lease", "default", "artifactcheck-leader")
    assert obj is not None
    return obj["spec"]


def test_only_one_identity_holds_the_lease_until_it_expires(server, api, run) -> None:
    a = lease_lock(run, api)
    b = lease_lock(run, api)
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731

    assert run(a.try_acquire_or_renew("a", 15, at(0))) is True
    first = lease(server)
    assert (first["holderIdentity"], first["leaseDurationSeconds"]) == ("a", 15)
    assert first["leaseTransitions"] == 0
    assert MICRO_TIME.match(first["renewTime"]) and MICRO_TIME.match(first["acquireTime"])
    assert run(b.try_acquire_or_renew("b", 15, at(5))) is False

    assert run(a.try_acquire_or_renew("a", 15, at(10))) is True  # renew
    renewed = lease(server)
    assert renewed["renewTime"] == "2024-06-01T12:00:10.000000Z"
    assert renewed["acquireTime"] == first["acquireTime"]
    assert renewed["leaseTransitions"] == 0

    assert run(b.try_acquire_or_renew("b", 15, at(24))) is False  # 10 + 15 > 24
    assert run(b.try_acquire_or_renew("b", 15, at(26))) is True  # a stopped renewing
    taken = lease(server)
    assert taken["holderIdentity"] == "b"
    assert taken["acquireTime"] == "2024-06-01T12:00:26.000000Z"
    assert taken["leaseTransitions"] == 1
    assert run(a.try_acquire_or_renew("a", 15, at(27))) is False
    assert run(a.holder()) == "b"


def test_release_hands_over_at_once(server, api, writes, run) -> None:
    a = lease_lock(run, api)
    b = lease_lock(run, api)
    assert run(a.try_acquire_or_renew("a", 15, T0))
    server.reset_requests()
    assert run(b.release("b", T0)) is False  # not the holder: nothing written
    assert writes() == []
    assert run(a.release("a", T0 + timedelta(seconds=1))) is True
    assert "holderIdentity" not in lease(server)
    assert run(b.try_acquire_or_renew("b", 15, T0 + timedelta(seconds=2))) is True
    assert lease(server)["leaseTransitions"] == 1


def test_lost_races_return_false(server, api, run) -> None:
    lock = lease_lock(run, api)
    server.inject("POST", r"/leases", 409)  # someone created it first
    assert run(lock.try_acquire_or_renew("a", 15, T0)) is False
    server.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "artifactcheck-leader", "namespace": "default"},
            "spec": {},
        }
    )
    server.inject("PATCH", r"/leases/artifactcheck-leader", 409)  # someone updated it first
    assert run(lock.try_acquire_or_renew("a", 15, T0)) is False
    assert run(lock.try_acquire_or_renew("a", 15, T0)) is True


@pytest.mark.parametrize("start", ["absent", "expired"])
def test_concurrent_candidates_elect_exactly_one(server, api, start, run) -> None:
    if start == "expired":
        assert run(lease_lock(run, api).try_acquire_or_renew("old", 15, T0 - timedelta(minutes=5)))
    candidates = 8
    barrier = threading.Barrier(candidates)

    async def candidate(n: int) -> bool:
        # each candidate a process of its own would be: its own loop and connections
        lock = LeaseLock(api_client=api, namespace="default")
        try:
            barrier.wait(timeout=10)
            return await lock.try_acquire_or_renew(f"replica-{n}", 15, T0)
        finally:
            await lock.aclose()

    with ThreadPoolExecutor(candidates) as pool:
        won = list(pool.map(lambda n: asyncio.run(candidate(n)), range(candidates)))
    assert won.count(True) == 1
    assert lease(server)["holderIdentity"] == f"replica-{won.index(True)}"
