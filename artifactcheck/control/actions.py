"""Acting on a decision: the pod and node actions, the confirmation streaks, and the
rules on what a cycle may remember as done.

Every write asks two gates first: :meth:`Writes.allowed` (this replica leads and may
act now, see control/leadership.py) and the API server's last 429 (a Retry-After
holds every pod action and status write until it passed: API Priority and Fairness
throttles the controller's flow as a whole, not one pod).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from artifactcheck.act.kube_actor import KubeActor
from artifactcheck.clients.kube import Throttled
from artifactcheck.control.context import Context
from artifactcheck.control.state import CheckState
from artifactcheck.judge.decide import Decision, History, InstanceState
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.names import ANN_STREAK
from artifactcheck.model.records import replace
from artifactcheck.model.values import (
    Action,
    ActionKind,
    Finding,
    FindingKind,
    InstanceResult,
    Severity,
)

__all__ = ["Acting", "Writes", "undo_failed", "withhold_changed"]

#: Pods acted on at once (each pod's actions in order, one request at a time, on the
#: asynchronous client): enough to open thousands of gates at start-up in seconds,
#: few enough not to crowd the API server's priority level for the lease and status.
ACTING_AT_ONCE = 4


class Writes:
    """The two gates every write passes: leadership, and the API server's 429 hold."""

    def __init__(self, may_act: Callable[[], bool]) -> None:
        self.may_act = may_act
        #: time.monotonic() before which no pod action or status write is sent: the
        #: API server answered one with 429 and a Retry-After.
        self.not_before = 0.0

    def held(self) -> bool:
        """Whether the API server's last Retry-After has not passed yet."""
        return time.monotonic() < self.not_before

    def allowed(self) -> bool:
        """Whether a write may be sent now (leading, and not held by a 429)."""
        return self.may_act() and not self.held()

    def throttled(self, exc: ArtifactCheckError) -> None:
        """A 429's Retry-After holds every pod action and status write until it passed."""
        if isinstance(exc, Throttled):
            until = time.monotonic() + exc.retry_after
            self.not_before = max(self.not_before, until)


@dataclass(slots=True)
class Acting:
    """Performs a cycle's decided actions through the Kubernetes API."""

    ctx: Context
    writes: Writes

    async def act(
        self,
        state: CheckState,
        decision: Decision,
        results: list[Any],
        log_: logging.LoggerAdapter[logging.Logger],
    ) -> tuple[list[Action], list[Action]]:
        """Perform the decided actions: (those that changed the cluster, those that
        failed or were not attempted because this replica may not write now). Failures
        are logged, never crash the loop."""
        if not self.writes.may_act():
            return [], list(decision.actions)
        actor = KubeActor(
            kube=self.ctx.kube,
            policy=state.spec.policy,
            logger=log_,
            may_write=self.writes.may_act,
            cached_pod=lambda ns, name: state.objects.get(f"{ns}/{name}"),
        )
        by_name = {r.instance.name: r for r in results}
        failed: set[int] = set()
        done = await self.apply_all(actor, decision.actions, by_name, log_, failed)
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
            if self.writes.held():
                break  # throttled: a restart would only count a confirmation again
            try:
                await actor.record_streak(r.instance, st.streak)
            except ArtifactCheckError as exc:
                self.writes.throttled(exc)
                log_.warning("could not record streak of %s: %s", name, exc)
        return performed, failures

    async def apply_all(
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
        (``ACTING_AT_ONCE`` requests in flight: a start-up opens thousands of gates);
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

        async def apply(i: int) -> None:
            action = actions[i]
            result = by_name.get(action.target)
            if self.writes.held():
                if failed is not None:  # not sent: the API server asked us to wait
                    failed.add(i)
                return
            try:
                done[i] = await actor.apply(action, result.instance if result else None, result)
            except ArtifactCheckError as exc:
                self.writes.throttled(exc)
                self.ctx.metrics.api_errors.labels(action.kind.value).inc()
                log_.warning("%s of %s failed: %s", action.kind.value, action.target, exc)
                if failed is not None:
                    failed.add(i)

        async def apply_each(indexes: list[int]) -> None:
            for i in indexes:
                await apply(i)

        slots = asyncio.Semaphore(ACTING_AT_ONCE)

        async def one_pod(indexes: list[int]) -> None:
            async with slots:
                await apply_each(indexes)

        async with asyncio.TaskGroup() as tg:
            for indexes in per_pod.values():
                tg.create_task(one_pod(indexes))
        if nodes:
            await apply_each(nodes)
        return done


def undo_failed(history: History, before: History, failed: Collection[Action]) -> History:
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


def withhold_changed(
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
