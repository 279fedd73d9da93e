"""A real OCI registry for the tests: Debian's ``docker-registry``, started here on loopback.

The registry is the distribution project's own server (``/usr/bin/docker-registry``,
package ``docker-registry``), run as a child process with a config written to a temp
directory (filesystem storage there, ``http.addr`` on 127.0.0.1 and a free port), never
the packaged systemd service. It is stopped by its PID at the end of the session.

Images get into it two ways:

* ``docker push`` from the Docker suite's engine (``tests/docker_engine.py``, reused
  here, not copied): dockerd treats 127.0.0.0/8 as an insecure registry by default, so
  a tag ``127.0.0.1:PORT/web:1.0.0`` pushes over plain HTTP;
* :func:`push_image`, the distribution API's monolithic upload by hand, for layers no
  Docker build would write (hand-made whiteouts, ``../`` names, lying sizes).

:class:`Proxy` sits in front of a registry to play a compromised mirror (rewrites
bodies), a flaky one (503s) or a token-authenticated one (the Bearer flow).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import json
import shutil
import signal
import socket
import ssl
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).resolve().parent
REGISTRY_BIN = Path("/usr/bin/docker-registry")
HTPASSWD = shutil.which("htpasswd")
START_TIMEOUT = 20.0
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
USER, PASSWORD = "ci", "s3cret-Pa55"


import docker_engine as _docker  # noqa: E402 - the session plugin (tests/conftest.py)

# The session's Docker engine (docker_daemon, docker_client) comes from the plugin.
RUN_ID: str = _docker.RUN_ID
TEST_LABEL: str = _docker.TEST_LABEL
NOTES: list[str] = _docker._NOTES
make_rootfs = _docker.make_rootfs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Registry:
    """One ``docker-registry`` process, its config and storage in a temp directory."""

    root: Path
    htpasswd: Path | None = None
    tls: tuple[Path, Path] | None = None  # (certificate chain, key)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    started_in: float = 0.0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}"

    def config(self) -> str:
        lines = [
            "version: 0.1",
            "log:",
            "  level: error",
            "  accesslog:",
            "    disabled: true",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.root / 'data'}",
            "  delete:",
            "    enabled: true",
            "http:",
            f"  addr: {self.host}",
            "  secret: artifactcheck-tests",
        ]
        if self.tls:
            lines += ["  tls:", f"    certificate: {self.tls[0]}", f"    key: {self.tls[1]}"]
        if self.htpasswd:
            lines += [
                "auth:",
                "  htpasswd:",
                "    realm: artifactcheck-tests",
                f"    path: {self.htpasswd}",
            ]
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        """Start on a free loopback port (retrying a port lost to a race); wait for /v2/."""
        t0 = time.monotonic()
        for _ in range(5):
            self.port = _free_port()
            path = self.root / "config.yml"
            path.write_text(self.config())
            log = (self.root / "registry.log").open("wb")
            try:
                self.proc = subprocess.Popen(
                    [str(REGISTRY_BIN), "serve", str(path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            finally:
                log.close()
            if self._wait_ready():
                self.started_in = time.monotonic() - t0
                return
            self.stop()
        raise RuntimeError(f"docker-registry did not start: {self.log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with httpx.Client(verify=False, timeout=1) as client:
                    status = client.get(f"{self.url}/v2/").status_code
                if status in (200, 401):
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return False

    def log_tail(self) -> str:
        try:
            return " | ".join((self.root / "registry.log").read_text().splitlines()[-5:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL after 10 s: only the process started here."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _require_registry() -> None:
    if not REGISTRY_BIN.exists():
        _docker._unavailable(f"{REGISTRY_BIN} missing: apt-get install docker-registry")


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """An anonymous plain-HTTP registry on loopback."""
    _require_registry()
    reg = Registry(root=tmp_path_factory.mktemp("registry"))
    reg.start()
    NOTES.append(f"registry tests: docker-registry on {reg.host} ready in {reg.started_in:.2f}s")
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A registry that wants Basic credentials (htpasswd with bcrypt)."""
    _require_registry()
    if HTPASSWD is None:
        _docker._unavailable("htpasswd missing: apt-get install apache2-utils")
    root = tmp_path_factory.mktemp("auth-registry")
    htpasswd = root / "htpasswd"
    subprocess.run(
        [HTPASSWD, "-Bbc", str(htpasswd), USER, PASSWORD], check=True, capture_output=True
    )
    reg = Registry(root=root, htpasswd=htpasswd)
    reg.start()
    yield reg
    reg.stop()


@pytest.fixture(scope="session")
def tls_ca(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import trustme

    return trustme.CA()


@pytest.fixture(scope="session")
def tls_registry(tmp_path_factory: pytest.TempPathFactory, tls_ca: Any) -> Iterator[Registry]:
    """A registry serving HTTPS with a certificate from a private CA (trustme)."""
    _require_registry()
    root = tmp_path_factory.mktemp("tls-registry")
    cert = tls_ca.issue_cert("127.0.0.1")
    chain, key = root / "chain.pem", root / "key.pem"
    cert.private_key_pem.write_to_path(str(key))
    chain.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    reg = Registry(root=root, tls=(chain, key))
    reg.start()
    yield reg
    reg.stop()


def docker_config(path: Path, host: str, user: str = USER, password: str = PASSWORD) -> Path:
    """A ``~/.docker/config.json``-format file with one registry's credentials."""
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return path


# -- pushing by hand -----------------------------------------------------------------


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(members: list[tuple[Any, ...]]) -> bytes:
    """A layer tar from ``(name, kind, payload)``: kind file/dir/symlink/hardlink/raw.

    ``raw`` takes a ready TarInfo and optional bytes: for headers no honest tool writes.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, *rest in members:
            payload = rest[0] if rest else None
            if kind == "raw":
                info, data = name, payload
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
                continue
            info = tarfile.TarInfo(name)
            info.mtime = make_rootfs.MTIME
            if kind == "file":
                data = payload if isinstance(payload, bytes) else str(payload or "").encode()
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, str(payload)
                tar.addfile(info)
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, str(payload)
                tar.addfile(info)
            else:
                raise ValueError(kind)
    return buf.getvalue()


def gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


@dataclass
class Pusher:
    """The distribution API's blob and manifest uploads, by hand."""

    base_url: str
    auth: tuple[str, str] | None = None
    verify: Any = True

    def client(self) -> httpx.Client:
        verify = self.verify
        if isinstance(verify, str):
            verify = ssl.create_default_context(cafile=verify)
        return httpx.Client(base_url=self.base_url, auth=self.auth, verify=verify, timeout=30)

    def blob(self, repo: str, data: bytes) -> str:
        digest = digest_of(data)
        with self.client() as c:
            started = c.post(f"/v2/{repo}/blobs/uploads/")
            assert started.status_code == 202, started.text
            location = started.headers["Location"]
            sep = "&" if "?" in location else "?"
            done = c.put(
                f"{location}{sep}digest={digest}",
                content=data,
                headers={"Content-Type": "application/octet-stream"},
            )
            assert done.status_code == 201, done.text
        return digest

    def manifest(self, repo: str, ref: str, body: bytes, media_type: str) -> str:
        with self.client() as c:
            put = c.put(
                f"/v2/{repo}/manifests/{ref}", content=body, headers={"Content-Type": media_type}
            )
            assert put.status_code == 201, put.text
        return digest_of(body)

    def image(
        self,
        repo: str,
        tag: str,
        layers: list[bytes],
        *,
        media_type: str = LAYER_GZIP,
        sizes: list[int] | None = None,
    ) -> tuple[str, bytes]:
        """Push an OCI image of these layer blobs; (manifest digest, manifest bytes).

        ``sizes`` overrides the declared layer sizes (a lying manifest); the registry
        does not check them on upload.
        """
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "rootfs": {"type": "layers", "diff_ids": []},
                "config": {},
            }
        ).encode()
        config_digest = self.blob(repo, config)
        descriptors = []
        for i, data in enumerate(layers):
            digest = self.blob(repo, data)
            size = sizes[i] if sizes else len(data)
            descriptors.append({"mediaType": media_type, "digest": digest, "size": size})
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
            "layers": descriptors,
        }
        body = json.dumps(doc, indent=2).encode()
        return self.manifest(repo, tag, body, OCI_MANIFEST), body

    def index(self, repo: str, tag: str, entries: list[tuple[str, bytes, dict[str, str]]]) -> str:
        """Push an OCI index of already-pushed manifests: (digest, body, platform)."""
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {"mediaType": OCI_MANIFEST, "digest": d, "size": len(b), "platform": p}
                for d, b, p in entries
            ],
        }
        return self.manifest(repo, tag, json.dumps(doc).encode(), OCI_INDEX)


@pytest.fixture(scope="session")
def pusher(registry: Registry) -> Pusher:
    return Pusher(registry.url)


# -- a proxy in front of a registry ----------------------------------------------------


@dataclass
class Proxy:
    """A registry front: a compromised mirror, a flaky one, or one with a token server.

    ``mutate(path, body) -> body`` rewrites response bodies; ``fail`` is a list of
    statuses answered (and popped) before forwarding; ``bearer`` = (user, password)
    makes it demand a token from its own ``/token`` endpoint, which checks Basic
    credentials, as a registry behind an auth service does.
    """

    upstream: str
    mutate: Callable[[str, bytes], bytes] | None = None
    drop_headers: tuple[str, ...] = ()
    fail: list[int] = field(default_factory=list)
    bearer: tuple[str, str] | None = None
    token_requests: list[dict[str, str]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    redirect_blobs: str | None = None  # answer blob GETs with a 307 to this base URL
    authorizations: list[str] = field(default_factory=list)  # Authorization headers seen
    server: ThreadingHTTPServer | None = None
    token: str = "tok-" + RUN_ID

    @property
    def host(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def start(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                proxy.requests.append(self.path)
                proxy.authorizations.append(self.headers.get("Authorization", ""))
                if self.path.startswith("/token"):
                    return self._token()
                if proxy.fail:
                    return self._send(proxy.fail.pop(0), b"busy", {})
                if proxy.bearer and self.headers.get("Authorization") != f"Bearer {proxy.token}":
                    realm = f"http://{proxy.host}/token"
                    challenge = f'Bearer realm="{realm}",service="test-registry"'
                    if self.path.startswith("/v2/") and len(self.path) > 4:
                        repo = self.path[4:].split("/manifests/")[0].split("/blobs/")[0]
                        challenge += f',scope="repository:{repo}:pull"'
                    return self._send(401, b"{}", {"WWW-Authenticate": challenge})
                if proxy.redirect_blobs and "/blobs/" in self.path:
                    return self._send(307, b"", {"Location": proxy.redirect_blobs + self.path})
                with httpx.Client(timeout=30) as c:
                    up = c.get(
                        proxy.upstream + self.path,
                        headers={"Accept": self.headers.get("Accept", "*/*")},
                    )
                body = up.content
                if proxy.mutate is not None:
                    body = proxy.mutate(self.path, body)
                keep = ("Content-Type", "Docker-Content-Digest", "WWW-Authenticate")
                headers = {
                    k: up.headers[k]
                    for k in keep
                    if k in up.headers and k not in proxy.drop_headers
                }
                self._send(up.status_code, body, headers)

            def _token(self) -> None:
                from urllib.parse import parse_qsl, urlsplit

                query = dict(parse_qsl(urlsplit(self.path).query))
                query["authorization"] = self.headers.get("Authorization", "")
                proxy.token_requests.append(query)
                assert proxy.bearer is not None
                user, password = proxy.bearer
                good = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
                if query["authorization"] != good:
                    return self._send(401, b'{"details":"bad credentials"}', {})
                body = json.dumps({"token": proxy.token, "expires_in": 300}).encode()
                self._send(200, body, {"Content-Type": "application/json"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def proxy_for() -> Iterator[Callable[..., Proxy]]:
    made: list[Proxy] = []

    def make(upstream: str, **kwargs: Any) -> Proxy:
        p = Proxy(upstream, **kwargs)
        p.start()
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop()


# -- images pushed by docker -----------------------------------------------------------


@dataclass(frozen=True)
class Pushed:
    """Images pushed to the registry by the session's dockerd."""

    site: Path
    single: str  # 127.0.0.1:PORT/web:1.0.0, one layer (docker import)
    single_digest: str
    layered: str  # 127.0.0.1:PORT/web:1.1.0, FROM single + COPY + RUN rm
    layered_digest: str
    changed: str  # the site file the layered image replaces
    removed: str  # the site file it deletes (a whiteout)
    added: str  # the file it adds


LAYERED_DOCKERFILE = """\
FROM {base}
COPY index.html /usr/share/nginx/html/index.html
COPY extra.txt /usr/share/nginx/html/extra.txt
RUN ["/bin/busybox", "rm", "/usr/share/nginx/html/{removed}"]
"""


def _push(client: Any, ref: str) -> str:
    repo, _, tag = ref.rpartition(":")
    digest = ""
    for line in client.api.push(repo, tag=tag, stream=True, decode=True):
        if "error" in line:
            raise RuntimeError(f"docker push {ref}: {line['error']}")
        aux = line.get("aux") or {}
        digest = aux.get("Digest", digest)
    assert digest.startswith("sha256:"), f"docker push {ref}: no digest reported"
    return str(digest)


@pytest.fixture(scope="session")
def pushed(
    docker_client: Any,
    registry: Registry,
    site_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Pushed]:
    """``docker import`` the site image and build a second one FROM it; push both."""
    busybox = make_rootfs.BUSYBOX
    if not busybox.exists() or not make_rootfs.is_static_elf(busybox):
        _docker._unavailable(f"{busybox} missing or not static: apt-get install busybox-static")
    work = tmp_path_factory.mktemp("registry-images")
    labels = {TEST_LABEL: RUN_ID}
    single = f"{registry.host}/web:1.0.0"
    layered = f"{registry.host}/web:1.1.0"
    t0 = time.monotonic()
    made: list[str] = []
    try:
        tar = work / "rootfs.tar"
        make_rootfs.build_rootfs(site_dir, tar)
        docker_client.api.import_image(
            src=str(tar),
            repository=single.rsplit(":", 1)[0],
            tag="1.0.0",
            changes=make_rootfs.import_changes(labels),
        )
        made.append(single)
        single_digest = _push(docker_client, single)
        files = sorted(
            p.relative_to(site_dir).as_posix() for p in site_dir.rglob("*") if p.is_file()
        )
        removed = next(f for f in files if f != "index.html" and "/" not in f)
        ctx = work / "ctx"
        ctx.mkdir()
        (ctx / "index.html").write_bytes((site_dir / "index.html").read_bytes() + b"<!-- 1.1 -->\n")
        (ctx / "extra.txt").write_text("added in 1.1.0\n")
        (ctx / "Dockerfile").write_text(LAYERED_DOCKERFILE.format(base=single, removed=removed))
        docker_client.images.build(
            path=str(ctx), tag=layered, pull=False, rm=True, forcerm=True, labels=labels
        )
        made.append(layered)
        layered_digest = _push(docker_client, layered)
        NOTES.append(f"registry tests: two images built and pushed in {time.monotonic() - t0:.1f}s")
        yield Pushed(
            site=site_dir,
            single=single,
            single_digest=single_digest,
            layered=layered,
            layered_digest=layered_digest,
            changed="index.html",
            removed=removed,
            added="extra.txt",
        )
    finally:
        for ref in reversed(made):
            with contextlib.suppress(Exception):
                docker_client.images.remove(ref, force=True)
