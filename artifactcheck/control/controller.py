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
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from artifactcheck.act.kube import KubeActor, cordoned_by_us
from artifactcheck.act.logs import ContextAdapter
from artifactcheck.clients.kube import Throttled, WatchExpired, abort_stream
from artifactcheck.clients.kube_bodies import Pod
from artifactcheck.control import forward
from artifactcheck.control.addresses import api_server_addresses, own_addresses
from artifactcheck.control.api import VerdictApi
from artifactcheck.control.health import HealthServer, Heartbeat
from artifactcheck.control.lease import LeaseLock, LeaseNamespaceMissing
from artifactcheck.control.metrics import CONTENT_TYPE, Metrics
from artifactcheck.control.release_pins import (
    ANN_ACCEPT_RELEASE,
    PinsError,
    StatusPins,
    parse_accept,
)
from artifactcheck.control.shard import Shard
from artifactcheck.control.status import (
    list_checks_raw,
    patch_check_annotations,
    patch_check_status,
    record_check_event,
    watch_checks,
)
from artifactcheck.control.workers import FetchSetup, ObservePool
from artifactcheck.discover.kube import (
    actionable_copy,
    containers_ready,
    default_namespace,
    list_pods_as,
    pod_to_instance,
    watch_pods,
)
from artifactcheck.discover.sample import draw_seed, sample_instances
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.headers import configured_headers
from artifactcheck.fetch.proxy import proxies_of
from artifactcheck.fetch.retry import backoff_delays
from artifactcheck.judge.compare import CdnView, JudgeCache
from artifactcheck.judge.decide import Decision, History, InstanceState, held_out_of_traffic
from artifactcheck.model.errors import ArtifactCheckError, ConfigError, ExpectationUnavailable
from artifactcheck.model.names import ANN_STREAK, CRD_PLURAL, LEASE_NAME
from artifactcheck.model.settings import CheckSpec, HttpSettings
from artifactcheck.model.values import (
    Action,
    ActionKind,
    Expectation,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Manifest,
    Observation,
    Report,
    Severity,
    Verdict,
)
from artifactcheck.observe.instance import Observer
from artifactcheck.pipeline import Started, judge_step, observe_each
from artifactcheck.release.sources import CallableSource, Expectations
from artifactcheck.release.wiring import build_expectations
from artifactcheck.tenancy.admission import (
    AdminConfig,
    Admission,
    RequestBudget,
    admit,
    load_admin_config,
    source_hosts,
)
from artifactcheck.tenancy.credentials import CredentialScope
from artifactcheck.tenancy.egress import Address, AddressRules, EgressPolicy, parse_address

if TYPE_CHECKING:  # cryptography loads only when a check asks for release trust
    from artifactcheck.release.guard import ReleaseTrust

log = logging.getLogger("artifactcheck.control.controller")

#: Pod actions in flight at once (threads of the default executor, each one request
#: at a time): enough to open thousands of gates at start-up in seconds, few enough
#: to leave the executor to the lease renewal and status writes.
_ACTING_AT_ONCE = 4


@dataclass
class ControllerSettings:
    """How the controller runs (not what it checks: that is each ArtifactCheck's spec)."""

    namespace: str | None = None  # None = all namespaces
    identity: str = "artifactcheck"
    #: None: the namespace the controller runs in (POD_NAMESPACE, else the service
    #: account's namespace file); neither is a configuration error.
    lease_namespace: str | None = None
    lease_name: str = LEASE_NAME
    lease_duration: float = 15.0
    renew_period: float = 5.0
    #: client-go's renewDeadline: a leader that could not renew for this long stops
    #: acting and gives up leadership, before a standby may take the lease over
    #: (lease_duration). None: two thirds of lease_duration, as client-go's defaults.
    renew_deadline: float | None = None
    watch_timeout: int = 30
    #: How long the fast path waits for more pods before checking the ones pending:
    #: short, as a gated pod's wait includes it (pods that come during a check are
    #: batched into the next one anyway).
    new_pod_debounce: float = 0.05
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    admin_config: str | None = None  # path of the cluster admin's tenancy configuration
    admin: AdminConfig | None = None  # the same, already loaded (wins over the path)
    #: This replica owns the ArtifactChecks of shard ``shard`` of ``total_shards``
    #: (control/shard.py, docs/scaling.md); 0 of 1 owns them all.
    shard: int = 0
    total_shards: int = 1
    #: ``host:port`` where this replica's verdict API answers the other replicas,
    #: published on the Lease while it leads. None: the port of the server that serves
    #: /metrics (the ``artifactcheck-metrics`` Service's) on $POD_IP, else on the
    #: address it binds unless that is a wildcard (then nothing is published).
    advertise_address: str | None = None


@dataclass
class CheckState:
    """Everything the leader keeps for one ArtifactCheck."""

    key: str
    namespace: str
    name: str
    spec: CheckSpec
    generation: int
    history: History = field(default_factory=History)
    pods: dict[str, Instance] = field(default_factory=dict)
    #: Per pod, what the actions read before writing (kept from the watch, so acting
    #: needs no GET): see :func:`artifactcheck.discover.kube.actionable_copy`.
    objects: dict[str, Pod] = field(default_factory=dict)
    observations: dict[str, Observation] = field(default_factory=dict)
    #: Each pod's address (parsed once, when the pod comes or moves), and the set of
    #: them the egress policy asks on every connection; None: to be rebuilt (a pod
    #: came, went or moved; rebuilding is a set of the kept addresses, no parsing).
    addresses: dict[str, Address] = field(default_factory=dict)
    hosts: frozenset[Address] | None = None
    #: The last verdict of each pod and its inputs: a cycle judges only what changed.
    judged: JudgeCache = field(default_factory=JudgeCache)
    #: Judging, deciding and acting, one cycle at a time: observing is not in it, so a
    #: new pod is observed (and then judged) while a full cycle still fetches.
    judging: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Set once the first full cycle is done: until then it checks every pod itself.
    started: asyncio.Event = field(default_factory=asyncio.Event)
    ready_since: dict[str, float] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    last_status: dict[str, Any] | None = None
    last_report: Report | None = None
    expectations: Expectations | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    synced: bool = False
    admission: Admission | None = None
    throttled: str | None = None  # why the last cycle waited for the request budget
    cycle_ends: list[float] = field(default_factory=list)  # monotonic, last 100 cycles
    #: condition type -> (status, lastTransitionTime) as last written (or as found in
    #: the object at start-up), so a transition time changes only with its status.
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    opened: set[str] = field(default_factory=set)  # gates opened by the last cycle
    #: ``releasePins``: the check's pins, kept in its status (control/release_pins.py);
    #: None without ``releasePins: true``.
    pins: StatusPins | None = None
    #: (version, sha256) of the release changes a Warning Event was written for (those
    #: already in the status at start-up count as announced: no repeat after a restart).
    announced: set[tuple[str, str]] = field(default_factory=set)
    #: The object as last seen (its annotations: a release to accept).
    latest: dict[str, Any] | None = None


@dataclass(slots=True)
class _Running:
    """What the cycles of one running check share."""

    state: CheckState
    observer: Observer
    fetcher: Fetcher
    log: logging.LoggerAdapter[logging.Logger]
    #: The backoff after failed cycles; None: the last cycle succeeded.
    failures: Iterator[float] | None = None


@dataclass
class RefusedCheck:
    """An ArtifactCheck admission refused: nothing runs for it, its status says why."""

    key: str
    obj: dict[str, Any]
    generation: int
    admission: Admission


def _expectations_or_unavailable(
    spec: CheckSpec,
    fetcher: Fetcher,
    log_: logging.LoggerAdapter[logging.Logger],
    *,
    api_client: Any = None,
    namespace: str | None = None,
    trust: Callable[[], ReleaseTrust | None] = lambda: None,
) -> Expectations | None:
    """The check's release source; one that cannot be used (a granted release file
    missing, two files declaring one version) makes every verdict ``inconclusive`` with
    that reason, so the check keeps reporting instead of its task dying.

    Release ConfigMaps are listed and watched in the check's own ``namespace`` only,
    through the controller's API client (borrowed, never closed here).
    """
    try:
        configmaps = None
        if spec.release_configmaps is not None and api_client is not None and namespace:
            from artifactcheck.release.configmaps import ConfigMapReleases

            configmaps = ConfigMapReleases(
                namespace=namespace,
                selector=spec.release_configmaps.selector,
                api_client=api_client,
                watch=True,
            )
        return build_expectations(spec, fetcher, configmaps=configmaps, trust=trust())
    except ConfigError as exc:
        log_.error("release source unusable: %s", exc)
        reason = str(exc)

        async def unavailable(version: str) -> Manifest:
            raise ExpectationUnavailable(reason)

        source = CallableSource(unavailable, description="unusable release source")
        return Expectations(source, max_versions=spec.cache_versions)


#: A listed pod as a check keeps it: the instance, since when it is ready, the copy
#: its actions start from (:func:`artifactcheck.discover.kube.actionable_copy`).
_PodSummary = tuple[Instance, "datetime | None", Pod]
_Listed = TypeVar("_Listed")


def _address(instance: Instance) -> Address | None:
    """The IP address a pod is reached at (None: its URL names no IP literal)."""
    return parse_address(urlsplit(instance.base_url).hostname or "")


def _creation_order(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """Sort key: oldest ArtifactCheck first (RFC 3339 stamps sort as text), then name."""
    meta = obj.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def _transitions(obj: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The (status, lastTransitionTime) of each condition already in an object's
    status: a restarted controller keeps the transition times its predecessor wrote."""
    out: dict[str, tuple[str, str]] = {}
    status = obj.get("status") or {}
    for c in status.get("conditions") or [] if isinstance(status, Mapping) else []:
        if isinstance(c, Mapping) and c.get("type") and c.get("lastTransitionTime"):
            out[str(c["type"])] = (str(c.get("status")), str(c["lastTransitionTime"]))
    return out


def _renew_deadline(settings: ControllerSettings) -> float:
    """client-go's renewDeadline: given, or two thirds of the lease duration."""
    deadline = settings.renew_deadline
    if deadline is None:
        deadline = settings.lease_duration * 2 / 3
    if not 0 < deadline < settings.lease_duration:
        raise ConfigError(
            f"renew deadline {deadline:g}s must be shorter than the lease duration "
            f"{settings.lease_duration:g}s: a standby may take over at expiry"
        )
    return deadline


class Controller:
    """Leader-elected reconcile loop over ArtifactCheck resources."""

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
        #: Processes that observe a large cycle (control/workers.py), set by the
        #: process that started them before any thread; None: all here.
        self.workers: ObservePool | None = None
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.log = logger or log
        self.clock = clock
        self.rng = rng or random.Random()
        #: What namespaced checks may ask for; without a file, nothing is granted.
        if admin is None:
            admin = settings.admin or self._admin_config(settings.admin_config)
        self.admin = admin
        self.address_rules = self._address_rules(api_client)
        self.budget = RequestBudget(per_minute=self.admin.limits.requests_per_minute)
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.running_cycles: dict[str, int] = {}  # per namespace, now
        self.peak_cycles: dict[str, int] = {}  # per namespace, the most at once so far
        self.refused: dict[str, RefusedCheck] = {}
        self.checks: dict[str, CheckState] = {}
        self.is_leader = False
        self.heartbeat = Heartbeat(max_age=max(30.0, settings.renew_period * 6))
        self.shard = Shard(settings.shard, settings.total_shards)
        lease_namespace = settings.lease_namespace or default_namespace()
        self.lock = LeaseLock(
            api_client=api_client,
            namespace=lease_namespace,
            name=self.shard.lease_name(settings.lease_name),
        )
        self.renew_deadline = _renew_deadline(settings)
        #: time.monotonic() until which this replica may act: the start of its last
        #: successful renewal plus the renew deadline (0 while not leading).
        self.acting_until = 0.0
        #: Lease requests one at a time: the release at shutdown must not race a renewal.
        self._lease_guard = threading.Lock()
        #: A configuration error that keeps this replica from ever leading (e.g. the
        #: Lease's namespace does not exist): /readyz fails with it.
        self.config_error: str | None = None
        #: Open watch responses, aborted at shutdown so their threads end at once.
        self._streams: set[Any] = set()
        self._streams_guard = threading.Lock()
        self._stop = threading.Event()
        #: Watches block a thread each for as long as they stream; they get their own
        #: pool so that many checks (one pod watch each) never starve the default
        #: executor that status writes and actions run in.
        self._watch_pool = ThreadPoolExecutor(max_workers=1024, thread_name_prefix="watch")
        #: The Lease's requests have a thread of their own (client-go's leader election
        #: runs in its own goroutine): in the default executor a renewal queued behind
        #: hundreds of pod actions missed its deadline, and the leader stepped down in
        #: the middle of a large start-up (docs/scaling.md).
        self._lease_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lease")
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._spawned: set[asyncio.Task[None]] = set()  # refusals, dropped checks
        self._loop: asyncio.AbstractEventLoop | None = None
        self.cycles_completed = 0
        self.synced = False
        #: time.monotonic() before which no pod action or status write is sent: the
        #: API server answered one with 429 and a Retry-After (API Priority and
        #: Fairness throttles the controller's flow as a whole, not one pod).
        self.writes_not_before = 0.0
        #: The same for the Lease's requests (a throttled renewal is not repeated
        #: sooner; the renew deadline still ends the leadership in time).
        self.lease_not_before = 0.0
        #: Where this replica's verdict API answers (published on the Lease).
        self.advertised: str | None = settings.advertise_address

    def _address_rules(self, api_client: Any) -> AddressRules:
        """Addresses no check may connect to: the API server's, our own, the denied."""
        host = getattr(getattr(api_client, "configuration", None), "host", None)
        return AddressRules(
            allow_loopback=self.admin.egress.allow_loopback,
            api_server=api_server_addresses(host),
            own=own_addresses(),
            denied=tuple(
                ipaddress.ip_network(c, strict=False) for c in self.admin.egress.deny_cidrs
            ),
        )

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

    # -- probes --------------------------------------------------------------------

    def ready(self) -> tuple[bool, str]:
        """Ready once the first ArtifactCheck list succeeded (leader or standby), unless
        a configuration error means this replica can never lead."""
        if self.config_error is not None:
            return (False, f"configuration error: {self.config_error}\n")
        role = "leader" if self.is_leader else "standby"
        return (self.synced, f"{role}; synced={self.synced}; checks={len(self.checks)}\n")

    def may_act(self) -> bool:
        """Whether this replica may write now: it leads, is not shutting down, and its
        last renewal is younger than the renew deadline. Asked before every write, so
        a leader whose renewal hangs stops writing at its deadline, not when it
        notices."""
        return self.is_leader and not self._stop.is_set() and time.monotonic() < self.acting_until

    def serve_health(
        self, *, host: str, port: int, probes: bool = True, metrics: bool = True
    ) -> HealthServer:
        """Start /healthz and /readyz (``probes``), /metrics (``metrics``) and the verdict
        API (docs/verdict-api.md) in a thread. A standby's API forwards to the leader;
        the server that serves /metrics is the one this replica advertises."""
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
            ),
        )
        if metrics and self.settings.advertise_address is None:
            own = os.environ.get("POD_IP", "").strip() or host
            if own not in ("", "0.0.0.0", "::"):  # noqa: S104 - a wildcard is not an address
                self.advertised = forward.format_address(own, server.port)
        return server.start()

    def leader(self) -> forward.Leader | None:
        """The leader's verdict API, by the Lease as last read: None when nobody else
        holds a running lease (by this replica's clock) or the holder published no
        usable address."""
        seen = self.lock.observed
        address = seen.other_leader(self.settings.identity, datetime.now(UTC)) if seen else None
        if seen is None or seen.holder is None or address is None:
            return None
        parsed = forward.parse_address(address)
        if parsed is None:
            return None
        return forward.Leader(identity=seen.holder, host=parsed[0], port=parsed[1])

    # -- main loop -----------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set: elect, watch, check, act."""
        self._loop = asyncio.get_running_loop()
        try:
            async with asyncio.TaskGroup() as tg:
                long_lived = [
                    tg.create_task(self._guard("checks-watch", self._watch_checks(stop))),
                    tg.create_task(self._guard("leader", self._lead(stop))),
                ]
                await stop.wait()
                # Stop acting first (may_act is now False), then hand the lease over at
                # once, then end the watches: a standby takes over within a second.
                self._stop.set()
                for task in list(self._tasks.values()):
                    task.cancel()
                await self._step_down()
                self._abort_streams()
                for task in long_lived:
                    task.cancel()
        finally:
            self._stop.set()
            await self._step_down()
            self._abort_streams()
            # Every task this controller spawned ends before the watch pool closes.
            spawned = [*self._tasks.values(), *self._spawned]
            for task in spawned:
                task.cancel()
            await asyncio.gather(*spawned, return_exceptions=True)
            await asyncio.to_thread(self._watch_pool.shutdown, wait=True, cancel_futures=True)
            await asyncio.to_thread(self._lease_pool.shutdown, wait=True, cancel_futures=True)
            self.lock.close()

    async def _step_down(self) -> None:
        """Release the lease if held (client-go's ReleaseOnCancel), within a second."""
        if not self.is_leader:
            return
        self.is_leader = False
        self.acting_until = 0.0
        self.metrics.leader.set(0)
        try:
            loop = asyncio.get_running_loop()
            await asyncio.wait_for(
                loop.run_in_executor(self._lease_pool, self._release_lease), timeout=1.5
            )
        except TimeoutError:
            self.log.warning("could not release the lease within 1.5s; it expires instead")

    def _abort_streams(self) -> None:
        with self._streams_guard:
            streams = list(self._streams)
        for response in streams:
            abort_stream(response)

    def _track_stream(self, response: Any, is_open: bool) -> None:
        with self._streams_guard:
            if is_open:
                self._streams.add(response)
            else:
                self._streams.discard(response)
        if is_open and self._stop.is_set():
            abort_stream(response)

    async def _guard(self, name: str, coro: Any) -> None:
        """Run a long-lived task; log an unexpected exit instead of dying silently."""
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("task %s exited unexpectedly", name)
            raise

    def _release_lease(self) -> None:
        # A renewal in flight finishes first (or the release would lose the race to
        # it with a 409); one that hangs is not waited for: its timeout is bounded.
        got = self._lease_guard.acquire(timeout=0.5)
        try:
            deadline = time.monotonic() + 1.0
            for _ in range(2):  # a renewal that landed meanwhile: 409, read again
                if self.lock.release(self.settings.identity, deadline=deadline):
                    return
        except ArtifactCheckError as exc:
            self.log.warning("could not release the lease: %s", exc)
        finally:
            if got:
                self._lease_guard.release()

    def _renew(self, now: datetime, deadline: float) -> bool:
        with self._lease_guard:
            return self.lock.try_acquire_or_renew(
                self.settings.identity,
                self.settings.lease_duration,
                now,
                deadline=deadline,
                address=self.advertised,
            )

    def _set_leader(self, held: bool) -> None:
        if held == self.is_leader:
            return
        self.log.info("%s leadership as %s", "acquired" if held else "lost", self.settings.identity)
        self.is_leader = held
        self.metrics.leader.set(1 if held else 0)
        if held:
            for state in self.checks.values():
                self._start_check(state)
            for refused in self.refused.values():
                self._announce_refusal(refused)
        else:
            self.acting_until = 0.0
            for key in list(self._tasks):
                task = self._tasks.pop(key)
                self._keep(task)
                task.cancel()

    async def _lead(self, stop: asyncio.Event) -> None:
        """Acquire or renew the Lease every renew period; start/stop acting accordingly.

        client-go's rules: a leader's renewal must succeed within the renew deadline of
        its last successful one (every request's timeout is cut to what is left);
        past it, the leader stops acting at once and gives up leadership. A standby
        only takes an expired lease (lease duration > renew deadline), so two
        replicas never act at the same time.
        """
        while not stop.is_set():
            self.heartbeat.beat()
            started = time.monotonic()
            deadline = self.acting_until if self.is_leader else started + self.renew_deadline
            held = False
            try:
                if started < self.lease_not_before:
                    raise Throttled(
                        "lease renewal held back: the API server asked to retry later",
                        retry_after=self.lease_not_before - started,
                    )
                renewal = asyncio.get_running_loop().run_in_executor(
                    self._lease_pool, self._renew, datetime.now(UTC), deadline
                )
                held = await asyncio.wait_for(renewal, timeout=max(0.0, deadline - started))
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
                    self.lease_not_before = max(
                        self.lease_not_before, time.monotonic() + exc.retry_after
                    )
                self.metrics.api_errors.labels("lease").inc()
                self.log.warning("lease renewal failed: %s", exc)
            if held:
                self.acting_until = started + self.renew_deadline
                self._set_leader(True)  # even when stopping: then the lease is released
            elif not self.is_leader or time.monotonic() >= self.acting_until:
                # Another holder, or no renewal within the deadline: stop acting now.
                self._set_leader(False)
            if stop.is_set():
                break
            # A leader whose renewal failed retries every renew period, and wakes at
            # its deadline at the latest, to give leadership up in time.
            wait = max(self.settings.renew_period, self.lease_not_before - time.monotonic())
            if self.is_leader and not held:
                wait = min(wait, max(0.0, self.acting_until - time.monotonic()))
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait)
            except TimeoutError:
                pass

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

    # -- ArtifactCheck watch -------------------------------------------------------

    async def _watch_checks(self, stop: asyncio.Event) -> None:
        await self._run_watch(
            stop,
            name=CRD_PLURAL,
            list_fn=lambda: self.shard.filter_list(
                list_checks_raw(self.api, namespace=self.settings.namespace)
            ),
            watch_fn=lambda rv: self.shard.filter_watch(
                watch_checks(
                    self.api,
                    namespace=self.settings.namespace,
                    resource_version=rv,
                    timeout=self.settings.watch_timeout,
                    stop=self._stop,
                    opened=self._track_stream,
                )
            ),
            on_sync=self._sync_checks,
            on_event=self._check_event,
        )

    async def _run_watch(
        self,
        stop: asyncio.Event,
        *,
        name: str,
        list_fn: Callable[[], tuple[list[_Listed], str]],
        watch_fn: Callable[[str], Iterator[tuple[str, dict[str, Any]]]],
        on_sync: Callable[[list[_Listed]], None],
        on_event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """List, then watch from the list's resourceVersion; relist on 410; back off.

        A watch that breaks (cut mid-stream, a 5xx, a 429) resumes from the last
        resourceVersion it delivered, as client-go's reflector does, instead of listing
        everything again: under a loaded API server, relisting every pod at every cut
        is the load that makes it worse. Only a 410 (or a failed list) lists again.
        """
        delays = backoff_delays(self.settings.backoff_base, self.settings.backoff_max, self.rng)
        rv: str | None = None
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            delivered: list[str] = []  # the last resourceVersion the watch delivered
            try:
                if rv is None:
                    items, rv = await asyncio.to_thread(list_fn)
                    on_sync(items)
                    delays = backoff_delays(
                        self.settings.backoff_base, self.settings.backoff_max, self.rng
                    )
                queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
                current: str = rv or ""

                def pump(
                    start: str = current,
                    queue: asyncio.Queue[Any] = queue,
                    delivered: list[str] = delivered,
                ) -> str:
                    last = start
                    try:
                        for kind, obj in watch_fn(start):
                            last = obj.get("metadata", {}).get("resourceVersion") or last
                            delivered[:] = [last]
                            loop.call_soon_threadsafe(queue.put_nowait, (kind, obj))
                            if self._stop.is_set():
                                break
                    finally:
                        loop.call_soon_threadsafe(queue.put_nowait, None)
                    return last

                pumping = loop.run_in_executor(self._watch_pool, pump)
                while (item := await queue.get()) is not None:
                    if item[0] != "BOOKMARK":
                        on_event(*item)
                rv = await pumping
            except WatchExpired:
                self.log.info("watch of %s expired (410 Gone); relisting", name)
                rv = None
            except ArtifactCheckError as exc:
                self.metrics.api_errors.labels(name).inc()
                # full jitter, but never sooner than a 429's Retry-After asks
                delay = max(next(delays), exc.retry_after if isinstance(exc, Throttled) else 0.0)
                self.log.warning("watch of %s failed: %s; retrying in %.2fs", name, exc, delay)
                # resume after what was delivered; a failed list (or a watch that
                # delivered nothing since the list) starts from the list's version
                rv = delivered[0] if delivered else rv
                try:
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                except TimeoutError:
                    pass

    def _sync_checks(self, items: list[dict[str, Any]]) -> None:
        seen = set()
        # Oldest first: when a namespace has more checks than allowed, the newest wait.
        for obj in sorted(items, key=_creation_order):
            seen.add(self._upsert_check(obj))
        for key in (set(self.checks) | set(self.refused)) - seen:
            self._drop_check(key)
            self.metrics.forget(key)
        self.synced = True

    def _check_event(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata", {})
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if kind == "DELETED":
            self._drop_check(key)
            self.metrics.forget(key)
        elif kind in ("ADDED", "MODIFIED"):
            self._upsert_check(obj)
            state = self.checks.get(key)
            if state is None:
                return
            state.latest = obj
            if state.pins is not None and key not in self._tasks:
                # not running here (a standby): the leader's pins, as its status says,
                # are the ones this replica starts from if it takes over
                state.pins, state.announced = _pins_of(state, obj)
            self._accept_release_later(state)

    def _upsert_check(self, obj: dict[str, Any], *, force: bool = False) -> str:
        """Admit a new or changed ArtifactCheck and (re)start it, or record the refusal.

        Admission runs before anything else: a refused check gets no fetcher, no pod
        watch and no task, so nothing is read or fetched for it.
        """
        meta = obj.get("metadata", {})
        ns, name = meta.get("namespace", "default"), meta.get("name", "")
        key = f"{ns}/{name}"
        generation = int(meta.get("generation") or 1)
        existing = self.checks.get(key)
        if not force and existing is not None and existing.generation == generation:
            return key
        old_refusal = self.refused.get(key)
        if not force and old_refusal is not None and old_refusal.generation == generation:
            return key
        others = sum(1 for s in self.checks.values() if s.namespace == ns and s.key != key)
        admission = admit(ns, obj.get("spec") or {}, self.admin, checks_in_namespace=others)
        if admission.spec is None:
            self.log.warning("ArtifactCheck %s refused: %s", key, admission.message)
            if existing is not None:
                self._drop_check(key, readmit=True)
            self.refused[key] = RefusedCheck(
                key=key,
                obj=obj,
                generation=generation,
                admission=admission,
            )
            self._announce_refusal(self.refused[key])
            return key
        self.refused.pop(key, None)
        state = CheckState(
            key=key,
            namespace=ns,
            name=name,
            spec=admission.spec,
            generation=generation,
            admission=admission,
        )
        state.transitions = _transitions(obj)
        state.latest = obj
        if state.spec.release_pins:
            state.pins, state.announced = _pins_of(state, obj)
        if existing is not None:
            state.history = existing.history
            state.last_status = existing.last_status
            state.transitions = existing.transitions or state.transitions
            if state.pins is not None and existing.pins is not None:
                existing.pins.max_versions = state.spec.cache_versions
                state.pins, state.announced = existing.pins, existing.announced
            self._drop_check(key)
        self.checks[key] = state
        if self.is_leader:
            self._start_check(state)
        return key

    def _drop_check(self, key: str, *, readmit: bool = True) -> None:
        state = self.checks.pop(key, None)
        self.refused.pop(key, None)
        task = self._tasks.pop(key, None)
        if task is not None:
            self._keep(task)
            task.cancel()
        if state is not None and readmit:
            # A slot in the namespace is free: the oldest check refused for want of
            # one is admitted again (the others stay refused).
            waiting = sorted(
                (
                    r
                    for r in self.refused.values()
                    if r.obj.get("metadata", {}).get("namespace") == state.namespace
                    and any(x.rule == "TooManyChecks" for x in r.admission.refusals)
                ),
                key=lambda r: _creation_order(r.obj),
            )
            for refused in waiting:
                self._upsert_check(refused.obj, force=True)
                if refused.key in self.checks:
                    break

    def _announce_refusal(self, refused: RefusedCheck) -> None:
        """Write ``Accepted=False`` and a Warning Event (only the leader writes)."""
        if not self.is_leader or self._loop is None:
            return
        self._keep(
            self._loop.create_task(self._guard(f"refusal {refused.key}", self._refuse(refused)))
        )

    def _keep(self, task: asyncio.Task[None]) -> None:
        """Remember a task until it ends, so shutdown can wait for it."""
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    async def _refuse(self, refused: RefusedCheck) -> None:
        meta = refused.obj.get("metadata", {})
        ns, name = meta.get("namespace", "default"), meta.get("name", "")
        admission = refused.admission
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "observedGeneration": refused.generation,
            "conditions": [
                {
                    "type": "Accepted",
                    "status": "False",
                    "reason": admission.reason,
                    "message": admission.message[:32768],
                    "observedGeneration": refused.generation,
                    "lastTransitionTime": stamp,
                }
            ],
            "counts": None,
            "findings": None,
            "quarantined": None,
        }
        try:
            if not self.may_act():
                return
            await asyncio.to_thread(patch_check_status, self.api, ns, name, status)
            if not self.may_act():
                return
            await asyncio.to_thread(
                record_check_event,
                self.api,
                refused.obj,
                reason=admission.reason,
                message=admission.message,
                logger=self.log,
            )
        except ArtifactCheckError as exc:
            self.metrics.api_errors.labels("status").inc()
            self.log.warning("could not report the refusal of %s: %s", refused.key, exc)

    def _start_check(self, state: CheckState) -> None:
        if state.key in self._tasks or self._loop is None:
            return
        self._tasks[state.key] = self._loop.create_task(
            self._guard(f"check {state.key}", self._run_check(state))
        )
        self._accept_release_later(state)  # an annotation left while nobody led

    # -- accepting a changed release -----------------------------------------------

    def _accept_release_later(self, state: CheckState) -> None:
        """Act on an ``artifactcheck.io/accept-release`` annotation (leader only)."""
        annotations = ((state.latest or {}).get("metadata") or {}).get("annotations") or {}
        value = annotations.get(ANN_ACCEPT_RELEASE)
        if value is None or state.pins is None or not self.is_leader or self._loop is None:
            return
        if state.key not in self._tasks:
            return
        self._keep(
            self._loop.create_task(
                self._guard(f"accept {state.key}", self._accept_release(state, str(value)))
            )
        )

    async def _accept_release(self, state: CheckState, value: str) -> None:
        """Adopt the release the annotation names, record it in the status, then remove
        the annotation (in that order: a crash between the two only repeats an
        acceptance already recorded, which is recognised and not recorded twice).

        A value that does not parse, or names no change to adopt, is a Warning Event;
        the annotation is removed too, so it is not tried again forever.
        """
        assert state.pins is not None and state.latest is not None
        obj = state.latest
        try:
            version, digest = parse_accept(value)
            if not state.pins.already_accepted(version, digest):
                record = state.pins.accept(version, digest, by=_annotated_by(obj))
                self.log.warning(
                    "%s: release %s accepted (sha256 %s) by %s",
                    state.key,
                    version,
                    record.sha256,
                    record.by or "an annotation",
                )
                state.announced = {a for a in state.announced if a[0] != version}
                if state.last_report is not None:
                    quarantined = sum(1 for s in state.history.instances.values() if s.quarantined)
                    clog = ContextAdapter(
                        logging.getLogger("artifactcheck.check"), {"check": state.key}
                    )
                    await self._write_status(state, state.last_report, quarantined, clog)
                    if not _pins_written(state):
                        return  # not recorded yet: the annotation stays, tried again
                state.wake.set()
        except (ValueError, PinsError) as exc:
            await self._check_warning(state, "ReleaseAcceptRefused", str(exc))
        if not self.may_act():
            return
        try:
            await asyncio.to_thread(
                patch_check_annotations,
                self.api,
                state.namespace,
                state.name,
                {ANN_ACCEPT_RELEASE: None},
            )
        except ArtifactCheckError as exc:
            self.metrics.api_errors.labels("status").inc()
            self.log.warning("could not remove %s from %s: %s", ANN_ACCEPT_RELEASE, state.key, exc)

    async def _check_warning(self, state: CheckState, reason: str, message: str) -> bool:
        """One Warning Event about the ArtifactCheck; whether it was written."""
        if not self.may_act() or state.latest is None:
            return False
        try:
            await asyncio.to_thread(
                record_check_event,
                self.api,
                state.latest,
                reason=reason,
                message=message[:1024],
                logger=self.log,
            )
        except ArtifactCheckError as exc:
            self.metrics.api_errors.labels("event").inc()
            self.log.warning("could not record %s for %s: %s", reason, state.key, exc)
            return False
        return True

    async def _announce_release_changes(self, state: CheckState) -> None:
        """One Warning Event per release change (a version and the digest it changed to),
        not one per cycle."""
        if state.pins is None:
            return
        for version, entry in sorted(state.pins.changed().items()):
            assert entry.changed is not None
            key = (version, entry.changed.sha256)
            if key in state.announced:
                continue
            message = _change_message(state.pins, version, entry)
            if await self._check_warning(state, "ReleaseChanged", message):
                state.announced.add(key)

    # -- one ArtifactCheck ---------------------------------------------------------

    async def _run_check(self, state: CheckState) -> None:
        """Watch the check's pods and run its cycles until cancelled."""
        clog = ContextAdapter(logging.getLogger("artifactcheck.check"), {"check": state.key})
        stop = asyncio.Event()
        assert state.spec.kubernetes is not None
        if state.spec.policy.cordon_nodes:  # needs the opt-in node RBAC
            await self._recover_cordoned(state, clog)
        watcher = asyncio.create_task(self._watch_pods(state, stop, watching_since=time.time()))
        try:
            scope = self._credential_scope(state)
            async with Fetcher(
                http=state.spec.http,
                retry=state.spec.retry,
                logger=clog,
                egress=self._egress_for(state),
                scoped_headers=scope or None,
                proxies=proxies_of(self.admin.egress),  # the admin's, never the environment's
            ) as fetcher:
                state.expectations = _expectations_or_unavailable(
                    state.spec,
                    fetcher,
                    clog,
                    api_client=self.api,
                    namespace=state.namespace,
                    trust=functools.partial(_trust_of, state),
                )
                if state.pins and state.expectations and not state.spec.release_configmaps:
                    # a URL's manifest is read again every interval, so a rebuild there
                    # is caught by its pin (ConfigMaps are watched: seen when edited)
                    state.expectations.refresh_after = state.spec.interval
                observer = Observer(
                    spec=state.spec, fetcher=fetcher, expectations=state.expectations
                )
                await self._cycle_forever(_Running(state, observer, fetcher, clog))
        finally:
            stop.set()
            watcher.cancel()
            try:
                await watcher
            except (asyncio.CancelledError, Exception):
                pass
            if state.expectations is not None:
                state.expectations.close()  # stops a ConfigMap watch; never blocks

    async def _recover_cordoned(
        self, state: CheckState, log_: logging.LoggerAdapter[logging.Logger]
    ) -> None:
        """The nodes artifactcheck cordoned before a restart, so they are not repeated."""
        try:
            state.history = replace(
                state.history,
                cordoned=frozenset(await asyncio.to_thread(cordoned_by_us, self.api)),
            )
        except ArtifactCheckError as exc:
            log_.warning("could not read cordoned nodes: %s", exc)

    @staticmethod
    def _instance_addresses(state: CheckState) -> Callable[[], frozenset[Address]]:
        """The addresses of the check's pods now, for the egress policy and the
        credential scope."""

        def instance_addresses() -> frozenset[Address]:
            # asked on every new connection: a set, so a lookup is O(1) (a pass over
            # every pod per connection made a start-up quadratic in the pods), rebuilt
            # from the kept addresses only when the pods changed (re-parsing every
            # address per new pod dominated the event loop while pods came one by one;
            # docs/perf/history.md)
            if state.hosts is None:
                state.hosts = frozenset(state.addresses.values())
            return state.hosts

        return instance_addresses

    def _egress_for(self, state: CheckState) -> EgressPolicy:
        """Where the check's fetcher may connect: its pods, and the sources admitted."""
        assert state.admission is not None
        return EgressPolicy(
            rules=self.address_rules,
            sources=source_hosts(state.admission),
            instance_addresses=self._instance_addresses(state),
        )

    def _credential_scope(self, state: CheckState) -> CredentialScope:
        """The granted credentials' headers, read now (files, environment), each sent
        only where the admin's ``hosts`` and ``send_to_pods`` say; ConfigError names the
        credential whose file or variable is missing."""
        assert state.admission is not None
        resolved = []
        for cred in state.admission.credentials:
            try:
                values = configured_headers(
                    HttpSettings(header_files=cred.header_files, header_env=cred.header_env)
                )
            except ConfigError as exc:
                raise ConfigError(f"admin credential {cred.name!r}: {exc}") from exc
            resolved.append((cred, values))
        return CredentialScope(resolved, self._instance_addresses(state))

    # -- the check's pods ----------------------------------------------------------

    # A pod is a candidate once it has an IP *and* its containers are ready: kubelet
    # gives the IP first, and a pod checked before its server listens is only
    # "unreachable" (then waits a full interval). Becoming ready makes it new, and
    # new pods are checked at once.

    async def _watch_pods(
        self, state: CheckState, stop: asyncio.Event, *, watching_since: float
    ) -> None:
        src = state.spec.kubernetes
        assert src is not None
        await self._run_watch(
            stop,
            name=f"pods {state.key}",
            # each pod summarised as its page arrives (on the list's thread): the
            # JSON of every pod is never held at once
            list_fn=lambda: list_pods_as(
                self.api,
                functools.partial(self._summary, state),
                namespace=src.namespace,
                selector=src.selector,
            ),
            watch_fn=lambda rv: watch_pods(
                self.api,
                namespace=src.namespace,
                selector=src.selector,
                resource_version=rv,
                timeout=self.settings.watch_timeout,
                stop=self._stop,
                opened=self._track_stream,
            ),
            on_sync=functools.partial(self._pods_listed, state, watching_since),
            on_event=functools.partial(self._pod_changed, state, watching_since),
        )

    @staticmethod
    def _candidate(
        state: CheckState, obj: dict[str, Any]
    ) -> tuple[Instance | None, datetime | None]:
        """The pod as an instance once its containers are ready, and since when."""
        src = state.spec.kubernetes
        assert src is not None
        ready, since = containers_ready(obj)
        if not ready:
            return None, None
        condition = state.spec.policy.condition_type
        return pod_to_instance(obj, source=src, condition_type=condition), since

    @classmethod
    def _summary(cls, state: CheckState, obj: dict[str, Any]) -> _PodSummary | None:
        """What the check keeps of a listed pod: None for one that is not a candidate."""
        inst, ready_at = cls._candidate(state, obj)
        if inst is None:
            return None
        return inst, ready_at, actionable_copy(obj, state.spec.policy.condition_type)

    def _pods_listed(
        self, state: CheckState, watching_since: float, items: list[_PodSummary | None]
    ) -> None:
        pods = {}
        objects: dict[str, Pod] = {}
        since: dict[str, datetime | None] = {}
        for item in items:
            if item is not None:
                inst, ready_at, copy = item
                pods[inst.name] = inst
                objects[inst.name] = copy
                since[inst.name] = ready_at
        for name in pods.keys() - state.pods.keys():
            self._mark_new(state, name, since[name], watching_since)
        state.pods = pods
        state.addresses = {n: a for n, i in pods.items() if (a := _address(i)) is not None}
        state.hosts = None
        state.objects = objects
        state.synced = True
        state.wake.set()

    def _pod_changed(
        self, state: CheckState, watching_since: float, kind: str, obj: dict[str, Any]
    ) -> None:
        meta = obj.get("metadata", {})
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        inst, ready_at = (None, None) if kind == "DELETED" else self._candidate(state, obj)
        if inst is None:
            if state.pods.pop(name, None) is not None:
                state.addresses.pop(name, None)
                state.hosts = None
            state.objects.pop(name, None)
            state.observations.pop(name, None)
            state.ready_since.pop(name, None)
            return
        if name not in state.pods:
            self._mark_new(state, name, ready_at, watching_since)
        old = state.pods.get(name)
        if old is None or old.base_url != inst.base_url:
            address = _address(inst)
            if address is None:
                state.addresses.pop(name, None)
            else:
                state.addresses[name] = address
            state.hosts = None
        # an unchanged pod keeps its Instance (so its verdict is reused, not rejudged)
        state.pods[name] = old if old == inst else inst
        state.objects[name] = actionable_copy(obj, state.spec.policy.condition_type)

    # -- cycles --------------------------------------------------------------------

    async def _cycle_forever(self, run: _Running) -> None:
        """Full cycles every ``interval`` and, beside them, new pods as they come.

        The two run as separate tasks: a pod that just became ready is observed at
        once even while a full cycle is fetching its sample, and waits at most for
        the judging and acting of a cycle under way (``state.judging``).
        """
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._full_cycles(run))
            tg.create_task(self._new_pod_cycles(run))

    async def _full_cycles(self, run: _Running) -> None:
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

    async def _new_pod_cycles(self, run: _Running) -> None:
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
            try:
                await asyncio.wait_for(state.wake.wait(), timeout=5.0)
            except TimeoutError:
                pass

    async def _budgeted_cycle(self, run: _Running, *, full: bool) -> bool:
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
                await self._cycle(run, full=full)
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
        if state.last_report is not None:
            quarantined = sum(1 for s in state.history.instances.values() if s.quarantined)
            await self._write_status(state, state.last_report, quarantined, log_)
        await asyncio.sleep(wait)

    def _mark_new(
        self, state: CheckState, name: str, ready_at: datetime | None, watching_since: float
    ) -> None:
        """Check a pod that just became a candidate at the next (debounced) wake-up.

        Its verdict latency is measured from when its containers became ready (the
        ContainersReady condition's lastTransitionTime, the moment the wait begins),
        or from now without one. Pods already ready before this check started
        watching are not new pods: their latency is not recorded.
        """
        state.pending.add(name)
        wall, mono = time.time(), time.monotonic()
        if ready_at is None:
            state.ready_since.setdefault(name, mono)
        elif ready_at.timestamp() >= watching_since - 1.0:  # stamps have 1s precision
            state.ready_since.setdefault(name, mono - max(0.0, wall - ready_at.timestamp()))
        state.wake.set()

    async def _cycle(self, run: _Running, *, full: bool) -> None:
        """Observe (all pods, or just new ones), then the check step ``verify`` runs too
        (over every pod's latest observation); act, record, report."""
        state, observer, fetcher = run.state, run.observer, run.fetcher
        started = Started.now(fetcher)
        loaded: dict[str, Expectation] = {}
        observed: dict[str, Observation] = {}
        pending = set(state.pending)
        try:
            targets = self._targets(state, observer, full=full)
            first = not full  # new pods wait out of traffic: ahead of a full sample
            if self.workers is None or not await self.workers.observe(
                observer,
                targets,
                into=observed,
                loaded=loaded,
                first=first,
                fetch=lambda: FetchSetup(
                    self._egress_for(state),
                    self._credential_scope(state) or None,
                    proxies_of(self.admin.egress),
                ),
            ):
                await observe_each(observer, targets, into=observed, loaded=loaded, first=first)
            async with state.judging:
                # a pod that went away while it was observed is not judged any more
                state.observations.update((n, o) for n, o in observed.items() if n in state.pods)
                await self._judge_and_act(run, started, loaded, full=full, observed=observed.keys())
        except Exception:
            state.pending |= {n for n in pending if n in state.pods}  # checked again
            raise

    async def _judge_and_act(
        self,
        run: _Running,
        started: Started,
        loaded: dict[str, Expectation],
        *,
        full: bool,
        observed: Collection[str],
    ) -> None:
        """Judge every pod's latest observation (only what changed is judged again),
        decide, act, record: one cycle's second half, under ``state.judging``.
        ``observed``: the pods this cycle observed, the only ones whose verdict is
        new evidence (a confirmation streak counts observations, not cycles)."""
        state, observer, fetcher, log_ = run.state, run.observer, run.fetcher, run.log
        spec = state.spec
        observations = self._refreshed(state)
        checked = await judge_step(
            spec,
            observations,
            observer=observer,
            fetcher=fetcher,
            expectations=state.expectations,
            loaded=loaded,
            started=started,
            history=state.history,
            now=self.clock,
            instances_total=len(state.pods),
            gate_mode=True,
            known_versions=spec.known_versions,
            cache=state.judged,
            observed=observed,
        )
        state.judged.forget(state.observations)
        self._export_certificates(state, observations, checked.judgement.cdn)
        results = checked.judgement.results
        decision, withheld, held = _withhold_changed(state, checked.decision, results)
        performed, failed = await self._act(state, decision, results, log_)
        state.opened = {a.target for a in performed if a.kind is ActionKind.RELEASE}
        state.history = _undo_failed(checked.decision.history, state.history, [*failed, *withheld])
        report = replace(
            checked.report,
            actions=tuple(performed),
            findings=(*checked.report.findings, *held),
            elapsed=time.perf_counter() - started.clock,
        )
        await self._record(state, report, log_)
        log_.info(
            "cycle done (%s): %s",
            "full" if full else "new pods",
            ", ".join(f"{v} {k}" for k, v in report.counts().items() if v) or "no pods",
        )

    @staticmethod
    def _refreshed(state: CheckState) -> list[Observation]:
        """Every pod's latest observation, with the pod as the watch last saw it
        (labels, conditions); kept refreshed, so an unchanged pod stays the same
        object and its verdict is reused."""
        observations = []
        for name, obs in state.observations.items():
            inst = state.pods.get(name)
            if inst is None:
                continue
            if obs.instance is not inst:
                obs = replace(obs, instance=inst)
                state.observations[name] = obs
            observations.append(obs)
        return observations

    @staticmethod
    def _targets(state: CheckState, observer: Observer, *, full: bool) -> list[Instance]:
        """The pods to observe this cycle: a full one's (fresh) sample, the new ones.

        New pods are the fast path's (:meth:`_new_pod_cycles`), except before the first
        full cycle, which checks every pod found at start-up itself.
        """
        spec = state.spec
        take_new = not full or not state.started.is_set()
        targets = list(state.pods.values()) if full else []
        if full and spec.sampling.seed is None:
            # a fresh sample each full cycle (recorded in the report), so re-sampling
            # reaches every pod and file over time instead of the same ones forever
            observer.seed = draw_seed()
        if full and spec.sampling.instances:
            targets = sample_instances(targets, spec.sampling.instances, seed=observer.seed)
        if take_new:
            targets += [state.pods[n] for n in state.pending if n in state.pods]
            state.pending.clear()
        return list({i.name: i for i in targets}.values())

    def _export_certificates(
        self, state: CheckState, observations: list[Observation], cdn: CdnView | None
    ) -> None:
        certs = [o.tls for o in observations] + [cdn.tls if cdn else None]
        self.metrics.record_tls(
            state.key, [(c.endpoint, c.not_after.timestamp()) for c in certs if c is not None]
        )

    async def _record(
        self, state: CheckState, report: Report, log_: logging.LoggerAdapter[logging.Logger]
    ) -> None:
        """Remember the cycle's report; export its metrics; write the check's status."""
        state.last_report = report
        state.throttled = None
        now_mono = time.monotonic()
        state.cycle_ends = [*state.cycle_ends[-99:], now_mono]
        for r in report.results:
            since = state.ready_since.pop(r.instance.name, None)
            if since is not None:
                self.metrics.verdict_latency.observe(now_mono - since)
        quarantined = sum(1 for s in state.history.instances.values() if s.quarantined)
        self.metrics.record_report(state.key, report, quarantined=quarantined)
        await self._write_status(state, report, quarantined, log_)
        await self._announce_release_changes(state)
        self.cycles_completed += 1

    async def _act(
        self,
        state: CheckState,
        decision: Decision,
        results: list[Any],
        log_: logging.LoggerAdapter[logging.Logger],
    ) -> tuple[list[Action], list[Action]]:
        """Perform the decided actions: (those that changed the cluster, those that
        failed or were not attempted because this replica may not write now). Failures
        are logged, never crash the loop."""
        actor = KubeActor(
            api_client=self.api,
            policy=state.spec.policy,
            logger=log_,
            may_write=self.may_act,
            cached_pod=lambda ns, name: state.objects.get(f"{ns}/{name}"),
        )
        by_name = {r.instance.name: r for r in results}
        if not self.may_act():
            return [], list(decision.actions)
        failed: set[int] = set()
        done = await self._apply_all(actor, decision.actions, by_name, log_, failed)
        performed = [a for a, ok in zip(decision.actions, done, strict=True) if ok]
        failures = [decision.actions[i] for i in sorted(failed)]
        # persist confirmation streaks so a restart does not restart the count
        for name, st in decision.history.instances.items():
            old = state.history.instances.get(name)
            r = by_name.get(name)
            if r is None or (old is not None and old.streak == st.streak):
                continue
            if st.streak == 0 and ANN_STREAK not in r.instance.annotations:
                continue
            if time.monotonic() < self.writes_not_before:
                break  # throttled: a restart would only count a confirmation again
            try:
                await asyncio.to_thread(actor.record_streak, r.instance, st.streak)
            except ArtifactCheckError as exc:
                self._throttled(exc)
                log_.warning("could not record streak of %s: %s", name, exc)
        return performed, failures

    async def _apply_all(
        self,
        actor: KubeActor,
        actions: tuple[Action, ...],
        by_name: Mapping[str, InstanceResult],
        log_: logging.LoggerAdapter[logging.Logger],
        failed: set[int] | None = None,
    ) -> list[bool]:
        """Perform the actions; whether each changed the cluster, in their order
        (the indexes of those that failed are added to ``failed``).

        The actions on one pod run in order, those on different pods side by side
        (``_ACTING_AT_ONCE`` requests in flight: a start-up opens thousands of gates);
        node actions run one at a time after them, as the cordon cap is counted
        between two of them.
        """
        done = [False] * len(actions)
        per_pod: dict[str, list[int]] = {}
        nodes: list[int] = []
        for i, action in enumerate(actions):
            if action.kind in (ActionKind.CORDON, ActionKind.UNCORDON):
                nodes.append(i)
            else:
                per_pod.setdefault(action.target, []).append(i)

        def apply(i: int) -> None:
            action = actions[i]
            result = by_name.get(action.target)
            if time.monotonic() < self.writes_not_before:
                if failed is not None:  # not sent: the API server asked us to wait
                    failed.add(i)
                return
            try:
                done[i] = actor.apply(action, result.instance if result else None, result)
            except ArtifactCheckError as exc:
                self._throttled(exc)
                self.metrics.api_errors.labels(action.kind.value).inc()
                log_.warning("%s of %s failed: %s", action.kind.value, action.target, exc)
                if failed is not None:
                    failed.add(i)

        def apply_each(indexes: list[int]) -> None:
            for i in indexes:
                apply(i)

        slots = asyncio.Semaphore(_ACTING_AT_ONCE)

        async def one_pod(indexes: list[int]) -> None:
            async with slots:
                await asyncio.to_thread(apply_each, indexes)

        async with asyncio.TaskGroup() as tg:
            for indexes in per_pod.values():
                tg.create_task(one_pod(indexes))
        if nodes:
            await asyncio.to_thread(apply_each, nodes)
        return done

    @staticmethod
    def _held(state: CheckState) -> int:
        return len(held_out_of_traffic(state.pods, opened=state.opened, history=state.history))

    async def _write_status(
        self,
        state: CheckState,
        report: Report,
        quarantined: int,
        log_: logging.LoggerAdapter[logging.Logger],
    ) -> None:
        """Patch the ArtifactCheck status, only when something other than time changed."""
        conditions = _conditions(state, report)
        body: dict[str, Any] = {
            "observedGeneration": state.generation,
            "counts": report.counts(),
            "quarantined": quarantined,
            "heldOutOfTraffic": self._held(state),
            "findings": [
                {
                    "kind": f.kind.value,
                    "severity": f.severity.value,
                    "instance": f.instance or "",
                    "message": f.message[:500],
                }
                for f in _top_findings(report)
            ],
        }
        if state.pins is not None:
            body.update(state.pins.to_status())
        comparable = {**body, "conditions": [dict(c) for c in conditions]}
        if state.last_status == comparable:
            return
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        transitions = _stamp_transitions(state.transitions, conditions, stamp)
        status = {**body, "conditions": conditions, "lastCheckTime": stamp}
        if not self.may_act() or time.monotonic() < self.writes_not_before:
            return  # written by a later cycle (last_status is unchanged)
        try:
            await asyncio.to_thread(
                patch_check_status, self.api, state.namespace, state.name, status
            )
            state.last_status = comparable
            state.transitions = transitions
        except ArtifactCheckError as exc:
            self._throttled(exc)
            self.metrics.api_errors.labels("status").inc()
            log_.warning("could not write status: %s", exc)

    def _throttled(self, exc: ArtifactCheckError) -> None:
        """A 429's Retry-After holds every pod action and status write until it passed."""
        if isinstance(exc, Throttled):
            until = time.monotonic() + exc.retry_after
            self.writes_not_before = max(self.writes_not_before, until)


def _undo_failed(history: History, before: History, failed: Collection[Action]) -> History:
    """The policy's new memory, except what a failed action did not do.

    Policy decides a quarantine or a flag once (the transition) and remembers it; a
    write the API server refused (a 429, a 500, a timeout) must not be remembered as
    done, or the pod stays in traffic and its Event is never written. The next cycle
    then decides it again. The streak stays: the evidence was seen.
    """
    if not failed:
        return history
    instances = dict(history.instances)
    for action in failed:
        now = instances.get(action.target)
        if now is None:
            continue
        was = before.instances.get(action.target, InstanceState())
        if action.kind in (ActionKind.QUARANTINE, ActionKind.RELEASE):
            instances[action.target] = replace(now, quarantined=was.quarantined)
        elif action.kind in (ActionKind.FLAG, ActionKind.UNFLAG):
            instances[action.target] = replace(now, flagged=was.flagged)
    return replace(history, instances=instances)


def _top_findings(report: Report) -> list[Finding]:
    """The ten findings the status shows: errors and alerts, alerts first."""
    return sorted(
        [f for r in report.results for f in r.findings if f.severity.value in ("error", "alert")]
        + [f for f in report.findings if f.severity.value in ("error", "alert")],
        key=lambda f: (f.severity.value != "alert", f.instance or "", f.path or ""),
    )[:10]


def _conditions(state: CheckState, report: Report) -> list[dict[str, Any]]:
    """The check's status conditions, without their transition times."""
    counts = report.counts()
    bad = sum(counts[v.value] for v in Verdict if v.value not in ("consistent",))
    suspect = any(f.kind.value == "suspect-expectation" for f in report.findings)

    def condition(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": "True" if status else "False",
            "reason": reason,
            "message": message,
            "observedGeneration": state.generation,
        }

    return [
        condition(
            "Consistent",
            bad == 0 and bool(report.results),
            "AllConsistent" if bad == 0 else "Discrepancies",
            f"{bad} of {len(report.results)} instance(s) not consistent",
        ),
        condition(
            "ExpectationSuspect",
            suspect,
            "MajorityDisagrees" if suspect else "Plausible",
            "most of the workload disagrees with the expected release" if suspect else "",
        ),
        condition("Accepted", True, "Accepted", state.admission.message if state.admission else ""),
        condition(
            "Throttled",
            bool(state.throttled),
            "RequestBudgetExhausted" if state.throttled else "WithinBudget",
            state.throttled or "",
        ),
        *_release_condition(state, condition),
    ]


def _release_condition(
    state: CheckState, condition: Callable[[str, bool, str, str], dict[str, Any]]
) -> list[dict[str, Any]]:
    """``ReleaseChanged``: True while a version's release changed and is not accepted."""
    if state.pins is None:
        return []
    changed = state.pins.changed()
    if not changed:
        return [condition("ReleaseChanged", False, "ReleasesPinned", "")]
    message = "; ".join(_change_message(state.pins, v, p) for v, p in sorted(changed.items()))
    return [condition("ReleaseChanged", True, "ReleaseChanged", message[:32768])]


def _change_message(pins: StatusPins, version: str, entry: Any) -> str:
    changed = entry.changed
    return (
        f"release {version} changed: {changed.source} now has sha256 {changed.sha256}, but "
        f"{entry.pinned.sha256} was pinned (from {entry.pinned.source} at {entry.pinned.at}); "
        f"its instances are inconclusive, no gate opens and no quarantine is lifted on its "
        f"account until it is accepted: {pins.accept_hint(version, changed.sha256)}"
    )


def _pins_of(state: CheckState, obj: Mapping[str, Any]) -> tuple[StatusPins, set[tuple[str, str]]]:
    """The pins the object's status holds, and the changes in it (already announced)."""
    pins = StatusPins.from_status(
        obj.get("status"),
        max_versions=state.spec.cache_versions,
        check=f"{state.name} -n {state.namespace}",
    )
    announced = {(v, p.changed.sha256) for v, p in pins.changed().items() if p.changed}
    return pins, announced


def _pins_written(state: CheckState) -> bool:
    """The last status written holds the pins as they are now."""
    if state.pins is None or state.last_status is None:
        return False
    now = state.pins.to_status()
    return all(state.last_status.get(k) == v for k, v in now.items())


def _trust_of(state: CheckState) -> ReleaseTrust | None:
    """What the check's releases must satisfy: pins in its status, signatures by the
    admin's release keys it was granted (ConfigError naming a key that cannot be read:
    then every verdict is inconclusive with that reason, never an unsigned release
    trusted)."""
    keys = state.admission.release_keys if state.admission is not None else ()
    if state.pins is None and not keys:
        return None
    from artifactcheck.release import dsse
    from artifactcheck.release.guard import ReleaseTrust

    loaded = []
    for key in keys:
        try:
            data, where = key.read()
            loaded.append(dsse.load_public_key(data, where))
        except OSError as exc:
            raise ConfigError(f"admin release key {key.name!r}: {exc.strerror or exc}") from exc
        except dsse.KeyFileError as exc:
            raise ConfigError(str(exc)) from exc
    return ReleaseTrust(pins=state.pins, keys=tuple(loaded))


def _withhold_changed(
    state: CheckState, decision: Decision, results: list[InstanceResult]
) -> tuple[Decision, list[Action], list[Finding]]:
    """No gate opens and no quarantine is lifted on account of a version whose release
    changed and is not accepted, or is not signed by a release key the check names:
    those instances are inconclusive, and a gate that fails open on ``inconclusive``
    would let the rebuild (or an unsigned release) into traffic unverified.

    The decision without those actions, the actions withheld (undone in the policy's
    memory like failed ones, so they are decided again once the change is accepted),
    and a finding for each.
    """
    changed: set[str] = set(state.pins.changed()) if state.pins is not None else set()
    guard = getattr(state.expectations, "guard", None)
    untrusted = getattr(guard, "untrusted", None)
    if callable(untrusted):
        changed |= untrusted()
    # release trust asked for but not in place (a key file unreadable, not a public
    # key): no release is trusted, so no gate fails open on any
    nothing_trusted = guard is None and (
        state.pins is not None or bool(state.admission and state.admission.release_keys)
    )
    if not changed and not nothing_trusted:
        return decision, [], []
    versions = {r.instance.name: r.reported_version for r in results}
    withheld = [
        a
        for a in decision.actions
        if a.kind is ActionKind.RELEASE and (nothing_trusted or versions.get(a.target) in changed)
    ]
    if not withheld:
        return decision, [], []
    kept = tuple(a for a in decision.actions if a not in withheld)
    held = [
        Finding(
            FindingKind.ACTION_HELD,
            f"release of {a.target} withheld: release {versions.get(a.target)} is not "
            "trusted (changed and not accepted, or not signed by a release key)",
            instance=a.target,
            severity=Severity.WARNING,
        )
        for a in withheld
    ]
    return replace(decision, actions=kept), withheld, held


def _annotated_by(obj: Mapping[str, Any]) -> str:
    """The field manager that set the accept annotation (``kubectl-annotate``, a user's
    tool), from managedFields: the API server records who wrote which field."""
    key = f"f:{ANN_ACCEPT_RELEASE}"
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        fields = (((entry or {}).get("fieldsV1") or {}).get("f:metadata") or {}).get(
            "f:annotations"
        ) or {}
        if key in fields:
            return str(entry.get("manager") or "")
    return ""


def _stamp_transitions(
    known: Mapping[str, tuple[str, str]], conditions: list[dict[str, Any]], stamp: str
) -> dict[str, tuple[str, str]]:
    """Give each condition its lastTransitionTime: ``stamp`` when its status changed,
    else the one it had; the transitions to remember once the status is written."""
    transitions = dict(known)
    for c in conditions:
        old = transitions.get(c["type"])
        if old is None or old[0] != c["status"]:
            transitions[c["type"]] = (c["status"], stamp)
        c["lastTransitionTime"] = transitions[c["type"]][1]
    return transitions


__all__ = ["Controller", "ControllerSettings"]
