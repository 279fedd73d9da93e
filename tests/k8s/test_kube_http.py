"""The asynchronous Kubernetes client (clients/kube_http.py) against the fake API server.

Every request goes over HTTP to a :class:`FakeApiServer` on loopback: the answers,
the statuses and the watch streams are the server's, not a mock's. What is pinned:
the reads and writes keep the API's JSON; each status becomes the same artifactcheck
error the synchronous client gives (404/409 to the caller when asked, 429 with its
Retry-After, 403 a configuration error, 5xx and an unreachable server a dependency
failure); a watch resumes from a resourceVersion, relists on 410 (as a status or as an
in-stream event) and is closed on the server as soon as its task is cancelled. The
headers (the configuration's token, refreshed by its hook) are read from the raw
bytes a loopback socket receives.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from watch_support import cancelling_a_watch_closes_its_stream

from artifactcheck.clients.kube import (
    STRATEGIC_MERGE_PATCH,
    ApiStatus,
    Throttled,
    WatchExpired,
    configuration_for,
)
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.discover.kube_pods import list_pods_async, watch_pods_async
from artifactcheck.model.errors import ConfigError, DependencyError
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.apiserver_faults import FaultRule, Faults

PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


@pytest.fixture
async def kube(server: FakeApiServer) -> AsyncIterator[KubeHttp]:
    client = KubeHttp(server.client_configuration(), timeout=(2.0, 5.0))
    try:
        yield client
    finally:
        await client.aclose()


def _names(listed: dict[str, Any]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in listed["items"])


async def test_list_and_get_keep_the_apis_json(
    kube: KubeHttp, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    make_pod("web-2", labels={"app": "other"})
    listed = await kube.list("pods", PODS, {"labelSelector": "app=web"})
    assert _names(listed) == ["web-1"]
    assert listed["metadata"]["resourceVersion"]  # where a watch resumes
    got = await kube.get("pod", f"{PODS}/web-1")
    assert got["status"]["podIP"] == "127.0.0.10"
    assert got["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"


async def test_404_is_the_callers_when_asked_and_a_config_error_otherwise(
    kube: KubeHttp, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    with pytest.raises(ApiStatus) as gone:
        await kube.get("pod", f"{PODS}/missing", passthrough=(404,))
    assert gone.value.status == 404
    assert gone.value.message == 'pods "missing" not found'  # the Status body's message
    with pytest.raises(ConfigError, match=r"not found \(404\)"):
        await kube.get("pod", f"{PODS}/missing")


async def test_create_then_replace_at_a_stale_resource_version_conflicts(
    kube: KubeHttp, server: FakeApiServer
) -> None:
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader", "namespace": "default"},
        "spec": {"leaseTransitions": 0},
    }
    created = await kube.create("lease", LEASES, body)
    stale = created["metadata"]["resourceVersion"]
    with pytest.raises(ApiStatus) as exists:
        await kube.create("lease", LEASES, body, passthrough=(409,))
    assert exists.value.status == 409

    created["spec"]["holderIdentity"] = "a"
    replaced = await kube.replace("lease", f"{LEASES}/leader", created)
    assert replaced["spec"]["holderIdentity"] == "a"
    assert replaced["metadata"]["resourceVersion"] != stale

    created["spec"]["holderIdentity"] = "b"  # still at the version read before
    with pytest.raises(ApiStatus) as conflict:
        await kube.replace("lease", f"{LEASES}/leader", created, passthrough=(409,))
    assert conflict.value.status == 409
    stored = server.get("coordination.k8s.io/v1", "Lease", "default", "leader") or {}
    assert stored["spec"]["holderIdentity"] == "a"


async def test_merge_and_strategic_merge_patches_of_the_status(
    kube: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    condition = {"type": "artifactcheck.io/content-verified", "status": "True"}
    patched = await kube.patch(
        "pod condition",
        f"{PODS}/web-1/status",
        {"status": {"conditions": [condition]}},
        content_type=STRATEGIC_MERGE_PATCH,
    )
    types = [c["type"] for c in patched["status"]["conditions"]]
    # strategic merge: merged by type, the other conditions kept
    assert "artifactcheck.io/content-verified" in types and "PodScheduled" in types

    await kube.patch("pod labels", f"{PODS}/web-1", {"metadata": {"labels": {"q": "1"}}})
    stored = server.get("v1", "Pod", "default", "web-1") or {}
    assert stored["metadata"]["labels"] == {"app": "web", "q": "1"}


@pytest.mark.parametrize(
    ("status", "error", "text"),
    [
        (403, ConfigError, r"forbidden \(403\)"),
        (422, ConfigError, r"rejected by the API server \(422\)"),
        (500, DependencyError, r"answered 500"),
        (503, DependencyError, r"answered 503"),
    ],
)
async def test_each_status_is_the_error_the_synchronous_client_gives(
    kube: KubeHttp, server: FakeApiServer, status: int, error: type[Exception], text: str
) -> None:
    server.inject("GET", r"/pods", status)
    with pytest.raises(error, match=text) as raised:
        await kube.list("pods", PODS)
    assert not isinstance(raised.value, Throttled)
    if error is DependencyError:
        assert not isinstance(raised.value, ConfigError)


@pytest.mark.parametrize(("asked", "waited"), [(7, 7.0), (600, 60.0)])
async def test_a_429_is_throttled_with_its_retry_after(
    kube: KubeHttp, server: FakeApiServer, asked: int, waited: float
) -> None:
    """Retry-After as the server sent it, cut to 60 s as the synchronous client does."""
    server.faults = Faults([FaultRule("throttle", 1.0, retry_after=asked)])
    with pytest.raises(Throttled) as throttled:
        await kube.list("pods", PODS)
    assert throttled.value.retry_after == waited
    with pytest.raises(Throttled) as watch_throttled:
        async for _ in kube.watch("pods", PODS, resource_version="1", timeout_seconds=2):
            pass
    assert watch_throttled.value.retry_after == waited


async def test_an_unreachable_server_is_a_dependency_failure() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with KubeHttp(configuration_for(f"http://127.0.0.1:{port}")) as kube:
        with pytest.raises(DependencyError, match="unreachable"):
            await kube.list("pods", PODS)
        with pytest.raises(DependencyError, match="unreachable"):
            async for _ in kube.watch("pods", PODS, resource_version="1", timeout_seconds=5):
                pass


async def test_a_watch_streams_from_a_resource_version(
    kube: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    rv = (await kube.list("pods", PODS))["metadata"]["resourceVersion"]
    make_pod("web-2")  # after the list: the watch must deliver it, and not web-1
    seen: list[tuple[str, str]] = []
    async for kind, body in kube.watch("pods", PODS, resource_version=rv, timeout_seconds=1):
        seen.append((kind, body["metadata"]["name"]))
    assert ("ADDED", "web-2") in seen
    assert all(name == "web-2" for _, name in seen)


async def test_a_watch_from_a_compacted_version_expires(
    kube: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    rv = (await kube.list("pods", PODS))["metadata"]["resourceVersion"]
    make_pod("web-2")
    server.compact()
    with pytest.raises(WatchExpired):
        async for _ in kube.watch("pods", PODS, resource_version=rv, timeout_seconds=2):
            pass


async def test_a_watch_answered_410_expires(kube: KubeHttp, server: FakeApiServer) -> None:
    server.inject("GET", r"watch=", 410)
    with pytest.raises(WatchExpired):
        async for _ in kube.watch("pods", PODS, resource_version="1", timeout_seconds=2):
            pass


async def test_a_proxy_from_the_environment_is_never_used(
    kube: KubeHttp, make_pod: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As with the official client: only the configuration's proxy (none here)."""
    make_pod("web-1")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port: nobody answers
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with KubeHttp(kube.configuration) as fresh:
        assert _names(await fresh.list("pods", PODS)) == ["web-1"]


async def test_cancelling_a_watch_closes_its_stream_on_the_server(
    kube: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    await cancelling_a_watch_closes_its_stream(kube, server, PODS)


async def test_a_watch_closed_by_its_caller_ends_on_the_server(
    kube: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    """A caller that stops at an event it was waiting for closes the stream then, not
    when the client's pool closes."""
    make_pod("web-1")
    events = kube.watch("pods", PODS, resource_version="", timeout_seconds=60)
    async with contextlib.aclosing(events):
        async for kind, body in events:
            assert (kind, body["metadata"]["name"]) == ("ADDED", "web-1")
            assert server.watch_count == 1
            break
    await _until(lambda: not server.watch_count)
    assert server.watch_count == 0


async def _until(done: Callable[[], bool]) -> None:
    for _ in range(100):
        if done():
            return
        await asyncio.sleep(0.02)


async def _answer_pod_lists(
    received: list[bytes],
) -> tuple[asyncio.Server, int]:
    """A server answering every request with an empty pod list; ``received`` gets the heads."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"\r\n\r\n"))
        body = b'{"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": []}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(answer, "127.0.0.1", 0)
    return listener, listener.sockets[0].getsockname()[1]


@pytest.fixture
def threads_used(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The functions run through ``asyncio.to_thread`` during the test."""
    used: list[object] = []
    real = asyncio.to_thread

    async def counted(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        used.append(func)
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return used


async def test_the_token_is_read_from_the_configuration_at_each_request(
    threads_used: list[object],
) -> None:
    """The configuration's refresh hook (an exec plugin's, an expiring token's) runs
    before each request, on a thread (a plugin runs a command), and the header carries
    the token it leaves."""
    received: list[bytes] = []
    listener, port = await _answer_pod_lists(received)
    config = configuration_for(f"http://127.0.0.1:{port}")
    tokens = iter(["first", "second"])

    def refresh(configuration: Any) -> None:
        configuration.api_key = {"authorization": next(tokens)}
        configuration.api_key_prefix = {"authorization": "Bearer"}

    # as the kubeconfig loader leaves it: a token, and the hook that renews it
    config.api_key = {"authorization": "expired"}
    config.api_key_prefix = {"authorization": "Bearer"}
    config.refresh_api_key_hook = refresh
    try:
        async with KubeHttp(config) as kube:
            assert (await kube.list("pods", PODS))["metadata"]["resourceVersion"] == "5"
            await kube.list("pods", PODS)
    finally:
        listener.close()
        await listener.wait_closed()
    heads = [head.lower() for head in received]
    assert b"authorization: bearer first\r\n" in heads[0]
    assert b"authorization: bearer second\r\n" in heads[1]
    assert len(threads_used) == 2


async def test_the_in_cluster_token_is_renewed_without_a_thread(
    tmp_path: Path, threads_used: list[object]
) -> None:
    """The in-cluster loader's hook only re-reads the token file once a minute: it runs
    on the loop, and a rotated token is still sent once the loader's minute is over."""
    from kubernetes.config.incluster_config import InClusterConfigLoader

    received: list[bytes] = []
    listener, port = await _answer_pod_lists(received)
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("first")
    ca.write_text("the cluster's CA")
    config = configuration_for("https://kubernetes.default.svc")
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port)}
    loader = InClusterConfigLoader(str(token), str(ca), environ=environ)
    loader.load_and_set(config)
    assert config.refresh_api_key_hook is not None
    config.host = f"http://127.0.0.1:{port}"  # this test's server speaks plain HTTP
    try:
        async with KubeHttp(config) as kube:
            await kube.list("pods", PODS)
            token.write_text("second")  # kubelet rotates the projected token
            await kube.list("pods", PODS)  # within the loader's minute: the token it holds
            loader.token_expires_at = datetime.now() - timedelta(seconds=1)
            await kube.list("pods", PODS)
    finally:
        listener.close()
        await listener.wait_closed()
    heads = [head.lower() for head in received]
    assert b"authorization: bearer first\r\n" in heads[0]
    assert b"authorization: bearer first\r\n" in heads[1]
    assert b"authorization: bearer second\r\n" in heads[2]
    assert threads_used == []


# ------------------------------------------------------- the controller's pod list and watch


async def test_the_pod_list_is_paged_and_keeps_to_the_selector(
    kube: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    for i in range(5):
        make_pod(f"web-{i}")
    make_pod("other", labels={"app": "other"})
    server.reset_requests()
    names, rv = await list_pods_async(
        kube, lambda pod: pod["metadata"]["name"], namespace="default", selector="app=web", page=2
    )
    assert sorted(names) == [f"web-{i}" for i in range(5)]
    assert rv
    assert len([p for m, p in server.requests if m == "GET"]) == 3  # pages of 2, 2, 1


async def test_the_pod_watch_keeps_to_the_selector(
    kube: KubeHttp, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-0")
    _, rv = await list_pods_async(kube, lambda pod: pod, namespace="default", selector="app=web")
    make_pod("other", labels={"app": "other"})
    make_pod("web-1")
    seen = [
        body["metadata"]["name"]
        async for _, body in watch_pods_async(
            kube, namespace="default", selector="app=web", resource_version=rv, timeout=1
        )
    ]
    assert "web-1" in seen
    assert "other" not in seen
