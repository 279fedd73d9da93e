"""The in-cluster controller: watch ArtifactChecks and their pods, check, act safely.

One replica holds a coordination.k8s.io Lease and acts; the others wait to take over.
The leader keeps an informer-style cache per ArtifactCheck (list once, then watch,
relist on 410 Gone, reconnect with backoff), so a steady cycle costs no API reads and
no writes when nothing changed. Each check re-samples every ``interval``; a pod whose
containers just became ready is checked at once (the gate-mode fast path), reusing
the other pods' last observations so the safety limits still see the whole workload.

A dependency outage (API server, CDN, release source) never stops the loop: cycles
report ``inconclusive`` and the controller keeps its last state. On restart, state is
recovered from the cluster (pod conditions and ``artifactcheck.io/*`` annotations,
cordoned nodes), so actions and Events are not repeated.

:class:`Controller` is the coordinator; each part has a module of its own:

- ``leadership``: the Lease (acquire, renew, hand over), who leads, ``may_act``;
- ``watching``: list-then-watch, relist on 410, reconnect backoff;
- ``registry``: the ArtifactChecks known, admitted or refused (admission);
- ``checking`` (with ``cycle``, ``pods`` and ``wiring``): one check's pods and cycles;
- ``actions``, ``reporting``, ``accepting``: the writes a cycle makes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

from artifactcheck.control import accepting, forward
from artifactcheck.control.accepting import Accepting
from artifactcheck.control.actions import Acting, Writes
from artifactcheck.control.api import VerdictApi
from artifactcheck.control.checking import Checking
from artifactcheck.control.context import Context
from artifactcheck.control.controller_settings import ControllerSettings
from artifactcheck.control.health import HealthServer
from artifactcheck.control.known_checks import Registry
from artifactcheck.control.leadership import Leadership
from artifactcheck.control.metrics import CONTENT_TYPE, Metrics
from artifactcheck.control.reporting import Reporting
from artifactcheck.control.shard import Shard
from artifactcheck.control.state import CheckState, RefusedCheck
from artifactcheck.control.status import list_checks_async, watch_checks_async
from artifactcheck.control.watching import Watching
from artifactcheck.control.workers import ObservePool
from artifactcheck.control.young_generation import young_generation
from artifactcheck.discover.kube_pods import default_namespace
from artifactcheck.model.names import CRD_PLURAL
from artifactcheck.tenancy.admission import AdminConfig, load_admin_config

log = logging.getLogger("artifactcheck.control.controller")

#: Kept importable from here (tests/release_trust read it).
_annotated_by = accepting.annotated_by


class Controller:
    """Leader-elected reconcile loop over ArtifactCheck resources: the coordinator of
    its leadership, watches, registry of checks and their tasks."""

    def __init__(
        self,
        *,
        api_client: Any,
        settings: ControllerSettings,
        metrics: Metrics | None = None,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        admin: AdminConfig | None = None,
    ) -> None:
        self.api = api_client
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.log = logger or log
        self.clock = clock
        self.rng = rng or random.Random()
        #: What namespaced checks may ask for; without a file, nothing is granted.
        if admin is None:
            admin = settings.admin or self._admin_config(settings.admin_config)
        self.admin = admin
        ctx = Context(api_client, settings, admin, self.metrics, self.log, clock, self.rng)
        self.address_rules = ctx.address_rules
        self.heartbeat = ctx.heartbeat
        self.shard = Shard(settings.shard, settings.total_shards)
        self._stop = ctx.stopping
        lease = (
            settings.lease_namespace or default_namespace(),
            self.shard.lease_name(settings.lease_name),
        )
        self.leadership = Leadership(ctx, lease=lease, on_change=self._leadership_changed)
        self.watching = Watching(ctx)
        self.writes = Writes(self.may_act)
        self.reporting = Reporting(ctx, self.writes)
        self.accepting = Accepting(ctx, self.reporting)
        acting = Acting(ctx, self.writes)
        self.checking = Checking(
            ctx, watching=self.watching, acting=acting, accepting=self.accepting
        )
        self.registry = Registry(ctx, self)
        #: The parts' state, shared (never reassigned there): what tests, the verdict
        #: API and the simulator read of a controller.
        self.checks = self.registry.checks
        self.refused = self.registry.refused
        self.lock = self.leadership.lock
        self.renew_deadline = self.leadership.renew_deadline
        self.peak_cycles = self.checking.peak_cycles
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._spawned: set[asyncio.Task[None]] = set()  # refusals, dropped checks
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def workers(self) -> ObservePool | None:
        """Processes that observe a large cycle (control/workers.py); None: all here.

        Set by the process that started them, before any thread (a fork server's
        children inherit no lock held by a thread).
        """
        return self.checking.cycle.workers

    @workers.setter
    def workers(self, pool: ObservePool | None) -> None:
        self.checking.cycle.workers = pool

    def _admin_config(self, path: str | None) -> AdminConfig:
        """The admin configuration file; absent (an optional ConfigMap not created) means
        the strict default, which grants nothing. A file that exists must be valid."""
        if path is not None and not os.path.exists(path):
            self.log.warning(
                "admin configuration %s does not exist: no credential, no egress beyond "
                "the selected pods is granted to any ArtifactCheck",
                path,
            )
            return AdminConfig()
        return load_admin_config(path)

    @property
    def synced(self) -> bool:
        """Whether the first ArtifactCheck list succeeded."""
        return self.registry.synced

    @property
    def is_leader(self) -> bool:
        """Whether this replica holds the Lease (control/leadership.py)."""
        return self.leadership.is_leader

    @property
    def cycles_completed(self) -> int:
        """Cycles done by every check so far."""
        return self.checking.cycle.completed

    # -- probes --------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        """Ready once the first ArtifactCheck list succeeded (leader or standby), unless
        a configuration error means this replica can never lead."""
        if (error := self.leadership.config_error) is not None:
            return (False, f"configuration error: {error}\n")
        role = "leader" if self.is_leader else "standby"
        return (self.synced, f"{role}; synced={self.synced}; checks={len(self.checks)}\n")

    def may_act(self) -> bool:
        """Whether this replica may write now (control/leadership.py): asked before
        every write."""
        return self.leadership.may_act()

    def leader(self) -> forward.Leader | None:
        """The leader's verdict API, by the Lease as last read (None: none to ask)."""
        return self.leadership.leader()

    def serve_health(
        self, *, host: str, port: int, probes: bool = True, metrics: bool = True
    ) -> HealthServer:
        """Start /healthz and /readyz (``probes``), /metrics and the verdict API
        (``metrics``; docs/verdict-api.md) in a thread. A standby's API forwards to the
        leader; the server that serves /metrics is the one this replica advertises. A
        probes-only port serves no API, so a NetworkPolicy that lets kubelet (any
        source) reach it lets nobody reach the API (k8s/README.md)."""
        forwarder = forward.Forwarder(
            identity=self.settings.identity,
            leader=self.leader,
            counted=lambda outcome: self.metrics.verdict_forwards.labels(outcome).inc(),
        )
        server = HealthServer(
            host=host,
            port=port,
            live=self.heartbeat.check if probes else None,
            ready=self.ready if probes else None,
            metrics=(lambda: (self.metrics.exposition(), CONTENT_TYPE)) if metrics else None,
            api=VerdictApi(
                self, loop=lambda: self._loop, forwarder=forwarder, identity=self.settings.identity
            )
            if metrics
            else None,
        )
        if metrics and self.settings.advertise_address is None:
            own = os.environ.get("POD_IP", "").strip() or host
            if own not in ("", "0.0.0.0", "::"):  # noqa: S104 - a wildcard is not an address
                self.leadership.advertised = forward.format_address(own, server.port)
        return server.start()

    # -- main loop -----------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set: elect, watch, check, act."""
        with young_generation():
            await self._run(stop)

    async def _run(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            async with asyncio.TaskGroup() as tg:
                long_lived = [
                    tg.create_task(self._guard("checks-watch", self._watch_checks(stop))),
                    tg.create_task(self._guard("leader", self.leadership.lead(stop))),
                ]
                await stop.wait()
                # Stop acting first (may_act is now False), then hand the lease over at
                # once, then end the watches: a standby takes over within a second.
                self._stop.set()
                for task in list(self._tasks.values()):
                    task.cancel()
                await self.leadership.step_down()
                for task in long_lived:
                    task.cancel()
        finally:
            self._stop.set()
            await self.leadership.step_down()
            # Every task this controller spawned ends before the watches' client closes.
            spawned = [*self._tasks.values(), *self._spawned]
            for task in spawned:
                task.cancel()
            await asyncio.gather(*spawned, return_exceptions=True)
            await self.watching.close()
            await self.leadership.close()

    async def _guard(self, name: str, coro: Any) -> None:
        """Run a long-lived task; log an unexpected exit instead of dying silently."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("task %s exited unexpectedly", name)
            raise

    def _spawn(self, name: str, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run a short task (a refusal, an acceptance) that shutdown waits for; none
        before :meth:`run` gave this controller its loop."""
        if self._loop is not None:
            self._keep(self._loop.create_task(self._guard(name, work())))

    def _keep(self, task: asyncio.Task[None]) -> None:
        """Remember a task until it ends, so shutdown can wait for it."""
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    def _leadership_changed(self, held: bool) -> None:
        """Leading: run every admitted check, report every refusal. Not: stop them."""
        if held:
            for state in self.checks.values():
                self._start_check(state)
            for refused in self.refused.values():
                self._announce_refusal(refused)
        else:
            for key in list(self._tasks):
                self._end_task(key)

    async def _watch_checks(self, stop: asyncio.Event) -> None:
        kube = self.watching.kube

        async def listed() -> tuple[list[dict[str, Any]], str]:
            return self.shard.filter_list(
                await list_checks_async(kube, namespace=self.settings.namespace)
            )

        await self.watching.run(
            stop,
            name=CRD_PLURAL,
            list_fn=listed,
            watch_fn=lambda rv: self.shard.filter_watch_async(
                watch_checks_async(
                    kube,
                    namespace=self.settings.namespace,
                    resource_version=rv,
                    timeout=self.settings.watch_timeout,
                )
            ),
            on_sync=self.registry.sync,
            on_event=self.registry.event,
        )

    # -- the checks' tasks ----------------------------------------------------------

    # the registry's news (control/known_checks.py Runs)

    def on_admitted(self, state: CheckState) -> None:
        if self.is_leader:
            self._start_check(state)

    def on_refused(self, refused: RefusedCheck) -> None:
        self._announce_refusal(refused)

    def on_dropped(self, key: str) -> None:
        self._end_task(key)

    def is_running(self, key: str) -> bool:
        return key in self._tasks

    def on_changed(self, state: CheckState) -> None:
        self._accept_release_later(state)

    def _start_check(self, state: CheckState) -> None:
        if state.key in self._tasks or self._loop is None:
            return
        self._tasks[state.key] = self._loop.create_task(
            self._guard(f"check {state.key}", self.checking.run(state))
        )
        self._accept_release_later(state)  # an annotation left while nobody led

    def _end_task(self, key: str) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            self._keep(task)
            task.cancel()

    def _announce_refusal(self, refused: RefusedCheck) -> None:
        """Write ``Accepted=False`` and a Warning Event (only the leader writes)."""
        if self.is_leader:
            self._spawn(f"refusal {refused.key}", lambda: self.reporting.refusal(refused))

    def _accept_release_later(self, state: CheckState) -> None:
        """Act on an ``artifactcheck.io/accept-release`` annotation (leader only)."""
        value = accepting.accept_requested(state)
        if value is None or not self.is_leader or state.key not in self._tasks:
            return
        self._spawn(f"accept {state.key}", lambda: self.accepting.accept(state, value))


__all__ = ["CheckState", "Controller", "ControllerSettings", "RefusedCheck"]
