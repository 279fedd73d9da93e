"""The loopback web server itself: nginx-like static serving, faults, counters, lifecycle."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from artifactcheck_sim.web import (
    Delay,
    Hang,
    Reset,
    Site,
    Status,
    Trickle,
    WebFleet,
)


def get(
    base: str, path: str, headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    host, port = base.split("/")[2].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


@pytest.fixture
def build(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<html>app</html>")
    (tmp_path / "assets" / "index-Dk.js").write_text("console.log(1)")
    return tmp_path


def test_static_files_like_nginx(fleet: WebFleet, host: Callable[[], str], build: Path) -> None:
    base = fleet.add(Site(root=build, version="2.0.0"), host())
    status, headers, body = get(base, "/assets/index-Dk.js")
    assert status == 200 and body == b"console.log(1)"
    assert (
        headers["content-type"].startswith("text/javascript")
        or "javascript" in headers["content-type"]
    )
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    assert headers["server"] == "nginx/1.27.0" and "last-modified" in headers
    assert get(base, "/assets/index-Dk.js", {"If-None-Match": headers["etag"]})[0] == 304
    assert get(base, "/")[2] == b"<html>app</html>"
    assert get(base, "/")[1]["cache-control"] == "no-cache"
    assert json.loads(get(base, "/version")[2]) == {"version": "2.0.0"}
    assert get(base, "/missing.js")[0] == 404
    assert get(base, "/../../etc/passwd")[0] == 404
    head = get(base, "/assets/index-Dk.js", method="HEAD")
    assert head[0] == 200 and head[2] == b"" and head[1]["content-length"] == "14"
    assert get(base, "/", method="POST")[0] == 405


def test_spa_fallback_serves_index_for_routes(
    fleet: WebFleet, host: Callable[[], str], build: Path
) -> None:
    base = fleet.add(Site(root=build, spa_fallback=True), host())
    assert get(base, "/some/route")[2] == b"<html>app</html>"
    assert get(base, "/assets/gone.js")[0] == 404  # files with an extension stay 404


def test_counters_and_reset(fleet: WebFleet, host: Callable[[], str]) -> None:
    base = fleet.add(Site(overrides={"/a": b"a"}), host())
    for _ in range(3):
        get(base, "/a?x=1")
    server = fleet.server(base)
    assert server.paths == ["/a?x=1"] * 3 and server.request_count == 3
    assert server.connections_total == 3 and fleet.total_requests == 3
    fleet.reset_stats()
    assert server.request_count == 0 and fleet.total_requests == 0
    fleet.remove(base)
    assert fleet.servers == []
    with pytest.raises(ConnectionRefusedError):
        get(base, "/a")


def test_faults_at_the_socket(fleet: WebFleet, host: Callable[[], str]) -> None:
    site = Site(
        overrides={
            "/reset": Reset(),
            "/hang": Hang(),
            "/slow": Trickle(b"abc", interval=0.05),
            "/late": Delay(0.1, then=Status(418)),
        }
    )
    base = fleet.add(site, host())
    with pytest.raises((ConnectionResetError, http.client.RemoteDisconnected)):
        get(base, "/reset")
    started = time.monotonic()
    assert get(base, "/slow")[2] == b"abc"
    assert time.monotonic() - started >= 0.1
    assert get(base, "/late")[0] == 418
    host_, port = base.split("/")[2].rsplit(":", 1)
    with socket.create_connection((host_, int(port)), timeout=0.3) as sock:
        sock.sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
        with pytest.raises(TimeoutError):
            sock.recv(10)
    assert fleet.server(base).request_count == 4


def test_non_http_input_gets_a_400(fleet: WebFleet, host: Callable[[], str]) -> None:
    base = fleet.add(Site(), host())
    host_, port = base.split("/")[2].rsplit(":", 1)
    with socket.create_connection((host_, int(port)), timeout=2) as sock:
        sock.sendall(b"\x16\x03\x01\x02\x00")  # the start of a TLS ClientHello
        assert sock.recv(100).startswith(b"HTTP/1.1 400")


def test_peak_connections_are_counted_at_accept(fleet: WebFleet, host: Callable[[], str]) -> None:
    base = fleet.add(Site(), host())
    host_, port = base.split("/")[2].rsplit(":", 1)
    sockets = [socket.create_connection((host_, int(port))) for _ in range(5)]
    try:
        deadline = time.monotonic() + 2
        while fleet.server(base).connections_current < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fleet.server(base).connections_peak == 5 == fleet.open_connections
    finally:
        for s in sockets:
            s.close()


async def test_fleet_from_async_code(host: Callable[[], str]) -> None:
    async with WebFleet() as fleet:
        base = fleet.add(Site(overrides={"/a": b"async"}), host())
        status, _, body = await asyncio.to_thread(get, base, "/a")
        assert (status, body) == (200, b"async")
    assert not any(t.name == "artifactcheck-webfleet" for t in threading.enumerate())


def test_fleet_refuses_calls_when_stopped() -> None:
    fleet = WebFleet()
    with pytest.raises(RuntimeError):
        fleet.add(Site())
    fleet.stop()  # harmless
