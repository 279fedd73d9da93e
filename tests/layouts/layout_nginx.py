"""One real nginx on loopback serving many server blocks: instances and CDNs.

Each server block listens on its own 127.x.y.z address and a free port, and its body
is one of the production configurations under ``conf/`` with ``@LISTEN@``, ``@ROOT@``
and the other ``@NAME@`` placeholders filled in at test time. One nginx process per
test keeps the CPU cost low; it has its own prefix, pid file and error log under the
test's temporary directory, as tests/e2e/test_encodings.py starts it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from server_process import end, wait_listening

CONF = Path(__file__).parent / "conf"

_MIME = """types {
    text/html html; text/css css; application/javascript js mjs;
    application/json json webmanifest; image/svg+xml svg; image/png png;
    image/x-icon ico; text/plain txt; font/woff2 woff2; application/octet-stream gz;
}"""


def nginx_binary() -> str:
    """The installed nginx, or skip: these tests are about a real server's behaviour."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    return found


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def render(template: str, **values: str) -> str:
    """``conf/TEMPLATE.conf`` with each ``@NAME@`` replaced; an unfilled one is an error."""
    text = (CONF / f"{template}.conf").read_text(encoding="utf-8")
    for name, value in values.items():
        text = text.replace(f"@{name.upper()}@", value)
    if "@" in "".join(line.split("#")[0] for line in text.splitlines()):
        raise AssertionError(f"{template}.conf: a placeholder is left unfilled:\n{text}")
    return text


class Nginx:
    """Server blocks added with :meth:`serve`, then one :meth:`start` for all of them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._servers: list[tuple[str, int, str]] = []
        self._proc: subprocess.Popen[bytes] | None = None

    def serve(self, host: str, template: str, root: Path, **values: str) -> str:
        """Add a server block on ``host``; returns its base URL, ``http://host:port/``."""
        port = free_port(host)
        body = render(template, listen=f"{host}:{port}", root=str(root), **values)
        self._servers.append((host, port, body))
        return f"http://{host}:{port}/"

    def config(self) -> str:
        servers = "\n".join(f"    server {{\n{body}\n    }}" for _, _, body in self._servers)
        w = self.workdir
        return f"""
daemon off;
master_process off;
worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {w}/access.log;
    client_body_temp_path {w}/body;
    proxy_temp_path {w}/proxy;
    fastcgi_temp_path {w}/fastcgi;
    uwsgi_temp_path {w}/uwsgi;
    scgi_temp_path {w}/scgi;
    {_MIME}
    default_type application/octet-stream;
    sendfile on;
{servers}
}}
"""

    def start(self) -> None:
        conf = self.workdir / "nginx.conf"
        conf.write_text(self.config(), encoding="utf-8")
        check = subprocess.run(
            [nginx_binary(), "-t", "-p", str(self.workdir), "-c", str(conf)],
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            raise AssertionError(f"nginx -t refused the configuration:\n{check.stderr}")
        self._proc = subprocess.Popen(
            [nginx_binary(), "-p", str(self.workdir), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        error_log = self.workdir / "error.log"
        wait_listening(
            self._proc,
            [(host, port) for host, port, _ in self._servers],
            name="nginx",
            why=lambda: error_log.read_text(errors="replace") if error_log.exists() else "",
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        end(proc)

    def requests_for(self, path: str) -> int:
        """How many requests the access log records for ``path`` (counted, not timed)."""
        log = self.workdir / "access.log"
        if not log.exists():
            return 0
        return sum(f" {path} HTTP/" in line for line in log.read_text().splitlines())
