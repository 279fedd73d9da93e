"""Timeouts and cancellation: every wait is bounded and nothing leaks when cut short."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from fetch_support import eventually
from rawserver import full_backlog

from artifactcheck_sim.web import Body, Hang, Site, Trickle, WebFleet, WrongLength


async def test_hang_times_out_on_read(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(fault=Hang()), host())
    http = {"read_timeout": 0.3, "request_timeout": 5}
    async with make_fetcher(http=http, retry={"attempts": 1}) as f:
        started = time.monotonic()
        got = await f.get_asset(base, "a.js")
        took = time.monotonic() - started
    assert got.error_kind == "timeout"
    assert "read_timeout" in (got.error or "")  # not the 5 s request_timeout: no clock needed
    assert 0.25 <= took
    await eventually(lambda: fleet.server(base).connections_current == 0)


async def test_hang_is_retried_like_any_timeout(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(fault=Hang()), host())
    async with make_fetcher(http={"read_timeout": 0.2}, retry={"attempts": 2}) as f:
        got = await f.get_asset(base, "a.js")
    assert got.error_kind == "timeout" and got.attempts == 2
    assert fleet.server(base).request_count == 2


async def test_trickle_hits_the_whole_request_limit(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    # A byte every 50 ms never trips the read timeout; only the whole-request limit can.
    base = fleet.add(Site(fault=Trickle(b"x" * 200, interval=0.05)), host())
    http = {"read_timeout": 1.0, "request_timeout": 0.5}
    async with make_fetcher(http=http, retry={"attempts": 1}) as f:
        started = time.monotonic()
        got = await f.get_asset(base, "a.js")
        took = time.monotonic() - started
    assert got.error_kind == "timeout"
    assert "request_timeout" in (got.error or "")
    assert 0.45 <= took
    await eventually(lambda: fleet.server(base).connections_current == 0)


async def test_long_content_length_then_silence_times_out(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(fault=WrongLength(b"x" * 10, declared=1000)), host())
    async with make_fetcher(http={"read_timeout": 0.3}, retry={"attempts": 1}) as f:
        got = await f.get_asset(base, "a.js")
    assert got.error_kind == "timeout"


async def test_connect_timeout_against_a_full_backlog(
    make_fetcher, host: Callable[[], str]
) -> None:
    # A listener that never accepts: once its queue is full, SYNs are dropped (Linux).
    address = host()
    with full_backlog(address) as port:
        http = {"connect_timeout": 0.3, "request_timeout": 5}
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            started = time.monotonic()
            got = await f.get_asset(f"http://{address}:{port}/", "a.js")
            took = time.monotonic() - started
    assert got.error_kind == "timeout", got.error
    # the connect timeout, not the 5 s request_timeout, ended it
    assert "connect" in (got.error or "") and "request_timeout" not in (got.error or "")
    assert took >= 0.25


async def test_caller_deadline_cancels_without_leaking(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(fault=Hang(), overrides={}), host())
    other = fleet.add(Site(overrides={"/ok.js": Body(b"ok")}), host())
    http = {"read_timeout": 30, "request_timeout": 30, "max_per_host": 1, "max_connections": 1}
    async with make_fetcher(http=http) as f:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):  # the per-instance deadline of the pipeline
                await asyncio.gather(*(f.get_asset(base, f"a{i}.js") for i in range(3)))
        assert f.stats.in_flight == 0
        await eventually(lambda: fleet.server(base).connections_current == 0)
        # The only slot was released: the next request goes through (a slot still held
        # by a hanging request would be freed only by its 30 s read timeout).
        got = await asyncio.wait_for(f.get_asset(other, "ok.js"), 20)
    assert got.ok
    assert fleet.server(base).request_count == 1


async def test_cancelled_mid_body_closes_the_connection(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(fault=Trickle(b"x" * 1000, interval=0.02, chunk=10)), host())
    async with make_fetcher(http={"max_per_host": 1}) as f:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await f.get_asset(base, "a.js")
        assert f.stats.in_flight == 0 and f.stats.bytes_read > 0
        await eventually(lambda: fleet.server(base).connections_current == 0)
