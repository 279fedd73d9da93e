"""``verify`` against the strongest baselines: ``curl -Z`` and the raw asyncio floor.

    python -m bench.baselines [--instances 200,1000] [--assets 6] [--runs 3] [--before DIR]

For each fleet size, one nginx fleet (``bench.fleet_server``: a real Vite build plus
generated chunks, 1% of the instances serving a rebuild) and, every run, in turn:

- ``artifactcheck verify --output json`` (the console script, start-up included);
- what an expert types: ``curl -s -Z --parallel-max 64 -K LIST`` (one config file
  naming every URL and an output file for each), then ``sha256sum`` of the outputs;
- the raw asyncio floor (``bench/floor.py``: keep-alive streams, sha256, no checks),
  started as its own interpreter;
- the same floor after verify's start-up (``bench/floor_loaded.py``): every module a
  ``verify`` run loads imported first, then the fetching shared out between as many
  processes as ``verify`` observes from. What ``verify`` would take if its checks cost
  nothing: its ratio to the floor is the part of ``verify``'s that no change to the
  checks can win back;
- the same again after the libraries only (every module of that list but the
  package's own): what the libraries it is built on cost to start;
- with ``--before DIR``, the tree in DIR (``git archive REV artifactcheck | tar -x -C
  DIR``) as well, first.

The baselines fetch exactly the URLs the tool requests (manifest, entry page, assets:
read back from its JSON report) and nginx's own request counter checks each command
made that many requests; curl's and the floor's hashes must agree. The table gives
each command's best wall time of ``--runs`` and the tool's ratio to each baseline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from artifactcheck.observe.spread import processes_for
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
    tool_env,
)
from .sampled import run_tool, write_spec

FLOOR = Path(__file__).resolve().parent / "floor.py"
FLOOR_LOADED = Path(__file__).resolve().parent / "floor_loaded.py"
CURL = "curl -s -Z --parallel-max 64 -K {config} && sha256sum -- {out}/*"


def urls_of(report: dict[str, Any]) -> list[str]:
    """Every URL the tool requests of an instance: manifest, entry page, assets."""
    out: list[str] = []
    for result in report["results"]:
        base = result["url"]
        out.append(base + result["manifest"]["path"])
        out.append(base)  # the entry page, read first (``pages: ['/']``, the default)
        out += [base + a["path"] for a in assets(report, result)]
    return out


def curl_config(urls: list[str], out: Path) -> str:
    """curl's ``-K`` file: each URL with an output file of its own."""
    return "".join(f'url = "{u}"\noutput = "{out}/{i:05d}"\n' for i, u in enumerate(urls))


def spec_for(tree: Path, spec: Path, work: Path) -> Path:
    """The spec file for the tree in ``tree``: ``spec`` itself, or for a tree from before
    the release source was ``release: {manifests: [...]}``, the same spec with the
    ``release_manifest:`` key that tree reads."""
    settings = (tree / "artifactcheck" / "model" / "settings.py").read_text(encoding="utf-8")
    if "release_manifest" not in settings or "ReleaseSource" in settings:
        return spec
    doc = yaml.safe_load(spec.read_text(encoding="utf-8"))
    doc["release_manifest"] = doc.pop("release")["manifests"][0]
    legacy = work / "spec-before.yaml"
    legacy.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return legacy


def modules_loaded(spec: Path, work: Path, timeout: float) -> Path:
    """A file naming every module a ``verify`` run loads, its workers' included, in the
    order ``-X importtime`` lists them (``PYTHONPROFILEIMPORTTIME``)."""
    argv = [*artifactcheck_command(), "verify", "--config", str(spec), "--output", "json"]
    env = {**tool_env(), "PYTHONPROFILEIMPORTTIME": "1"}
    listing = work / "importtime.txt"
    with listing.open("wb") as err:
        run_measured(argv, stderr=err, timeout=timeout, env=env)
    names: dict[str, None] = {}
    for line in listing.read_text(encoding="utf-8").splitlines():
        if line.startswith("import time:") and not line.endswith("imported package"):
            names[line.rsplit("|", 1)[1].strip()] = None
    if not any(name.startswith("artifactcheck.") for name in names):
        raise SystemExit(f"no module of artifactcheck in {listing}")
    out = work / "modules.txt"
    out.write_text("".join(name + "\n" for name in names), encoding="utf-8")
    return out


def libraries_of(modules: Path) -> Path:
    """The modules of ``modules`` that are not the package's own: its libraries and
    the standard library's."""
    out = modules.with_name("libraries.txt")
    names = modules.read_text(encoding="utf-8").splitlines()
    out.write_text(
        "".join(n + "\n" for n in names if n.split(".")[0] != "artifactcheck"), encoding="utf-8"
    )
    return out


def observing_processes(urls: list[str], instances: int) -> int:
    """How many processes ``verify`` observes these instances from (by its own rule)."""
    hosts = {url.split("/", 3)[2] for url in urls}
    return processes_for(instances, len(hosts), asked=None)


def sums(text: str) -> list[str]:
    """The sorted digests of ``sha256sum``-style lines."""
    return sorted(line.split()[0] for line in text.splitlines() if line.strip())


def one_size(args: argparse.Namespace, instances: int) -> dict[str, Any]:
    """Every command, ``args.runs`` times, on one fleet of ``instances``."""
    server_args = ["--instances", str(instances), "--drift", "0.01"]
    row: dict[str, Any] = {"instances": instances, "runs": []}
    with (
        tempfile.TemporaryDirectory(prefix="acbench-baselines-") as tmp,
        fleet_server(server_args) as server,
    ):
        work = Path(tmp)
        spec, report_path = work / "spec.yaml", work / "report.json"
        write_spec(spec, server.info, assets=args.assets, extra_http={})
        log(f"baselines: {instances} instances, warm-up")
        run_tool(spec, report_path, args.timeout)
        report = json.loads(report_path.read_text())
        urls = urls_of(report)
        row["requests"] = len(urls)
        row["verdicts"] = {k: v for k, v in report["counts"].items() if v}
        (work / "urls.txt").write_text("\n".join(urls) + "\n")
        out_dir = work / "curl-out"
        (work / "curl.cfg").write_text(curl_config(urls, out_dir))
        curl_cmd = CURL.format(config=work / "curl.cfg", out=out_dir)
        modules = modules_loaded(spec, work, args.timeout)
        libraries = libraries_of(modules)
        row["processes"] = observing_processes(urls, instances)
        row["modules_loaded"] = len(modules.read_text().splitlines())
        row["library_modules_loaded"] = len(libraries.read_text().splitlines())
        listed = [product_python(), str(FLOOR_LOADED), str(work / "urls.txt"), "--modules"]
        processes = ["--processes", str(row["processes"])]
        floors = {  # name: command
            "floor": [product_python(), str(FLOOR), str(work / "urls.txt")],
            "libraries floor": [*listed, str(libraries), *processes],
            "loaded floor": [*listed, str(modules), *processes],
        }
        row["commands"] = {"curl": curl_cmd, **{n: " ".join(c) for n, c in floors.items()}}

        def curl() -> Measured:
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir()
            with (work / "curl.sums").open("wb") as fh:
                return run_measured(
                    curl_cmd, stdout=fh, stderr=subprocess.DEVNULL, timeout=args.timeout
                )

        def hashing(name: str) -> Callable[[], Measured]:
            def measured() -> Measured:
                with sums_file(name).open("wb") as fh:
                    return run_measured(
                        floors[name], stdout=fh, timeout=args.timeout, env=tool_env()
                    )

            return measured

        def sums_file(name: str) -> Path:
            return work / f"{name.replace(' ', '-')}.sums"

        commands: dict[str, Any] = {
            "artifactcheck": lambda: run_tool(spec, report_path, args.timeout),
            "curl -Z": curl,
            **{name: hashing(name) for name in floors},
        }
        if args.before is not None:
            before_spec = spec_for(args.before, spec, work)
            commands = {
                "before": lambda: run_tool(
                    before_spec, work / "before.json", args.timeout, args.before
                ),
                **commands,
            }
        for name, command in commands.items():  # warm-up: page cache, byte-code caches
            if name != "artifactcheck":
                command()
        floor_sums = sums(sums_file("floor").read_text())
        if sums((work / "curl.sums").read_text()) != floor_sums:
            raise SystemExit("curl -Z and the floor hashed different bytes")
        for name in floors:
            if sums(sums_file(name).read_text()) != floor_sums:
                raise SystemExit(f"the {name} and the floor hashed different bytes")
        for i in range(args.runs):
            run: dict[str, Any] = {}
            for name, command in commands.items():
                n0 = server.nginx_requests()
                measured = command()
                n1 = server.nginx_requests()
                if measured.returncode not in (0, 1):  # verify exits 1 on the drifted 1%
                    raise SystemExit(f"{name} exited {measured.returncode}")
                requests = None if n0 is None or n1 is None else n1 - n0 - 1
                if requests != len(urls):
                    raise SystemExit(f"{name} made {requests} requests, not {len(urls)}")
                measured.extra = {"server_requests": requests}
                run[name] = measured.as_dict()
            for name in floors:
                result_lines = len(sums(sums_file(name).read_text()))
                if result_lines != len(urls):
                    raise SystemExit(f"{name} hashed {result_lines} bodies, not {len(urls)}")
            log(
                f"  run {i + 1}: "
                + ", ".join(f"{k} {v['wall']:.2f}s (cpu {v['cpu']:.2f}s)" for k, v in run.items())
                + f", load {run['floor']['loadavg']:.1f}"
            )
            row["runs"].append(run)
    row["best"] = {name: min(r[name]["wall"] for r in row["runs"]) for name in row["runs"][0]}
    row["cpu_of_best"] = {
        name: min(row["runs"], key=lambda r, n=name: r[n]["wall"])[name]["cpu"]
        for name in row["runs"][0]
    }
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table: each command's best wall time of the runs and its median CPU
    time (the machine is shared: CPU moves less with other work than wall time), and
    the tool's ratios to each baseline on both. A results file from before the floor
    after verify's start-up was measured has no column for it."""
    loaded = "loaded floor" in rows[0]["best"]
    libraries = "libraries floor" in rows[0]["best"]
    names = (
        ["curl -Z", "floor"]
        + (["libraries floor"] if libraries else [])
        + (["loaded floor"] if loaded else [])
        + ["artifactcheck"]
        + (["before"] if "before" in rows[0]["best"] else [])
    )
    titles = {
        "curl -Z": "curl -Z + sha256sum",
        "floor": "asyncio floor",
        "libraries floor": "the floor after the libraries' start-up",
        "loaded floor": "the floor after verify's start-up",
        "artifactcheck": "artifactcheck verify",
        "before": "before",
    }
    lines = [
        "| instances | GETs | " + " | ".join(titles[n] for n in names) + " |",
        "|" + "---|" * (2 + len(names)),
    ]
    for row in rows:
        wall, cpu = row["best"], _median_cpu(row)
        cells = []
        for name in names:
            cell = f"{wall[name]:.2f} s (CPU {cpu[name]:.2f} s)"
            if name in ("loaded floor", "libraries floor"):
                count = row["processes"]
                processes = f"{count} process" + ("es" if count != 1 else "")
                cell += f": {wall[name] / wall['floor']:.2f}x the floor, {processes}"
            if name in ("artifactcheck", "before"):
                cell += (
                    f": {wall[name] / wall['curl -Z']:.2f}x curl -Z, "
                    f"{wall[name] / wall['floor']:.2f}x the floor"
                    + (
                        f", {wall[name] / wall['loaded floor']:.2f}x after start-up"
                        if loaded
                        else ""
                    )
                    + f"; CPU {cpu[name] / cpu['curl -Z']:.2f}x, {cpu[name] / cpu['floor']:.2f}x"
                )
            cells.append(cell)
        lines.append(f"| {row['instances']:,} | {row['requests']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _median_cpu(row: dict[str, Any]) -> dict[str, float]:
    return {name: statistics.median(r[name]["cpu"] for r in row["runs"]) for name in row["runs"][0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="verify beside curl -Z and the asyncio floor")
    parser.add_argument("--instances", default="200,1000", help="fleet sizes, comma-separated")
    parser.add_argument("--assets", type=int, default=6, help="sampled assets per instance")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="per command, seconds")
    parser.add_argument("--before", type=Path, help="also run this package copy every run")
    parser.add_argument("--name", default="baselines", help="results file name")
    parser.add_argument(
        "--table", type=Path, help="only print the table of a results file written before"
    )
    args = parser.parse_args(argv)
    if args.table is not None:
        print(table(json.loads(args.table.read_text())["rows"]))
        return 0
    result: dict[str, Any] = {
        "benchmark": "baselines",
        "machine": machine(),
        "assets_per_instance": args.assets,
        "before": str(args.before) if args.before else None,
        "rows": [one_size(args, int(n)) for n in args.instances.split(",")],
    }
    result["table"] = table(result["rows"])
    path = save(args.name, result)
    print(result["table"])
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
