"""Release pins in the controller: the silent rebuild caught in the cluster.

The outage: a release rebuilt under the same version, its release manifest (here a
release ConfigMap) rebuilt too, and new pods serving the rebuilt bytes. Every pod
agrees with the new manifest, so without pins their gates open. With
``releasePins: true`` the controller pins each version's first manifest in the
ArtifactCheck's status; the rebuilt one is ``ReleaseChanged`` (one Warning Event, not
one per cycle), the version's pods are inconclusive and no gate opens on its account
(gate mode fails open on inconclusive: that is what must not happen here) until a
release approver creates a ReleaseAcceptance. The pins live in a ConfigMap of the
controller's namespace (``artifactcheck-system`` here, not the check's ``shop``): they
survive a restart, a leader change, and the check's author deleting and re-creating
the check; the accept annotation, which that author can set, accepts nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from artifactcheck.control.release_pins import ANN_ACCEPT_RELEASE, PINS_KEY, store_name
from artifactcheck.manifests import native
from artifactcheck.model.names import ACCEPTANCE_KIND, CRD_API_VERSION, CRD_KIND
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.running import RunningController

LABEL = "artifactcheck.io/release-manifests"
SELECTOR = f"{LABEL}=true"
CM = "web-release-1-4-2"
#: The controller's own namespace: where the pins are kept (the checks are in "shop").
HOME = "artifactcheck-system"
STORE = store_name("shop", "web")
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
        knownVersions=[],
        release={"configMaps": {"selector": SELECTOR}},
        releasePins=True,
        policy={"mode": "quarantine", "confirmations": 1, **policy},
    )


def controller(cluster: SimCluster, **settings: Any) -> RunningController:
    return RunningController(cluster, admin=cluster.lab_admin(), lease_namespace=HOME, **settings)


def store(cluster: SimCluster) -> dict[str, Any] | None:
    """The pins ConfigMap of check shop/web, in the controller's namespace."""
    return cluster.api.get("v1", "ConfigMap", HOME, STORE)


def stored_pins(cluster: SimCluster) -> dict[str, Any]:
    cm = store(cluster) or {}
    doc = json.loads((cm.get("data") or {}).get(PINS_KEY) or "{}")
    return {p["version"]: p for p in doc.get("releasePins") or []}


def accept(cluster: SimCluster, name: str, version: str, digest: str | None) -> None:
    """What a release approver does: create a ReleaseAcceptance naming the check."""
    spec: dict[str, Any] = {"check": "web", "version": version}
    if digest is not None:
        spec["sha256"] = digest
    cluster.api.create(
        {
            "apiVersion": CRD_API_VERSION,
            "kind": ACCEPTANCE_KIND,
            "metadata": {"name": name, "namespace": "shop"},
            "spec": spec,
        }
    )


def acceptance_status(cluster: SimCluster, name: str) -> dict[str, Any]:
    obj = cluster.api.get(CRD_API_VERSION, ACCEPTANCE_KIND, "shop", name) or {}
    return dict(obj.get("status") or {})


def check_events(cluster: SimCluster, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.events("web")
        if e.get("involvedObject", {}).get("kind") == CRD_KIND and e["reason"] == reason
    ]


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
        assert "ReleaseAcceptance naming check web -n shop, version 1.4.2" in cond["message"]
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

        # accepted on purpose, by a release approver: a ReleaseAcceptance
        accept(cluster, "rebuild-1-4-2", "1.4.2", sha(rebuilt))
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in new), timeout=20)
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "False")
        status = cluster.check_status()
        assert pins(cluster)["1.4.2"] == {
            "version": "1.4.2",
            "pinned": {**pins(cluster)["1.4.2"]["pinned"], "sha256": sha(rebuilt)},
        }
        assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(rebuilt)
        (accepted,) = status["acceptedReleases"]
        assert accepted["version"] == "1.4.2" and accepted["sha256"] == sha(rebuilt)
        assert accepted["by"] == "ReleaseAcceptance shop/rebuild-1-4-2"
        wait_for(lambda: acceptance_status(cluster, "rebuild-1-4-2").get("phase") == "Accepted")
        assert acceptance_status(cluster, "rebuild-1-4-2")["sha256"] == sha(rebuilt)
        (normal,) = wait_for(lambda: check_events(cluster, "ReleaseAccepted"))
        assert normal["type"] == "Normal" and sha(rebuilt) in normal["message"]
        assert "ReleaseAcceptance shop/rebuild-1-4-2" in normal["message"]
        cycles_pass(ctl, 3)
        assert len(cluster.check_status()["acceptedReleases"]) == 1, "recorded once"
        assert len(check_events(cluster, "ReleaseAccepted")) == 1
        assert check_events(cluster, "ReleaseAccepted")[0].get("count", 1) == 1
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


def test_the_accept_annotation_accepts_nothing(cluster: SimCluster) -> None:
    """Whoever edits the check can set the annotation, naming the very digest the
    condition names: a Warning Event saying what to create instead, the annotation
    removed, the pin and the held gates unchanged."""
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, original)
    cluster.add_pod()
    add_check(cluster)
    with controller(cluster) as ctl:
        wait_for(lambda: pins(cluster).get("1.4.2"), timeout=20)
        publish(cluster, rebuilt)
        late = cluster.add_pod(serves="1.4.1")
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        cluster.api.patch(
            CRD_API_VERSION,
            CRD_KIND,
            "shop",
            "web",
            {"metadata": {"annotations": {ANN_ACCEPT_RELEASE: f"1.4.2@sha256:{sha(rebuilt)}"}}},
        )
        (refused,) = wait_for(lambda: check_events(cluster, "ReleaseAcceptRefused"), timeout=20)
        assert "accepts nothing" in refused["message"]
        assert "ReleaseAcceptance" in refused["message"]
        wait_for(
            lambda: (
                ANN_ACCEPT_RELEASE
                not in (cluster.api.get(CRD_API_VERSION, CRD_KIND, "shop", "web") or {})
                .get("metadata", {})
                .get("annotations", {})
            ),
            timeout=20,
        )
        cycles_pass(ctl, 4)
        assert gate(cluster, late.name) is None, "the gate stays closed"
        assert condition(cluster, "ReleaseChanged")["status"] == "True"
    assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
    assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
    assert not cluster.check_status().get("acceptedReleases")
    assert not check_events(cluster, "ReleaseAccepted")


def test_a_recreated_check_finds_its_pins_and_no_gate_opens(cluster: SimCluster) -> None:
    """The attack: after ReleaseChanged=True the check's author deletes the check and
    creates it again (its status, with the pins, is gone). The pins are the store's:
    the rebuilt release is a change again, not pinned as first seen, and no gate opens."""
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, original)
    cluster.add_pod()
    add_check(cluster)
    with controller(cluster) as ctl:
        wait_for(lambda: stored_pins(cluster).get("1.4.2"), timeout=20)
        publish(cluster, rebuilt)
        late = cluster.add_pod(serves="1.4.1")
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        assert cluster.check_status()["releasePinsStore"] == f"{HOME}/{STORE}"

        cluster.api.delete(CRD_API_VERSION, CRD_KIND, "shop", "web")
        wait_for(lambda: "shop/web" not in ctl.controller.checks)
        add_check(cluster)
        assert not cluster.check_status(), "a new object: no status, no pins in it"
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        assert pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
        assert pins(cluster)["1.4.2"]["changed"]["sha256"] == sha(rebuilt)
        more = cluster.add_pod(serves="1.4.1")
        cycles_pass(ctl, 6)
        assert [gate(cluster, p.name) for p in (late, more)] == [None, None], "never opened"
    assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)


def test_erasing_the_store_is_the_admin_s_act_and_is_recorded(cluster: SimCluster) -> None:
    """Deleting the pins ConfigMap (a right only the admin has) erases the pins: a
    Warning Event says so and names the versions forgotten; the store is written again
    from what is pinned next."""
    publish(cluster, manifest("1.4.2"))
    cluster.add_pod()
    add_check(cluster)
    with controller(cluster):
        wait_for(lambda: stored_pins(cluster).get("1.4.2"), timeout=20)
        cluster.api.delete("v1", "ConfigMap", HOME, STORE)
        (erased,) = wait_for(lambda: check_events(cluster, "ReleasePinsErased"), timeout=20)
        assert erased["type"] == "Warning"
        assert f"{HOME}/{STORE}" in erased["message"] and "1.4.2" in erased["message"]
        wait_for(lambda: "1.4.2" not in pins(cluster), timeout=20)


def test_pins_in_an_old_status_are_carried_into_the_store_once(cluster: SimCluster) -> None:
    """A check whose pins were kept in its status (no store named there): they are
    written into the store, and the release rebuilt since is still a change."""
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, rebuilt)
    cluster.add_pod(serves="1.4.1")
    add_check(cluster)
    old = {
        "version": "1.4.2",
        "pinned": {
            "sha256": sha(original),
            "source": "configmap shop/x",
            "at": "2026-01-01T00:00:00Z",
        },
    }
    cluster.api.patch_status(
        CRD_API_VERSION, CRD_KIND, "shop", "web", {"status": {"releasePins": [old]}}
    )
    assert store(cluster) is None
    with controller(cluster):
        wait_for(lambda: stored_pins(cluster).get("1.4.2"), timeout=20)
        assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(original)
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        assert stored_pins(cluster)["1.4.2"]["changed"]["sha256"] == sha(rebuilt)


def test_an_acceptance_without_a_digest_adopts_only_a_recorded_change(
    cluster: SimCluster,
) -> None:
    """No digest and no change recorded: Refused, with a Warning Event, no record (and
    not acted on again later); no digest and one change recorded: that one adopted."""
    publish(cluster, manifest("1.4.2"))
    cluster.add_pod()
    add_check(cluster)
    with controller(cluster):
        wait_for(lambda: stored_pins(cluster).get("1.4.2"), timeout=20)
        accept(cluster, "too-soon", "1.4.2", None)
        wait_for(lambda: acceptance_status(cluster, "too-soon").get("phase") == "Refused")
        assert "no changed release" in acceptance_status(cluster, "too-soon")["message"]
        (refused,) = wait_for(lambda: check_events(cluster, "ReleaseAcceptRefused"))
        assert "ReleaseAcceptance shop/too-soon" in refused["message"]
        assert not cluster.check_status().get("acceptedReleases")
        assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(manifest("1.4.2"))
        # one change recorded: an acceptance without a digest adopts it
        publish(cluster, manifest("1.4.1"))
        cluster.add_pod(serves="1.4.1")
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        accept(cluster, "the-one", "1.4.2", None)
        wait_for(lambda: acceptance_status(cluster, "the-one").get("phase") == "Accepted")
        assert acceptance_status(cluster, "the-one")["sha256"] == sha(manifest("1.4.1"))
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "False")
    assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(manifest("1.4.1"))
    assert acceptance_status(cluster, "too-soon")["phase"] == "Refused", "acted on once"


def test_an_acceptance_whose_status_write_fails_is_recorded_once(cluster: SimCluster) -> None:
    """The acceptance's status is written last: when that write fails, it is tried
    again, and the release is not accepted (nor recorded, nor announced) twice."""
    original, rebuilt = manifest("1.4.2"), manifest("1.4.1")
    publish(cluster, original)
    cluster.add_pod()
    add_check(cluster)
    with controller(cluster):
        wait_for(lambda: stored_pins(cluster).get("1.4.2"), timeout=20)
        publish(cluster, rebuilt)
        cluster.add_pod(serves="1.4.1")
        wait_for(lambda: condition(cluster, "ReleaseChanged").get("status") == "True", timeout=20)
        cluster.api.inject("PATCH", r"/releaseacceptances/rebuild/status", 500, times=2)
        accept(cluster, "rebuild", "1.4.2", sha(rebuilt))
        wait_for(
            lambda: acceptance_status(cluster, "rebuild").get("phase") == "Accepted", timeout=20
        )
        assert stored_pins(cluster)["1.4.2"] == {
            "version": "1.4.2",
            "pinned": {**stored_pins(cluster)["1.4.2"]["pinned"], "sha256": sha(rebuilt)},
        }
        wait_for(lambda: len(cluster.check_status().get("acceptedReleases") or []) == 1)
    status = cluster.check_status()
    assert [a["by"] for a in status["acceptedReleases"]] == ["ReleaseAcceptance shop/rebuild"]
    (normal,) = check_events(cluster, "ReleaseAccepted")
    assert normal.get("count", 1) == 1, "announced once"


def test_a_store_that_holds_no_pins_stops_the_check_until_the_admin_acts(
    cluster: SimCluster,
) -> None:
    """A pins ConfigMap edited into something else is not taken for "no pins" (the
    rebuilt release would then be pinned as first seen): the check does not run, so no
    gate opens, until the admin restores or deletes it."""
    publish(cluster, manifest("1.4.2"))
    pod = cluster.add_pod()
    cluster.api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": STORE, "namespace": HOME},
            "data": {PINS_KEY: "edited by hand"},
        }
    )
    add_check(cluster)
    with controller(cluster) as ctl:
        wait_for(lambda: "shop/web" in ctl.controller.checks and ctl.controller.is_leader)
        time.sleep(2)
        assert ctl.controller.cycles_completed == 0
        assert gate(cluster, pod.name) is None and not cluster.check_status()
        cluster.api.delete("v1", "ConfigMap", HOME, STORE)  # the admin erases
        wait_for(lambda: stored_pins(cluster).get("1.4.2"), timeout=30)
        assert stored_pins(cluster)["1.4.2"]["pinned"]["sha256"] == sha(manifest("1.4.2"))
        wait_for(lambda: gate(cluster, pod.name) == "True", timeout=20)
