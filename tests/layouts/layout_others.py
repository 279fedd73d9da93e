"""Caddy and lighttpd on loopback, from Debian, serving fleets the way their docs show.

The same shape as :mod:`layout_nginx`: instances added with ``serve`` (each its own
127.x.y.z address and free port), then one process for all of them; it has its own
configuration, logs and state under the test's temporary directory and is ended by
its PID. Each site binds its own address only (Caddy listens on every interface
unless told ``bind``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from layout_nginx import free_port
from server_process import end, wait_listening


def binary(name: str, package: str) -> str:
    """The installed server, or skip: these tests are about a real server's behaviour."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if found is None:
        pytest.skip(f"{name} is not installed (apt-get install {package})")
    return found


class _Process:
    """One server process, started on a configuration written to ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._sites: list[tuple[str, int]] = []
        self._proc: subprocess.Popen[bytes] | None = None

    def _add(self, host: str) -> tuple[str, int]:
        port = free_port(host)
        self._sites.append((host, port))
        return host, port

    def _run(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.workdir / "server.out").open("wb")
        self._proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()
        out = self.workdir / "server.out"
        wait_listening(
            self._proc,
            self._sites,
            name=argv[0],
            why=lambda: "\n" + out.read_text(errors="replace"),
        )

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        end(proc)


class Caddy(_Process):
    """Caddy 2 (Debian ``caddy``): one site block per instance, ``file_server`` with
    ``precompressed gzip`` (the ``.gz`` beside a file is sent to a gzip client)."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self._blocks: list[str] = []

    def serve(self, host: str, root: Path, *, spa: bool = False, name: str | None = None) -> str:
        """A site on ``host``; ``spa``: unknown paths answer ``/index.html`` (``try_files``);
        ``name``: the site is that host name (as Caddy's docs write sites), not the address."""
        host, port = self._add(host)
        fallback = "\ttry_files {path} /index.html\n" if spa else ""
        self._blocks.append(
            f"http://{name or host}:{port} {{\n\tbind {host}\n\troot * {root}\n{fallback}"
            "\tfile_server {\n\t\tprecompressed gzip\n\t}\n}\n"
        )
        return f"http://{host}:{port}/"

    def start(self) -> None:
        conf = self.workdir / "Caddyfile"
        conf.write_text("{\n\tadmin off\n\tauto_https off\n}\n" + "".join(self._blocks))
        state = str(self.workdir / "state")
        env = {**os.environ, "HOME": state, "XDG_DATA_HOME": state, "XDG_CONFIG_HOME": state}
        argv = [binary("caddy", "caddy"), "run", "--config", str(conf), "--adapter", "caddyfile"]
        self._run(argv, env)


class Lighttpd(_Process):
    """lighttpd 1.4 (Debian ``lighttpd``): one ``$SERVER["socket"]`` per instance; its
    docs' SPA set-up, ``server.error-handler-404 = "/index.html"``, answers a missing
    path with the entry page and 200."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self._roots: list[Path] = []
        self._spa: list[bool] = []

    def serve(self, host: str, root: Path, *, spa: bool = False) -> str:
        host, port = self._add(host)
        self._roots.append(root)
        self._spa.append(spa)
        return f"http://{host}:{port}/"

    def config(self) -> str:
        (host, port), root = self._sites[0], self._roots[0]
        w = self.workdir
        lines = [
            'server.modules = ("mod_access", "mod_staticfile")',
            f'server.bind = "{host}"',
            f"server.port = {port}",
            f'server.document-root = "{root}"',
            f'server.errorlog = "{w}/error.log"',
            'index-file.names = ("index.html")',
            'mimetype.assign = (".html" => "text/html", ".js" => "text/javascript", '
            '".css" => "text/css", ".json" => "application/json", ".svg" => "image/svg+xml", '
            '".xml" => "application/xml", ".gz" => "application/gzip")',
        ]
        for (h, p), r, spa in zip(self._sites, self._roots, self._spa, strict=True):
            handler = ' server.error-handler-404 = "/index.html"' if spa else ""
            lines.append(
                f'$SERVER["socket"] == "{h}:{p}" {{ server.document-root = "{r}"{handler} }}'
            )
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        conf = self.workdir / "lighttpd.conf"
        conf.write_text(self.config())
        exe = binary("lighttpd", "lighttpd")
        check = subprocess.run([exe, "-tt", "-f", str(conf)], capture_output=True, text=True)
        if check.returncode != 0:
            raise AssertionError(f"lighttpd refused the configuration:\n{check.stderr}")
        self._run([exe, "-D", "-f", str(conf)])
