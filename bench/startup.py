"""Benchmark: ``verify`` of ONE instance, 8 files, start to exit.

A CI check of a small fleet is bound by start-up, not by the network: this times the
whole command (interpreter start, imports, set-up, 8 GETs, the JSON report) against
one nginx instance of the fixture build, ``--sample-assets 6`` (the manifest, the
entry page and 6 assets). With ``--before DIR`` the package in DIR runs in the same
rounds, alternating with the tree under test, so the ratio is taken pair by pair on
the same machine load; two floors run in the same rounds too: the interpreter alone
(``python -c pass``) and the CLI module's import (``import artifactcheck.cli.main``).

Wall and CPU time move with the load of a shared machine; ``--instructions`` also counts
each command's instructions once under ``valgrind --tool=callgrind`` (``PYTHONHASHSEED=0``,
byte-code cached), the same total whatever the load, so a change of a few per cent shows.
For that count the tree under test is put on ``PYTHONPATH`` like the baseline copy is,
so both pay the same one extra ``sys.path`` entry ahead of the standard library (about
5 M instructions over the ~250 modules a run imports).

    python -m bench.startup [--runs 15] [--before DIR] [--instructions]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
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
    product_python,
    run_measured,
    runs_summary,
    save,
    tool_env,
)
from .sampled import write_spec

FILES = 8  # the manifest, index.html and --sample-assets 6
#: The directory holding the package under test (``PYTHONPATH`` for its count).
TREE = Path(__file__).resolve().parents[1]
_COLLECTED = re.compile(r"Collected : (\d+)")


def instructions(argv: list[str], *, overlay: Path | None, timeout: float) -> int:
    """Instructions one run of ``argv`` executes, counted by callgrind (its own output
    discarded); the run must succeed."""
    env = {**tool_env(overlay or TREE), "PYTHONHASHSEED": "0"}
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv]
    proc = subprocess.run(  # noqa: S603 - the benchmark's own commands
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=timeout * 40,  # callgrind runs a program about 40 times slower
        check=False,
    )
    found = _COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(
            f"{argv[0]}: exit {proc.returncode} under callgrind: {proc.stderr[-500:]}"
        )
    return int(found.group(1))


def bench(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "startup",
        "machine": machine(),
        "files": FILES,
        "tool_command": " ".join(artifactcheck_command())
        + " verify --config spec.yaml --output json",
        "runs": [],
    }
    if args.other_python is not None:
        result["other_python"] = args.other_python
    with (
        tempfile.TemporaryDirectory(prefix="acbench-startup-") as tmp,
        fleet_server(["--instances", "1", "--drift", "0"]) as server,
    ):
        spec = Path(tmp) / "spec.yaml"
        write_spec(spec, server.info, assets=FILES - 2, extra_http={})
        out = Path(tmp) / "report.json"
        verify = [*artifactcheck_command(), "verify", "--config", str(spec), "--output", "json"]
        commands: dict[str, tuple[list[str], Path | None]] = {
            "tool": (verify, None),
            "python": ([product_python(), "-c", "pass"], None),
            "import_cli": ([product_python(), "-c", "import artifactcheck.cli.main"], None),
        }
        if args.before is not None:
            commands["before"] = (from_baseline(verify, args.before), args.before)
        if args.other_python is not None:  # the same tree, installed on another interpreter
            other = Path(product_python(args.other_python)).parent / "artifactcheck"
            commands["other_python"] = ([str(other), *verify[1:]], None)
        for argv, overlay in commands.values():  # warm-up: byte-code caches
            run_measured(argv, timeout=args.timeout, env=tool_env(overlay))
        with out.open("wb") as fh:
            run_measured(verify, stdout=fh, timeout=args.timeout, env=tool_env())
        report = json.loads(out.read_text())
        result["verdicts"] = report["counts"]
        result["requests"] = 1 + len(report["results"][0]["assets"])
        for i in range(args.runs):
            row = {}
            for name, (argv, overlay) in commands.items():
                row[name] = run_measured(argv, timeout=args.timeout, env=tool_env(overlay))
            log(
                f"  run {i + 1}: "
                + ", ".join(f"{n} {m.wall:.3f}s (cpu {m.cpu:.3f}s)" for n, m in row.items())
            )
            result["runs"].append({n: m.as_dict() for n, m in row.items()})
        if args.instructions:
            result["instructions"] = {
                name: instructions(argv, overlay=overlay, timeout=args.timeout)
                for name, (argv, overlay) in commands.items()
            }
            log(f"  instructions: {result['instructions']}")
    result["summary"] = runs_summary(result["runs"])
    counted = result.get("instructions")
    if counted and "before" in counted:
        result["summary"]["tool_over_before_instructions"] = counted["tool"] / counted["before"]
    return result


def describe(result: dict[str, Any]) -> str:
    s = result["summary"]
    text = (
        f"verify of one instance, {result['requests']} GETs: "
        f"{s['tool_wall']['median']:.3f} s wall (cpu {s['tool_cpu']['median']:.3f} s); "
        f"floors in the same runs: python -c pass {s['python_wall']['median']:.3f} s, "
        f"import artifactcheck.cli.main {s['import_cli_wall']['median']:.3f} s"
    )
    if "before_wall" in s:
        text += (
            f"; before {s['before_wall']['median']:.3f} s wall "
            f"(cpu {s['before_cpu']['median']:.3f} s), paired ratio "
            f"wall {s['tool_over_before_wall']:.2f}, cpu {s['tool_over_before_cpu']:.2f}"
        )
    if "other_python_wall" in s:
        text += (
            f"; on {result['other_python']}: {s['other_python_wall']['median']:.3f} s wall"
            f" (cpu {s['other_python_cpu']['median']:.3f} s)"
        )
    counted = result.get("instructions")
    if counted:
        text += "; instructions: " + ", ".join(
            f"{name} {n / 1e6:,.0f} M" for name, n in counted.items()
        )
        if "tool_over_before_instructions" in s:
            text += f" (tool/before {s['tool_over_before_instructions']:.3f})"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one-instance verify start-up benchmark")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=60.0, help="per command, seconds")
    parser.add_argument("--name", default="startup", help="results file name")
    parser.add_argument(
        "--before", type=Path, help="also run this package copy (the baseline) in every run"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each command's instructions once with valgrind's callgrind",
    )
    parser.add_argument(
        "--other-python",
        metavar="PYTHON",
        help="also run the tree installed on this interpreter in every run (the interpreter's"
        " share of the start-up, paired)",
    )
    args = parser.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (Debian: apt-get install valgrind)")
    result = bench(args)
    path = save(args.name, result)
    print(describe(result))
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
