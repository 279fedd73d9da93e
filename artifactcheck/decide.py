"""Pure policy: verdicts + history + safety limits -> actions and alerts.

Actions are decided from verdicts, never from errors, and always inside the safety
limits of DESIGN section 6: confirmations before acting, a cap on the fraction of a
workload quarantined and a floor of ready pods, a rate limit, dry-run, and the rule
that when most of a workload disagrees with the expected release, the expectation is
the suspect: alert, act on nobody. ``inconclusive`` and ``unreachable`` never
quarantine. The function is pure so that these properties can be checked exhaustively
(table tests and a hypothesis state machine); the caller performs the actions and
feeds back the new history.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from .models import (
    Action,
    ActionKind,
    Finding,
    FindingKind,
    InstanceResult,
    Severity,
    Verdict,
)
from .settings import PolicySettings

#: Verdicts that count towards the confirmation streak and can quarantine.
QUARANTINABLE = frozenset({Verdict.MISMATCH})
#: Verdicts that are flagged (annotation, Event, metric) once confirmed.
FLAGGABLE = frozenset(
    {
        Verdict.MISMATCH,
        Verdict.SIGNAL_CONFLICT,
        Verdict.DRIFT,
        Verdict.CDN_MISSING,
        Verdict.CDN_MISMATCH,
    }
)
#: Verdicts that say the content is right for its version: a quarantine can be undone.
GOOD = frozenset({Verdict.CONSISTENT, Verdict.DRIFT, Verdict.CDN_MISSING, Verdict.CDN_MISMATCH})
#: Verdicts that carry no evidence either way: streaks neither grow nor reset.
UNKNOWN = frozenset({Verdict.INCONCLUSIVE, Verdict.UNREACHABLE})


@dataclass(frozen=True, slots=True)
class InstanceState:
    """What policy remembers about one instance between cycles."""

    streak: int = 0  # consecutive confirmable bad verdicts
    last: Verdict | None = None
    quarantined: bool = False
    flagged: bool = False


@dataclass(frozen=True, slots=True)
class History:
    """Policy memory: per-instance state, recent write times, nodes we cordoned."""

    instances: Mapping[str, InstanceState] = field(default_factory=dict)
    action_times: tuple[float, ...] = ()
    cordoned: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one policy pass."""

    actions: tuple[Action, ...]
    findings: tuple[Finding, ...]
    history: History


def _workload(result: InstanceResult) -> str:
    inst = result.instance
    return f"{inst.namespace or ''}/{inst.owner}" if inst.owner else "(fleet)"


def _files(result: InstanceResult) -> tuple[str, ...]:
    return tuple(
        sorted({f.path for f in result.findings if f.path and f.kind.value in _FILE_KINDS})
    )


_FILE_KINDS = {
    "content-differs",
    "file-missing",
    "file-unexpected",
    "integrity-failed",
    "minority-content",
    "cdn-missing",
    "cdn-differs",
}


def recover_state(result: InstanceResult) -> InstanceState:
    """Rebuild an instance's state from what the cluster shows (after a restart)."""
    inst = result.instance
    quarantined = inst.gate_status == "False" and inst.annotations.get(
        "artifactcheck.io/quarantined"
    ) in ("true", "True")
    flagged = "artifactcheck.io/verdict" in inst.annotations
    streak = 0
    try:
        streak = int(inst.annotations.get("artifactcheck.io/streak", "0"))
    except ValueError:
        streak = 0
    return InstanceState(streak=streak, quarantined=quarantined, flagged=flagged)


def decide(
    results: Sequence[InstanceResult],
    *,
    policy: PolicySettings,
    history: History,
    now: float,
    gate_mode: bool = False,
) -> Decision:
    """Turn this cycle's verdicts into actions within the safety limits."""
    dry = policy.dry_run
    states: dict[str, InstanceState] = {}
    for r in results:
        prev = history.instances.get(r.instance.name) or recover_state(r)
        if r.verdict in FLAGGABLE:
            # capped: only "confirmed or not" matters, and a steady value means no writes
            streak = min(prev.streak + 1, policy.confirmations)
        elif r.verdict in UNKNOWN:
            streak = prev.streak
        else:
            streak = 0
        states[r.instance.name] = replace(prev, streak=streak, last=r.verdict)

    findings: list[Finding] = []
    actions: list[Action] = []
    times = [t for t in history.action_times if now - t < 60.0]
    budget = max(0, math.floor(policy.max_actions_per_minute) - len(times))

    def take(kind: ActionKind, r: InstanceResult, reason: str) -> bool:
        """Record an action if the rate limit allows; releases are never limited."""
        nonlocal budget
        if kind not in (ActionKind.RELEASE, ActionKind.UNFLAG):
            if budget <= 0:
                findings.append(
                    Finding(
                        FindingKind.ACTION_HELD,
                        f"rate limit reached: {kind.value} of {r.instance.name} postponed",
                        instance=r.instance.name,
                        severity=Severity.WARNING,
                    )
                )
                return False
            budget -= 1
            if not dry:
                times.append(now)
        actions.append(Action(kind, r.instance.name, reason, dry_run=dry, files=_files(r)))
        return True

    groups: dict[str, list[InstanceResult]] = defaultdict(list)
    for r in results:
        groups[_workload(r)].append(r)

    for workload, members in sorted(groups.items()):
        total = len(members)
        bad = [r for r in members if r.verdict in QUARANTINABLE]
        if total >= 2 and len(bad) / total > policy.majority_threshold:
            findings.append(
                Finding(
                    FindingKind.SUSPECT_EXPECTATION,
                    f"{len(bad)} of {total} instances of {workload} disagree with the "
                    "expected release: suspect the expectation (wrong release manifest or "
                    "an unannounced rebuild); nobody is quarantined",
                    severity=Severity.ALERT,
                )
            )
            suspect = True
        else:
            suspect = False
        quarantined = sum(1 for r in members if states[r.instance.name].quarantined)
        cap = math.floor(total * policy.max_quarantine_fraction)
        ready = sum(
            1
            for r in members
            if r.instance.ready
            and not states[r.instance.name].quarantined
            and r.verdict is not Verdict.UNREACHABLE
        )

        for r in sorted(members, key=lambda r: r.instance.name):
            name = r.instance.name
            st = states[name]
            gated = r.instance.has_readiness_gate
            confirmed = st.streak >= policy.confirmations
            # Failing open lets a pod that was never judged into traffic; it must never
            # undo a quarantine: that is only done on content proven right again.
            if r.verdict in GOOD or (
                gate_mode
                and gated
                and not st.quarantined
                and r.verdict in UNKNOWN
                and policy.gate_fail_open
                and r.verdict is Verdict.INCONCLUSIVE
            ):
                needs_open = gated and (st.quarantined or r.instance.gate_status != "True")
                if needs_open and (
                    st.quarantined and policy.release_on_recovery or not st.quarantined
                ):
                    why = (
                        "consistent again"
                        if r.verdict in GOOD
                        else "verification impossible (dependency down): failing open"
                    )
                    if policy.mode != "report" and take(ActionKind.RELEASE, r, why) and not dry:
                        st = replace(st, quarantined=False)
                if st.flagged and r.verdict is Verdict.CONSISTENT and policy.mode != "report":
                    if take(ActionKind.UNFLAG, r, "consistent again") and not dry:
                        st = replace(st, flagged=False)
            if r.verdict in FLAGGABLE and confirmed and not suspect and policy.mode != "report":
                if not st.flagged and take(ActionKind.FLAG, r, r.reason) and not dry:
                    st = replace(st, flagged=True)
            if (
                r.verdict in QUARANTINABLE
                and confirmed
                and not suspect
                and policy.mode == "quarantine"
                and not st.quarantined
            ):
                if not gated:
                    findings.append(
                        Finding(
                            FindingKind.NOT_GATED,
                            f"{name} has no readiness gate {policy.condition_type}: "
                            "flagged only, cannot be quarantined",
                            instance=name,
                            severity=Severity.WARNING,
                        )
                    )
                elif quarantined + 1 > cap:
                    findings.append(
                        Finding(
                            FindingKind.ACTION_HELD,
                            f"{name} not quarantined: {workload} already has {quarantined} "
                            f"of {total} quarantined (cap {policy.max_quarantine_fraction:.0%})",
                            instance=name,
                            severity=Severity.WARNING,
                        )
                    )
                elif r.instance.ready and ready - 1 < policy.min_ready:
                    findings.append(
                        Finding(
                            FindingKind.ACTION_HELD,
                            f"{name} not quarantined: it would leave fewer than "
                            f"{policy.min_ready} ready instance(s) in {workload}",
                            instance=name,
                            severity=Severity.WARNING,
                        )
                    )
                elif take(ActionKind.QUARANTINE, r, r.reason):
                    quarantined += 1
                    if r.instance.ready:
                        ready -= 1
                    if not dry:
                        st = replace(st, quarantined=True)
            states[name] = st

    if policy.cordon_nodes:
        cordon_actions, cordon_findings, cordoned = _cordon(results, states, policy, history)
        findings += cordon_findings
        for a in cordon_actions:
            actions.append(replace(a, dry_run=dry))
    else:
        cordoned = history.cordoned

    new_history = History(
        instances={**history.instances, **states},
        action_times=tuple(times),
        cordoned=cordoned if not dry else history.cordoned,
    )
    return Decision(actions=tuple(actions), findings=tuple(findings), history=new_history)


def _cordon(
    results: Sequence[InstanceResult],
    states: Mapping[str, InstanceState],
    policy: PolicySettings,
    history: History,
) -> tuple[list[Action], list[Finding], frozenset[str]]:
    """Cordon a node whose pods of a version serve stale content while others are fine."""
    actions: list[Action] = []
    findings: list[Finding] = []
    cordoned = set(history.cordoned)
    by_version: dict[str, list[InstanceResult]] = defaultdict(list)
    for r in results:
        if r.reported_version and r.instance.node:
            by_version[r.reported_version].append(r)
    suspects: dict[str, str] = {}
    for version, members in sorted(by_version.items()):
        bad = [
            r
            for r in members
            if r.verdict in QUARANTINABLE and states[r.instance.name].streak >= policy.confirmations
        ]
        good = [r for r in members if r.verdict is Verdict.CONSISTENT]
        if not bad or not good:
            continue
        bad_nodes = {r.instance.node for r in bad}
        good_nodes = {r.instance.node for r in good}
        good_images = {r.instance.image_id for r in good}
        for node in sorted(n for n in bad_nodes if n and n not in good_nodes):
            on_node = [r for r in bad if r.instance.node == node]
            if all(r.instance.image_id not in good_images for r in on_node):
                suspects[node] = (
                    f"{len(on_node)} pod(s) of {version} on {node} serve stale content "
                    f"(image {on_node[0].instance.image_id}) while {len(good)} elsewhere are "
                    "consistent"
                )
    for node, why in sorted(suspects.items()):
        if node in cordoned:
            continue
        if len(cordoned) >= policy.max_cordoned_nodes:
            findings.append(
                Finding(
                    FindingKind.NODE_SUSPECT,
                    f"node {node} should be cordoned ({why}) but {len(cordoned)} node(s) "
                    f"are already cordoned by artifactcheck (cap {policy.max_cordoned_nodes})",
                    severity=Severity.ALERT,
                )
            )
            continue
        actions.append(Action(ActionKind.CORDON, node, why))
        cordoned.add(node)
    if policy.uncordon_on_recovery:
        for node in sorted(cordoned - set(suspects)):
            on_node = [r for r in results if r.instance.node == node]
            if on_node and all(r.verdict is Verdict.CONSISTENT for r in on_node):
                actions.append(Action(ActionKind.UNCORDON, node, "its pods are consistent again"))
                cordoned.discard(node)
    return actions, findings, frozenset(cordoned)
