"""The policy's second step: the limits every action stays within (judge/decide.py).

Per workload: most of it disagreeing makes the expectation the suspect (alert, act on
nobody); a cap on the fraction quarantined; a floor of ready pods, counting only pods
that answer. Across the pass: a rate limit on writes (undoing is never held back),
dry-run (decide, perform nothing, remember nothing) and report mode (decide nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from policy_support import (
    DRIFT,
    INC,
    ONE,
    C,
    M,
    Q,
    U,
    cycles,
    found,
    one_cycle,
    pod,
    result,
    targets,
)

from artifactcheck.judge.decide import History, decide
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import ActionKind, FindingKind, InstanceResult, Severity, Verdict

FLAG_NOW = PolicySettings(mode="flag", confirmations=1)
HALF = PolicySettings(mode="flag", confirmations=1, majority_threshold=0.5)


def loose_pods(bad: int, total: int = 8) -> list[InstanceResult]:
    """Pods without an owner (bare pods, a static fleet), the first ``bad`` mismatching."""
    return [
        result(pod(f"p-{n}", gate="True", owner=None), M if n < bad else C) for n in range(total)
    ]


def gated(verdicts: list[Verdict], prefix: str = "pod", **changes: object) -> list[InstanceResult]:
    return [result(pod(f"{prefix}-{n}", gate="True", **changes), v) for n, v in enumerate(verdicts)]


# ----------------------------------------------------------- suspecting the expectation


@pytest.mark.parametrize(
    ("results", "policy", "alert", "flagged"),
    [
        pytest.param(gated([M]), FLAG_NOW, None, ["pod-0"], id="a-lone-instance-is-no-majority"),
        pytest.param(gated([M]), HALF, None, ["pod-0"], id="one-of-one-at-half"),
        pytest.param(gated([M, M]), HALF, "2 of 2 instances of shop/web-rs", [], id="two-of-two"),
        pytest.param(
            gated([M, M], "web") + gated([C] * 6, "api", owner="api-rs"),
            HALF,
            "2 of 2 instances of shop/web-rs disagree",
            [],
            id="per-workload",
        ),
        pytest.param(
            gated([M, M], "s") + gated([C] * 6, "o", namespace="other"),
            HALF,
            "2 of 2 instances of shop/web-rs disagree",
            [],
            id="per-namespace",
        ),
        pytest.param(
            loose_pods(5), FLAG_NOW, "5 of 8 instances of (fleet) disagree", [], id="ownerless"
        ),
    ],
)
def test_most_of_a_workload_disagreeing_makes_the_expectation_the_suspect(
    results: list[InstanceResult], policy: PolicySettings, alert: str | None, flagged: list[str]
) -> None:
    """One pod mismatching is that pod's problem, not a suspect expectation; pods with
    no owner form one fleet (as eight one-pod workloads, each would be flagged)."""
    d = one_cycle(results, policy)
    alerts = found(d, FindingKind.SUSPECT_EXPECTATION)
    if alert is None:
        assert alerts == []
    else:
        (a,) = alerts
        assert a.severity is Severity.ALERT and a.message.startswith(alert), a.message
    assert targets(d, ActionKind.FLAG) == flagged


@pytest.mark.parametrize(
    ("verdicts", "quarantined", "alert"),
    [
        pytest.param([M] * 3 + [C] * 7, 2, False, id="cap-25pc-of-10"),
        pytest.param([M] * 6 + [C] * 4, 0, True, id="majority-suspects-the-expectation"),
        pytest.param([INC] * 10, 0, False, id="inconclusive"),
        pytest.param([U] * 3 + [C] * 7, 0, False, id="unreachable"),
        pytest.param([M] + [C] * 3, 1, False, id="cap-25pc-of-4"),
    ],
)
def test_caps_and_majority(verdicts: list[Verdict], quarantined: int, alert: bool) -> None:
    """Three cycles under the default quarantine policy (confirmations 2)."""
    decisions = cycles(verdicts, 3, Q)
    assert len([t for d in decisions for t in targets(d, ActionKind.QUARANTINE)]) == quarantined
    assert alert == any(found(d, FindingKind.SUSPECT_EXPECTATION) for d in decisions)


# ----------------------------------------------------------- the quarantine cap


def _already_out() -> list[InstanceResult]:
    out = gated([M] * 3 + [C] * 5)
    out[0] = result(pod("pod-0", quarantined=True), M)
    return out


@pytest.mark.parametrize(
    ("results", "policy", "quarantined", "held"),
    [
        pytest.param(
            gated([M] * 3 + [C] * 7),
            ONE,
            ["pod-0", "pod-1"],
            "pod-2 not quarantined: shop/web-rs already has 2 of 10 quarantined (cap 25%)",
            id="counts-the-same-cycle",
        ),
        pytest.param(
            _already_out(),
            ONE,
            ["pod-1"],
            "pod-2 not quarantined: shop/web-rs already has 2 of 8 quarantined (cap 25%)",
            id="counts-those-already-out",
        ),
        pytest.param(
            loose_pods(3),
            PolicySettings(mode="quarantine", confirmations=1, majority_threshold=0.5),
            ["p-0", "p-1"],
            "p-2 not quarantined: (fleet) already has 2 of 8 quarantined (cap 25%)",
            id="ownerless-pods-are-one-fleet",
        ),
    ],
)
def test_the_quarantine_cap(
    results: list[InstanceResult], policy: PolicySettings, quarantined: list[str], held: str | None
) -> None:
    d = one_cycle(results, policy)
    assert targets(d, ActionKind.QUARANTINE) == quarantined
    holds = found(d, FindingKind.ACTION_HELD)
    assert [(f.message, f.severity) for f in holds] == ([(held, Severity.WARNING)] if held else [])
    if held:
        assert holds[0].instance == held.split(" ")[0]


# ----------------------------------------------------------- the ready floor


@pytest.mark.parametrize(
    ("verdicts", "ready", "min_ready", "quarantined"),
    [
        pytest.param([M, M, C], [True] * 3, 2, ["pod-0"], id="the-floor-holds-the-second"),
        pytest.param([M, M, C, C], [True] * 4, 2, ["pod-0", "pod-1"], id="reached-exactly"),
        pytest.param([M, M, M, C], [True] * 4, 2, ["pod-0", "pod-1"], id="holds-the-third"),
        pytest.param([M, C, C, C], [True, False, False, False], 1, [], id="not-ready-not-counted"),
        pytest.param([M, C, C, C], [False, True, True, False], 2, ["pod-0"], id="not-serving-goes"),
        pytest.param([M, U, U, C], [True] * 4, 2, [], id="unreachable-not-ready"),
        pytest.param([M, C, C, C], [True] * 4, 2, ["pod-0"], id="reachable-ready"),
        pytest.param([M, U, C], [True, True, False], 1, [], id="the-only-answering-pod-stays"),
    ],
)
def test_the_ready_floor(
    verdicts: list[Verdict], ready: list[bool], min_ready: int, quarantined: list[str]
) -> None:
    """Kubernetes's Ready counts only for pods that answer us: quarantining the pod that
    would leave fewer than ``min_ready`` serving is held back, and said of that pod."""
    policy = PolicySettings(
        mode="quarantine",
        confirmations=1,
        max_quarantine_fraction=1.0,
        majority_threshold=1.0,
        min_ready=min_ready,
    )
    results = [
        result(replace(pod(f"pod-{n}", gate="True"), ready=ok), v)
        for n, (v, ok) in enumerate(zip(verdicts, ready, strict=True))
    ]
    d = one_cycle(results, policy)
    assert targets(d, ActionKind.QUARANTINE) == quarantined
    held = {f.instance for f in found(d, FindingKind.ACTION_HELD)}
    bad = {f"pod-{n}" for n, v in enumerate(verdicts) if v is M}
    assert held == bad - set(quarantined)
    for f in d.findings:
        assert f.severity is Severity.WARNING
        assert f"fewer than {min_ready} ready" in f.message, f.message


# ----------------------------------------------------------- the rate limit


@dataclass(frozen=True)
class Limited:
    id: str
    results: list[InstanceResult]
    per_minute: float
    flagged: list[str]
    held: list[str]  # whose flag is postponed
    times: tuple[float, ...] = ()  # writes already made in the last minute
    now: float = 1.0
    after: tuple[float, ...] | None = None  # the write times remembered


LIMITED = [
    Limited(
        "a-budget-per-minute", gated([M] * 4 + [C] * 6), 2, ["pod-0", "pod-1"], ["pod-2", "pod-3"]
    ),
    Limited("rounds-down", gated([DRIFT, DRIFT]), 1.5, ["pod-0"], ["pod-1"]),
    Limited("names-the-instance", gated([M, M] + [C] * 6), 1, ["pod-0"], ["pod-1"]),
    Limited(
        "a-write-59.9s-ago-counts", gated([M] + [C] * 5), 1, [], ["pod-0"], (1.0,), 60.9, (1.0,)
    ),
    Limited(
        "a-write-60s-ago-is-gone", gated([M] + [C] * 5), 1, ["pod-0"], [], (1.0,), 61.0, (61.0,)
    ),
]


@pytest.mark.parametrize("row", LIMITED, ids=[r.id for r in LIMITED])
def test_the_rate_limit(row: Limited) -> None:
    policy = PolicySettings(
        mode="flag", confirmations=1, majority_threshold=1.0, max_actions_per_minute=row.per_minute
    )
    d = decide(row.results, policy=policy, history=History(action_times=row.times), now=row.now)
    assert targets(d, ActionKind.FLAG) == row.flagged
    held = found(d, FindingKind.ACTION_HELD)
    assert [(f.instance, f.severity, f.message) for f in held] == [
        (name, Severity.WARNING, f"rate limit reached: flag of {name} postponed")
        for name in row.held
    ]
    if row.after is not None:
        assert d.history.action_times == row.after


def test_undoing_is_never_rate_limited() -> None:
    policy = PolicySettings(mode="quarantine", max_actions_per_minute=1)
    history = History(action_times=(0.0, 0.0, 0.0))
    flagged = replace(
        pod(quarantined=True),
        annotations={"artifactcheck.io/quarantined": "true", "artifactcheck.io/verdict": "x"},
    )
    d = decide([result(flagged, C)], policy=policy, history=history, now=1)
    assert {a.kind for a in d.actions} == {ActionKind.RELEASE, ActionKind.UNFLAG}
    assert not found(d, FindingKind.ACTION_HELD)


# ----------------------------------------------------------- dry-run and report mode


@dataclass(frozen=True)
class Mode:
    id: str
    verdicts: list[Verdict]
    policy: PolicySettings
    rounds: int
    actions: list[tuple[ActionKind, str]]  # every action of every cycle, all dry-run
    remembered: bool = False  # pod-0 quarantined in the history at the end
    times: tuple[float, ...] = field(default=())


MODES = [
    Mode(
        "dry-run-decides-and-writes-no-state",
        [M] + [C] * 9,
        PolicySettings(mode="quarantine", dry_run=True),
        3,
        [(ActionKind.FLAG, "pod-0"), (ActionKind.QUARANTINE, "pod-0")] * 2,
    ),
    Mode(
        "dry-run-records-no-action-time",
        [DRIFT],
        PolicySettings(mode="flag", confirmations=1, dry_run=True),
        1,
        [(ActionKind.FLAG, "pod-0")],
    ),
    Mode(
        "report-mode-acts-on-nothing",
        [DRIFT],
        PolicySettings(mode="report", confirmations=1),
        1,
        [],
    ),
]


@pytest.mark.parametrize("row", MODES, ids=[m.id for m in MODES])
def test_dry_run_and_report_mode(row: Mode) -> None:
    decisions = cycles(row.verdicts, row.rounds, row.policy)
    acts = [a for d in decisions for a in d.actions]
    assert [(a.kind, a.target) for a in acts] == row.actions
    assert all(a.dry_run for a in acts)
    last = decisions[-1].history
    assert last.instances["pod-0"].quarantined is row.remembered
    assert last.action_times == row.times
