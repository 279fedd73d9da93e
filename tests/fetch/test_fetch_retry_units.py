"""Retry arithmetic without a network: budget, Retry-After parsing, backoff bounds."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime

import pytest
from fetch_support import UpperBoundRng

from artifactcheck.fetch import RetryBudget, backoff_delay, parse_retry_after
from artifactcheck.fetch.retry import backoff_delays, retry_wait
from artifactcheck.model.settings import RetrySettings
from artifactcheck_sim.web import loopback_hosts


def test_budget_is_thread_safe() -> None:
    budget = RetryBudget(ratio=0.5, minimum=10)
    for _ in range(1000):
        budget.record_first_attempt()
    granted: list[bool] = []

    def spend() -> None:
        for _ in range(200):
            granted.append(budget.try_spend())

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == budget.retries == 510
    assert budget.denied == 1600 - 510


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("3", 3.0),
        ("1.5", 1.5),
        ("-1", None),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert parse_retry_after(value, now=now) == expected


def test_backoff_delay_bounds() -> None:
    retry = RetrySettings(base_delay=0.5, max_delay=4, max_retry_after=10)
    rng = UpperBoundRng()
    assert [backoff_delay(n, retry, rng) for n in range(1, 6)] == [0.5, 1, 2, 4, 4]
    assert backoff_delay(1, retry, rng, retry_after=99) == 10
    jitter = [backoff_delay(3, retry, random.Random(i)) for i in range(200)]
    assert all(0 <= d <= 2 for d in jitter) and min(jitter) < 0.2 and max(jitter) > 1.8


def test_loopback_hosts_are_distinct() -> None:
    hosts = loopback_hosts(600, "127.0.9.250")
    assert len(set(hosts)) == 600
    assert hosts[:6] == [
        "127.0.9.250",
        "127.0.9.251",
        "127.0.9.252",
        "127.0.9.253",
        "127.0.9.254",
        "127.0.10.1",
    ]


def test_retry_wait_is_never_sooner_than_retry_after_and_keeps_jitter() -> None:
    """The one backoff rule (fetcher, registry, controller): max(jitter, capped Retry-After)."""
    waits = [
        retry_wait(5, base=1, cap=30, rng=random.Random(i), retry_after=2, retry_after_cap=10)
        for i in range(200)
    ]
    assert min(waits) == 2 and max(waits) > 2
    assert (
        retry_wait(0, base=1, cap=1, rng=random.Random(0), retry_after=99, retry_after_cap=10) == 10
    )
    assert [round(next(d), 6) for d in [backoff_delays(0.5, 4, _Top())] for _ in range(5)] == [
        0.5,
        1,
        2,
        4,
        4,
    ]


class _Top(random.Random):
    """A generator that always draws the top of the range: the ceilings themselves."""

    def uniform(self, a: float, b: float) -> float:
        return b
