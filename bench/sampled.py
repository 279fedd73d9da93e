"""Benchmark 1: sampled verification of 1,000 instances vs the curl script on-call writes.

Each instance serves a ~500-entry native manifest; ``artifactcheck verify`` fetches it
and ``--sample-assets 5`` assets (plus ``index.html``, an entry point, always checked),
hashes them and judges the fleet, started as a subprocess with ``--output json`` so
interpreter start-up and imports count. The baseline fetches exactly the URLs the
tool fetched (read back from its JSON report; counted on the server with nginx's
stub_status) with ``xargs -P 16 sh -c 'curl -s URL | sha256sum'``. Runs alternate,
tool then curl, so both see the same machine load.

    python -m bench.sampled [--instances 1000] [--runs 3] [--server nginx|webfleet]
                            [--before DIR]

``--before DIR`` also runs the package in DIR (e.g. the main worktree) in every run,
before the tool under test and the curl baseline, so a change is measured against
its baseline in the same run and under the same load.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
    run_measured,
    save,
    summary,
    tool_env,
)

CURL = "xargs -P 16 -n 1 sh -c 'curl -s \"$0\" | sha256sum'"


def write_spec(
    path: Path, info: dict[str, Any], *, assets: int, extra_http: dict[str, Any]
) -> None:
    targets = [
        {"url": f"http://{h}:{info['port']}/", "version": info["version"], "name": f"web-{i + 1}"}
        for i, h in enumerate(info["hosts"])
    ]
    spec = {
        "targets": targets,
        "release": {"manifests": [info["release_template"]]},
        "manifest_path": "artifactcheck.json",
        "manifest_format": "native",
        "sampling": {"assets_per_instance": assets, "seed": 1},
        "http": {"instance_deadline": 30.0, **extra_http},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")


def urls_from_report(report: dict[str, Any]) -> list[str]:
    """Every URL the tool requested from the instances: manifest, then assets."""
    out: list[str] = []
    for result in report["results"]:
        base = result["url"]
        out.append(base + result["manifest"]["path"])
        out += [base + a["path"] for a in assets(report, result)]
    return out


def run_tool(spec: Path, out: Path, timeout: float, overlay: Path | None = None) -> Measured:
    argv = [*artifactcheck_command(overlay), "verify", "--config", str(spec), "--output", "json"]
    with out.open("wb") as fh:
        return run_measured(argv, stdout=fh, timeout=timeout, env=tool_env(overlay))


def run_curl(urls: Path, out: Path, timeout: float) -> Measured:
    with urls.open("rb") as src, out.open("wb") as dst:
        return run_measured(CURL, stdin=src, stdout=dst, timeout=timeout)


def bench(args: argparse.Namespace) -> dict[str, Any]:
    server_args = [
        "--instances",
        str(args.instances),
        "--server",
        args.server,
        "--drift",
        str(args.drift),
    ]
    extra_http = json.loads(args.http) if args.http else {}
    result: dict[str, Any] = {
        "benchmark": "sampled",
        "machine": machine(),
        "instances": args.instances,
        "assets_per_instance": args.assets,
        "server": args.server,
        "http_overrides": extra_http,
        "overlay": str(args.overlay) if args.overlay else None,
        "tool_command": " ".join(artifactcheck_command())
        + " verify --config spec.yaml --output json",
        "baseline_command": CURL + " < urls.txt",
        "runs": [],
    }
    with (
        tempfile.TemporaryDirectory(prefix="acbench-sampled-") as tmp,
        fleet_server(server_args) as server,
    ):
        work = Path(tmp)
        info = server.info
        result["manifest_entries"] = info["entries"]
        spec = work / "spec.yaml"
        write_spec(spec, info, assets=args.assets, extra_http=extra_http)
        report_path, urls_path = work / "report.json", work / "urls.txt"

        log(f"sampled: warm-up run ({args.instances} instances, server {args.server})")
        warm = run_tool(spec, report_path, args.timeout, args.overlay)
        report = json.loads(report_path.read_text())
        urls = urls_from_report(report)
        urls_path.write_text("\n".join(urls) + "\n")
        result["requests_per_run"] = len(urls)
        result["warmup"] = warm.as_dict()
        result["verdicts"] = report["counts"]
        result["exit_code"] = warm.returncode
        result["asset_sizes"] = sorted({a["size"] for a in assets(report, report["results"][0])})
        run_curl(urls_path, work / "curl.out", args.timeout)  # warm the page cache for curl too
        if args.before is not None:  # its byte-code cache, too
            run_tool(spec, work / "before.json", args.timeout, args.before)

        for i in range(args.runs):
            before = None
            if args.before is not None:
                before = run_tool(spec, work / "before.json", args.timeout, args.before)
                log(f"  run {i + 1}: before {before.wall:.2f}s (cpu {before.cpu:.2f}s)")
            n0, c0 = server.nginx_requests(), server.server_cpu()
            tool = run_tool(spec, report_path, args.timeout, args.overlay)
            n1, c1 = server.nginx_requests(), server.server_cpu()
            tool.extra = {"server_requests": _delta(n0, n1), "server_cpu": c1 - c0}
            tool.extra["report_elapsed_s"] = json.loads(report_path.read_text())["elapsed_s"]
            tool.extra["report_bytes"] = report_path.stat().st_size
            curl = run_curl(urls_path, work / "curl.out", args.timeout)
            n2, c2 = server.nginx_requests(), server.server_cpu()
            lines = (work / "curl.out").read_text().count("\n")
            curl.extra = {"server_requests": _delta(n1, n2), "server_cpu": c2 - c1, "hashes": lines}
            log(
                f"  run {i + 1}: artifactcheck {tool.wall:.2f}s (cpu {tool.cpu:.2f}s, "
                f"rss {tool.max_rss_mb:.0f} MB, {tool.extra['server_requests']} req), "
                f"curl {curl.wall:.2f}s (cpu {curl.cpu:.2f}s, {curl.extra['server_requests']} req)"
                f", load {curl.loadavg:.1f}"
            )
            row = {"tool": tool.as_dict(), "curl": curl.as_dict()}
            if before is not None:
                row["before"] = before.as_dict()
            result["runs"].append(row)

    tool_walls = [r["tool"]["wall"] for r in result["runs"]]
    curl_walls = [r["curl"]["wall"] for r in result["runs"]]
    ratios = [c / t for c, t in zip(curl_walls, tool_walls, strict=True)]
    result["summary"] = {
        "tool_wall": summary(tool_walls),
        "tool_cpu": summary([r["tool"]["cpu"] for r in result["runs"]]),
        "tool_rss_mb": summary([r["tool"]["max_rss_mb"] for r in result["runs"]]),
        "report_bytes": summary([r["tool"]["extra"]["report_bytes"] for r in result["runs"]]),
        "curl_wall": summary(curl_walls),
        "curl_cpu": summary([r["curl"]["cpu"] for r in result["runs"]]),
        "curl_rss_mb": summary([r["curl"]["max_rss_mb"] for r in result["runs"]]),
        "speedup_per_run": ratios,
        "speedup_median": statistics.median(ratios),
    }
    if args.before is not None:
        before_walls = [r["before"]["wall"] for r in result["runs"]]
        before_ratios = [c / b for c, b in zip(curl_walls, before_walls, strict=True)]
        result["summary"].update(
            before_wall=summary(before_walls),
            before_cpu=summary([r["before"]["cpu"] for r in result["runs"]]),
            before_speedup_per_run=before_ratios,
            before_speedup_median=statistics.median(before_ratios),
        )
    return result


def _delta(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a - 1  # minus our own status request


def describe(result: dict[str, Any]) -> str:
    s = result["summary"]
    return (
        f"sampled verification, {result['instances']} instances, "
        f"{result['requests_per_run']} GETs ({result['server']}): "
        f"artifactcheck {s['tool_wall']['median']:.2f} s wall "
        f"(cpu {s['tool_cpu']['median']:.2f} s, rss {s['tool_rss_mb']['median']:.0f} MB) vs "
        f"curl {s['curl_wall']['median']:.2f} s (cpu {s['curl_cpu']['median']:.2f} s): "
        f"{s['speedup_median']:.1f}x faster; JSON report {s['report_bytes']['median'] / 1e6:.2f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sampled verification benchmark")
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--assets", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--drift", type=float, default=0.01)
    parser.add_argument("--server", choices=("nginx", "webfleet"), default="nginx")
    parser.add_argument(
        "--http", help="JSON of http settings overrides, e.g. '{\"max_per_host\":2}'"
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="per command, seconds")
    parser.add_argument("--name", default="sampled", help="results file name")
    parser.add_argument("--overlay", type=Path, help="run the tool from this package copy")
    parser.add_argument(
        "--before", type=Path, help="also run this package copy (the baseline) in every run"
    )
    args = parser.parse_args(argv)
    result = bench(args)
    path = save(args.name, result)
    print(describe(result))
    if args.before is not None:
        s = result["summary"]
        print(
            f"baseline ({args.before}) in the same runs: {s['before_wall']['median']:.2f} s wall "
            f"(cpu {s['before_cpu']['median']:.2f} s): {s['before_speedup_median']:.1f}x curl"
        )
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
