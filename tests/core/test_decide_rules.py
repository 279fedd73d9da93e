"""Rules of judge/decide.py that the other core tables leave undefended.

Each test is one rule, found by breaking the rule by hand (tests/core/test_decide.py
and test_verified.py still passed): which verdicts may be quarantined or flagged, what
an unreachable verdict does to a streak, the streak cap, a streak recovered from the
cluster, the rate limit's rounding, dry-run's memory, the expectation suspected only
in a workload of two or more, unreachable pods not counted as ready, and gates,
flags and cordons only where they may be.
"""

from __future__ import annotations

from typing import Any

import pytest

from artifactcheck.judge.decide import History, InstanceState, decide
from artifactcheck.model.names import ANN_STREAK
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    ActionKind,
    FindingKind,
    Instance,
    InstanceResult,
    Verdict,
)


def pod(name: str, **kw: Any) -> Instance:
    kw.setdefault("owner", "web-abc")
    kw.setdefault("namespace", "shop")
    return Instance(name=name, base_url=f"http://{name}/", **kw)


def judged(name: str, verdict: Verdict, **kw: Any) -> InstanceResult:
    return InstanceResult(instance=pod(name, **kw), verdict=verdict, reason=verdict.value)


def policy(**kw: Any) -> PolicySettings:
    kw.setdefault("confirmations", 1)
    return PolicySettings(**kw)


def acted(
    results: list[InstanceResult], pol: PolicySettings, history: History | None = None, **kw: Any
):
    return decide(results, policy=pol, history=history or History(), now=1000.0, **kw)


def kinds(decision: Any) -> list[tuple[ActionKind, str]]:
    return [(a.kind, a.target) for a in decision.actions]


@pytest.mark.parametrize(
    ("verdict", "flagged", "quarantined"),
    [
        (Verdict.MISMATCH, True, True),
        (Verdict.SIGNAL_CONFLICT, True, False),
        (Verdict.DRIFT, True, False),
        (Verdict.CDN_MISSING, True, False),
        (Verdict.CDN_MISMATCH, True, False),
        (Verdict.INCONCLUSIVE, False, False),
        (Verdict.UNREACHABLE, False, False),
        (Verdict.CONSISTENT, False, False),
    ],
)
def test_only_a_mismatch_is_quarantined_and_bad_verdicts_are_flagged(
    verdict: Verdict, flagged: bool, quarantined: bool
) -> None:
    """Alone in its workload (the expectation is not suspect with two or more pods, one
    of them fine), a confirmed verdict is flagged or quarantined as its class says."""
    fine = [judged(f"ok{n}", Verdict.CONSISTENT, has_readiness_gate=True) for n in range(4)]
    pol = policy(mode="quarantine", max_quarantine_fraction=1.0)
    d = acted([judged("p", verdict, has_readiness_gate=True), *fine], pol)
    assert ((ActionKind.FLAG, "p") in kinds(d)) is flagged
    assert ((ActionKind.QUARANTINE, "p") in kinds(d)) is quarantined


@pytest.mark.parametrize("verdict", [Verdict.UNREACHABLE, Verdict.INCONCLUSIVE])
def test_an_unknown_verdict_keeps_the_streak(verdict: Verdict) -> None:
    history = History(instances={"p": InstanceState(streak=1)})
    d = acted([judged("p", verdict)], policy(confirmations=3), history)
    assert d.history.instances["p"].streak == 1


def test_the_streak_is_capped_at_the_confirmations() -> None:
    history = History(instances={"p": InstanceState(streak=2, flagged=True)})
    d = acted([judged("p", Verdict.MISMATCH)], policy(confirmations=2), history)
    assert d.history.instances["p"].streak == 2


def test_a_streak_recovered_from_the_cluster_counts_its_first_observation() -> None:
    """Known to no history (a controller restarted), the instance is judged afresh even
    when it is not among this cycle's new observations."""
    annotated = judged("p", Verdict.MISMATCH, annotations={ANN_STREAK: "1"})
    d = acted([annotated], policy(confirmations=3), observed=set())
    assert d.history.instances["p"].streak == 2


def test_the_rate_limit_rounds_down() -> None:
    bad = [judged(f"p{n}", Verdict.DRIFT) for n in range(2)]
    d = acted(bad, policy(max_actions_per_minute=1.5))
    assert [k for k, _ in kinds(d)] == [ActionKind.FLAG]
    assert [f.kind for f in d.findings] == [FindingKind.ACTION_HELD]


def test_a_dry_run_records_no_action_time() -> None:
    d = acted([judged("p", Verdict.DRIFT)], policy(dry_run=True))
    assert kinds(d) == [(ActionKind.FLAG, "p")] and d.actions[0].dry_run
    assert d.history.action_times == ()


def test_a_lone_instance_is_no_majority() -> None:
    """One pod mismatching is that pod's problem, not a suspect expectation."""
    d = acted([judged("p", Verdict.MISMATCH)], policy())
    assert kinds(d) == [(ActionKind.FLAG, "p")]
    assert FindingKind.SUSPECT_EXPECTATION not in {f.kind for f in d.findings}


def test_an_unreachable_pod_is_not_counted_as_ready() -> None:
    """Quarantining the only pod that answers would leave none serving."""
    bad = judged("p", Verdict.MISMATCH, has_readiness_gate=True)
    gone = judged("q", Verdict.UNREACHABLE, has_readiness_gate=True)
    fine = judged("r", Verdict.CONSISTENT, has_readiness_gate=True, ready=False)
    pol = policy(mode="quarantine", max_quarantine_fraction=1.0, min_ready=1)
    d = acted([bad, gone, fine], pol)
    assert (ActionKind.QUARANTINE, "p") not in kinds(d)
    assert any("fewer than 1 ready" in f.message for f in d.findings)


def test_a_pod_without_a_gate_has_none_opened() -> None:
    clean = judged("p", Verdict.CONSISTENT)
    assert clean.verified and not clean.instance.has_readiness_gate
    d = acted([clean], policy(mode="quarantine"), gate_mode=True)
    assert kinds(d) == []


def test_a_dry_run_release_keeps_the_quarantine_in_memory() -> None:
    held = History(instances={"p": InstanceState(quarantined=True)})
    gated = judged("p", Verdict.CONSISTENT, has_readiness_gate=True, gate_status="False")
    d = acted([gated], policy(mode="quarantine", dry_run=True), held)
    assert kinds(d) == [(ActionKind.RELEASE, "p")] and d.actions[0].dry_run
    assert d.history.instances["p"].quarantined


def test_report_mode_flags_nothing() -> None:
    d = acted([judged("p", Verdict.DRIFT)], policy(mode="report"))
    assert kinds(d) == []


def test_a_node_is_uncordoned_only_when_all_its_pods_are_consistent() -> None:
    pol = policy(cordon_nodes=True, uncordon_on_recovery=True)
    held = History(cordoned=frozenset({"node-a"}))
    on_node = [
        judged("p", Verdict.CONSISTENT, node="node-a"),
        judged("q", Verdict.INCONCLUSIVE, node="node-a"),
    ]
    d = acted(on_node, pol, held)
    assert (ActionKind.UNCORDON, "node-a") not in kinds(d)
    d = acted(on_node[:1], pol, held)
    assert (ActionKind.UNCORDON, "node-a") in kinds(d)
