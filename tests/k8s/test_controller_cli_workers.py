"""``artifactcheck controller --observe-processes N``: the observing processes are
started with the controller, before any thread, and end with it.

The pool's own rules (the same observations, limits shared out, a dead worker) are
tests/k8s/test_controller_workers.py; this is the command that starts one.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from launch import controller_process
from tenant_support import TenantCluster, numbered_cluster

from artifactcheck_sim.cluster import free_port, wait_for


@pytest.fixture
def cluster():
    with numbered_cluster(87) as c:
        yield c


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        here = todo.pop()
        for task in Path(f"/proc/{here}/task").iterdir():
            kids = (task / "children").read_text().split()
            out |= {int(k) for k in kids}
            todo += [int(k) for k in kids]
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_workers_start_with_the_controller_and_end_with_it(
    cluster: TenantCluster, tmp_path: Path
) -> None:
    for _ in range(3):
        cluster.add_pod()
    cluster.add_check(interval=0.5)
    health, metrics = free_port("127.0.0.1"), free_port("127.0.0.1")
    proc = controller_process(
        cluster,
        tmp_path,
        health_port=health,
        metrics_port=metrics,
        extra=["--observe-processes", "2"],
    )
    try:
        # a small cycle is observed by the controller itself: the verdicts come as before
        wait_for(
            lambda: all((cluster.condition(p) or {}).get("status") == "True" for p in cluster.pods),
            timeout=60,
        )
        workers = _descendants(proc.pid)
        assert len(workers) >= 2, workers  # the fork server and its two workers
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err[-2000:]
    wait_for(lambda: not any(_alive(w) for w in workers), timeout=20)


def test_a_negative_count_is_refused_naming_the_flag(
    cluster: TenantCluster, tmp_path: Path
) -> None:
    proc = controller_process(
        cluster,
        tmp_path,
        health_port=free_port("127.0.0.1"),
        metrics_port=free_port("127.0.0.1"),
        extra=["--observe-processes", "-1"],
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "--observe-processes" in err
