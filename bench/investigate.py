"""Benchmark: ``investigate TARGET`` with 100 siblings, start to exit.

``investigate`` checks the target's siblings (every instance the other flags select)
over all their files, so the summary can say how many do the same: here 100 nginx
instances of the fixture Vite build (``--assets`` generated files each besides it),
given as URL targets in a spec file, one of them investigated, ``--output json``. The
pods of a workload are the same work after a pod list (the Kubernetes client and the
API server are not part of this figure). With ``--before DIR`` the package in DIR
runs in the same rounds, alternating.

    python -m bench.investigate [--instances 100] [--assets 0] [--runs 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from .common import (
    artifactcheck_command,
    fleet_server,
    from_baseline,
    log,
    machine,
    run_measured,
    runs_summary,
    save,
    tool_env,
)
from .sampled import write_spec


def bench(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "investigate",
        "machine": machine(),
        "instances": args.instances,
        "runs": [],
    }
    server_args = ["--instances", str(args.instances), "--assets", str(args.assets)]
    with (
        tempfile.TemporaryDirectory(prefix="acbench-investigate-") as tmp,
        fleet_server([*server_args, "--drift", "0"]) as server,
    ):
        info = server.info
        spec = Path(tmp) / "spec.yaml"
        write_spec(spec, info, assets=0, extra_http={})
        text = spec.read_text().replace("sampling:\n  assets_per_instance: 0\n  seed: 1\n", "")
        spec.write_text(text)  # investigate checks every file: no sampling
        target = f"http://{info['hosts'][0]}:{info['port']}/"
        argv = [
            *artifactcheck_command(),
            "investigate",
            target,
            "--config",
            str(spec),
            "--output",
            "json",
        ]
        result["tool_command"] = " ".join(argv[len(artifactcheck_command()) :])
        out = Path(tmp) / "investigation.json"
        with out.open("wb") as fh:  # warm-up: byte-code cache
            warm = run_measured(argv, stdout=fh, timeout=args.timeout, env=tool_env())
        doc = json.loads(out.read_text())
        result["exit_code"] = warm.returncode
        result["files_per_instance"] = len(doc.get("assets", []))
        if args.before is not None:
            before = from_baseline(argv, args.before)
            run_measured(before, timeout=args.timeout, env=tool_env(args.before))
        for i in range(args.runs):
            row = {"tool": run_measured(argv, timeout=args.timeout, env=tool_env())}
            if args.before is not None:
                row["before"] = run_measured(
                    before, timeout=args.timeout, env=tool_env(args.before)
                )
            log(
                f"  run {i + 1}: "
                + ", ".join(f"{n} {m.wall:.3f}s (cpu {m.cpu:.3f}s)" for n, m in row.items())
            )
            result["runs"].append({n: m.as_dict() for n, m in row.items()})
    result["summary"] = runs_summary(result["runs"], ratios=("wall",))
    return result


def describe(result: dict[str, Any]) -> str:
    s = result["summary"]
    text = (
        f"investigate one of {result['instances']} instances "
        f"({result['files_per_instance']} files each, all checked): "
        f"{s['tool_wall']['median']:.3f} s wall (cpu {s['tool_cpu']['median']:.3f} s), "
        f"exit {result['exit_code']}"
    )
    if "before_wall" in s:
        text += (
            f"; before {s['before_wall']['median']:.3f} s wall in the same rounds "
            f"(paired ratio {s['tool_over_before_wall']:.2f})"
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="investigate benchmark")
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--assets", type=int, default=0, help="generated files per instance")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120.0, help="per command, seconds")
    parser.add_argument("--name", default="investigate", help="results file name")
    parser.add_argument(
        "--before", type=Path, help="also run this package copy (the baseline) in every run"
    )
    args = parser.parse_args(argv)
    result = bench(args)
    path = save(args.name, result)
    print(describe(result))
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
