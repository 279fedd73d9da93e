"""Benchmark 4: memory of the release manifest cache (``expect.Expectations``).

Native release manifests of 20,000 entries each (paths and sizes like a large
hashed build) are written to a temporary directory and loaded through
``Expectations(TemplateSource(...))``, the path ``verify`` and the controller use.
Memory is measured with tracemalloc (Python allocations, after a GC): one cached
manifest, then 50 versions cached (``max_versions=50``). For scale, the same figures
are given for the document as ``json.loads`` returns it and for the file on disk.

    python -m bench.cache [--entries 20000] [--versions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from .common import log, machine, save

MB = 1024 * 1024


def write_release(path: Path, version: str, entries: int) -> int:
    """A native release manifest of ``entries`` files; returns its size in bytes."""
    dirs = ("assets", "assets/chunks", "static/js", "static/css", "static/media", "img")
    files = {}
    for i in range(entries):
        digest = hashlib.sha256(f"{version}:{i}".encode()).hexdigest()
        ext = (".js", ".css", ".svg", ".woff2", ".png")[i % 5]
        name = f"{dirs[i % len(dirs)]}/module-{i:05d}-{digest[:8]}{ext}"
        files[name] = {"sha256": digest, "size": 1000 + (i * 7919) % 200_000}
    files["index.html"] = {"sha256": hashlib.sha256(version.encode()).hexdigest(), "size": 512}
    doc = {"schema": "artifactcheck/release-manifest/v1", "version": version, "files": files}
    data = json.dumps(doc, indent=2, sort_keys=True).encode()
    path.write_bytes(data)
    return len(data)


def write_series(folder: Path, versions: list[str], entries: int, churn: float) -> None:
    """Releases where each one rebuilds ``churn`` of the previous one's files (new hash,
    new hashed name), the rest unchanged: what consecutive releases of an app look like."""
    rng = random.Random(3)
    digests = [hashlib.sha256(f"base:{i}".encode()).hexdigest() for i in range(entries)]
    for version in versions:
        for i in rng.sample(range(entries), int(entries * churn)):
            digests[i] = hashlib.sha256(f"{version}:{i}".encode()).hexdigest()
        files = {
            f"assets/module-{i:05d}-{d[:8]}.js": {"sha256": d, "size": 1000 + (i * 7919) % 200_000}
            for i, d in enumerate(digests)
        }
        doc = {"schema": "artifactcheck/release-manifest/v1", "version": version, "files": files}
        (folder / f"{version}.json").write_bytes(json.dumps(doc, sort_keys=True).encode())


def share_entries(cache: Any) -> int:
    """Simulates a proposal (not in the package): a new release reuses the entry objects
    of cached releases that are equal, so unchanged files are held once. Returns how
    many distinct entries remain. Uses the cache's private dict: bench code only."""
    from artifactcheck.model.records import replace

    seen: dict[tuple[Any, ...], Any] = {}
    for version, (manifest, at) in list(cache._cache.items()):
        files = {
            p: seen.setdefault((p, tuple(sorted(e.hashes.items())), e.size, e.entry), e)
            for p, e in manifest.files.items()
        }
        cache._cache[version] = (replace(manifest, files=files), at)
    return len(seen)


def traced(fn: Any) -> tuple[Any, int]:
    """(result, bytes still allocated by it after a GC) of calling ``fn``."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    result = fn()
    gc.collect()
    return result, tracemalloc.get_traced_memory()[0] - before


async def fill(template: str, versions: list[str], max_versions: int) -> tuple[Any, list[float]]:
    from artifactcheck.manifests.limits import ManifestLimits
    from artifactcheck.release.sources import Expectations, TemplateSource

    source = TemplateSource(template, fetcher=None, limits=ManifestLimits())
    cache = Expectations(source, max_versions=max_versions)
    times = []
    for version in versions:
        t0 = time.perf_counter()
        got = await cache.get(version)
        times.append(time.perf_counter() - t0)
        assert got.manifest is not None, got.error
    return cache, times


def bench(args: argparse.Namespace) -> dict[str, Any]:
    import artifactcheck.release.sources  # noqa: F401 - imports are not part of the figures

    versions = [f"2.{i}.0" for i in range(args.versions)]
    with tempfile.TemporaryDirectory(prefix="acbench-cache-") as tmp:
        sizes = [write_release(Path(tmp) / f"{v}.json", v, args.entries) for v in versions]
        template = str(Path(tmp) / "{version}.json")
        tracemalloc.start()
        doc, doc_bytes = traced(lambda: json.loads(Path(tmp, f"{versions[0]}.json").read_bytes()))
        del doc
        (one, times_one), one_bytes = traced(
            lambda: asyncio.run(fill(template, versions[:1], args.versions))
        )
        del one
        (many, times), many_bytes = traced(
            lambda: asyncio.run(fill(template, versions, args.versions))
        )
        peak = tracemalloc.get_traced_memory()[1]
        cached = len(many.known())
        del many
        tracemalloc.stop()
        # load times without tracemalloc (it slows every allocation several times)
        gc.collect()
        _cache, untraced = asyncio.run(fill(template, versions[:10], args.versions))
        del _cache
    with tempfile.TemporaryDirectory(prefix="acbench-cache-churn-") as tmp:
        write_series(Path(tmp), versions, args.entries, args.churn)
        template = str(Path(tmp) / "{version}.json")
        tracemalloc.start()
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        series, _times = asyncio.run(fill(template, versions, args.versions))
        gc.collect()
        churn_bytes = tracemalloc.get_traced_memory()[0] - base
        distinct = share_entries(series)
        gc.collect()
        shared_bytes = tracemalloc.get_traced_memory()[0] - base
        del series
        tracemalloc.stop()
    entries = args.entries + 1
    return {
        "benchmark": "cache",
        "machine": machine(),
        "entries_per_manifest": entries,
        "versions": args.versions,
        "file_bytes": sizes[0],
        "json_loads_bytes": doc_bytes,
        "one_manifest_bytes": one_bytes,
        "bytes_per_entry": one_bytes / entries,
        "fifty_versions_bytes": many_bytes,
        "versions_cached": cached,
        "tracemalloc_peak_bytes": peak,
        "load_seconds_untraced": sorted(untraced)[len(untraced) // 2],
        "churn": args.churn,
        "churn_series_bytes": churn_bytes,
        "churn_series_shared_entries_bytes": shared_bytes,
        "churn_series_distinct_entries": distinct,
        "load_seconds_traced": sorted(times)[len(times) // 2],
    }


def describe(r: dict[str, Any]) -> str:
    return (
        f"release manifest cache: one manifest of {r['entries_per_manifest']} entries = "
        f"{r['one_manifest_bytes'] / MB:.1f} MiB ({r['bytes_per_entry']:.0f} B/entry; "
        f"json.loads of it {r['json_loads_bytes'] / MB:.1f} MiB, file {r['file_bytes'] / MB:.1f}"
        f" MiB); {r['versions_cached']} versions cached = "
        f"{r['fifty_versions_bytes'] / MB:.0f} MiB; read+parse "
        f"{r['load_seconds_untraced'] * 1000:.0f} ms per version; releases with "
        f"{r['churn']:.0%} churn: {r['churn_series_bytes'] / MB:.0f} MiB for "
        f"{r['versions_cached']}, {r['churn_series_shared_entries_bytes'] / MB:.0f} MiB if equal "
        f"entries were shared (simulated proposal)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="release manifest cache memory")
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--versions", type=int, default=50)
    parser.add_argument("--name", default="cache")
    parser.add_argument("--churn", type=float, default=0.05, help="files changed per release")
    args = parser.parse_args(argv)
    result = bench(args)
    path = save(args.name, result)
    print(describe(result))
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
