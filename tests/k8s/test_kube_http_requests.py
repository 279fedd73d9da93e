"""The requests the asynchronous Kubernetes client sends are the ones httpx would build.

:class:`~artifactcheck.clients.kube_http.KubeHttp` builds each request from parts it
merged once (the base URL, the default headers, the timeout) instead of through the
client's ``build_request``, which parses the URL three times per call. What is pinned:
for every shape of request the controller sends (a gate PATCH with its body, a list
with a label selector, a per-request timeout, a server behind a path prefix, the
headers an ``ApiClient`` carries and the configuration's token), the method, URL,
headers, body and timeout equal those of httpx's own ``build_request``; and the bytes
a loopback socket receives name the prefixed path, the token and the body.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import httpx
import pytest

from artifactcheck.clients.kube import MERGE_PATCH, STRATEGIC_MERGE_PATCH, configuration_for
from artifactcheck.clients.kube_http import KubeHttp, Params, _timeout

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


async def test_the_bytes_on_the_wire_name_the_prefixed_path_the_token_and_the_body() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        srv.setblocking(False)
        port = srv.getsockname()[1]
        kube = _client(f"http://127.0.0.1:{port}/k8s/clusters/c-1")
        loop = asyncio.get_running_loop()

        async def serve() -> bytes:
            conn, _ = await loop.sock_accept(srv)
            with conn:
                data = b""
                while b"\r\n\r\n" not in data or not data.endswith(b"}"):
                    chunk = await loop.sock_recv(conn, 65536)
                    if not chunk:
                        break
                    data += chunk
                answer = b'{"kind": "Pod"}'
                await loop.sock_sendall(
                    conn,
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer),
                )
                return data

        try:
            server = asyncio.create_task(serve())
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
