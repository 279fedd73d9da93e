"""Seeded fault injection for the fake API server: :class:`Faults`.

A real API server under load answers ``429 Too Many Requests`` with ``Retry-After``
(API Priority and Fairness), ``500``s, cuts watches mid-stream (a restart, a load
balancer's idle timeout), answers a resumed watch with ``410 Gone`` (its history was
compacted) and answers slowly. :class:`Faults` decides, for each request by its
Kubernetes verb and resource, whether one of those happens, from a seeded random
generator, so a chaos run is repeatable (the same seed and the same sequence of
requests give the same faults). Off by default: a :class:`FakeApiServer` has no
``faults`` until a test sets them, and setting ``faults = None`` ends them.

Every request seen while faults are on is logged (:attr:`Faults.log`: monotonic time,
verb, resource, path, the fault or None), so a test can count what the client did in
a window, e.g. that no request to a throttled resource came before its ``Retry-After``.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

#: The faults: 429 + Retry-After, a 500, a slow answer, a watch cut after some time, a
#: resumed watch answered with an in-stream 410 Expired.
FaultKind = Literal["throttle", "error", "slow", "cut", "gone"]
KINDS: tuple[FaultKind, ...] = ("throttle", "error", "slow", "cut", "gone")
#: Kubernetes verbs, as :attr:`FakeApiServer.verb_counts` counts them.
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class FaultRule:
    """With probability ``rate``, a request of one of ``verbs`` to one of ``resources``
    (plural names: ``pods``, ``leases``...; ``"*"``: any) gets fault ``kind``.

    ``retry_after``: the seconds a ``throttle`` asks for. ``delay``: the most a
    ``slow`` answer waits (uniform from a tenth of it) and the longest a ``cut`` watch
    streams first (uniform from zero). ``cut`` applies to watches only, ``gone`` to
    watches that resume from a resourceVersion.
    """

    kind: FaultKind
    rate: float
    verbs: frozenset[str] = frozenset({"*"})
    resources: frozenset[str] = frozenset({"*"})
    retry_after: int = 1
    delay: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: one of {', '.join(KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate {self.rate}: between 0 and 1")
        unknown = set(self.verbs) - {"*", *VERBS}
        if unknown:
            raise ValueError(f"unknown verb(s) {', '.join(sorted(unknown))}")
        if self.retry_after < 0 or self.delay < 0:
            raise ValueError("retry_after and delay must not be negative")

    def applies(self, verb: str, resource: str, resumes: bool) -> bool:
        if self.kind in ("cut", "gone") and verb != "watch":
            return False
        if self.kind == "gone" and not resumes:
            return False
        return ("*" in self.verbs or verb in self.verbs) and (
            "*" in self.resources or resource in self.resources
        )


@dataclass(frozen=True)
class Fault:
    """What happens to one request."""

    kind: FaultKind
    retry_after: int = 0
    delay: float = 0.0


@dataclass(frozen=True)
class Seen:
    """One request while faults were on."""

    at: float  # time.monotonic()
    verb: str
    resource: str
    path: str
    fault: FaultKind | None


@dataclass
class Faults:
    """The fault plan of a :class:`FakeApiServer` (``server.faults = Faults(...)``).

    Rules are tried in order; the first that applies and whose draw hits wins (one
    draw per rule that applies, so the sequence is the seed's).
    """

    rules: Iterable[FaultRule]
    seed: int = 0
    log: list[Seen] = field(default_factory=list)
    #: Faults injected, by (kind, verb, resource).
    injected: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rules = tuple(self.rules)
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def decide(self, verb: str, resource: str, path: str, *, resumes: bool) -> Fault | None:
        """The fault for this request (None: serve it), logged."""
        with self._lock:
            fault = None
            for rule in self.rules:
                assert isinstance(rule, FaultRule)
                if not rule.applies(verb, resource, resumes):
                    continue
                if self._rng.random() >= rule.rate:
                    continue
                if rule.kind == "slow":
                    fault = Fault("slow", delay=self._rng.uniform(rule.delay / 10, rule.delay))
                elif rule.kind == "cut":
                    fault = Fault("cut", delay=self._rng.uniform(0.0, rule.delay))
                else:
                    fault = Fault(rule.kind, retry_after=rule.retry_after)
                self.injected[(rule.kind, verb, resource)] += 1
                break
            self.log.append(
                Seen(time.monotonic(), verb, resource, path, fault.kind if fault else None)
            )
            return fault

    def seen(self, *, verb: str | None = None, resource: str | None = None) -> list[Seen]:
        """The logged requests, optionally of one verb and/or resource."""
        with self._lock:
            return [
                s
                for s in self.log
                if (verb is None or s.verb == verb) and (resource is None or s.resource == resource)
            ]


__all__ = ["KINDS", "VERBS", "Fault", "FaultKind", "FaultRule", "Faults", "Seen"]
