"""How many times a request is tried, and how long to wait between tries.

One run shares one :class:`RetryBudget`, so a failing fleet never receives more than
a small multiple of its normal load (docs/reliability.md); the wait before a retry is
exponential backoff with full jitter, never sooner than the server's ``Retry-After``
(capped). This module is the one home of that rule: the fetcher, the registry client
and the controller's API-server loops all wait by :func:`retry_wait`.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

from artifactcheck.model.settings import RetrySettings

__all__ = [
    "RetryBudget",
    "backoff_delay",
    "backoff_delays",
    "full_jitter",
    "parse_retry_after",
    "retry_wait",
]


class RetryBudget:
    """Retries allowed per run: ``minimum + ratio * first_attempts``; shareable, thread-safe.

    A budget caps the extra load a run adds when many servers fail at once (the
    incident where retries put 28x the normal load on a fleet): retries beyond it are
    not made.
    """

    def __init__(self, *, ratio: float = 0.2, minimum: int = 10) -> None:
        if ratio < 0 or minimum < 0:
            raise ValueError("ratio and minimum must be >= 0")
        self._ratio = ratio
        self._minimum = minimum
        self._first_attempts = 0
        self._retries = 0
        self._denied = 0
        self._lock = threading.Lock()  # one run may fetch from several loops or threads

    @classmethod
    def from_settings(cls, retry: RetrySettings) -> RetryBudget:
        """The budget described by ``retry.budget_ratio`` and ``retry.budget_min``."""
        return cls(ratio=retry.budget_ratio, minimum=retry.budget_min)

    def record_first_attempt(self) -> None:
        """Count one new request (not a retry); each one earns ``ratio`` retries."""
        with self._lock:
            self._first_attempts += 1

    def try_spend(self) -> bool:
        """Take one retry from the budget; False (and nothing taken) when it is spent."""
        with self._lock:
            if self._retries + 1 > self._minimum + self._ratio * self._first_attempts:
                self._denied += 1
                return False
            self._retries += 1
            return True

    @property
    def first_attempts(self) -> int:
        """Requests recorded so far, retries excluded."""
        return self._first_attempts

    @property
    def retries(self) -> int:
        """Retries taken so far."""
        return self._retries

    @property
    def denied(self) -> int:
        """Retries refused because the budget was spent."""
        return self._denied

    @property
    def allowance(self) -> float:
        """Retries allowed for the first attempts recorded so far."""
        with self._lock:
            return self._minimum + self._ratio * self._first_attempts

    def __repr__(self) -> str:
        return (
            f"RetryBudget(retries={self._retries}, allowance={self.allowance:g}, "
            f"first_attempts={self._first_attempts}, denied={self._denied})"
        )


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or HTTP-date), or None."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 and seconds == seconds else None  # NaN-safe
    from email.utils import parsedate_to_datetime  # an HTTP-date: rare, and not free to import

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def full_jitter(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """``uniform(0, min(cap, base * 2**attempt))``, ``attempt`` counted from 0.

    Full jitter spreads a fleet's (or a controller's replicas') retries instead of
    synchronising them into waves; the exponent is bounded so a long outage cannot
    overflow it.
    """
    return rng.uniform(0, min(cap, base * 2 ** min(attempt, 60)))


def retry_wait(
    attempt: int,
    *,
    base: float,
    cap: float,
    rng: random.Random,
    retry_after: float | None = None,
    retry_after_cap: float,
) -> float:
    """Seconds before the next try: full jitter, but never sooner than ``Retry-After``.

    The server's ask is honoured up to ``retry_after_cap`` (a hostile or confused server
    must not park a run for a day); below that, the longer of the two waits wins, so a
    throttled client both respects the server and stays out of step with its peers.
    """
    delay = full_jitter(attempt, base, cap, rng)
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_cap))
    return delay


def backoff_delay(
    attempt: int, retry: RetrySettings, rng: random.Random, retry_after: float | None = None
) -> float:
    """Seconds before try ``attempt + 1`` (``attempt`` from 1), by ``retry``'s settings."""
    return retry_wait(
        attempt - 1,
        base=retry.base_delay,
        cap=retry.max_delay,
        rng=rng,
        retry_after=retry_after,
        retry_after_cap=retry.max_retry_after,
    )


def backoff_delays(base: float, cap: float, rng: random.Random) -> Iterator[float]:
    """Full-jitter waits for attempts 0, 1, 2, ... forever (reconnecting watches)."""
    attempt = 0
    while True:
        yield full_jitter(attempt, base, cap, rng)
        attempt += 1
