"""A real Docker engine for the tests: reuse a reachable one, or start a private dockerd.

No registry is reachable where these tests run, so images are made with ``docker
import`` from tars (``tests/fixtures/docker/make_rootfs.py``) and nothing is ever pulled.

The private daemon must not disturb the machine or another session running the same
suite: it gets its own socket, data root, exec root and pidfile under a fresh
``/tmp/acdock-*`` directory, its own bridge interface (``--bridge acbr<id>``, made here
with an unused 10.x subnet, instead of the shared ``docker0``), its own address pool
for user networks, and ``--iptables=false --ip-forward=false`` so it adds no firewall
chain and flips no sysctl: the host reaches containers directly on the bridge, and
published ports go through docker-proxy. Everything made here carries the label
``artifactcheck.test=<run id>``; at the end of the session nothing with it may remain,
the daemon is stopped by its PID, its mounts, bridge and (if any) iptables chains are
gone, and the directory is removed.

Without an engine, outside CI, the tests are skipped and the reason is printed in the
terminal summary; with ``CI=true`` a missing engine is a failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import docker
import docker.errors
import pytest
from ci_support import unmet

from artifactcheck.clients.docker import PURPOSE_LABEL, DockerEngine
from artifactcheck.model.errors import DependencyError
from artifactcheck.model.settings import DockerSource

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
#: The build served by the test images; one constant so it can be switched.
SITE_FIXTURE = FIXTURES / "builds" / "vite-r1"
HTML_ROOT = "/usr/share/nginx/html"
VERSION = "1.0"
VERSION_LABEL = "org.opencontainers.image.version"
TEST_LABEL = "artifactcheck.test"
RUN_ID = uuid.uuid4().hex[:10]
ENGINE_START_TIMEOUT = 60.0
ENGINE_STOP_TIMEOUT = 30.0
EXTRA_DOCKERD_ARGS_ENV = "ARTIFACTCHECK_DOCKERD_ARGS"  # e.g. "--storage-driver vfs"

_NOTES: list[str] = []  # printed in the terminal summary: skip reasons, timings


def _load_make_rootfs() -> ModuleType:
    path = FIXTURES / "docker" / "make_rootfs.py"
    spec = importlib.util.spec_from_file_location("artifactcheck_make_rootfs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_rootfs = _load_make_rootfs()


def _unavailable(reason: str) -> None:
    """Skip (printing why) outside CI; fail in CI, where the engine is a requirement."""
    _NOTES.append(f"docker tests: no engine: {reason}")
    unmet(f"no Docker engine: {reason}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for note in dict.fromkeys(_NOTES):
        terminalreporter.write_line(note)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)


def _unix_ping(sock: Path, timeout: float = 2.0) -> bool:
    """True when the engine behind a unix socket answers ``GET /_ping`` with OK."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
    except OSError:
        return False
    return data.startswith(b"HTTP/1.") and b" 200 " in data.split(b"\r\n", 1)[0]


# -- the private daemon --------------------------------------------------------------


def _iptables_rules() -> dict[str, list[str]] | None:
    """``iptables -S`` of the tables dockerd writes to, or None without iptables."""
    if shutil.which("iptables") is None:
        return None
    out: dict[str, list[str]] = {}
    for table in ("filter", "nat"):
        result = _run("iptables", "-w", "-t", table, "-S")
        if result.returncode != 0:
            return None
        out[table] = result.stdout.splitlines()
    return out


def _used_networks() -> list[ipaddress.IPv4Network]:
    used = []
    for line in _run("ip", "-4", "-o", "addr").stdout.splitlines():
        for word in line.split():
            if "/" in word and word[0].isdigit():
                with contextlib.suppress(ValueError):
                    used.append(ipaddress.ip_network(word, strict=False))
    for line in _run("ip", "-4", "route", "show", "table", "all").stdout.splitlines():
        word = line.split()[0] if line.split() else ""
        if "/" in word and word[0].isdigit():
            with contextlib.suppress(ValueError):
                used.append(ipaddress.ip_network(word, strict=False))
    return [n for n in used if isinstance(n, ipaddress.IPv4Network)]


def _free_network(prefix: int, rng: random.Random, avoid: list[ipaddress.IPv4Network]) -> Any:
    for _ in range(500):
        base = ipaddress.ip_network(
            f"10.{rng.randrange(64, 250)}.{rng.randrange(256)}.0/{prefix}", strict=False
        )
        if not any(base.overlaps(n) for n in avoid):
            return base
    raise RuntimeError("no free 10.x subnet for the private Docker bridge")


@dataclass
class PrivateDaemon:
    """A dockerd started here, with everything it needs to be undone exactly."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="acdock-", dir="/tmp")))
    bridge: str = field(default_factory=lambda: f"acbr{RUN_ID[:8]}")
    proc: subprocess.Popen[bytes] | None = None
    iptables_before: dict[str, list[str]] | None = None
    ip_forward_before: str | None = None
    bridge_made: bool = False
    network_ids: set[str] = field(default_factory=set)
    started_in: float = 0.0
    stopped_in: float = 0.0
    cleanup_log: list[str] = field(default_factory=list)
    pool: str = ""  # --default-address-pool base, chosen in start()

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def flags(self) -> list[str]:
        return [
            "-H", self.base_url,
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "docker.pid"),
            "--bridge", self.bridge,
            "--default-address-pool", f"base={self.pool},size=24",
            "--iptables=false",
            "--ip-forward=false",
            "--shutdown-timeout", "5",
            *shlex.split(os.environ.get(EXTRA_DOCKERD_ARGS_ENV, "")),
        ]  # fmt: skip

    def start(self) -> None:
        """Start dockerd and wait for ``/_ping``; raise RuntimeError saying why not."""
        t0 = time.monotonic()
        if os.geteuid() != 0:
            raise RuntimeError("starting dockerd needs root")
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise RuntimeError("dockerd not installed (apt-get install docker.io; .ci/docker.sh)")
        if shutil.which("ip") is None:
            raise RuntimeError("iproute2's ip not installed")
        self.iptables_before = _iptables_rules()
        self.ip_forward_before = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
        rng = random.Random(RUN_ID)
        used = _used_networks()
        subnet = _free_network(24, rng, used)
        self.pool = str(_free_network(16, rng, [*used, subnet]))
        gateway = f"{next(iter(subnet.hosts()))}/{subnet.prefixlen}"
        for argv in (
            ("ip", "link", "add", self.bridge, "type", "bridge"),
            ("ip", "addr", "add", gateway, "dev", self.bridge),
            ("ip", "link", "set", self.bridge, "up"),
        ):
            result = _run(*argv)
            if result.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip()}")
            self.bridge_made = True
        log = (self.root / "dockerd.log").open("wb")
        try:
            self.proc = subprocess.Popen(
                [dockerd, *self.flags],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C goes to pytest, which then cleans up
            )
        finally:
            log.close()
        deadline = time.monotonic() + ENGINE_START_TIMEOUT
        while not _unix_ping(self.socket):
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"dockerd did not answer /_ping within {ENGINE_START_TIMEOUT:g}s: "
                    f"{self.log_tail()}"
                )
            time.sleep(0.1)
        self.started_in = time.monotonic() - t0

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = (self.root / "dockerd.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        kept = [ln for ln in text.splitlines() if "module=grpc" not in ln]
        return " | ".join(kept[-lines:])

    def stop(self) -> None:
        """Stop the daemon by PID and undo every trace of it; record what was done."""
        t0 = time.monotonic()
        if self.proc is not None and self.proc.poll() is None:
            containerd_pid = self._pid_from(self.root / "exec" / "containerd" / "containerd.pid")
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(ENGINE_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.cleanup_log.append(f"dockerd {self.proc.pid} ignored SIGTERM: killed")
                self.proc.kill()
                self.proc.wait(10)
            if containerd_pid and self._ours(containerd_pid):
                self._kill(containerd_pid, "containerd")
        for pid in self._stray_pids():  # shims whose command line names our directory
            self._kill(pid, "stray process")
        self._unmount_all()
        for net_id in self.network_ids:
            iface = f"br-{net_id[:12]}"
            if _run("ip", "link", "show", iface).returncode == 0:
                _run("ip", "link", "delete", iface)
                self.cleanup_log.append(f"deleted leftover interface {iface}")
        if self.bridge_made:
            _run("ip", "link", "delete", self.bridge)
        self._restore_iptables()
        if self.ip_forward_before is not None:
            now = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
            if now != self.ip_forward_before:
                Path("/proc/sys/net/ipv4/ip_forward").write_text(self.ip_forward_before)
                self.cleanup_log.append(f"restored ip_forward={self.ip_forward_before}")
        shutil.rmtree(self.root, ignore_errors=True)
        self.stopped_in = time.monotonic() - t0

    def leftovers(self) -> list[str]:
        """What of this daemon is still on the machine (should be nothing)."""
        found = []
        if self.proc is not None and self.proc.poll() is None:
            found.append(f"dockerd pid {self.proc.pid} still running")
        found += [f"process {pid}" for pid in self._stray_pids()]
        found += [f"mount {m}" for m in self._mounts()]
        if _run("ip", "link", "show", self.bridge).returncode == 0:
            found.append(f"interface {self.bridge}")
        if self.root.exists():
            found.append(f"directory {self.root}")
        after = _iptables_rules()
        if self.iptables_before is not None and after is not None:
            for table, rules in after.items():
                new = set(rules) - set(self.iptables_before.get(table, []))
                found += [f"iptables -t {table} {r}" for r in sorted(new) if self._is_ours(r)]
        return found

    # helpers

    def _pid_from(self, path: Path) -> int | None:
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    def _ours(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return str(self.root).encode() in cmdline

    def _stray_pids(self) -> list[int]:
        me = os.getpid()
        return [
            int(p.name)
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and int(p.name) != me and self._ours(int(p.name))
        ]

    def _kill(self, pid: int, what: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            for _ in range(50):
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        self.cleanup_log.append(f"ended {what} {pid}")

    def _mounts(self) -> list[str]:
        root = str(self.root)
        out = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                out.append(point)
        return out

    def _unmount_all(self) -> None:
        for point in sorted(self._mounts(), key=len, reverse=True):
            if _run("umount", point).returncode != 0:
                _run("umount", "-l", point)
            self.cleanup_log.append(f"unmounted {point}")

    def _is_ours(self, rule: str) -> bool:
        return (
            "DOCKER" in rule
            or self.bridge in rule
            or any(f"br-{n[:12]}" in rule for n in self.network_ids)
        )

    def _restore_iptables(self) -> None:
        """Delete the rules and chains dockerd added (none with --iptables=false)."""
        after = _iptables_rules()
        if self.iptables_before is None or after is None:
            return
        for table, rules in after.items():
            before = set(self.iptables_before.get(table, []))
            added = [r for r in rules if r not in before and self._is_ours(r)]
            for rule in reversed([r for r in added if r.startswith("-A ")]):
                _run("iptables", "-w", "-t", table, "-D", *shlex.split(rule)[1:])
                self.cleanup_log.append(f"iptables -t {table} deleted: {rule}")
            for rule in added:
                if rule.startswith("-N "):
                    chain = rule.split()[1]
                    _run("iptables", "-w", "-t", table, "-F", chain)
                    _run("iptables", "-w", "-t", table, "-X", chain)
                    self.cleanup_log.append(f"iptables -t {table} removed chain {chain}")
            for rule in self.iptables_before.get(table, []):
                if rule.startswith("-P ") and rule not in rules:
                    _run("iptables", "-w", "-t", table, *shlex.split(rule))
                    self.cleanup_log.append(f"iptables -t {table} restored policy: {rule}")


# -- fixtures -------------------------------------------------------------------------


@dataclass
class EngineInfo:
    """The engine the session uses, and the daemon started for it, if any."""

    base_url: str
    daemon: PrivateDaemon | None


def _engine_answers(base_url: str) -> str | None:
    """None when the engine answers, else the reason it does not."""
    with DockerEngine(base_url, timeout=5) as engine:
        try:
            engine.ping()
        except DependencyError as exc:
            return str(exc)
    return None


def _label_filter() -> dict[str, str]:
    return {"label": f"{TEST_LABEL}={RUN_ID}"}


def _sweep(base_url: str, *, private: bool) -> list[str]:
    """Remove whatever this session left on the engine; say what it was."""
    found: list[str] = []
    client = docker.DockerClient(base_url=base_url, version="auto", timeout=60)
    try:
        leftovers = client.containers.list(all=True, filters=_label_filter())
        if private:  # on a shared engine these could be someone else's
            leftovers += client.containers.list(all=True, filters={"label": PURPOSE_LABEL})
        for c in leftovers:
            found.append(f"container {c.name}")
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True, v=True)
        for n in client.networks.list(filters=_label_filter()):
            found.append(f"network {n.name}")
            with contextlib.suppress(docker.errors.NotFound):
                n.remove()
        for i in client.images.list(filters=_label_filter()):
            found.append(f"image {i.tags or i.id}")
            with contextlib.suppress(docker.errors.NotFound):
                client.images.remove(i.id, force=True)
    finally:
        client.close()
    return found


@pytest.fixture(scope="session")
def docker_daemon() -> Iterator[EngineInfo]:
    """A reachable engine (``DOCKER_HOST``) or a private dockerd, cleaned up at the end."""
    reasons = []
    host = os.environ.get("DOCKER_HOST")
    info: EngineInfo | None = None
    if host:
        why = _engine_answers(host)
        if why is None:
            info = EngineInfo(base_url=host, daemon=None)
            _NOTES.append(f"docker tests: using DOCKER_HOST={host}")
        else:
            reasons.append(f"DOCKER_HOST={host} does not answer: {why}")
    daemon = None
    if info is None:
        daemon = PrivateDaemon()
        try:
            daemon.start()
        except Exception as exc:  # any failure here means "no engine"
            reasons.append(f"could not start a private dockerd: {exc}")
            daemon.stop()
            _unavailable("; ".join(reasons))
        info = EngineInfo(base_url=daemon.base_url, daemon=daemon)
        _NOTES.append(
            f"docker tests: private dockerd pid {daemon.proc.pid if daemon.proc else '?'} "
            f"({daemon.base_url}, bridge {daemon.bridge}) ready in {daemon.started_in:.2f}s"
        )
    yield info
    problems = [
        f"left on the engine: {x}" for x in _sweep(info.base_url, private=daemon is not None)
    ]
    if daemon is not None:
        daemon.stop()
        problems += [f"left on the machine: {x}" for x in daemon.leftovers()]
        _NOTES.append(
            f"docker tests: private dockerd stopped and cleaned in {daemon.stopped_in:.2f}s"
            + (f" ({'; '.join(daemon.cleanup_log)})" if daemon.cleanup_log else "")
        )
    if problems:
        pytest.fail("the docker session did not clean up: " + "; ".join(problems), pytrace=False)


@pytest.fixture(scope="session")
def docker_host(docker_daemon: EngineInfo) -> str:
    """The engine's address, e.g. for ``DOCKER_HOST`` of a CLI under test."""
    return docker_daemon.base_url


@pytest.fixture(scope="session")
def docker_client(docker_daemon: EngineInfo) -> Iterator[Any]:
    """The raw SDK client, for setting up and inspecting what the tests run."""
    client = docker.DockerClient(base_url=docker_daemon.base_url, version="auto", timeout=60)
    yield client
    client.close()


@pytest.fixture(scope="session")
def docker_engine(docker_daemon: EngineInfo) -> Iterator[DockerEngine]:
    """The code under test, bound to the session's engine."""
    with DockerEngine(docker_daemon.base_url) as engine:
        yield engine


@pytest.fixture(scope="session")
def run_id() -> str:
    """Unique per session: labels and names of everything the tests make."""
    return RUN_ID


@pytest.fixture(scope="session")
def test_labels() -> dict[str, str]:
    """The label every object made by this session carries."""
    return {TEST_LABEL: RUN_ID}


@pytest.fixture(scope="session")
def select() -> Callable[..., DockerSource]:
    """A DockerSource selecting this session's containers plus the given label filters."""

    def make(*labels: str, **kwargs: Any) -> DockerSource:
        return DockerSource(labels=[f"{TEST_LABEL}={RUN_ID}", *labels], **kwargs)

    return make


@pytest.fixture(scope="session")
def site_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build the images serve: SITE_FIXTURE, or a small generated one until it exists."""
    if SITE_FIXTURE.is_dir():
        return SITE_FIXTURE
    site = tmp_path_factory.mktemp("site")
    (site / "assets").mkdir()
    (site / "index.html").write_text(
        '<!doctype html><script type="module" src="/assets/index-a1b2c3.js"></script>\n'
    )
    (site / "assets" / "index-a1b2c3.js").write_text("console.log('release 1.0');\n")
    (site / "assets" / "index-d4e5f6.css").write_text("body{color:#123}\n")
    (site / "robots.txt").write_text("User-agent: *\n")
    return site


@dataclass(frozen=True)
class SiteImages:
    """The clean and the tampered release image, both labelled version 1.0."""

    site: Path
    clean: str
    clean_id: str
    tampered: str
    tampered_id: str
    tampered_path: str  # the site file whose bytes differ
    version: str = VERSION
    html_root: str = HTML_ROOT
    version_label: str = VERSION_LABEL


@pytest.fixture(scope="session")
def site_images(
    docker_client: Any, site_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SiteImages]:
    """Import the two images from rootfs tars; remove them at the end of the session."""
    busybox = make_rootfs.BUSYBOX
    if not busybox.exists() or not make_rootfs.is_static_elf(busybox):
        _unavailable(f"{busybox} missing or not static: apt-get install busybox-static")
    work = tmp_path_factory.mktemp("rootfs")
    labels = {VERSION_LABEL: VERSION, TEST_LABEL: RUN_ID}
    made: list[str] = []
    refs = {}
    try:
        for kind, replace in (("clean", None), ("tampered", make_rootfs.tampered_bytes(site_dir))):
            tar = work / f"{kind}.tar"
            make_rootfs.build_rootfs(site_dir, tar, replace=replace)
            ref = f"artifactcheck-test/site:{kind}-{RUN_ID}"
            docker_client.api.import_image(
                src=str(tar),
                repository=ref.split(":")[0],
                tag=ref.split(":")[1],
                changes=make_rootfs.import_changes(labels),
            )
            tar.unlink()
            image_id = docker_client.api.inspect_image(ref)["Id"]
            made.append(image_id)
            refs[kind] = (ref, image_id)
        yield SiteImages(
            site=site_dir,
            clean=refs["clean"][0],
            clean_id=refs["clean"][1],
            tampered=refs["tampered"][0],
            tampered_id=refs["tampered"][1],
            tampered_path=make_rootfs.tamper_target(site_dir),
        )
    finally:
        for image_id in made:
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.images.remove(image_id, force=True)


class ContainerFactory:
    """Creates (never pulls) and starts labelled containers; removes them afterwards."""

    def __init__(self, client: Any, daemon: EngineInfo) -> None:
        self.client = client
        self.daemon = daemon
        self.containers: list[Any] = []
        self.networks: list[Any] = []
        self._n = 0

    def network(self, suffix: str = "net") -> Any:
        net = self.client.networks.create(
            f"ac-{RUN_ID}-{suffix}", driver="bridge", labels={TEST_LABEL: RUN_ID}
        )
        self.networks.append(net)
        if self.daemon.daemon is not None:
            self.daemon.daemon.network_ids.add(net.id)
        return net

    def create(self, image: str, *, labels: dict[str, str] | None = None) -> Any:
        """A created, never started container of ``image``."""
        self._n += 1
        container = self.client.containers.create(
            image,
            name=f"ac-{RUN_ID}-{self._n}",
            labels={TEST_LABEL: RUN_ID, VERSION_LABEL: VERSION, **(labels or {})},
        )
        self.containers.append(container)
        return container

    def start(
        self,
        image: str,
        *,
        labels: dict[str, str] | None = None,
        networks: tuple[str, ...] = (),
        publish: bool = False,
        wait: bool = True,
    ) -> Any:
        """A running container of ``image``, its httpd answering when ``wait``."""
        self._n += 1
        container = self.client.containers.create(
            image,
            name=f"ac-{RUN_ID}-{self._n}",
            labels={TEST_LABEL: RUN_ID, VERSION_LABEL: VERSION, **(labels or {})},
            ports={"80/tcp": None} if publish else None,
            detach=True,
        )
        self.containers.append(container)
        for name in networks:
            self.client.networks.get(name).connect(container)
        container.start()
        container.reload()
        if wait:
            _wait_http(container)
        return container

    def close(self) -> None:
        for container in reversed(self.containers):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
        for net in reversed(self.networks):
            with contextlib.suppress(docker.errors.NotFound):
                net.remove()


def _wait_http(container: Any, timeout: float = 15.0) -> None:
    """Poll the container's httpd on its first IP until it answers."""
    import urllib.request

    networks = container.attrs["NetworkSettings"]["Networks"]
    ip = next(n["IPAddress"] for _, n in sorted(networks.items()) if n.get("IPAddress"))
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{ip}/index.html", timeout=2) as resp:
                resp.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def containers(docker_client: Any, docker_daemon: EngineInfo) -> Iterator[ContainerFactory]:
    """Start containers and networks in a test; all removed when it ends."""
    factory = ContainerFactory(docker_client, docker_daemon)
    try:
        yield factory
    finally:
        factory.close()
