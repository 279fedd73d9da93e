"""One real Apache httpd (Debian's ``apache2``) on loopback serving many virtual hosts.

Each virtual host listens on its own 127.x.y.z address and a free port and serves a
Rails application's ``public/`` the way the Rails asset pipeline guide configures
Apache for precompressed assets: a gzip-accepting client asking for ``x.css`` is
rewritten to ``x.css.gz``, and every ``*.css.gz``/``*.js.gz`` is sent with its type
forced and ``Content-Encoding: gzip`` — also to a client that asked for ``x.css.gz``
itself with ``Accept-Encoding: identity``. One process per test, with its own
ServerRoot, PidFile, logs and Listen addresses under a private directory; as root it
runs its children as ``www-data``, so that directory and the roots it serves are
copied where ``www-data`` can read them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from layout_nginx import free_port
from server_process import end, wait_listening

MODULES = Path("/usr/lib/apache2/modules")

#: The Rails guide's precompressed-asset configuration, for ``@ROOT@/assets``.
RAILS_ASSETS = """
    <Directory "@ROOT@/assets">
        RewriteEngine On
        RewriteCond %{HTTP:Accept-Encoding} \\bgzip\\b
        RewriteCond %{REQUEST_FILENAME}.gz -f
        RewriteRule ^(.+)$ $1.gz [L]
    </Directory>
    <FilesMatch "\\.css\\.gz$">
        ForceType text/css
        Header set Content-Encoding gzip
    </FilesMatch>
    <FilesMatch "\\.js\\.gz$">
        ForceType text/javascript
        Header set Content-Encoding gzip
    </FilesMatch>
"""

_LOADED = (
    "mpm_event",
    "authz_core",
    "mime",
    "dir",
    "headers",
    "rewrite",
)


def apache_binary() -> str:
    """The installed httpd, or skip: these tests are about a real server's behaviour."""
    found = shutil.which("apache2") or (
        "/usr/sbin/apache2" if Path("/usr/sbin/apache2").exists() else None
    )
    if found is None or not MODULES.is_dir():
        pytest.skip("Apache httpd is not installed (apt-get install apache2; .ci/docker.sh)")
    return found


class Apache:
    """Virtual hosts added with :meth:`serve`, then one :meth:`start` for all of them."""

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="artifactcheck-apache-"))
        self.workdir.chmod(0o755)  # readable by the children's user
        self._hosts: list[tuple[str, int, str]] = []
        self._proc: subprocess.Popen[bytes] | None = None

    def serve(self, host: str, root: Path, extra: str = RAILS_ASSETS) -> str:
        """Serve a copy of ``root`` on ``host``; returns its base URL, ``http://host:port/``."""
        served = self.workdir / f"root-{len(self._hosts)}"
        shutil.copytree(root, served)
        for path in [served, *served.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        port = free_port(host)
        body = f'    DocumentRoot "{served}"\n' + extra.replace("@ROOT@", str(served))
        self._hosts.append((host, port, body))
        return f"http://{host}:{port}/"

    def config(self) -> str:
        w = self.workdir
        lines = [f"LoadModule {m}_module {MODULES}/mod_{m}.so" for m in _LOADED]
        if os.geteuid() == 0:
            lines += ["User www-data", "Group www-data"]
        lines += [
            f'ServerRoot "{w}"',
            f'PidFile "{w}/httpd.pid"',
            f'ErrorLog "{w}/error.log"',
            'LogFormat "%h \\"%r\\" %>s %{Content-Encoding}o" short',
            f'CustomLog "{w}/access.log" short',
            f"Mutex file:{w} default",
            "ServerName localhost",
            "LogLevel warn",
            "TypesConfig /etc/mime.types",
            "StartServers 1",
            "ServerLimit 1",
            "ThreadsPerChild 16",
            "MaxRequestWorkers 16",
            "<Directory />",
            "    AllowOverride None",
            "    Require all granted",
            "</Directory>",
        ]
        for host, port, body in self._hosts:
            lines += [
                f"Listen {host}:{port}",
                f"<VirtualHost {host}:{port}>",
                body,
                "</VirtualHost>",
            ]
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        conf = self.workdir / "httpd.conf"
        conf.write_text(self.config(), encoding="utf-8")
        binary = apache_binary()
        check = subprocess.run(
            [binary, "-t", "-f", str(conf)], capture_output=True, text=True, env=_env()
        )
        if check.returncode != 0:
            raise AssertionError(f"apache2 -t refused the configuration:\n{check.stderr}")
        self._proc = subprocess.Popen(
            [binary, "-f", str(conf), "-DFOREGROUND"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        wait_listening(
            self._proc,
            [(host, port) for host, port, _ in self._hosts],
            name="apache2",
            why=self.log,
        )

    def log(self) -> str:
        error = self.workdir / "error.log"
        return error.read_text(errors="replace") if error.exists() else "(no error log)"

    def access(self) -> list[str]:
        """The access log's lines: client, request line, status, Content-Encoding sent."""
        log = self.workdir / "access.log"
        return log.read_text(errors="replace").splitlines() if log.exists() else []

    def stop(self) -> None:
        """Stop the server (its PID, the one this object started) and remove its files."""
        proc, self._proc = self._proc, None
        end(proc)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _env() -> dict[str, str]:
    """apache2 run directly, not through apache2ctl: the variables its config reads."""
    return {**os.environ, "APACHE_RUN_DIR": "/tmp", "APACHE_LOG_DIR": "/tmp", "LANG": "C"}
