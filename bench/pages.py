"""Benchmark: ``verify`` of a fleet whose entry page is server-rendered, N KiB.

    python -m bench.pages [--instances 200] [--page-kb 32] [--runs 5] [--before DIR]

Every instance of a fleet serves the same entry page, and ``verify`` reads it (``pages:
['/']``, the default) to know what a browser loads. A shop's landing page, rendered on
the server, is tens of KiB of markup around the build's scripts and stylesheets, and
tokenizing it is the standard library's ``html.parser`` in pure Python. This times the
whole command (start-up included) on one nginx fleet (``bench.fleet_server --page-kb``:
the Vite fixture build, its ``index.html`` grown to ``--page-kb`` KiB of product cards,
answered at each instance's URL), with ``--before DIR`` the tree in DIR in the same
rounds, in turn, and checks that both give the same verdicts and read the same files
from the pages.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from .common import fleet_server, log, machine, runs_summary, save
from .sampled import run_tool, write_spec


def _read(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Per instance, its verdict and what its pages named (not timings)."""
    return [
        (r["instance"], r["verdict"], r["reason"], json.dumps(r.get("pages"), sort_keys=True))
        for r in report["results"]
    ]


def bench(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "pages",
        "machine": machine(),
        "instances": args.instances,
        "page_kb": args.page_kb,
        "style_kb": args.style_kb,
        "before": str(args.before) if args.before else None,
        "runs": [],
    }
    server_args = [
        "--instances",
        str(args.instances),
        "--drift",
        "0",
        "--page-kb",
        str(args.page_kb),
        "--style-kb",
        str(args.style_kb),
        "--assets",
        str(args.assets),
    ]
    with (
        tempfile.TemporaryDirectory(prefix="acbench-pages-") as tmp,
        fleet_server(server_args) as server,
    ):
        work = Path(tmp)
        spec = work / "spec.yaml"
        write_spec(spec, server.info, assets=6, extra_http={})
        trees: dict[str, Path | None] = {"tool": None}
        if args.before is not None:
            trees["before"] = args.before
        reads = {}
        for name, tree in trees.items():  # warm-up: byte-code caches, and the reports
            out = work / f"{name}.json"
            run_tool(spec, out, args.timeout, tree)
            report = json.loads(out.read_text())
            reads[name] = _read(report)
            result[f"{name}_counts"] = {k: v for k, v in report["counts"].items() if v}
        loaded = json.loads(reads["tool"][0][3] or "{}").get("loaded_by", {})
        result["page_files"] = sum(len(files) for files in loaded.values())
        if "before" in reads and reads["before"] != reads["tool"]:
            raise RuntimeError("the two trees read the fleet's pages differently")
        for i in range(args.runs):
            row = {}
            for name, tree in trees.items():
                row[name] = run_tool(spec, work / f"{name}.json", args.timeout, tree).as_dict()
            log(
                f"  run {i + 1}: "
                + ", ".join(f"{n} {m['wall']:.2f}s (cpu {m['cpu']:.2f}s)" for n, m in row.items())
            )
            result["runs"].append(row)
    result["summary"] = runs_summary(result["runs"])
    return result


def describe(result: dict[str, Any]) -> str:
    s = result["summary"]
    text = (
        f"verify of {result['instances']} instances, a {result['page_kb']} KiB entry page"
        f" ({result.get('style_kb', 0)} KiB of it inline CSS)"
        f" naming {result['page_files']} files: {s['tool_wall']['median']:.2f} s wall"
        f" (cpu {s['tool_cpu']['median']:.2f} s)"
    )
    if "before_wall" in s:
        text += (
            f"; before {s['before_wall']['median']:.2f} s (cpu {s['before_cpu']['median']:.2f}"
            f" s), paired ratio wall {s['tool_over_before_wall']:.2f},"
            f" cpu {s['tool_over_before_cpu']:.2f}"
        )
    return text + f"; verdicts {result['tool_counts']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="verify of a fleet with a large entry page")
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--page-kb", type=int, default=32, help="the entry page's size, KiB")
    parser.add_argument("--style-kb", type=int, default=0, help="KiB of inline CSS in the page")
    parser.add_argument("--assets", type=int, default=40, help="generated assets per site")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0, help="per command, seconds")
    parser.add_argument("--before", type=Path, help="also run this package copy every run")
    parser.add_argument("--name", default="pages", help="results file name")
    args = parser.parse_args(argv)
    result = bench(args)
    path = save(args.name, result)
    print(describe(result))
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
