"""Benchmark: a gate's latency through the standby (forwarded) against the leader.

Two controllers (leader and standby) run against the in-process fake API server with
``--pods`` pods and one ArtifactCheck, each with its HTTP server on loopback. Once the
check has results, ``--requests`` verdict GETs are sent to each replica, alternating
leader and standby so both see the same machine load, by a client in its own process
(a fresh connection per request, as Argo Rollouts' web provider and Flagger make
them). ``--fresh`` more requests ask ``fresh=true`` (a new check of the selected pods
each: the time is then the cycle's, the hop is noise). Printed and written to
``bench/results/gate_latency.json``: p50, p90, p99 and max in milliseconds per target.

    python -m bench.gate_latency [--pods 20] [--requests 400] [--fresh 20]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
import urllib.request

from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.running import RunningController

from .common import RESULTS, log, machine

CHECK = "/verdicts/v1/namespaces/shop/artifactchecks/web"

#: The client: times ``n`` GETs of each URL, alternating, one connection each.
CLIENT = r"""
import json, sys, time, urllib.request, urllib.error
urls, n = json.loads(sys.argv[1]), int(sys.argv[2])
times = {name: [] for name in urls}
for _ in range(n):
    for name, url in urls.items():
        t = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=70) as r:
                r.read(); status = r.status
        except urllib.error.HTTPError as e:
            e.read(); status = e.code
        times[name].append((time.perf_counter() - t, status))
print(json.dumps(times))
"""


def percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))] * 1000, 2)

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": round(s[-1] * 1000, 2)}


def measure(urls: dict[str, str], n: int) -> dict[str, dict[str, float]]:
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, json.dumps(urls), str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    raw: dict[str, list[list[float]]] = json.loads(out.stdout)
    result = {}
    for name, samples in raw.items():
        statuses = sorted({int(st) for _, st in samples})
        result[name] = {**percentiles([t for t, _ in samples]), "statuses": statuses}
    return result  # type: ignore[return-value]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=20)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--fresh", type=int, default=20)
    args = ap.parse_args()
    logging.getLogger("artifactcheck").setLevel(logging.WARNING)
    with SimCluster(first_host="127.93.0.1", cdn_host="127.93.250.1") as cluster:
        # The CDN holds the release's files, so every pod is consistent ("passed").
        for path in (RELEASES["1.4.1"] / "assets").iterdir():
            cluster.cdn_site.overrides[f"assets/{path.name}"] = path.read_bytes()
        for _ in range(args.pods):
            cluster.add_pod(version="1.4.1")
        cluster.add_check(interval=3600)
        admin = cluster.lab_admin()
        leader = RunningController(cluster, identity="leader", admin=admin).start()
        lserver = leader.controller.serve_health(host="127.0.0.1", port=0)
        wait_for(lambda: leader.controller.is_leader, timeout=20)
        standby = RunningController(cluster, identity="standby", admin=admin).start()
        sserver = standby.controller.serve_health(host="127.0.0.1", port=0)
        try:
            wait_for(lambda: standby.controller.leader() is not None, timeout=20)
            base = {"leader": lserver.port, "standby": sserver.port}

            def settled() -> bool:
                url = f"http://127.0.0.1:{sserver.port}{CHECK}"
                try:
                    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310
                        return bool(json.loads(r.read())["result"] == "passed")
                except OSError:
                    return False

            wait_for(settled, timeout=60, interval=0.2)
            log(f"gate latency: {args.pods} pods, {args.requests} GETs per replica")
            started = time.monotonic()
            plain = measure(
                {k: f"http://127.0.0.1:{p}{CHECK}" for k, p in base.items()}, args.requests
            )
            fresh = measure(
                {k: f"http://127.0.0.1:{p}{CHECK}?fresh=true&timeout=30s" for k, p in base.items()},
                args.fresh,
            )
            elapsed = time.monotonic() - started
            forwarded = standby.controller.metrics.registry.get_sample_value(
                "artifactcheck_verdict_api_forwards_total", {"outcome": "forwarded"}
            )
        finally:
            sserver.stop()
            standby.stop()
            lserver.stop()
            leader.stop()
    doc = {
        "machine": machine(),
        "pods": args.pods,
        "requests": args.requests,
        "fresh_requests": args.fresh,
        "get_ms": plain,
        "fresh_get_ms": fresh,
        "standby_forwarded": forwarded,
        "seconds": round(elapsed, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gate_latency.json").write_text(json.dumps(doc, indent=2) + "\n")
    for kind, figures in (("GET", plain), ("GET fresh=true", fresh)):
        for name, f in figures.items():
            print(
                f"{kind:15} via {name:8} p50 {f['p50']:7.2f} ms  p90 {f['p90']:7.2f} ms  "
                f"p99 {f['p99']:7.2f} ms  max {f['max']:7.2f} ms  statuses {f['statuses']}"
            )


if __name__ == "__main__":
    main()
