"""A real third-party proxy: Debian's tinyproxy on loopback, with basic authentication.

The logging proxy of :mod:`proxy_support` is ours, so it proves our reading of the
protocol against itself; tinyproxy is what a user's network may run. Skipped where it
is not installed (``.ci/docker.sh`` installs ``tinyproxy-bin``).
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trustme
from fetch_support import server_context
from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch.proxy import Proxies
from artifactcheck_sim.web import Site, WebFleet

HELLO = b"hello"
SHA = hashlib.sha256(HELLO).hexdigest()

pytestmark = [
    pytest.mark.skipif(shutil.which("tinyproxy") is None, reason="tinyproxy is not installed"),
]


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextmanager
def tinyproxy(host: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """tinyproxy in the foreground on ``host``, user ``ci`` password ``s3cret``; yields
    its URL without credentials and its log file. Stopped by its PID."""
    port = _free_port(host)
    log = tmp_path / "tinyproxy.log"
    config = tmp_path / "tinyproxy.conf"
    config.write_text(
        f"User nobody\nGroup nogroup\nPort {port}\nListen {host}\nTimeout 10\n"
        "MaxClients 20\nAllow 127.0.0.0/8\nBasicAuth ci s3cret\nLogLevel Connect\n"
    )
    with log.open("wb") as out:
        proc = subprocess.Popen(["tinyproxy", "-d", "-c", str(config)], stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(log.read_text(errors="replace")) from None
                time.sleep(0.05)
        yield f"http://{host}:{port}", log
    finally:
        proc.terminate()
        proc.wait(10)


def with_credentials(url: str, password: str = "s3cret") -> str:
    return url.replace("http://", f"http://ci:{password}@", 1)


@pytest.mark.parametrize("password", ["s3cret", "wrong"])
async def test_https_through_tinyproxy_with_basic_authentication(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], tmp_path: Path, password: str
) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    address = host()
    site = Site(overrides={"/a.js": HELLO, "/b.js": HELLO})
    cdn = fleet.add(site, address, ssl_context=server_context(ca, address))
    with tinyproxy(host(), tmp_path) as (url, log):
        proxies = Proxies.single(with_credentials(url, password))
        http = {"ca_bundle": str(ca_file)}
        async with make_fetcher(http=http, proxies=proxies, retry={"attempts": 1}) as f:
            got = [await f.get_asset(cdn, name, host_header="") for name in ("a.js", "b.js")]
    connects = log.read_text(errors="replace").count(f"CONNECT {urlsplit(cdn).netloc}")
    if password == "s3cret":
        assert all(g.ok and g.hashes["sha256"] == SHA for g in got), [g.error for g in got]
        assert connects == 1  # one tunnel, kept alive for both files
    else:
        for g in got:
            assert g.error_kind == "connect" and not g.hashes, (g.error_kind, g.error)
            assert "the HTTP proxy refused the request" in (g.error or ""), g.error
            # tinyproxy 1.11 answers 401, not the 407 RFC 9110 names: read as a refusal too
            assert "answered 401" in (g.error or ""), g.error


async def test_plain_http_through_tinyproxy_in_absolute_form(
    make_fetcher, host: Callable[[], str], tmp_path: Path
) -> None:
    with (
        RawServer(host(), serve_each(lambda conn, head: response(200, HELLO))) as cdn,
        tinyproxy(host(), tmp_path) as (url, _log),
    ):
        async with make_fetcher(proxies=Proxies.single(with_credentials(url))) as f:
            got = await f.get_asset(cdn.url, "a.js", host_header="")
    assert got.ok and got.hashes["sha256"] == SHA, got.error
    assert [RawConn.target(h) for h in cdn.requests] == ["/a.js"]  # origin form upstream
    assert not [h for h in cdn.requests if b"proxy-authorization" in h.lower()]
