"""Benchmark 2: full verification throughput of one instance serving ~2 GB.

Files of mixed sizes (KB to hundreds of MB) are generated in a temporary directory
and served by nginx on one loopback address; ``artifactcheck verify`` fetches and
hashes every byte of every file (``sampling.assets_per_instance: null``) through the
Fetcher. The bound is a plain ``hashlib.sha256`` loop over the same files read from
disk (page cache), in its own process, measured in the same run. Peak RSS is reported
for the mixed run and for a small-files-only and a large-files-only run, to show it
does not grow with asset size (bodies are hashed while streaming).

    python -m bench.throughput [--scale 1.0] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from artifactcheck.present.report import assets

from .common import (
    Measured,
    artifactcheck_command,
    fleet_server,
    log,
    machine,
    product_python,
    run_measured,
    save,
    summary,
    tool_env,
)

MB = 1024 * 1024
BOUND = """
import hashlib, sys, time
paths = open(sys.argv[1]).read().split("\\n")
t0 = time.perf_counter(); total = 0
for p in paths:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk); total += len(chunk)
print(total, time.perf_counter() - t0)
"""


def plan(scale: float, seed: int) -> dict[str, list[int]]:
    """Sizes of the files per tier: ~0.4 GB small, ~0.5 GB medium, ~1 GB large at 1.0."""
    rng = random.Random(seed)
    small = [rng.randint(4 * 1024, 256 * 1024) for _ in range(int(3000 * scale))]
    medium = [rng.randint(1 * MB, 16 * MB) for _ in range(max(1, int(60 * scale)))]
    large = [int(s * MB * scale) for s in (100, 200, 300, 400)]
    return {"small": small, "medium": medium, "large": large}


def generate(root: Path, tiers: dict[str, list[int]]) -> dict[str, list[str]]:
    """Write the files (random bytes); returns relative paths per tier."""
    out: dict[str, list[str]] = {}
    block = os.urandom(8 * MB)  # rotated, so files differ without 2 GB of urandom
    for tier, sizes in tiers.items():
        (root / "assets" / tier).mkdir(parents=True, exist_ok=True)
        paths = []
        for i, size in enumerate(sizes):
            rel = f"assets/{tier}/{tier}-{i:05d}.bin"
            with (root / rel).open("wb") as fh:
                left, offset = size, (i * 7919) % len(block)
                fh.write(i.to_bytes(8, "big"))
                left -= 8
                while left > 0:
                    piece = block[offset : offset + left]
                    fh.write(piece)
                    left -= len(piece)
                    offset = 0
            paths.append(rel)
        out[tier] = paths
    return out


def write_manifests(root: Path, releases: Path, name: str, paths: list[str]) -> None:
    """Served manifest NAME.json listing ``paths``; release = the same plus itself."""
    from artifactcheck.manifests import native
    from artifactcheck.model.values import Manifest

    builder = native.Builder(version=name)
    for rel in paths:
        with (root / rel).open("rb") as fh:
            builder.add_stream(rel, fh)
    served = root / f"{name}.json"
    served.write_bytes(native.dump(builder.manifest()))
    with served.open("rb") as fh:
        builder.add_stream(served.name, fh)
    release: Manifest = builder.manifest()
    (releases / f"{name}.json").write_bytes(native.dump(release))


def write_spec(
    path: Path, url: str, releases: Path, name: str, transport: str | None = None
) -> None:
    spec = {
        "targets": [{"url": url, "version": name, "name": "big-1"}],
        "release": {"manifests": [str(releases / "{version}.json")]},
        "manifest_path": f"{name}.json",
        "manifest_format": "native",
        "sampling": {"assets_per_instance": None},
        "http": {
            "max_body_bytes": 1024 * MB,
            "request_timeout": 600.0,
            "instance_deadline": 3600.0,
            "read_timeout": 60.0,
            **({"transport": transport} if transport else {}),
        },
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")


def run_tool(
    spec: Path, out: Path, timeout: float, overlay: Path | None = None
) -> tuple[Measured, dict[str, Any]]:
    argv = [*artifactcheck_command(overlay), "verify", "--config", str(spec), "--output", "json"]
    with out.open("wb") as fh:
        measured = run_measured(argv, stdout=fh, timeout=timeout, env=tool_env(overlay))
    report = json.loads(out.read_text())
    result = report["results"][0]
    rows = assets(report, result)
    measured.extra = {
        "verdict": result["verdict"],
        "assets": len(rows),
        "bytes": sum(a["size"] or 0 for a in rows),
        "report_elapsed_s": report["elapsed_s"],
        "errors": sum(1 for a in rows if a["error"]),
    }
    return measured, report


def run_bound(paths_file: Path, timeout: float) -> Measured:
    out = Path(str(paths_file) + ".out")
    with out.open("w") as fh:
        measured = run_measured(
            [product_python(), "-c", BOUND, str(paths_file)], stdout=fh, timeout=timeout
        )
    total, seconds = out.read_text().split()
    measured.extra = {"bytes": int(total), "hash_seconds": float(seconds)}
    return measured


def bench(args: argparse.Namespace) -> dict[str, Any]:
    tiers = plan(args.scale, args.seed)
    result: dict[str, Any] = {
        "benchmark": "throughput",
        "machine": machine(),
        "files": {k: len(v) for k, v in tiers.items()},
        "bytes": {k: sum(v) for k, v in tiers.items()},
        "tool_command": " ".join(artifactcheck_command())
        + " verify --config spec-NAME.yaml --output json",
        "bound": "python: hashlib.sha256 over each file, read 1 MiB at a time",
        "transport": args.transport or "http1 (default)",
        "runs": [],
    }
    reuse = args.data is not None and (args.data / "site").is_dir()
    work = args.data or Path(tempfile.mkdtemp(prefix="acbench-throughput-"))
    try:
        work.mkdir(parents=True, exist_ok=True)
        os.chmod(work, 0o755)
        site, releases = work / "site", work / "releases"
        site.mkdir(exist_ok=True)
        releases.mkdir(exist_ok=True)
        if reuse:
            log(f"throughput: reusing the files in {site}")
            paths = {
                t: [f"assets/{t}/{t}-{i:05d}.bin" for i in range(len(v))] for t, v in tiers.items()
            }
        else:
            log(f"throughput: generating {sum(result['bytes'].values()) / MB:.0f} MiB in {site}")
            paths = generate(site, tiers)
        everything = paths["small"] + paths["medium"] + paths["large"]
        sets = {"all": everything, "small": paths["small"], "large": paths["large"]}
        for name, rels in sets.items():
            write_manifests(site, releases, name, rels)
            (work / f"{name}.paths").write_text("\n".join(str(site / r) for r in rels))
        result["set_bytes"] = {
            n: sum((site / r).stat().st_size for r in rels) for n, rels in sets.items()
        }
        # read everything once so both sides start from the page cache
        run_bound(work / "all.paths", args.timeout)
        with fleet_server(
            ["--site", str(site), "--instances", "1", "--first-host", "127.201.0.1"]
        ) as server:
            url = f"http://{server.info['hosts'][0]}:{server.info['port']}/"
            for name in sets:
                write_spec(work / f"spec-{name}.yaml", url, releases, name, args.transport)
            run_tool(
                work / "spec-small.yaml", work / "report.json", args.timeout, args.overlay
            )  # warm-up
            for i in range(args.runs):
                c0 = server.server_cpu()
                tool, _report = run_tool(
                    work / "spec-all.yaml", work / "report.json", args.timeout, args.overlay
                )
                tool.extra["server_cpu"] = server.server_cpu() - c0
                bound = run_bound(work / "all.paths", args.timeout)
                run = {"tool": tool.as_dict(), "bound": bound.as_dict()}
                log(
                    f"  run {i + 1}: artifactcheck {tool.extra['bytes'] / MB:.0f} MiB in "
                    f"{tool.wall:.2f}s wall ({tool.extra['report_elapsed_s']:.2f}s check, "
                    f"cpu {tool.cpu:.2f}s, rss {tool.max_rss_mb:.0f} MB, "
                    f"{tool.extra['verdict']}), bound {bound.extra['hash_seconds']:.2f}s"
                )
                result["runs"].append(run)
            for name in ("small", "large"):
                tool, _report = run_tool(
                    work / f"spec-{name}.yaml", work / "report.json", args.timeout, args.overlay
                )
                result[f"rss_{name}_only"] = tool.as_dict()
                log(
                    f"  {name}-only: {tool.extra['assets']} files, "
                    f"{tool.extra['bytes'] / MB:.0f} MiB, rss {tool.max_rss_mb:.0f} MB, "
                    f"{tool.wall:.2f}s"
                )
    finally:
        if args.data is None:
            shutil.rmtree(work, ignore_errors=True)

    def rate(run: dict[str, Any], key: str, seconds: str) -> float:
        return float(run[key]["extra"]["bytes"] / run[key][seconds])

    check_rates = [
        r["tool"]["extra"]["bytes"] / r["tool"]["extra"]["report_elapsed_s"] for r in result["runs"]
    ]
    wall_rates = [rate(r, "tool", "wall") for r in result["runs"]]
    bound_rates = [
        r["bound"]["extra"]["bytes"] / r["bound"]["extra"]["hash_seconds"] for r in result["runs"]
    ]
    result["summary"] = {
        "tool_MiBps_check": summary([x / MB for x in check_rates]),
        "tool_MiBps_wall": summary([x / MB for x in wall_rates]),
        "bound_MiBps": summary([x / MB for x in bound_rates]),
        "fraction_of_bound_check": [c / b for c, b in zip(check_rates, bound_rates, strict=True)],
        "fraction_of_bound_wall": [c / b for c, b in zip(wall_rates, bound_rates, strict=True)],
        "rss_mb_all": [r["tool"]["max_rss_mb"] for r in result["runs"]],
        "rss_mb_small_only": result["rss_small_only"]["max_rss_mb"],
        "rss_mb_large_only": result["rss_large_only"]["max_rss_mb"],
    }
    return result


def describe(result: dict[str, Any]) -> str:
    s = result["summary"]
    frac = sorted(s["fraction_of_bound_wall"])[len(s["fraction_of_bound_wall"]) // 2]
    return (
        f"full verification, {sum(result['bytes'].values()) / MB:.0f} MiB in "
        f"{sum(result['files'].values())} files: artifactcheck "
        f"{s['tool_MiBps_wall']['median']:.0f} MiB/s wall "
        f"({s['tool_MiBps_check']['median']:.0f} MiB/s in the check) vs hashlib bound "
        f"{s['bound_MiBps']['median']:.0f} MiB/s: {frac:.0%} of the bound (target >= 60%); "
        f"peak RSS small-only {s['rss_mb_small_only']:.0f} MB, large-only "
        f"{s['rss_mb_large_only']:.0f} MB, mixed {max(s['rss_mb_all']):.0f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="full verification throughput benchmark")
    parser.add_argument("--scale", type=float, default=1.0, help="1.0 = ~2 GB")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--name", default="throughput")
    parser.add_argument("--data", type=Path, help="keep (and reuse) the files in this dir")
    parser.add_argument("--overlay", type=Path, help="run the tool from this package copy")
    parser.add_argument("--transport", choices=("http1", "httpx"), help="http.transport")
    args = parser.parse_args(argv)
    result = bench(args)
    path = save(args.name, result)
    print(describe(result))
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
