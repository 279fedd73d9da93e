"""The controller's Kubernetes client on the lean HTTP/1.1 transport (control/kube_transport.py).

Only what carries the requests changes: :func:`kube_client` puts
:class:`~artifactcheck.clients.kube_http.KubeHttp` on artifactcheck's own HTTP/1.1
transport, for its CPU per request. What is pinned, each against a real server on
loopback (a raw socket for exact bytes, the fake API server, a TLS server with a
``trustme`` CA, a logging proxy):

- the bytes of every request shape the controller sends (a gate PATCH, an annotation
  PATCH, a GET, a list with a selector, a POST, a watch) are the bytes httpx's own
  transport writes for the same call;
- answers and watch events are decoded to the same objects, and the statuses stay the
  same errors (409 to the caller, 429 throttled with its ``Retry-After``);
- every failure of the transport (nothing listening, a connection cut in an answer or in
  a watch, an answer too slow, a server the configuration's CA does not vouch for) is a
  :class:`~artifactcheck.model.errors.DependencyError` naming the request, never the
  transport's own exception;
- a watch cancelled ends on the server at once; the configuration's TLS (CA, client
  certificate) is used, connections are reused, and a configuration with a proxy keeps
  httpx's transport, which goes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from kubernetes import client as k8s
from proxy_support import LoggingProxy
from raw_api import json_answer, listening, request_of
from watch_support import cancelling_a_watch_closes_its_stream

from artifactcheck.clients.kube import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiStatus,
    Configuration,
    Throttled,
    configuration_for,
)
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.control.context import Context
from artifactcheck.control.kube_transport import kube_client
from artifactcheck.fetch.http1 import Http1Transport
from artifactcheck.model.errors import DependencyError
from artifactcheck_sim.apiserver import FakeApiServer

PODS = "/api/v1/namespaces/default/pods"
GATE = {
    "metadata": {"resourceVersion": "4711"},
    "status": {
        "conditions": [
            {
                "type": "artifactcheck.io/content-verified",
                "status": "True",
                "reason": "ContentVerified",
                "message": "content matches the expected release (café)",
                "lastTransitionTime": "2026-12-06T10:00:00Z",
            }
        ]
    },
}

Call = Callable[[KubeHttp], Awaitable[object]]

#: Every shape of request the controller sends, as a call on a client.
CALLS: dict[str, Call] = {
    "gate PATCH": lambda k: k.patch(
        "patch pods/status",
        "/api/v1/namespaces/shop/pods/web-1/status",
        GATE,
        content_type=STRATEGIC_MERGE_PATCH,
    ),
    "annotation PATCH": lambda k: k.patch(
        "patch pod",
        "/api/v1/namespaces/shop/pods/web-1",
        {"metadata": {"annotations": {"artifactcheck.io/checked-at": "2026-12-06T10:00:00Z"}}},
        content_type=MERGE_PATCH,
        timeout=(1.5, 7.0),
    ),
    "GET": lambda k: k.get("get pod", "/api/v1/namespaces/shop/pods/web-1", timeout=3.0),
    "list": lambda k: k.list(
        "pods",
        "/api/v1/namespaces/shop/pods",
        {"labelSelector": "app=web,tier in (a,b)", "limit": 500, "watch": False},
    ),
    "POST": lambda k: k.create("event", "/api/v1/namespaces/shop/events", {"message": "é ok"}),
    "watch": lambda k: _first_event(k, "/api/v1/namespaces/shop/pods"),
}


async def _first_event(kube: KubeHttp, path: str) -> object:
    events = kube.watch("watch pods", path, resource_version="17", timeout_seconds=30)
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        return await anext(events)


def _api_client(host: str) -> k8s.ApiClient:
    """An API client as the controller's: a token from its configuration, a header its
    owner set (impersonation)."""
    configuration = configuration_for(host)
    configuration.api_key = {"authorization": "token-1"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    api = k8s.ApiClient(configuration)
    api.set_default_header("Impersonate-User", "system:serviceaccount:x")
    return api


async def _serve(srv: socket.socket, answers: list[bytes]) -> list[bytes]:
    """Accept one connection and answer its requests, one answer each (b"": none), then
    close it; the requests' bytes."""
    loop = asyncio.get_running_loop()
    conn, _ = await loop.sock_accept(srv)
    got = []
    with conn:
        for answer in answers:
            got.append(await request_of(conn))
            if not answer:
                break
            await loop.sock_sendall(conn, answer)
    return got


POD = b'{"kind": "Pod", "metadata": {"name": "web-1", "resourceVersion": "18"}}'
EVENT = b'{"type": "MODIFIED", "object": ' + POD + b"}\n"


async def _bytes_and_answer(make: Callable[[str], KubeHttp], call: Call, watch: bool) -> Any:
    with listening(4) as srv:
        port = srv.getsockname()[1]
        kube = make(f"http://127.0.0.1:{port}/k8s/clusters/c-1")
        try:
            server = asyncio.create_task(
                _serve(srv, [json_answer(EVENT if watch else POD, chunked=watch, ended=False)])
            )
            answer = await call(kube)
            (sent,) = await server
        finally:
            await kube.aclose()
    return sent.replace(str(port).encode(), b"PORT"), answer


@pytest.mark.parametrize("shape", list(CALLS))
async def test_each_request_is_the_bytes_httpx_writes_and_its_answer_the_same(shape: str) -> None:
    watch = shape == "watch"

    def lean(host: str) -> KubeHttp:
        return kube_client(_api_client(host), timeout=(2.0, 9.0))

    def httpx_own(host: str) -> KubeHttp:
        return KubeHttp.like(_api_client(host), timeout=(2.0, 9.0))

    ours, our_answer = await _bytes_and_answer(lean, CALLS[shape], watch)
    theirs, their_answer = await _bytes_and_answer(httpx_own, CALLS[shape], watch)
    assert ours == theirs
    assert our_answer == their_answer
    assert our_answer == (
        ("MODIFIED", {"kind": "Pod", "metadata": {"name": "web-1", "resourceVersion": "18"}})
        if watch
        else {"kind": "Pod", "metadata": {"name": "web-1", "resourceVersion": "18"}}
    )
    assert b"Bearer token-1" in ours and b"Impersonate-User: system:serviceaccount:x" in ours


@contextlib.asynccontextmanager
async def _lean_client(api: k8s.ApiClient, **options: Any) -> AsyncIterator[KubeHttp]:
    """:func:`kube_client` of ``api``; both closed at the end."""
    kube = kube_client(api, **options)
    try:
        yield kube
    finally:
        await kube.aclose()
        api.close()


@pytest.fixture
async def lean(server: FakeApiServer) -> AsyncIterator[KubeHttp]:
    async with _lean_client(server.api_client(), timeout=(2.0, 5.0)) as kube:
        yield kube


async def test_the_controllers_client_is_on_the_lean_transport(server: FakeApiServer) -> None:
    """What the controller's every watch and write shares (``Context.kube``)."""
    api = server.api_client()
    try:
        ctx = Context(api=api, settings=None, admin=None, metrics=None, log=None)  # type: ignore[arg-type]
        assert isinstance(ctx.kube._transport, Http1Transport)
        await ctx.close_kube()
    finally:
        api.close()


async def test_events_and_answers_are_the_ones_httpx_gives(
    lean: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    """The same watch followed on both transports sees the same events, each equal to
    the object the PATCH answered."""
    make_pod("web-1", annotations={"note": "caf\u00e9 \u2615"})
    path = f"{PODS}/web-1"
    async with KubeHttp(server.client_configuration(), timeout=(2.0, 5.0)) as theirs:
        assert await lean.get("get pod", path) == await theirs.get("get pod", path)
        rv = (await lean.list("pods", PODS))["metadata"]["resourceVersion"]
        ours_watch = lean.watch("pods", PODS, resource_version=rv, timeout_seconds=5)
        their_watch = theirs.watch("pods", PODS, resource_version=rv, timeout_seconds=5)
        async with contextlib.aclosing(ours_watch), contextlib.aclosing(their_watch):  # type: ignore[type-var]
            patched = []
            for i in range(3):
                patched.append(
                    await lean.patch(
                        "patch pod", path, {"metadata": {"annotations": {"n": str(i)}}}
                    )
                )
            ours = [await anext(ours_watch) for _ in range(3)]
            theirs_seen = [await anext(their_watch) for _ in range(3)]
    assert ours == theirs_seen == [("MODIFIED", p) for p in patched]


async def test_statuses_stay_the_same_errors(
    lean: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    stale = {"metadata": {"resourceVersion": "1", "annotations": {"a": "b"}}}
    with pytest.raises(ApiStatus) as conflict:
        await lean.patch("patch pod", f"{PODS}/web-1", stale, passthrough=(409,))
    assert conflict.value.status == 409
    server.inject("GET", r"/pods/web-1$", 429)
    with pytest.raises(Throttled) as throttled:
        await lean.get("get pod", f"{PODS}/web-1")
    assert throttled.value.retry_after == 1


async def test_nothing_listening_is_a_dependency_failure() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = kube_client(_api_client(f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(DependencyError, match="^get pod: API server unreachable: "):
            await kube.get("get pod", f"{PODS}/web-1")
        with pytest.raises(DependencyError, match="^watch pods: API server unreachable: "):
            await _first_event(kube, PODS)
    finally:
        await kube.aclose()


CUT = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n{"kind"'


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"", "^get pod: API server unreachable: "),  # closed without an answer
        (CUT, "^get pod: API server unreachable: "),  # closed in the middle of the body
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}",
            "^get pod: API server unreachable: ",
        ),
    ],
)
async def test_a_broken_answer_is_a_dependency_failure(answer: bytes, message: str) -> None:
    with listening(4) as srv:
        kube = kube_client(_api_client(f"http://127.0.0.1:{srv.getsockname()[1]}"))
        try:
            server = asyncio.create_task(_serve(srv, [answer]))
            with pytest.raises(DependencyError, match=message):
                await kube.get("get pod", f"{PODS}/web-1")
            await server
        finally:
            await kube.aclose()


async def test_a_slow_answer_is_a_dependency_failure_that_says_so() -> None:
    with listening(4) as srv:
        kube = kube_client(_api_client(f"http://127.0.0.1:{srv.getsockname()[1]}"))
        loop = asyncio.get_running_loop()
        try:
            conn, _ = await asyncio.gather(
                loop.sock_accept(srv),
                _expect(kube.get("get pod", f"{PODS}/web-1", timeout=(1.0, 0.3)), "too slow"),
            )
            conn[0].close()
        finally:
            await kube.aclose()


async def _expect(call: Awaitable[object], message: str) -> None:
    with pytest.raises(DependencyError, match=message):
        await call


async def test_a_watch_cut_in_its_stream_is_a_dependency_failure() -> None:
    with listening(4) as srv:
        kube = kube_client(_api_client(f"http://127.0.0.1:{srv.getsockname()[1]}"))
        loop = asyncio.get_running_loop()
        try:
            events = kube.watch("watch pods", PODS, resource_version="17", timeout_seconds=30)
            first = asyncio.ensure_future(anext(events))
            conn, _ = await loop.sock_accept(srv)
            await request_of(conn)
            # one event, then half a chunk and the connection closes
            await loop.sock_sendall(
                conn, json_answer(EVENT, chunked=True, ended=False) + b'40\r\n{"type"'
            )
            assert (await first)[0] == "MODIFIED"
            conn.close()
            with pytest.raises(DependencyError, match="^watch pods: the watch connection broke"):
                await anext(events)
        finally:
            await kube.aclose()


async def test_a_watch_refused_with_a_cut_answer_is_a_dependency_failure() -> None:
    with listening(4) as srv:
        kube = kube_client(_api_client(f"http://127.0.0.1:{srv.getsockname()[1]}"))
        cut = b'HTTP/1.1 500 Internal Server Error\r\nContent-Length: 400\r\n\r\n{"kind"'
        try:
            server = asyncio.create_task(_serve(srv, [cut]))
            with pytest.raises(DependencyError, match="^watch pods: API server unreachable: "):
                await _first_event(kube, PODS)
            await server
        finally:
            await kube.aclose()


async def test_cancelling_a_watch_closes_its_stream_on_the_server(
    lean: KubeHttp, server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    await cancelling_a_watch_closes_its_stream(lean, server, PODS)


async def test_one_connection_carries_request_after_request() -> None:
    with listening(4) as srv:
        kube = kube_client(_api_client(f"http://127.0.0.1:{srv.getsockname()[1]}"))
        try:
            server = asyncio.create_task(_serve(srv, [json_answer(POD)] * 3))
            for _ in range(3):
                await kube.get("get pod", f"{PODS}/web-1", timeout=(1.0, 2.0))
            assert len(await server) == 3  # the server accepted one connection only
        finally:
            await kube.aclose()


# ---------------------------------------------------------------------- TLS and proxies


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _tls_server(ca: trustme.CA, *, client_ca: trustme.CA | None = None) -> FakeApiServer:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    if client_ca is not None:  # the API server wants a client certificate it trusts
        client_ca.configure_trust(ctx)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return FakeApiServer(host="127.0.0.1", port=0, ssl_context=ctx).start()


def _tls_api(server: FakeApiServer, ca_file: str, tmp_path: Path) -> k8s.ApiClient:
    configuration: Configuration = server.client_configuration()
    configuration.ssl_ca_cert = ca_file
    return k8s.ApiClient(configuration)


async def test_tls_with_the_configurations_ca_and_client_certificate(
    ca: trustme.CA, tmp_path: Path
) -> None:
    ca_file = str(tmp_path / "ca.pem")
    ca.cert_pem.write_to_path(ca_file)
    client_ca = trustme.CA()
    client = client_ca.issue_cert("artifactcheck")
    cert_file, key_file = str(tmp_path / "client.pem"), str(tmp_path / "client.key")
    client.cert_chain_pems[0].write_to_path(cert_file)
    client.private_key_pem.write_to_path(key_file)
    server = _tls_server(ca, client_ca=client_ca)
    try:
        api = _tls_api(server, ca_file, tmp_path)
        api.configuration.cert_file, api.configuration.key_file = cert_file, key_file
        async with _lean_client(api) as kube:
            assert server.url.startswith("https://")
            assert (await kube.list("pods", PODS))["items"] == []
        # without the client certificate the handshake fails: a dependency failure
        api = _tls_api(server, ca_file, tmp_path)
        async with _lean_client(api) as kube:
            with pytest.raises(DependencyError, match="^pods: API server unreachable: "):
                await kube.list("pods", PODS)
    finally:
        server.stop()


async def test_a_server_the_configurations_ca_does_not_vouch_for_is_refused(
    ca: trustme.CA, tmp_path: Path
) -> None:
    other = str(tmp_path / "other-ca.pem")
    trustme.CA().cert_pem.write_to_path(other)
    server = _tls_server(ca)
    try:
        api = _tls_api(server, other, tmp_path)
        async with _lean_client(api) as kube:
            with pytest.raises(DependencyError, match="^pods: API server unreachable.*CERTIFICATE"):
                await kube.list("pods", PODS)
    finally:
        server.stop()


async def test_a_configured_proxy_carries_the_requests(
    server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1")
    with LoggingProxy("127.83.251.1") as proxy:
        configuration = server.client_configuration()
        configuration.proxy = proxy.url
        api = k8s.ApiClient(configuration)
        async with _lean_client(api) as kube:
            listed = await kube.list("pods", PODS)
    assert [p["metadata"]["name"] for p in listed["items"]] == ["web-1"]
    assert [line.split(" ")[1] for line in proxy.requests] == [f"{server.url}{PODS}"]
