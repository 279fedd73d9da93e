"""How many times a request is tried, and how long to wait between tries.

One run shares one :class:`RetryBudget`, so a failing fleet never receives more than
a small multiple of its normal load (docs/reliability.md); the wait before a retry is
exponential backoff with full jitter, or the server's ``Retry-After`` (capped).
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from artifactcheck.model.settings import RetrySettings

__all__ = ["RetryBudget", "backoff_delay", "parse_retry_after"]


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
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def backoff_delay(
    attempt: int, retry: RetrySettings, rng: random.Random, retry_after: float | None = None
) -> float:
    """Seconds before try ``attempt + 1``: full jitter, or the server's capped Retry-After.

    Full jitter (``uniform(0, min(max_delay, base_delay * 2**(attempt-1)))``) spreads a
    fleet's retries instead of synchronising them into waves.
    """
    if retry_after is not None:
        return min(retry_after, retry.max_retry_after)
    ceiling = min(retry.max_delay, retry.base_delay * 2 ** (attempt - 1))
    return rng.uniform(0, ceiling)
