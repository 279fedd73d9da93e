"""Benchmark: size and render time of a 1,000-instance sampled JSON report.

A synthetic report of the shape ``bench.sampled`` produces (1,000 instances, 7 files
fetched each, 492 "sampled out" rows shared by all, nginx's evidence headers with a
Date that changes every 200 instances), rendered as ``--output json`` to a pipe
renders it (compact); the best of 5. Run it under a second tree for the baseline:
``PYTHONPATH=DIR python -m bench.report``.

    python -m bench.report
"""

from __future__ import annotations

import hashlib
import sys
import time

from artifactcheck.model.values import (
    Coverage,
    Fetched,
    Instance,
    InstanceResult,
    Observation,
    Report,
    Verdict,
)
from artifactcheck.present.report import render_json


def build(instances: int = 1000) -> Report:
    rows = tuple((f"assets/gen/chunk-{n:04d}-{n:08x}.js", "sampled out") for n in range(492))
    results = []
    for i in range(instances):
        base = f"http://127.232.{i // 250}.{i % 250 + 1}:57767/"
        inst = Instance(name=f"web-{i + 1}", base_url=base)
        assets = {}
        for k in range(7):
            path = f"assets/gen/chunk-{k:04d}-{k:08x}.js"
            headers = {
                "server": "nginx/1.22.1",
                "date": f"Wed, 02 Dec 2026 00:06:{15 + i // 200:02d} GMT",
                "content-type": "application/javascript",
                "content-length": "50034",
                "last-modified": "Wed, 02 Dec 2026 00:05:51 GMT",
                "etag": f'"6b0f60df-c3{k}"',
                "cache-control": "public, max-age=31536000, immutable",
            }
            digest = hashlib.sha256(path.encode()).hexdigest()
            assets[path] = Fetched(
                url=base + path,
                path=path,
                status=200,
                hashes={"sha256": digest},
                size=50034,
                headers=headers,
                elapsed=0.0123,
            )
        obs = Observation(
            instance=inst, manifest_path="artifactcheck.json", assets=assets, sampled=True
        )
        coverage = Coverage(compared=7, total=499, not_compared=rows)
        results.append(
            InstanceResult(
                instance=inst,
                verdict=Verdict.CONSISTENT,
                reason="ok",
                coverage=coverage,
                observation=obs,
            )
        )
    return Report(results=tuple(results))


def main() -> int:
    report = build()
    best = float("inf")
    text = ""
    for _ in range(5):
        started = time.perf_counter()
        text = render_json(report, pretty=False)
        best = min(best, time.perf_counter() - started)
    print(
        f"1,000-instance sampled report: {len(text) / 1e6:.2f} MB, rendered in {best * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
