"""Crash safety: the leader killed with -9 in the middle of its action batches.

Two real ``artifactcheck controller`` processes hold the Lease in turn on the fake API
server. Ten times (seeded moments), new pods arrive (gates to open, one drifted pod
to quarantine) and the leader is killed with SIGKILL shortly after: no lease release,
no step-down, its writes cut wherever they were. The standby takes over; after its
first completed cycle no consistent pod's gate is False, no drifted pod's is True, and
every Event is one object written once (count 1), marked with the episode its pod's
``flagged-at`` names (a kill between the pod's mark and its Event is followed by one
recording, not two). The killed identity comes back as the next standby.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from launch import controller_process
from tenant_support import TenantCluster

from artifactcheck.act.kube_events import ANN_EPISODE
from artifactcheck.model.names import ANN_FLAGGED_AT, LEASE_NAME
from artifactcheck_sim.cluster import free_port, wait_for

KILLS = 10
SEED = 25
_CYCLES = re.compile(r'^artifactcheck_cycles_total\{check="shop/web"\} (\S+)$', re.M)


def gate(tc: TenantCluster, name: str) -> str | None:
    c = tc.condition(name)
    return c["status"] if c else None


def holder(tc: TenantCluster) -> str | None:
    lease = tc.api.get("coordination.k8s.io/v1", "Lease", "shop", LEASE_NAME) or {}
    value: str | None = (lease.get("spec") or {}).get("holderIdentity")
    return value


class Replica:
    def __init__(
        self, tc: TenantCluster, tmp: Path, identity: str, *, lease_duration: float = 2
    ) -> None:
        self.identity = identity
        self.metrics_port = free_port("127.0.0.1")
        self.proc: subprocess.Popen[str] = controller_process(
            tc,
            tmp,
            health_port=free_port("127.0.0.1"),
            metrics_port=self.metrics_port,
            identity=identity,
            extra=["--lease-duration", str(lease_duration)],
        )

    def cycles(self) -> float:
        """Cycles this process completed (0 until it led and checked once)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - loopback
                text = resp.read().decode()
        except OSError:
            return 0.0
        m = _CYCLES.search(text)
        return float(m.group(1)) if m else 0.0

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.communicate(timeout=30)


@pytest.mark.slow
def test_kill_9_the_leader_during_action_batches(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    with TenantCluster(
        first_host="127.87.1.1", cdn_host="127.87.201.1", release_host="127.87.101.1"
    ) as tc:
        clean = [tc.add_pod().name for _ in range(6)]
        bad = [tc.add_pod(serves="1.4.1").name]
        tc.add_check(
            interval=0.5,
            policy={"mode": "quarantine", "confirmations": 1, "maxQuarantineFraction": 0.5},
        )
        replicas: dict[str, Replica] = {}
        generation = itertools.count()
        for name in ("a", "b"):
            identity = f"proc-{name}-{next(generation)}"
            replicas[identity] = Replica(tc, tmp_path, identity)
        moments: list[float] = []
        try:
            leader = wait_for(lambda: holder(tc) in replicas and holder(tc), timeout=60)
            wait_for(lambda: replicas[leader].cycles() >= 1, timeout=60)
            for _ in range(KILLS):
                # An action batch: gates to open and a drifted pod to take out.
                clean += [tc.add_pod().name for _ in range(4)]
                bad.append(tc.add_pod(serves="1.4.1").name)
                moment = rng.uniform(0.0, 0.8)
                moments.append(moment)
                time.sleep(moment)  # the seeded moment of the kill, not a threshold
                replicas.pop(leader).kill()
                new = wait_for(
                    lambda: holder(tc) in replicas and holder(tc), timeout=60, interval=0.1
                )
                wait_for(lambda n=new: replicas[n].cycles() >= 1, timeout=60, interval=0.1)
                # After the new leader's first cycle:
                opened_bad = [n for n in bad if gate(tc, n) == "True"]
                closed_clean = [n for n in clean if gate(tc, n) == "False"]
                assert opened_bad == [] and closed_clean == [], (opened_bad, closed_clean)
                identity = f"proc-x-{next(generation)}"
                replicas[identity] = Replica(tc, tmp_path, identity)  # the next standby
                leader = new
            # Eventually every pod is where it belongs, and every Event was written once.
            wait_for(lambda: all(gate(tc, n) == "False" for n in bad), timeout=60)
            wait_for(lambda: all(gate(tc, n) == "True" for n in clean), timeout=60)
            events = tc.events()
            print(f"\nkill moments {[round(m, 2) for m in moments]}; {len(events)} events")
            counts = {e["metadata"]["name"]: e.get("count", 1) for e in events}
            assert {n: c for n, c in counts.items() if c != 1} == {}
            about = [(e["involvedObject"]["name"], e["reason"]) for e in events]
            assert len(about) == len(set(about))
            warned = {e["involvedObject"]["name"] for e in events if e["type"] == "Warning"}
            assert warned == set(bad)
            # each Warning counted the episode its pod is flagged for, and no other
            for e in events:
                if e["type"] == "Warning":
                    flagged = tc.api.get("v1", "Pod", "shop", e["involvedObject"]["name"])
                    at = ((flagged or {}).get("metadata") or {}).get("annotations") or {}
                    assert e["metadata"]["annotations"] == {ANN_EPISODE: at[ANN_FLAGGED_AT]}
        finally:
            for replica in replicas.values():
                replica.kill()


def _get(port: int, path: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=70) as resp:  # noqa: S310
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read()), dict(exc.headers)
    except OSError:  # not listening yet
        return 0, {}, {}


def test_the_standby_process_forwards_then_answers_503_when_the_leader_is_killed(
    tmp_path: Path,
) -> None:
    """Two real processes: a gate asking the standby gets the leader's answer; once the
    leader is killed with -9 the standby answers 503 LeaderUnreachable while the Lease
    still names the dead leader (15 s lease: the answer came before any take-over)."""
    with TenantCluster(
        first_host="127.87.2.1", cdn_host="127.87.202.1", release_host="127.87.102.1"
    ) as tc:
        tc.add_pod()
        tc.add_check(interval=30)
        first = Replica(tc, tmp_path, "proc-first", lease_duration=15)
        try:
            wait_for(lambda: holder(tc) == "proc-first", timeout=60)
            second = Replica(tc, tmp_path, "proc-second", lease_duration=15)
            try:
                path = "/verdicts/v1/namespaces/shop/artifactchecks/web"
                status, doc, headers = wait_for(
                    lambda: (r := _get(second.metrics_port, path))[0] == 200 and r, timeout=60
                )
                assert headers["X-ArtifactCheck-Answered-By"] == "proc-first"
                assert _get(first.metrics_port, path)[:2] == (status, doc)
                first.kill()
                status, doc, headers = _get(second.metrics_port, path)
                assert (status, doc["reason"]) == (503, "LeaderUnreachable"), doc
                assert headers["X-ArtifactCheck-Answered-By"] == "proc-second"
                assert holder(tc) == "proc-first"  # answered before the lease expired
            finally:
                second.kill()
        finally:
            first.kill()
