"""The previous release in the controller: a rollout's skew window, on the fake API server.

The workload runs 1.4.1, then rolls out to 1.4.2. The simulated CDN holds only 1.4.2's
files: pages opened on 1.4.1 now ask it for files it lacks. For ``skewWindow`` after
1.4.2 first appears, the check's ``PreviousReleaseServed`` condition is False naming
those files, with one Warning Event (not one per cycle); a CDN that kept them is True;
once the window has passed the condition says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from artifactcheck.model.names import CRD_KIND
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.running import RunningController

#: 1.4.1's (vite-r1) hashed files that 1.4.2 (vite-r2) no longer has.
ONLY_141 = ["assets/index-Bfu9pp8v.js", "assets/index-CQbHzygI.css", "assets/report-50WvgzG_.js"]
_net = itertools.count(1)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    n = next(_net)
    with SimCluster(first_host=f"127.84.{n}.1", cdn_host=f"127.84.{200 + n}.1") as c:
        yield c


def condition(cluster: SimCluster) -> dict[str, Any]:
    for c in cluster.check_status().get("conditions") or []:
        if c["type"] == "PreviousReleaseServed":
            return dict(c)
    return {}


def warnings(cluster: SimCluster) -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.events("web")
        if e.get("involvedObject", {}).get("kind") == CRD_KIND
        and e["reason"] == "PreviousReleaseMissing"
    ]


def cycles_pass(ctl: RunningController, n: int) -> None:
    start = ctl.controller.cycles_completed
    wait_for(lambda: ctl.controller.cycles_completed >= start + n, timeout=30)


def roll_out(cluster: SimCluster, ctl: RunningController) -> None:
    """1.4.1 pods seen by a cycle, then replaced by 1.4.2 pods."""
    old = [cluster.add_pod(version="1.4.1", replicaset="web-141") for _ in range(2)]
    wait_for(lambda: sum((cluster.check_status().get("counts") or {}).values()) == 2, timeout=20)
    cycles_pass(ctl, 1)
    for _ in range(2):
        cluster.add_pod(version="1.4.2", replicaset="web-142")
    for pod in old:
        cluster.delete_pod(pod.name)


def test_the_cdn_without_the_replaced_release_is_named_for_the_skew_window(
    cluster: SimCluster,
) -> None:
    cluster.add_check(interval=0.3)
    with RunningController(cluster, admin=cluster.lab_admin()) as ctl:
        roll_out(cluster, ctl)
        wait_for(lambda: condition(cluster).get("status") == "False", timeout=30)
        cond = condition(cluster)
        assert cond["reason"] == "PreviousReleaseMissing"
        assert "1.4.1" in cond["message"] and cluster.cdn_url in cond["message"]
        assert all(path in cond["message"] for path in ONLY_141)
        (event,) = wait_for(lambda: warnings(cluster))
        assert event["type"] == "Warning" and ONLY_141[0] in event["message"]
        cycles_pass(ctl, 4)
        assert len(warnings(cluster)) == 1 and warnings(cluster)[0].get("count", 1) == 1
        assert condition(cluster)["lastTransitionTime"] == cond["lastTransitionTime"]


def test_a_cdn_that_kept_the_replaced_release_is_true_then_the_window_ends(
    cluster: SimCluster,
) -> None:
    r1 = RELEASES["1.4.1"]
    cluster.cdn_site.overrides.update({p: (r1 / p).read_bytes() for p in ONLY_141})
    cluster.add_check(interval=0.3, skewWindow=4)
    with RunningController(cluster, admin=cluster.lab_admin()) as ctl:
        roll_out(cluster, ctl)
        wait_for(lambda: condition(cluster).get("reason") == "PreviousReleaseServed", timeout=30)
        cond = condition(cluster)
        assert cond["status"] == "True" and "1.4.1" in cond["message"]
        wait_for(lambda: condition(cluster).get("reason") == "OutsideSkewWindow", timeout=30)
        assert condition(cluster)["status"] == "True"
        assert warnings(cluster) == []
