"""Rules of the safety policy (artifactcheck/judge/decide.py) that no other row pinned.

Each test is one rule, and each was broken once on purpose to see it fail: which
verdicts are flagged but never quarantined, the streak cap, the two-pod minimum for
suspecting the expectation, and unreachable pods never counted as ready.
"""

from __future__ import annotations

import pytest

from artifactcheck.judge.decide import Decision, History, decide
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    ActionKind,
    FindingKind,
    Instance,
    InstanceResult,
    Verdict,
    VersionSignal,
)

M, C, U = Verdict.MISMATCH, Verdict.CONSISTENT, Verdict.UNREACHABLE


def pod(n: int, *, ready: bool = True, owner: str = "web-rs") -> Instance:
    return Instance(
        name=f"pod-{n}",
        base_url=f"http://127.0.0.{n + 2}/",
        kind="pod",
        namespace="shop",
        owner=owner,
        signals=(VersionSignal("label", "1.0"),),
        has_readiness_gate=True,
        gate_status="True",
        ready=ready,
    )


def results(verdicts: list[Verdict], *, ready: list[bool] | None = None) -> list[InstanceResult]:
    ready = ready or [True] * len(verdicts)
    return [
        InstanceResult(pod(n, ready=ok), v, f"judged {v.value}", reported_version="1.0")
        for n, (v, ok) in enumerate(zip(verdicts, ready, strict=True))
    ]


def cycles(verdicts: list[Verdict], policy: PolicySettings, count: int) -> list[Decision]:
    history, out = History(), []
    for cycle in range(count):
        d = decide(results(verdicts), policy=policy, history=history, now=1000.0 + 600 * cycle)
        history = d.history
        out.append(d)
    return out


def targets(d: Decision, kind: ActionKind) -> list[str]:
    return [a.target for a in d.actions if a.kind is kind]


QUARANTINE = PolicySettings(mode="quarantine", confirmations=2, max_quarantine_fraction=0.5)


# ----------------------------------------------------------- flagged, never quarantined


@pytest.mark.parametrize(
    "verdict",
    [Verdict.DRIFT, Verdict.CDN_MISSING, Verdict.CDN_MISMATCH, Verdict.SIGNAL_CONFLICT],
)
def test_flagged_after_confirmation_but_never_quarantined(verdict: Verdict) -> None:
    """The pod's own bytes may be right (drift, the CDN's fault) or the signals
    disagree: worth an annotation and an Event once confirmed, never traffic taken away
    (quarantine mode, confirmations 2, one bad pod of eight: every limit would allow it)."""
    first, second, third = cycles([verdict] + [C] * 7, QUARANTINE, 3)
    assert targets(first, ActionKind.FLAG) == []  # not confirmed yet
    assert targets(second, ActionKind.FLAG) == ["pod-0"]
    assert targets(third, ActionKind.FLAG) == []  # once
    for d in (first, second, third):
        assert targets(d, ActionKind.QUARANTINE) == [], d.actions
        assert not d.history.instances["pod-0"].quarantined


def test_a_confirmed_mismatch_is_quarantined_under_the_same_policy() -> None:
    """The control for the test above: the same fleet and policy do quarantine a mismatch."""
    _, second, _ = cycles([M] + [C] * 7, QUARANTINE, 3)
    assert targets(second, ActionKind.QUARANTINE) == ["pod-0"]


# ----------------------------------------------------------- the streak cap


def test_the_streak_stops_at_the_confirmations() -> None:
    """Only "confirmed or not" matters: a streak that kept growing would change the
    streak annotation (a write to the pod) every cycle of a long outage."""
    decisions = cycles([M] + [C] * 7, PolicySettings(mode="flag", confirmations=3), 6)
    assert [d.history.instances["pod-0"].streak for d in decisions] == [1, 2, 3, 3, 3, 3]


# ----------------------------------------------------------- suspecting the expectation


def test_one_pod_alone_is_never_the_majority_that_suspects_the_expectation() -> None:
    """One pod, mismatching: 1 of 1 is "all of the workload", but one pod is no
    evidence against the release manifest; it is acted on like any mismatch."""
    policy = PolicySettings(mode="flag", confirmations=1, majority_threshold=0.5)
    (d,) = cycles([M], policy, 1)
    assert not [f for f in d.findings if f.kind is FindingKind.SUSPECT_EXPECTATION]
    assert targets(d, ActionKind.FLAG) == ["pod-0"]


def test_two_pods_both_mismatching_suspect_the_expectation() -> None:
    """The control: with two pods, both mismatching, the expectation is the suspect."""
    policy = PolicySettings(mode="flag", confirmations=1, majority_threshold=0.5)
    (d,) = cycles([M, M], policy, 1)
    assert [f.kind for f in d.findings] == [FindingKind.SUSPECT_EXPECTATION]
    assert targets(d, ActionKind.FLAG) == []


# ----------------------------------------------------------- the ready floor


@pytest.mark.parametrize(
    ("verdicts", "quarantined"),
    [
        pytest.param([M, U, U, C], [], id="unreachable-not-ready"),
        pytest.param([M, C, C, C], ["pod-0"], id="reachable-ready"),
    ],
)
def test_unreachable_pods_do_not_count_as_ready(
    verdicts: list[Verdict], quarantined: list[str]
) -> None:
    """Kubernetes says all four are ready; two do not answer us, so they are not
    counted: quarantining the mismatching pod would leave one serving pod, under the
    floor of two. With the same pods answering, it is quarantined."""
    policy = PolicySettings(
        mode="quarantine",
        confirmations=1,
        min_ready=2,
        max_quarantine_fraction=1.0,
        majority_threshold=1.0,
    )
    d = decide(results(verdicts), policy=policy, history=History(), now=1)
    assert targets(d, ActionKind.QUARANTINE) == quarantined
    held = [f for f in d.findings if f.kind is FindingKind.ACTION_HELD]
    if not quarantined:
        (f,) = held
        assert f.instance == "pod-0" and "fewer than 2 ready" in f.message, f.message
