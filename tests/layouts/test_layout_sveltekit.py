"""SvelteKit 2 with adapter-static (every page prerendered) behind nginx, clean URLs.

Tried as a new user would: the newest SvelteKit (3.2) refuses ``svelte.config.js`` and
needs Node 22 (``Promise.withResolvers``), so the fixture is SvelteKit 2.70, the newest
that runs on Node 20. SvelteKit writes ``_app/version.json`` (``{"version": "<build
time>"}``), which its client polls to notice a new deployment: a version endpoint the
user already has.
"""

from __future__ import annotations

import json
from pathlib import Path

from layout_cli import (
    build,
    copy_build,
    start_with_cdn,
    targets,
    two_releases,
    verify,
)
from layout_nginx import Nginx

SUBNET = "127.68.0"
CDN_HOST = "127.68.1.1"
CHUNK = "_app/immutable/chunks/B5aCdQ-a.js"  # the same name and bytes in v1 and v2


def _version(name: str) -> str:
    return str(json.loads((build(name) / "_app" / "version.json").read_text())["version"])


V1, V2 = _version("sveltekit/v1"), _version("sveltekit/v2")


def _start(nginx: Nginx, tmp: Path, roots: list[Path], cdn_lacks: str | None = None):
    return start_with_cdn(
        nginx, tmp, (SUBNET, "pages", roots), (CDN_HOST, "sveltekit/v1"), cdn_lacks
    )


def _releases(tmp: Path, v1: str = "1.0.0", v2: str = "2.0.0") -> list[str]:
    return two_releases(tmp, "sveltekit", v1, v2)


def test_fixture_is_what_the_tests_say() -> None:
    assert V1 != V2
    assert (build("sveltekit/v1") / CHUNK).read_bytes() == (
        build("sveltekit/v2") / CHUNK
    ).read_bytes()
    assert "release v2" in (build("sveltekit/v2") / "index.html").read_text()


def test_a_correct_sveltekit_fleet_is_consistent(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("sveltekit/v1")] * 3)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_a_drifted_sveltekit_instance_alone_is_flagged(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("sveltekit/v1")] * 2 + [build("sveltekit/v2")])
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert run.result(urls[2])["serves_version"] == "2.0.0", run.explain()


def test_a_cdn_missing_a_chunk_is_named(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("sveltekit/v1")] * 3, cdn_lacks=CHUNK)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert {f["path"] for f in run.findings("cdn-missing")} == {CHUNK}, run.explain()
    assert CHUNK in run.table


def test_sveltekit_version_json_as_the_version_endpoint(nginx: Nginx, tmp_path: Path) -> None:
    """``--version-endpoint /_app/version.json#/version``, releases made with those
    versions: every instance is consistent with what it reports, and the one still on
    another build is ``drift`` from ``--desired-version``."""
    urls, cdn = _start(nginx, tmp_path, [build("sveltekit/v1")] * 2 + [build("sveltekit/v2")])
    args = [a for u in urls for a in ("-t", u)]
    args += ["--version-endpoint", "/_app/version.json#/version", *_releases(tmp_path, V1, V2)]
    run = verify(tmp_path, *args, "--desired-version", V1)
    assert run.exit_code == 1, run.explain()
    assert [run.result(u)["reported_version"] for u in urls] == [V1, V1, V2], run.explain()
    assert run.verdicts() == {urls[0]: "consistent", urls[1]: "consistent", urls[2]: "drift"}
    assert verify(tmp_path / "all", *args).exit_code == 0


def test_the_version_endpoint_in_yaml_takes_the_cli_spelling(nginx: Nginx, tmp_path: Path) -> None:
    """``version_endpoint: "/_app/version.json#/version"`` in the YAML config, as on the
    command line. Today: "Input should be a valid dictionary" (exit 2)."""
    urls, cdn = _start(nginx, tmp_path, [build("sveltekit/v1")] * 3)
    config = tmp_path / "artifactcheck.yaml"
    config.write_text('version_endpoint: "/_app/version.json#/version"\n')
    args = ["-c", str(config), *[a for u in urls for a in ("-t", u)]]
    run = verify(tmp_path, *args, *_releases(tmp_path, V1, V2), "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_an_invalid_version_from_the_endpoint_is_inconclusive(nginx: Nginx, tmp_path: Path) -> None:
    """``kit.version.name`` set to what ``git describe --dirty`` printed, with a space:
    not a version. Every instance is ``inconclusive`` (exit 3), never exit 1."""
    root = copy_build("sveltekit/v1", tmp_path / "dirty")
    (root / "_app" / "version.json").write_text('{"version":"v1.0.0-3-gabc123 dirty"}')
    urls, cdn = _start(nginx, tmp_path, [root] * 3)
    args = [a for u in urls for a in ("-t", u)]
    args += ["--version-endpoint", "/_app/version.json#/version", *_releases(tmp_path, V1, V2)]
    run = verify(tmp_path, *args, "--cdn", cdn)
    assert run.exit_code == 3, run.explain()
    assert set(run.verdicts().values()) == {"inconclusive"}, run.explain()


def test_version_json_without_a_pointer_reads_its_version_member(
    nginx: Nginx, tmp_path: Path
) -> None:
    """``--version-endpoint /_app/version.json`` with no pointer on ``{"version": ...}``:
    its ``version`` member is the version. Today: the whole JSON body is taken as the
    version, which is not one (exit 1, ``signal-conflict``)."""
    urls, cdn = _start(nginx, tmp_path, [build("sveltekit/v1")] * 3)
    args = [a for u in urls for a in ("-t", u)]
    args += ["--version-endpoint", "/_app/version.json", *_releases(tmp_path, V1, V2)]
    run = verify(tmp_path, *args, "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert {r["reported_version"] for r in run.doc["results"]} == {V1}, run.explain()


def test_a_pointer_typo_is_shown_in_the_table(nginx: Nginx, tmp_path: Path) -> None:
    """``#/versoin``: exit 3, and the table (where the user looks, not only the JSON)
    says what was wrong with the endpoint's answer: the pointer that did not resolve."""
    urls, cdn = _start(nginx, tmp_path, [build("sveltekit/v1")])
    args = ["-t", urls[0], "--version-endpoint", "/_app/version.json#/versoin"]
    run = verify(tmp_path, *args, *_releases(tmp_path, V1, V2), "--cdn", cdn)
    assert run.exit_code == 3, run.explain()
    assert "/versoin" in run.table, run.explain()
    assert run.result(urls[0])["endpoint_error"], run.explain()
