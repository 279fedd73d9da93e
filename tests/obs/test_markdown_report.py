"""``verify --output markdown[=FILE]``: the table a CI job summary shows, read back with
a real Markdown parser (markdown-it-py, CommonMark with GitHub's tables).

A real run against loopback servers fills it; hostile text (a pipe, a backtick, a
newline, HTML, link and emphasis markup in an instance's name or an error message)
must stay text in its own cell. The flag is refused like the other formats' when two
outputs go to standard output, one file is named twice, or the file cannot be written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from markdown_it import MarkdownIt
from markdown_it.token import Token

from artifactcheck.cli.main import main
from artifactcheck.model.values import (
    Action,
    ActionKind,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Report,
    Severity,
    Verdict,
)
from artifactcheck.present.report import MARKDOWN_MAX_ROWS, render_markdown
from artifactcheck_sim.fleet import RELEASES, SimFleet

Table = list[list[str]]  # header row first


def parse(markdown: str) -> list[Token]:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown)


def text_of(inline: Token) -> str:
    """The text a reader sees in an inline token (markup dropped, escapes resolved)."""
    return "".join(
        child.content for child in inline.children or [] if child.type in ("text", "code_inline")
    )


def tables(tokens: list[Token]) -> list[Table]:
    out: list[Table] = []
    row: list[str] = []
    for i, tok in enumerate(tokens):
        if tok.type == "table_open":
            out.append([])
        elif tok.type == "tr_open":
            row = []
        elif tok.type in ("th_open", "td_open"):
            row.append(text_of(tokens[i + 1]) if tokens[i + 1].type == "inline" else "")
        elif tok.type == "tr_close":
            out[-1].append(row)
    return out


def table_with(all_tables: list[Table], first_header: str) -> Table:
    return next(t for t in all_tables if t[0][0] == first_header)


@pytest.fixture
def fleet() -> Iterator[SimFleet]:
    with SimFleet(
        instances=3, version="1.4.2", first_host="127.97.0.1", cdn_host="127.97.1.1"
    ) as f:
        yield f


def verify_args(fleet: SimFleet) -> list[str]:
    args = ["verify", "--release-manifest", fleet.release_template, "--cdn", fleet.cdn_url]
    args += ["--known-version", "1.4.1"]
    for inst in fleet.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    return args


def test_a_real_run_reads_back_as_its_verdicts_and_findings(
    fleet: SimFleet, tmp_path: Path
) -> None:
    fleet.drift(1, serves="1.4.1")
    build = RELEASES["1.4.2"]
    asset = next(p.relative_to(build).as_posix() for p in sorted(build.rglob("*.svg")))
    fleet.cdn_missing(asset, status=403)
    summary, junit = tmp_path / "summary.md", tmp_path / "junit.xml"
    result = CliRunner().invoke(
        main,
        [*verify_args(fleet), "-o", f"markdown={summary}", "-o", f"junit={junit}", "-o", "table"],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.output
    assert junit.read_text().startswith("<?xml")
    tokens = parse(summary.read_text(encoding="utf-8"))
    assert not [t for t in tokens if t.type.startswith("html")]
    heading = next(tokens[i + 1] for i, t in enumerate(tokens) if t.type == "heading_open")
    assert text_of(heading).startswith("artifactcheck: exit 1")
    found = tables(tokens)
    counts = {row[0]: int(row[1]) for row in table_with(found, "verdict")[1:]}
    instances = table_with(found, "instance")
    assert instances[0] == ["instance", "reports", "verdict", "serves", "compared", "why"]
    verdicts = {row[0]: row[2] for row in instances[1:]}
    assert sum(counts.values()) == len(verdicts) == 3
    drifted = fleet.instances[1].url
    names = {row[0] for row in instances[1:] if row[0] in drifted}
    assert len(names) == 1, names  # the instance's name is its address
    (name,) = names
    assert verdicts[name] == "mismatch" and counts["mismatch"] == 1
    row = next(r for r in instances if r[0] == name)
    assert row[1] == "1.4.2" and row[3].startswith("content ")  # its own bytes: a fingerprint
    # the CDN lacks a file every page refers to: the others are cdn-missing
    assert set(verdicts.values()) == {"mismatch", "cdn-missing"}, verdicts
    findings = next(t for t in found if t[0] == ["instance", "kind", "severity", "message"])
    assert (name, "content-differs") in {(row[0], row[1]) for row in findings[1:]}
    assert any(row[1] == "cdn-missing" and asset in row[3] for row in findings[1:])


def test_markdown_goes_to_standard_output_when_no_file_is_named(fleet: SimFleet) -> None:
    result = CliRunner().invoke(main, [*verify_args(fleet), "-o", "markdown"])
    assert result.exit_code == 0, result.output
    found = tables(parse(result.stdout))
    assert {row[2] for row in table_with(found, "instance")[1:]} == {"consistent"}


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (["-o", "markdown", "-o", "table"], "would both go to standard output"),
        (["-o", "markdown=same.out", "-o", "junit=same.out"], "is given twice"),
        (["-o", "markdown=/nonexistent/summary.md"], "does not exist"),
        (["-o", "markdown="], "give a file name after '='"),
        (["-o", "markdwon"], "expected table, json, junit or markdown"),
    ],
)
def test_markdown_destinations_are_refused_before_any_request(
    fleet: SimFleet, outputs: list[str], message: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = fleet.web.total_requests
    result = CliRunner().invoke(main, [*verify_args(fleet), *outputs])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert fleet.web.total_requests == before


def test_an_unwritable_directory_is_refused(fleet: SimFleet, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = CliRunner().invoke(main, [*verify_args(fleet), "-o", f"markdown={locked}/s.md"])
    finally:
        locked.chmod(0o700)
    if os.geteuid() == 0:  # root may write anywhere: then it is written
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 2 and "not writable" in result.stderr


HOSTILE = [
    "web|1",
    "web`2`",
    "web\n| injected | row |\n3",
    "<script>alert(1)</script>",
    "**bold** _em_ [link](https://evil.example/) ![img](x.png)",
    "$x^2$ ~~gone~~ &amp; \\| back\\slash",
    "\r\u2028\u0007tail",
]


def hostile_report() -> Report:
    results = []
    for i, name in enumerate(HOSTILE):
        inst = Instance(name=name, base_url=f"http://10.0.0.{i + 1}/")
        bad = i % 2 == 0
        results.append(
            InstanceResult(
                instance=inst,
                verdict=Verdict.MISMATCH if bad else Verdict.CONSISTENT,
                reason=f"why: {name}",
                reported_version=f"1.{i}|<b>",
                findings=(
                    (
                        Finding(
                            kind=FindingKind.CONTENT_DIFFERS,
                            message=f"`{name}` differs | <img src=x onerror=alert(1)>",
                            instance=name,
                            expected="a" * 64,
                            actual="b" * 64,
                        ),
                    )
                    if bad
                    else ()
                ),
            )
        )
    return Report(
        results=tuple(results),
        findings=(
            Finding(
                kind=FindingKind.SUSPECT_EXPECTATION,
                message="fleet | `x`\n<div>",
                severity=Severity.ALERT,
            ),
        ),
        actions=(Action(kind=ActionKind.QUARANTINE, target="web|1", reason="<b>r</b>\n|"),),
    )


def flat(text: str) -> str:
    """What a cell shows of ``text``: each run of line breaks and control characters
    as one space."""
    return re.sub(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+", " ", text).strip()


def test_hostile_text_stays_text_in_its_own_cell() -> None:
    markdown = render_markdown(hostile_report())
    tokens = parse(markdown)
    kinds = {t.type for t in tokens} | {c.type for t in tokens for c in t.children or []}
    assert not kinds & {"html_inline", "html_block", "link_open", "image", "code_inline", "s_open"}
    found = tables(tokens)
    instances = table_with(found, "instance")
    assert all(len(row) == 6 for row in instances)
    verdicts = [row[2] for row in instances[1:]]
    assert verdicts == sorted(verdicts, key=lambda v: v == "consistent")  # wrong ones first
    assert len(instances) == 1 + len(HOSTILE)  # no injected row
    raw = {flat(n): n for n in HOSTILE}
    assert {row[0] for row in instances[1:]} == set(raw)
    for row in instances[1:]:
        assert row[4] == "-" and row[5] == flat(f"why: {raw[row[0]]}")
        assert row[1].endswith("|<b>")
    findings = next(t for t in found if t[0] == ["instance", "kind", "severity", "message"])
    assert all(len(row) == 4 for row in findings)
    fleet = [row for row in findings if row[0] == "(fleet)"]
    assert fleet == [["(fleet)", "suspect-expectation", "alert", "fleet | `x` <div>"]]
    differs = [row for row in findings if row[1] == "content-differs"]
    assert len(differs) == 4
    assert differs[0][3].startswith("`") and "<img src=x onerror=alert(1)>" in differs[0][3]
    assert "(expected aaaaaaaaaaaa, got bbbbbbbbbbbb)" in differs[0][3]
    actions = next(t for t in found if t[0] == ["action", "target", "reason"])
    assert actions[1] == ["quarantine", "web|1", "<b>r</b> |"]
    # strong emphasis only where the renderer puts it: the bad verdicts
    strong = sum(1 for t in tokens for c in t.children or [] if c.type == "strong_open")
    assert strong == 4


def test_a_huge_fleet_is_cut_to_a_summary_github_keeps() -> None:
    results = tuple(
        InstanceResult(
            instance=Instance(name=f"web-{i}", base_url=f"http://10.1.{i // 250}.{i % 250}/"),
            verdict=Verdict.CONSISTENT,
            reason="ok",
        )
        for i in range(MARKDOWN_MAX_ROWS + 20)
    )
    markdown = render_markdown(Report(results=results))
    assert len(markdown.encode()) < 1024 * 1024
    instances = table_with(tables(parse(markdown)), "instance")
    assert len(instances) == 1 + MARKDOWN_MAX_ROWS
    assert "and 20 more instances" in markdown
