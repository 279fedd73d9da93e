"""One ArtifactCheck's life on the leader: watch its pods, and run its cycles
(control/cycle.py: observe, judge, decide, act, record) when they are due.

Full cycles re-sample every ``interval``; beside them, the gate-mode fast path checks
a pod whose containers just became ready at once, reusing the other pods' last
observations so the safety limits still see the whole workload. A cycle that fails
is that cycle's failure, never the check's end. Each namespace's cycles share its
slots and request budget (tenancy/admission.py), so a flood waits for itself.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from artifactcheck.act.kube_actor import cordoned_by_us
from artifactcheck.control import candidates, check_wiring
from artifactcheck.control.accepting import Accepting
from artifactcheck.control.actions import Acting
from artifactcheck.control.context import Context
from artifactcheck.control.cycle import Cycle, Running
from artifactcheck.control.pins_store import PinsKeeper
from artifactcheck.control.state import CheckState
from artifactcheck.control.watching import Watching
from artifactcheck.discover.kube_pods import list_pods_async, watch_pods_async
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import proxies_of
from artifactcheck.fetch.retry import backoff_delays
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.records import replace
from artifactcheck.observe.instance import Observer
from artifactcheck.present.logs import ContextAdapter
from artifactcheck.tenancy.admission import RequestBudget

__all__ = ["Checking"]


class Checking:
    """Runs the checks this replica leads for, each in a task of its own."""

    def __init__(
        self, ctx: Context, *, watching: Watching, acting: Acting, accepting: Accepting
    ) -> None:
        self.api = ctx.api
        self.settings = ctx.settings
        self.admin = ctx.admin
        self.address_rules = ctx.address_rules
        self.metrics = ctx.metrics
        self.heartbeat = ctx.heartbeat
        self.rng = ctx.rng
        self.watching = watching
        self.reporting = accepting.reporting
        self.accepting = accepting
        accepting.watching = watching
        #: The pins' store (control/pins_store.py), written before each status write.
        self.keeper = PinsKeeper(ctx, reporting=self.reporting, watching=watching)
        self.reporting.save_pins = self.keeper.sync
        self.budget = RequestBudget(per_minute=ctx.admin.limits.requests_per_minute)
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.running_cycles: dict[str, int] = {}  # per namespace, now
        self.peak_cycles: dict[str, int] = {}  # per namespace, the most at once so far
        self.cycle = Cycle(ctx, acting=acting, accepting=accepting)

    async def run(self, state: CheckState) -> None:
        """Watch the check's pods and run its cycles until cancelled."""
        clog = ContextAdapter(logging.getLogger("artifactcheck.check"), {"check": state.key})
        stop = asyncio.Event()
        assert state.spec.kubernetes is not None
        if state.spec.policy.cordon_nodes:  # needs the opt-in node RBAC
            await self._recover_cordoned(state, clog)
        watcher = asyncio.create_task(self._watch_pods(state, stop, watching_since=time.time()))
        followers: list[asyncio.Task[None]] = []
        try:
            if state.pins is not None:
                # the store's pins, read before anything is loaded or judged; then the
                # ReleaseAcceptances that name the check (control/accepting.py)
                followers.append(await self.keeper.follow(state, stop))
                followers.append(asyncio.create_task(self.accepting.follow(state, stop)))
            scope = check_wiring.credential_scope(state)
            async with Fetcher(
                http=state.spec.http,
                retry=state.spec.retry,
                logger=clog,
                egress=check_wiring.egress_for(state, self.address_rules),
                scoped_headers=scope or None,
                proxies=proxies_of(self.admin.egress),  # the admin's, never the environment's
            ) as fetcher:
                state.expectations = check_wiring.expectations_or_unavailable(
                    state.spec,
                    fetcher,
                    clog,
                    kube=self.watching.kube,
                    namespace=state.namespace,
                    trust=functools.partial(check_wiring.trust_of, state),
                )
                if (
                    state.pins
                    and state.expectations
                    and not check_wiring.watched_release(state.spec)
                ):
                    # a URL's manifest is read again every interval, so a rebuild there
                    # is caught by its pin (ConfigMaps are watched: seen when edited)
                    state.expectations.refresh_after = state.spec.interval
                observer = Observer(
                    spec=state.spec, fetcher=fetcher, expectations=state.expectations
                )
                await self._cycle_forever(Running(state, observer, fetcher, clog))
        finally:
            stop.set()
            for task in (watcher, *followers):
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
            self.keeper.forget(state.key)
            if state.expectations is not None:
                state.expectations.close()  # stops a ConfigMap watch; never blocks

    async def _recover_cordoned(
        self, state: CheckState, log_: logging.LoggerAdapter[logging.Logger]
    ) -> None:
        """The nodes artifactcheck cordoned before a restart, so they are not repeated."""
        try:
            state.history = replace(
                state.history,
                cordoned=frozenset(await cordoned_by_us(self.watching.kube)),
            )
        except ArtifactCheckError as exc:
            log_.warning("could not read cordoned nodes: %s", exc)

    async def _watch_pods(
        self, state: CheckState, stop: asyncio.Event, *, watching_since: float
    ) -> None:
        src = state.spec.kubernetes
        assert src is not None
        kube = self.watching.kube
        await self.watching.run(
            stop,
            name=f"pods {state.key}",
            # each pod summarised as its page arrives: the JSON of every pod is never
            # held at once
            list_fn=lambda: list_pods_async(
                kube,
                functools.partial(candidates.summary, state),
                namespace=src.namespace,
                selector=src.selector,
            ),
            watch_fn=lambda rv: watch_pods_async(
                kube,
                namespace=src.namespace,
                selector=src.selector,
                resource_version=rv,
                timeout=self.settings.watch_timeout,
            ),
            on_sync=functools.partial(candidates.pods_listed, state, watching_since),
            on_event=functools.partial(candidates.pod_changed, state, watching_since),
        )

    # -- scheduling ----------------------------------------------------------------

    async def _cycle_forever(self, run: Running) -> None:
        """Full cycles every ``interval`` and, beside them, new pods as they come.

        The two run as separate tasks: a pod that just became ready is observed at
        once even while a full cycle is fetching its sample, and waits at most for
        the judging and acting of a cycle under way (``state.judging``).
        """
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._full_cycles(run))
            tg.create_task(self._new_pod_cycles(run))

    async def _full_cycles(self, run: Running) -> None:
        """A full cycle (a fresh sample, judged with every pod's latest observation)
        every ``interval``. The first one also checks every pod found at start-up."""
        state = run.state
        next_full = 0.0
        while True:
            self.heartbeat.beat()
            now = time.monotonic()
            if state.synced and now >= next_full:
                wait = self.budget.wait_time(state.namespace)
                if wait > 0:
                    await self._throttle(state, wait, run.log)
                    continue
                if not await self._budgeted_cycle(run, full=True):
                    continue  # the first full cycle is retried before the fast path starts
                next_full = time.monotonic() + state.spec.interval
                state.started.set()
            timeout = max(0.0, next_full - time.monotonic()) if state.synced else 0.05
            await asyncio.sleep(min(timeout, 5.0))

    async def _new_pod_cycles(self, run: Running) -> None:
        """The gate-mode fast path: pods that just became ready, observed, judged
        against the check's current state and acted on, without waiting for a cycle.

        It is the same cycle as a full one over the same observations (only the pods
        observed differ), so it gives the verdicts a full cycle would
        (tests/k8s/test_controller.py compares them).
        """
        state = run.state
        await state.started.wait()
        while True:
            self.heartbeat.beat()
            if state.synced and state.pending:
                await asyncio.sleep(self.settings.new_pod_debounce)
                wait = self.budget.wait_time(state.namespace)
                if wait > 0:
                    await self._throttle(state, wait, run.log)
                    continue
                await self._budgeted_cycle(run, full=False)
                continue
            state.wake.clear()
            # asyncio.timeout, not asyncio.wait_for: on Python 3.11, wait_for returns
            # the result of a wait that finished in the loop turn before a cancellation
            # and drops the cancellation. A pod event (the wake) just before the check
            # was rebuilt (its spec changed) left this loop running for ever: the old
            # check's fetcher, pod watch, state and cycles lived on beside the new
            # check's, and shutdown waited for it (seen in the soak benchmark).
            try:
                async with asyncio.timeout(5.0):
                    await state.wake.wait()
            except TimeoutError:
                pass

    async def _budgeted_cycle(self, run: Running, *, full: bool) -> bool:
        """One cycle in the namespace's slot, its requests spent from the namespace's budget.

        A cycle that raises is that cycle's failure, never the check's end: it is
        logged and counted (``artifactcheck_cycle_failures_total``, the
        ArtifactCheckCycleFailing alert), and the next one starts after a backoff
        (``backoff_base`` doubling to ``backoff_max``, reset by a cycle that succeeds).
        The new pods it took are pending again. Whether the cycle succeeded.
        """
        ns = run.state.namespace
        async with self._slot(ns):
            self.running_cycles[ns] = self.running_cycles.get(ns, 0) + 1
            self.peak_cycles[ns] = max(self.peak_cycles.get(ns, 0), self.running_cycles[ns])
            requests0 = run.fetcher.stats.requests
            failed = False
            try:
                await self.cycle.run(run, full=full)
                run.failures = None
            except Exception:  # noqa: BLE001 - one cycle never ends the check
                failed = True
                self.metrics.cycle_failures.labels(run.state.key).inc()
                run.log.exception(
                    "%s cycle failed; the check goes on", "full" if full else "new-pod"
                )
            finally:
                self.running_cycles[ns] -= 1
                self.budget.spend(ns, run.fetcher.stats.requests - requests0)
        if failed:
            if run.failures is None:
                run.failures = backoff_delays(
                    self.settings.backoff_base, self.settings.backoff_max, self.rng
                )
            await asyncio.sleep(next(run.failures))
        return not failed

    def _slot(self, namespace: str) -> asyncio.Semaphore:
        """The namespace's share of concurrent cycles: its flood waits for itself."""
        slot = self._slots.get(namespace)
        if slot is None:
            slot = asyncio.Semaphore(self.admin.limits.concurrent_cycles_per_namespace)
            self._slots[namespace] = slot
        return slot

    async def _throttle(
        self, state: CheckState, wait: float, log_: logging.LoggerAdapter[logging.Logger]
    ) -> None:
        """Wait for the namespace's request budget, saying so in the check's status."""
        limit = self.admin.limits.requests_per_minute
        reason = (
            f"namespace {state.namespace!r} spent its request budget ({limit:g} per "
            "minute, all its checks together); cycles wait until it refills"
        )
        if state.throttled is None:
            log_.warning("throttled for %.1fs: %s", wait, reason)
        state.throttled = reason
        await self.reporting.rewrite_status(state, log_)
        await asyncio.sleep(wait)
