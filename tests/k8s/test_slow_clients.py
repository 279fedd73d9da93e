"""Slow and hostile clients against a real controller process (docs/reliability.md).

An attacker opens 300 connections to the controller's probe port and trickles one
header byte on each every 2 s, reconnecting whenever the server closes one, as a
slowloris tool does. Meanwhile a prober asks ``/healthz``, ``/readyz``, ``/metrics``
and the verdict API on the same port every 0.2 s, and a pod that serves the wrong
release arrives. Every probe must answer 200 within 1 s, no trickling connection may
live past the head deadline, and the pod must be quarantined about as fast as without
the attack. The figures are printed (``-s``) for docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from launch import controller_process
from tenant_support import TenantCluster

from artifactcheck.control.health import HEAD_DEADLINE
from artifactcheck_sim.cluster import free_port, wait_for

TRICKLERS = 300
TRICKLE_EVERY = 2.0
ATTACK_SECONDS = 16.0
#: Seconds before a connection the server closed is opened again.
RECONNECT_AFTER = 1.0
PROBES = (
    "/healthz",
    "/readyz",
    "/metrics",
    "/verdicts/v1/namespaces/shop/artifactchecks/web",
)
#: A head that is never finished: one byte of it is sent at a time.
_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000


@dataclass
class _Conn:
    sock: socket.socket
    opened: float
    sent: int = 0
    next_send: float = 0.0


@dataclass
class Trickler:
    """``count`` connections to ``port``, one byte each every ``every`` seconds."""

    port: int
    count: int = TRICKLERS
    every: float = TRICKLE_EVERY
    lifetimes: list[float] = field(default_factory=list)
    opened: int = 0
    held: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._conns: dict[int, _Conn] = {}
        #: When each free slot may connect again (a closed connection waits a second).
        self._free: list[float] = [0.0] * self.count
        self._sel = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Trickler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for conn in list(self._conns.values()):
            self._drop(conn, closed_by_server=False)
        self._sel.close()

    def oldest(self) -> float:
        """The age of the oldest connection the server has not closed."""
        now = time.monotonic()
        return max((now - c.opened for c in self._conns.values()), default=0.0)

    def _connect(self, now: float) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=1.0)
        except OSError:
            self._free.append(now + RECONNECT_AFTER)
            return
        sock.setblocking(False)
        offset = (len(self._conns) % 20) * self.every / 20  # spread the sends out
        conn = _Conn(sock, now, next_send=now + offset)
        self._conns[sock.fileno()] = conn
        self._sel.register(sock, selectors.EVENT_READ, conn)
        self.opened += 1

    def _drop(self, conn: _Conn, *, closed_by_server: bool) -> None:
        if closed_by_server:
            self.lifetimes.append(time.monotonic() - conn.opened)
            self._free.append(time.monotonic() + RECONNECT_AFTER)
        self._conns.pop(conn.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        conn.sock.close()

    def _run(self) -> None:
        last_sample = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            ready = [t for t in self._free if t <= now][:20]  # reconnect, gently
            for t in ready:
                self._free.remove(t)
                self._connect(now)
            for key, _ in self._sel.select(timeout=0.05):
                conn = key.data
                with contextlib.suppress(OSError):
                    conn.sock.recv(65536)  # an answer (408, 503) or EOF: the server closed
                self._drop(conn, closed_by_server=True)
            for conn in list(self._conns.values()):
                if now >= conn.next_send and conn.sent < len(_HEAD):
                    try:
                        conn.sock.send(_HEAD[conn.sent : conn.sent + 1])
                        conn.sent += 1
                        conn.next_send = now + self.every
                    except OSError:
                        self._drop(conn, closed_by_server=True)
            if now - last_sample >= 0.5:
                self.held.append(len(self._conns))
                last_sample = now


def _probe(port: int, path: str) -> tuple[int, float]:
    """(status or 0, seconds) of one GET on a fresh connection, as kubelet sends it."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    except (OSError, ValueError, IndexError):
        status = 0
    return status, time.monotonic() - t0


def _gate(tc: TenantCluster, name: str) -> str | None:
    c = tc.condition(name)
    return c["status"] if c else None


def _quarantine_seconds(tc: TenantCluster, *, timeout: float = 60.0) -> float:
    """Seconds from a pod serving the wrong release to its quarantine (inf: none)."""
    t0 = time.monotonic()
    bad = tc.add_pod(serves="1.4.1").name
    try:
        wait_for(lambda: _gate(tc, bad) == "False", timeout=timeout, interval=0.05)
    except TimeoutError:
        return float("inf")
    return time.monotonic() - t0


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@pytest.mark.slow
def test_trickling_clients_never_starve_probes_nor_the_control_loop(tmp_path: Path) -> None:
    with TenantCluster(
        first_host="127.88.1.1", cdn_host="127.88.201.1", release_host="127.88.101.1"
    ) as tc:
        for _ in range(4):
            tc.add_pod()
        # two wrong pods of six: within the cap on the share quarantined
        policy = {"mode": "quarantine", "confirmations": 1, "maxQuarantineFraction": 0.5}
        tc.add_check(interval=0.5, policy=policy)
        port = free_port("127.0.0.1")
        proc = controller_process(tc, tmp_path, health_port=port, metrics_port=0)
        try:
            wait_for(lambda: _probe(port, PROBES[3])[0] == 200, timeout=60, interval=0.2)
            calm = _quarantine_seconds(tc)
            latencies: list[float] = []
            failed: list[tuple[str, int]] = []
            with Trickler(port) as attack:
                wait_for(lambda: attack.opened >= TRICKLERS, timeout=30, interval=0.1)
                quarantine: list[float] = []
                bad_pod = threading.Thread(
                    target=lambda: quarantine.append(_quarantine_seconds(tc))
                )
                end = time.monotonic() + ATTACK_SECONDS
                bad_pod.start()
                while time.monotonic() < end:
                    for path in PROBES:
                        status, seconds = _probe(port, path)
                        latencies.append(seconds)
                        if status != 200:
                            failed.append((path, status))
                    time.sleep(0.2)
                bad_pod.join(timeout=60)
                oldest = attack.oldest()
            lived = max([*attack.lifetimes, oldest])
            print(
                f"\n{TRICKLERS} trickling connections for {ATTACK_SECONDS:.0f} s: "
                f"{attack.opened} opened, held at once max {max(attack.held)}, "
                f"longest-lived {lived:.1f} s; {len(latencies)} probes, "
                f"{len(failed)} not 200 ({sorted(set(failed))[:6]}), "
                f"p99 {_p99(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms; "
                f"quarantine {quarantine[0] if quarantine else float('inf'):.1f} s "
                f"(without the attack {calm:.1f} s)"
            )
            assert failed == []
            assert _p99(latencies) < 1.0
            assert quarantine and quarantine[0] <= calm + 10.0
            assert lived <= HEAD_DEADLINE + 1.5  # nobody holds a connection past the deadline
            assert max(attack.held) >= TRICKLERS * 0.9  # the attack did hold its connections
        finally:
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=30)
