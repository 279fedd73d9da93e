"""The soak benchmark in small (issue 25): the controller under churn, a rollout and
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

ROOT = Path(__file__).resolve().parents[2]

#: A small fleet checked often, so minutes hold many cycles, churns and fault windows.
SMALL = [
    "--pods", "200", "--drift", "0.02", "--interval", "5", "--sample-instances", "100",
    "--assets", "50", "--churn", "5", "--churn-every", "10", "--faults-every", "60",
    "--faults-for", "20", "--sample-every", "5", "--minutes", "4.5", "--warmup", "1.5",
    "--settle", "0.75", "--verdict-timeout", "120", "--timeout", "300",
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
