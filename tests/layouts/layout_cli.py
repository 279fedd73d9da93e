"""The README's commands, run as a new user runs them, and their reports read back.

``manifest build DIST --version V -o release-V.json`` in the build job, then
``verify -t URL=V ... --release-manifest ... --cdn ...`` with a table on standard
output (what the user reads) and the JSON report in a file (what the test asserts on).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from artifactcheck.cli.main import main

FRAMEWORKS = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"


def build(name: str) -> Path:
    """A committed build output, e.g. ``build("vue/v1")``."""
    path = FRAMEWORKS / name
    assert path.is_dir(), f"{path} is missing: run tests/fixtures/frameworks/build.sh"
    return path


def copy_build(name: str, dest: Path) -> Path:
    """A private copy of a build, to break (a CDN missing a file) without touching it."""
    shutil.copytree(build(name), dest)
    return dest


def release(dist: Path, version: str, workdir: Path) -> Path:
    """``artifactcheck manifest build DIST --version V -o release-V.json``."""
    out = workdir / f"release-{version}.json"
    r = CliRunner().invoke(
        main, ["manifest", "build", str(dist), "--version", version, "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    return out


@dataclass(frozen=True)
class Run:
    """One ``verify`` run: its exit code, the table the user read, the JSON report."""

    exit_code: int
    table: str
    doc: dict[str, Any]

    def result(self, url: str) -> dict[str, Any]:
        (found,) = [r for r in self.doc["results"] if r["url"] == url]
        return found

    def verdicts(self) -> dict[str, str]:
        return {r["url"]: r["verdict"] for r in self.doc["results"]}

    def findings(self, kind: str) -> list[dict[str, Any]]:
        """Every finding of ``kind``, the fleet's and the CDN's and each instance's."""
        found = [f for f in self.doc.get("findings", []) if f["kind"] == kind]
        for r in self.doc["results"]:
            found += [f for f in r["findings"] if f["kind"] == kind]
        return found

    def explain(self) -> str:
        return f"exit {self.exit_code}\n{self.table}"


def verify(workdir: Path, *args: str) -> Run:
    """``artifactcheck verify ARGS -o table -o json=FILE`` in this process."""
    workdir.mkdir(parents=True, exist_ok=True)
    report = workdir / "report.json"
    report.unlink(missing_ok=True)
    r = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["verify", *args, "--deadline", "30", "-o", "table", "-o", f"json={report}"]
    )
    doc = json.loads(report.read_text()) if report.exists() else {"results": []}
    return Run(r.exit_code, r.output, doc)


def no_pages(workdir: Path) -> list[str]:
    """``--config`` with ``pages: []``: no entry page is read, as before pages were."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "no-pages.yaml"
    config.write_text("pages: []\n", encoding="utf-8")
    return ["--config", str(config)]


def targets(urls: list[str], version: str) -> list[str]:
    """``-t URL=VERSION`` for each instance: every instance says it runs ``version``."""
    out: list[str] = []
    for url in urls:
        out += ["-t", f"{url}={version}"]
    return out


def serve_fleet(
    nginx: Any, subnet: str, template: str, roots: list[Path], **values: str
) -> list[str]:
    """One server block per root on ``SUBNET.1``, ``SUBNET.2``...: the instances' URLs."""
    return [
        nginx.serve(f"{subnet}.{i}", template, root, **values)
        for i, root in enumerate(roots, start=1)
    ]


def start_with_cdn(
    nginx: Any,
    tmp: Path,
    fleet: tuple[str, str, list[Path]],
    cdn: tuple[str, str],
    cdn_lacks: str | None = None,
) -> tuple[list[str], str]:
    """Serve ``fleet`` (subnet, configuration, roots) and a CDN (host, build) holding a
    copy of that build, less ``cdn_lacks``; start nginx; the instances' URLs and the CDN's."""
    subnet, template, roots = fleet
    urls = serve_fleet(nginx, subnet, template, roots)
    host, name = cdn
    cdn_root = copy_build(name, tmp / "cdn")
    if cdn_lacks:
        (cdn_root / cdn_lacks).unlink()
    cdn_url = nginx.serve(host, "static", cdn_root)
    nginx.start()
    return urls, cdn_url


def two_releases(tmp: Path, framework: str, v1: str = "1.0.0", v2: str = "2.0.0") -> list[str]:
    """``--release-manifest`` of the framework's v1 build as ``v1`` and v2's as ``v2``."""
    return [
        "--release-manifest",
        str(release(build(f"{framework}/v1"), v1, tmp)),
        "--release-manifest",
        str(release(build(f"{framework}/v2"), v2, tmp)),
    ]


def ngsw_release(dist: Path, version: str, workdir: Path) -> str:
    """``dist/ngsw.json`` as the release for ``version``: it declares no version, so it
    is given as a ``{version}`` template (README: a template's expansion may declare
    none), copied to ``releases/VERSION/ngsw.json`` as a build job would publish it."""
    target = workdir / "releases" / version / "ngsw.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dist / "ngsw.json", target)
    return str(workdir / "releases" / "{version}" / "ngsw.json")
