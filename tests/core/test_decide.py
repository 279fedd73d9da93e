"""Table tests of the pure safety policy: confirmations, caps, floor, majority, dry-run."""

from __future__ import annotations

import pytest

from artifactcheck.decide import History, decide
from artifactcheck.models import (
    ActionKind,
    FindingKind,
    Instance,
    InstanceResult,
    Verdict,
    VersionSignal,
)
from artifactcheck.settings import PolicySettings


def fleet(
    verdicts: list[Verdict], *, gated: bool = True, owner: str = "web-rs"
) -> list[InstanceResult]:
    return [
        InstanceResult(
            instance=Instance(
                name=f"pod-{n}",
                base_url=f"http://127.0.0.{n + 2}/",
                kind="pod",
                namespace="shop",
                owner=owner,
                signals=(VersionSignal("label", "1.0"),),
                has_readiness_gate=gated,
                gate_status="True",
            ),
            verdict=v,
            reason=f"{v.value} reason",
            reported_version="1.0",
        )
        for n, v in enumerate(verdicts)
    ]


def run(verdicts: list[Verdict], cycles: int, policy: PolicySettings, **kw: object):
    history = History()
    decisions = []
    for cycle in range(cycles):
        d = decide(fleet(verdicts, **kw), policy=policy, history=history, now=1000.0 + 600 * cycle)  # type: ignore[arg-type]
        history = d.history
        decisions.append(d)
    return decisions


Q = PolicySettings(mode="quarantine")
M, C, INC, U = Verdict.MISMATCH, Verdict.CONSISTENT, Verdict.INCONCLUSIVE, Verdict.UNREACHABLE


def kinds(d, kind: ActionKind) -> list[str]:
    return [a.target for a in d.actions if a.kind is kind]


def test_confirmations_before_acting() -> None:
    first, second, third = run([M] + [C] * 9, 3, Q)
    assert kinds(first, ActionKind.QUARANTINE) == []
    assert kinds(second, ActionKind.QUARANTINE) == ["pod-0"]
    assert kinds(second, ActionKind.FLAG) == ["pod-0"]
    assert (
        kinds(third, ActionKind.QUARANTINE) == [] and kinds(third, ActionKind.FLAG) == []
    )  # no repeats


@pytest.mark.parametrize(
    ("verdicts", "expected_quarantined", "alert"),
    [
        ([M] * 3 + [C] * 7, 2, False),  # 25% cap of 10 -> 2
        ([M] * 6 + [C] * 4, 0, True),  # majority disagrees: suspect the expectation
        ([INC] * 10, 0, False),
        ([U] * 3 + [C] * 7, 0, False),
        ([M] + [C] * 3, 1, False),  # 25% of 4 -> 1
    ],
)
def test_caps_and_majority(verdicts: list[Verdict], expected_quarantined: int, alert: bool) -> None:
    decisions = run(verdicts, 3, Q)
    quarantined = [t for d in decisions for t in kinds(d, ActionKind.QUARANTINE)]
    assert len(quarantined) == expected_quarantined
    assert alert == any(
        f.kind is FindingKind.SUSPECT_EXPECTATION for d in decisions for f in d.findings
    )


def test_ready_floor() -> None:
    policy = PolicySettings(
        mode="quarantine", max_quarantine_fraction=1.0, min_ready=2, majority_threshold=1.0
    )
    decisions = run([M, M, C], 2, policy)
    assert len([t for d in decisions for t in kinds(d, ActionKind.QUARANTINE)]) == 1


def test_dry_run_never_writes_state() -> None:
    policy = PolicySettings(mode="quarantine", dry_run=True)
    decisions = run([M] + [C] * 9, 3, policy)
    acts = [a for d in decisions for a in d.actions]
    assert acts and all(a.dry_run for a in acts)
    assert not decisions[-1].history.instances["pod-0"].quarantined


def test_ungated_pod_only_flagged() -> None:
    decisions = run([M] + [C] * 9, 2, Q, gated=False)
    assert kinds(decisions[1], ActionKind.QUARANTINE) == []
    assert kinds(decisions[1], ActionKind.FLAG) == ["pod-0"]
    assert any(f.kind is FindingKind.NOT_GATED for f in decisions[1].findings)


def test_release_when_consistent_again() -> None:
    history = History()
    for verdicts in ([M] + [C] * 9, [M] + [C] * 9):
        history = decide(fleet(verdicts), policy=Q, history=history, now=0).history
    assert history.instances["pod-0"].quarantined
    healed = fleet([C] * 10)
    healed[0] = InstanceResult(
        instance=Instance(
            **{
                **{f: getattr(healed[0].instance, f) for f in healed[0].instance.__slots__},
                "gate_status": "False",
            }
        ),  # type: ignore[arg-type]
        verdict=C,
        reason="ok",
        reported_version="1.0",
    )
    d = decide(healed, policy=Q, history=history, now=10)
    assert kinds(d, ActionKind.RELEASE) == ["pod-0"]
    assert not d.history.instances["pod-0"].quarantined


def test_rate_limit() -> None:
    policy = PolicySettings(mode="flag", max_actions_per_minute=2, majority_threshold=1.0)
    decisions = run([M] * 4 + [C] * 6, 2, policy)
    assert len(kinds(decisions[1], ActionKind.FLAG)) == 2
    assert any(f.kind is FindingKind.ACTION_HELD for f in decisions[1].findings)


def test_inconclusive_keeps_streak_but_never_acts() -> None:
    history = History()
    for verdicts in ([M, C, C, C, C], [INC, C, C, C, C], [INC, C, C, C, C]):
        d = decide(fleet(verdicts), policy=Q, history=history, now=0)
        assert not kinds(d, ActionKind.QUARANTINE)
        history = d.history
    assert history.instances["pod-0"].streak == 1
