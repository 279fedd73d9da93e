"""The soak benchmark in small: the controller under churn, a rollout and
API faults for a few minutes, then checked for leaks and for its verdicts.

``bench/soak.py`` runs the fake API server, an nginx fleet on loopback and the
controller in a child process; pods are replaced every few seconds, the release
changes once (a rollout to a new ReplicaSet, the check's spec changed), and the API
server throttles, fails, slows and cuts watches in windows. Asserted from its samples:
RSS after warm-up grows by at most 10 %; threads, open files, TCP connections and
asyncio tasks stay at their level (a median per half: pools empty and fill between
cycles); writes per cycle stay at the rate the churn causes; at the end every drifted
pod is quarantined and no clean pod is. The full hour at 1,000 pods is
``python -m bench.soak`` (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from ci_support import hermetic_environment
from tenant_support import numbered_cluster, running

from artifactcheck_sim.cluster import wait_for

ROOT = Path(__file__).resolve().parents[2]

#: A small fleet checked often, so minutes hold many cycles, churns and fault windows.
SMALL = [
    "--pods", "200", "--drift", "0.02", "--interval", "5", "--sample-instances", "100",
    "--assets", "50", "--churn", "5", "--churn-every", "10", "--faults-every", "60",
    "--faults-for", "20", "--sample-every", "5", "--minutes", "4.5", "--warmup", "1.5",
    "--settle", "0.75", "--verdict-timeout", "120", "--timeout", "300", "--rollout-minutes", "0.5",
]  # fmt: skip


def _level(summary: dict[str, Any], key: str) -> tuple[float, float]:
    return summary[key]["first_half_median"], summary[key]["second_half_median"]


_STARTED = pytest.StashKey[tuple[subprocess.Popen[bytes], Path]]()


def start_early(config: pytest.Config, env: dict[str, str] | None = None) -> None:
    """Start the soak as soon as the run has collected it (tests/conftest.py calls this,
    with the hermetic environment every test gets).

    It mostly waits on its own clock (minutes of churn and fault windows), so it runs
    beside the rest of the suite instead of adding its minutes to the suite's; the test
    then collects its result. Stopped with SIGINT at the end of the run if still going
    (the benchmark then stops its controller and its nginx itself).
    """
    if shutil.which("nginx") is None or _STARTED in config.stash:
        return
    out = Path(tempfile.mkdtemp(prefix="acsoak-test-")) / "soak.json"
    with (out.parent / "soak.log").open("wb") as log:  # its progress, shown if it fails
        proc = subprocess.Popen(  # noqa: S603 - our own benchmark
            [sys.executable, "-m", "bench.soak", *SMALL, "--out", str(out)],
            cwd=ROOT,
            env=env if env is not None else dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    config.stash[_STARTED] = (proc, out)

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(out.parent, ignore_errors=True)

    config.add_cleanup(stop)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nginx") is None, reason="the fleet is served by nginx")
def test_five_minutes_of_churn_and_faults_leak_nothing(request: pytest.FixtureRequest) -> None:
    start_early(request.config, hermetic_environment())  # no-op when started already
    proc, out = request.config.stash[_STARTED]
    if proc.wait(timeout=900) != 0:
        pytest.fail((out.parent / "soak.log").read_text(errors="replace")[-4000:])
    result = json.loads(out.read_text())
    s = result["summary"]
    assert result["controller"]["exit"] == 0
    assert result["faults_windows"] >= 3
    assert any(e["event"] == "release change" for e in result["events"])
    assert s["rss_ratio"] <= 1.10, (s["rss_after_warmup_mb"], s["rss_end_mb"])
    # no growth: the second half's level is the first half's (a small margin for
    # connections in flight when a sample is taken)
    for key, margin in (("threads", 1), ("fds", 8), ("tcp", 8), ("asyncio_tasks", 4)):
        first, second = _level(s, key)
        assert second <= first * 1.1 + margin, (key, first, second)
    writes = s["writes_per_cycle"]
    assert writes["second_half"] <= 2 * writes["first_half"] + 5, writes
    v = result["verdicts"]
    assert v["right"], v
    assert v["drifted_quarantined"] == v["drifted"] == 4
    assert v["clean_quarantined"] == 0


def test_replaced_pods_leave_no_policy_memory_behind() -> None:
    """What the soak's churn found: the policy's memory of each pod
    (``history.instances``) kept every pod ever judged, so replacing pods grew it
    without end. After pods are replaced, a clean one and a quarantined one, it
    holds the pods there are and no other."""
    with numbered_cluster(125) as cluster:
        pods = [cluster.add_pod() for _ in range(4)]
        bad = cluster.add_pod(serves="1.4.1")
        cluster.add_check(interval=0.5, policy={"mode": "quarantine"})

        def gate(name: str) -> str | None:
            c = cluster.condition(name)
            return c["status"] if c else None

        with running(cluster) as ctl:
            wait_for(lambda: gate(bad.name) == "False", timeout=30)
            wait_for(lambda: all(gate(p.name) == "True" for p in pods), timeout=30)
            history = lambda: ctl.controller.checks["shop/web"].history  # noqa: E731
            # the gate is written during the cycle, the policy's memory at its end
            wait_for(lambda: history().instances[f"shop/{bad.name}"].quarantined, timeout=10)
            for _ in range(3):
                cluster.delete_pod(pods.pop(0).name)
                pods.append(cluster.add_pod())
            cluster.delete_pod(bad.name)
            wait_for(lambda: all(gate(p.name) == "True" for p in pods), timeout=30)
            names = {f"shop/{p.name}" for p in pods}
            try:
                wait_for(lambda: set(history().instances) == names, timeout=20, interval=0.2)
            except TimeoutError:
                pytest.fail(f"remembered {sorted(history().instances)}; pods {sorted(names)}")


def test_a_rebuilt_check_ends_even_when_a_pod_woke_it_just_before() -> None:
    """What the soak's release change found: the check's spec changed (the
    old check cancelled, a new one built) one loop turn after a pod event woke the old
    check's new-pod loop. Python 3.11's ``asyncio.wait_for`` returns the result of a
    wait that finished in that turn and drops the cancellation, so the old check lived
    on: its fetcher's connections, its pod watch thread, its state and its cycles,
    beside the new check's, and the process did not stop on SIGTERM."""
    import copy

    with numbered_cluster(125) as cluster:
        for _ in range(3):
            cluster.add_pod()
        cluster.add_check(interval=60, policy={"mode": "quarantine"})
        with running(cluster) as ctl:
            controller = ctl.controller
            wait_for(
                lambda: (
                    "shop/web" in controller.checks
                    and controller.checks["shop/web"].started.is_set()
                    and controller.checks["shop/web"].last_report is not None
                ),
                timeout=30,
            )
            old = controller.checks["shop/web"]
            task = controller._tasks["shop/web"]
            changed = copy.deepcopy(old.latest)
            assert changed is not None
            changed["metadata"]["generation"] = old.generation + 1
            changed["spec"]["interval"] = 75
            loop = ctl._loop

            def woken_then_rebuilt() -> None:
                old.wake.set()  # a pod came (pods._mark_new) ...
                # ... and in the next turn, after the wait woken returned, the spec change
                loop.call_soon(controller.registry.event, "MODIFIED", changed)

            wait_for(lambda: not old.pending and not old.judging.locked(), timeout=10)
            loop.call_soon_threadsafe(woken_then_rebuilt)
            wait_for(lambda: controller.checks["shop/web"] is not old, timeout=10)
            try:
                wait_for(task.done, timeout=10)
            except TimeoutError:
                loop.call_soon_threadsafe(task.cancel)  # a second chance, so it stops
                pytest.fail("the old check's task was cancelled but is still running")
            assert task.cancelled()
            new = controller.checks["shop/web"]
            wait_for(lambda: new.last_report is not None, timeout=30)
