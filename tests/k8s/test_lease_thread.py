"""The Lease is renewed on a thread of its own: pod actions never delay it.

A start-up opens thousands of gates through the default executor (``to_thread``);
a renewal queued behind them missed the renew deadline, and the leader stepped down in
the middle of its first cycle (docs/scaling.md, 20,000 pods). client-go's leader
election runs in its own goroutine; here it has its own thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

from artifactcheck.control.controller import Controller, ControllerSettings
from artifactcheck.control.controller_settings import renew_deadline, renew_period_for
from artifactcheck.tenancy.admission import AdminConfig
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.apiserver_faults import FaultRule, Faults

WRITE_VERBS = frozenset({"create", "update", "patch"})
LEASES = frozenset({"leases"})


@contextlib.contextmanager
def lease_only(renew_period: float) -> Iterator[tuple[FakeApiServer, Controller]]:
    """A fake API server and a controller on it whose Lease a test drives itself
    (``ctl.leadership.lead``); a 3 s lease. Both ended afterwards."""
    server = FakeApiServer(namespaces=("ops",))
    server.start()
    api = server.api_client()
    settings = ControllerSettings(
        namespace="ops",
        identity="a",
        lease_namespace="ops",
        lease_duration=3.0,
        renew_period=renew_period,
        admin=AdminConfig(),
    )
    ctl = Controller(api_client=api, settings=settings)
    try:
        yield server, ctl
    finally:
        ctl.leadership.pool.shutdown(wait=True)
        api.close()  # type: ignore[no-untyped-call]
        server.stop()


def test_renewal_is_not_queued_behind_a_busy_default_executor() -> None:
    release = threading.Event()
    with lease_only(renew_period=0.2) as (_, ctl):

        async def run() -> tuple[bool, float]:
            loop = asyncio.get_running_loop()
            # every worker of the default executor busy, more queued: a start-up's actions
            busy = [loop.run_in_executor(None, release.wait, 120) for _ in range(64)]
            stop = asyncio.Event()
            lead = asyncio.create_task(ctl.leadership.lead(stop))
            started = time.monotonic()
            # the busy workers wait up to 120 s: a renewal queued behind them would get
            # no lease before they are released (after this wait), whatever the speed
            while not ctl.is_leader and time.monotonic() - started < 60:
                await asyncio.sleep(0.02)
            became = time.monotonic() - started
            leader = ctl.is_leader
            stop.set()
            release.set()
            await lead
            await asyncio.gather(*busy)
            return leader, became

        try:
            leader, became = asyncio.run(run())
        finally:
            release.set()  # the busy workers end even when run() failed
        assert leader, "no lease while the default executor was busy"
        print(f"lease acquired after {became:.3f}s beside a busy default executor")


def test_one_failed_renewal_is_tried_again_within_the_deadline() -> None:
    """client-go retries a failed renewal every RetryPeriod (2 s of a 10 s deadline), so
    one 500 costs nothing. Retrying only after another renew period (5 s of 10 s with
    the CLI's former renew period, a third of the lease) left one try before the
    deadline, and a single failed write under a loaded API server gave leadership up
    (seen in the soak's fault windows). The renew period here is that third.
    """
    # renew every third of the lease (the longest period a user may set), deadline two
    # thirds
    with lease_only(renew_period=1.0) as (server, ctl):

        async def run() -> tuple[list[float], Faults]:
            stop = asyncio.Event()
            lead = asyncio.create_task(ctl.leadership.lead(stop))
            while not ctl.is_leader:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)  # a renewal period under way
            # the next Lease write fails (500), and only that one
            faults = Faults([FaultRule("error", 1.0, verbs=WRITE_VERBS, resources=LEASES)])
            server.faults = faults
            lost: list[float] = []
            started = time.monotonic()
            while time.monotonic() - started < 4.0:
                if server.faults is not None and faults.injected:
                    server.faults = None
                if not ctl.is_leader:
                    lost.append(time.monotonic() - started)
                await asyncio.sleep(0.01)
            stop.set()
            await lead
            return lost, faults

        lost, faults = asyncio.run(run())
        assert sum(faults.injected.values()) == 1, faults.injected
        assert lost == [], f"leadership lost {lost[0]:.2f}s after one failed renewal"


def test_the_controller_command_renews_as_client_go_does() -> None:
    """client-go's defaults: LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s, so
    a leader renews every 2 s and has five tries within its deadline."""
    period = renew_period_for(15.0)
    deadline = renew_deadline(ControllerSettings(lease_duration=15.0, renew_period=period))
    assert (period, deadline) == (2.0, 10.0)
    assert renew_period_for(2.0) == 1.0  # never below a second
