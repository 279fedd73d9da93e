"""``artifactcheck investigate`` against a simulated fleet: summary, signals, diff, JSON.

The fleet plants the outage behind artifactcheck (web-4 reports 1.4.2 but serves
1.4.1's bytes under 1.4.2's file names) and a CDN that answers 403 for one asset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trustme
from schemas import validate

from artifactcheck_sim.web import Site

LOGO = "assets/logo-m9-UFto3.svg"


def summary_of(out: str) -> str:
    """The summary paragraph (rich wraps it at the console width), on one line."""
    lines = out.splitlines()[1:]
    para = []
    for line in lines:
        if not line.strip() or line.startswith("  ! "):
            break
        para.append(line.strip())
    return " ".join(para)


@pytest.fixture
def drifted(make_fleet, config):
    """6 instances of 1.4.2; web-4 serves 1.4.1's bytes; the CDN lacks the logo (403)."""
    fleet = make_fleet(6)
    swapped = fleet.drift(3, serves="1.4.1")
    fleet.cdn_missing(LOGO, status=403)
    return fleet, swapped, config(fleet)


def test_summary_names_instance_files_and_release(drifted, cli) -> None:
    fleet, swapped, cfg = drifted
    r = cli("investigate", "web-4", "-c", cfg)
    assert r.code == 1, r.out + r.err
    summary = summary_of(r.out)
    assert summary.startswith("web-4 reports 1.4.2 but serves 1.4.1's ")
    for path in swapped:
        assert path.rsplit("/", 1)[-1] in summary
    assert (
        "the CDN has none of them (it has release 1.4.2's bytes) and answers 403 for "
        "logo-m9-UFto3.svg" in summary
    )
    assert "it is the only one of 6 instances doing so" in summary
    # signals side by side: the label says 1.4.2, the bytes say 1.4.1
    assert "they DISAGREE" in r.out
    assert "differs from release 1.4.2" in r.out
    # served manifest vs expected release
    assert f"changed (3): {', '.join(sorted(swapped))}" in r.out
    assert "the differing files are release 1.4.1's" in r.out
    # per-asset table names the 1.4.1 file whose bytes are served
    assert "= 1.4.1:assets/index-Bfu9pp8v.js" in r.out
    assert "403 missing" in r.out
    assert "n/a (http)" in r.out
    assert "add --diff" in r.out


def test_json_follows_schema_and_carries_evidence(drifted, cli) -> None:
    fleet, swapped, cfg = drifted
    r = cli("investigate", "web-4", "-c", cfg, "--output", "json", "--diff")
    assert r.code == 1
    doc = json.loads(r.out)
    validate(doc, "investigate")
    assert doc["target"]["name"] == "web-4"
    # 1.4.1's bytes under 1.4.2's names and manifest: a mix, not release 1.4.1
    assert doc["verdict"] == "mismatch" and doc["serves_version"] is None
    assert doc["manifest"]["changed"] == sorted(swapped)
    assert doc["siblings"]["same"] == ["web-4"] and doc["siblings"]["total"] == 6
    rows = {a["path"]: a for a in doc["assets"]}
    assert {p for p, a in rows.items() if a["state"] == "differs"} == set(swapped)
    for path in swapped:
        assert rows[path]["cdn"]["state"] == "differs"
        assert rows[path]["cdn"]["sha256"] == rows[path]["expected_sha256"]
        assert rows[path]["evidence"]["server"] == "nginx/1.27.0"
    assert rows[LOGO]["cdn"]["state"] == "missing" and rows[LOGO]["cdn"]["status"] == 403
    assert rows[LOGO]["cdn"]["evidence"]["server"] == "AmazonS3"
    assert rows["assets/big-table-D9ljaH91.js"]["evidence"]["cache_control"].endswith("immutable")
    assert {d["path"] for d in doc["diffs"]} == {p for p in swapped if p.endswith((".js", ".css"))}
    assert [t["note"] for t in doc["tls"]] == ["n/a (http)", "n/a (http)"]
    assert doc["pod"] is None


def test_diff_from_a_consistent_sibling(drifted, cli) -> None:
    fleet, _swapped, cfg = drifted
    r = cli("investigate", "web-4", "-c", cfg, "--diff")
    assert r.code == 1
    assert "diff assets/index-DbDROF-m.js" in r.out
    assert "expected bytes from sibling web-1" in r.out
    assert "--- expected/assets/index-DbDROF-m.js" in r.out
    # the build marker differs between the releases: r2 expected, r1 served
    assert any(line.startswith("-") and 'L="r2"' in line for line in r.out.splitlines())
    assert any(line.startswith("+") and 'L="r1"' in line for line in r.out.splitlines())
    assert "broken after ; { }" in r.out


def test_diff_lines_are_capped(drifted, cli) -> None:
    _fleet, _swapped, cfg = drifted
    doc = json.loads(
        cli("investigate", "web-4", "-c", cfg, "-o", "json", "--diff", "--diff-lines", "3").out
    )
    assert all(len(d["lines"]) <= 3 for d in doc["diffs"])
    assert any(d["truncated"] > 0 for d in doc["diffs"])


def test_diff_from_the_cdn_when_no_sibling_has_the_bytes(make_fleet, config, cli) -> None:
    fleet = make_fleet(1)
    fleet.drift(0, serves="1.4.1")
    doc = json.loads(cli("investigate", "web-1", "-c", config(fleet), "-o", "json", "--diff").out)
    validate(doc, "investigate")
    assert doc["diffs"] and all(
        d["expected_source"] == f"CDN {fleet.cdn_url}" and d["lines"] for d in doc["diffs"]
    )


def test_diff_says_when_no_source_has_the_expected_bytes(make_fleet, config, cli) -> None:
    fleet = make_fleet(1)
    fleet.drift(0, serves="1.4.1")
    r = cli("investigate", "web-1", "-c", config(fleet, cdn=None), "--diff")
    assert r.code == 1
    assert "no source has the expected bytes" in r.out
    assert "could not check the CDN: none configured" in r.out


def test_sibling_sharing_a_cdn_gap_is_told_how_many_share_it(drifted, cli) -> None:
    _fleet, _swapped, cfg = drifted
    r = cli("investigate", "web-1", "-c", cfg, "--output", "json")
    doc = json.loads(r.out)
    validate(doc, "investigate")
    # web-1's own content is right; the CDN lacking the logo is what is wrong with it
    assert doc["verdict"] == "cdn-missing" and r.code == 1
    assert "5 of 6 instances do the same" in doc["summary"]
    assert "web-4" not in doc["summary"]


def test_clean_target_in_a_clean_fleet(make_fleet, config, cli) -> None:
    fleet = make_fleet(3)
    r = cli("investigate", "web-2", "-c", config(fleet))
    assert r.code == 0, r.out
    assert "web-2 reports 1.4.2 and serves release 1.4.2 (8 files verified)" in r.out
    assert "3 of 3 instances serve the same content" in r.out


def test_target_by_url_with_flags_like_verify(make_fleet, cli) -> None:
    fleet = make_fleet(3)
    fleet.drift(2, serves="1.4.1")
    args = []
    for inst in fleet.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    args += ["--release-manifest", fleet.release_template, "--known-version", "1.4.1"]
    args += ["--cdn", fleet.cdn_url]
    bad = fleet.instances[2].url
    r = cli("investigate", bad.rstrip("/"), *args, "-o", "json")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["target"]["url"] == bad and doc["siblings"]["total"] == 3
    assert doc["summary"].startswith(f"{bad} reports 1.4.2 but serves 1.4.1's")


def test_url_target_not_among_siblings_is_added(make_fleet, cli) -> None:
    fleet = make_fleet(2)
    url = fleet.instances[0].url
    r = cli(
        "investigate",
        f"{url}=1.4.2",
        "--release-manifest",
        fleet.release_template,
        "--cdn",
        fleet.cdn_url,
    )
    assert r.code == 0, r.out + r.err
    assert "no siblings were checked to compare with" in summary_of(r.out)


def test_unknown_target_is_a_usage_error(drifted, cli) -> None:
    _fleet, _swapped, cfg = drifted
    r = cli("investigate", "web-99", "-c", cfg)
    assert r.code == 2
    assert "matches no instance" in r.err and "web-1" in r.err
    r = cli("investigate", "web-1")
    assert r.code == 2 and "no instances were found" in r.err


def test_bad_output_is_a_usage_error(drifted, cli) -> None:
    _fleet, _swapped, cfg = drifted
    r = cli("investigate", "web-1", "-c", cfg, "-o", "junit")
    assert r.code == 2 and "--output" in r.err


def test_json_to_file_and_table_together(drifted, cli, tmp_path: Path) -> None:
    _fleet, _swapped, cfg = drifted
    out = tmp_path / "inv.json"
    r = cli("investigate", "web-4", "-c", cfg, "-o", "table", "-o", f"json={out}")
    assert r.code == 1 and r.out.startswith("web-4 mismatch")
    validate(json.loads(out.read_text()), "investigate")


def test_cdn_down_still_renders_and_says_what_was_not_checked(make_fleet, config, web, cli):
    fleet = make_fleet(3)
    cfg = config(fleet)
    web.remove(fleet.cdn_url)  # nothing listens there any more
    r = cli("investigate", "web-1", "-c", cfg)
    assert r.code == 3, r.out
    assert "could not check: CDN" in r.out and "unreachable" in r.out
    assert "could not be judged" in summary_of(r.out)
    assert "files (" in r.out  # the per-asset table is still there
    doc = json.loads(cli("investigate", "web-1", "-c", cfg, "-o", "json").out)
    validate(doc, "investigate")
    assert doc["exit_code"] == 3 and doc["verdict"] == "inconclusive"
    assert all(a["cdn"]["state"] in ("error", "not-checked") for a in doc["assets"])
    assert any(n.startswith("could not check") and "CDN" in n for n in doc["notes"])


def test_cdn_down_does_not_hide_a_real_mismatch(make_fleet, config, web, cli) -> None:
    fleet = make_fleet(3)
    fleet.drift(1, serves="1.4.1")
    cfg = config(fleet)
    web.remove(fleet.cdn_url)
    r = cli("investigate", "web-2", "-c", cfg)
    assert r.code == 1
    assert summary_of(r.out).startswith("web-2 reports 1.4.2 but serves 1.4.1's")
    assert "could not check: CDN" in r.out


def test_release_source_down_still_renders(make_fleet, config, cli, tmp_path: Path) -> None:
    fleet = make_fleet(3)
    fleet.drift(0, serves="1.4.1")
    # the directory exists, the files do not: a source that is down, not a typo (exit 2)
    cfg = config(fleet, release={"manifests": [str(tmp_path / "{version}.json")]})
    r = cli("investigate", "web-2", "-c", cfg)
    assert r.code == 3, r.out
    assert "could not check against the release" in r.out
    assert "expected: could not check" in r.out
    doc = json.loads(cli("investigate", "web-3", "-c", cfg, "-o", "json").out)
    validate(doc, "investigate")
    assert doc["exit_code"] == 3 and doc["manifest"]["expected_from"] is None
    # the drifted web-1 cannot be compared with its release, but the CDN still shows it
    r = cli("investigate", "web-1", "-c", cfg)
    assert r.code == 1 and "the CDN serves other bytes" in summary_of(r.out)
    assert doc["manifest"]["changed"] == []


def test_consensus_mode_without_release_source(make_fleet, config, cli) -> None:
    fleet = make_fleet(4)
    swapped = fleet.drift(2, serves="1.4.1")
    r = cli("investigate", "web-3", "-c", config(fleet, release=None), "-o", "json", "--diff")
    doc = json.loads(r.out)
    validate(doc, "investigate")
    assert r.code == 1 and doc["verdict"] == "mismatch"
    assert doc["manifest"]["expected_from"] == "siblings (consensus)"
    assert set(doc["manifest"]["changed"]) == set(swapped)
    assert any("consensus" in n for n in doc["notes"])
    assert all(d["expected_source"].startswith("sibling") for d in doc["diffs"])


def test_unreachable_target(make_fleet, config, web, cli) -> None:
    fleet = make_fleet(2)
    cfg = config(fleet)
    web.remove(fleet.instances[1].url)
    r = cli("investigate", "web-2", "-c", cfg, "--deadline", "5")
    assert r.code == 3
    assert summary_of(r.out).startswith("web-2 could not be reached")
    assert "could not check the instance at all" in r.out


def test_tls_certificate_of_an_https_instance(make_fleet, web, cli, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    ca = trustme.CA()
    cert = ca.issue_cert("127.96.255.1", "shop.example")
    server_ctx = __import__("ssl").create_default_context(__import__("ssl").Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    url = web.add(Site(root=fleet.releases["1.4.2"]), "127.96.255.1", ssl_context=server_ctx)
    r = cli(
        "investigate",
        f"{url}=1.4.2",
        "--release-manifest",
        fleet.release_template,
        "--ca-bundle",
        str(ca_file),
        "-o",
        "json",
    )
    doc = json.loads(r.out)
    validate(doc, "investigate")
    assert r.code == 0, doc["summary"]
    (tls,) = doc["tls"]
    assert tls["role"] == "instance" and tls["endpoint"] == url
    assert "O=trustme" in (tls["issuer"] or "") and tls["days_left"] > 300


def test_version_endpoint_signal_side_by_side(make_fleet, config, cli) -> None:
    fleet = make_fleet(3)
    fleet.instances[0].site.version = "1.4.1"  # /version disagrees with the deployment
    cfg = config(fleet, version_endpoint={"path": "/version", "pointer": "/version"})
    doc = json.loads(cli("investigate", "web-1", "-c", cfg, "-o", "json").out)
    validate(doc, "investigate")
    assert doc["verdict"] == "signal-conflict" and doc["exit_code"] == 1
    signals = {s["source"]: s for s in doc["signals"]["items"]}
    assert signals["target"]["value"] == "1.4.2" and signals["target"]["agrees"] is True
    assert signals["endpoint"]["value"] == "1.4.1" and signals["endpoint"]["agrees"] is False
    assert doc["signals"]["agree"] is False
    assert doc["summary"].startswith(
        "web-1's version signals disagree: target says 1.4.2, endpoint says 1.4.1"
    )
    clean = json.loads(cli("investigate", "web-2", "-c", cfg, "-o", "json").out)
    assert clean["signals"]["agree"] is True and clean["exit_code"] == 0
    assert [s["source"] for s in clean["signals"]["items"]] == ["target", "endpoint", "content"]
