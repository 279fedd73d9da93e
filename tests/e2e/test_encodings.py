"""What browsers receive: each compared content coding is fetched, decoded and compared.

A server with ``gzip_static on`` answers a client that accepts gzip with the ``.gz``
file next to the original; a stale ``.gz`` holding another release's bytes is what
every browser gets while an identity request sees the right file. The check runs
against a real nginx when one is installed, and always against a loopback server
that behaves the same way.
"""

from __future__ import annotations

import asyncio
import gzip
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ci_support import tool

from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import FindingKind, Verdict
from artifactcheck.pipeline import run_check
from artifactcheck_sim.fleet import RELEASES, foreign_bytes
from artifactcheck_sim.web import Exchange, Site

STALE = "assets/report-50WvgzG_.js"  # the same name in both releases, other bytes in 1.4.2


def check(spec: dict):
    return asyncio.run(run_check(load_spec(spec)))


@dataclass(frozen=True)
class StaleGzip:
    """gzip_static with a stale .gz: gzip-accepting clients get ``gzipped``'s bytes."""

    gzipped: bytes

    async def __call__(self, ex: Exchange) -> None:
        if "gzip" in ex.request.headers.get("accept-encoding", ""):
            headers = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
            await ex.respond(
                200,
                gzip.compress(self.gzipped, mtime=0),
                headers=headers,
                content_type="application/javascript",
            )
        else:
            await ex.serve_default()


def _stale_bytes() -> bytes:
    return foreign_bytes(RELEASES["1.4.1"], RELEASES["1.4.2"])[STALE]


def _spec(fleet, url: str, encodings: list[str] | None) -> dict:
    spec = fleet.spec(targets=[{"url": url, "version": "1.4.1", "name": "gz"}], cdn=None)
    if encodings is not None:
        spec["http"] = {**spec["http"], "compare_encodings": encodings}
    return spec


def _assert_caught(fleet, url: str) -> None:
    r = check(_spec(fleet, url, ["identity", "gzip"])).results[0]
    assert r.verdict is Verdict.MISMATCH, r.reason
    differs = [f for f in r.findings if f.kind is FindingKind.CONTENT_DIFFERS]
    assert [f.path for f in differs] == [STALE]
    assert r.observation.assets[STALE].content_encoding == "gzip"
    assert r.observation.encodings == ("identity", "gzip")
    if r.coverage is not None:
        assert r.coverage.encodings == ("identity", "gzip")
    # identity only: the stale .gz is invisible, and the report says identity was compared
    r = check(_spec(fleet, url, None)).results[0]
    assert r.verdict is Verdict.CONSISTENT, r.reason
    assert r.observation.encodings == ("identity",)


def test_a_stale_precompressed_file_is_caught_when_gzip_is_compared(make_fleet, web) -> None:
    fleet = make_fleet(1, version="1.4.1")
    site = Site(root=RELEASES["1.4.1"], overrides={STALE: StaleGzip(_stale_bytes())})
    _assert_caught(fleet, web.add(site, "127.93.20.1"))


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[str]:
    """A real nginx with ``gzip_static on`` over a copy of 1.4.1 holding a stale .gz."""
    binary = tool("nginx", "apt-get install nginx-light; .ci/docker.sh", also=("/usr/sbin/nginx",))
    root = tmp_path / "html"
    shutil.copytree(RELEASES["1.4.1"], root)
    (root / f"{STALE}.gz").write_bytes(gzip.compress(_stale_bytes(), mtime=0))
    host = "127.93.21.1"
    port = _free_port(host)
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"""
daemon off;
master_process off;
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {tmp_path}/body;
    types {{ application/javascript js; text/css css; text/html html; }}
    server {{
        listen {host}:{port};
        root {root};
        gzip_static on;
        location ~ /\\. {{ deny all; }}
    }}
}}
"""
    )
    proc = subprocess.Popen(
        [binary, "-p", str(tmp_path), "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    pytest.fail(f"nginx did not start: {err}")
                time.sleep(0.05)
        yield f"http://{host}:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_real_nginx_gzip_static_with_a_stale_gz(make_fleet, nginx: str) -> None:
    """nginx also denies ``.vite/`` (a dot-path): the probe's 403 is "not here"."""
    fleet = make_fleet(1, version="1.4.1")
    _assert_caught(fleet, nginx)


def test_the_compare_encoding_flag_catches_the_stale_gz_from_the_cli(make_fleet, web) -> None:
    """``verify --compare-encoding identity --compare-encoding gzip`` compares both codings
    (exit 1, the coding named in the JSON); without the flag only identity is compared
    and the report says so."""
    import json

    from click.testing import CliRunner

    from artifactcheck.cli.main import main

    fleet = make_fleet(1, version="1.4.1")
    site = Site(root=RELEASES["1.4.1"], overrides={STALE: StaleGzip(_stale_bytes())})
    url = web.add(site, "127.93.20.2")
    base = ["verify", "--target", f"{url}=1.4.1", "-o", "json"]
    base += ["--release-manifest", fleet.release_template]
    runner = CliRunner()
    both = runner.invoke(
        main, [*base, "--compare-encoding", "identity", "--compare-encoding", "gzip"]
    )
    assert both.exit_code == 1, both.output
    doc = json.loads(both.stdout)
    assert doc["results"][0]["coverage"]["encodings"] == ["identity", "gzip"]
    plain = runner.invoke(main, base)
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["results"][0]["coverage"]["encodings"] == ["identity"]
    twice = runner.invoke(main, [*base, "--compare-encoding", "gzip", "--compare-encoding", "gzip"])
    assert twice.exit_code == 2
    assert "--compare-encoding" in twice.output
