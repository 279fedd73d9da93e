"""A standby's verdict requests, passed to the leader: :class:`Forwarder`.

Only the leader has verdicts, and the ``artifactcheck-metrics`` Service reaches every
replica: without this, a gate reaching the standby got ``503 NotLeader`` about half of
the time, which Argo Rollouts and Flagger count as errors and retry. The standby sends
the request unchanged to the address the leader publishes on its Lease
(artifactcheck/control/lease.py) and answers with the leader's status, body and
``Retry-After``. Why forwarding rather than a Service that selects the leader only
(a label the leader sets on its pod): a leader that dies or hangs cannot remove its
label, so the Service would keep sending gates to it, and a label needs RBAC to patch
the controller's own pod; the Lease is already read every renew period.

Bounded, so a forward can never make things worse than the old ``503``:

- **one hop**: the forwarded request carries :data:`FORWARDED_BY`; a replica that
  receives it answers from its own memory and never forwards again (a stale Lease
  record naming a replica that is no longer the leader gives ``503 NotLeader``, not a
  loop);
- **a dead or unknown leader is a fast 503**: no holder, an expired lease or no
  published address answer ``503 LeaderUnknown`` without a connection; a refused or
  timed-out connection (at most :data:`CONNECT_TIMEOUT`) answers ``503
  LeaderUnreachable``;
- **the same timeouts**: the leader answers a request within its wait plus 5 s (the
  API's own bound); the standby waits for it that long plus :data:`READ_MARGIN`, and
  reads at most :data:`MAX_ANSWER_BYTES`.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass

#: The header that marks a forwarded request (its value: the forwarding replica).
FORWARDED_BY = "X-ArtifactCheck-Forwarded-By"
#: The answer's header naming the replica that computed it (the leader's, forwarded).
ANSWERED_BY = "X-ArtifactCheck-Answered-By"
#: Seconds to connect to the leader: a pod IP that nobody answers on is dead.
CONNECT_TIMEOUT = 1.0
#: Seconds the standby waits beyond the leader's own bound for the answer.
READ_MARGIN = 1.0
#: The longest answer passed on (500 listed pods are far less).
MAX_ANSWER_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Leader:
    """Where the leader's verdict API answers, as published on the Lease."""

    identity: str
    host: str
    port: int


def parse_leader_address(text: str) -> tuple[str, int] | None:
    """``host:port`` or ``[v6]:port`` as published; None when it is not one."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or any(c in host for c in "/?#@ "):
        return None
    return host, int(port)


def format_address(host: str, port: int) -> str:
    """The published form of ``host`` and ``port`` (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer: status, body, extra headers."""

    status: int
    body: bytes
    headers: dict[str, str]


def _error(status: int, reason: str, message: str, *, identity: str) -> Answer:
    body = json.dumps({"status": status, "reason": reason, "message": message}).encode()
    return Answer(status, body + b"\n", {"Retry-After": "1", ANSWERED_BY: identity})


class Forwarder:
    """Sends one verdict request to the leader ``leader()`` names (None: unknown).

    ``counted(outcome)`` is told how every forward ended (``forwarded``,
    ``leader_unknown``, ``leader_unreachable``), for the metrics.
    """

    def __init__(
        self,
        *,
        identity: str,
        leader: Callable[[], Leader | None],
        counted: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        self.identity = identity
        self.leader = leader
        self.counted = counted

    def forward(
        self, method: str, path: str, query: str, body: bytes | None, *, wait: float
    ) -> Answer:
        """The leader's answer to the request, or a 503 saying why there is none."""
        leader = self.leader()
        if leader is None:
            self.counted("leader_unknown")
            return _error(
                503,
                "LeaderUnknown",
                "this replica is a standby and knows no live leader to ask (none holds "
                "the Lease, it expired, or the leader publishes no address)",
                identity=self.identity,
            )
        target = path + (f"?{query}" if query else "")
        headers = {FORWARDED_BY: self.identity, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection(leader.host, leader.port, timeout=CONNECT_TIMEOUT)
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(wait + 5.0 + READ_MARGIN)
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read(MAX_ANSWER_BYTES + 1)
            if len(data) > MAX_ANSWER_BYTES:
                raise http.client.HTTPException("answer too large")
        except (OSError, http.client.HTTPException) as exc:
            self.counted("leader_unreachable")
            what = "timed out" if isinstance(exc, socket.timeout | TimeoutError) else str(exc)
            return _error(
                503,
                "LeaderUnreachable",
                f"this replica is a standby and the leader {leader.identity} at "
                f"{format_address(leader.host, leader.port)} did not answer: {what}"[:500],
                identity=self.identity,
            )
        finally:
            conn.close()
        self.counted("forwarded")
        passed = {
            name: value
            for name in ("Retry-After", ANSWERED_BY)
            if (value := resp.getheader(name)) is not None
        }
        return Answer(resp.status, data, passed)


__all__ = [
    "ANSWERED_BY",
    "FORWARDED_BY",
    "Answer",
    "Forwarder",
    "Leader",
    "format_address",
    "parse_leader_address",
]
