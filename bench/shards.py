"""Benchmark: the controller sharded by ArtifactCheck, against one controller (docs/scaling.md).

The same cluster is built afresh on the in-process fake API server for every run:
``--pods`` pods in ``--workloads`` workloads (a ``workload=web-NNN`` label each), one
gated ``ArtifactCheck`` per workload, served by two nginx fleets (``bench.fleet_server``,
the site of benchmark 1; two because one nginx worker cannot listen on more than ~16,000
addresses). Then, in one invocation:

* ``baseline``: ONE controller process (``--total-shards 1``) over all of it;
* ``sharded``: ``--shards`` controller processes at once, shard i of N each;
* ``isolated`` (optional): each shard alone, as if it had the machine to itself.

Per shard: its checks and pods, the time until every one of its checks has finished a
first cycle (all its pods then carry the gate condition; counted), the API requests it
made (attributed by path: its pods, its checks, its Lease; the ArtifactCheck list/watch
and Events every shard shares are counted apart), its steady-state requests, the
readiness->verdict latency of new pods of its workloads (timed from the moment the pod
is ready, as benchmark 3), and its peak RSS and CPU seconds (``wait4``).

    python -m bench.shards [--pods 20000] [--workloads 80] [--shards 4] [--runs baseline,sharded]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .common import ROOT, fleet_server, log, machine, peak_rss_mb, peak_rss_of, save, tool_env
from .controller import (
    NAMESPACE,
    add_pod,
    free_port,
    gate_status,
    scrape,
)

CHECK_API = "artifactcheck.io/v1alpha1"
_SELECTOR = re.compile(r"workload=(web-\d+)")
_POD_PATH = re.compile(r"/pods/([^/?]+)")
_CHECK_PATH = re.compile(r"/artifactchecks/([^/?]+)")
_LEASE_PATH = re.compile(r"/leases/[^/?]*?(?:-shard-(\d+)-of-\d+)?(?:[/?]|$)")


def workload(i: int) -> str:
    return f"web-{i:03d}"


def child(api_url: str, health_port: int, shard: int, total: int, lease: float) -> int:
    """One controller process (shard ``shard`` of ``total``): run until SIGTERM."""
    import asyncio

    from kubernetes import client as k8s

    from artifactcheck.control.controller import Controller, ControllerSettings
    from artifactcheck.control.controller_settings import renew_period_for

    api_client = k8s.ApiClient(k8s.Configuration(host=api_url))
    ctl = Controller(
        api_client=api_client,
        settings=ControllerSettings(
            namespace=NAMESPACE,
            identity=f"bench-{shard}",
            lease_namespace="artifactcheck-system",
            admin_config=os.environ.get("ACBENCH_ADMIN_CONFIG"),
            shard=shard,
            total_shards=total,
            lease_duration=lease,
            renew_period=renew_period_for(lease),
        ),
    )
    health = ctl.serve_health(host="127.0.0.1", port=health_port)

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await ctl.run(stop)

    try:
        asyncio.run(main())
    finally:
        health.stop()
        api_client.close()  # type: ignore[no-untyped-call]
    return 0


class Cluster:
    """Pods and checks on a fresh fake API server; which workload owns which pod."""

    def __init__(self, fleets: list[dict[str, Any]], args: argparse.Namespace) -> None:
        from artifactcheck_sim.apiserver import FakeApiServer

        self.fleets = fleets
        self.args = args
        self.api = FakeApiServer(namespaces=("default", NAMESPACE, "artifactcheck-system"))
        self.api.start()
        self.owner: dict[str, str] = {}  # pod name -> workload
        self._hosts = [iter(f["hosts"]) for f in fleets]

    def fleet_of(self, w: int) -> int:
        return w % len(self.fleets)

    def add(self, index: int) -> str:
        w = index % self.args.workloads
        host = next(self._hosts[self.fleet_of(w)])
        name = add_pod(self.api, host, index)
        self.api.patch(
            "v1", "Pod", NAMESPACE, name, {"metadata": {"labels": {"workload": workload(w)}}}
        )
        self.owner[name] = workload(w)
        return name

    def build(self) -> float:
        t0 = time.perf_counter()
        for i in range(self.args.pods):
            self.add(i)
        per_check = max(1, self.args.pods // self.args.workloads)
        for w in range(self.args.workloads):
            fleet = self.fleets[self.fleet_of(w)]
            self.api.create(
                {
                    "apiVersion": CHECK_API,
                    "kind": "ArtifactCheck",
                    "metadata": {"name": workload(w), "namespace": NAMESPACE},
                    "spec": {
                        "kubernetes": {
                            "namespace": NAMESPACE,
                            "selector": f"app=web,workload={workload(w)}",
                            "port": fleet["port"],
                        },
                        "release": {"manifests": [fleet["release_template"]]},
                        "manifestPath": "artifactcheck.json",
                        "manifestFormat": "native",
                        "interval": self.args.interval,
                        "sampling": {
                            "instances": max(1, round(per_check * self.args.sample_fraction)),
                            "assetsPerInstance": 5,
                            "seed": 1,
                        },
                        "policy": {"mode": "quarantine"},
                    },
                }
            )
        return time.perf_counter() - t0

    def stop(self) -> None:
        self.api.stop()


def attribute(
    requests: list[tuple[str, str]], owner: dict[str, str], shard_of: Any
) -> Counter[str]:
    """Requests per shard ("0", "1"...) by what their path names; "shared" otherwise."""
    out: Counter[str] = Counter()
    for _method, raw in requests:
        path = unquote(raw)
        if m := _SELECTOR.search(path):
            out[str(shard_of(m.group(1)))] += 1
        elif (m := _POD_PATH.search(path)) and m.group(1) in owner:
            out[str(shard_of(owner[m.group(1)]))] += 1
        elif (m := _CHECK_PATH.search(path)) and m.group(1).startswith("web-"):
            out[str(shard_of(m.group(1)))] += 1
        elif m := _LEASE_PATH.search(path):
            out[m.group(1) or "0"] += 1
        else:
            out["shared"] += 1
    return out


def checks_done(url: str, checks: set[str]) -> bool:
    try:
        values = scrape(url)
    except OSError:
        return False
    done = {
        k.split('check="', 1)[1].split('"', 1)[0]
        for k, v in values.items()
        if k.startswith("artifactcheck_cycles_total{") and v >= 1
    }
    return checks <= done


def admin_file(fleets: list[dict[str, Any]], concurrent_cycles: int) -> Path:
    admin = Path(tempfile.mkdtemp(prefix="acbench-admin-")) / "admin.yaml"
    # Tenancy limits out of the way, but for the cycles run at once: that limit is per
    # namespace AND per replica (docs/scaling.md), so N shards run up to N times as
    # many; unbounded, one controller starts all 80 first cycles at once and its event
    # loop falls so far behind that connects time out (measured: pods "unreachable").
    admin.write_text(
        json.dumps(
            {
                "egress": {"allow_loopback": True},
                "release_directories": [
                    {
                        "directory": str(Path(f["release_template"]).parent),
                        "namespaces": [NAMESPACE],
                    }
                    for f in fleets
                ],
                "limits": {
                    "min_interval": 0.1,
                    "max_instances": 100_000,
                    "max_checks_per_namespace": 10_000,
                    "requests_per_minute": 1e9,
                    "concurrent_cycles_per_namespace": concurrent_cycles,
                },
            }
        ),
        encoding="utf-8",
    )
    return admin


def run(
    name: str,
    running: list[int],
    total: int,
    fleets: list[dict[str, Any]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Build the cluster afresh, start the shards in ``running`` (of ``total``), measure."""
    from artifactcheck.control.shard import shard_of as owner_shard

    def shard_of(check: str) -> int:
        return owner_shard(NAMESPACE, check, total)

    cluster = Cluster(fleets, args)
    api = cluster.api
    out: dict[str, Any] = {"run": name, "total_shards": total, "shards": {}}
    procs: dict[int, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        out["build_seconds"] = cluster.build()
        per: dict[int, dict[str, Any]] = {}
        for s in running:
            mine = [workload(w) for w in range(args.workloads) if shard_of(workload(w)) == s]
            per[s] = {
                "checks": len(mine),
                "pods": sum(1 for w in cluster.owner.values() if shard_of(w) == s),
                "_checks": {f"{NAMESPACE}/{c}" for c in mine},
            }
        env = tool_env()
        env["ACBENCH_ADMIN_CONFIG"] = str(admin_file(fleets, args.concurrent_cycles))
        api.reset_requests()
        log(f"{name}: {args.pods} pods, {args.workloads} checks; shards {running} of {total}")
        started = time.perf_counter()
        for s in running:
            port = free_port()
            procs[s] = (
                subprocess.Popen(  # noqa: S603 - the controller processes we start
                    [
                        sys.executable,
                        "-m",
                        "bench.shards",
                        "--child",
                        api.url,
                        str(port),
                        str(s),
                        str(total),
                        str(args.lease_duration),
                    ],
                    cwd=ROOT,
                    env=env,
                    start_new_session=True,
                ),
                f"http://127.0.0.1:{port}/metrics",
            )
        waiting = set(running)
        deadline = time.perf_counter() + args.timeout
        while waiting and time.perf_counter() < deadline:
            for s in sorted(waiting):
                if checks_done(procs[s][1], per[s]["_checks"]):
                    per[s]["first_verdict_seconds"] = time.perf_counter() - started
                    waiting.discard(s)
            time.sleep(0.25)
        out["all_first_verdicts_seconds"] = time.perf_counter() - started
        startup = attribute(api.requests, cluster.owner, shard_of)
        for s in running:
            per[s]["pods_with_verdict"] = sum(
                1
                for p, w in cluster.owner.items()
                if shard_of(w) == s and gate_status(api, p) is not None
            )
            per[s]["startup_requests"] = startup.get(str(s), 0)
        out["startup_requests_shared"] = startup.get("shared", 0)
        firsts = {s: round(per[s].get("first_verdict_seconds", -1), 1) for s in running}
        log(f"  first verdicts: {firsts}")

        # steady state: a fixed window over an unchanged cluster
        api.reset_requests()
        time.sleep(args.steady_seconds)
        steady = attribute(api.requests, cluster.owner, shard_of)
        for s in running:
            per[s]["steady_requests"] = steady.get(str(s), 0)
        out["steady_seconds"] = args.steady_seconds
        out["steady_requests_shared"] = steady.get("shared", 0)

        # new pods, one every --new-every seconds, round robin over the workloads
        api.reset_requests()
        latencies: dict[int, list[float]] = {s: [] for s in running}
        pending: dict[str, tuple[int, float]] = {}
        lock = threading.Lock()
        done = threading.Event()

        def poll() -> None:
            while not (done.is_set() and (not pending or time.perf_counter() > give_up)):
                with lock:
                    items = list(pending.items())
                for pod, (s, ready_at) in items:
                    if gate_status(api, pod) is not None:
                        with lock:
                            pending.pop(pod, None)
                            latencies[s].append(time.perf_counter() - ready_at)
                time.sleep(0.005)

        give_up = float("inf")
        poller = threading.Thread(target=poll, name="verdict-poller", daemon=True)
        poller.start()
        for i in range(args.new):
            pod = cluster.add(args.pods + i)
            s = shard_of(cluster.owner[pod])
            if s in procs:
                with lock:
                    pending[pod] = (s, time.perf_counter())
            time.sleep(args.new_every)
        give_up = time.perf_counter() + 30
        done.set()
        poller.join(timeout=60)
        for s in running:
            lat = sorted(latencies[s])
            per[s]["new_pods"] = len(lat)
            if lat:
                per[s]["new_pod_latency"] = {
                    "p50": statistics.median(lat),
                    "p99": lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))],
                    "max": lat[-1],
                }
        out["new_pods_without_verdict"] = len(pending)
    finally:
        hwm = {s: peak_rss_mb(proc.pid) for s, (proc, _url) in procs.items()}
        for proc, _url in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # our own controller process
        for s, (proc, _url) in procs.items():
            timer = threading.Timer(60, lambda p=proc: os.killpg(p.pid, signal.SIGKILL))
            timer.start()
            _pid, status, usage = os.wait4(proc.pid, 0)
            timer.cancel()
            peak, source = peak_rss_of(hwm[s], usage)
            per.setdefault(s, {}).update(
                exit=os.waitstatus_to_exitcode(status),
                peak_rss_mb=peak,
                peak_rss_source=source,
                cpu_seconds=usage.ru_utime + usage.ru_stime,
            )
        cluster.stop()
    for s in running:
        per[s].pop("_checks", None)
        out["shards"][str(s)] = per[s]
    out["loadavg_after"] = os.getloadavg()
    return out


def describe(result: dict[str, Any]) -> Iterator[str]:
    for r in result["runs"]:
        yield f"{r['run']} (total shards {r['total_shards']}), loadavg after {r['loadavg_after']}:"
        for s, d in r["shards"].items():
            lat = d.get("new_pod_latency", {})
            yield (
                f"  shard {s}: {d.get('pods')} pods / {d.get('checks')} checks; first verdicts "
                f"{d.get('first_verdict_seconds', float('nan')):.1f} s "
                f"({d.get('pods_with_verdict')} gated); new pods p50 "
                f"{lat.get('p50', float('nan')):.2f} s p99 {lat.get('p99', float('nan')):.2f} s "
                f"(n={d.get('new_pods')}); RSS {d.get('peak_rss_mb', 0):.0f} MB; "
                f"CPU {d.get('cpu_seconds', 0):.0f} s; "
                f"requests start-up {d.get('startup_requests')} "
                f"steady {d.get('steady_requests')}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="controller shards vs one controller")
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--workloads", type=int, default=80, help="one ArtifactCheck each")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--runs", default="baseline,sharded", help="baseline,sharded,isolated")
    parser.add_argument("--new", type=int, default=40)
    parser.add_argument("--new-every", type=float, default=0.5)
    parser.add_argument("--interval", type=float, default=20.0)
    parser.add_argument("--sample-fraction", type=float, default=0.1, help="of each check's pods")
    parser.add_argument("--steady-seconds", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--concurrent-cycles", type=int, default=8, help="per namespace, per controller"
    )
    parser.add_argument("--name", default="shards")
    parser.add_argument(
        "--lease-duration",
        type=float,
        default=15.0,
        help="seconds; on a starved machine a short lease is lost and every check restarts",
    )
    parser.add_argument("--child", nargs=5, metavar=("API_URL", "PORT", "SHARD", "TOTAL", "LEASE"))
    args = parser.parse_args(argv)
    if args.child:
        url, port, shard, total, lease = args.child
        return child(url, int(port), int(shard), int(total), float(lease))
    # SIGTERM unwinds (controllers and fleets stopped), as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result: dict[str, Any] = {
        "benchmark": "shards",
        "machine": machine(),
        "args": vars(args),
        "runs": [],
    }
    extra = args.new + 8
    halves = [(args.pods + extra) // 2 + 1, (args.pods + extra) // 2 + 1]
    with ExitStack() as stack:
        fleets = [
            stack.enter_context(
                fleet_server(["--instances", str(n), "--drift", "0", "--first-host", first])
            ).info
            for n, first in zip(halves, ("127.210.0.1", "127.230.0.1"), strict=True)
        ]
        for which in args.runs.split(","):
            if which == "baseline":
                result["runs"].append(run("baseline", [0], 1, fleets, args))
            elif which == "sharded":
                result["runs"].append(
                    run("sharded", list(range(args.shards)), args.shards, fleets, args)
                )
            elif which == "isolated":
                for s in range(args.shards):
                    result["runs"].append(run(f"isolated-{s}", [s], args.shards, fleets, args))
            for line in describe({"runs": result["runs"][-1:]}):
                log(line)
    path = save(args.name, result)
    for line in describe(result):
        print(line)
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
