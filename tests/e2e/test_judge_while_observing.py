"""``verify --processes N``: this process judges what it has while a worker still observes.

Beside its own observing, the process that owns the observing processes judges the
observations at hand (its own and the workers' answers) while the rest is observed, and
the judging at the end reuses each of those results whose inputs did not change. The report must be
the one a single process gives: the verdicts, reasons and sample of ``--processes 1``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from artifactcheck import pipeline
from artifactcheck.discover.static import instances_from_targets
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Instance, InstanceResult, Observation, Verdict
from artifactcheck.observe.spread import host_groups, split_by_host
from artifactcheck.present.report import assets
from artifactcheck_sim.web import Delay

#: ``artifactcheck`` with every comparison of a group recorded: its size, the
#: instances judged afresh, and whether the observing processes had all finished.
RECORD_COMPARISONS = """
import json as _json
from artifactcheck import pipeline as _pipeline
_real = _pipeline.compare_fleet
def _recorded(observations, **kw):
    results = _real(observations, **kw)
    cache = kw.get("cache")
    with open(RECORD, "a") as f:
        f.write(_json.dumps([len(observations), cache.judged if cache else None]) + "\\n")
    return results
_pipeline.compare_fleet = _recorded
import runpy as _runpy, sys as _sys
_sys.argv = ["artifactcheck", *_sys.argv[1:]]
_runpy.run_module("artifactcheck", run_name="__main__")
"""


def _spec(tmp_path: Path, fleet: Any, **http: Any) -> tuple[Path, list[Instance]]:
    spec = fleet.spec()
    spec.pop("cdn")  # judged against the releases alone: no CDN view to wait for
    spec["sampling"] = {"assets_per_instance": 2}
    spec["http"] = {**spec.get("http", {}), **http}
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path, instances_from_targets(CheckSpec.model_validate(spec).targets)


def _verify(tmp_path: Path, spec: Path, *args: str) -> tuple[dict[str, Any], list[list[Any]]]:
    record = tmp_path / "comparisons.jsonl"
    record.unlink(missing_ok=True)
    script = tmp_path / "recorded_cli.py"
    script.write_text(f"RECORD = {str(record)!r}\n" + RECORD_COMPARISONS, encoding="utf-8")
    argv = [sys.executable, str(script), "-v", "verify", "--output", "json"]
    proc = subprocess.run(
        [*argv, "--config", str(spec), *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode in (0, 1), proc.stderr
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    return json.loads(proc.stdout), rows


def _judged(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        r["instance"]: (
            r["verdict"],
            r["reason"],
            r.get("serves_version"),
            [f["message"] for f in r["findings"]],
            sorted((a["path"], a["sha256"], a["status"]) for a in assets(doc, r)),
        )
        for r in doc["results"]
    }


def test_observations_are_judged_while_others_are_still_observed(make_fleet, tmp_path) -> None:
    fleet = make_fleet(8, version="1.4.1")
    fleet.drift(0, serves="1.4.2")
    fleet.drift(1, serves="1.4.2")
    spec, instances = _spec(tmp_path, fleet, max_connections=4)  # two at a time each
    slow = {i.name for i in instances[1::2]}
    for sim, inst in zip(fleet.instances, instances, strict=True):
        if inst.name in slow:  # half the fleet answers late: the rest is judged meanwhile
            sim.site.overrides["index.html"] = Delay(1.0)

    spread, rows = _verify(tmp_path, spec, "--processes", "2")
    seed = str(spread["sample"]["seed"])
    one, rows_one = _verify(tmp_path, spec, "--processes", "1", "--seed", seed)

    assert _judged(spread) == _judged(one)
    verdicts = {r["instance"]: r["verdict"] for r in spread["results"]}
    assert sorted(v for v in verdicts.values()) == ["consistent"] * 6 + ["mismatch"] * 2
    # in one process, one comparison of everything, with nothing to reuse
    assert rows_one == [[len(instances), None]]
    # with a worker: what was at hand judged while the rest was observed, then the
    # whole fleet, where only what arrived last is judged afresh
    *meanwhile, (size, afresh) = rows
    assert meanwhile and sum(n for n, _ in meanwhile) >= len(instances) - len(slow), rows
    assert size == len(instances) and afresh <= len(slow), rows


def _observation(name: str) -> Observation:
    return Observation(
        instance=Instance(name=name, base_url=f"http://{name}/"), manifest_path="m.json"
    )


def test_judging_meanwhile_takes_every_observation_at_hand_until_observing_ends() -> None:
    observations = {n: _observation(n) for n in ("a", "b", "c")}
    groups: list[list[str]] = []
    looks = iter([True, True, True, True, False])

    def compare(group: Any) -> list[InstanceResult]:
        groups.append([o.instance.name for o in group])
        if len(groups) == 1:
            observations["d"] = _observation("d")  # arrives from a worker meanwhile
            raise ValueError("judging one group failed")  # judged again at the end
        return [InstanceResult(o.instance, Verdict.CONSISTENT, "") for o in group]

    asyncio.run(pipeline._judge_meanwhile(compare, observations, lambda: next(looks)))
    assert groups == [["a", "b", "c"], ["d"]]


def test_judging_meanwhile_stops_when_observing_ends() -> None:
    groups: list[int] = []

    def compare(group: Any) -> list[InstanceResult]:
        groups.append(len(group))
        return []

    observations = {str(n): _observation(str(n)) for n in range(60)}
    looks = iter([True, False])  # done after the first batch
    asyncio.run(pipeline._judge_meanwhile(compare, observations, lambda: next(looks)))
    assert groups == [pipeline._MEANWHILE_BATCH]
    asyncio.run(pipeline._judge_meanwhile(compare, observations, lambda: False))
    assert groups == [pipeline._MEANWHILE_BATCH]


def test_with_a_cdn_judging_waits_for_every_observation(make_fleet, tmp_path) -> None:
    """The CDN's view is an input of every verdict and is observed after the fleet:
    nothing is judged before it (it would all be judged again)."""
    fleet = make_fleet(6, version="1.4.1")
    spec_doc = fleet.spec()
    spec_doc["sampling"] = {"assets_per_instance": 2}
    spec = tmp_path / "cdn.yaml"
    spec.write_text(yaml.safe_dump(spec_doc), encoding="utf-8")
    for sim in fleet.instances[1::2]:
        sim.site.overrides["index.html"] = Delay(0.5)
    doc, rows = _verify(tmp_path, spec, "--processes", "2")
    assert rows == [[6, None]], rows
    assert {r["verdict"] for r in doc["results"]} == {"consistent"}


def test_hosts_are_handed_out_whole_the_largest_first() -> None:
    """A host's instances stay together (the fetcher's limits per host hold in one
    process); the controller's fixed slices are as even as hosts allow."""
    hosts = [
        Instance(name=f"h{i}", base_url=f"http://10.1.{i // 200}.{i % 200}/") for i in range(1000)
    ]
    twice = [Instance(name=f"t{i}", base_url="http://10.2.0.1:80/") for i in range(30)]
    groups = host_groups([*hosts, *twice])
    assert [len(g) for g in groups[:2]] == [30, 1] and len(groups) == 1001
    assert [i.name for i in groups[0]] == [f"t{i}" for i in range(30)]
    assert [g[0].name for g in groups[1:4]] == ["h0", "h1", "h2"]  # else in the given order
    assert [len(s) for s in split_by_host(hosts, 2)] == [500, 500]
    three = split_by_host([*twice, *hosts], 3)
    assert sorted(len(s) for s in three) == [343, 343, 344]
    assert sum(1 for s in three if any(i.name.startswith("t") for i in s)) == 1
    assert {i.name for s in three for i in s} == {i.name for i in [*twice, *hosts]}
