"""The policy's third step: a pod's readiness gate opened, or its quarantine undone.

A gate opens on content verified right (or, in gate mode and by policy, failing open
when nothing could be verified and nothing speaks against the pod); a quarantine is
undone only on content verified right again; never in report mode, never for a pod
without a gate, and dry-run remembers the quarantine it did not undo.
"""

from __future__ import annotations

from typing import Any

import pytest
from policy_support import INC, C, M, Q, U, fleet, pod, result, targets

from artifactcheck.judge.decide import (
    SUSPECT_FAIL_OPEN_REASON,
    Decision,
    History,
    InstanceState,
    decide,
    fail_open_when_suspect,
    held_out_of_traffic,
)
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    ActionKind,
    Finding,
    FindingKind,
    Instance,
    Verdict,
)

AGAINST = (Finding(FindingKind.CDN_DIFFERS, "differs on the CDN", "pod-0", path="a.js"),)
WARNING_ONLY = (Finding(FindingKind.EXPECTATION_UNAVAILABLE, "release 1.0 is unknown", "pod-0"),)
OPEN = "open"  # released as verified
FAIL = "fail-open"  # released failing open
NO = "no release"


@pytest.mark.parametrize(
    ("verdict", "verified", "findings", "kw", "gate_mode", "policy", "expected"),
    [
        pytest.param(C, None, (), {}, True, Q, OPEN, id="consistent-opens"),
        pytest.param(C, True, (), {}, False, Q, OPEN, id="verified-opens-outside-gate-mode"),
        pytest.param(Verdict.DRIFT, None, (), {}, True, Q, OPEN, id="drift-opens"),
        pytest.param(
            Verdict.CDN_MISMATCH, True, (), {}, True, Q, OPEN, id="cdn-mismatch-verified-opens"
        ),
        pytest.param(
            Verdict.CDN_MISMATCH, False, AGAINST, {}, True, Q, NO, id="cdn-mismatch-unverified"
        ),
        pytest.param(
            Verdict.CDN_MISMATCH, None, AGAINST, {}, True, Q, NO, id="cdn-mismatch-by-hand"
        ),
        pytest.param(Verdict.CDN_MISSING, False, (), {}, True, Q, NO, id="cdn-missing-unverified"),
        pytest.param(INC, None, (), {}, True, Q, FAIL, id="inconclusive-fails-open"),
        pytest.param(INC, None, WARNING_ONLY, {}, True, Q, FAIL, id="warnings-are-no-evidence"),
        pytest.param(INC, None, (), {}, False, Q, NO, id="no-fail-open-outside-gate-mode"),
        pytest.param(INC, None, AGAINST, {}, True, Q, NO, id="evidence-never-fails-open"),
        pytest.param(INC, None, (), {"streak": 1}, True, Q, NO, id="bad-streak-never-fails-open"),
        pytest.param(
            INC,
            None,
            (),
            {},
            True,
            PolicySettings(mode="quarantine", gate_fail_open=False),
            NO,
            id="fail-open-off",
        ),
        pytest.param(U, None, (), {}, True, Q, NO, id="unreachable-never-fails-open"),
        pytest.param(C, False, (), {}, True, Q, FAIL, id="consistent-unverified-fails-open"),
        pytest.param(C, False, (), {}, False, Q, NO, id="unverified-no-gate-mode"),
        pytest.param(C, False, AGAINST, {}, True, Q, NO, id="unverified-with-evidence"),
        pytest.param(M, None, (), {}, True, Q, NO, id="mismatch-never"),
        pytest.param(C, None, (), {"gate": "True"}, True, Q, NO, id="already-open"),
        pytest.param(
            C,
            None,
            (),
            {},
            True,
            PolicySettings(mode="report"),
            NO,
            id="report-mode-writes-nothing",
        ),
        pytest.param(C, None, (), {"quarantined": True}, True, Q, OPEN, id="quarantine-undone"),
        pytest.param(
            C,
            None,
            (),
            {"quarantined": True},
            True,
            PolicySettings(mode="quarantine", release_on_recovery=False),
            NO,
            id="quarantine-kept-by-policy",
        ),
        pytest.param(INC, None, (), {"quarantined": True}, True, Q, NO, id="never-fail-open-out"),
        pytest.param(
            Verdict.CDN_MISMATCH,
            False,
            AGAINST,
            {"quarantined": True},
            True,
            Q,
            NO,
            id="unverified-never-undoes-quarantine",
        ),
        pytest.param(
            C, False, (), {"quarantined": True}, True, Q, NO, id="names-only-never-undoes"
        ),
        pytest.param(
            C,
            None,
            (),
            {"quarantined": True},
            False,
            PolicySettings(mode="quarantine", dry_run=True),
            OPEN,
            id="dry-run-release-keeps-the-quarantine-in-memory",
        ),
        pytest.param(
            C, None, (), {"has_readiness_gate": False}, True, Q, NO, id="no-gate-none-opened"
        ),
    ],
)
def test_gate_opening(
    verdict: Verdict,
    verified: bool | None,
    findings: tuple[Finding, ...],
    kw: dict[str, Any],
    gate_mode: bool,
    policy: PolicySettings,
    expected: str,
) -> None:
    r = result(pod(**kw), verdict, verified=verified, findings=findings)
    d = decide([r], policy=policy, history=History(), now=0, gate_mode=gate_mode)
    releases = [a for a in d.actions if a.kind is ActionKind.RELEASE]
    if expected == NO:
        assert releases == []
        return
    (a,) = releases
    assert a.fail_open is (expected == FAIL) and a.dry_run is policy.dry_run
    assert ("failing open" in a.reason) is (expected == FAIL)  # the actor still reads the text
    if expected == OPEN:
        assert a.reason == "consistent again"
        kept = policy.dry_run and kw.get("quarantined", False)  # dry-run: nothing undone
        assert d.history.instances["pod-0"].quarantined is kept
    if verdict is INC:
        assert a.reason == "verification impossible (dependency down): failing open"


def test_gate_mode_with_the_release_source_down_keeps_the_bad_pod_out() -> None:
    """Only the pod with evidence against it stays out; the clean ones fail open."""
    from artifactcheck.judge.compare import CdnView, compare_fleet
    from artifactcheck.model.values import Expectation, Fetched, Observation

    def got(path: str, sha: str) -> Fetched:
        return Fetched(url=f"http://x/{path}", path=path, status=200, hashes={"sha256": sha})

    good, bad = "a" * 64, "b" * 64
    pods = [pod(f"pod-{n}") for n in range(3)]
    observations = [
        Observation(
            instance=p, manifest_path="artifactcheck.json", assets={"a.js": got("a.js", sha)}
        )
        for p, sha in zip(pods, (good, good, bad), strict=True)
    ]
    results = compare_fleet(
        observations,
        expectations={"1.0": Expectation("1.0", None, error="source down")},
        cdn=CdnView("http://cdn/", {"a.js": got("a.js", good)}),
    )
    assert [r.verdict for r in results] == [INC, INC, Verdict.CDN_MISMATCH]
    d = decide(results, policy=Q, history=History(), now=0, gate_mode=True)
    released = {a.target: a for a in d.actions if a.kind is ActionKind.RELEASE}
    assert set(released) == {"pod-0", "pod-1"}
    assert all(a.fail_open for a in released.values())


def test_release_when_consistent_again() -> None:
    """Quarantined after two mismatches; consistent again, its gate shut: released."""
    history = History()
    for _ in range(2):
        history = decide(fleet([M] + [C] * 9), policy=Q, history=history, now=0).history
    assert history.instances["pod-0"].quarantined
    healed = fleet([C] * 10)
    healed[0] = result(replace(healed[0].instance, gate_status="False"), C)
    d = decide(healed, policy=Q, history=history, now=10)
    assert targets(d, ActionKind.RELEASE) == ["pod-0"]
    assert not d.history.instances["pod-0"].quarantined


def test_a_suspect_expectation_fails_shut_gates_open_by_policy() -> None:
    """Gate mode: when most of the workload disagrees with the expected release, the
    verdicts are what is suspect, so never-verified pods are let in (gate_fail_open)
    or, without it, kept out; never a quarantined, unreachable or open one."""
    results = [
        result(pod("pod-0"), M),
        result(pod("pod-1"), M),
        result(pod("pod-2"), M),
        result(pod("pod-3", quarantined=True), M),
        result(pod("pod-4"), U),
        result(pod("pod-5", gate="True"), M),
        result(pod("pod-6"), C, verified=True),
        result(replace(pod("pod-7"), has_readiness_gate=False), M),
    ]

    def gates(policy: PolicySettings) -> tuple[Decision, Decision]:
        d = decide(results, policy=policy, history=History(), now=0, gate_mode=True)
        return d, fail_open_when_suspect(d, results, policy)

    d, opened = gates(Q)
    assert any(f.kind is FindingKind.SUSPECT_EXPECTATION for f in d.findings)
    assert targets(d, ActionKind.RELEASE) == ["pod-6"]  # decide alone: only the verified one
    assert opened.actions[: len(d.actions)] == d.actions  # appended after decide's own
    extra = opened.actions[len(d.actions) :]
    assert [a.target for a in extra] == ["pod-0", "pod-1", "pod-2"]
    assert all(a.kind is ActionKind.RELEASE and a.fail_open for a in extra)
    assert {a.reason for a in extra} == {SUSPECT_FAIL_OPEN_REASON}
    assert "failing open" in SUSPECT_FAIL_OPEN_REASON  # the actor reads the text
    assert opened.history is d.history and opened.findings == d.findings

    dry = PolicySettings(mode="quarantine", dry_run=True)
    assert all(a.dry_run for a in gates(dry)[1].actions)
    for shut in (
        PolicySettings(mode="quarantine", gate_fail_open=False),
        PolicySettings(mode="report"),
    ):
        d, opened = gates(shut)
        assert opened is d

    plausible = [results[0], *results[4:7]]  # 2 of 4 disagree: not suspect
    d = decide(plausible, policy=Q, history=History(), now=0, gate_mode=True)
    assert fail_open_when_suspect(d, plausible, Q) is d


def test_held_out_of_traffic_is_a_gated_pod_whose_gate_is_shut_and_not_a_quarantine() -> None:
    def pod(name: str, *, gate: bool = True, status: str | None = "False") -> Instance:
        return Instance(
            name=name, base_url="http://127.0.0.2/", has_readiness_gate=gate, gate_status=status
        )

    pods = {
        "waiting": pod("waiting"),
        "unknown": pod("unknown", status=None),
        "open": pod("open", status="True"),
        "ungated": pod("ungated", gate=False),
        "opened-now": pod("opened-now"),
        "quarantined": pod("quarantined"),
    }
    history = History(instances={"quarantined": InstanceState(quarantined=True)})
    held = held_out_of_traffic(pods, opened={"opened-now"}, history=history)
    assert held == {"waiting", "unknown"}
