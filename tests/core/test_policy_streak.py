"""The policy's first step: every instance's confirmation streak (judge/decide.py).

A bad verdict grows the streak up to the confirmations and no further, an unknown one
(inconclusive, unreachable) keeps it, a good one resets it; only an instance observed
afresh counts, and a streak is recovered from the pod's annotations after a restart.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from policy_support import INC, C, M, Q, U, cycles, fleet, pod, result, targets

from artifactcheck.judge.decide import History, InstanceState, decide, recover_state
from artifactcheck.model.names import ANN_STREAK
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import ActionKind, Verdict


@dataclass(frozen=True)
class Run:
    """pod-0's verdict in each cycle (its siblings consistent), and what follows."""

    id: str
    verdicts: list[Verdict]
    siblings: int
    policy: PolicySettings
    streaks: list[int]
    flags: list[list[str]]
    quarantines: list[list[str]]


RUNS = [
    Run(
        "acted-on-once-confirmed-and-never-again",
        [M, M, M],
        9,
        Q,
        [1, 2, 2],
        [[], ["pod-0"], []],
        [[], ["pod-0"], []],
    ),
    Run(
        "inconclusive-keeps-the-streak-and-never-acts",
        [M, INC, INC],
        4,
        Q,
        [1, 1, 1],
        [[], [], []],
        [[], [], []],
    ),
    Run(
        "the-streak-stops-at-the-confirmations",  # a growing streak is a write a cycle
        [M] * 6,
        7,
        PolicySettings(mode="flag", confirmations=3),
        [1, 2, 3, 3, 3, 3],
        [[], [], ["pod-0"], [], [], []],
        [[]] * 6,
    ),
]


@pytest.mark.parametrize("run", RUNS, ids=[r.id for r in RUNS])
def test_a_streak_over_cycles(run: Run) -> None:
    history, seen = History(), []
    for n, verdict in enumerate(run.verdicts):
        d = decide(
            fleet([verdict] + [C] * run.siblings),
            policy=run.policy,
            history=history,
            now=1000.0 + 600 * n,
        )
        history = d.history
        seen.append(
            (
                history.instances["pod-0"].streak,
                targets(d, ActionKind.FLAG),
                targets(d, ActionKind.QUARANTINE),
            )
        )
    assert seen == list(zip(run.streaks, run.flags, run.quarantines, strict=True))


@pytest.mark.parametrize(
    ("known", "annotations", "verdict", "confirmations", "observed", "streak"),
    [
        pytest.param(InstanceState(streak=1), {}, U, 3, None, 1, id="unreachable-keeps"),
        pytest.param(InstanceState(streak=1), {}, INC, 3, None, 1, id="inconclusive-keeps"),
        pytest.param(
            InstanceState(streak=2, flagged=True), {}, M, 2, None, 2, id="capped-at-confirmations"
        ),
        pytest.param(
            None, {ANN_STREAK: "1"}, M, 3, set(), 2, id="recovered-counts-its-first-observation"
        ),
    ],
)
def test_one_verdict_on_a_streak(
    known: InstanceState | None,
    annotations: dict[str, str],
    verdict: Verdict,
    confirmations: int,
    observed: set[str] | None,
    streak: int,
) -> None:
    """Known to no history (a controller restarted), an instance is judged afresh even
    when it is not among this cycle's new observations."""
    history = History(instances={"p": known} if known else {})
    r = result(pod("p", annotations=annotations), verdict)
    policy = PolicySettings(confirmations=confirmations)
    d = decide([r], policy=policy, history=history, now=1000.0, observed=observed)
    assert d.history.instances["p"].streak == streak


def test_a_streak_counts_observations_not_cycles() -> None:
    """A controller re-judges its whole workload whenever a new pod comes; judging a
    pod's one old observation again is not a second mismatch. Its streak grows only in
    a cycle that observed it afresh (``observed``), and resets when a re-judgement of
    the old observation turns out good (the release it is compared with changed)."""
    results = fleet([M] + [C] * 9)
    everyone = {r.instance.name for r in results}
    history = History()
    d1 = decide(results, policy=Q, history=history, now=1000.0, observed=everyone)
    assert d1.history.instances["pod-0"].streak == 1
    # five fast cycles for other pods: pod-0 judged again, never re-observed
    history = d1.history
    for n in range(5):
        d = decide(results, policy=Q, history=history, now=1001.0 + n, observed={"pod-5"})
        assert targets(d, ActionKind.QUARANTINE) == [] and targets(d, ActionKind.FLAG) == []
        history = d.history
    assert history.instances["pod-0"].streak == 1
    # observed again and still mismatching: now confirmed
    d = decide(results, policy=Q, history=history, now=1100.0, observed={"pod-0"})
    assert targets(d, ActionKind.QUARANTINE) == ["pod-0"]
    # without ``observed`` (verify, one run) every result is a fresh observation
    assert len(cycles([M] + [C] * 9, 2, Q)[1].actions) > 0
    # a good verdict on the old observation resets the streak all the same
    healed = decide(fleet([C] * 10), policy=Q, history=d1.history, now=1200.0, observed=set())
    assert healed.history.instances["pod-0"].streak == 0


@pytest.mark.parametrize(
    ("gate", "notes", "quarantined", "flagged", "streak"),
    [
        pytest.param("False", {"artifactcheck.io/quarantined": "true"}, True, False, 0, id="ours"),
        pytest.param("False", {"artifactcheck.io/quarantined": "True"}, True, False, 0, id="True"),
        pytest.param("False", {}, False, False, 0, id="gate-closed-by-someone-else"),
        pytest.param("True", {"artifactcheck.io/quarantined": "true"}, False, False, 0, id="open"),
        pytest.param("True", {"artifactcheck.io/verdict": "drift"}, False, True, 0, id="flagged"),
        pytest.param("True", {"artifactcheck.io/streak": "2"}, False, False, 2, id="streak"),
        pytest.param("True", {"artifactcheck.io/streak": "x"}, False, False, 0, id="bad-streak"),
    ],
)
def test_recover_state(
    gate: str, notes: dict[str, str], quarantined: bool, flagged: bool, streak: int
) -> None:
    inst = replace(pod(), gate_status=gate, annotations=notes)
    assert recover_state(result(inst, C)) == InstanceState(
        streak=streak, quarantined=quarantined, flagged=flagged, inherited_flag=flagged
    )
