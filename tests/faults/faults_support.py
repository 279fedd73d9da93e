"""Helpers for the fault suite: leak probes, check cycles under an armed policy, certificates.

The policy in every verify-path fault is the most trigger-happy one allowed
(quarantine on the first mismatch, half the fleet may go), and every fleet carries one
instance that really drifted: the test then proves both that the policy was armed (the
drifted instance is quarantined) and that the fault did not trip it (nobody else is).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from ci_support import unmet
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from artifactcheck.discover.static import instances_from_targets
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge.decide import History
from artifactcheck.model.records import replace
from artifactcheck.model.settings import CheckSpec, load_spec
from artifactcheck.model.values import ActionKind, Instance, Report, Verdict
from artifactcheck.pipeline import check_once
from artifactcheck.release.sources import Expectations
from artifactcheck.release.wiring import build_expectations

RESULTS_DIR = Path(__file__).parent / ".results"
T = TypeVar("T")

#: Timeouts short enough that a hanging instance costs about a second per cycle.
FAST_HTTP: dict[str, Any] = {
    "connect_timeout": 0.5,
    "read_timeout": 0.5,
    "request_timeout": 1.0,
    "instance_deadline": 3.0,
}
FAST_RETRY: dict[str, Any] = {"attempts": 2, "base_delay": 0.01, "max_delay": 0.05}
#: Quarantine on the first confirmed mismatch; up to half a workload may go.
ARMED_POLICY: dict[str, Any] = {
    "mode": "quarantine",
    "confirmations": 1,
    "max_quarantine_fraction": 0.5,
    "min_ready": 1,
}
FD_TOLERANCE = 2  # an epoll or a self-pipe being torn down while we count


def open_fds() -> int:
    """File descriptors open in this process now."""
    return len(os.listdir("/proc/self/fd"))


def fd_targets() -> dict[str, str]:
    """What each open fd points at (socket:[inode], a file, anon_inode:[eventpoll])."""
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return out


def _sockets() -> dict[str, str]:
    """socket inode -> "local remote state" from /proc/net/tcp, to name a leaked socket."""
    out = {}
    states = {"01": "ESTABLISHED", "06": "TIME_WAIT", "08": "CLOSE_WAIT", "0A": "LISTEN"}
    with contextlib.suppress(OSError), open("/proc/net/tcp", encoding="ascii") as fh:
        for line in list(fh)[1:]:
            parts = line.split()
            local, remote, state, inode = parts[1], parts[2], parts[3], parts[9]

            def addr(hexaddr: str) -> str:
                ip, port = hexaddr.split(":")
                return f"{ipaddress.IPv4Address(bytes.fromhex(ip)[::-1])}:{int(port, 16)}"

            out[inode] = f"{addr(local)}->{addr(remote)} {states.get(state, state)}"
    return out


def settle_fds(baseline: dict[str, str], *, timeout: float = 3.0) -> list[str]:
    """Fds opened since ``baseline`` still open once closing had a moment to go."""
    deadline = time.monotonic() + timeout
    while True:
        now = fd_targets()
        extra = [f"{fd}->{target}" for fd, target in now.items() if baseline.get(fd) != target]
        if len(now) <= len(baseline) or time.monotonic() > deadline:
            if len(now) <= len(baseline):
                return []
            sockets = _sockets()
            return [
                f"{e} {sockets.get(e.rsplit('[', 1)[-1].rstrip(']'), '')}".strip() for e in extra
            ]
        time.sleep(0.05)


def run_async(coro: Awaitable[T]) -> tuple[T, int]:
    """Run ``coro`` in a fresh loop; also return how many tasks it left running."""

    async def main() -> tuple[T, int]:
        result = await coro
        current = asyncio.current_task()
        left: list[asyncio.Task[Any]] = []
        for _ in range(50):  # finalisers of abandoned generators run as short tasks
            left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
            if not left:
                break
            await asyncio.sleep(0.01)
        return result, len(left)

    return asyncio.run(main())


@dataclass
class Recorder:
    """What one fault test saw; the ``fault`` fixture writes it to the results file."""

    test: str
    key: str | None = None
    group: str = ""
    fault: str = ""
    expected: str = ""
    observed: str = ""
    verdicts: dict[str, str] = field(default_factory=dict)
    quarantined: list[str] = field(default_factory=list)
    false_quarantines: int | None = None
    crashed: bool = False
    leaked_tasks: int | None = None
    leaked_fds: int | None = None
    peak_mb: float | None = None
    elapsed: float | None = None
    related: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    leaked: list[str] = field(default_factory=list)  # fd -> target, for the message
    memory: str = ""  # how peak_mb was measured: "traced" or "rss"

    def describe(
        self, key: str, *, group: str, fault: str, expected: str, related: Sequence[str] = ()
    ) -> None:
        """Name the fault and the outcome the design promises for it."""
        self.key, self.group, self.fault, self.expected = key, group, fault, expected
        self.related = list(related)

    @contextlib.contextmanager
    def probe(self, *, memory: str = "traced", collect: bool = False) -> Iterator[None]:
        """Measure wall time, memory peak and fds left open around the block.

        ``memory="traced"`` is the tracemalloc peak (exact, but it slows the official
        kubernetes client tenfold); ``"rss"`` samples the resident set every 20 ms
        and keeps the peak growth, cheap enough for controller runs.

        ``collect`` runs the cyclic garbage collector before counting fds, and
        records how many sockets only it closed: urllib3 2.x ``PoolManager.clear()``
        (what ``ApiClient.close()`` calls) drops its pools without closing them and
        leaves their connections to a weakref finalizer, which waits for the
        collector when an exception's traceback keeps the pool in a cycle.
        """
        fds = fd_targets()
        sampler = _RssSampler() if memory == "rss" else None
        if memory == "traced":
            tracemalloc.start()
        self.memory = memory
        started = time.perf_counter()
        try:
            yield
        except BaseException:
            self.crashed = True
            raise
        finally:
            self.elapsed = round(time.perf_counter() - started, 2)
            if sampler is not None:
                self.peak_mb = sampler.stop()
            elif memory == "traced":
                self.peak_mb = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
                tracemalloc.stop()
            if collect:
                before_gc = settle_fds(fds, timeout=1.0)
                _drop_captured_log_records()
                gc.collect()
                self.leaked = settle_fds(fds)
                self.figures["fds_closed_by_gc"] = len(before_gc) - len(self.leaked)
            else:
                self.leaked = settle_fds(fds)
            self.leaked_fds = len(self.leaked)

    def assert_clean(self, *, max_peak_mb: float = 64.0) -> None:
        """No crash, no leaked task or socket, bounded memory, no false quarantine."""
        assert not self.crashed
        assert self.leaked_tasks in (0, None), f"{self.leaked_tasks} task(s) left running"
        assert (self.leaked_fds or 0) <= FD_TOLERANCE, f"fds left open: {self.leaked}"
        if self.peak_mb is not None:
            assert self.peak_mb < max_peak_mb, f"peak traced memory {self.peak_mb} MB"
        assert not self.false_quarantines, f"false quarantines: {self.quarantined}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON record (without the outcome, added by the fixture)."""
        return {
            name: getattr(self, name)
            for name in (
                "test key group fault expected observed verdicts quarantined false_quarantines "
                "crashed leaked_tasks leaked_fds peak_mb memory elapsed related figures"
            ).split()
        }


def _drop_captured_log_records() -> None:
    """Forget the records pytest keeps for its report: their args hold exceptions.

    A warning logged as ``log.warning("... %s", exc)`` keeps ``exc``, hence its
    traceback and every frame and connection pool on it, alive for as long as the
    record lives; pytest keeps records until the test ends (its text stays).
    """
    for handler in logging.getLogger().handlers:
        records = getattr(handler, "records", None)
        if type(handler).__name__ == "LogCaptureHandler" and isinstance(records, list):
            records.clear()


def _rss() -> int:
    """Resident set size of this process, bytes."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _RssSampler:
    """Peak growth of the resident set over a block, sampled by a daemon thread."""

    def __init__(self, period: float = 0.02) -> None:
        self._base = self._peak = _rss()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        self._thread.start()

    def _run(self, period: float) -> None:
        while not self._done.wait(period):
            self._peak = max(self._peak, _rss())

    def stop(self) -> float:
        """Stop sampling; the peak growth in MiB."""
        self._done.set()
        self._thread.join()
        self._peak = max(self._peak, _rss())
        return round((self._peak - self._base) / 2**20, 1)


# --------------------------------------------------------------------------- cycles


@dataclass
class Outcome:
    """Reports of consecutive cycles over one fetcher, and what policy decided."""

    reports: list[Report]

    @property
    def last(self) -> Report:
        return self.reports[-1]

    def verdict(self, name: str) -> Verdict:
        """The last verdict of one instance."""
        return next(r.verdict for r in self.last.results if r.instance.name == name)

    def verdicts(self) -> dict[str, Verdict]:
        return {r.instance.name: r.verdict for r in self.last.results}

    def counts(self) -> dict[str, int]:
        return dict(Counter(r.verdict.value for r in self.last.results))

    def quarantined(self) -> list[str]:
        """Instances a (non-dry-run) quarantine action was decided for, in any cycle."""
        return sorted(
            {
                a.target
                for report in self.reports
                for a in report.actions
                if a.kind is ActionKind.QUARANTINE and not a.dry_run
            }
        )

    def result(self, name: str) -> Any:
        return next(r for r in self.last.results if r.instance.name == name)


def gated(instances: Sequence[Instance]) -> list[Instance]:
    """Instances as pods carrying the readiness gate, verified and serving traffic."""
    return [replace(i, has_readiness_gate=True, ready=True, gate_status="True") for i in instances]


async def run_cycles(
    spec: CheckSpec,
    *,
    cycles: int = 1,
    expectations: Callable[[CheckSpec, Fetcher], Expectations | None] = build_expectations,
    between: Callable[[int], None] | None = None,
) -> Outcome:
    """Check the spec's targets ``cycles`` times with one fetcher and a carried history.

    ``between(i)`` runs before cycle ``i`` (from 1), e.g. to break a dependency.
    """
    instances = gated(instances_from_targets(spec.targets))
    reports = []
    history: History | None = None
    async with Fetcher(http=spec.http, retry=spec.retry) as fetcher:
        source = expectations(spec, fetcher)
        for i in range(cycles):
            if between is not None and i:
                await asyncio.to_thread(between, i)
            report, decision = await check_once(
                spec,
                instances=instances,
                fetcher=fetcher,
                expectations=source,
                history=history,
                known_versions=spec.known_versions,
            )
            history = decision.history
            reports.append(report)
    return Outcome(reports)


def fault_spec(fleet: Any, *extra: Mapping[str, Any], **overrides: Any) -> CheckSpec:
    """The fleet's spec plus ``extra`` targets, fast timeouts and the armed policy."""
    spec = fleet.spec(
        http=dict(FAST_HTTP),
        retry=dict(FAST_RETRY),
        policy=dict(ARMED_POLICY),
    )
    spec["targets"] = [*spec["targets"], *extra]
    for name, value in overrides.items():
        if isinstance(value, dict) and isinstance(spec.get(name), dict):
            spec[name] = {**spec[name], **value}
        else:
            spec[name] = value
    return load_spec(spec)


def check(rec: Recorder, spec: CheckSpec, *, drifted: Sequence[str] = (), **cycles: Any) -> Outcome:
    """Run cycles under the probe; record verdicts, quarantines and leaks."""
    with rec.probe():
        outcome, leaked = run_async(run_cycles(spec, **cycles))
    rec.leaked_tasks = leaked
    rec.verdicts = {k: v.value for k, v in sorted(outcome.verdicts().items())}
    rec.quarantined = outcome.quarantined()
    rec.false_quarantines = len(set(rec.quarantined) - set(drifted))
    return outcome


#: The planted fleet's instances: web-1 really drifted, the others serve what they say.
DRIFTED = "web-1"
HEALTHY = ("web-2", "web-3", "web-4")


def planted_fleet(make_fleet: Callable[..., Any]) -> Any:
    """Four instances of 1.4.2; web-1 really serves 1.4.1's bytes.

    Every fault is shown beside a real drift, so a test also shows which evidence
    survives the fault.
    """
    fleet = make_fleet(4, version="1.4.2")
    fleet.drift(0, serves="1.4.1")
    return fleet


def check_faulty(
    rec: Recorder,
    fleet: Any,
    url: str,
    *,
    drifted: Sequence[str] = (DRIFTED,),
    **overrides: Any,
) -> tuple[Outcome, Any]:
    """Check ``fleet`` plus one instance ``faulty`` of 1.4.2 at ``url``.

    Returns the outcome and the faulty instance's result; the record notes its verdict.
    """
    target = {"url": url, "version": "1.4.2", "name": "faulty"}
    outcome = check(rec, fault_spec(fleet, target, **overrides), drifted=drifted)
    result = outcome.result("faulty")
    rec.observed = f"{result.verdict.value}: {result.reason}"[:160]
    return outcome, result


def counted(outcome: Outcome) -> str:
    """The verdict counts of ``outcome``, as the fault matrix shows them."""
    return ", ".join(f"{v} {k}" for k, v in sorted(outcome.counts().items()))


# --------------------------------------------------------------------------- certificates


class CertAuthority:
    """A private CA made with ``cryptography``: certificates with exact expiry dates."""

    def __init__(self, name: str = "artifactcheck fault-suite CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, path: Path) -> str:
        """Write the CA certificate (a ``ca_bundle``); returns the path."""
        path.write_bytes(self.pem)
        return str(path)

    def issue(self, *names: str, not_after: datetime) -> tuple[bytes, bytes, datetime]:
        """A leaf certificate for DNS names or IP addresses: (cert PEM, key PEM, not_after)."""
        key = ec.generate_private_key(ec.SECP256R1())
        not_after = not_after.replace(microsecond=0)
        sans: list[x509.GeneralName] = []
        for name in names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(min(not_after, datetime.now(UTC)) - timedelta(days=30))
            .not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem, not_after

    def server_context(self, *names: str, days: float = 365.0) -> tuple[ssl.SSLContext, datetime]:
        """A server TLS context presenting a certificate valid for ``days`` (negative: expired)."""
        cert, key, not_after = self.issue(
            *names, not_after=datetime.now(UTC) + timedelta(days=days)
        )
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="artifactcheck-cert-") as tmp:
            chain = Path(tmp) / "chain.pem"
            chain.write_bytes(cert + self.pem)
            key_file = Path(tmp) / "key.pem"
            key_file.write_bytes(key)
            ctx.load_cert_chain(str(chain), str(key_file))
        return ctx, not_after


# --------------------------------------------------------------------------- netns


@contextlib.contextmanager
def dropping_namespace(tag: int) -> Iterator[str]:
    """An address in a network namespace whose firewall DROPs every TCP packet.

    A SYN to it is never answered, neither accepted nor refused: the connect timeout
    is the only way out, exactly like a host behind a black-holing firewall. Skips
    with the reason when namespaces, veth pairs or iptables are not available.
    """
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"):
        unmet("a network namespace is not possible here: needs root, ip and iptables")
    ns = f"acf{os.getpid() % 100000}n{tag}"
    outside, inside = (
        f"acf{os.getpid() % 100000}o{tag}"[:15],
        f"acf{os.getpid() % 100000}i{tag}"[:15],
    )
    octet = (os.getpid() + tag) % 250 + 1
    here, there = f"10.97.{octet}.1", f"10.97.{octet}.2"
    steps = [
        ["ip", "netns", "add", ns],
        ["ip", "link", "add", outside, "type", "veth", "peer", "name", inside],
        ["ip", "link", "set", inside, "netns", ns],
        ["ip", "addr", "add", f"{here}/30", "dev", outside],
        ["ip", "link", "set", outside, "up"],
        ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{there}/30", "dev", inside],
        ["ip", "netns", "exec", ns, "ip", "link", "set", inside, "up"],
        ["ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-p", "tcp", "-j", "DROP"],
    ]

    def cleanup() -> None:
        subprocess.run(["ip", "link", "del", outside], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)

    cleanup()
    try:
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                unmet(
                    f"a network namespace is not possible here: `{' '.join(step)}` failed: "
                    f"{done.stderr.strip()}"
                )
        yield there
    finally:
        cleanup()
