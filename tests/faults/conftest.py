"""Fixtures for the fault-injection suite: loopback fleets, leak probes, a results file.

Each fault test ends by recording what it observed (verdicts, false quarantines,
leaked tasks, sockets and threads, peak traced memory) through the ``fault`` fixture.
The record is written as JSON to ``tests/faults/.results/<fault>.json`` together with
the test's own outcome (passed, failed, or skipped with its reason), so
``python tests/faults/matrix.py`` builds ``docs/reliability.md`` from what the suite
really saw rather than from what someone remembered to write down.

Addresses are 127.97.N.x (instances, release servers) and 127.98.N.x (CDNs), N handed
out once per process: the suite's row of the loopback table (tests/fleet_support.py), so
this suite never collides with the other suites' fleets.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from faults_support import RESULTS_DIR, Recorder
from fleet_support import fleet_fixture, next_subnet, web_fixture

web = web_fixture("faults")
make_fleet = fleet_fixture("faults", instances=4, version="1.4.2")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the item, so ``fault`` can record the outcome."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(autouse=True)
def _no_in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite may run inside a pod: never let it pick up the real cluster."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    """A fault must not leave a thread behind (servers, controllers, executors)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while True:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"threads left behind: {leaked}"


@pytest.fixture
def subnet() -> int:
    """A third octet of 127.97.N.x no other test of this process uses; the test's
    fleets (``make_fleet``) and its own servers share it."""
    return next_subnet("faults")


@pytest.fixture
def fault(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    """The recorder a fault test fills in; written to the results directory at teardown."""
    recorder = Recorder(test=request.node.nodeid)
    yield recorder
    if recorder.key is None:
        return
    report = getattr(request.node, "rep_call", None)
    outcome = report.outcome if report is not None else "error"
    record: dict[str, Any] = {**recorder.as_dict(), "outcome": outcome}
    if report is not None and report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        record["skip_reason"] = reason.removeprefix("Skipped: ")
    elif report is not None and report.failed:
        record["failure"] = str(report.longrepr).strip().splitlines()[-1][:300]
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{recorder.key}.json"
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
