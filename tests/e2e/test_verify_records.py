"""verify's start-up makes no frozen dataclass of the package's own.

Python 3.11 makes a dataclass by generating and compiling the source of each of its
methods; for the package's frozen values that was a large part of verify's start-up, so
they are records (:mod:`artifactcheck.model.records`), made in C. This pins the rule by
what a real ``python -m artifactcheck verify`` against a real loopback instance makes:
every dataclass made is recorded, and among the package's own none is frozen but those
named below. The mutable dataclasses (counters, per-run state) stay dataclasses, and the
probe's seeing them is its control.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Records every dataclass made until the interpreter exits: its class and whether it
#: is frozen (``_process_class`` is what ``@dataclass`` calls for each class).
PROBE = """
import atexit, dataclasses, inspect, json, runpy, sys

DUMP = sys.argv[1]
MADE = []
_process_class = dataclasses._process_class
_frozen_at = list(inspect.signature(_process_class).parameters).index("frozen")

def _recording(cls, *args, **kwargs):
    frozen = kwargs["frozen"] if "frozen" in kwargs else args[_frozen_at - 1]
    MADE.append([f"{cls.__module__}.{cls.__qualname__}", bool(frozen)])
    return _process_class(cls, *args, **kwargs)

dataclasses._process_class = _recording
atexit.register(lambda: open(DUMP, "w").write(json.dumps(MADE)))
sys.argv = ["artifactcheck", *sys.argv[2:]]
runpy.run_module("artifactcheck", run_name="__main__")
"""

#: The package's frozen dataclasses a plain verify still makes, each with why. Empty:
#: every frozen value on verify's path is a record.
STAY_DATACLASSES: dict[str, str] = {}

#: Mutable dataclasses verify always makes: the probe must see them.
CONTROL = ("artifactcheck.fetch.stats.FetchStats", "artifactcheck.judge.cache.JudgeCache")


def _made(fleet: Any, tmp_path: Path) -> list[tuple[str, bool]]:
    inst = fleet.instances[0]
    dump = tmp_path / "made.json"
    args = ["verify", "--target", f"{inst.url}={inst.version}"]
    args += ["--release-manifest", fleet.release_template, "--output", "json"]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(dump), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counts"]["consistent"] == 1  # a real check ran
    return [(name, frozen) for name, frozen in json.loads(dump.read_text())]


def test_verify_makes_no_frozen_dataclass_of_its_own(make_fleet, tmp_path: Path) -> None:
    made = _made(make_fleet(1), tmp_path)
    ours = {name: frozen for name, frozen in made if name.startswith("artifactcheck.")}
    assert all(name in ours for name in CONTROL), sorted(ours)
    frozen = sorted(name for name, is_frozen in ours.items() if is_frozen)
    assert frozen == sorted(STAY_DATACLASSES)
