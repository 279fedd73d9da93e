"""The requests the asynchronous Kubernetes client sends are the ones httpx would build,
and the JSON it reads back is the JSON the API server sent.

:class:`~artifactcheck.clients.kube_http.KubeHttp` builds each request from parts it
merged once (the base URL, the default headers, the timeout) instead of through the
client's ``build_request``, which parses the URL three times per call. What is pinned:
for every shape of request the controller sends (a gate PATCH with its body, a list
with a label selector, a per-request timeout, a server behind a path prefix, the
headers an ``ApiClient`` carries and the configuration's token), the method, URL,
headers, body and timeout equal those of httpx's own ``build_request``; and the bytes
a loopback socket receives name the prefixed path, the token and the body. The
answers and watch events are decoded by pydantic-core's parser (faster than the
standard library's): what it gives is what ``json.loads`` gives of the same bytes, and
an answer or an event that is not JSON is a dependency failure naming the request.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from raw_api import json_answer, listening, request_of

from artifactcheck.clients.kube import MERGE_PATCH, STRATEGIC_MERGE_PATCH, configuration_for
from artifactcheck.clients.kube_http import KubeHttp, Params, _timeout
from artifactcheck.model.errors import DependencyError
from artifactcheck_sim.apiserver import FakeApiServer

GATE = {
    "metadata": {"resourceVersion": "4711"},
    "status": {"conditions": [{"type": "artifactcheck.io/content-verified", "status": "True"}]},
}

#: (method, path, params, body, content type, per-request timeout)
SHAPES: list[tuple[str, str, Params | None, object, str | None, Any]] = [
    ("PATCH", "/api/v1/namespaces/shop/pods/web-1/status", None, GATE, STRATEGIC_MERGE_PATCH, None),
    ("PATCH", "/api/v1/namespaces/shop/pods/web-1", None, GATE, MERGE_PATCH, (1.5, 7.0)),
    ("GET", "/api/v1/namespaces/shop/pods/web-1", None, None, None, 3.0),
    (
        "GET",
        "/api/v1/namespaces/shop/pods",
        {"labelSelector": "app=web,tier in (a,b)", "limit": 500, "watch": False},
        None,
        None,
        None,
    ),
    ("POST", "api/v1/namespaces/shop/events", {}, {"message": "é ok"}, "application/json", None),
]


def _client(host: str) -> KubeHttp:
    configuration = configuration_for(host)
    configuration.api_key = {"authorization": "token-1"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return KubeHttp(
        configuration, timeout=(2.0, 9.0), headers={"Impersonate-User": "system:serviceaccount:x"}
    )


@pytest.mark.parametrize("host", ["http://127.0.0.1:6443", "https://proxy.test/k8s/clusters/c-1/"])
@pytest.mark.parametrize(("method", "path", "params", "body", "ctype", "timeout"), SHAPES)
async def test_each_request_is_the_one_httpx_builds(
    host: str,
    method: str,
    path: str,
    params: Params | None,
    body: object,
    ctype: str | None,
    timeout: Any,
) -> None:
    kube = _client(host)
    try:
        headers = await kube._headers(ctype if body is not None else None)
        assert headers["authorization"] == "Bearer token-1"
        ours = kube._build(method, path, headers, params=params, body=body, timeout=timeout)
        theirs = kube._client.build_request(
            method,
            path,
            params={
                k: str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in (params or {}).items()
            },
            content=None if body is None else json.dumps(body).encode(),
            headers=headers,
            timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else _timeout(timeout),
        )
        assert (ours.method, str(ours.url)) == (theirs.method, str(theirs.url))
        assert ours.headers.multi_items() == theirs.headers.multi_items()
        assert ours.content == theirs.content
        assert ours.extensions == theirs.extensions
    finally:
        await kube.aclose()


async def _answer_once(srv: socket.socket, answer: bytes) -> bytes:
    """Accept one connection on ``srv``, read one request (its head and a JSON body, if
    any) and send ``answer``, a whole HTTP response; the request's bytes."""
    loop = asyncio.get_running_loop()
    conn, _ = await loop.sock_accept(srv)
    with conn:
        data = await request_of(conn)
        await loop.sock_sendall(conn, answer)
        return data


async def test_the_bytes_on_the_wire_name_the_prefixed_path_the_token_and_the_body() -> None:
    with listening() as srv:
        port = srv.getsockname()[1]
        kube = _client(f"http://127.0.0.1:{port}/k8s/clusters/c-1")
        try:
            server = asyncio.create_task(_answer_once(srv, json_answer(b'{"kind": "Pod"}')))
            got = await kube.patch(
                "patch pods/status shop/web-1",
                "/api/v1/namespaces/shop/pods/web-1/status",
                GATE,
                content_type=STRATEGIC_MERGE_PATCH,
            )
            data = await server
        finally:
            await kube.aclose()
    assert got == {"kind": "Pod"}
    head, _, sent = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"PATCH /k8s/clusters/c-1/api/v1/namespaces/shop/pods/web-1/status HTTP/1.1"
    fields = {k.lower(): v for k, _, v in (line.partition(b": ") for line in lines[1:])}
    assert fields[b"host"] == f"127.0.0.1:{port}".encode()
    assert fields[b"authorization"] == b"Bearer token-1"
    assert fields[b"impersonate-user"] == b"system:serviceaccount:x"
    assert fields[b"content-type"] == STRATEGIC_MERGE_PATCH.encode()
    assert fields[b"accept"] == b"application/json"
    assert json.loads(sent) == GATE
    assert fields[b"content-length"] == str(len(sent)).encode()


async def test_answers_and_events_are_the_json_the_server_sent(
    server: FakeApiServer, make_pod: Callable[..., dict[str, Any]]
) -> None:
    make_pod("web-1", annotations={"note": "caf\u00e9 \u2615 \U0001f680"})
    path = "/api/v1/namespaces/default/pods/web-1"
    kube = KubeHttp(server.client_configuration(), timeout=(2.0, 5.0))
    try:
        raw = await kube._client.get(path)
        got = await kube.get("get pod", path)
        assert got == json.loads(raw.content)
        assert got["metadata"]["annotations"]["note"] == "caf\u00e9 \u2615 \U0001f680"
        listed = await kube.list("pods", "/api/v1/namespaces/default/pods")
        events = kube.watch(
            "watch pods",
            "/api/v1/namespaces/default/pods",
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=5,
        )
        patched = await kube.patch(
            "patch pod", path, {"metadata": {"annotations": {"big": str(10**30)}}}
        )
        assert patched == json.loads((await kube._client.get(path)).content)
        kind, pod = await anext(events)
        await events.aclose()  # type: ignore[attr-defined]
        assert (kind, pod) == ("MODIFIED", patched)
    finally:
        await kube.aclose()


@pytest.mark.parametrize(
    "answer", [b'{"kind": "Pod", "metadata": {', b"<html>502</html>", b'\xff{"kind": 1}']
)
async def test_an_answer_that_is_not_json_is_a_dependency_failure(answer: bytes) -> None:
    with listening() as srv:
        kube = _client(f"http://127.0.0.1:{srv.getsockname()[1]}")
        try:
            server = asyncio.create_task(_answer_once(srv, json_answer(answer)))
            with pytest.raises(DependencyError, match=r"get pod shop/web-1: .*invalid JSON"):
                await kube.get("get pod shop/web-1", "/api/v1/namespaces/shop/pods/web-1")
            await server
        finally:
            await kube.aclose()


async def test_a_watch_event_that_is_not_json_is_a_dependency_failure() -> None:
    good = b'{"type": "ADDED", "object": {"metadata": {"name": "web-1", "resourceVersion": "7"}}}'
    with listening() as srv:
        kube = _client(f"http://127.0.0.1:{srv.getsockname()[1]}")
        try:
            answer = json_answer(good + b'\n{"type": "MODIFIED", "object": {\n', chunked=True)
            server = asyncio.create_task(_answer_once(srv, answer))
            seen = []
            with pytest.raises(DependencyError, match=r"watch pods: .*invalid event"):
                async for kind, pod in kube.watch(
                    "watch pods",
                    "/api/v1/namespaces/shop/pods",
                    resource_version="1",
                    timeout_seconds=5,
                ):
                    seen.append((kind, pod["metadata"]["name"]))
            await server
        finally:
            await kube.aclose()
    assert seen == [("ADDED", "web-1")]
