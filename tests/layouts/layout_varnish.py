"""One real Varnish cache on loopback in front of an origin: a CDN as browsers meet it.

varnishd runs in the foreground (``-F``) as a child of the test, without its jail
(``-j none``: no user switch, so its work directory can live in the test's temporary
directory), with its own ``-n`` work directory and a small malloc store. The origin is
any HTTP server, here the test's nginx; the builtin VCL caches what the origin answers,
404s included, as a CDN does.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from layout_nginx import free_port
from server_process import end, wait_listening


def varnishd_binary() -> str:
    """The installed varnishd, or skip: the cache's own behaviour is under test."""
    found = shutil.which("varnishd") or (
        "/usr/sbin/varnishd" if Path("/usr/sbin/varnishd").exists() else None
    )
    if found is None:
        pytest.skip("varnishd is not installed (apt-get install varnish)")
    return found


class Varnish:
    """``varnishd -F`` on ``host``, caching ``origin``; :meth:`stop` ends it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, host: str, origin: str) -> str:
        """Start caching ``origin`` (``http://host:port/``); the cache's base URL."""
        parts = urlsplit(origin)
        port = free_port(host)
        self._proc = subprocess.Popen(
            [
                varnishd_binary(),
                "-F",
                "-j",
                "none",
                "-a",
                f"{host}:{port}",
                "-b",
                f"{parts.hostname}:{parts.port}",
                "-n",
                str(self.workdir / "state"),
                "-s",
                "malloc,32m",
                "-T",
                "127.0.0.1:0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        proc = self._proc
        wait_listening(
            proc,
            [(host, port)],
            name="varnishd",
            why=lambda: proc.stderr.read().decode() if proc.stderr else "",
            seconds=30,
        )
        return f"http://{host}:{port}/"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        end(proc, seconds=15)
