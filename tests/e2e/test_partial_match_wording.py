"""A partial match is never "serves release X".

An instance reporting 1.4.1 serves 1.4.2's build with one file missing; the SPA
fallback answers for it with 200 and the entry page. Every other file is 1.4.2's, but
the instance does not serve release 1.4.2: a mismatch that names no release, and the
file that fell back is a finding of its own.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import FindingKind, Verdict
from artifactcheck.pipeline import run_check
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.web import Site

GONE = "assets/index-D62fgCHr.css"  # 1.4.2's stylesheet


def test_one_file_fallen_back_is_not_serving_the_other_release(
    make_fleet: Any, web: Any, tmp_path: Path
) -> None:
    fleet = make_fleet(1, version="1.4.1")
    build = tmp_path / "build"
    shutil.copytree(RELEASES["1.4.2"], build)
    (build / GONE).unlink()
    url = web.add(Site(root=build, spa_fallback=True), "127.93.70.1")
    spec = fleet.spec(targets=[{"url": url, "version": "1.4.1", "name": "x"}], cdn=None)
    (r,) = asyncio.run(run_check(load_spec(spec))).results
    assert r.verdict is Verdict.MISMATCH, r.reason
    assert r.serves_version is None, r.reason
    assert "serves release" not in r.reason and "serves 1.4.2's content" not in r.reason
    assert not [f for f in r.findings if f.kind is FindingKind.SERVES_OTHER_RELEASE]
    # with the file back, the same instance does serve 1.4.2, and is said to
    url = web.add(Site(root=RELEASES["1.4.2"], spa_fallback=True), "127.93.70.2")
    spec = fleet.spec(targets=[{"url": url, "version": "1.4.1", "name": "y"}], cdn=None)
    (r,) = asyncio.run(run_check(load_spec(spec))).results
    assert r.verdict is Verdict.MISMATCH and r.serves_version == "1.4.2", r.reason
