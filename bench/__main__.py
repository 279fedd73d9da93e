"""``python -m bench``: run every benchmark, one process each, and print a summary.

    python -m bench                 # every benchmark, full size (minutes)
    python -m bench --quick         # smaller sizes, a smoke test
    python -m bench --only sampled,cache
    python -m bench --before COPY   # the baseline tree in the same runs, where it can be

Each benchmark also runs alone (``python -m bench.sampled`` etc.) and writes its raw
figures to ``bench/results/NAME.json``; the summary lines are the ones they print. A
name ``MODULE:LABEL`` runs ``bench.MODULE`` with its own arguments (the 200- and
1,000-instance ``sampled`` runs). With ``--before COPY`` (a copy of another tree's
``artifactcheck`` package, e.g. ``git archive REV artifactcheck | tar -x -C COPY``),
the benchmarks that pair runs take it as their baseline (``--before``), and the
throughput benchmark runs once more from it (``--overlay``), right after.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from .common import ROOT, log, machine

FULL = {
    "startup": ["--runs", "15"],
    "report": [],
    "html_report": [],
    "investigate": ["--instances", "100", "--runs", "5"],
    "sampled:200": [
        "--instances",
        "200",
        "--assets",
        "6",
        "--runs",
        "5",
        "--name",
        "sampled-200x8",
    ],
    "sampled": ["--instances", "1000", "--assets", "6", "--runs", "3", "--name", "sampled-1000x8"],
    "baselines": ["--instances", "200,1000", "--runs", "3"],
    "throughput": ["--runs", "2"],
    "pages": ["--instances", "200", "--page-kb", "32", "--runs", "5"],
    "controller": ["--pods", "5000", "--new", "50", "--ip-first", "1", "--timeout", "600"],
    "cache": ["--entries", "20000", "--versions", "50", "--churn", "0.05"],
    "clients": ["--instances", "1000", "--per-host", "1"],
    "soak": ["--pods", "1000", "--minutes", "60", "--name", "soak-1h"],
    "shards": [
        "--pods",
        "20000",
        "--workloads",
        "80",
        "--shards",
        "4",
        "--new",
        "32",
        "--new-every",
        "0.5",
        "--steady-seconds",
        "20",
        "--concurrent-cycles",
        "8",
        "--timeout",
        "240",
        "--lease-duration",
        "120",
        "--name",
        "shards-20k",
    ],
}
QUICK = {
    "startup": ["--runs", "3", "--name", "startup-quick"],
    "report": [],
    "html_report": ["--instances", "200", "--runs", "1"],
    "investigate": ["--instances", "20", "--runs", "1", "--name", "investigate-quick"],
    "sampled": ["--instances", "200", "--runs", "1", "--name", "sampled-quick"],
    "baselines": ["--instances", "50", "--runs", "1", "--name", "baselines-quick"],
    "throughput": ["--scale", "0.1", "--runs", "1", "--name", "throughput-quick"],
    "pages": ["--instances", "20", "--runs", "1", "--name", "pages-quick"],
    "controller": [
        "--pods",
        "500",
        "--new",
        "10",
        "--interval",
        "10",
        "--sample-instances",
        "100",
        "--name",
        "controller-quick",
    ],
    "cache": ["--entries", "20000", "--versions", "5", "--name", "cache-quick"],
    "clients": ["--instances", "200", "--per-host", "1", "--name", "clients-quick"],
    "soak": ["--pods", "200", "--minutes", "3", "--warmup", "1", "--name", "soak-quick"],
    "shards": ["--pods", "2000", "--workloads", "8", "--shards", "2", "--name", "shards-quick"],
}
TIMEOUT = {
    "startup": 600,
    "report": 300,
    "html_report": 300,
    "investigate": 900,
    "sampled": 1200,
    "baselines": 1200,
    "throughput": 1800,
    "pages": 600,
    "controller": 1800,
    "cache": 900,
    "clients": 900,
    "soak": 4800,
    "shards": 1200,
}
#: Benchmarks that run a baseline tree in the same rounds (``--before DIR``).
PAIRED = frozenset({"startup", "investigate", "sampled", "baselines", "pages"})


def module(name: str) -> str:
    """``sampled:200`` -> ``sampled``: the benchmark module a plan entry runs."""
    return name.split(":", 1)[0]


def runs(name: str, plan: dict[str, list[str]], before: str | None) -> list[tuple[str, list[str]]]:
    """(label, arguments) of each run of plan entry ``name``."""
    args = plan[name]
    if before is None:
        return [(name, args)]
    if module(name) in PAIRED:
        return [(name, [*args, "--before", before])]
    if module(name) == "throughput":
        return [
            (name, args),
            (f"{name} (before)", [*args, "--overlay", before, "--name", "throughput-before"]),
        ]
    return [(name, args)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run every artifactcheck benchmark")
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--only", help="comma-separated: " + ",".join(FULL))
    parser.add_argument("--before", help="a copy of the baseline tree's artifactcheck package")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    names = args.only.split(",") if args.only else list(plan)
    unknown = [n for n in names if n not in plan]
    if unknown:
        parser.error(f"--only: no benchmark {', '.join(unknown)} (have {', '.join(plan)})")
    info = machine()
    log(
        f"machine: {info['nproc']} cores, {info['cpu_model']}, {info['memory_gb']} GB, "
        f"Python {info['python']}, nginx {info['nginx']}, load {info['loadavg_at_start']}"
    )
    lines: list[str] = []
    failed = 0
    for name in names:
        for label, bench_args in runs(name, plan, args.before):
            started = time.monotonic()
            log(f"== {label}")
            timeout = TIMEOUT[module(name)]
            try:
                out = subprocess.run(  # noqa: S603
                    [sys.executable, "-m", f"bench.{module(name)}", *bench_args],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                lines.append(f"{label}: did not finish within {timeout} s")
                failed += 1
                continue
            text = out.stdout.strip().splitlines()
            if out.returncode != 0 or not text:
                lines.append(f"{label}: failed (exit {out.returncode})")
                failed += 1
                continue
            # the figure, and the baseline's own line where a benchmark prints one
            shown = text[-2:] if text[-1].startswith("baseline") else text[-1:]
            lines.append(f"{' / '.join(shown)}  [{time.monotonic() - started:.0f} s]")
    print("\nsummary")
    for line in lines:
        print(f"- {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
