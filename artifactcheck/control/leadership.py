"""Leader election: acquire and renew the Lease, hand it over, say who leads.

client-go's rules: a leader's renewal must succeed within the renew deadline of its
last successful one (every request's timeout is cut to what is left); past it, the
leader stops acting at once and gives up leadership. A standby only takes an
expired lease (lease duration > renew deadline), so two replicas never act at the
same time. :meth:`Leadership.may_act` is asked before every write.

The Lease's requests are coroutines on the leadership's own task (client-go's leader
election runs in its own goroutine): no thread and no executor queue sits between a
renewal and the API server, so a start-up's thousands of writes never delay it, and a
renewal cut off at its deadline ends its request with it. A 429's hold
(:attr:`Leadership.not_before`) is a value of that task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

from artifactcheck.clients.kube import Throttled
from artifactcheck.control import forward
from artifactcheck.control.context import Context, sleep_unless_stopped
from artifactcheck.control.controller_settings import renew_deadline
from artifactcheck.control.lease import LeaseLock, LeaseNamespaceMissing
from artifactcheck.model.errors import ArtifactCheckError

__all__ = ["Leadership"]

#: How many times a failed renewal is tried within the renew deadline (client-go's
#: defaults: a RetryPeriod of 2 s in a RenewDeadline of 10 s).
RETRIES_PER_DEADLINE = 5


class Leadership:
    """This replica's hold on the Lease: whether it leads, until when it may act.

    ``lease``: (namespace, name) of the Lease; ``on_change(held)`` is called after the
    role changed (the coordinator starts or stops the checks).
    """

    def __init__(
        self, ctx: Context, *, lease: tuple[str, str], on_change: Callable[[bool], None]
    ) -> None:
        self.settings = settings = ctx.settings
        self.metrics = ctx.metrics
        self.log = ctx.log
        self.heartbeat = ctx.heartbeat
        self._stopping = ctx.stopping
        self._on_change = on_change
        namespace, name = lease
        self.lock = LeaseLock(api_client=ctx.api, namespace=namespace, name=name)
        self.renew_deadline = renew_deadline(settings)
        self.is_leader = False
        #: time.monotonic() until which this replica may act: the start of its last
        #: successful renewal plus the renew deadline (0 while not leading).
        self.acting_until = 0.0
        #: Lease requests one at a time: the release at shutdown must not race a renewal.
        self._guard = asyncio.Lock()
        #: A configuration error that keeps this replica from ever leading (e.g. the
        #: Lease's namespace does not exist): /readyz fails with it.
        self.config_error: str | None = None
        #: time.monotonic() before which no Lease request is sent: a throttled renewal
        #: is not repeated sooner (the renew deadline still ends the leadership in time).
        self.not_before = 0.0
        #: Where this replica's verdict API answers (published on the Lease).
        self.advertised: str | None = settings.advertise_address

    def may_act(self) -> bool:
        """Whether this replica may write now: it leads, is not shutting down, and its
        last renewal is younger than the renew deadline. Asked before every write, so
        a leader whose renewal hangs stops writing at its deadline, not when it
        notices."""
        return (
            self.is_leader and not self._stopping.is_set() and time.monotonic() < self.acting_until
        )

    def leader(self) -> forward.Leader | None:
        """The leader's verdict API, by the Lease as last read: None when nobody else
        holds a running lease (by this replica's clock) or the holder published no
        usable address."""
        seen = self.lock.observed
        address = seen.other_leader(self.settings.identity, datetime.now(UTC)) if seen else None
        if seen is None or seen.holder is None or address is None:
            return None
        parsed = forward.parse_leader_address(address)
        if parsed is None:
            return None
        return forward.Leader(identity=seen.holder, host=parsed[0], port=parsed[1])

    async def lead(self, stop: asyncio.Event) -> None:
        """Acquire or renew the Lease every renew period; start/stop acting accordingly
        (the module's rules)."""
        while not stop.is_set():
            self.heartbeat.beat()
            started = time.monotonic()
            deadline = self.acting_until if self.is_leader else started + self.renew_deadline
            held = False
            try:
                if started < self.not_before:
                    raise Throttled(
                        "lease renewal held back: the API server asked to retry later",
                        retry_after=self.not_before - started,
                    )
                # asyncio.timeout, never wait_for, in control/: on Python 3.11 wait_for
                # can drop a cancellation (control/checking.py says how)
                async with asyncio.timeout(max(0.0, deadline - started)):
                    held = await self._renew(datetime.now(UTC), deadline)
                self._config_ok()
            except TimeoutError:
                self.metrics.api_errors.labels("lease").inc()
                self.log.warning(
                    "lease renewal did not finish within the renew deadline (%.1fs)",
                    self.renew_deadline,
                )
            except LeaseNamespaceMissing as exc:
                self._config_failed("lease-namespace", str(exc))
            except ArtifactCheckError as exc:
                if isinstance(exc, Throttled):
                    self.not_before = max(self.not_before, time.monotonic() + exc.retry_after)
                self.metrics.api_errors.labels("lease").inc()
                self.log.warning("lease renewal failed: %s", exc)
            if held:
                self.acting_until = started + self.renew_deadline
                self._set(True)  # even when stopping: then the lease is released
            elif not self.is_leader or time.monotonic() >= self.acting_until:
                # Another holder, or no renewal within the deadline: stop acting now.
                self._set(False)
            if stop.is_set():
                break
            # A leader whose renewal failed tries again every fifth of the deadline
            # (client-go's RetryPeriod, 2 s of 10 s), so one failed write under a
            # loaded API server costs nothing; never sooner than a 429 asked, and
            # waking at its deadline at the latest, to give leadership up in time.
            now = time.monotonic()
            retrying = self.is_leader and not held
            period = self.settings.renew_period
            if retrying:
                period = min(period, self.renew_deadline / RETRIES_PER_DEADLINE)
            wait = max(period, self.not_before - now)
            if retrying:
                wait = min(wait, max(0.0, self.acting_until - now))
            await sleep_unless_stopped(stop, wait)

    async def step_down(self) -> None:
        """Release the lease if held (client-go's ReleaseOnCancel), within a second."""
        if not self.is_leader:
            return
        self.is_leader = False
        self.acting_until = 0.0
        self.metrics.leader.set(0)
        try:
            async with asyncio.timeout(1.5):
                await self._release()
        except TimeoutError:
            self.log.warning("could not release the lease within 1.5s; it expires instead")

    async def close(self) -> None:
        """Close the Lease's client (after :meth:`step_down`)."""
        await self.lock.aclose()

    async def _release(self) -> None:
        # A renewal in flight finishes first (or the release would lose the race to
        # it with a 409); one that hangs is not waited for: its timeout is bounded.
        try:
            async with asyncio.timeout(0.5):
                await self._guard.acquire()
        except TimeoutError:
            got = False
        else:
            got = True
        try:
            deadline = time.monotonic() + 1.0
            for _ in range(2):  # a renewal that landed meanwhile: 409, read again
                if await self.lock.release(self.settings.identity, deadline=deadline):
                    return
        except ArtifactCheckError as exc:
            self.log.warning("could not release the lease: %s", exc)
        finally:
            if got:
                self._guard.release()

    async def _renew(self, now: datetime, deadline: float) -> bool:
        async with self._guard:
            return await self.lock.try_acquire_or_renew(
                self.settings.identity,
                self.settings.lease_duration,
                now,
                deadline=deadline,
                address=self.advertised,
            )

    def _set(self, held: bool) -> None:
        if held == self.is_leader:
            return
        self.log.info("%s leadership as %s", "acquired" if held else "lost", self.settings.identity)
        self.is_leader = held
        self.metrics.leader.set(1 if held else 0)
        if not held:
            self.acting_until = 0.0
        self._on_change(held)

    def _config_failed(self, reason: str, message: str) -> None:
        """A configuration error this replica cannot lead with: loud, and in /readyz."""
        if self.config_error != message:
            self.log.error("configuration error, this replica cannot lead: %s", message)
        self.config_error = message
        self.metrics.config_error.labels(reason).set(1)

    def _config_ok(self) -> None:
        if self.config_error is not None:
            self.log.info("configuration error resolved")
            self.config_error = None
            self.metrics.config_error.clear()
