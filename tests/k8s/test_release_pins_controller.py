"""Release pins in the controller: the silent rebuild caught in the cluster.

The outage: a release rebuilt under the same version, its release manifest (here a
release ConfigMap) rebuilt too, and new pods serving the rebuilt bytes. Every pod
agrees with the new manifest, so without pins their gates open. With
``releasePins: true`` the controller pins each version's first manifest in the
ArtifactCheck's status; the rebuilt one is ``ReleaseChanged`` (one Warning Event, not
one per cycle), the version's pods are inconclusive and no gate opens on its account
(gate mode fails open on inconclusive: that is what must not happen here) until the
change is accepted with ``kubectl annotate ... artifactcheck.io/accept-release=``. The
pins survive a restart: a new controller reads them from the status.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from artifactcheck.control.release_pins import ANN_ACCEPT_RELEASE
from artifactcheck.manifests import native
from artifactcheck.model.names import CRD_API_VERSION, CRD_KIND
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.running import RunningController

LABEL = "artifactcheck.io/release-manifests"
SELECTOR = f"{LABEL}=true"
CM = "web-release-1-4-2"
_net = itertools.count(1)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    n = next(_net)
    with SimCluster(first_host=f"127.83.{n}.1", cdn_host=f"127.83.{200 + n}.1") as c:
        yield c


def manifest(build: str) -> str:
    """The release manifest of ``build``'s bytes, declaring version 1.4.2."""
    return native.dump(native.build(RELEASES[build], version="1.4.2")).decode()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def publish(cluster: SimCluster, text: str) -> None:
    """Create or rebuild the release ConfigMap of 1.4.2."""
    cm = cluster.api.get("v1", "ConfigMap", "shop", CM)
    if cm is None:
        cluster.api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": CM,
                    "namespace": "shop",
                    "labels": {LABEL: "true", "artifactcheck.io/version": "1.4.2"},
                },
                "data": {"manifest.json": text},
            }
        )
    else:
        cm["data"] = {"manifest.json": text}
        cluster.api.update(cm)


def add_check(cluster: SimCluster, **policy: Any) -> None:
    cluster.add_check(
        interval=0.3,
        cdn=None,
        releaseManifest=[],
        knownVersions=[],
        releaseConfigMaps={"selector": SELECTOR},
        releasePins=True,
        policy={"mode": "quarantine", "confirmations": 1, **policy},
    )


def controller(cluster: SimCluster) -> RunningController:
    return RunningController(cluster, admin=cluster.lab_admin())


def gate(cluster: SimCluster, name: str) -> str | None:
    c = cluster.condition(name)
    return c["status"] if c else None


def condition(cluster: SimCluster, kind: str) -> dict[str, Any]:
    for c in cluster.check_status().get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return {}


def pins(cluster: SimCluster) -> dict[str, Any]:
    return {p["version"]: p for p in cluster.check_status().get("releasePins") or []}


def release_events(cluster: SimCluster) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.events("web")
        if e.get("involvedObject", {}).get("kind") == CRD_KIND and e["reason"] == "ReleaseChanged"
    ]


def cycles_pass(ctl: RunningController, n: int) -> None:
    """Wait until ``n`` more cycles ended (counted, not timed)."""
    start = ctl.controller.cycles_completed
    wait_for(lambda: ctl.controller.cycles_completed >= start + n, timeout=30)


def test_the_silent_rebuild_is_caught_held_then_accepted(cluster: SimCluster) -> None:
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, original)
    first = [cluster.add_pod() for _ in range(2)]
    add_check(cluster)
    with controller(cluster) as ctl:
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in first), timeout=20)
        wait_for(lambda: pins(cluster).get("1.4.2", {}).get("pinned", {}).get("sha256"))
        assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
        assert condition(cluster, "ReleaseChanged")["status"] == "False"
        unchanged_since = condition(cluster, "ReleaseChanged")["lastTransitionTime"]

        # the rebuild: the release ConfigMap and new pods, all agreeing with each other
        publish(cluster, rebuilt)
        new = [cluster.add_pod(serves="1.4.1") for _ in range(2)]
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        cond = condition(cluster, "ReleaseChanged")
        assert sha(rebuilt) in cond["message"] and sha(original) in cond["message"]
        assert f"{ANN_ACCEPT_RELEASE}=1.4.2@sha256:{sha(rebuilt)}" in cond["message"]
        changed_at = cond["lastTransitionTime"]
        assert changed_at >= unchanged_since
        assert pins(cluster)["1.4.2"]["changed"]["sha256"] == sha(rebuilt)
        assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original), "never adopted"
        wait_for(lambda: (cluster.check_status().get("counts") or {}).get("inconclusive") == 4)
        cycles_pass(ctl, 6)
        # gate mode fails open on inconclusive: not on account of a changed release
        assert [gate(cluster, p.name) for p in new] == [None, None], "never opened"
        assert all(gate(cluster, p.name) == "True" for p in first), "nobody quarantined"
        assert cluster.check_status()["counts"]["inconclusive"] == 4
        # one Warning Event for the change, not one per cycle
        (event,) = release_events(cluster)
        assert event["type"] == "Warning" and event.get("count", 1) == 1
        assert sha(rebuilt) in event["message"]
        assert condition(cluster, "ReleaseChanged")["lastTransitionTime"] == changed_at

        # accepted on purpose: kubectl annotate artifactcheck web accept-release=...
        cluster.api.patch(
            CRD_API_VERSION,
            CRD_KIND,
            "shop",
            "web",
            {"metadata": {"annotations": {ANN_ACCEPT_RELEASE: f"1.4.2@sha256:{sha(rebuilt)}"}}},
        )
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in new), timeout=20)
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "False")
        status = cluster.check_status()
        assert pins(cluster)["1.4.2"] == {
            "version": "1.4.2",
            "pinned": {**pins(cluster)["1.4.2"]["pinned"], "sha256": sha(rebuilt)},
        }
        (accepted,) = status["acceptedReleases"]
        assert accepted["version"] == "1.4.2" and accepted["sha256"] == sha(rebuilt)
        obj = wait_for(
            lambda: (
                o
                if ANN_ACCEPT_RELEASE
                not in ((o := cluster.api.get(CRD_API_VERSION, CRD_KIND, "shop", "web")) or {})
                .get("metadata", {})
                .get("annotations", {})
                else None
            )
        )
        assert obj is not None, "the annotation is removed once recorded"
        cycles_pass(ctl, 3)
        assert len(status["acceptedReleases"]) == 1
        assert len(cluster.check_status()["acceptedReleases"]) == 1, "recorded once"
        assert len(release_events(cluster)) == 1


def test_pins_survive_a_restart_and_the_change_is_announced_once(cluster: SimCluster) -> None:
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, original)
    cluster.add_pod()
    add_check(cluster)
    with controller(cluster):
        wait_for(lambda: pins(cluster).get("1.4.2"), timeout=20)
    # rebuilt while no controller runs: the next one never saw the original bytes
    publish(cluster, rebuilt)
    late = cluster.add_pod(serves="1.4.1")
    with controller(cluster) as ctl:
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
        wait_for(lambda: len(release_events(cluster)) == 1)
        cycles_pass(ctl, 4)
        assert gate(cluster, late.name) is None
    # and a third controller, with the change already announced: no second Event
    with controller(cluster) as ctl:
        cycles_pass(ctl, 4)
        assert condition(cluster, "ReleaseChanged")["status"] == "True"
        assert gate(cluster, late.name) is None
    (event,) = release_events(cluster)
    assert event.get("count", 1) == 1


def test_a_standby_that_takes_over_keeps_the_leader_s_pins(cluster: SimCluster) -> None:
    """The standby saw the check before any pin existed; it follows the leader's status,
    so after the leader goes, a rebuild is still a change for the new leader."""
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, original)
    cluster.add_pod()
    add_check(cluster)
    a = RunningController(cluster, identity="ctl-a", admin=cluster.lab_admin()).start()
    b = RunningController(cluster, identity="ctl-b", admin=cluster.lab_admin()).start()
    try:
        wait_for(lambda: a.controller.is_leader or b.controller.is_leader, timeout=10)
        leader, standby = (a, b) if a.controller.is_leader else (b, a)
        wait_for(lambda: pins(cluster).get("1.4.2"), timeout=20)
        assert standby.controller.cycles_completed == 0
        leader.stop()
        wait_for(lambda: standby.controller.is_leader, timeout=30)
        publish(cluster, rebuilt)
        late = cluster.add_pod(serves="1.4.1")
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
        cycles_pass(standby, 4)
        assert gate(cluster, late.name) is None
    finally:
        for r in (a, b):
            if r._thread.is_alive():
                r.stop()


def test_a_bad_accept_annotation_is_a_warning_and_is_removed(cluster: SimCluster) -> None:
    publish(cluster, manifest("1.4.2"))
    cluster.add_pod()
    add_check(cluster)
    with controller(cluster):
        wait_for(lambda: pins(cluster).get("1.4.2"), timeout=20)
        cluster.api.patch(
            CRD_API_VERSION,
            CRD_KIND,
            "shop",
            "web",
            {"metadata": {"annotations": {ANN_ACCEPT_RELEASE: "1.4.2@sha256:nothex"}}},
        )
        refused = wait_for(
            lambda: [e for e in cluster.events("web") if e["reason"] == "ReleaseAcceptRefused"],
            timeout=20,
        )
        assert "64 lowercase hex" in refused[0]["message"]
        wait_for(
            lambda: (
                ANN_ACCEPT_RELEASE
                not in (cluster.api.get(CRD_API_VERSION, CRD_KIND, "shop", "web") or {})
                .get("metadata", {})
                .get("annotations", {})
            ),
            timeout=20,
        )
    assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(manifest("1.4.2"))
    assert not cluster.check_status().get("acceptedReleases")
