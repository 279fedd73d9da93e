"""What a :class:`~artifactcheck.fetch.fetcher.Fetcher` did: the load it put on the fleet.

Reports show these counters, and the load tests (docs/reliability.md) check them
against the bounds the retry budget and the concurrency limits promise.
"""

from __future__ import annotations

from collections import Counter

from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import MutableRecord, field

__all__ = ["FetchStats", "HostStats"]


class HostStats(MutableRecord):
    """Counters for one ``scheme://host:port``."""

    requests: int = 0
    retries: int = 0
    errors: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0


class FetchStats(MutableRecord):
    """What a Fetcher did: load it put on the fleet, for reports and tests."""

    requests: int = 0  # requests sent: first attempts, retries and redirect hops
    first_attempts: int = 0  # get_document/get_asset calls that sent a request
    retries: int = 0
    redirects: int = 0
    budget_denied: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    bytes_read: int = 0  # bytes off the wire, before decoding
    hashes_reused: int = 0  # bodies equal byte for byte to one hashed before (fetch.copies)
    errors: Counter[ErrorKind] = field(default_factory=Counter)  # error_kind -> results
    per_host: dict[str, HostStats] = field(default_factory=dict)

    def add(self, other: FetchStats) -> None:
        """Add another Fetcher's counts (an observing process's, artifactcheck.observe.pool);
        its peaks count as peaks, not sums."""
        self.requests += other.requests
        self.first_attempts += other.first_attempts
        self.retries += other.retries
        self.redirects += other.redirects
        self.budget_denied += other.budget_denied
        self.bytes_read += other.bytes_read
        self.hashes_reused += other.hashes_reused
        self.peak_in_flight = max(self.peak_in_flight, other.peak_in_flight)
        self.errors.update(other.errors)
        for key, theirs in other.per_host.items():
            mine = self.host(key)
            mine.requests += theirs.requests
            mine.retries += theirs.retries
            mine.errors += theirs.errors
            mine.peak_in_flight = max(mine.peak_in_flight, theirs.peak_in_flight)

    def host(self, key: str) -> HostStats:
        """The counters of one ``scheme://host:port``, created on first use."""
        stats = self.per_host.get(key)
        if stats is None:
            stats = self.per_host[key] = HostStats()
        return stats
