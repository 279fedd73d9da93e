"""The controller through the faults a loaded API server produces.

One check (quarantine, three confirmations) over seven pods, one of them drifted, on
the fake API server over HTTP. The same cluster is built twice in one test: once
fault-free, once with the seeded fault mode (sim/artifactcheck_sim/apiserver_faults.py)
on: 429 with Retry-After, 500s, slow answers, watches cut mid-stream and 410 Gone on
resume. Both runs last at least the same number of completed cycles (the faulted one
until every kind of fault happened several times), and requests and writes are
compared per completed cycle of work, not per second. Then the faults end and the
controller must converge within one interval (counted in cycles, not seconds).

Figures printed (``-s``) and recorded in docs/reliability.md.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tenant_support import TenantCluster, running

from artifactcheck_sim.apiserver_faults import FaultRule, Faults
from artifactcheck_sim.cluster import wait_for

_net = itertools.count(1)
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CYCLES = 30  # completed cycles per run (at least: see enough_faults)
KINDS = ("throttle", "error", "slow", "cut", "gone")
CLEAN = 6
SEED = 25

#: A loaded API server: every verb and resource may be throttled or fail; watches are
#: cut within a second and a resumed one is often "too old".
CHAOS = (
    FaultRule("throttle", 0.06, retry_after=1),
    FaultRule("error", 0.06),
    FaultRule("slow", 0.15, delay=0.3),
    FaultRule("gone", 0.35),
    FaultRule("cut", 0.6, delay=1.0),
)


def enough_faults(faults: Faults | None) -> bool:
    """Whether every kind of fault happened several times: the faulted run goes on
    until it did, since how many requests 30 cycles make depends on the machine's load
    (a 410 comes only on a resumed watch, so few cuts mean few)."""
    if faults is None:
        return True
    injected = Counter(kind for kind, _, _ in faults.injected.elements())
    return all(injected[k] >= 3 for k in KINDS)


def gate(cluster: TenantCluster, name: str) -> str | None:
    c = cluster.condition(name)
    return c["status"] if c else None


@dataclass
class Run:
    """What one run did."""

    requests: int = 0
    writes: int = 0
    cycles: int = 0  # completed when requests and writes were counted
    by_verb: Counter[str] = field(default_factory=Counter)
    quarantined_at_cycle: int | None = None
    clean_false: set[str] = field(default_factory=set)  # clean pods ever seen gated False
    pod_lists: int = 0


class Sampler:
    """Polls every pod's gate while a run goes on: a clean pod seen False once is a
    false quarantine, however briefly."""

    def __init__(self, cluster: TenantCluster, clean: list[str], run: Run) -> None:
        self.cluster, self.clean, self.run = cluster, clean, run
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.wait(0.05):
            for name in self.clean:
                if gate(self.cluster, name) == "False":
                    self.run.clean_false.add(name)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def build(n: int) -> tuple[TenantCluster, list[str], str]:
    cluster = TenantCluster(
        first_host=f"127.86.{n}.1",
        cdn_host=f"127.86.{200 + n}.1",
        release_host=f"127.86.{100 + n}.1",
    ).start()
    clean = [cluster.add_pod().name for _ in range(CLEAN)]
    bad = cluster.add_pod(serves="1.4.1").name
    cluster.add_check(interval=0.5, policy={"mode": "quarantine", "confirmations": 3})
    return cluster, clean, bad


def run(faults: Faults | None) -> tuple[Run, Faults | None, dict[str, Any]]:
    """Run the controller until CYCLES cycles completed (faults on from the start), then
    end the faults and let it converge; what it did, and the state after."""
    cluster, clean, bad = build(next(_net))
    result = Run()
    try:
        cluster.api.faults = faults
        with running(cluster) as ctl, Sampler(cluster, clean, result):
            c = ctl.controller

            def progressed() -> bool:
                if result.quarantined_at_cycle is None and gate(cluster, bad) == "False":
                    result.quarantined_at_cycle = c.cycles_completed
                return c.cycles_completed >= CYCLES and enough_faults(faults)

            wait_for(progressed, timeout=240, interval=0.05)
            result.cycles = c.cycles_completed
            methods = [m for m, _ in list(cluster.api.requests)]
            result.requests = len(methods)
            result.writes = sum(1 for m in methods if m in WRITES)
            result.by_verb = Counter(cluster.api.verb_counts)
            result.pod_lists = sum(
                1
                for m, p in list(cluster.api.requests)
                if m == "GET" and "/pods?" in p and "watch=" not in p
            )
            # The faults end: within one interval (the next full cycle that starts
            # after now, i.e. two completions at most) everything is right.
            cluster.api.faults = None
            ended = c.cycles_completed
            wait_for(lambda: c.cycles_completed >= ended + 2, timeout=60)
            after = {
                "bad": gate(cluster, bad),
                "clean": {n: gate(cluster, n) for n in clean},
                "bad_warnings": [e for e in cluster.events(bad) if e.get("type") == "Warning"],
                "clean_warnings": [
                    e for n in clean for e in cluster.events(n) if e.get("type") == "Warning"
                ],
            }
    finally:
        cluster.stop()
    return result, faults, after


def gaps_after(faults: Faults, kind: str) -> list[tuple[float, float, str]]:
    """(gap to the next request of the same verb and path, what the fault asked) for
    every request that got fault ``kind``."""
    seen = faults.seen()
    out = []
    for i, s in enumerate(seen):
        if s.fault != kind:
            continue
        path = s.path.split("?", 1)[0]
        nxt = next(
            (t for t in seen[i + 1 :] if t.verb == s.verb and t.path.split("?", 1)[0] == path),
            None,
        )
        if nxt is not None:
            out.append((nxt.at - s.at, 1.0, f"{s.verb} {path}"))
    return out


def test_api_server_faults_change_nothing() -> None:
    calm, _, calm_after = run(None)
    chaos, faults, chaos_after = run(Faults(CHAOS, seed=SEED))
    assert faults is not None
    injected = Counter(kind for kind, _, _ in faults.injected.elements())
    print(
        f"\nfault-free: {calm.cycles} cycles, {calm.requests} requests, {calm.writes} writes, "
        f"{calm.pod_lists} pod lists, quarantined by cycle {calm.quarantined_at_cycle}"
        f"\nchaos:      {chaos.cycles} cycles, {chaos.requests} requests, {chaos.writes} writes, "
        f"{chaos.pod_lists} pod lists, quarantined by cycle {chaos.quarantined_at_cycle}"
        f"\ninjected:   {dict(injected)} of {len(faults.log)} requests"
        f"\nverbs calm  {dict(calm.by_verb)}\nverbs chaos {dict(chaos.by_verb)}"
    )
    # Every kind of fault happened, several times.
    assert all(injected[k] >= 3 for k in KINDS), injected

    # The drifted pod is still quarantined; no clean pod ever is.
    assert chaos.quarantined_at_cycle is not None
    assert chaos.clean_false == set() and calm.clean_false == set()
    for after in (calm_after, chaos_after):
        assert after["bad"] == "False"
        assert set(after["clean"].values()) == {"True"}, after["clean"]
        assert after["clean_warnings"] == []
        # one Warning for the drifted pod, not one per retried write
        assert len(after["bad_warnings"]) == 1, after["bad_warnings"]

    # Resumed watches answered 410 made the controller relist the pods (the streaks
    # surviving that: test_confirmation_streaks_survive_relists).
    assert chaos.pod_lists >= 3

    # Retry-After is honoured: no request of the same verb and path within the second
    # a 429 asked for.
    throttled = gaps_after(faults, "throttle")
    assert throttled, "no throttled request was retried"
    early = [(round(g, 2), what) for g, want, what in throttled if g < want]
    assert early == [], f"{len(early)} of {len(throttled)} retried sooner than Retry-After: {early}"

    # A watch cut mid-stream resumes from its last resourceVersion (a watch), it does
    # not list everything again; only a 410 does

    seen = faults.seen()
    after_cut = [
        next(
            (
                t.verb
                for t in seen[i + 1 :]
                if t.resource == s.resource and t.verb in ("list", "watch")
            ),
            None,
        )
        for i, s in enumerate(seen)
        if s.fault == "cut"
    ]
    # (a list may still come next when the leadership was lost meanwhile and the check
    # started again: its new watch lists first)
    assert after_cut.count("watch") > 2 * after_cut.count("list"), after_cut

    # Failed watches back off with jitter: the delays before reconnecting differ.
    errors = [g for g, _, _ in gaps_after(faults, "error")]
    assert len({round(g, 3) for g in errors}) > 1, errors

    # The same work costs a small multiple of the fault-free requests and writes (per
    # completed cycle: the faulted run may last longer, see enough_faults).
    per_cycle = {
        "requests": (chaos.requests / chaos.cycles, calm.requests / calm.cycles),
        "writes": (chaos.writes / chaos.cycles, calm.writes / calm.cycles),
    }
    assert all(faulted <= 3 * free for faulted, free in per_cycle.values()), per_cycle


def test_confirmation_streaks_survive_relists() -> None:
    """Every pod watch is cut within 0.1 s and the history is compacted as often, so
    every resume is a 410 and the pods are listed again several times per cycle: the
    drifted pod, confirmed over three cycles, is still quarantined, and the clean pods
    are not."""
    cluster, clean, bad = build(next(_net))
    try:
        cluster.api.faults = Faults(
            [FaultRule("cut", 1.0, frozenset({"watch"}), frozenset({"pods"}), delay=0.1)]
        )
        stop = threading.Event()

        def compact() -> None:
            # A busy cluster: other writes move the resourceVersion past every
            # watcher's, so each compaction makes every resume "too old" (without
            # them a quiet cluster's resume may be current, and relists rare).
            busy = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"n": "0"}}
            cluster.api.create({**busy, "metadata": {"namespace": "shop", "name": "busy"}})
            n = 0
            while not stop.wait(0.05):
                n += 1
                cluster.api.patch("v1", "ConfigMap", "shop", "busy", {"data": {"n": str(n)}})
                cluster.api.compact()

        compactor = threading.Thread(target=compact, daemon=True)
        result = Run()
        compactor.start()
        try:
            with running(cluster) as ctl, Sampler(cluster, clean, result):
                wait_for(lambda: gate(cluster, bad) == "False", timeout=60)
                cycles = ctl.controller.cycles_completed
        finally:
            stop.set()
            compactor.join(timeout=5)
        lists = sum(
            1
            for m, p in list(cluster.api.requests)
            if m == "GET" and "/pods?" in p and "watch=" not in p
        )
        print(f"\nquarantined after {cycles} cycles and {lists} pod lists")
        assert lists >= 2 * cycles, (lists, cycles)  # relisted several times per cycle
        assert result.clean_false == set()
    finally:
        cluster.stop()


def test_a_failed_quarantine_and_a_failed_flag_are_done_at_the_next_cycle() -> None:
    """The API server refuses the drifted pod's quarantine (its status patch) and its
    Warning Event once each: the controller does not remember them as done; a later
    cycle quarantines the pod and records the Event, once."""
    cluster, clean, bad = build(next(_net))
    try:
        cluster.api.inject("PATCH", f"/pods/{bad}/status", 500, times=1)
        cluster.api.inject("POST", "/events", 429, times=1)
        with running(cluster):
            wait_for(lambda: gate(cluster, bad) == "False", timeout=30)
            warnings = wait_for(
                lambda: [e for e in cluster.events(bad) if e.get("type") == "Warning"],
                timeout=30,
            )
        status_patches = [
            p for m, p in list(cluster.api.requests) if m == "PATCH" and f"/pods/{bad}/status" in p
        ]
        event_posts = [p for m, p in list(cluster.api.requests) if m == "POST" and "/events" in p]
        assert len(status_patches) >= 2 and len(event_posts) >= 2  # refused, then done
        assert len(warnings) == 1
        assert all(gate(cluster, n) == "True" for n in clean)
    finally:
        cluster.stop()
