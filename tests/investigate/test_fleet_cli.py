"""``artifactcheck fleet``: grouped by what instances serve, the odd group standing out."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from schemas import validate

from artifactcheck.cli.investigate import _watch, parse_outputs
from artifactcheck.investigation import collect_fleet
from artifactcheck.model.errors import DependencyError
from artifactcheck.model.settings import CheckSpec, load_spec
from artifactcheck.present.oncall import FleetView


def test_odd_group_jumps_out(make_fleet, config, cli) -> None:
    fleet = make_fleet(14)
    fleet.drift(4, serves="1.4.1")
    fleet.drift(9, serves="1.4.1")
    r = cli("fleet", "-c", config(fleet))
    assert r.code == 1, r.out + r.err
    assert r.out.splitlines()[0] == "2 of 14 instances of 1.4.2 serve different content"
    assert "Verdicts of 14 instances: 2 mismatch" in r.out
    rows = [line for line in r.out.splitlines() if " 1.4.2     " in line]
    assert len(rows) == 2
    big, odd = rows  # largest group first, the odd one marked with "!"
    assert big.split()[0] == "12" and "12 consistent" in big
    # 1.4.1's bytes under 1.4.2's names and manifest: a mix, never named as 1.4.1
    assert odd.split()[:2] == ["!", "2"] and "2 mismatch" in odd and "serves" not in odd
    assert "web-5, web-10" in odd
    assert "content differs from 12 of 14 instances of 1.4.2" in r.out


def test_fleet_json_follows_schema(make_fleet, config, cli) -> None:
    fleet = make_fleet(6)
    fleet.drift(3, serves="1.4.1")
    fleet.cdn_missing("assets/logo-m9-UFto3.svg", status=403)
    r = cli("fleet", "-c", config(fleet), "-o", "json")
    doc = json.loads(r.out)
    validate(doc, "fleet")
    assert r.code == 1 and doc["exit_code"] == 1
    assert doc["headlines"][0] == "1 of 6 instances of 1.4.2 serves different content"
    big, odd = doc["groups"]
    assert big["count"] == 5 and not big["odd"] and big["verdicts"] == {"cdn-missing": 5}
    assert odd["instances"] == ["web-4"] and odd["odd"] and odd["serves_version"] is None
    assert big["fingerprint"] != odd["fingerprint"]


def test_clean_fleet(make_fleet, config, cli) -> None:
    r = cli("fleet", "-c", config(make_fleet(4)))
    assert r.code == 0
    assert r.out.splitlines()[0] == "All 4 observed instances of 1.4.2 serve the same content"
    assert "!" not in r.out


def test_cdn_down_still_renders_exit_3(make_fleet, config, web, cli) -> None:
    fleet = make_fleet(3)
    cfg = config(fleet)
    web.remove(fleet.cdn_url)
    r = cli("fleet", "-c", cfg)
    assert r.code == 3, r.out
    assert "could not check: CDN" in r.out and "3 inconclusive" in r.out
    doc = json.loads(cli("fleet", "-c", cfg, "-o", "json").out)
    validate(doc, "fleet")
    assert doc["exit_code"] == 3 and doc["groups"][0]["count"] == 3


def test_release_source_down_still_renders_exit_3(make_fleet, config, cli, tmp_path) -> None:
    fleet = make_fleet(3)
    # the directory exists, the files do not: a source that is down, not a typo (exit 2)
    cfg = config(fleet, release={"manifests": [str(tmp_path / "{version}.json")]})
    r = cli("fleet", "-c", cfg)
    assert r.code == 3
    assert "could not check against the release" in r.out
    assert "All 3 observed instances of 1.4.2 serve the same content" in r.out


def test_nothing_to_check_is_a_usage_error(cli) -> None:
    r = cli("fleet")
    assert r.code == 2 and "nothing to check" in r.err


def test_watch_piped_prints_each_refresh(make_fleet, config, cli) -> None:
    fleet = make_fleet(2)
    r = cli("fleet", "-c", config(fleet), "--watch", "0.1", "--iterations", "2")
    assert r.code == 0
    assert r.out.count("All 2 observed instances of 1.4.2 serve the same content") == 2


def test_watch_json_is_one_document_per_line(make_fleet, config, cli) -> None:
    fleet = make_fleet(2)
    r = cli("fleet", "-c", config(fleet), "--watch", "0.1", "--iterations", "3", "-o", "json")
    lines = r.out.splitlines()
    assert r.code == 0 and len(lines) == 3
    for line in lines:
        validate(json.loads(line), "fleet")


def test_watch_redraws_in_place_on_a_terminal(make_fleet) -> None:
    fleet = make_fleet(3)
    spec = load_spec(fleet.spec())
    console = Console(record=True, force_terminal=True, width=150, file=io.StringIO())
    seen: list[str] = []

    async def collect_then_break(spec_: CheckSpec) -> FleetView:
        view = await collect_fleet(spec_)
        seen.append(view.headlines[0])
        if len(seen) == 1:
            fleet.drift(1, serves="1.4.1")  # web-2 goes bad between two refreshes
        return view

    code = _watch(
        spec,
        parse_outputs(()),
        seconds=0.1,
        iterations=2,
        console=console,
        collect=collect_then_break,
    )
    assert code == 1
    assert seen == [
        "All 3 observed instances of 1.4.2 serve the same content",
        "1 of 3 instances of 1.4.2 serves different content",
    ]
    raw = console.file.getvalue()
    assert "\x1b[" in raw and "\x1b[2K" in raw  # colour, and lines erased: redrawn in place
    assert "1 of 3 instances of 1.4.2 serves different content" in console.export_text()


def test_watch_keeps_last_view_when_a_refresh_fails(make_fleet) -> None:
    fleet = make_fleet(2)
    spec = load_spec(fleet.spec())
    out = io.StringIO()
    calls = []

    async def flaky(spec_: CheckSpec) -> FleetView:
        calls.append(1)
        if len(calls) == 2:
            raise DependencyError("list pods in shop: API server unreachable")
        return await collect_fleet(spec_)

    code = _watch(
        spec,
        parse_outputs(()),
        seconds=0.1,
        iterations=3,
        console=Console(file=out, width=150),
        collect=flaky,
    )
    text = out.getvalue()
    assert code == 0 and text.count("serve the same content") == 3
    assert "failed: list pods in shop: API server unreachable" in text


def test_watch_fails_when_the_first_check_fails(make_fleet) -> None:
    fleet = make_fleet(1)

    async def down(spec_: CheckSpec) -> FleetView:
        raise DependencyError("API server unreachable")

    with pytest.raises(SystemExit) as exc:
        _watch(
            load_spec(fleet.spec()),
            parse_outputs(()),
            seconds=0.1,
            iterations=2,
            console=Console(file=io.StringIO()),
            collect=down,
        )
    assert exc.value.code == 3
