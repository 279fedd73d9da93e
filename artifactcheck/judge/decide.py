"""Pure policy: verdicts + history + safety limits -> actions and alerts.

Actions are decided from verdicts, never from errors, and always inside the safety
limits: confirmations before acting, a cap on the fraction of a
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
from collections.abc import Collection, Mapping, Sequence

from artifactcheck.model.names import ANN_QUARANTINED, ANN_STREAK, ANN_VERDICT
from artifactcheck.model.records import MutableRecord, Record, field, replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    BAD_VERDICTS,
    UNKNOWN_VERDICTS,
    Action,
    ActionKind,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Severity,
    Verdict,
)
from artifactcheck.model.verdicts import FAIL_OPEN_VERDICTS, MAY_BE_RIGHT, QUARANTINABLE


class InstanceState(Record):
    """What policy remembers about one instance between cycles."""

    streak: int = 0  # consecutive confirmable bad verdicts
    last: Verdict | None = None
    quarantined: bool = False
    flagged: bool = False
    #: Flagged by an earlier process (as the pod's annotations show): its Event may
    #: not have been written if that process died between the mark and the Event, so
    #: this one flags it once more, which records the Event only if it is missing.
    inherited_flag: bool = False

    @property
    def held_against(self) -> bool:
        """Whether policy holds something against the instance: a streak of bad
        verdicts, a quarantine or a flag (an inherited flag is a flag)."""
        return bool(self.streak or self.quarantined or self.flagged)


class History(Record):
    """Policy memory: per-instance state, recent write times, nodes we cordoned."""

    instances: Mapping[str, InstanceState] = field(default_factory=dict)
    action_times: tuple[float, ...] = ()
    cordoned: frozenset[str] = frozenset()


class Decision(Record):
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
    "fallback-page",
}


def recover_state(result: InstanceResult) -> InstanceState:
    """Rebuild an instance's state from what the cluster shows (after a restart)."""
    inst = result.instance
    quarantined = inst.gate_status == "False" and inst.annotations.get(ANN_QUARANTINED) in (
        "true",
        "True",
    )
    flagged = ANN_VERDICT in inst.annotations
    streak = 0
    try:
        streak = int(inst.annotations.get(ANN_STREAK, "0"))
    except ValueError:
        streak = 0
    return InstanceState(
        streak=streak, quarantined=quarantined, flagged=flagged, inherited_flag=flagged
    )


#: Findings that speak against an instance's bytes: a pod carrying one is never let
#: into traffic by failing open, whatever its verdict says this cycle.
EVIDENCE = frozenset(
    {
        FindingKind.CONTENT_DIFFERS,
        FindingKind.FILE_MISSING,
        FindingKind.FILE_UNEXPECTED,
        FindingKind.INTEGRITY_FAILED,
        FindingKind.SERVES_OTHER_RELEASE,
        FindingKind.CDN_MISSING,
        FindingKind.CDN_DIFFERS,
        FindingKind.SIGNAL_CONFLICT,
        FindingKind.MINORITY_CONTENT,
        FindingKind.NO_CONSENSUS,
        FindingKind.MANIFEST_INVALID,
        FindingKind.UNSAFE_REFERENCE,
        FindingKind.INVALID_VERSION,
        FindingKind.FALLBACK_PAGE,
    }
)
#: Actions that undo a safety measure: never held back by the rate limit.
UNDOING = frozenset({ActionKind.RELEASE, ActionKind.UNFLAG, ActionKind.UNCORDON})
RELEASE_REASON = "consistent again"
FAIL_OPEN_REASON = "verification impossible (dependency down): failing open"


def _advance(
    results: Sequence[InstanceResult],
    history: History,
    policy: PolicySettings,
    observed: Collection[str] | None = None,
) -> dict[str, InstanceState]:
    """Each instance's streak after this cycle's verdict.

    A bad verdict grows the streak (capped: only "confirmed or not" matters, and a
    steady value means no annotation writes), an unknown one keeps it (an outage is no
    evidence either way), anything else resets it.

    A streak counts observations, not cycles: an instance not in ``observed`` (None:
    every instance was observed afresh) was judged again on its last observation (a
    controller re-judges its whole workload whenever a new pod comes), which is not a
    second mismatch, so its bad streak does not grow.
    """
    states: dict[str, InstanceState] = {}
    for r in results:
        name = r.instance.name
        known = history.instances.get(name)
        prev = known or recover_state(r)
        fresh = observed is None or name in observed or known is None
        if r.verdict in BAD_VERDICTS:
            streak = min(prev.streak + 1, policy.confirmations) if fresh else prev.streak
        elif r.verdict in UNKNOWN_VERDICTS:
            streak = prev.streak
        else:
            streak = 0
        states[r.instance.name] = replace(prev, streak=streak, last=r.verdict)
    return states


class _Pass:
    """One policy pass: the actions and findings so far, and the rate-limit budget."""

    def __init__(self, policy: PolicySettings, history: History, now: float) -> None:
        self.policy = policy
        self.dry = policy.dry_run
        self.now = now
        self.actions: list[Action] = []
        self.findings: list[Finding] = []
        self.times = [t for t in history.action_times if now - t < 60.0]
        self.budget = max(0, math.floor(policy.max_actions_per_minute) - len(self.times))

    def take(
        self,
        kind: ActionKind,
        target: InstanceResult | str,
        reason: str,
        *,
        fail_open: bool = False,
        inherited: bool = False,
    ) -> bool:
        """Record an action on a pod (its result) or a node if the rate limit allows.

        Undoing actions (release, unflag, uncordon) are never limited: holding them
        back would keep a safety measure in place longer than the evidence does; nor is
        an ``inherited`` flag, which repeats one a predecessor's limit counted. True
        when the action is decided (and, outside dry-run, will be performed).
        """
        name = target if isinstance(target, str) else target.instance.name
        if kind not in UNDOING and not inherited:
            if self.budget <= 0:
                self.hold(name, f"rate limit reached: {kind.value} of {name} postponed")
                return False
            self.budget -= 1
            if not self.dry:
                self.times.append(self.now)
        files = () if isinstance(target, str) else _files(target)
        self.actions.append(
            Action(
                kind,
                name,
                reason,
                dry_run=self.dry,
                files=files,
                fail_open=fail_open,
                inherited=inherited,
            )
        )
        return True

    def hold(self, name: str, message: str) -> None:
        """A safety limit withheld an action: say so."""
        self.findings.append(
            Finding(FindingKind.ACTION_HELD, message, instance=name, severity=Severity.WARNING)
        )


class _Room(MutableRecord):
    """How much of one workload may still be taken out of traffic this cycle."""

    name: str
    total: int
    quarantined: int
    cap: int
    ready: int
    suspect: bool


def _room(
    workload: str,
    members: Sequence[InstanceResult],
    states: Mapping[str, InstanceState],
    policy: PolicySettings,
    out: _Pass,
) -> _Room:
    """The workload's counts, and whether most of it disagrees with the expectation
    (then the expectation is the suspect: alert, quarantine nobody)."""
    total = len(members)
    bad = [r for r in members if r.verdict in QUARANTINABLE]
    suspect = total >= 2 and len(bad) / total > policy.majority_threshold
    if suspect:
        out.findings.append(
            Finding(
                FindingKind.SUSPECT_EXPECTATION,
                f"{len(bad)} of {total} instances of {workload} disagree with the "
                "expected release: suspect the expectation (wrong release manifest or "
                "an unannounced rebuild); nobody is quarantined",
                severity=Severity.ALERT,
            )
        )
    return _Room(
        name=workload,
        total=total,
        quarantined=sum(1 for r in members if states[r.instance.name].quarantined),
        cap=math.floor(total * policy.max_quarantine_fraction),
        ready=sum(
            1
            for r in members
            if r.instance.ready
            and not states[r.instance.name].quarantined
            and r.verdict is not Verdict.UNREACHABLE
        ),
        suspect=suspect,
    )


def _may_fail_open(r: InstanceResult, st: InstanceState, policy: PolicySettings) -> bool:
    """Gate mode, by policy: let a never-judged pod in when verification is impossible.

    Only a pod with no evidence against it: no finding about wrong bytes, no bad
    verdict still counting in its streak. It never undoes a quarantine: that is only
    done on content proven right again.
    """
    return (
        policy.gate_fail_open
        and r.instance.has_readiness_gate
        and not st.quarantined
        and r.verdict in FAIL_OPEN_VERDICTS
        and st.streak == 0
        and not any(f.kind in EVIDENCE for f in r.findings)
    )


def _open_gate(
    r: InstanceResult, st: InstanceState, out: _Pass, *, gate_mode: bool
) -> InstanceState:
    """Release a quarantined pod whose content is right again, or open the gate of a
    pod verified (or, failing open, not verifiable) before it takes traffic."""
    policy = out.policy
    inst = r.instance
    verified = r.verdict in MAY_BE_RIGHT and r.verified
    fail_open = not verified and gate_mode and _may_fail_open(r, st, policy)
    if not (verified or fail_open) or not inst.has_readiness_gate or policy.mode == "report":
        return st
    if st.quarantined and not policy.release_on_recovery:
        return st
    if not st.quarantined and inst.gate_status == "True":
        return st  # already open
    if verified:
        why = RELEASE_REASON
    elif r.verdict in UNKNOWN_VERDICTS:
        why = FAIL_OPEN_REASON
    else:  # e.g. file names only: nothing against it, nothing vouching for its bytes
        why = f"content not verified ({r.reason}): failing open"
    if out.take(ActionKind.RELEASE, r, why, fail_open=fail_open) and not out.dry:
        st = replace(st, quarantined=False)
    return st


def _unflag(r: InstanceResult, st: InstanceState, out: _Pass) -> InstanceState:
    """Clear the flag of a pod that is consistent again (and verified so)."""
    if not st.flagged or r.verdict is not Verdict.CONSISTENT or not r.verified:
        return st
    if out.policy.mode == "report":
        return st
    if out.take(ActionKind.UNFLAG, r, RELEASE_REASON) and not out.dry:
        st = replace(st, flagged=False, inherited_flag=False)
    return st


def _flag(r: InstanceResult, st: InstanceState, room: _Room, out: _Pass) -> InstanceState:
    """Flag a confirmed bad verdict once (annotation, Event, metric)."""
    policy = out.policy
    if r.verdict not in BAD_VERDICTS or st.streak < policy.confirmations or room.suspect:
        return st
    if policy.mode == "report":
        return st
    if st.flagged:
        # A predecessor's flag is made once more: its Event may be missing (the actor
        # writes it only then). Not limited: the predecessor counted it (Action.inherited).
        if st.inherited_flag and not out.dry:
            out.take(ActionKind.FLAG, r, r.reason, inherited=True)
            st = replace(st, inherited_flag=False)
        return st
    if out.take(ActionKind.FLAG, r, r.reason) and not out.dry:
        st = replace(st, flagged=True)
    return st


def _quarantine(r: InstanceResult, st: InstanceState, room: _Room, out: _Pass) -> InstanceState:
    """Take a confirmed mismatch out of traffic, within the cap and the ready floor."""
    policy = out.policy
    name = r.instance.name
    if r.verdict not in QUARANTINABLE or st.streak < policy.confirmations or room.suspect:
        return st
    if policy.mode != "quarantine" or st.quarantined:
        return st
    if not r.instance.has_readiness_gate:
        out.findings.append(
            Finding(
                FindingKind.NOT_GATED,
                f"{name} has no readiness gate {policy.condition_type}: "
                "flagged only, cannot be quarantined",
                instance=name,
                severity=Severity.WARNING,
            )
        )
    elif room.quarantined + 1 > room.cap:
        out.hold(
            name,
            f"{name} not quarantined: {room.name} already has {room.quarantined} "
            f"of {room.total} quarantined (cap {policy.max_quarantine_fraction:.0%})",
        )
    elif r.instance.ready and room.ready - 1 < policy.min_ready:
        out.hold(
            name,
            f"{name} not quarantined: it would leave fewer than "
            f"{policy.min_ready} ready instance(s) in {room.name}",
        )
    elif out.take(ActionKind.QUARANTINE, r, r.reason):
        room.quarantined += 1
        if r.instance.ready:
            room.ready -= 1
        if not out.dry:
            st = replace(st, quarantined=True)
    return st


def decide(
    results: Sequence[InstanceResult],
    *,
    policy: PolicySettings,
    history: History,
    now: float,
    gate_mode: bool = False,
    observed: Collection[str] | None = None,
) -> Decision:
    """Turn this cycle's verdicts into actions within the safety limits.

    ``observed``: the instances observed afresh for this cycle (None: all); only those
    count towards a confirmation streak (:func:`_advance`).

    In order: advance every streak; per workload, check whether the expectation is
    the suspect and count what may still leave traffic; per pod, open its gate or
    release it, clear its flag, flag it, quarantine it; then cordon nodes; and remember
    (outside dry-run) what was done.
    """
    states = _advance(results, history, policy, observed)
    out = _Pass(policy, history, now)
    groups: dict[str, list[InstanceResult]] = defaultdict(list)
    for r in results:
        groups[_workload(r)].append(r)
    suspect: set[str] = set()
    for workload, members in sorted(groups.items()):
        room = _room(workload, members, states, policy, out)
        if room.suspect:
            suspect.add(workload)
        for r in sorted(members, key=lambda r: r.instance.name):
            st = states[r.instance.name]
            st = _open_gate(r, st, out, gate_mode=gate_mode)
            st = _unflag(r, st, out)
            st = _flag(r, st, room, out)
            st = _quarantine(r, st, room, out)
            states[r.instance.name] = st

    cordoned = history.cordoned
    if policy.cordon_nodes and policy.mode != "report":
        cordoned = _cordon(results, states, history, out, frozenset(suspect))

    new_history = History(
        instances={**history.instances, **states},
        action_times=tuple(out.times),
        cordoned=history.cordoned if out.dry else cordoned,
    )
    return Decision(actions=tuple(out.actions), findings=tuple(out.findings), history=new_history)


#: Why a gate opens while most of the workload disagrees with the expected release.
SUSPECT_FAIL_OPEN_REASON = (
    "expectation suspect (most of the workload disagrees with the expected release): failing open"
)


def held_out_of_traffic(
    pods: Mapping[str, Instance], *, opened: Collection[str], history: History
) -> frozenset[str]:
    """Gated pods out of traffic without a quarantine: their gate is not open (as the
    watch last saw them, or opened by the last cycle) and they were never verified. In
    gate mode this is what "quarantined: 0" would otherwise hide; the status and the
    verdict API both count it with this one rule."""
    quarantined = {n for n, s in history.instances.items() if s.quarantined}
    return frozenset(
        name
        for name, inst in pods.items()
        if inst.has_readiness_gate
        and inst.gate_status != "True"
        and name not in opened
        and name not in quarantined
    )


def fail_open_when_suspect(
    decision: Decision, results: Sequence[InstanceResult], policy: PolicySettings
) -> Decision:
    """Gate mode's last step: when the expectation itself is suspect, no pod can be
    verified, so, like a dependency being down, ``policy.gate_fail_open`` decides
    whether gated pods never verified (and never quarantined) are let into traffic.

    Without it they stay out (the controller's status counts them as held out of
    traffic). :func:`decide` alone never opens a gate against a bad verdict; this step
    does, because the verdicts are what is suspect. The gates opened are appended
    after every action :func:`decide` took, for pods it did not act on.
    """
    suspect = any(f.kind is FindingKind.SUSPECT_EXPECTATION for f in decision.findings)
    if not suspect or not policy.gate_fail_open or policy.mode == "report":
        return decision
    decided = {a.target for a in decision.actions}
    opened = [
        Action(
            ActionKind.RELEASE,
            r.instance.name,
            SUSPECT_FAIL_OPEN_REASON,
            dry_run=policy.dry_run,
            fail_open=True,
        )
        for r in results
        if _shut_and_unjudged(r, decision.history)
        and r.verdict is not Verdict.UNREACHABLE
        and r.instance.name not in decided
    ]
    return replace(decision, actions=(*decision.actions, *opened)) if opened else decision


def _shut_and_unjudged(r: InstanceResult, history: History) -> bool:
    """A gated pod whose gate is not open, and which was never quarantined."""
    st = history.instances.get(r.instance.name)
    return (
        r.instance.has_readiness_gate
        and r.instance.gate_status != "True"
        and not (st is not None and st.quarantined)
    )


def _stale_nodes(
    results: Sequence[InstanceResult],
    states: Mapping[str, InstanceState],
    policy: PolicySettings,
    suspect: frozenset[str],
) -> dict[str, str]:
    """Nodes whose pods of a version serve stale content while others are fine: a
    stale image cached under a mutable tag shows as another imageID on one node.

    The mismatches of workloads whose expectation is suspect are left out: acting on a
    node because most of a workload disagrees with a wrong release manifest would be
    acting on the expectation's error. Their consistent pods still count: a node that
    serves the version right for any workload is not the node that is behind.
    """
    by_version: dict[str, list[InstanceResult]] = defaultdict(list)
    for r in results:
        if r.reported_version and r.instance.node:
            by_version[r.reported_version].append(r)
    stale: dict[str, str] = {}
    for version, members in sorted(by_version.items()):
        bad = [
            r
            for r in members
            if r.verdict in QUARANTINABLE
            and states[r.instance.name].streak >= policy.confirmations
            and _workload(r) not in suspect
        ]
        good = [r for r in members if r.verdict is Verdict.CONSISTENT]
        if not bad or not good:
            continue
        good_nodes = {r.instance.node for r in good}
        good_images = {r.instance.image_id for r in good}
        for node in sorted({r.instance.node or "" for r in bad} - good_nodes - {""}):
            on_node = [r for r in bad if r.instance.node == node]
            if all(r.instance.image_id not in good_images for r in on_node):
                stale[node] = (
                    f"{len(on_node)} pod(s) of {version} on {node} serve stale content "
                    f"(image {on_node[0].instance.image_id}) while {len(good)} elsewhere are "
                    "consistent"
                )
    return stale


def _cordon(
    results: Sequence[InstanceResult],
    states: Mapping[str, InstanceState],
    history: History,
    out: _Pass,
    suspect: frozenset[str],
) -> frozenset[str]:
    """Cordon stale nodes (capped, rate-limited) and, by policy, uncordon the nodes
    artifactcheck cordoned once their pods are consistent again; the nodes now held."""
    policy = out.policy
    cordoned = set(history.cordoned)
    stale = _stale_nodes(results, states, policy, suspect)
    for node, why in sorted(stale.items()):
        if node in cordoned:
            continue
        if len(cordoned) >= policy.max_cordoned_nodes:
            out.findings.append(
                Finding(
                    FindingKind.NODE_SUSPECT,
                    f"node {node} should be cordoned ({why}) but {len(cordoned)} node(s) "
                    f"are already cordoned by artifactcheck (cap {policy.max_cordoned_nodes})",
                    severity=Severity.ALERT,
                )
            )
            continue
        if out.take(ActionKind.CORDON, node, why):
            cordoned.add(node)
    if policy.uncordon_on_recovery:
        for node in sorted(cordoned - set(stale)):
            on_node = [r for r in results if r.instance.node == node]
            if on_node and all(r.verdict is Verdict.CONSISTENT for r in on_node):
                if out.take(ActionKind.UNCORDON, node, "its pods are consistent again"):
                    cordoned.discard(node)
    return frozenset(cordoned)
