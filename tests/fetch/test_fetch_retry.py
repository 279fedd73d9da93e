"""Retries: few, exponential with full jitter, Retry-After honoured, under a budget."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from fetch_support import RecordingSleep, UpperBoundRng

from artifactcheck.fetch import RetryBudget
from artifactcheck.model.settings import RetrySettings
from artifactcheck_sim.web import Body, Flaky, Reset, Site, Status, WebFleet

LOGGER = "artifactcheck.test.fetch"


async def test_backoff_grows_exponentially_up_to_max_delay(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    site = Site(overrides={"/a.js": Flaky(4, Status(503), then=Body(b"ok"))})
    base = fleet.add(site, host())
    sleep = RecordingSleep()
    retry = {"attempts": 5, "base_delay": 0.1, "max_delay": 0.5}
    caplog.set_level(logging.INFO, logger=LOGGER)
    logger = logging.getLogger(LOGGER)
    async with make_fetcher(retry=retry, sleep=sleep, rng=UpperBoundRng(), logger=logger) as f:
        got = await f.get_asset(base, "a.js")
    assert got.ok and got.attempts == 5
    assert sleep.delays == pytest.approx([0.1, 0.2, 0.4, 0.5])  # ceilings: x2, then capped
    url = f"{base}a.js"
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        f"GET {url} attempt 1/5 failed (HTTP 503); retrying in 0.10s",
        f"GET {url} attempt 2/5 failed (HTTP 503); retrying in 0.20s",
        f"GET {url} attempt 3/5 failed (HTTP 503); retrying in 0.40s",
        f"GET {url} attempt 4/5 failed (HTTP 503); retrying in 0.50s",
    ]
    record = caplog.records[0]
    assert record.msg == "GET %s attempt %d/%d failed (%s); retrying in %.2fs"  # lazy args
    assert fleet.server(base).request_count == 5
    assert f.stats.retries == 4 and f.stats.first_attempts == 1 and f.stats.requests == 5


async def test_full_jitter_draws_from_zero_to_the_ceiling(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    site = Site(overrides={"/a.js": Flaky(3, Status(500), then=Body(b"ok"))})
    base = fleet.add(site, host())
    sleep = RecordingSleep()
    retry = {"attempts": 4, "base_delay": 1.0, "max_delay": 3.0}
    async with make_fetcher(retry=retry, sleep=sleep, rng=random.Random(7)) as f:
        got = await f.get_asset(base, "a.js")
    assert got.ok
    twin = random.Random(7)
    assert sleep.delays == [twin.uniform(0, 1.0), twin.uniform(0, 2.0), twin.uniform(0, 3.0)]
    assert len(set(sleep.delays)) == 3


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    # capped by max_retry_after=5; "0" asks for nothing more than the jittered wait
    [("2", 2.0), ("0", None), ("120", 5.0)],
)
async def test_retry_after_seconds_is_honoured(
    make_fetcher,
    fleet: WebFleet,
    host: Callable[[], str],
    retry_after: str,
    expected: float | None,
) -> None:
    """Never sooner than Retry-After (capped), never sooner than full jitter either."""
    site = Site(overrides={"/a.js": Flaky(1, Status(429, retry_after=retry_after), Body(b"k"))})
    base = fleet.add(site, host())
    sleep = RecordingSleep()
    async with make_fetcher(retry={"max_retry_after": 5}, sleep=sleep) as f:
        got = await f.get_asset(base, "a.js")
    assert got.ok and got.attempts == 2
    if expected is None:
        assert len(sleep.delays) == 1 and 0 <= sleep.delays[0] <= RetrySettings().base_delay
    else:
        assert sleep.delays == [expected]


async def test_retry_after_http_date_on_503(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    site = Site(overrides={"/a.js": Flaky(1, Status(503, retry_after=when), Body(b"k"))})
    base = fleet.add(site, host())
    sleep = RecordingSleep()
    async with make_fetcher(sleep=sleep) as f:
        got = await f.get_asset(base, "a.js")
    assert got.ok
    assert 17 < sleep.delays[0] <= 20


async def test_retry_after_is_ignored_on_other_statuses(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    site = Site(overrides={"/a.js": Flaky(1, Status(500, retry_after="60"), Body(b"k"))})
    base = fleet.add(site, host())
    sleep = RecordingSleep()
    async with make_fetcher(retry={"base_delay": 0.2}, sleep=sleep) as f:
        await f.get_asset(base, "a.js")
    assert 0 <= sleep.delays[0] <= 0.2


@pytest.mark.parametrize("code", [404, 403, 400, 410])
async def test_client_errors_are_observations_not_retried(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], code: int
) -> None:
    base = fleet.add(Site(overrides={"/a.js": Status(code)}), host())
    sleep = RecordingSleep()
    async with make_fetcher(sleep=sleep) as f:
        got = await f.get_asset(base, "a.js")
    assert got.status == code and got.error is None and got.error_kind is None
    assert not got.hashes and not got.ok and got.attempts == 1
    assert sleep.delays == []
    assert fleet.server(base).request_count == 1


async def test_server_errors_after_the_last_attempt(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(fault=Status(503)), host())
    async with make_fetcher(retry={"attempts": 3}) as f:
        got = await f.get_asset(base, "a.js")
    assert got.status == 503
    assert got.error_kind == "status" and got.error == "HTTP 503 after 3 attempt(s)"
    assert got.attempts == 3
    assert fleet.server(base).request_count == 3


async def test_connection_resets_are_retried(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(overrides={"/a.js": Flaky(2, Reset(), Body(b"fine"))}), host())
    async with make_fetcher() as f:
        got = await f.get_asset(base, "a.js")
    assert got.ok and got.attempts == 3
    assert fleet.server(base).request_count == 3  # no hidden retries inside the transport


async def test_refused_connections_are_retried_then_reported(make_fetcher, host) -> None:
    import socket

    address = host()
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind((address, 0))
        port = sock.getsockname()[1]
    async with make_fetcher(retry={"attempts": 2}) as f:
        got = await f.get_asset(f"http://{address}:{port}/", "a.js")
    assert got.error_kind == "connect" and got.attempts == 2
    assert got.status is None
    assert "cannot connect" in (got.error or "")


async def test_retry_budget_caps_the_load_on_a_failing_fleet(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    bases = fleet.add_many([(Site(fault=Status(503)), host()) for _ in range(20)])
    budget = RetryBudget(ratio=0.1, minimum=2)
    retry = {"attempts": 4, "budget_ratio": 0.1, "budget_min": 2}
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    logger = logging.getLogger(LOGGER)
    async with make_fetcher(retry=retry, budget=budget, logger=logger) as f:
        results = await asyncio.gather(*(f.get_asset(b, "a.js") for b in bases))
    received = fleet.total_requests
    assert received == sum(s.request_count for s in fleet.servers)
    first = budget.first_attempts
    assert first == 20
    assert received <= first + budget.allowance  # 20 + 2 + 0.1 * 20 = 24, not 80
    assert received == first + budget.retries == f.stats.requests
    assert budget.retries == 4
    spent = [r for r in results if r.error_kind == "budget"]
    assert spent and all("retry budget" in (r.error or "") for r in spent)
    assert all(r.status == 503 for r in results)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "retry budget spent" in warnings[0].getMessage()
    assert f.stats.budget_denied == len(spent)


async def test_one_budget_shared_by_two_fetchers(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(fault=Status(500)), host())
    budget = RetryBudget(ratio=0, minimum=3)
    async with make_fetcher(budget=budget) as a, make_fetcher(budget=budget) as b:
        await a.get_asset(base, "x")  # 2 retries
        await b.get_asset(base, "y")  # 1 retry, then spent
    assert budget.retries == 3
    assert fleet.server(base).request_count == 2 + 3
