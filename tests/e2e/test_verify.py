"""``artifactcheck verify`` end to end against real loopback servers and real builds."""

from __future__ import annotations

import json
import subprocess
import sys
from xml.etree import ElementTree as ET

from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.present.report import assets
from artifactcheck_sim.web import Site, Status


def verify(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def fleet_args(fleet, *, cdn: bool = True, known: bool = True) -> list[str]:
    args = []
    for inst in fleet.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    args += ["--release-manifest", fleet.release_template, "--deadline", "10"]
    if cdn:
        args += ["--cdn", fleet.cdn_url]
    if known:
        for v in sorted(set(fleet.releases) - {fleet.version}):
            args += ["--known-version", v]
    return args


def test_clean_fleet_exits_0(make_fleet) -> None:
    fleet = make_fleet(4)
    code, out, _ = verify(*fleet_args(fleet), "--output", "json")
    doc = json.loads(out)
    assert code == 0, out
    assert doc["counts"]["consistent"] == 4
    assert all(r["verdict"] == "consistent" for r in doc["results"])
    # every file of the real build was fetched and hashed on every instance
    assert all(len(r["assets"]) >= 6 for r in doc["results"])


def test_other_release_bytes_under_same_names(make_fleet) -> None:
    fleet = make_fleet(4, version="1.4.1")
    swapped = fleet.drift(1, serves="1.4.2")
    assert len(swapped) >= 2
    code, out, _ = verify(*fleet_args(fleet, cdn=False), "--output", "json")
    assert code == 1
    results = {r["instance"]: r for r in json.loads(out)["results"]}
    bad = results[fleet.instances[1].url]
    assert bad["verdict"] == "mismatch"
    # 1.4.2's bytes under 1.4.1's names, with 1.4.1's index.html and manifest: a mix,
    # never labelled as serving 1.4.2
    assert bad["serves_version"] is None
    differing = {f["path"] for f in bad["findings"] if f["kind"] == "content-differs"}
    assert differing == set(swapped)
    same_size = [
        f for f in bad["findings"] if f["kind"] == "content-differs" and "same size" in f["message"]
    ]
    assert same_size, "the JS files keep their size between releases: only hashing catches them"
    assert [r["verdict"] for n, r in results.items() if n != fleet.instances[1].url] == [
        "consistent"
    ] * 3


def test_other_release_unknown_still_mismatch(make_fleet) -> None:
    fleet = make_fleet(3, version="1.4.1")
    fleet.drift(0, serves="1.4.2")
    code, out, _ = verify(*fleet_args(fleet, cdn=False, known=False), "--output", "json")
    assert code == 1
    bad = json.loads(out)["results"][0]
    assert bad["verdict"] == "mismatch" and bad["serves_version"] is None


def test_table_names_instance_and_files(make_fleet) -> None:
    fleet = make_fleet(3, version="1.4.1")
    swapped = fleet.drift(2, serves="1.4.2")
    code, out, _ = verify(*fleet_args(fleet, cdn=False))
    assert code == 1
    flat = " ".join(out.split())
    assert "mismatch" in flat and "1.4.1" in flat
    for path in swapped:
        assert path in out.replace("\n", "")


def test_cdn_missing_404_and_403(make_fleet) -> None:
    for status in (404, 403):
        fleet = make_fleet(3)
        fleet.cdn_missing("assets/logo-m9-UFto3.svg", status=status)
        code, out, _ = verify(*fleet_args(fleet), "--output", "json")
        doc = json.loads(out)
        assert code == 1
        assert doc["counts"]["cdn-missing"] == 3, doc["counts"]
        finding = next(f for f in doc["results"][0]["findings"] if f["kind"] == "cdn-missing")
        assert finding["path"] == "assets/logo-m9-UFto3.svg" and finding["actual"] == str(status)


def test_cdn_down_is_inconclusive_never_mismatch(make_fleet, web) -> None:
    fleet = make_fleet(3)
    web.remove(fleet.cdn_url)  # nothing listens there any more: connection refused
    code, out, _ = verify(*fleet_args(fleet), "--output", "json")
    doc = json.loads(out)
    assert code == 3, doc["counts"]
    assert doc["counts"]["inconclusive"] == 3
    assert any("CDN" in f["message"] and "unreachable" in f["message"] for f in doc["findings"])


def test_release_source_down_without_copy_is_inconclusive(make_fleet, tmp_path) -> None:
    fleet = make_fleet(3, version="1.4.1")
    fleet.drift(0, serves="1.4.2")  # even a real drift cannot be judged without the release
    args = fleet_args(fleet, cdn=False, known=False)
    # the directory exists (not a configuration error), the version's file does not
    args[args.index("--release-manifest") + 1] = str(tmp_path / "{version}.json")
    code, out, _ = verify(*args, "--output", "json")
    doc = json.loads(out)
    assert code == 3
    assert doc["counts"]["inconclusive"] == 3
    assert any(f["kind"] == "expectation-unavailable" for f in doc["findings"])


def test_release_source_url_down_is_inconclusive(make_fleet, web) -> None:
    fleet = make_fleet(2)
    source = web.add(Site(fault=Status(503)), "127.90.0.1")
    args = fleet_args(fleet, cdn=False, known=False)
    args[args.index("--release-manifest") + 1] = source + "releases/{version}.json"
    code, out, _ = verify(*args, "--output", "json")
    assert code == 3
    assert json.loads(out)["counts"]["inconclusive"] == 2


def test_consensus_without_release_manifest(make_fleet) -> None:
    fleet = make_fleet(5, version="1.4.1")
    fleet.drift(3, serves="1.4.2")
    args = [a for inst in fleet.instances for a in ("--target", f"{inst.url}={inst.version}")]
    code, out, _ = verify(*args, "--output", "json")
    doc = json.loads(out)
    assert code == 1
    verdicts = {r["instance"]: r["verdict"] for r in doc["results"]}
    assert verdicts.pop(fleet.instances[3].url) == "mismatch"
    assert set(verdicts.values()) == {"consistent"}
    odd = doc["results"][3]
    assert any(f["kind"] == "minority-content" for f in odd["findings"])


def test_version_endpoint(make_fleet) -> None:
    fleet = make_fleet(2)
    args = [a for inst in fleet.instances for a in ("--target", inst.url)]
    code, out, _ = verify(
        *args,
        "--release-manifest",
        fleet.release_template,
        "--version-endpoint",
        "/version#/version",
        "--output",
        "json",
    )
    doc = json.loads(out)
    assert code == 0, doc
    assert {r["reported_version"] for r in doc["results"]} == {"1.4.1"}


def test_junit_and_json_files(make_fleet, tmp_path) -> None:
    fleet = make_fleet(3)
    fleet.drift(0, serves="1.4.2")
    junit, js = tmp_path / "r.xml", tmp_path / "r.json"
    code, _, _ = verify(*fleet_args(fleet), "--output", f"junit={junit}", "--output", f"json={js}")
    assert code == 1
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "3"
    failures = suite.findall("testcase/failure")
    assert any(f.get("type") == "mismatch" for f in failures)
    assert json.loads(js.read_text())["schema"] == "artifactcheck/report/v3"


def test_sampling_keeps_entry_points(make_fleet) -> None:
    fleet = make_fleet(3)
    code, out, _ = verify(
        *fleet_args(fleet, cdn=False),
        "--sample-assets",
        "1",
        "--sample-instances",
        "2",
        "--output",
        "json",
    )
    doc = json.loads(out)
    assert code == 0
    assert len(doc["results"]) == 2
    sampled = []
    for r in doc["results"]:
        paths = {a["path"] for a in assets(doc, r)}
        # entry points (index.html, the entry chunk and its CSS) always, plus one sample
        assert {"index.html", "assets/index-Bfu9pp8v.js", "assets/index-CQbHzygI.css"} <= paths
        assert len(paths) == 4
        sampled.append(paths)
    assert sampled[0] == sampled[1], "siblings of one version sample the same files"


def test_configuration_errors_name_the_field(tmp_path) -> None:
    bad = tmp_path / "check.yaml"
    bad.write_text("targets:\n  - url: ftp://x/\nhttp:\n  connect_timeout: -1\n  bogus: 1\n")
    code, _, err = verify("--config", str(bad))
    assert code == 2
    assert (
        "targets.0.url" in err
        and "http.connect_timeout" in err
        and "http.bogus: unknown field" in err
    )
    code, _, err = verify("--target", "not-a-url")
    assert code == 2 and "--target 'not-a-url'" in err
    code, _, err = verify()
    assert code == 2 and "nothing to check" in err


def test_console_script_exit_code(make_fleet) -> None:
    fleet = make_fleet(2)
    fleet.drift(1, serves="1.4.2")
    proc = subprocess.run(
        [sys.executable, "-m", "artifactcheck", "verify", *fleet_args(fleet, cdn=False)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "mismatch" in proc.stdout


def test_a_bug_exits_inconclusive_never_as_a_mismatch(monkeypatch) -> None:
    """An uncaught exception would exit 1, which CI reads as "something served is
    wrong": a bug is not a verdict, it exits 3 with the traceback logged."""

    async def broken(*args, **kwargs):
        raise RuntimeError("a bug in judging")

    monkeypatch.setattr("artifactcheck.pipeline.judge_step", broken)
    code, _out, err = verify("--target", "http://127.93.61.1:9/=1.4.1")
    assert code == 3
    assert "internal error, nothing judged: RuntimeError: a bug in judging" in err
