"""``investigate`` says only what was observed, and agrees with the verdict.

An instance that could not be reached served no file, so no row claims one; a missing
chunk answered with the site's HTML page (nginx ``try_files $uri /index.html``, on the
instance or on the CDN) is missing everywhere in the report, never "different bytes"
in one place and "release 1.4.1's index.html" in another.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.judge.prefix import FALLBACK
from artifactcheck.present.views import view_schema_path

CHUNK = "assets/report-50WvgzG_.js"


def validate(doc: dict[str, Any], name: str) -> None:
    schema = json.loads(view_schema_path(name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)


def investigate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["investigate", *args], catch_exceptions=False)
    return result.exit_code, result.stdout


def fleet_args(fleet, *extra: str) -> list[str]:
    args = ["--release-manifest", fleet.release_template, "--cdn", fleet.cdn_url]
    for inst in fleet.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    for url in extra:
        args += ["--target", f"{url}=1.4.1"]
    return args


def test_an_unreachable_instance_claims_no_file(make_fleet) -> None:
    fleet = make_fleet(2, version="1.4.1")
    down = "http://127.93.50.1:9/"
    code, out = investigate(down, *fleet_args(fleet, down), "-o", "json")
    assert code == 3
    doc = json.loads(out)
    validate(doc, "investigate")
    assert doc["verdict"] == "unreachable"
    assert doc["manifest"]["served_path"] == ""
    assert doc["assets"] and {a["state"] for a in doc["assets"]} == {"not-fetched"}
    assert all(a["served_sha256"] is None for a in doc["assets"])
    assert not doc["manifest"]["release_matches"]
    code, out = investigate(down, *fleet_args(fleet, down))
    flat = " ".join(out.split())
    assert "served: nothing fetched" in flat
    assert "this one's content could not be observed" in flat
    assert "checked with all their files" not in flat
    assert f"0 of {len(doc['assets'])} file(s) of this one fetched" in flat


def test_the_spa_fallback_page_is_missing_everywhere(make_fleet) -> None:
    fleet = make_fleet(2, version="1.4.1")
    page = (fleet.releases["1.4.1"] / "index.html").read_bytes()
    target = fleet.instances[1]
    target.site.overrides[CHUNK] = page  # try_files $uri /index.html on the instance
    fleet.cdn_site.overrides[CHUNK] = page  # ... and on the CDN
    code, out = investigate(target.url, *fleet_args(fleet), "-o", "json")
    doc = json.loads(out)
    validate(doc, "investigate")
    row = next(a for a in doc["assets"] if a["path"] == CHUNK)
    assert row["state"] == "missing", row
    assert FALLBACK in (row["error"] or "")
    assert row["served_sha256"] is None and row["matches"] == []
    assert row["cdn"]["state"] == "missing"
    assert CHUNK not in doc["manifest"]["changed"]
    assert "different bytes" not in doc["summary"]
    assert doc["verdict"] != "consistent"
    for match in doc["manifest"]["release_matches"]:
        assert match["matching"] < len(doc["assets"])  # the page is not counted as a file


def test_fleet_agreement_on_a_sample_says_it_was_a_sample(make_fleet, tmp_path) -> None:
    fleet = make_fleet(3, version="1.4.1")
    config = tmp_path / "check.yaml"
    config.write_text("sampling:\n  assets_per_instance: 1\n  seed: 7\n")
    result = CliRunner().invoke(
        main, ["fleet", "-c", str(config), *fleet_args(fleet), "-o", "json"]
    )
    doc = json.loads(result.stdout)
    validate(doc, "fleet")
    same = [h for h in doc["headlines"] if "serve the same content" in h]
    assert same and all("in the files sampled" in h and "seed 7" in h for h in same)
    assert any(n.startswith("could not check every file") for n in doc["notes"])
