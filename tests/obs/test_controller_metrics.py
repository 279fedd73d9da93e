"""What the alerts rely on, from the real controller: a cycle that fails is counted,
and a deleted ArtifactCheck leaves no series behind (it would look stale forever)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from obs_support import lab_controller

from artifactcheck_sim.cluster import SimCluster, wait_for


@pytest.fixture
def cluster() -> Any:
    with SimCluster(first_host="127.84.0.1", cdn_host="127.84.255.1") as c:
        yield c


def test_a_deleted_check_leaves_no_series(cluster: SimCluster, tmp_path: Path) -> None:
    cluster.add_pod()
    cluster.add_check("web", interval=0.3)
    cluster.add_check("api", interval=0.3)
    with lab_controller(cluster, tmp_path) as ctl:
        metrics = ctl.controller.metrics
        wait_for(lambda: 'check="shop/api"' in metrics.exposition().decode(), timeout=20)
        wait_for(lambda: 'check="shop/web"' in metrics.exposition().decode(), timeout=20)
        cluster.api.delete("artifactcheck.io/v1alpha1", "ArtifactCheck", "shop", "web")
        wait_for(lambda: 'check="shop/web"' not in metrics.exposition().decode(), timeout=20)
        text = metrics.exposition().decode()
        assert 'artifactcheck_last_cycle_timestamp_seconds{check="shop/api"}' in text


def test_a_cycle_that_fails_is_counted(
    cluster: SimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the policy")

    monkeypatch.setattr("artifactcheck.pipeline.decide", broken)
    cluster.add_pod()
    cluster.add_check("web", interval=0.3)
    with lab_controller(cluster, tmp_path) as ctl:
        metrics = ctl.controller.metrics

        def failures() -> float:
            found = re.search(
                r'^artifactcheck_cycle_failures_total\{check="shop/web"\} (\S+)$',
                metrics.exposition().decode(),
                re.MULTILINE,
            )
            return float(found.group(1)) if found else 0.0

        # at least one: a failed cycle is retried (backed off from 0.5 s), and the new
        # pod's fast cycle may fail beside the full one, so the count can pass 1 between
        # two polls
        wait_for(lambda: failures() >= 1, timeout=20)
        assert ctl.controller.cycles_completed == 0
