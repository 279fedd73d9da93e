"""Helpers for the fault suite: leak probes, check cycles under an armed policy, certificates.

The policy in every verify-path fault is the most trigger-happy one allowed
(quarantine on the first mismatch, half the fleet may go), and every fleet carries one
instance that really drifted: the test then proves both that the policy was armed (the
drifted instance is quarantined) and that the fault did not trip it (nobody else is).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from artifactcheck.decide import History
from artifactcheck.discover.static import instances_from_targets
from artifactcheck.expect import Expectations
from artifactcheck.fetch import Fetcher
from artifactcheck.models import ActionKind, Instance, Report, Verdict
from artifactcheck.pipeline import build_expectations, check_once
from artifactcheck.settings import CheckSpec, load_spec

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


def settle_fds(baseline: int, *, timeout: float = 3.0) -> int:
    """Fds above ``baseline`` once closing sockets had a moment to go (0 = no leak)."""
    deadline = time.monotonic() + timeout
    while True:
        extra = open_fds() - baseline
        if extra <= 0 or time.monotonic() > deadline:
            return max(0, extra)
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

    def describe(
        self, key: str, *, group: str, fault: str, expected: str, related: Sequence[str] = ()
    ) -> None:
        """Name the fault and the outcome the design promises for it."""
        self.key, self.group, self.fault, self.expected = key, group, fault, expected
        self.related = list(related)

    @contextlib.contextmanager
    def probe(self, *, trace_memory: bool = True) -> Iterator[None]:
        """Measure wall time, traced-memory peak and fds left open around the block."""
        fds = open_fds()
        if trace_memory:
            tracemalloc.start()
        started = time.perf_counter()
        try:
            yield
        except BaseException:
            self.crashed = True
            raise
        finally:
            self.elapsed = round(time.perf_counter() - started, 2)
            if trace_memory:
                self.peak_mb = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
                tracemalloc.stop()
            self.leaked_fds = settle_fds(fds)

    def assert_clean(self, *, max_peak_mb: float = 64.0) -> None:
        """No crash, no leaked task or socket, bounded memory, no false quarantine."""
        assert not self.crashed
        assert self.leaked_tasks in (0, None), f"{self.leaked_tasks} task(s) left running"
        assert (self.leaked_fds or 0) <= FD_TOLERANCE, f"{self.leaked_fds} fd(s) left open"
        if self.peak_mb is not None:
            assert self.peak_mb < max_peak_mb, f"peak traced memory {self.peak_mb} MB"
        assert not self.false_quarantines, f"false quarantines: {self.quarantined}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON record (without the outcome, added by the fixture)."""
        return {
            name: getattr(self, name)
            for name in (
                "test key group fault expected observed verdicts quarantined false_quarantines "
                "crashed leaked_tasks leaked_fds peak_mb elapsed related figures"
            ).split()
        }


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
    return [
        replace(i, has_readiness_gate=True, ready=True, gate_status="True") for i in instances
    ]


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


def check(
    rec: Recorder, spec: CheckSpec, *, drifted: Sequence[str] = (), **cycles: Any
) -> Outcome:
    """Run cycles under the probe; record verdicts, quarantines and leaks."""
    with rec.probe():
        outcome, leaked = run_async(run_cycles(spec, **cycles))
    rec.leaked_tasks = leaked
    rec.verdicts = {k: v.value for k, v in sorted(outcome.verdicts().items())}
    rec.quarantined = outcome.quarantined()
    rec.false_quarantines = len(set(rec.quarantined) - set(drifted))
    return outcome


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

    def server_context(
        self, *names: str, days: float = 365.0
    ) -> tuple[ssl.SSLContext, datetime]:
        """A server TLS context presenting a certificate valid for ``days`` (negative: expired)."""
        cert, key, not_after = self.issue(*names, not_after=datetime.now(UTC) + timedelta(days=days))
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
        pytest.skip("not possible here: needs root, ip and iptables")
    ns = f"acf{os.getpid() % 100000}n{tag}"
    outside, inside = f"acf{os.getpid() % 100000}o{tag}"[:15], f"acf{os.getpid() % 100000}i{tag}"[:15]
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
                pytest.skip(f"not possible here: `{' '.join(step)}` failed: {done.stderr.strip()}")
        yield there
    finally:
        cleanup()
