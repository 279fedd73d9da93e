"""Watches and fault injection of the fake kube-apiserver, through ``kubernetes.watch``.

Pins what an informer-style controller depends on: synthetic ADDED events,
``timeoutSeconds``, resuming from a resourceVersion, the 410 that forces a
re-list (and what ``Watch().stream`` does with it), selectors on watches
(including the DELETED an object gets when it stops matching), bookmarks,
API server restarts (``pause``/``resume``), compaction and injected errors.
"""

from __future__ import annotations

import gc
import http.client
import json
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client import ApiClient, ApiException

from artifactcheck_sim.apiserver import FakeApiServer

GROUP, VERSION, PLURAL = "artifactcheck.io", "v1alpha1", "artifactchecks"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    before = set(threading.enumerate())
    srv = FakeApiServer(bookmark_interval=0.2, history=50).start()
    try:
        yield srv
    finally:
        srv.stop()
    assert srv.watch_count == 0
    leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leftover, f"threads left behind: {leftover}"


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[ApiClient]:
    with server.api_client() as api_client:
        yield api_client


@pytest.fixture
def core(api: ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def pod(
    name: str, labels: dict[str, str] | None = None, namespace: str = "default", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}], **spec},
    }


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


class Collector:
    """Runs ``Watch().stream(func, ...)`` in a thread, keeping every event."""

    def __init__(
        self, server: FakeApiServer, func: Any, *args: Any, stop_after: int = 10**9, **kwargs: Any
    ) -> None:
        self.server = server
        self.events: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self.watch = watch.Watch()
        self._stop_after = stop_after
        self._thread = threading.Thread(target=self._run, args=(func, args, kwargs), daemon=True)

    def _run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            for event in self.watch.stream(func, *args, **kwargs):
                self.events.append(event)
                if len(self.events) >= self._stop_after:
                    self.watch.stop()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc

    def start(self) -> Collector:
        watching = self.server.watch_count
        self._thread.start()
        wait_until(lambda: self.server.watch_count > watching or not self._thread.is_alive())
        return self

    def join(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "watch did not end"
        return self.events

    def summary(self) -> list[tuple[str, str]]:
        return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in self.events]


def raw_watch(server: FakeApiServer, path: str) -> tuple[int, list[dict[str, Any]]]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        return response.status, [json.loads(line) for line in body.decode().splitlines() if line]
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------- basics


def test_watch_without_resource_version_starts_with_synthetic_added_and_honours_timeout(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create(pod("a"))
    server.create(pod("b"))
    started = time.monotonic()
    # the client gives up after 60 s (ReadTimeoutError): a server that did not end the
    # watch at its 1 s timeout fails the test then, with no bound on how fast it ends
    events = list(
        watch.Watch().stream(
            core.list_namespaced_pod, "default", timeout_seconds=1, _request_timeout=60
        )
    )
    elapsed = time.monotonic() - started
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    assert isinstance(events[0]["object"], client.V1Pod)
    assert 0.9 <= elapsed


def test_live_events_in_order_from_http_and_in_process_writes(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    collector = Collector(
        server, core.list_namespaced_pod, "default", timeout_seconds=10, stop_after=4
    ).start()
    core.create_namespaced_pod("default", pod("web"))
    server.patch("v1", "Pod", "default", "web", {"metadata": {"labels": {"v": "2"}}})
    server.patch_status("v1", "Pod", "default", "web", {"status": {"phase": "Running"}})
    core.delete_namespaced_pod("web", "default")
    events = collector.join()
    assert collector.error is None
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert events[2]["object"].status.phase == "Running"
    assert int(server.resource_version) == versions[-1]


def test_resume_from_a_resource_version_replays_only_later_events(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create(pod("old"))
    listed = core.list_namespaced_pod("default")
    server.create(pod("new"))
    server.patch("v1", "Pod", "default", "old", {"metadata": {"labels": {"touched": "yes"}}})
    events = list(
        watch.Watch().stream(
            core.list_namespaced_pod,
            "default",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        )
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "new"),
        ("MODIFIED", "old"),
    ]


def test_watches_are_scoped_to_their_namespace(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    server.create(pod("here"))
    server.create(pod("there", namespace="other"))
    names = [
        e["object"].metadata.name
        for e in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1)
    ]
    everywhere = [
        e["object"].metadata.name
        for e in watch.Watch().stream(core.list_pod_for_all_namespaces, timeout_seconds=1)
    ]
    assert names == ["here"] and everywhere == ["here", "there"]


def test_custom_resource_and_events_v1_watches(server: FakeApiServer, api: ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    collector = Collector(
        server,
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        "default",
        PLURAL,
        timeout_seconds=10,
        stop_after=2,
    ).start()
    server.create(
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ArtifactCheck",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {},
        }
    )
    server.patch_status(
        "artifactcheck.io/v1alpha1", "ArtifactCheck", "default", "c", {"status": {"phase": "Ok"}}
    )
    events = collector.join()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]
    assert events[1]["object"]["status"] == {"phase": "Ok"}  # custom objects stay dicts

    # A core/v1 event shows up, converted, on an events.k8s.io/v1 watch.  (It needs an
    # eventTime: this client cannot read an events.k8s.io/v1 Event without one, and a real
    # server converts a legacy event without one to exactly that.)
    client.CoreV1Api(api).create_namespaced_event(
        "default",
        {
            "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "message": "hello",
            "reason": "R",
            "type": "Normal",
        },
    )
    v1_events = list(
        watch.Watch().stream(
            client.EventsV1Api(api).list_namespaced_event, "default", timeout_seconds=1
        )
    )
    assert [(e["object"].note, e["object"].regarding.name) for e in v1_events] == [("hello", "p")]


def test_concurrent_writers_yield_one_ordered_stream(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    writers, per_writer = 4, 100
    collector = Collector(
        server,
        core.list_namespaced_config_map,
        "default",
        timeout_seconds=30,
        stop_after=writers * per_writer * 2,
    ).start()

    def write(w: int) -> None:
        for i in range(per_writer):
            name = f"w{w}-{i}"
            server.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default"},
                }
            )
            server.patch("v1", "ConfigMap", "default", name, {"data": {"i": str(i)}})

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = collector.join()
    assert collector.error is None
    versions = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == len(versions) == 800
    assert sum(e["type"] == "ADDED" for e in events) == 400


# ----------------------------------------------------------------------------------------- 410 Gone


def test_resource_version_older_than_history_gets_an_in_stream_410(server: FakeApiServer) -> None:
    server.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
    )
    old = server.resource_version
    server.patch("v1", "ConfigMap", "default", "a", {"data": {"k": "v"}})
    server.compact()
    status, events = raw_watch(
        server, f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={int(old) - 1}"
    )
    assert status == 200  # the error travels inside the stream, as on a real server
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["kind"] == "Status"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    assert events[0]["object"]["message"].startswith("too old resource version")
    # The current resourceVersion is still fine after a compaction.
    status, events = raw_watch(
        server,
        f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={server.resource_version}"
        "&timeoutSeconds=1",
    )
    assert status == 200 and events == []


def test_watch_stream_raises_410_after_compaction(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create(pod("a"))
    stale = core.list_namespaced_pod("default").metadata.resource_version
    server.create(pod("b"))
    server.compact()
    # With timeout_seconds the client does not retry: the ERROR event becomes an ApiException.
    with pytest.raises(ApiException) as info:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, "default", resource_version=stale, timeout_seconds=5
            )
        )
    assert info.value.status == 410
    assert "Expired: too old resource version" in str(info.value.reason)
    # Without it, Watch().stream retries once from the same resourceVersion, then raises.
    server.reset_requests()
    with pytest.raises(ApiException) as info:
        list(watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=stale))
    assert info.value.status == 410
    assert server.verb_counts["watch"] == 2


def test_bounded_history_expires_old_resource_versions(core: client.CoreV1Api) -> None:
    with FakeApiServer(history=3) as small, small.api_client() as api:
        pods = client.CoreV1Api(api)
        start = small.resource_version
        for i in range(5):
            small.create(pod(f"p{i}"))
        with pytest.raises(ApiException) as info:
            list(
                watch.Watch().stream(
                    pods.list_namespaced_pod, "default", resource_version=start, timeout_seconds=1
                )
            )
        assert info.value.status == 410
        recent = str(int(small.resource_version) - 3)
        events = list(
            watch.Watch().stream(
                pods.list_namespaced_pod, "default", resource_version=recent, timeout_seconds=1
            )
        )
        assert [e["object"].metadata.name for e in events] == ["p2", "p3", "p4"]


def test_invalid_resource_version_is_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as info:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, "default", resource_version="abc", timeout_seconds=1
            )
        )
    assert info.value.status == 400


# ----------------------------------------------------------------------------- selectors on watches


def test_label_selector_watch_gets_deleted_when_an_object_stops_matching(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create(pod("web-1", {"app": "web"}))
    collector = Collector(
        server,
        core.list_namespaced_pod,
        "default",
        label_selector="app=web",
        timeout_seconds=10,
        stop_after=5,
    ).start()
    server.create(pod("db-1", {"app": "db"}))  # never matches: no event
    server.patch("v1", "Pod", "default", "web-1", {"metadata": {"labels": {"app": "db"}}})
    server.patch("v1", "Pod", "default", "db-1", {"metadata": {"labels": {"app": "web"}}})
    server.patch("v1", "Pod", "default", "db-1", {"metadata": {"annotations": {"a": "b"}}})
    server.delete("v1", "Pod", "default", "db-1")
    events = collector.join()
    assert collector.summary() == [
        ("ADDED", "web-1"),
        ("DELETED", "web-1"),  # stopped matching
        ("ADDED", "db-1"),  # started matching
        ("MODIFIED", "db-1"),
        ("DELETED", "db-1"),
    ]
    # The DELETED for a relabelled object carries its last matching state, at the new
    # resourceVersion.
    gone = events[1]["raw_object"]
    assert gone["metadata"]["labels"] == {"app": "web"}
    assert int(gone["metadata"]["resourceVersion"]) > int(
        events[0]["raw_object"]["metadata"]["resourceVersion"]
    )


def test_field_selector_watch(server: FakeApiServer, core: client.CoreV1Api) -> None:
    collector = Collector(
        server,
        core.list_pod_for_all_namespaces,
        field_selector="spec.nodeName=n1",
        timeout_seconds=10,
        stop_after=2,
    ).start()
    server.create(pod("elsewhere", nodeName="n2"))
    server.create(pod("here", nodeName="n1"))
    server.patch_status("v1", "Pod", "default", "here", {"status": {"phase": "Running"}})
    collector.join()
    assert collector.summary() == [("ADDED", "here"), ("MODIFIED", "here")]


def test_invalid_selectors_on_watches_are_400(core: client.CoreV1Api) -> None:
    for kwargs in ({"label_selector": "app in ("}, {"field_selector": "spec.image=x"}):
        with pytest.raises(ApiException) as info:
            list(
                watch.Watch().stream(
                    core.list_namespaced_pod, "default", timeout_seconds=1, **kwargs
                )
            )
        assert info.value.status == 400


# ----------------------------------------------------------------------- bookmarks & initial events


def test_bookmarks_when_allowed(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.create(pod("a"))
    server.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    )
    w = watch.Watch()
    events = list(
        w.stream(core.list_namespaced_pod, "default", allow_watch_bookmarks=True, timeout_seconds=1)
    )
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert events[0]["type"] == "ADDED" and bookmarks
    # A bookmark reports progress past events of other resources, too.
    assert bookmarks[-1]["raw_object"]["metadata"]["resourceVersion"] == server.resource_version
    assert w.resource_version == server.resource_version
    plain = list(watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1))
    assert [e["type"] for e in plain] == ["ADDED"]


def test_send_initial_events_ends_with_a_marked_bookmark(server: FakeApiServer) -> None:
    server.create(pod("a"))
    status, events = raw_watch(
        server,
        "/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    assert status == 200
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


# ------------------------------------------------------------------------------ restarts & teardown


def test_pause_and_resume_keep_state_and_port(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create(pod("before"))
    port, url = server.port, server.url
    collector = Collector(server, core.list_namespaced_pod, "default", timeout_seconds=30).start()
    wait_until(lambda: len(collector.events) == 1)
    last_seen = collector.events[-1]["object"].metadata.resource_version

    server.pause()
    collector.join()  # the open watch was dropped...
    assert isinstance(collector.error, urllib3.exceptions.ProtocolError)  # ...mid-stream
    assert server.watch_count == 0 and not server.running
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_namespaced_pod("default")  # nobody listens
    server.create(pod("during"))  # the state lives on (like etcd during a restart)

    server.resume()
    assert server.port == port and server.url == url and server.running
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == [
        "before",
        "during",
    ]
    resumed = list(
        watch.Watch().stream(
            core.list_namespaced_pod, "default", resource_version=last_seen, timeout_seconds=1
        )
    )
    assert [(e["type"], e["object"].metadata.name) for e in resumed] == [("ADDED", "during")]


def test_stop_ends_open_watches_and_a_client_going_away_ends_its_watch(
    core: client.CoreV1Api,
) -> None:
    with FakeApiServer() as other, other.api_client() as api:
        pods = client.CoreV1Api(api)
        other.create(pod("p"))
        first = Collector(other, pods.list_namespaced_pod, "default", timeout_seconds=30).start()
        wait_until(lambda: len(first.events) == 1)  # Watch.stop() needs the response to be open
        first.watch.stop()  # the client hangs up: the server notices and forgets the watch
        wait_until(lambda: other.watch_count == 0)
        first.join()
        second = Collector(other, pods.list_namespaced_pod, "default", timeout_seconds=30).start()
        other.stop()
        second.join()
        assert other.watch_count == 0


# ---------------------------------------------------------------------------------- injected faults


def test_injected_errors_answer_the_next_matching_requests(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.create(pod("web"))
    server.inject("GET", r"/namespaces/default/pods/web$", 500)
    with pytest.raises(ApiException) as info:
        core.read_namespaced_pod("web", "default")
    assert info.value.status == 500
    assert json.loads(info.value.body)["reason"] == "InternalError"
    assert core.read_namespaced_pod("web", "default").metadata.name == "web"  # only once

    server.inject("PATCH", r"/pods/web/status", 409, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as info:
            core.patch_namespaced_pod_status("web", "default", {"status": {"phase": "Running"}})
        assert info.value.status == 409
    assert server.get("v1", "Pod", "default", "web")["status"]["phase"] == "Pending"  # type: ignore[index]
    assert (
        core.patch_namespaced_pod_status(
            "web", "default", {"status": {"phase": "Running"}}
        ).status.phase
        == "Running"
    )


def test_injected_errors_on_watches_and_unlimited_injections(
    server: FakeApiServer, core: client.CoreV1Api
) -> None:
    server.inject("*", r"watch=true", 503, times=-1)
    for _ in range(2):
        with pytest.raises(ApiException) as info:
            list(watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1))
        assert info.value.status == 503
    server.clear_injections()
    assert list(watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1)) == []


def test_injected_429_carries_retry_after(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.inject("POST", r"/configmaps", 429)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert info.value.status == 429
    assert info.value.headers["Retry-After"] == "1"
    assert json.loads(info.value.body)["reason"] == "TooManyRequests"


def test_injected_delay(server: FakeApiServer, core: client.CoreV1Api) -> None:
    server.inject("GET", r"/configmaps", 0, delay=0.3)
    started = time.monotonic()
    assert core.list_namespaced_config_map("default").items == []
    assert time.monotonic() - started >= 0.3
    assert not server._injections  # used once, then gone: the next request is not delayed
    assert core.list_namespaced_config_map("default").items == []


def test_inject_rejects_nonsense_counts(server: FakeApiServer) -> None:
    with pytest.raises(ValueError):
        server.inject("GET", ".", 500, times=0)


def test_stopping_drops_a_watch_whose_client_stopped_reading() -> None:
    """A client that reads nothing of its watch fills the server's send buffer; a
    graceful close would wait for it forever, and the socket would outlive the server's
    loop (a ResourceWarning when collected, an fd held until then). Stopping drops it,
    as a real API server's exit does."""
    server = FakeApiServer().start()
    reader = socket.create_connection(("127.0.0.1", server.port))
    try:
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(
            b"GET /api/v1/namespaces/default/pods?watch=true&timeoutSeconds=60 HTTP/1.1\r\n"
            b"Host: apiserver\r\n\r\n"
        )
        wait_until(lambda: server.watch_count == 1)
        annotations = {"note": "x" * 2000}  # each event about 2 KB: megabytes unread
        for i in range(2000):
            made = pod(f"web-{i}")
            made["metadata"]["annotations"] = annotations
            server.create(made)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            server.stop()
            gc.collect()
        assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
    finally:
        reader.close()
