"""One cycle of one check: observe (every pod of a fresh sample, or just the new
ones), then judge every pod's latest observation, decide, act and record.

The full cycle and the gate-mode fast path are the same cycle over the same
observations (only the pods observed differ), so the fast path gives the verdicts a
full cycle would. Judging, deciding and acting run one cycle at a time per check
(``CheckState.judging``); observing does not, so a new pod is observed while a full
cycle still fetches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from artifactcheck.control import candidates, check_wiring
from artifactcheck.control.accepting import Accepting
from artifactcheck.control.actions import Acting, undo_failed, withhold_changed
from artifactcheck.control.context import Context
from artifactcheck.control.skew_window import (
    EVENT_REASON,
    missing_message,
    record_versions,
    with_previous,
)
from artifactcheck.control.state import CheckState
from artifactcheck.control.workers import FetchSetup, ObservePool
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import proxies_of
from artifactcheck.judge.compare import CdnView
from artifactcheck.model.records import replace
from artifactcheck.model.values import ActionKind, Expectation, Observation, Report
from artifactcheck.observe.instance import Observer
from artifactcheck.pipeline import Started, judge_step, observe_each

__all__ = ["Cycle", "Running"]


@dataclass(slots=True)
class Running:
    """What the cycles of one running check share."""

    state: CheckState
    observer: Observer
    fetcher: Fetcher
    log: logging.LoggerAdapter[logging.Logger]
    #: The backoff after failed cycles; None: the last cycle succeeded.
    failures: Iterator[float] | None = None


class Cycle:
    """Runs the cycles of the checks (any of them: a cycle's state is its ``Running``)."""

    def __init__(self, ctx: Context, *, acting: Acting, accepting: Accepting) -> None:
        self.metrics = ctx.metrics
        self.clock = ctx.clock
        self.acting = acting
        self.accepting = accepting
        self.reporting = accepting.reporting
        self.completed = 0  # cycles done, every check together
        self.address_rules = ctx.address_rules
        self.proxies = proxies_of(ctx.admin.egress)  # the admin's, never the environment's
        #: Processes that observe a large cycle (control/workers.py), set by the
        #: process that started them before any thread; None: all here.
        self.workers: ObservePool | None = None

    async def run(self, run: Running, *, full: bool) -> None:
        """Observe (all pods, or just new ones), then the check step ``verify`` runs too
        (over every pod's latest observation); act, record, report."""
        state, observer, fetcher = run.state, run.observer, run.fetcher
        started = Started.now(fetcher)
        loaded: dict[str, Expectation] = {}
        observed: dict[str, Observation] = {}
        pending = set(state.pending)
        try:
            targets = candidates.targets(state, observer, full=full)
            first = not full  # new pods wait out of traffic: ahead of a full sample
            if self.workers is None or not await self.workers.observe(
                observer,
                targets,
                into=observed,
                loaded=loaded,
                first=first,
                fetch=lambda: FetchSetup(
                    check_wiring.egress_for(state, self.address_rules),
                    check_wiring.credential_scope(state) or None,
                    self.proxies,
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
        run: Running,
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
        observations = candidates.refreshed(state)
        now = self.clock()
        record_versions(state, observations, now)
        spec = with_previous(state.spec, state, now=now)  # the skew window after a rollout
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
        decision, withheld, held = withhold_changed(state, checked.decision, results)
        performed, failed = await self.acting.act(state, decision, results, log_)
        state.opened = {a.target for a in performed if a.kind is ActionKind.RELEASE}
        state.history = undo_failed(checked.decision.history, state.history, [*failed, *withheld])
        candidates.forget_gone(state)  # the memory of pods gone meanwhile (it grew with churn)
        report = replace(
            checked.report,
            actions=tuple(performed),
            findings=(*checked.report.findings, *held),
            elapsed=time.perf_counter() - started.clock,
        )
        await self._record(state, report, log_)
        await self._warn_previous(state, report)
        log_.info(
            "cycle done (%s): %s",
            "full" if full else "new pods",
            ", ".join(f"{v} {k}" for k, v in report.counts().items() if v) or "no pods",
        )

    async def _warn_previous(self, state: CheckState, report: Report) -> None:
        """One Warning Event for each distinct set of previous release files gone."""
        missing = missing_message(report)
        if missing and missing != state.skew_warned:
            if await self.reporting.warn(state, EVENT_REASON, missing):
                state.skew_warned = missing
        elif not missing:
            state.skew_warned = None

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
        quarantined = state.quarantined()
        self.metrics.record_report(state.key, report, quarantined=quarantined)
        await self.reporting.write_status(state, report, quarantined, log_)
        await self.accepting.announce_changes(state)
        self.completed += 1
