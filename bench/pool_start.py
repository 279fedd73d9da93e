"""Benchmark: what starting the observing processes costs, by start method.

Three figures, each from a fresh interpreter per run (the package imported before the
clock starts), milliseconds until every worker has answered:

* ``fork`` and ``forkserver``: a :class:`~artifactcheck.observe.pool.WorkerPool` of 2
  (``lasting`` False and True), each worker given an empty job (started, its Fetcher
  built, its counts sent back);
* ``verify``: ``verify --processes 3``'s path (``observe_in_processes``) with 2 workers,
  each observing one instance that refuses the connection (one try), this process
  observing none.

    python -m bench.pool_start [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from typing import Any

from .common import log, machine, save

PROBE = """
import asyncio, sys, time
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Instance
from artifactcheck.observe.instance import Observer
from artifactcheck.observe.pool import FetchSetup, Job, WorkerPool
from artifactcheck.observe.processes import observe_in_processes
from artifactcheck.observe.spread import shares

SPEC = CheckSpec.model_validate(
    {"targets": [{"url": "http://127.0.0.1:9/"}], "retry": {"attempts": 1}}
)

async def pool(lasting):
    job = Job(spec=SPEC, seed=1, instances=[], first=False, releases=False, fetch=FetchSetup())
    async with Fetcher(http=SPEC.http, retry=SPEC.retry) as fetcher:
        observer = Observer(spec=SPEC, fetcher=fetcher, expectations=None)
        started = time.perf_counter()
        workers = WorkerPool(2, lasting=lasting).start()
        await asyncio.gather(*(workers.run_job(i, job, observer, {}, {}) for i in range(2)))
        took = time.perf_counter() - started
        workers.close()
        return took

async def verify():
    parts = [[], [Instance(name="a", base_url="http://127.0.0.2:9/")],
             [Instance(name="b", base_url="http://127.0.0.3:9/")]]
    async with Fetcher(http=SPEC.http, retry=SPEC.retry) as fetcher:
        observer = Observer(spec=SPEC, fetcher=fetcher, expectations=None)
        async def here(part):
            pass
        into = {}
        started = time.perf_counter()
        await observe_in_processes(observer, parts, share=shares(SPEC, 3), into=into,
                                   loaded={}, observe_here=here)
        assert sorted(into) == ["a", "b"], into
        return time.perf_counter() - started

if __name__ == "__main__":
    kind = sys.argv[1]
    run = verify() if kind == "verify" else pool(kind == "forkserver")
    print(asyncio.run(run) * 1000)
"""

KINDS = ("fork", "forkserver", "verify")


def bench(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for n in range(args.runs):  # the kinds in turn, so load drifts hit each alike
        for kind in KINDS:
            out = subprocess.run(
                [sys.executable, "-c", PROBE, kind],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            runs[kind].append(float(out.stdout.strip().splitlines()[-1]))
        log(f"run {n + 1}/{args.runs}: " + ", ".join(f"{k} {runs[k][-1]:.0f} ms" for k in KINDS))
    return {
        "benchmark": "pool_start",
        "machine": machine(),
        "runs": runs,
        "median_ms": {k: statistics.median(v) for k, v in runs.items()},
        "range_ms": {k: [min(v), max(v)] for k, v in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    result = bench(args)
    save("pool_start", result)
    for kind in KINDS:
        low, high = result["range_ms"][kind]
        print(f"{kind}: {result['median_ms'][kind]:.0f} ms ({low:.0f}-{high:.0f})")


if __name__ == "__main__":
    main()
