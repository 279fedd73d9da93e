"""Table tests of the pure safety policy: confirmations, caps, floor, majority, dry-run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from artifactcheck.judge.decide import Decision, History, decide
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    ActionKind,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Severity,
    Verdict,
    VersionSignal,
)


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


def run(verdicts: list[Verdict], cycles: int, policy: PolicySettings, **kw: Any) -> list[Decision]:
    history = History()
    decisions = []
    for cycle in range(cycles):
        d = decide(fleet(verdicts, **kw), policy=policy, history=history, now=1000.0 + 600 * cycle)
        history = d.history
        decisions.append(d)
    return decisions


Q = PolicySettings(mode="quarantine")
M, C, INC, U = Verdict.MISMATCH, Verdict.CONSISTENT, Verdict.INCONCLUSIVE, Verdict.UNREACHABLE


def kinds(d: Decision, kind: ActionKind) -> list[str]:
    return [a.target for a in d.actions if a.kind is kind]


def test_confirmations_before_acting() -> None:
    first, second, third = run([M] + [C] * 9, 3, Q)
    assert kinds(first, ActionKind.QUARANTINE) == []
    assert kinds(second, ActionKind.QUARANTINE) == ["pod-0"]
    assert kinds(second, ActionKind.FLAG) == ["pod-0"]
    assert (
        kinds(third, ActionKind.QUARANTINE) == [] and kinds(third, ActionKind.FLAG) == []
    )  # no repeats


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
        assert kinds(d, ActionKind.QUARANTINE) == [] and kinds(d, ActionKind.FLAG) == []
        history = d.history
    assert history.instances["pod-0"].streak == 1
    # observed again and still mismatching: now confirmed
    d = decide(results, policy=Q, history=history, now=1100.0, observed={"pod-0"})
    assert kinds(d, ActionKind.QUARANTINE) == ["pod-0"]
    # without ``observed`` (verify, one run) every result is a fresh observation
    assert len(run([M] + [C] * 9, 2, Q)[1].actions) > 0
    # a good verdict on the old observation resets the streak all the same
    healed = decide(fleet([C] * 10), policy=Q, history=d1.history, now=1200.0, observed=set())
    assert healed.history.instances["pod-0"].streak == 0


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
        ),
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


# ----------------------------------------------------------------------------- gates


def pod(
    name: str = "pod-0",
    *,
    gate: str | None = None,
    quarantined: bool = False,
    streak: int = 0,
    node: str = "n1",
    image: str = "sha256:fresh",
    owner: str = "web-rs",
) -> Instance:
    notes = {"artifactcheck.io/streak": str(streak)}
    if quarantined:
        notes["artifactcheck.io/quarantined"] = "true"
    return Instance(
        name=name,
        base_url="http://127.0.0.2/",
        kind="pod",
        namespace="shop",
        owner=owner,
        node=node,
        image_id=image,
        signals=(VersionSignal("label", "1.0"),),
        has_readiness_gate=True,
        gate_status="False" if quarantined else gate,
        ready=not quarantined and gate == "True",
        annotations=notes,
    )


def result(
    inst: Instance,
    verdict: Verdict,
    *,
    verified: bool | None = None,
    findings: tuple[Finding, ...] = (),
) -> InstanceResult:
    return InstanceResult(
        inst,
        verdict,
        f"judged {verdict.value}",
        findings=findings,
        reported_version="1.0",
        content_verified=verified,
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
    assert a.fail_open is (expected == FAIL)
    assert ("failing open" in a.reason) is (expected == FAIL)  # the actor still reads the text
    if expected == OPEN:
        assert a.reason == "consistent again"
        assert not d.history.instances["pod-0"].quarantined
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


def test_unflag_only_when_verified() -> None:
    flagged = replace(pod(gate="True"), annotations={"artifactcheck.io/verdict": "mismatch"})
    policy = PolicySettings(mode="flag")
    for verified, unflags in ((True, 1), (None, 1), (False, 0)):
        d = decide([result(flagged, C, verified=verified)], policy=policy, history=History(), now=0)
        assert len([a for a in d.actions if a.kind is ActionKind.UNFLAG]) == unflags
    d = decide([result(flagged, Verdict.DRIFT)], policy=policy, history=History(), now=0)
    assert not [a for a in d.actions if a.kind is ActionKind.UNFLAG]


def test_undoing_is_never_rate_limited() -> None:
    policy = PolicySettings(mode="quarantine", max_actions_per_minute=1)
    history = History(action_times=(0.0, 0.0, 0.0))
    flagged = replace(
        pod(quarantined=True),
        annotations={"artifactcheck.io/quarantined": "true", "artifactcheck.io/verdict": "x"},
    )
    d = decide([result(flagged, C)], policy=policy, history=history, now=1)
    assert {a.kind for a in d.actions} == {ActionKind.RELEASE, ActionKind.UNFLAG}
    assert not any(f.kind is FindingKind.ACTION_HELD for f in d.findings)


def test_rate_limit_window_is_sixty_seconds() -> None:
    policy = PolicySettings(mode="flag", max_actions_per_minute=1, confirmations=1)
    bad = [result(pod("pod-0"), M), *[result(pod(f"pod-{n}"), C) for n in range(1, 6)]]
    held = decide(bad, policy=policy, history=History(action_times=(1.0,)), now=60.9)
    assert not [a for a in held.actions if a.kind is ActionKind.FLAG]
    assert held.history.action_times == (1.0,)
    free = decide(bad, policy=policy, history=History(action_times=(1.0,)), now=61.0)
    assert [a.target for a in free.actions if a.kind is ActionKind.FLAG] == ["pod-0"]
    assert free.history.action_times == (61.0,)


# ---------------------------------------------------------------------------- cordon

CORDON = PolicySettings(mode="flag", confirmations=1, cordon_nodes=True, uncordon_on_recovery=True)


def cordon_policy(**changes: Any) -> PolicySettings:
    return CORDON.model_copy(update=changes)


def stale_fleet(
    *, stale_nodes: tuple[str, ...] = ("n0",), owner: str = "web-rs"
) -> list[InstanceResult]:
    """Pods on n0..n3; pods on the stale nodes run another image and mismatch."""
    out = []
    for n in range(8):
        node = f"n{n % 4}"
        stale = node in stale_nodes
        inst = pod(
            f"pod-{n}",
            gate="True",
            node=node,
            image="sha256:stale" if stale else "sha256:fresh",
            owner=owner,
        )
        out.append(result(inst, M if stale else C))
    return out


def cordons(d: Decision, kind: ActionKind = ActionKind.CORDON) -> list[str]:
    return [a.target for a in d.actions if a.kind is kind]


@pytest.mark.parametrize(
    ("policy", "fleet_kw", "history", "cordoned", "kept", "finding"),
    [
        pytest.param(CORDON, {}, History(), ["n0"], {"n0"}, None, id="stale-node"),
        pytest.param(cordon_policy(cordon_nodes=False), {}, History(), [], set(), None, id="off"),
        pytest.param(cordon_policy(mode="report"), {}, History(), [], set(), None, id="report"),
        pytest.param(cordon_policy(dry_run=True), {}, History(), ["n0"], set(), None, id="dry-run"),
        pytest.param(
            CORDON,
            {"stale_nodes": ("n0", "n1")},
            History(),
            ["n0"],
            {"n0"},
            FindingKind.NODE_SUSPECT,
            id="cap-one",
        ),
        pytest.param(
            cordon_policy(max_cordoned_nodes=2),
            {"stale_nodes": ("n0", "n1")},
            History(),
            ["n0", "n1"],
            {"n0", "n1"},
            None,
            id="cap-two",
        ),
        pytest.param(
            CORDON,
            {},
            History(cordoned=frozenset({"n0"})),
            [],
            {"n0"},
            None,
            id="already-cordoned",
        ),
        pytest.param(
            CORDON,
            {},
            History(cordoned=frozenset({"n9"})),
            [],
            {"n9"},
            FindingKind.NODE_SUSPECT,
            id="cap-counts-what-we-hold",
        ),
        pytest.param(
            cordon_policy(max_actions_per_minute=1),
            {},
            History(action_times=(0.0,)),
            [],
            set(),
            FindingKind.ACTION_HELD,
            id="rate-limited",
        ),
        pytest.param(
            cordon_policy(majority_threshold=0.2),
            {},
            History(),
            [],
            set(),
            FindingKind.SUSPECT_EXPECTATION,
            id="suspect-expectation-cordons-nothing",
        ),
        pytest.param(
            cordon_policy(confirmations=2),
            {},
            History(),
            [],
            set(),
            None,
            id="unconfirmed",
        ),
    ],
)
def test_cordon(
    policy: PolicySettings,
    fleet_kw: dict[str, Any],
    history: History,
    cordoned: list[str],
    kept: set[str],
    finding: FindingKind | None,
) -> None:
    d = decide(stale_fleet(**fleet_kw), policy=policy, history=history, now=1)
    assert cordons(d) == cordoned
    assert all(a.dry_run is policy.dry_run for a in d.actions)
    assert d.history.cordoned == frozenset(kept)
    if finding is not None:
        assert finding in {f.kind for f in d.findings}


def test_cordon_needs_a_consistent_sibling_elsewhere_and_another_image() -> None:
    fleet = stale_fleet(stale_nodes=("n0", "n1", "n2", "n3"))
    policy = cordon_policy(majority_threshold=1.0)
    assert cordons(decide(fleet, policy=policy, history=History(), now=1)) == []
    same_image = [
        replace(r, instance=replace(r.instance, image_id="sha256:fresh")) for r in stale_fleet()
    ]
    assert cordons(decide(same_image, policy=CORDON, history=History(), now=1)) == []
    mixed = stale_fleet()
    mixed[4] = result(replace(mixed[4].instance, image_id="sha256:fresh"), C)  # n0 has a good pod
    assert cordons(decide(mixed, policy=CORDON, history=History(), now=1)) == []


@pytest.mark.parametrize(
    ("policy", "history", "verdicts_ok", "uncordoned", "kept"),
    [
        pytest.param(CORDON, frozenset({"n0"}), True, ["n0"], set(), id="recovered"),
        pytest.param(CORDON, frozenset({"n0"}), False, [], {"n0"}, id="still-stale"),
        pytest.param(CORDON, frozenset(), True, [], set(), id="never-what-we-did-not-cordon"),
        pytest.param(
            cordon_policy(uncordon_on_recovery=False),
            frozenset({"n0"}),
            True,
            [],
            {"n0"},
            id="kept-by-policy",
        ),
        pytest.param(
            cordon_policy(dry_run=True), frozenset({"n0"}), True, ["n0"], {"n0"}, id="dry-run"
        ),
    ],
)
def test_uncordon(
    policy: PolicySettings,
    history: frozenset[str],
    verdicts_ok: bool,
    uncordoned: list[str],
    kept: set[str],
) -> None:
    fleet = stale_fleet(stale_nodes=() if verdicts_ok else ("n0",))
    d = decide(fleet, policy=policy, history=History(cordoned=history), now=1)
    assert cordons(d, ActionKind.UNCORDON) == uncordoned
    assert d.history.cordoned == frozenset(kept)


def test_cordon_and_hold_findings_carry_their_evidence() -> None:
    d = decide(stale_fleet(stale_nodes=("n0", "n1")), policy=CORDON, history=History(), now=1)
    (cordon,) = [a for a in d.actions if a.kind is ActionKind.CORDON]
    assert cordon.reason == (
        "2 pod(s) of 1.0 on n0 serve stale content (image sha256:stale) while 4 elsewhere "
        "are consistent"
    )
    (suspect,) = [f for f in d.findings if f.kind is FindingKind.NODE_SUSPECT]
    assert suspect.severity is Severity.ALERT and suspect.instance is None
    assert suspect.message.startswith("node n1 should be cordoned (2 pod(s) of 1.0 on n1")
    assert suspect.message.endswith("but 1 node(s) are already cordoned by artifactcheck (cap 1)")


def test_cordon_after_a_node_already_held() -> None:
    policy = cordon_policy(max_cordoned_nodes=2)
    history = History(cordoned=frozenset({"n0"}))
    d = decide(stale_fleet(stale_nodes=("n0", "n1")), policy=policy, history=history, now=1)
    assert cordons(d) == ["n1"]
    assert d.history.cordoned == frozenset({"n0", "n1"})


def test_stale_nodes_of_every_version() -> None:
    fleet = stale_fleet()
    other = [  # version 0.9 first in order, nothing to cordon there
        replace(r, reported_version="0.9", instance=replace(r.instance, name=f"old-{i}"))
        for i, r in enumerate(stale_fleet(stale_nodes=()))
    ]
    d = decide(other + fleet, policy=CORDON, history=History(), now=1)
    assert cordons(d) == ["n0"]


def test_a_suspect_workloads_consistent_pod_still_vouches_for_its_node() -> None:
    """Most of api-rs disagrees with its release (its expectation is suspect, so its
    mismatches count for no node), but its one consistent pod on n0 serves the version
    right there: n0 is not the node that is behind, whatever web-rs's pods on it say."""
    api = [
        result(pod(f"api-{n}", gate="True", node=f"n{n + 1}", owner="api-rs"), M) for n in range(2)
    ]
    api.append(result(pod("api-2", gate="True", node="n0", owner="api-rs"), C))
    d = decide(stale_fleet() + api, policy=CORDON, history=History(), now=1)
    assert cordons(d) == []
    assert cordons(decide(stale_fleet() + api[:2], policy=CORDON, history=History(), now=1)) == [
        "n0"
    ]


def test_uncordon_looks_at_the_node_itself() -> None:
    policy = cordon_policy(confirmations=2)  # n0's mismatches are not confirmed yet
    d = decide(stale_fleet(), policy=policy, history=History(cordoned=frozenset({"n0"})), now=1)
    assert cordons(d, ActionKind.UNCORDON) == []
    healed = decide(
        stale_fleet(stale_nodes=()),
        policy=policy,
        history=History(cordoned=frozenset({"n0"})),
        now=1,
    )
    (a,) = [a for a in healed.actions if a.kind is ActionKind.UNCORDON]
    assert (a.target, a.reason) == ("n0", "its pods are consistent again")


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


def test_rate_limit_hold_names_the_instance() -> None:
    policy = PolicySettings(mode="flag", max_actions_per_minute=1, confirmations=1)
    fleet_ = [result(pod(f"pod-{n}", gate="True"), M if n < 2 else C) for n in range(8)]
    d = decide(fleet_, policy=policy, history=History(), now=1)
    (held,) = [f for f in d.findings if f.kind is FindingKind.ACTION_HELD]
    assert (held.instance, held.severity, held.message) == (
        "pod-1",
        Severity.WARNING,
        "rate limit reached: flag of pod-1 postponed",
    )


# ------------------------------------------------------------- counts within a cycle

ONE = PolicySettings(mode="quarantine", confirmations=1)


def one_cycle(results: list[InstanceResult], policy: PolicySettings = ONE, **kw: Any) -> Decision:
    return decide(results, policy=policy, history=kw.pop("history", History()), now=1, **kw)


def quarantined(d: Decision) -> list[str]:
    return [a.target for a in d.actions if a.kind is ActionKind.QUARANTINE]


def test_cap_counts_quarantines_of_the_same_cycle() -> None:
    d = one_cycle([result(pod(f"pod-{n}", gate="True"), M if n < 3 else C) for n in range(10)])
    assert quarantined(d) == ["pod-0", "pod-1"]  # 25% of 10
    (held,) = [f for f in d.findings if f.kind is FindingKind.ACTION_HELD]
    assert (held.instance, held.severity) == ("pod-2", Severity.WARNING)
    assert (
        held.message
        == "pod-2 not quarantined: shop/web-rs already has 2 of 10 quarantined (cap 25%)"
    )


def test_cap_counts_quarantines_already_in_place() -> None:
    fleet_ = [result(pod(f"pod-{n}", gate="True"), M if n < 3 else C) for n in range(8)]
    fleet_[0] = result(pod("pod-0", quarantined=True), M)
    d = one_cycle(fleet_)
    assert quarantined(d) == ["pod-1"]  # 25% of 8 = 2, one already out


@pytest.mark.parametrize(
    ("ready", "bad", "min_ready", "expected"),
    [
        pytest.param([True] * 4, 2, 2, ["pod-0", "pod-1"], id="floor-reached-exactly"),
        pytest.param([True] * 4, 3, 2, ["pod-0", "pod-1"], id="floor-holds-the-third"),
        pytest.param([True, False, False, False], 1, 1, [], id="not-ready-pods-do-not-count"),
        pytest.param([False, True, True, False], 1, 2, ["pod-0"], id="a-pod-not-serving-can-go"),
    ],
)
def test_ready_floor_within_a_cycle(
    ready: list[bool], bad: int, min_ready: int, expected: list[str]
) -> None:
    policy = PolicySettings(
        mode="quarantine",
        confirmations=1,
        max_quarantine_fraction=1.0,
        majority_threshold=1.0,
        min_ready=min_ready,
    )
    fleet_ = [
        result(replace(pod(f"pod-{n}", gate="True"), ready=ok), M if n < bad else C)
        for n, ok in enumerate(ready)
    ]
    d = one_cycle(fleet_, policy)
    assert quarantined(d) == expected
    for f in d.findings:
        assert f.instance is not None and f.severity is Severity.WARNING


def test_not_gated_finding_names_the_pod() -> None:
    bare = replace(pod(gate="True"), has_readiness_gate=False)
    d = one_cycle([result(bare, M), *[result(pod(f"p{n}", gate="True"), C) for n in range(7)]])
    (f,) = [f for f in d.findings if f.kind is FindingKind.NOT_GATED]
    assert (f.instance, f.severity) == ("pod-0", Severity.WARNING)
    assert "pod-0 has no readiness gate artifactcheck.io/content-verified" in f.message


def test_suspect_expectation_is_an_alert_per_workload() -> None:
    web = [result(pod(f"web-{n}", gate="True"), M) for n in range(2)]
    api = [result(pod(f"api-{n}", gate="True", owner="api-rs"), C) for n in range(6)]
    d = one_cycle(web + api, PolicySettings(mode="flag", confirmations=1, majority_threshold=0.5))
    (alert,) = [f for f in d.findings if f.kind is FindingKind.SUSPECT_EXPECTATION]
    assert alert.severity is Severity.ALERT
    assert alert.message.startswith("2 of 2 instances of shop/web-rs disagree")
    assert not [a for a in d.actions if a.kind is ActionKind.FLAG]  # nobody acted on


def test_workloads_are_per_namespace() -> None:
    other_ns = [result(replace(pod(f"o-{n}", gate="True"), namespace="other"), C) for n in range(6)]
    shop = [result(pod(f"s-{n}", gate="True"), M) for n in range(2)]
    d = one_cycle(
        shop + other_ns, PolicySettings(mode="flag", confirmations=1, majority_threshold=0.5)
    )
    assert any(f.kind is FindingKind.SUSPECT_EXPECTATION for f in d.findings)


def loose_pods(bad: int, total: int = 8) -> list[InstanceResult]:
    """Pods without an owner (bare pods, a static fleet), the first ``bad`` mismatching."""
    return [
        result(replace(pod(f"p-{n}", gate="True"), owner=None), M if n < bad else C)
        for n in range(total)
    ]


def test_pods_without_owner_form_one_fleet_for_the_majority_rule() -> None:
    """5 of 8 ownerless pods disagree: as one fleet, the expectation is the suspect and
    nobody is flagged; as eight one-pod workloads, each would be flagged."""
    d = one_cycle(loose_pods(5), PolicySettings(mode="flag", confirmations=1))
    (alert,) = [f for f in d.findings if f.kind is FindingKind.SUSPECT_EXPECTATION]
    assert alert.message.startswith("5 of 8 instances of (fleet) disagree"), alert.message
    assert not [a for a in d.actions if a.kind is ActionKind.FLAG]


def test_pods_without_owner_form_one_fleet_for_the_cap() -> None:
    """3 of 8 mismatch, under the majority: the 25% cap of one fleet of 8 lets two be
    quarantined (as eight workloads of one, the cap of each would be 0)."""
    policy = PolicySettings(mode="quarantine", confirmations=1, majority_threshold=0.5)
    d = one_cycle(loose_pods(3), policy)
    assert quarantined(d) == ["p-0", "p-1"]
    (held,) = [f for f in d.findings if f.kind is FindingKind.ACTION_HELD]
    assert "(fleet) already has 2 of 8 quarantined" in held.message, held.message


@pytest.mark.parametrize(
    ("policy", "verified", "unflagged", "still_flagged"),
    [
        pytest.param(PolicySettings(mode="flag"), True, True, False, id="unflagged"),
        pytest.param(PolicySettings(mode="flag", dry_run=True), True, True, True, id="dry-run"),
        pytest.param(PolicySettings(mode="report"), True, False, True, id="report"),
        pytest.param(PolicySettings(mode="flag"), False, False, True, id="unverified"),
    ],
)
def test_unflag_state(
    policy: PolicySettings, verified: bool, unflagged: bool, still_flagged: bool
) -> None:
    flagged = replace(pod(gate="True"), annotations={"artifactcheck.io/verdict": "mismatch"})
    d = one_cycle([result(flagged, C, verified=verified)], policy)
    acts = [a for a in d.actions if a.kind is ActionKind.UNFLAG]
    assert bool(acts) is unflagged
    if acts:
        assert acts[0].reason == "consistent again"
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
    assert quarantined(d) == []
    assert any("rate limit reached: quarantine of new" in f.message for f in d.findings)
    fresh = one_cycle([*old, *new, *clean], policy)
    assert quarantined(fresh) == ["new"]
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
    from artifactcheck.judge.decide import InstanceState, recover_state

    inst = replace(pod(), gate_status=gate, annotations=notes)
    assert recover_state(result(inst, C)) == InstanceState(
        streak=streak, quarantined=quarantined, flagged=flagged, inherited_flag=flagged
    )


def test_a_suspect_expectation_fails_shut_gates_open_by_policy() -> None:
    """Gate mode: when most of the workload disagrees with the expected release, the
    verdicts are what is suspect, so never-verified pods are let in (gate_fail_open)
    or, without it, kept out; never a quarantined, unreachable or open one."""
    from artifactcheck.judge.decide import SUSPECT_FAIL_OPEN_REASON, fail_open_when_suspect

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
    assert kinds(d, ActionKind.RELEASE) == ["pod-6"]  # decide alone: only the verified one
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
    from artifactcheck.judge.decide import InstanceState, held_out_of_traffic

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
