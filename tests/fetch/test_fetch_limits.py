"""Concurrency caps, measured where they matter: at the servers' sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from artifactcheck_sim.web import Body, Delay, Site, WebFleet


def slow_site(delay: float = 0.05) -> Site:
    return Site(fault=Delay(delay, then=Body(b"x" * 1000)))


async def test_per_host_cap(make_fetcher, fleet: WebFleet, host: Callable[[], str]) -> None:
    base = fleet.add(slow_site(), host())
    async with make_fetcher(http={"max_per_host": 3, "max_connections": 64}) as f:
        results = await asyncio.gather(*(f.get_asset(base, f"a{i}.js") for i in range(24)))
    assert all(r.ok for r in results)
    server = fleet.server(base)
    assert server.request_count == 24
    assert server.peak_in_flight == 3  # reached, never exceeded
    assert server.connections_peak <= 3
    assert f.stats.per_host[base.rstrip("/")].peak_in_flight == 3


async def test_total_cap_across_hosts(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    bases = fleet.add_many([(slow_site(), host()) for _ in range(10)])
    async with make_fetcher(http={"max_per_host": 2, "max_connections": 5}) as f:
        jobs = [f.get_asset(b, f"a{i}.js") for b in bases for i in range(4)]
        results = await asyncio.gather(*jobs)
    assert all(r.ok for r in results)
    assert fleet.total_requests == 40
    assert fleet.peak_in_flight == 5
    assert f.stats.peak_in_flight == 5
    assert all(s.peak_in_flight <= 2 for s in fleet.servers)


async def test_keep_alive_reuses_connections(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(overrides={f"/a{i}.js": b"y" * 5000 for i in range(200)}), host())
    async with make_fetcher(http={"max_per_host": 4}) as f:
        results = await asyncio.gather(*(f.get_asset(base, f"a{i}.js") for i in range(200)))
    assert all(r.ok for r in results)
    server = fleet.server(base)
    assert server.request_count == 200
    assert server.connections_total <= 4


async def test_error_statuses_keep_the_connection(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(), host())  # every path is a 404
    async with make_fetcher(http={"max_per_host": 1}) as f:
        for i in range(20):
            assert (await f.get_asset(base, f"missing{i}.js")).status == 404
    assert fleet.server(base).connections_total == 1
