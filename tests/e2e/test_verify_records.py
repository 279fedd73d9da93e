"""verify's start-up makes no dataclass of the package's own but those named here.

Python 3.11 makes a dataclass by generating and compiling the source of each of its
methods; for the package's own classes that was a large part of verify's start-up, so
they are records (:mod:`artifactcheck.model.records`), made in C. This pins the rule by
what a real ``python -m artifactcheck verify`` against a real loopback instance makes:
every dataclass made is recorded, and the package's own are exactly those named below,
each with why it stays one (the probe's seeing them is its control).
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

#: The package's dataclasses a plain verify still makes, each with why: the release
#: sources are equal only to themselves (``eq=False``), hold fields their ``__init__``
#: does not take (``field(init=False)``: a lock, a cache) and inherit their fields, none
#: of which a record does the same way. None is frozen.
_SOURCE = "eq=False and init=False fields (identity, a lock or cache made per source)"
STAY_DATACLASSES: dict[str, str] = {
    "artifactcheck.release.sources._Vouching": "the release sources' fields, inherited",
    "artifactcheck.release.sources.TemplateSource": _SOURCE,
    "artifactcheck.release.sources.ConfigMapSource": _SOURCE,
    "artifactcheck.release.sources.ReleaseSet": _SOURCE,
    "artifactcheck.release.sources.Expectations": _SOURCE,
}


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


def test_verify_makes_only_the_dataclasses_named_here(make_fleet, tmp_path: Path) -> None:
    made = _made(make_fleet(1), tmp_path)
    ours = {name: frozen for name, frozen in made if name.startswith("artifactcheck.")}
    assert sorted(ours) == sorted(STAY_DATACLASSES)
    assert not any(ours.values())  # none of them frozen
    assert len(made) > len(ours)  # the libraries' own (pydantic's) are seen too
