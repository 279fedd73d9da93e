"""The safety policy as a state machine: sequences of verdicts, arrivals, departures, restarts.

``decide()`` is pure, so hypothesis can drive it through thousands of histories the
table tests in tests/core/test_policy_*.py never thought of, under randomly drawn
policies, and check after every cycle what the safety policy promises whatever happened
before: the quarantine cap and the ready floor hold, only a confirmed mismatch on a
gated pod is quarantined (``inconclusive`` and ``unreachable`` never), a majority that
disagrees quarantines nobody, dry-run changes nothing, writes respect the rate limit,
and a quarantine is undone only when the content is right again.

The model applies the decided actions the way the controller's actor does (gate
condition, ``artifactcheck.io/*`` annotations, the kubelet's Ready), so a restart
(history forgotten, state recovered from the cluster) is exercised too.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from artifactcheck.judge.decide import EVIDENCE, Decision, History, decide
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    ActionKind,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Verdict,
    VersionSignal,
)
from artifactcheck.model.verdicts import FAIL_OPEN_VERDICTS, MAY_BE_RIGHT

WORKLOADS = ("web-7f9c", "api-55d1")
QUARANTINED = "artifactcheck.io/quarantined"
STREAK = "artifactcheck.io/streak"
VERDICT = "artifactcheck.io/verdict"
WRITES = frozenset({ActionKind.FLAG, ActionKind.QUARANTINE, ActionKind.CORDON})

POLICIES = st.builds(
    PolicySettings,
    mode=st.sampled_from(["report", "flag", "quarantine", "quarantine", "quarantine"]),
    confirmations=st.sampled_from([1, 1, 2, 3]),
    max_quarantine_fraction=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.5, 1.0]),
    min_ready=st.integers(0, 2),
    majority_threshold=st.sampled_from([0.3, 0.5, 0.75, 1.0]),
    max_actions_per_minute=st.sampled_from([1.0, 2.5, 10.0, 1000.0, 1000.0]),
    dry_run=st.sampled_from([False, False, True]),
    release_on_recovery=st.sampled_from([True, True, False]),  # defaults are drawn more often
    gate_fail_open=st.sampled_from([True, True, False]),
    cordon_nodes=st.sampled_from([True, False]),
    max_cordoned_nodes=st.sampled_from([0, 1, 1, 2]),
    uncordon_on_recovery=st.sampled_from([True, True, False]),
)
#: The controller always decides in gate mode; verify does not.
GATE_MODE = st.sampled_from([True, True, False])
VERDICTS = st.sampled_from(list(Verdict))
#: How one pod's verdict relates to what it really serves in a cycle: mostly the truth,
#: sometimes a dependency outage, sometimes anything at all.
NOISE = st.sampled_from(["truth"] * 4 + ["inconclusive", "unreachable", "any"])
#: What compare says beside the verdict: whether the bytes were verified, and a finding
#: that speaks against them (as a CDN mismatch with the release source down has).
VERIFIED = st.sampled_from([None, None, True, False])
AGAINST = st.sampled_from([False, False, False, True])
STALE, FRESH = "sha256:stale", "sha256:fresh"


class SafetyMachine(RuleBasedStateMachine):
    """Pods of two workloads, judged cycle after cycle by ``decide()``."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: dict[str, Instance] = {}
        self.history = History()
        self.now = 1_000.0
        self.serial = 0
        self.write_times: list[float] = []
        self.policy = PolicySettings()
        self.gate_mode = False
        self.cycles = 0
        self.quarantines = 0
        self.drifted: set[str] = set()
        self.cordons = 0
        self.cordoned: set[str] = set()  # nodes the cluster shows cordoned by us

    @initialize(policy=POLICIES, gate_mode=GATE_MODE, pods=st.integers(1, 8))
    def setup(self, policy: PolicySettings, gate_mode: bool, pods: int) -> None:
        self.policy, self.gate_mode = policy, gate_mode
        for i in range(pods):
            self._add(WORKLOADS[i % 2], gated=True, ready=True)

    # ------------------------------------------------------------------ the cluster

    def _add(self, workload: str, *, gated: bool, ready: bool) -> None:
        self.serial += 1
        name = f"shop/{workload}-{self.serial:03d}"
        self.pods[name] = Instance(
            name=name,
            base_url=f"http://10.0.0.{self.serial}:80/",
            kind="pod",
            signals=(VersionSignal("label", "1.4.2"),),
            namespace="shop",
            owner=workload,
            node=f"node-{self.serial % 3}",
            image_id=FRESH,
            has_readiness_gate=gated,
            gate_status=None if not ready else ("True" if gated else None),
            ready=ready,
        )

    @rule(workload=st.sampled_from(WORKLOADS), gated=st.booleans(), ready=st.booleans())
    def arrive(self, workload: str, gated: bool, ready: bool) -> None:
        self._add(workload, gated=gated, ready=ready)

    @precondition(lambda self: self.pods)
    @rule(data=st.data())
    def drift(self, data: st.DataObject) -> None:
        """A pod starts (or stops) serving another release's bytes."""
        self.drifted ^= {data.draw(st.sampled_from(sorted(self.pods)))}

    @precondition(lambda self: self.pods)
    @rule(node=st.sampled_from(["node-0", "node-1", "node-2"]))
    def stale_node(self, node: str) -> None:
        """A node's cached image goes stale: every pod on it serves another release."""
        self.drifted |= {n for n, p in self.pods.items() if p.node == node}

    @precondition(lambda self: self.pods)
    @rule(data=st.data())
    def depart(self, data: st.DataObject) -> None:
        del self.pods[data.draw(st.sampled_from(sorted(self.pods)))]

    @rule()
    def restart(self) -> None:
        """The controller restarts: policy memory is rebuilt from the pods alone.

        The rate limit's memory (recent write times) is not on the pods, so it starts
        afresh: the limit holds per controller lifetime (a known limitation).
        """
        self.history = History(cordoned=self.history.cordoned)
        self.write_times = []

    # ------------------------------------------------------------------ a cycle

    @precondition(lambda self: self.pods)
    @rule(data=st.data())
    def cycle(self, data: st.DataObject) -> None:
        names = sorted(self.pods)
        self.now += data.draw(st.sampled_from([1.0, 10.0, 30.0, 61.0]), label="seconds later")
        uniform = data.draw(st.sampled_from([False, False, False, True]), label="one verdict")
        if uniform:  # a fleet-wide outage, or a whole fleet disagreeing
            verdict = data.draw(VERDICTS, label="verdict")
            verdicts = dict.fromkeys(names, verdict)
        else:
            verdicts = {}
            for n in names:
                noise = data.draw(NOISE, label=n)
                if noise == "truth":
                    verdicts[n] = Verdict.MISMATCH if n in self.drifted else Verdict.CONSISTENT
                elif noise == "any":
                    verdicts[n] = data.draw(VERDICTS, label=f"{n} verdict")
                else:
                    verdicts[n] = Verdict(noise)
        extras = {
            n: (
                data.draw(VERIFIED, label=f"{n} verified"),
                data.draw(AGAINST, label=f"{n} against"),
            )
            for n in names
        }
        self._run(verdicts, extras)

    @precondition(lambda self: self.pods)
    @rule(seconds=st.sampled_from([1.0, 61.0]), unreachable=st.booleans())
    def dependency_down(self, seconds: float, unreachable: bool) -> None:
        """A cycle in which nothing could be judged: the release source or the pods are down."""
        self.now += seconds
        verdict = Verdict.UNREACHABLE if unreachable else Verdict.INCONCLUSIVE
        self._run(dict.fromkeys(self.pods, verdict))

    def _run(
        self,
        verdicts: dict[str, Verdict],
        extras: dict[str, tuple[bool | None, bool]] | None = None,
    ) -> None:
        names = sorted(verdicts)
        results = []
        for n in names:
            verified, against = (extras or {}).get(n, (None, False))
            pod = self.pods[n]
            pod = replace(pod, image_id=STALE if n in self.drifted else FRESH)
            self.pods[n] = pod
            evidence = (
                (Finding(FindingKind.CDN_DIFFERS, "differs on the CDN", n),) if against else ()
            )
            results.append(
                InstanceResult(
                    pod,
                    verdicts[n],
                    f"judged {verdicts[n].value}",
                    findings=evidence,
                    reported_version="1.4.2",
                    content_verified=verified,
                )
            )
        before = self.history
        decision = decide(
            results,
            policy=self.policy,
            history=before,
            now=self.now,
            gate_mode=self.gate_mode,
        )
        self.check(results, before, decision)
        self.apply(results, decision)
        self.cycles += 1

    def check(self, results: list[InstanceResult], before: History, decision: Decision) -> None:
        """Every promise of the safety policy, for this cycle."""
        policy = self.policy
        by_name = {r.instance.name: r for r in results}
        after = decision.history.instances
        was = {
            n: (
                before.instances[n].quarantined
                if n in before.instances
                else self.pods[n].gate_status == "False"
                and self.pods[n].annotations.get(QUARANTINED) == "true"
            )
            for n in by_name
        }
        kinds = Counter(a.kind for a in decision.actions)

        for action in decision.actions:
            assert action.dry_run == policy.dry_run, action
            assert not action.fail_open or action.kind is ActionKind.RELEASE, action
            if action.kind is ActionKind.CORDON:
                # a node of confirmed mismatches, never one we already hold
                assert policy.cordon_nodes and policy.mode != "report", action
                assert action.target not in before.cordoned, action
                # and of a version no pod on the node serves right (a stale image is of
                # one version's tag: a consistent pod of another says nothing of it)
                on_node = [r for r in results if r.instance.node == action.target]
                stale = {
                    r.reported_version
                    for r in on_node
                    if r.verdict is Verdict.MISMATCH
                    and after[r.instance.name].streak >= policy.confirmations
                }
                served = {r.reported_version for r in on_node if r.verdict is Verdict.CONSISTENT}
                assert stale - served, (action, stale, served)
                continue
            if action.kind is ActionKind.UNCORDON:
                # only ever what artifactcheck cordoned, once its pods are right again
                assert action.target in before.cordoned, action
                assert policy.uncordon_on_recovery
                on_node = [r for r in results if r.instance.node == action.target]
                assert on_node and all(r.verdict is Verdict.CONSISTENT for r in on_node)
                continue
            assert action.target in by_name, f"action on a pod that is gone: {action}"
            r = by_name[action.target]
            if action.kind is ActionKind.QUARANTINE:
                # only a confirmed mismatch of a gated pod, never an unknown verdict
                assert r.verdict is Verdict.MISMATCH, (r.verdict, action)
                assert policy.mode == "quarantine"
                assert r.instance.has_readiness_gate
                assert after[action.target].streak >= policy.confirmations
            if action.kind is ActionKind.FLAG:
                assert policy.mode != "report"
                assert r.verdict not in (Verdict.INCONCLUSIVE, Verdict.UNREACHABLE)
            if action.kind is ActionKind.RELEASE:
                verified = r.verdict in MAY_BE_RIGHT and r.verified
                assert verified != action.fail_open, (r, action)
                assert action.fail_open == ("failing open" in action.reason), action
                if was[action.target]:  # undoing a quarantine: only on content proven right
                    assert verified and not action.fail_open, (r.verdict, action)
                    assert policy.release_on_recovery
                else:  # opening the gate of a new pod: verified, or failing open by policy
                    assert verified or (
                        self.gate_mode
                        and policy.gate_fail_open
                        and r.verdict in FAIL_OPEN_VERDICTS
                        and not any(f.kind in EVIDENCE for f in r.findings)
                        and after[r.instance.name].streak == 0
                    ), (r, action)

        for workload in WORKLOADS:
            members = [r for r in results if r.instance.owner == workload]
            if not members:
                continue
            names = {r.instance.name for r in members}
            acted = [a for a in decision.actions if a.target in names]
            mismatching = sum(1 for r in members if r.verdict is Verdict.MISMATCH)
            if len(members) >= 2 and mismatching / len(members) > policy.majority_threshold:
                # suspect the expectation: alert, act on nobody
                assert not [a for a in acted if a.kind in (ActionKind.QUARANTINE, ActionKind.FLAG)]
                assert any(f.kind is FindingKind.SUSPECT_EXPECTATION for f in decision.findings)
            quarantined_now = [a.target for a in acted if a.kind is ActionKind.QUARANTINE]
            if quarantined_now and not policy.dry_run:
                out = [n for n in names if after[n].quarantined]
                cap = math.floor(len(members) * policy.max_quarantine_fraction)
                assert len(out) <= cap, (workload, len(out), cap, len(members))
            if any(by_name[n].instance.ready for n in quarantined_now) and not policy.dry_run:
                # taking a serving pod out never leaves fewer than min_ready serving
                ready = [
                    r
                    for r in members
                    if r.instance.ready
                    and not after[r.instance.name].quarantined
                    and r.verdict is not Verdict.UNREACHABLE
                ]
                assert len(ready) >= policy.min_ready, (workload, len(ready), policy.min_ready)

        if not policy.dry_run:
            assert len(decision.history.cordoned) <= max(
                policy.max_cordoned_nodes, len(before.cordoned)
            )
        if policy.dry_run:
            assert not decision.history.action_times
            assert not any(s.quarantined or s.flagged for s in after.values())
            assert decision.history.cordoned == before.cordoned
        else:
            # an inherited flag repeats a write its maker's limit counted
            writes = [a for a in decision.actions if a.kind in WRITES and not a.inherited]
            self.write_times += [self.now] * len(writes)
            recent = [t for t in self.write_times if self.now - t < 60.0]
            assert len(recent) <= math.floor(policy.max_actions_per_minute), recent
        self.quarantines += kinds[ActionKind.QUARANTINE]
        self.cordons += kinds[ActionKind.CORDON]

    def apply(self, results: list[InstanceResult], decision: Decision) -> None:
        """Perform the actions as the controller's actor and kubelet would."""
        self.history = decision.history
        if self.policy.dry_run:
            return
        for action in decision.actions:
            if action.kind is ActionKind.CORDON:
                self.cordoned.add(action.target)
            elif action.kind is ActionKind.UNCORDON:
                self.cordoned.discard(action.target)
            pod = self.pods.get(action.target)
            if pod is None:
                continue
            notes = dict(pod.annotations)
            if action.kind is ActionKind.QUARANTINE:
                notes[QUARANTINED] = "true"
                pod = replace(pod, gate_status="False", ready=False)
            elif action.kind is ActionKind.RELEASE:
                notes.pop(QUARANTINED, None)
                pod = replace(pod, gate_status="True", ready=True)
            elif action.kind is ActionKind.FLAG:
                notes[VERDICT] = "mismatch"
            elif action.kind is ActionKind.UNFLAG:
                notes.pop(VERDICT, None)
            self.pods[action.target] = replace(pod, annotations=notes)
        for name, state in decision.history.instances.items():
            if name in self.pods:  # the controller persists streaks on the pod
                pod = self.pods[name]
                self.pods[name] = replace(
                    pod, annotations={**pod.annotations, STREAK: str(state.streak)}
                )

    # ------------------------------------------------------------------ always

    @invariant()
    def dry_run_never_changes_a_pod(self) -> None:
        if self.policy.dry_run:
            assert all(p.gate_status != "False" for p in self.pods.values())
            assert not any(QUARANTINED in p.annotations for p in self.pods.values())

    @invariant()
    def cordons_are_remembered_as_performed(self) -> None:
        """Policy memory of cordons is exactly what was done (dry-run: nothing)."""
        assert set(self.history.cordoned) == self.cordoned
        if self.policy.dry_run:
            assert not self.cordoned

    @invariant()
    def only_gated_pods_are_ever_quarantined(self) -> None:
        for pod in self.pods.values():
            if pod.gate_status == "False":
                assert pod.has_readiness_gate


SafetyMachine.TestCase.settings = settings(
    max_examples=250,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSafety = SafetyMachine.TestCase


def test_the_machine_reaches_quarantines() -> None:
    """Guard against a vacuous machine: some run must quarantine and release."""
    machine = SafetyMachine()
    machine.setup(
        PolicySettings(mode="quarantine", confirmations=1, max_quarantine_fraction=0.5), False, 4
    )
    names = sorted(machine.pods)
    verdicts: dict[str, Any] = {n: Verdict.CONSISTENT for n in names}
    verdicts[names[0]] = Verdict.MISMATCH
    for round_verdicts in (verdicts, dict.fromkeys(names, Verdict.CONSISTENT)):
        results = [InstanceResult(machine.pods[n], round_verdicts[n], "x") for n in names]
        before = machine.history
        decision = decide(results, policy=machine.policy, history=before, now=machine.now)
        machine.check(results, before, decision)
        machine.apply(results, decision)
    assert machine.quarantines == 1
    assert machine.pods[names[0]].gate_status == "True"  # released once consistent


def test_failing_open_never_undoes_a_quarantine() -> None:
    """Regression found by the machine: gate mode released a quarantined pod on inconclusive."""
    machine = SafetyMachine()
    machine.setup(
        PolicySettings(mode="quarantine", confirmations=1, max_quarantine_fraction=0.5), True, 4
    )
    names = sorted(machine.pods)
    first = {n: Verdict.MISMATCH if n == names[0] else Verdict.CONSISTENT for n in names}
    machine._run(first)
    assert machine.pods[names[0]].gate_status == "False"
    machine._run(dict.fromkeys(names, Verdict.INCONCLUSIVE))  # the release source is down
    assert machine.pods[names[0]].gate_status == "False"


def test_the_machine_reaches_cordons() -> None:
    """Guard against a vacuous machine: cordoning is enabled, reached, and undone."""
    for dry_run in (False, True):
        machine = SafetyMachine()
        policy = PolicySettings(
            mode="flag",
            confirmations=1,
            cordon_nodes=True,
            uncordon_on_recovery=True,
            dry_run=dry_run,
            majority_threshold=0.9,
        )
        machine.setup(policy, True, 4)
        machine.stale_node("node-0")
        truth = {
            n: Verdict.MISMATCH if n in machine.drifted else Verdict.CONSISTENT
            for n in machine.pods
        }
        machine._run(truth)
        assert machine.cordons == 1
        assert machine.cordoned == (set() if dry_run else {"node-0"})
        assert machine.history.cordoned == frozenset(machine.cordoned)
        machine.drifted.clear()
        machine._run(dict.fromkeys(machine.pods, Verdict.CONSISTENT))
        assert machine.cordoned == set()
