"""The controller against a failing API server, and killed in the middle of its work.

docs/architecture.md ("Behaving well under failure"): "A dependency outage degrades to
inconclusive with a clear reason;
the controller keeps running and keeps its last state." Each test runs a real
controller (its own thread and loop) against the fake API server over HTTP, with pods
served by loopback servers: four healthy pods and one that really drifted. The fault
is injected while the controller works; afterwards the drifted pod is quarantined,
with exactly one Warning Event, no healthy pod's gate is False, and the controller
left no task, socket or thread behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from faults_support import Recorder

from artifactcheck_sim.cluster import SimCluster, SimPod, wait_for
from artifactcheck_sim.running import RunningController
from artifactcheck_sim.web import Delay, Status

POLICY = {"mode": "quarantine", "confirmations": 2, "maxQuarantineFraction": 0.5}
RELATED_410 = "tests/k8s/test_controller.py::test_api_server_restart_and_410_recovered"


@pytest.fixture
def cluster(subnet: int) -> Iterator[SimCluster]:
    with SimCluster(first_host=f"127.97.{subnet}.1", cdn_host=f"127.98.{subnet}.1") as c:
        yield c


def gate(cluster: SimCluster, pod: SimPod) -> str | None:
    c = cluster.condition(pod.name)
    return c["status"] if c else None


def warnings(cluster: SimCluster, pod: SimPod) -> int:
    return len([e for e in cluster.events(pod.name) if e.get("type") == "Warning"])


def planted(cluster: SimCluster, healthy: int = 4) -> tuple[list[SimPod], SimPod]:
    pods = [cluster.add_pod() for _ in range(healthy)]
    return pods, cluster.add_pod(serves="1.4.1")


def converged(cluster: SimCluster, pods: list[SimPod], bad: SimPod, *, timeout: float = 20) -> None:
    """Wait until the drifted pod is quarantined and every healthy pod verified."""
    wait_for(
        lambda: gate(cluster, bad) == "False" and all(gate(cluster, p) == "True" for p in pods),
        timeout=timeout,
    )


def stop(rec: Recorder, ctl: RunningController) -> None:
    """Stop the controller and count the tasks its loop still held."""
    ctl.stop()
    rec.leaked_tasks = len(asyncio.all_tasks(ctl._loop))


@contextlib.contextmanager
def controller(cluster: SimCluster, rec: Recorder, **kwargs: Any) -> Iterator[RunningController]:
    """A controller on ``cluster`` under the probe; stopped, and its leftovers counted."""
    with rec.probe(memory="rss", collect=True):
        ctl = RunningController(cluster, admin=cluster.lab_admin(), **kwargs).start()
        try:
            yield ctl
        finally:
            stop(rec, ctl)


def judge(rec: Recorder, cluster: SimCluster, pods: list[SimPod], bad: SimPod) -> None:
    """Record gates and counts; the drifted pod alone is out, with one Warning Event."""
    rec.quarantined = sorted(p.name for p in [*pods, bad] if gate(cluster, p) == "False")
    rec.false_quarantines = len(set(rec.quarantined) - {bad.name})
    status = cluster.check_status()
    rec.verdicts = {k: str(v) for k, v in sorted(status.get("counts", {}).items()) if v}
    assert rec.quarantined == [bad.name]
    assert warnings(cluster, bad) == 1
    assert all(warnings(cluster, p) == 0 for p in pods)
    rec.assert_clean()


def test_api_server_down(cluster: SimCluster, fault: Recorder) -> None:
    fault.describe(
        "api-server-down",
        group="API server",
        fault="fake API server stops listening for 1.5 s while cycles run; a pod arrives",
        expected="controller keeps running and its state; relists, verifies the new pod",
        related=(RELATED_410,),
    )
    pods, bad = planted(cluster)
    cluster.add_check(interval=0.3, policy=POLICY)
    with controller(cluster, fault) as ctl:
        converged(cluster, pods, bad)
        cluster.api.pause()
        late = cluster.add_pod()  # created in the store while nobody can watch
        time.sleep(1.5)
        assert ctl._thread.is_alive()
        cluster.api.resume()
        wait_for(lambda: gate(cluster, late) == "True", timeout=20)
        pods.append(late)
        errors = ctl.controller.metrics.api_errors
        failed = sum(s.value for m in errors.collect() for s in m.samples if "total" in s.name)
    fault.observed = f"{failed:.0f} API calls failed and were retried; new pod verified"
    assert failed >= 1
    judge(fault, cluster, pods, bad)


def test_api_server_slow(cluster: SimCluster, fault: Recorder) -> None:
    fault.describe(
        "api-server-slow",
        group="API server",
        fault="every pod request delayed by 0.4 s (list, watch, patch, events)",
        expected="slower cycles; the same decisions",
    )
    pods, bad = planted(cluster)
    cluster.api.inject("*", r"/pods", 0, times=-1, delay=0.4)
    cluster.add_check(interval=0.3, policy=POLICY)
    with controller(cluster, fault):
        try:
            converged(cluster, pods, bad, timeout=30)
            delayed = len([p for _, p in cluster.api.requests if "/pods" in p])
        finally:
            cluster.api.clear_injections()
    fault.observed = f"converged; {delayed} pod requests each answered 0.4 s late"
    judge(fault, cluster, pods, bad)


def test_api_server_conflicts(cluster: SimCluster, fault: Recorder) -> None:
    fault.describe(
        "api-server-409",
        group="API server",
        fault="the next 6 PATCHes of pods answered 409 Conflict",
        expected="re-read and retried (once per write, then next cycle); one Event per action",
    )
    pods, bad = planted(cluster)
    cluster.api.inject("PATCH", r"/namespaces/shop/pods/", 409, times=6)
    cluster.add_check(interval=0.3, policy=POLICY)
    with controller(cluster, fault):
        converged(cluster, pods, bad)
        patches = [p for m, p in cluster.api.requests if m == "PATCH" and "/pods/" in p]
    fault.observed = f"{len(patches)} pod PATCHes for 6 conflicts and 5 pods"
    assert len(patches) > 6
    judge(fault, cluster, pods, bad)


def test_watch_gone(cluster: SimCluster, fault: Recorder) -> None:
    fault.describe(
        "api-server-410",
        group="API server",
        fault="event history compacted and the next 2 watches answered 410 Gone; a pod arrives",
        expected="relist, no missed pod, no repeated action",
        related=(RELATED_410,),
    )
    pods, bad = planted(cluster)
    cluster.add_check(interval=0.3, policy=POLICY)
    with controller(cluster, fault, watch_timeout=1):
        converged(cluster, pods, bad)
        lists = cluster.api.verb_counts["list"]
        cluster.api.compact()
        cluster.api.inject("GET", r"watch=(true|1|True)", 410, times=2)
        late = cluster.add_pod()
        wait_for(lambda: gate(cluster, late) == "True", timeout=20)
        pods.append(late)
        wait_for(lambda: cluster.api.verb_counts["list"] > lists, timeout=10)
        relists = cluster.api.verb_counts["list"] - lists
    fault.observed = f"{relists} relists after 410; the new pod verified"
    assert relists >= 1
    judge(fault, cluster, pods, bad)


@pytest.mark.parametrize("moment", ["fetching", "writing"])
def test_controller_killed_mid_cycle(cluster: SimCluster, fault: Recorder, moment: str) -> None:
    """Stopped while pods are being fetched, or while a quarantine is being written."""
    fault.describe(
        f"controller-killed-{moment}",
        group="controller",
        fault={
            "fetching": "stopped while a cycle waits on a slow pod, then restarted",
            "writing": "stopped while the quarantine PATCH is in flight, then restarted",
        }[moment],
        expected="stops promptly; the restarted controller recovers state from the cluster "
        "and repeats no Event",
        related=("tests/k8s/test_controller.py::test_restart_does_not_repeat_actions_or_events",),
    )
    pods, bad = planted(cluster)
    slow = pods[0]
    slow.site.overrides[".vite/manifest.json"] = Delay(1.0)
    cluster.add_check(interval=0.3, policy=POLICY)
    status_patch = f"/namespaces/shop/pods/{bad.name}/status"
    if moment == "writing":
        cluster.api.inject("PATCH", status_patch, 0, times=1, delay=1.5)
    with fault.probe(memory="rss", collect=True):
        first = RunningController(cluster, admin=cluster.lab_admin()).start()
        try:
            if moment == "fetching":
                server = cluster.web.server(slow.url)
                wait_for(lambda: first.controller.cycles_completed >= 1, timeout=20)
                wait_for(lambda: server.in_flight > 0, timeout=20)
            else:
                wait_for(
                    lambda: any(
                        m == "PATCH" and p.startswith(f"/api/v1{status_patch}")
                        for m, p in cluster.api.requests
                    ),
                    timeout=20,
                )
        finally:
            started = time.monotonic()
            stop(fault, first)
            stopped_in = time.monotonic() - started
        killed_tasks = fault.leaked_tasks
        second = RunningController(cluster, admin=cluster.lab_admin(), identity="ctl-a").start()
        try:
            converged(cluster, pods, bad)
            wait_for(lambda: second.controller.cycles_completed >= 2, timeout=20)
        finally:
            stop(fault, second)
    fault.leaked_tasks = (killed_tasks or 0) + (fault.leaked_tasks or 0)
    fault.observed = f"stopped in {stopped_in:.1f}s mid-cycle; restart converged"
    fault.figures["stop_seconds"] = round(stopped_in, 2)
    assert stopped_in < 5.0
    judge(fault, cluster, pods, bad)


def test_quarantined_pod_that_stops_answering_stays_quarantined(
    cluster: SimCluster, fault: Recorder
) -> None:
    """Gate mode fails open for pods never judged, never for a quarantined one.

    Before the fix in ``decide()``, a quarantined pod whose check turned inconclusive
    (here it answers 503) was released "failing open", back into traffic.
    """
    fault.describe(
        "quarantined-pod-inconclusive",
        group="controller",
        fault="the quarantined pod starts answering 503 (its check becomes inconclusive)",
        expected="stays quarantined: failing open never undoes a quarantine",
    )
    pods, bad = planted(cluster)
    cluster.add_check(interval=0.3, policy=POLICY)
    with controller(cluster, fault) as ctl:
        converged(cluster, pods, bad)
        bad.site.fault = Status(503)
        start = ctl.controller.cycles_completed
        wait_for(lambda: ctl.controller.cycles_completed >= start + 3, timeout=20)
        counts = cluster.check_status().get("counts", {})
    fault.observed = (
        f"gate stayed False over 3 inconclusive cycles ({counts.get('inconclusive')} inconclusive)"
    )
    assert counts.get("inconclusive") == 1
    judge(fault, cluster, pods, bad)
