"""Fixtures of the monitoring tests: promtool, and a real scrape of the controller."""

from __future__ import annotations

import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from obs_support import find_promtool, lab_controller

from artifactcheck_sim.cluster import SimCluster, wait_for


@pytest.fixture(scope="session")
def promtool() -> str:
    return find_promtool()


@pytest.fixture(scope="session")
def scrape() -> Iterator[str]:
    """/metrics of the real controller after real cycles on the simulated cluster: a
    drifted pod quarantined, clean pods released, the CDN observed."""
    with SimCluster(first_host="127.81.0.1", cdn_host="127.81.255.1") as cluster:
        for _ in range(4):
            cluster.add_pod()
        bad = cluster.add_pod(serves="1.4.1")
        cluster.add_check(interval=0.5, policy={"mode": "quarantine", "confirmations": 1})
        folder = tempfile.TemporaryDirectory(prefix="artifactcheck-obs-")
        with lab_controller(cluster, Path(folder.name), identity="obs-a") as ctl:
            server = ctl.controller.serve_health(host="127.0.0.1", port=0)
            try:
                wait_for(
                    lambda: (cluster.condition(bad.name) or {}).get("status") == "False",
                    timeout=30,
                )
                wait_for(lambda: ctl.controller.cycles_completed >= 3, timeout=30)
                url = f"http://127.0.0.1:{server.port}/metrics"
                with urllib.request.urlopen(url, timeout=5) as response:
                    assert response.status == 200
                    text = response.read().decode()
            finally:
                server.stop()
                folder.cleanup()
    # Yielded after the controller stopped: a session-wide fixture that kept it running
    # left its watch threads alive (and restarting) under every later test.
    yield text
