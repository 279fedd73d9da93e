"""The policy's last step: nodes cordoned, and uncordoned (judge/decide.py).

A node whose pods of a version serve stale content (another image) while that version
is consistent elsewhere is cordoned, within a cap and the rate limit, never for a
workload whose expectation is suspect; a node artifactcheck cordoned is uncordoned, by
policy, once every pod on it is consistent again.
"""

from __future__ import annotations

from typing import Any

import pytest
from policy_support import INC, C, M, pod, result

from artifactcheck.judge.decide import Decision, History, decide
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import ActionKind, FindingKind, InstanceResult, Severity

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


STALE, CONSISTENT, ONE_UNKNOWN = "stale", "consistent", "one-inconclusive"


def on_n0(pods: str) -> list[InstanceResult]:
    """The stale fleet with n0's pods stale, consistent, or consistent but for one
    inconclusive pod."""
    fleet = stale_fleet(stale_nodes=("n0",) if pods == STALE else ())
    if pods == ONE_UNKNOWN:
        fleet[4] = result(fleet[4].instance, INC)  # pod-4 is on n0
    return fleet


@pytest.mark.parametrize(
    ("policy", "history", "pods", "uncordoned", "kept"),
    [
        pytest.param(CORDON, frozenset({"n0"}), CONSISTENT, ["n0"], set(), id="recovered"),
        pytest.param(CORDON, frozenset({"n0"}), STALE, [], {"n0"}, id="still-stale"),
        pytest.param(
            CORDON, frozenset({"n0"}), ONE_UNKNOWN, [], {"n0"}, id="all-its-pods-consistent"
        ),
        pytest.param(CORDON, frozenset(), CONSISTENT, [], set(), id="never-what-we-did-not-cordon"),
        pytest.param(
            cordon_policy(uncordon_on_recovery=False),
            frozenset({"n0"}),
            CONSISTENT,
            [],
            {"n0"},
            id="kept-by-policy",
        ),
        pytest.param(
            cordon_policy(dry_run=True), frozenset({"n0"}), CONSISTENT, ["n0"], {"n0"}, id="dry-run"
        ),
    ],
)
def test_uncordon(
    policy: PolicySettings,
    history: frozenset[str],
    pods: str,
    uncordoned: list[str],
    kept: set[str],
) -> None:
    d = decide(on_n0(pods), policy=policy, history=History(cordoned=history), now=1)
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
