"""Rendering and view building: pods, colour on a terminal, plain text when piped.

Pods are built as Kubernetes discovery builds them (``namespace/name``, label signal,
node, ReplicaSet, imageID, start time, gate condition, annotations) and pointed at the
simulated fleet's servers, so the whole view runs on real fetched bytes without a
cluster; Events come through the injected ``events`` source, as the hook will.
"""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console
from schemas import validate

from artifactcheck.investigation import collect_fleet, collect_investigation, events_for
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.records import replace
from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import Instance, InstanceResult, Report, Verdict, VersionSignal
from artifactcheck.present.oncall import (
    FleetView,
    Investigation,
    PodEvent,
    age,
    build_fleet,
    file_names,
    find_target,
    join_words,
    text_diff,
)
from artifactcheck.present.views import (
    fleet_json,
    investigation_json,
    render_fleet,
    render_investigation,
)

NOW = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
OLD_IMAGE = "docker-pullable://shop/web@sha256:" + "a" * 64
STALE_IMAGE = "docker-pullable://shop/web@sha256:" + "b" * 64
BAD = (2, 4)  # web-3 and web-5: rescheduled onto one node with a stale cached image


def pods_for(fleet) -> list[Instance]:
    """The fleet's instances as pods; web-3 and web-5 are new, on ip-10-0-3-7."""
    out = []
    for i, sim in enumerate(fleet.instances):
        bad = i in BAD
        out.append(
            Instance(
                name=f"shop/{sim.name}",
                base_url=sim.url,
                kind="pod",
                signals=(VersionSignal("label:app.kubernetes.io/version", sim.version),),
                namespace="shop",
                node="ip-10-0-3-7" if bad else f"ip-10-0-1-{i % 2 + 1}",
                owner="web-5d8f7" if bad else "web-7f9c4",
                image="shop/web:1.4.2",
                image_id=STALE_IMAGE if bad else OLD_IMAGE,
                started_at=NOW - timedelta(minutes=25 - 2 * i)
                if bad
                else NOW - timedelta(hours=3, minutes=i),
                has_readiness_gate=True,
                gate_status="False" if bad else "True",
                annotations={
                    "artifactcheck.io/verdict": "mismatch" if bad else "consistent",
                    "kubectl.kubernetes.io/restartedAt": "2024-05-01T12:00:00Z",
                },
                uid=f"uid-{sim.name}",
            )
        )
    return out


def events(instance: Instance, spec: object) -> list[PodEvent]:
    return [
        PodEvent("Warning", "ContentMismatch", "reports 1.4.2, serves 1.4.1", 3, NOW),
        PodEvent("Normal", "Pulled", "Container image already present on machine", 1, NOW),
    ]


@pytest.fixture
def pod_fleet(make_fleet):
    fleet = make_fleet(6)
    for i in BAD:
        fleet.drift(i, serves="1.4.1")
    return fleet, pods_for(fleet), load_spec(fleet.spec())


@pytest.fixture
def pod_investigation(pod_fleet) -> Investigation:
    _fleet, pods, spec = pod_fleet
    return asyncio.run(
        collect_investigation(spec, "web-3", instances=pods, events=events, now=lambda: NOW)
    )


def test_pod_summary_names_pod_files_release_node_and_time(pod_investigation) -> None:
    inv = pod_investigation
    assert inv.target.name == "shop/web-3" and inv.exit_code == 1
    assert inv.summary == (
        "shop/web-3 reports 1.4.2 but serves 1.4.1's index-D62fgCHr.css, index-DbDROF-m.js and "
        "report-DjQj1oj0.js mixed with release 1.4.2's other files; "
        "the CDN has none of them (it has release 1.4.2's bytes); "
        "2 of 6 pods do the same (shop/web-5), all on node ip-10-0-3-7, started between "
        "12:09 UTC and 12:13 UTC, after every other one."
    )
    assert inv.siblings.image_same == 2 and inv.siblings.image_total == 6
    assert inv.siblings.majority_image == OLD_IMAGE


def test_pod_rendering_on_a_terminal_has_colour(pod_investigation) -> None:
    console = Console(record=True, force_terminal=True, width=160, file=io.StringIO())
    render_investigation(pod_investigation, console)
    styled = console.export_text(styles=True, clear=False)
    text = console.export_text()
    assert "\x1b[" in styled
    assert "\x1b[1;31mmismatch" in styled  # the verdict in bold red
    assert "condition artifactcheck.io/content-verified: False" in text
    assert "artifactcheck.io/verdict" in text and "kubectl.kubernetes.io/restartedAt" in text
    assert "ContentMismatch" in text and "reports 1.4.2, serves 1.4.1" in text
    assert "DIFFERS: only 2 of 6 pods reporting 1.4.2 run it" in text
    assert "ip-10-0-3-7" in text and "web-5d8f7" in text
    assert "12:09 UTC (21m ago)" in text


def test_piped_rendering_is_plain_ascii(pod_investigation) -> None:
    out = io.StringIO()
    render_investigation(pod_investigation, Console(file=out, width=160))
    text = out.getvalue()
    assert "\x1b" not in text
    assert text.isascii(), [c for c in text if not c.isascii()][:5]
    assert text.startswith("shop/web-3 mismatch")
    assert " ----" in text  # ASCII table rules, no box drawing


def test_pod_json_follows_schema(pod_investigation) -> None:
    doc = investigation_json(pod_investigation)
    validate(doc, "investigate")
    assert doc["pod"]["gate_status"] == "False" and doc["pod"]["has_gate"]
    assert doc["pod"]["events"][0]["reason"] == "ContentMismatch"
    assert doc["target"]["node"] == "ip-10-0-3-7" and doc["siblings"]["nodes"] == ["ip-10-0-3-7"]


def test_events_hook_is_empty_without_a_cluster(pod_fleet) -> None:
    _fleet, pods, spec = pod_fleet
    assert events_for(pods[0], spec) == []
    assert events_for(pods[0], None) == []
    inv = asyncio.run(collect_investigation(spec, "shop/web-1", instances=pods, now=lambda: NOW))
    assert inv.pod is not None and inv.pod.events == ()
    assert inv.pod.events_note == "no cluster configured: Events not read"


def test_pod_fleet_view_groups_by_content_and_image(pod_fleet) -> None:
    _fleet, pods, spec = pod_fleet
    view: FleetView = asyncio.run(collect_fleet(spec, instances=pods, now=lambda: NOW))
    assert view.headlines[:2] == (
        "2 of 6 pods of 1.4.2 serve different content",
        "2 of 6 pods of 1.4.2 run a different image digest",
    )
    big, odd = view.groups
    assert big.count == 4 and not big.odd and big.owners == ("web-7f9c4",)
    assert odd.instances == ("shop/web-3", "shop/web-5") and odd.odd
    assert odd.nodes == ("ip-10-0-3-7",) and odd.image_id == STALE_IMAGE
    validate(fleet_json(view), "fleet")
    console = Console(record=True, force_terminal=True, width=160, file=io.StringIO())
    render_fleet(view, console)
    styled = console.export_text(styles=True, clear=False)
    text = console.export_text()
    assert "bbbbbbbbbbbb" in text and "17m-21m" in text and "3h00m-3h05m" in text
    assert "\x1b[1;31m2 of 6 pods of 1.4.2 serve different content" in styled


# --------------------------------------------------------------------------- pure parts


def inst(name: str, **kw: object) -> Instance:
    return Instance(name=name, base_url=f"http://{name}.test/", **kw)  # type: ignore[arg-type]


def result(name: str, version: str, fp: str | None, image: str | None = None) -> InstanceResult:
    verdict = Verdict.CONSISTENT if fp else Verdict.UNREACHABLE
    return InstanceResult(
        instance=inst(
            name, kind="pod", image_id=image, signals=(VersionSignal("target", version),)
        ),
        verdict=verdict,
        reason="",
        reported_version=version,
        fingerprint=fp,
    )


def test_fleet_tie_has_no_majority_and_unobserved_count() -> None:
    report = Report(
        results=(
            result("a", "2.0", "f1"),
            result("b", "2.0", "f2"),
            result("c", "2.0", None),
        )
    )
    view = build_fleet(report, release_source="x", now=NOW)
    assert view.headlines[:2] == (
        "2 pods of 2.0 disagree on content with no majority",
        "1 of 3 pods of 2.0 could not be observed",
    )
    assert all(g.odd for g in view.groups)
    validate(fleet_json(view), "fleet")


def test_fleet_same_content_different_image() -> None:
    report = Report(
        results=(
            result("a", "2.0", "f1", "img1"),
            result("b", "2.0", "f1", "img1"),
            result("c", "2.0", "f1", "img2"),
        )
    )
    view = build_fleet(report, release_source="x", now=NOW)
    assert view.headlines == (
        "All 3 observed pods of 2.0 serve the same content",
        "1 of 3 pods of 2.0 runs a different image digest",
    )
    odd = [g for g in view.groups if g.odd]
    assert [g.instances for g in odd] == [("c",)]


def test_find_target_forms() -> None:
    pods = [
        inst("shop/web-1", kind="pod", uid="0123456789abcdef"),
        inst("blog/web-1", kind="pod"),
        inst("shop/web-2", kind="pod"),
    ]
    assert find_target("shop/web-1", pods) is pods[0]
    assert find_target("web-2", pods) is pods[2]
    assert find_target("http://10.0.0.9", pods) is None
    moved = [replace(pods[2], base_url="http://10.0.0.9/")]
    assert find_target("http://10.0.0.9", moved) is moved[0]
    assert find_target("0123456789ab", pods) is pods[0]
    assert find_target("web-9", pods) is None
    with pytest.raises(ConfigError, match="ambiguous: blog/web-1, shop/web-1"):
        find_target("web-1", pods)


def test_words() -> None:
    assert join_words(["a"]) == "a"
    assert join_words(["a", "b", "c"]) == "a, b and c"
    assert file_names(["x/a.js", "y/a.js"]) == "x/a.js and y/a.js"  # ambiguous: full paths
    assert file_names([f"d/{i}.js" for i in range(6)]) == "0.js, 1.js, 2.js, 3.js and 2 more"
    assert [age(s) for s in (5, 125, 3 * 3600 + 300, 2 * 86400 + 4 * 3600)] == [
        "5s",
        "2m",
        "3h05m",
        "2d04h",
    ]


def test_text_diff_breaks_minified_lines_and_caps() -> None:
    expected = ("var a=1;" * 40 + 'L="r2";' + "var b=2;" * 40).encode()
    served = ("var a=1;" * 40 + 'L="r1";' + "var b=2;" * 40).encode()
    view = text_diff("x.js", expected, served, expected_source="sibling web-1", max_lines=40)
    assert view.note and "broken after" in view.note
    assert any(line.startswith("-") and 'L="r2"' in line for line in view.lines)
    assert any(line.startswith("+") and 'L="r1"' in line for line in view.lines)
    assert all(len(line) <= 201 for line in view.lines)
    capped = text_diff("x.js", expected, served, expected_source="s", max_lines=2)
    assert len(capped.lines) == 2 and capped.truncated > 0
    same = text_diff("x.js", b"a\r\nb\r\n", b"a\nb\n", expected_source="s")
    assert same.lines == () and "same" in (same.note or "")
