"""What a report says is what was found: counts of siblings, and the coding that differs.

Three instances with no release, one serving other bytes: each of the two that agree
agrees with one sibling, not two; the odd one differs from both of its siblings. A
stale precompressed ``.gz`` caught by comparing gzip names the coding, since a plain
``curl`` shows the right bytes.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import Any

from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck_sim.fleet import RELEASES, foreign_bytes
from artifactcheck_sim.web import Exchange, Site

STALE = "assets/report-50WvgzG_.js"  # same name in both releases, other bytes in 1.4.2


def verify(*args: str) -> Any:
    return CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)


def test_siblings_are_counted_as_they_agree(make_fleet: Any) -> None:
    fleet = make_fleet(3, version="1.4.1")
    fleet.drift(2, serves="1.4.2")
    targets = [a for i in fleet.instances for a in ("--target", f"{i.url}=1.4.1")]
    table = verify(*targets)
    assert table.exit_code == 1, table.output
    assert table.output.count("agrees with 1 of its 2 sibling(s) on 1.4.1") == 2
    assert "agrees with its 2 sibling(s)" not in table.output
    out = verify(*targets, "-o", "json")
    results = {r["url"]: r for r in json.loads(out.stdout)["results"]}
    odd = results[fleet.instances[2].url]
    assert odd["verdict"] == "mismatch"
    minority = [f for f in odd["findings"] if f["kind"] == "minority-content"]
    assert minority and all("differs from 2 of its 2 siblings" in f["message"] for f in minority)


def test_all_agreeing_siblings_are_each_counted(make_fleet: Any) -> None:
    fleet = make_fleet(3, version="1.4.1")
    targets = [a for i in fleet.instances for a in ("--target", f"{i.url}=1.4.1")]
    table = verify(*targets)
    assert table.exit_code == 0, table.output
    assert table.output.count("agrees with its 2 sibling(s) on 1.4.1") == 3


@dataclass(frozen=True)
class StaleGzip:
    """gzip_static with a stale .gz: a gzip-accepting client gets ``gzipped``'s bytes."""

    gzipped: bytes

    async def __call__(self, ex: Exchange) -> None:
        if "gzip" in ex.request.headers.get("accept-encoding", ""):
            headers = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
            body = gzip.compress(self.gzipped, mtime=0)
            await ex.respond(200, body, headers=headers, content_type="application/javascript")
        else:
            await ex.serve_default()


def test_a_stale_gz_finding_names_the_coding(make_fleet: Any, web: Any) -> None:
    fleet = make_fleet(1, version="1.4.1")
    stale = foreign_bytes(RELEASES["1.4.1"], RELEASES["1.4.2"])[STALE]
    url = web.add(Site(root=RELEASES["1.4.1"], overrides={STALE: StaleGzip(stale)}), "127.93.50.1")
    args = ["--target", f"{url}=1.4.1", "--release-manifest", fleet.release_template]
    table = verify(*args, "--compare-encoding", "identity", "--compare-encoding", "gzip")
    assert table.exit_code == 1, table.output
    assert f"{STALE} differs from release 1.4.1 when served gzip-encoded" in table.output
    # a file that differs whatever the coding says nothing about codings
    plain = Site(root=RELEASES["1.4.1"], overrides={STALE: stale})
    url = web.add(plain, "127.93.50.2")
    args = ["--target", f"{url}=1.4.1", "--release-manifest", fleet.release_template]
    table = verify(*args, "--compare-encoding", "identity", "--compare-encoding", "gzip")
    assert table.exit_code == 1, table.output
    assert f"{STALE} differs from release 1.4.1" in table.output
    assert "encoded" not in table.output
