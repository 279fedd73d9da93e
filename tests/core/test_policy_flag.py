"""The policy's fourth step: a pod's flag cleared, a flag made, a quarantine taken.

Which verdicts are flagged and which quarantined once confirmed; a flag is cleared
only on content verified consistent; a predecessor's flag (as the pod's annotations
show) is made once more, outside the rate limit, then never again; a pod without a
readiness gate is flagged only; every action names the files behind it.
"""

from __future__ import annotations

import pytest
from policy_support import C, M, cycles, one_cycle, pod, result, targets

from artifactcheck.judge.decide import History, decide
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import ActionKind, Finding, FindingKind, Severity, Verdict


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
    ids=lambda v: v.value if isinstance(v, Verdict) else None,
)
def test_which_verdicts_are_flagged_and_which_quarantined(
    verdict: Verdict, flagged: bool, quarantined: bool
) -> None:
    """One bad pod of eight under quarantine mode, confirmations 2: every limit would
    allow a quarantine. Confirmed on the second cycle, a bad verdict is flagged once;
    only a mismatch takes traffic away (the others' bytes may be right: drift, the
    CDN's fault; or the signals disagree); an unknown or good verdict is neither."""
    policy = PolicySettings(mode="quarantine", confirmations=2, max_quarantine_fraction=0.5)
    decisions = cycles([verdict] + [C] * 7, 3, policy)
    once = [[], ["pod-0"], []]
    assert [targets(d, ActionKind.FLAG) for d in decisions] == (once if flagged else [[]] * 3)
    assert [targets(d, ActionKind.QUARANTINE) for d in decisions] == (
        once if quarantined else [[]] * 3
    )
    assert decisions[-1].history.instances["pod-0"].quarantined is quarantined


def test_a_pod_without_a_readiness_gate_is_only_flagged() -> None:
    bare = replace(pod(gate="True"), has_readiness_gate=False)
    d = one_cycle([result(bare, M), *[result(pod(f"p{n}", gate="True"), C) for n in range(7)]])
    assert targets(d, ActionKind.FLAG) == ["pod-0"]
    assert targets(d, ActionKind.QUARANTINE) == []
    (f,) = [f for f in d.findings if f.kind is FindingKind.NOT_GATED]
    assert (f.instance, f.severity) == ("pod-0", Severity.WARNING)
    assert "pod-0 has no readiness gate artifactcheck.io/content-verified" in f.message


@pytest.mark.parametrize(
    ("verdict", "verified", "policy", "unflagged", "still_flagged"),
    [
        pytest.param(C, True, PolicySettings(mode="flag"), True, False, id="verified"),
        pytest.param(C, None, PolicySettings(mode="flag"), True, False, id="by-hand-verified"),
        pytest.param(C, False, PolicySettings(mode="flag"), False, True, id="unverified"),
        pytest.param(Verdict.DRIFT, None, PolicySettings(mode="flag"), False, True, id="drift"),
        pytest.param(C, True, PolicySettings(mode="flag", dry_run=True), True, True, id="dry-run"),
        pytest.param(C, True, PolicySettings(mode="report"), False, True, id="report"),
    ],
)
def test_a_flag_is_cleared_only_on_verified_consistent_content(
    verdict: Verdict,
    verified: bool | None,
    policy: PolicySettings,
    unflagged: bool,
    still_flagged: bool,
) -> None:
    flagged = replace(pod(gate="True"), annotations={"artifactcheck.io/verdict": "mismatch"})
    d = one_cycle([result(flagged, verdict, verified=verified)], policy)
    acts = [a for a in d.actions if a.kind is ActionKind.UNFLAG]
    assert [(a.reason, a.dry_run) for a in acts] == (
        [("consistent again", policy.dry_run)] if unflagged else []
    )
    assert d.history.instances["pod-0"].flagged is still_flagged


@pytest.mark.parametrize(
    ("policy", "reflagged"),
    [
        pytest.param(PolicySettings(mode="flag"), True, id="flag"),
        pytest.param(PolicySettings(mode="flag", dry_run=True), False, id="dry-run"),
        pytest.param(PolicySettings(mode="report"), False, id="report"),
    ],
)
def test_a_predecessors_flag_is_made_once_more(policy: PolicySettings, reflagged: bool) -> None:
    """A replica killed between marking a pod and writing its Event leaves a flagged
    pod with no Event: its successor, knowing only the annotations, flags it once more
    (the actor writes the Event only if it is missing), then never again."""
    marked = {"artifactcheck.io/verdict": "mismatch", "artifactcheck.io/streak": "2"}
    results = [result(replace(pod(gate="True"), annotations=marked), M)]
    results += [result(pod(f"p{n}", gate="True"), C) for n in range(7)]
    first = one_cycle(results, policy)
    assert [a.target for a in first.actions if a.kind is ActionKind.FLAG] == (
        ["pod-0"] if reflagged else []
    )
    second = one_cycle(results, policy, history=first.history)
    assert [a for a in second.actions if a.kind is ActionKind.FLAG] == []


def test_a_predecessors_flag_takes_no_new_quarantines_budget() -> None:
    """A new leader with ten flagged pods and a full rate limit still repeats their
    flags (counted by the leader that made them), and the limit still holds back a
    new quarantine."""
    marked = {
        "artifactcheck.io/verdict": "mismatch",
        "artifactcheck.io/streak": "2",
        "artifactcheck.io/quarantined": "true",
    }
    old = [result(replace(pod(f"old-{n}", gate="False"), annotations=marked), M) for n in range(10)]
    new = [result(pod("new", gate="True", streak=2), M)]
    clean = [result(pod(f"p{n}", gate="True"), C) for n in range(40)]
    policy = PolicySettings(mode="quarantine", max_actions_per_minute=10)
    d = one_cycle([*old, *new, *clean], policy, history=History(action_times=(1.0,) * 10))
    flags = [a for a in d.actions if a.kind is ActionKind.FLAG]
    assert sorted(a.target for a in flags) == [f"old-{n}" for n in range(10)]
    assert all(a.inherited for a in flags)
    assert targets(d, ActionKind.QUARANTINE) == []
    assert any("rate limit reached: quarantine of new" in f.message for f in d.findings)
    fresh = one_cycle([*old, *new, *clean], policy)
    assert targets(fresh, ActionKind.QUARANTINE) == ["new"]
    assert not any(a.inherited for a in fresh.actions if a.target == "new")


def test_a_predecessors_flag_cleared_is_not_made_again() -> None:
    """Unflagged on its first cycle, a predecessor's flag is gone: a later episode is
    flagged once, like any other."""
    marked = replace(pod(gate="True"), annotations={"artifactcheck.io/verdict": "mismatch"})
    others = [result(pod(f"p{n}", gate="True"), C) for n in range(7)]
    history, flags = History(), []
    for verdict in (C, M, M, M):
        d = one_cycle([result(marked, verdict, verified=True), *others], history=history)
        history = d.history
        flags += [a.kind for a in d.actions if a.kind in (ActionKind.FLAG, ActionKind.UNFLAG)]
    assert flags == [ActionKind.UNFLAG, ActionKind.FLAG]


def test_flag_reason_is_the_verdict_reason() -> None:
    d = one_cycle(
        [result(pod(gate="True"), M), *[result(pod(f"p{n}", gate="True"), C) for n in range(7)]]
    )
    (flag,) = [a for a in d.actions if a.kind is ActionKind.FLAG]
    assert flag.reason == "judged mismatch"
    assert d.history.instances["pod-0"].last is M and d.history.instances["p0"].last is C


def test_actions_name_the_files_behind_them() -> None:
    findings = (
        Finding(FindingKind.CONTENT_DIFFERS, "x", "pod-0", path="b.js"),
        Finding(FindingKind.FILE_MISSING, "x", "pod-0", path="a.js"),
        Finding(FindingKind.FALLBACK_PAGE, "x", "pod-0", path="c.js"),
        Finding(FindingKind.OBSERVATION_FAILED, "x", "pod-0", path="d.js"),
        Finding(FindingKind.CONTENT_DIFFERS, "x", "pod-0"),
    )
    bad = result(pod(gate="True"), M, findings=findings)
    good = [result(pod(f"pod-{n}", gate="True"), C) for n in range(1, 8)]
    d = decide(
        [bad, *good],
        policy=PolicySettings(mode="quarantine", confirmations=1),
        history=History(),
        now=1,
    )
    acted = {a.kind: a for a in d.actions if a.target == "pod-0"}
    assert acted[ActionKind.FLAG].files == ("a.js", "b.js", "c.js")
    assert acted[ActionKind.QUARANTINE].files == ("a.js", "b.js", "c.js")
    assert acted[ActionKind.QUARANTINE].reason == "judged mismatch"
