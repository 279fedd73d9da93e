"""One check, end to end: discover -> observe -> judge -> act.

The one check step is shared: :func:`check_once` (``verify``, ``investigate``,
``demo``) and each cycle of the controller observe instances with an
:class:`~artifactcheck.observe.instance.Observer` (:func:`observe_each`), then call
:func:`judge_step`, which loads the releases still needed, observes the CDN, compares
(the pure :mod:`artifactcheck.judge.compare`), decides (the pure
:mod:`artifactcheck.judge.decide`) and builds the :class:`Report`. Acting is the
caller's: Docker actions here (:func:`run_check`), Kubernetes ones in the controller.
Each instance is observed under its own deadline inside a TaskGroup, with
concurrency bounded by the fetcher, so one instance that never answers cannot stall
the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from artifactcheck.discover.sample import sample_instances
from artifactcheck.fetch import urls
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.judge.compare import (
    CdnView,
    JudgeCache,
    compare_fleet,
    reported_version,
    tls_findings,
)
from artifactcheck.judge.decide import Decision, History, decide, fail_open_when_suspect
from artifactcheck.judge.skew_check import previous_findings
from artifactcheck.model.records import Record, replace
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.skew import PreviousServed
from artifactcheck.model.values import (
    Expectation,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Observation,
    Report,
    SampleInfo,
    Severity,
    Verdict,
)
from artifactcheck.observe.cdn import observe_cdn
from artifactcheck.observe.failures import CHECK_FAILED, describe
from artifactcheck.observe.instance import Observer
from artifactcheck.observe.previous_release import observe_previous
from artifactcheck.observe.spread import Shares, can_fork, host_groups, processes_for, shares
from artifactcheck.release.sources import Expectations
from artifactcheck.release.wiring import build_expectations

if TYPE_CHECKING:  # cryptography loads only when a run asks for release trust
    from artifactcheck.release.guard import ReleaseTrust

T = TypeVar("T")
log = logging.getLogger("artifactcheck")


# -- observe -------------------------------------------------------------------------


async def observe_each(
    observer: Observer,
    instances: Sequence[Instance],
    *,
    into: dict[str, Observation],
    loaded: dict[str, Expectation],
    on_result: Callable[[Observation], None] | None = None,
    first: bool = False,
) -> None:
    """Observe every instance at once (the observer bounds how many are in flight):
    each observation goes ``into`` its name, each expectation met into ``loaded``.
    ``first``: pods waiting out of traffic, observed ahead of any other
    (:meth:`Observer.observe`)."""

    async def one(instance: Instance) -> None:
        obs, exp = await observer.observe(instance, first=first)
        into[instance.name] = obs
        if exp is not None:
            loaded[exp.version] = exp
        if on_result is not None:
            on_result(obs)

    async with asyncio.TaskGroup() as tg:
        for instance in instances:
            tg.create_task(one(instance))


# -- judge -----------------------------------------------------------------------------


class Judgement(Record):
    """What comparing one set of observations produced (before policy decides)."""

    results: list[InstanceResult]
    findings: tuple[Finding, ...]  # fleet-wide: releases unavailable or stale, CDN trouble
    cdn: CdnView | None
    previous: tuple[PreviousServed, ...] = ()  # previous releases still served (skew)


async def judge(
    spec: CheckSpec,
    observations: Sequence[Observation],
    *,
    loaded: dict[str, Expectation],
    expectations: Expectations | None,
    fetcher: Fetcher,
    observer: Observer,
    started_at: datetime,
    known_versions: Sequence[str] = (),
    cache: JudgeCache | None = None,
) -> Judgement:
    """Load the releases still needed, observe the CDN, and compare.

    ``loaded`` holds the expectations met while observing and is completed in place.
    With a ``cache``, only the instances whose inputs changed are judged again
    (:class:`~artifactcheck.judge.compare.JudgeCache`): the same results, for a
    controller that compares its whole workload each time a few pods change.
    """
    fleet: list[Finding] = []
    if expectations is not None:
        await _load_releases(spec, observations, loaded, expectations, known_versions)
        fleet += _release_findings(loaded) + expectations.trust_findings()
    cdn_view = None
    if spec.cdn:
        cdn_view = await _observe_the_cdn(spec, fetcher, observations, observer)
        fleet += _cdn_findings(spec, cdn_view, started_at)
    previous: tuple[PreviousServed, ...] = ()
    if spec.previous_versions and expectations is not None:
        previous = await _previous(
            spec, observations, loaded, expectations, fetcher, observer, cdn_view
        )
        fleet += previous_findings(previous)

    compare = _comparer(spec, loaded, expectations, cdn_view, started_at, cache)
    # each coverage names the codings compared: the observation's (the spec's, set by
    # the observer), so nothing is copied per result afterwards
    results = await _on_own_thread(
        functools.partial(_compare_isolated, observations, compare), holds_state=True
    )
    if any(r.unconfirmed for r in results):
        observations = await _confirm(observer, observations, results)
        results = await _on_own_thread(
            functools.partial(_compare_isolated, observations, compare), holds_state=True
        )
    return Judgement(results=results, findings=tuple(fleet), cdn=cdn_view, previous=previous)


def _comparer(
    spec: CheckSpec,
    loaded: dict[str, Expectation],
    expectations: Expectations | None,
    cdn_view: CdnView | None,
    started_at: datetime,
    cache: JudgeCache | None,
) -> Callable[[Sequence[Observation]], list[InstanceResult]]:
    """How :func:`judge` compares a group of observations: every input of a verdict but
    the observations, fixed (the releases ``loaded`` as they are when it is called)."""

    def compare(group: Sequence[Observation]) -> list[InstanceResult]:
        return compare_fleet(
            group,
            expectations=loaded if expectations is not None else None,
            known_releases=expectations.known() if expectations is not None else {},
            cdn=cdn_view,
            desired_version=spec.desired_version,
            now=started_at,
            tls_warn_days=spec.http.tls_expiry_warning_days,
            cache=cache,  # keyed by every input of a verdict: safe for any group
        )

    return compare


async def _judge_meanwhile(
    compare: Callable[[Sequence[Observation]], list[InstanceResult]],
    observations: dict[str, Observation],
    observing: Callable[[], bool],
) -> None:
    """Judge the observations at hand while observing processes still observe, a few
    at a time, into the judge cache ``compare`` fills (:func:`_early_judging`).

    This process observes its own share and then only reads the workers' answers: its
    core is idle until the last worker is done, and judging waits for that. What is
    judged here is judged again afterwards only where an input of its verdict changed
    (a release loaded since, a fleet finding), so the results are the ones judging
    everything at the end gives, and less of that judging is left for the end.
    """
    judged: set[str] = set()
    while observing():
        fresh = [o for name, o in list(observations.items()) if name not in judged]
        if not fresh:
            await asyncio.sleep(_MEANWHILE_IDLE)
            continue
        for start in range(0, len(fresh), _MEANWHILE_BATCH):
            batch = fresh[start : start + _MEANWHILE_BATCH]
            with contextlib.suppress(Exception):  # judged again at the end, isolated there
                compare(batch)
            judged.update(o.instance.name for o in batch)
            await asyncio.sleep(0)  # the workers' answers are read between batches
            if not observing():
                return


#: Observations judged between two looks at the workers' answers, and the pause while
#: none is at hand (a worker's answers arrive within milliseconds of each other).
_MEANWHILE_BATCH = 25
_MEANWHILE_IDLE = 0.005


def _early_judging(spec: CheckSpec, expectations: Expectations | None) -> bool:
    """Whether judging may start before the last observation: only against releases
    (consensus compares every instance with all the others), and without a CDN or
    previous releases to observe first (their views are inputs of every verdict)."""
    return expectations is not None and not spec.cdn and not spec.previous_versions


async def _previous(
    spec: CheckSpec,
    observations: Sequence[Observation],
    loaded: dict[str, Expectation],
    expectations: Expectations,
    fetcher: Fetcher,
    observer: Observer,
    cdn_view: CdnView | None,
) -> tuple[PreviousServed, ...]:
    """The previous releases on the CDN and the instances, beside the releases the
    instances run now (their bytes are right too where a path is in both)."""
    now = {reported_version(o) for o in observations} | {spec.desired_version}
    current = [e.manifest for v, e in loaded.items() if v in now and e.manifest is not None]
    return await observe_previous(
        spec,
        fetcher=fetcher,
        releases=expectations,
        observations=observations,
        current=current,
        cdn_view=cdn_view,
        seed=observer.seed,
    )


async def _confirm(
    observer: Observer, observations: Sequence[Observation], results: Sequence[InstanceResult]
) -> list[Observation]:
    """One round of fetching the files a "serves release X" claim still lacks.

    One round, bounded per instance (:data:`~artifactcheck.observe.instance.CONFIRM_LIMIT`):
    the verdict is a mismatch either way; only what the report may claim it serves
    depends on it. A failure here leaves the observation as it was.
    """
    wanted = {id(r.observation): r.unconfirmed for r in results if r.unconfirmed}

    async def one(obs: Observation) -> Observation:
        paths = wanted.get(id(obs))
        if not paths:
            return obs
        try:
            return await observer.confirm(obs, paths)
        except Exception as exc:  # noqa: BLE001 - a claim unconfirmed, never the run's end
            log.warning("confirming what %s serves failed: %s", obs.instance.name, describe(exc))
            return obs

    return list(await asyncio.gather(*(one(o) for o in observations)))


async def _load_releases(
    spec: CheckSpec,
    observations: Sequence[Observation],
    loaded: dict[str, Expectation],
    expectations: Expectations,
    known_versions: Sequence[str],
) -> None:
    """Every release a verdict may name: reported, known, desired (once each)."""
    wanted = {reported_version(o) for o in observations} | set(known_versions)
    if spec.desired_version:
        wanted.add(spec.desired_version)
    for version in sorted(v for v in wanted if v is not None and v not in loaded):
        try:
            loaded[version] = await expectations.get(version)
        except Exception as exc:  # noqa: BLE001 - a source's bug: that release is missing
            log.warning("loading release %s failed: %s", version, describe(exc))
            loaded[version] = Expectation(
                version=version, manifest=None, error=f"the release source failed: {describe(exc)}"
            )


def _release_findings(loaded: dict[str, Expectation]) -> list[Finding]:
    """A release that could not be loaded, or only from the last known good copy."""
    out: list[Finding] = []
    for exp in loaded.values():
        if exp.manifest is None:
            out.append(
                Finding(
                    FindingKind.EXPECTATION_UNAVAILABLE,
                    f"release {exp.version} could not be loaded: {exp.error}",
                    severity=Severity.WARNING,
                )
            )
        elif exp.stale:
            out.append(
                Finding(
                    FindingKind.EXPECTATION_STALE,
                    f"release {exp.version}: source failed ({exp.error}); "
                    "using the last known good copy",
                    severity=Severity.WARNING,
                )
            )
    return out


async def _observe_the_cdn(
    spec: CheckSpec, fetcher: Fetcher, observations: Sequence[Observation], observer: Observer
) -> CdnView:
    assert spec.cdn
    try:
        return await observe_cdn(fetcher, spec.cdn, observations, observer=observer)
    except Exception as exc:  # noqa: BLE001 - a hostile CDN answer is not the run's end
        return CdnView(base_url=spec.cdn, error=f"CDN check failed: {describe(exc)}")


def _cdn_findings(spec: CheckSpec, cdn_view: CdnView, started_at: datetime) -> list[Finding]:
    out: list[Finding] = []
    if cdn_view.error:
        out.append(Finding(FindingKind.OBSERVATION_FAILED, cdn_view.error, severity=Severity.ERROR))
    if cdn_view.tls is not None:
        out += tls_findings(
            cdn_view.tls, now=started_at, warn_days=spec.http.tls_expiry_warning_days
        )
    return out


def _compare_isolated(
    observations: Sequence[Observation],
    compare: Callable[[Sequence[Observation]], list[InstanceResult]],
) -> list[InstanceResult]:
    """Judge the fleet; an observation that makes judging raise is judged on its own.

    Judging is pure, but it reads what instances sent: if one observation makes it
    raise, that instance alone becomes ``inconclusive`` (check failed) and the fleet is
    judged again without its evidence, so its siblings still get their verdicts.
    """
    current = list(observations)
    for _ in range(len(current) + 1):
        try:
            return [_failed_result(r) for r in compare(current)]
        except Exception:  # noqa: BLE001 - one instance never ends the run
            culprit = _culprit(current, compare)
            if culprit is None:  # only together: judge each alone, without fleet context
                return [_judge_alone(o, compare) for o in current]
            index, exc = culprit
            obs = current[index]
            log.warning("judging %s failed: %s", obs.instance.name, describe(exc))
            current[index] = _as_failed(obs, exc)
    return [_judge_alone(o, compare) for o in current]  # pragma: no cover - bounded above


def _culprit(
    current: Sequence[Observation],
    compare: Callable[[Sequence[Observation]], list[InstanceResult]],
) -> tuple[int, Exception] | None:
    """The first observation that makes judging raise on its own, and the exception."""
    for index, obs in enumerate(current):
        if obs.error_kind == CHECK_FAILED:
            continue
        try:
            compare([obs])
        except Exception as alone:  # noqa: BLE001
            return index, alone
    return None


def _as_failed(obs: Observation, exc: BaseException) -> Observation:
    return replace(obs, error=f"the check failed: {describe(exc)}", error_kind=CHECK_FAILED)


def _judge_alone(
    obs: Observation, compare: Callable[[Sequence[Observation]], list[InstanceResult]]
) -> InstanceResult:
    try:
        return _failed_result(compare([obs])[0])
    except Exception as exc:  # noqa: BLE001
        return _failed_result(
            InstanceResult(
                instance=obs.instance,
                verdict=Verdict.INCONCLUSIVE,
                reason="",
                observation=_as_failed(obs, exc),
            )
        )


def _failed_result(result: InstanceResult) -> InstanceResult:
    """The result of an instance whose check raised: inconclusive, with the exception."""
    obs = result.observation
    if obs is None or obs.error_kind != CHECK_FAILED:
        return result
    why = obs.error or "the check failed"
    return replace(
        result,
        verdict=Verdict.INCONCLUSIVE,
        reason=why,
        findings=(
            Finding(FindingKind.CHECK_FAILED, why, instance=obs.instance.name),
            *(f for f in result.findings if f.kind is not FindingKind.UNREACHABLE),
        ),
        serves_version=None,
        coverage=None,
    )


# -- the one check step ----------------------------------------------------------------


class Started(Record):
    """When a check (or a controller cycle) started, and the fetcher's counts then."""

    at: datetime
    clock: float  # time.perf_counter()
    requests: int = 0
    retries: int = 0

    @classmethod
    def now(cls, fetcher: Fetcher | None = None) -> Started:
        """Now; with ``fetcher``, its requests are counted from now, not from its start."""
        stats = fetcher.stats if fetcher is not None else None
        return cls(
            at=datetime.now(UTC),
            clock=time.perf_counter(),
            requests=stats.requests if stats is not None else 0,
            retries=stats.retries if stats is not None else 0,
        )


class Checked(Record):
    """What one check step produced: the report (actions decided, not yet performed),
    the decision (with the history to keep) and the judgement it came from."""

    report: Report
    decision: Decision
    judgement: Judgement


async def judge_step(
    spec: CheckSpec,
    observations: Sequence[Observation],
    *,
    observer: Observer,
    fetcher: Fetcher,
    expectations: Expectations | None,
    loaded: dict[str, Expectation],
    started: Started,
    history: History,
    now: float | Callable[[], float],
    instances_total: int,
    gate_mode: bool = False,
    known_versions: Sequence[str] = (),
    cache: JudgeCache | None = None,
    observed: Collection[str] | None = None,
) -> Checked:
    """Judge the observations, decide what to do, and report: the step ``verify`` and
    every controller cycle share.

    ``observed``: the instances observed afresh (None: all of them); the others are
    judged on their last observation, which confirms nothing (:func:`decide`).

    In gate mode (the controller's readiness gates), a suspect expectation may fail
    gates open (:func:`~artifactcheck.judge.decide.fail_open_when_suspect`). ``now``
    (or the clock it is read from, after judging) is the decision's time.
    """
    judged = await judge(
        spec,
        observations,
        loaded=loaded,
        expectations=expectations,
        fetcher=fetcher,
        observer=observer,
        started_at=started.at,
        known_versions=known_versions,
        cache=cache,
    )
    at = now() if callable(now) else now
    decision = decide(
        judged.results,
        policy=spec.policy,
        history=history,
        now=at,
        gate_mode=gate_mode,
        observed=observed,
    )
    if gate_mode:
        decision = fail_open_when_suspect(decision, judged.results, spec.policy)
    stats = fetcher.stats
    report = Report(
        results=tuple(judged.results),
        findings=judged.findings + decision.findings,
        actions=decision.actions,
        started_at=started.at,
        elapsed=time.perf_counter() - started.clock,
        desired_version=spec.desired_version,
        cdn=spec.cdn,
        requests=stats.requests - started.requests,
        retries=stats.retries - started.retries,
        names_only=bool(expectations is not None and expectations.names_only),
        previous=judged.previous,
        sample=SampleInfo(
            seed=observer.seed,
            instances_checked=len(observations),
            instances_total=instances_total,
            assets_per_instance=spec.sampling.assets_per_instance,
        ),
    )
    return Checked(report=report, decision=decision, judgement=judged)


async def check_once(
    spec: CheckSpec,
    *,
    instances: Sequence[Instance],
    fetcher: Fetcher,
    expectations: Expectations | None,
    history: History | None = None,
    known_versions: Sequence[str] = (),
    gate_mode: bool = False,
    on_result: Callable[[Observation], None] | None = None,
    now: Callable[[], float] = time.time,
    spread: Shares | None = None,
) -> tuple[Report, Decision]:
    """Sample, observe, judge and decide for one set of instances.

    ``spread``: observe from that many processes, each within its share of the limits
    (:mod:`artifactcheck.observe.processes`); judging stays here.
    """
    started = Started.now()
    observer = Observer(spec=spec, fetcher=fetcher, expectations=expectations)
    chosen = sample_instances(instances, spec.sampling.instances, seed=observer.seed)
    observations: dict[str, Observation] = {}
    loaded: dict[str, Expectation] = {}
    cache: JudgeCache | None = None

    async def here(part: Sequence[Instance]) -> None:
        await observe_each(observer, part, into=observations, loaded=loaded, on_result=on_result)

    try:
        if spread is not None and spread.count > 1:
            from artifactcheck.observe.processes import observe_in_processes  # forks: pickle

            meanwhile = None
            if expectations is not None and _early_judging(spec, expectations):
                cache = JudgeCache()
                compare = _comparer(spec, loaded, expectations, None, started.at, cache)
                releases = expectations

                async def meanwhile(observing: Callable[[], bool]) -> None:
                    # the releases judging loads first (known, desired): the same ones
                    # now, or every verdict's inputs would change when they arrive
                    await _load_releases(spec, (), loaded, releases, known_versions)
                    await _judge_meanwhile(compare, observations, observing)

            await observe_in_processes(
                observer,
                host_groups(chosen),
                share=spread,
                into=observations,
                loaded=loaded,
                observe_here=here,
                on_result=on_result,
                meanwhile=meanwhile,
            )
        else:
            await here(chosen)
        checked = await judge_step(
            spec,
            [observations[i.name] for i in chosen],
            observer=observer,
            fetcher=fetcher,
            expectations=expectations,
            loaded=loaded,
            started=started,
            history=history or History(),
            now=now,
            instances_total=len(instances),
            gate_mode=gate_mode,
            known_versions=known_versions,
            cache=cache,
        )
    finally:
        await observer.aclose()
    return checked.report, checked.decision


# -- discover and act: what ``verify`` runs ---------------------------------------------


def _spread(spec: CheckSpec, instances: Sequence[Instance], asked: int | None) -> Shares | None:
    """The processes a run observes from, or None for this one only (a small fleet, one
    core, a thread already running, no fork on this platform)."""
    checked = min(len(instances), spec.sampling.instances or len(instances))
    hosts = len({urls.host_key(i.base_url) for i in instances})
    # at least one connection each: more processes than max_connections would exceed it
    count = min(processes_for(checked, hosts, asked=asked), spec.http.max_connections)
    if count <= 1:
        return None
    ok, why = can_fork()
    if not ok:
        log.info("observing in one process: %s", why)
        return None
    log.info("observing %d instances from %d processes", checked, count)
    return shares(spec, count)


async def discover_all(
    spec: CheckSpec, *, kubeconfig: str | None = None, context: str | None = None
) -> list[Instance]:
    """Every instance the spec selects: URLs, Docker containers, pods."""
    from artifactcheck.discover.static import instances_from_targets

    instances = instances_from_targets(spec.targets)
    if spec.docker is not None:
        from artifactcheck.clients.docker import DockerEngine
        from artifactcheck.discover.docker_containers import discover_containers

        engine = DockerEngine()
        try:
            docker = spec.docker
            instances += await _on_own_thread(lambda: discover_containers(engine, docker))
        finally:
            engine.close()
    if spec.kubernetes is not None:
        from artifactcheck.clients.kube import load_api_client
        from artifactcheck.discover.kube_pods import discover_pods

        source = spec.kubernetes

        def pods() -> list[Instance]:
            api = load_api_client(kubeconfig, context)
            try:
                return discover_pods(
                    source, api_client=api, condition_type=spec.policy.condition_type
                )
            finally:
                api.close()  # type: ignore[no-untyped-call]

        instances += await _on_own_thread(pods)
    return instances


async def _on_own_thread(work: Callable[[], T], *, holds_state: bool = False) -> T:
    """``work`` on a thread that ends with it, so the event loop keeps answering
    meanwhile: discovery's blocking client calls, and judging, which for thousands of
    pods is seconds of pure computation (on the loop it held up the controller's Lease,
    and a leader that cannot confirm it in time stops acting). The default executor's
    threads would outlive the work, and a process with a thread running never forks its
    observers (:func:`~artifactcheck.observe.spread.can_fork`).

    A cancelled caller returns at once, leaving the thread to finish alone, unless the
    work ``holds_state`` (judging holds the check's judge cache: no second judgement
    may start over it while it runs); then it waits for the work to end.
    """
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="work")
    done = asyncio.get_running_loop().run_in_executor(pool, work)
    try:
        found = await (asyncio.shield(done) if holds_state else done)
    except asyncio.CancelledError:
        if holds_state:
            await asyncio.wait([done])
        pool.shutdown(wait=False)  # cancelled mid-call: never block the loop on it
        raise
    except BaseException:
        pool.shutdown(wait=False)
        raise
    pool.shutdown(wait=True)  # done: the thread is idle and ends at once
    return found


async def run_check(
    spec: CheckSpec,
    *,
    instances: Sequence[Instance] | None = None,
    on_discovered: Callable[[int], None] | None = None,
    on_result: Callable[[Observation], None] | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    processes: int | None = None,
    trust: ReleaseTrust | None = None,
) -> Report:
    """Discover, then check once with a fresh fetcher: what ``verify`` runs.

    ``trust``: pins and release keys every release manifest must satisfy
    (:mod:`artifactcheck.release.guard`).

    ``processes``: how many processes observe (None: one per core for a large fleet,
    :func:`~artifactcheck.observe.spread.processes_for`; 1: this one only).

    With a Docker action configured (``docker.on_mismatch``), the action is how a
    container leaves traffic: it plays the gate's role, so the check runs in
    quarantine mode, re-checks up to ``policy.confirmations`` times while something
    mismatches, and the quarantines decided are performed on the containers.
    """
    if instances is not None:
        chosen = list(instances)
    else:
        chosen = await discover_all(spec, kubeconfig=kubeconfig, context=context)
    if on_discovered is not None:
        on_discovered(min(len(chosen), spec.sampling.instances or len(chosen)))
    containers_act = spec.docker is not None and spec.docker.on_mismatch is not None
    if containers_act:
        chosen = [
            replace(i, has_readiness_gate=True) if i.kind == "container" else i for i in chosen
        ]
        spec = spec.model_copy(
            update={"policy": spec.policy.model_copy(update={"mode": "quarantine"})}
        )
    rounds = spec.policy.confirmations if containers_act else 1
    spread = None if containers_act else _spread(spec, chosen, processes)
    if spread is not None:  # every process within its share: together, one process's load
        spec = spec.model_copy(update={"http": spread.http, "retry": spread.retry})
    history: History | None = None
    proxies = Proxies.from_environment()  # the CLI's: release sources and CDNs (fetch/proxy.py)
    async with Fetcher(http=spec.http, retry=spec.retry, logger=log, proxies=proxies) as fetcher:
        expectations = build_expectations(
            spec, fetcher, kubeconfig=kubeconfig, context=context, trust=trust
        )
        for round_ in range(rounds):
            report, decision = await check_once(
                spec,
                instances=chosen,
                fetcher=fetcher,
                expectations=expectations,
                history=history,
                known_versions=spec.known_versions,
                on_result=on_result if round_ == 0 else None,
                spread=spread,
            )
            history = decision.history
            if not any(r.verdict in (Verdict.MISMATCH,) for r in report.results):
                break
    if containers_act and report.actions:
        from artifactcheck.act.containers import act_on_containers

        report = await act_on_containers(spec, report)
    return report
