"""Reports of a check: a readable table, a versioned JSON document, JUnit XML, Markdown.

The table is for people (rich renders colour on a terminal and plain text when
piped); JSON is for machines and carries a ``schema`` name, shipped as a JSON Schema
(:func:`schema_path`), so consumers can rely on its shape; JUnit XML lets any CI
system show one test case per instance; Markdown is for a CI job's summary page
(GitHub's ``$GITHUB_STEP_SUMMARY``, docs/ci.md). All of them say the same things: what was
compared against what (coverage, sample, encodings, names only), the verdicts, and
every warning a reader must see, such as a certificate about to expire.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artifactcheck.judge.answers import short
from artifactcheck.model.records import compact_json
from artifactcheck.model.skew import ON_CDN, PreviousServed
from artifactcheck.model.values import (
    BAD_VERDICTS,
    UNKNOWN_VERDICTS,
    Action,
    Coverage,
    Fetched,
    Finding,
    FindingKind,
    InstanceResult,
    Observation,
    Report,
    SampleInfo,
    Severity,
    Verdict,
)
from artifactcheck.model.verdicts import VERDICTS

if TYPE_CHECKING:  # rich is imported by the table's own functions: JSON, JUnit and
    # Markdown reports (every CI run) never load it (a large share of start-up).
    from rich.console import Console

REPORT_SCHEMA = "artifactcheck/report/v3"
SCHEMA_FILE = Path(__file__).parent / "schemas" / "report-v3.schema.json"
#: What each item of a result's ``assets`` holds, in order. An asset is one array of
#: these values and the names are stated once, in the document's ``asset_columns``: a
#: fleet's report holds thousands of assets, and stated in every one of them the names
#: were a third of the document (docs/report-json.md).
ASSET_COLUMNS = (
    "path",
    "url",
    "status",
    "sha256",
    "size",
    "content_encoding",
    "error",
    "elapsed_ms",
    "headers_ref",
)
MAX_FINDINGS_PER_INSTANCE = 6
#: Width of the table when the output is not a terminal: CI logs and files are read
#: with a pager or a browser, and rich's 80-column default would cut file names.
PIPED_WIDTH = 1000

#: Each verdict's terminal style, from the verdict table.
VERDICT_STYLE = {v: t.style for v, t in VERDICTS.items()}
SEVERITY_STYLE = {
    Severity.INFO: "dim",
    Severity.WARNING: "yellow",
    Severity.ERROR: "red",
    Severity.ALERT: "bold red",
}
#: Findings shown even for a consistent instance: the content is right, but a reader
#: must still act on them before they become an outage.
ALWAYS_SHOWN = frozenset({FindingKind.TLS_EXPIRING, FindingKind.CHECK_FAILED})
#: Fleet-wide findings that mean "a dependency needed to judge was down": JUnit errors.
OUTAGE_KINDS = frozenset(
    {
        FindingKind.OBSERVATION_FAILED,
        FindingKind.EXPECTATION_UNAVAILABLE,
        FindingKind.EXPECTATION_STALE,
        FindingKind.UNREACHABLE,
        FindingKind.TLS_EXPIRING,
        FindingKind.RELEASE_UNTRUSTED,  # no release to judge by: nothing shown wrong
    }
)
#: Rows of each Markdown table at most: GitHub keeps 1 MiB of a step's summary, and a
#: summary is read, not searched (the JSON and JUnit reports have everything).
MARKDOWN_MAX_ROWS = 500
#: Characters of one Markdown cell at most (a long message is cut, marked with "...").
MARKDOWN_MAX_CELL = 400
#: Characters Markdown (CommonMark, GitHub's tables, math and strike-through) would read
#: as markup in a cell: escaped with a backslash, so instance text stays text.
_MD_SPECIAL = r"([\\`*_\[\]<>&|~$])"
_MD_BREAKS = r"[\x00-\x1f\x7f\u0085\u2028\u2029]+"
#: Characters a JUnit class name does not keep (each becomes ``_``).
_CLASS_UNSAFE = r"[^A-Za-z0-9_-]"


@functools.cache
def _pattern(source: str) -> re.Pattern[str]:
    """``source`` compiled once, on first use: only the JUnit and Markdown reports use
    these, so a JSON or table report never pays for compiling them at start-up."""
    return re.compile(source)


def schema_path() -> Path:
    """The JSON Schema file of ``verify --output json`` (``artifactcheck/report/v3``)."""
    return SCHEMA_FILE


# --------------------------------------------------------------------------- JSON


_ABOUT = ("path", "expected", "actual")  # a finding's optional members besides its instance


def finding_json(f: Finding, *, instance: bool = True) -> dict[str, Any]:
    """A finding as a JSON object: kind, severity, message, and the optional members
    it has. ``instance=False`` where the document is about one instance (investigate)."""
    out: dict[str, Any] = {"kind": f.kind.value, "severity": f.severity.value, "message": f.message}
    for key in ("instance", *_ABOUT) if instance else _ABOUT:
        value = getattr(f, key)
        if value is not None:
            out[key] = value
    return out


def _action(a: Action) -> dict[str, Any]:
    return {
        "kind": a.kind.value,
        "target": a.target,
        "reason": a.reason,
        "dry_run": a.dry_run,
        "files": list(a.files),
    }


class _SharedRows:
    """The report's table of long ``not_compared`` lists: each distinct list stated once.

    Sampled instances share their "sampled out" rows (``judge.compare.SampledOutRows``):
    stated in every result, the same rows made most of a large report
    (docs/benchmarks.md, docs/report-json.md). A list of :attr:`LONG` rows or more goes into
    the document's ``not_compared_lists`` under an id, and each instance's coverage
    names that id (``not_compared_ref``); shorter lists stay in place. Equal lists
    share one id whether or not they are the same tuple (identity is the fast path).
    """

    LONG = 64  # shorter lists are stated in place: a reference would not be shorter

    def __init__(self) -> None:
        self.table: dict[str, list[dict[str, str]]] = {}
        self._by_value: dict[tuple[tuple[str, str], ...], str] = {}
        self._by_id: dict[int, tuple[str, tuple[tuple[str, str], ...]]] = {}

    def ref(self, rows: tuple[tuple[str, str], ...]) -> str:
        held = self._by_id.get(id(rows))
        if held is not None and held[1] is rows:
            return held[0]
        key = self._by_value.get(rows)
        if key is None:
            key = self._by_value[rows] = f"nc{len(self.table)}"
            self.table[key] = _rows(rows)
        self._by_id[id(rows)] = (key, rows)  # the tuple is held: its id stays its own
        return key


class _HeaderSets:
    """The report's table of evidence-header sets: each distinct set stated once.

    Instances of one build answer a file with the same headers (server, type, length,
    ETag, Last-Modified, Cache-Control; Date changes once a second), so at 1,000
    instances the per-asset header objects were half of what remained of a report
    once its coverage lists were shared. Each asset names its set's id
    (``headers_ref``) in the document's ``header_sets``.
    """

    def __init__(self) -> None:
        self.table: dict[str, dict[str, str]] = {}
        self._by_value: dict[tuple[tuple[str, str], ...], str] = {}

    def ref(self, headers: Mapping[str, str]) -> str:
        items = tuple(headers.items())
        key = self._by_value.get(items)
        if key is None:
            key = self._by_value[items] = f"h{len(self.table)}"
            self.table[key] = dict(items)
        return key


class _Tables:
    """What a document states once and its results reference by id."""

    def __init__(self) -> None:
        self.rows = _SharedRows()
        self.headers = _HeaderSets()


def _rows(rows: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    return [{"path": p, "why": why} for p, why in rows]


def _coverage(c: Coverage | None, shared: _SharedRows) -> dict[str, Any] | None:
    if c is None:
        return None
    rows = c.not_compared
    ref = shared.ref(rows) if len(rows) >= _SharedRows.LONG else None
    return {
        "compared": c.compared,
        "total": c.total,
        "complete": c.complete,
        "not_compared": None if ref is not None else _rows(rows),
        "not_compared_ref": ref,
        "encodings": list(c.encodings),
        "hashes": list(c.hashes),
    }


def not_compared(doc: dict[str, Any], coverage: dict[str, Any]) -> list[dict[str, str]]:
    """One coverage's ``not_compared`` rows from a report document, wherever stated."""
    ref = coverage.get("not_compared_ref")
    if ref is None:
        return list(coverage["not_compared"])
    return list(doc["not_compared_lists"][ref])


def assets(doc: dict[str, Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    """One result's assets from a report document, each an object keyed by the column names
    (the shape of a v2 asset; :func:`asset_headers` and :func:`asset_url` read it)."""
    columns = doc["asset_columns"]
    return [dict(zip(columns, row, strict=True)) for row in result.get("assets", ())]


def asset_headers(doc: dict[str, Any], asset: dict[str, Any]) -> dict[str, str]:
    """One asset's evidence headers from a report document."""
    return dict(doc["header_sets"][asset["headers_ref"]])


def asset_url(result: dict[str, Any], asset: dict[str, Any]) -> str:
    """Where one asset of a result was fetched (``url`` is null at the result's URL + path)."""
    url = asset["url"]
    return str(result["url"] + asset["path"]) if url is None else str(url)


def _asset(path: str, f: Fetched, base_url: str, headers: _HeaderSets) -> list[Any]:
    """One asset as a row of :data:`ASSET_COLUMNS`."""
    return [
        path,
        None if f.url == base_url + path else f.url,  # null: at the result's URL + path
        f.status,
        f.sha256,
        f.size,
        f.content_encoding,
        f.error,
        round(f.elapsed * 1000, 1),
        headers.ref(f.headers),
    ]


def _sample(s: SampleInfo | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "seed": s.seed,
        "instances_checked": s.instances_checked,
        "instances_total": s.instances_total,
        "assets_per_instance": s.assets_per_instance,
        "sampled": _is_sampled(s),
    }


def _result(r: InstanceResult, shared: _Tables) -> dict[str, Any]:
    inst = r.instance
    obs = r.observation
    doc: dict[str, Any] = {
        "instance": inst.name,
        "kind": inst.kind,
        "url": inst.base_url,
        "verdict": r.verdict.value,
        "reason": r.reason,
        "reported_version": r.reported_version,
        "serves_version": r.serves_version,
        "fingerprint": r.fingerprint,
        "verified": r.verified,
        "coverage": _coverage(r.coverage, shared.rows),
        "signals": [{"source": s.source, "value": s.value} for s in inst.signals],
        "image_id": inst.image_id,
        "node": inst.node,
        "owner": inst.owner,
        "namespace": inst.namespace,
        "findings": [finding_json(f) for f in r.findings],
    }
    if obs is not None:
        doc["manifest"] = {
            "path": obs.manifest_path,
            "format": obs.manifest.format if obs.manifest else None,
            "entries": len(obs.manifest.files) if obs.manifest else None,
            "status": obs.manifest_fetch.status if obs.manifest_fetch else None,
            "error": obs.manifest_error,
        }
        doc["endpoint_version"] = obs.endpoint_version
        doc["endpoint_error"] = obs.endpoint_error
        doc["endpoint_note"] = obs.endpoint_note
        doc["error"] = obs.error
        doc["sampled"] = obs.sampled
        doc["encodings"] = list(obs.encodings)
        doc["assets"] = [
            _asset(path, f, inst.base_url, shared.headers) for path, f in obs.assets.items()
        ]
        doc["elapsed_ms"] = round(obs.elapsed * 1000, 1)
        if obs.page_loads or obs.page_elsewhere or obs.page_problems or obs.page_failures:
            doc["pages"] = pages_json(obs)
    return doc


def pages_json(obs: Observation) -> dict[str, Any]:
    """What the entry pages load: the files by page ("loaded by /login"), the references
    never requested (another origin), and why a page or stylesheet was not read wholly."""
    by_page: dict[str, list[str]] = {}
    for path, load in sorted(obs.page_loads.items()):
        for page in load.loaded_by:
            by_page.setdefault(page, []).append(path)
    return {
        "loaded_by": by_page,
        "not_requested": list(obs.page_elsewhere),
        "problems": [*obs.page_problems, *obs.page_failures],
    }


def to_json(report: Report) -> dict[str, Any]:
    """The versioned JSON document of a report (see :func:`schema_path`)."""
    shared = _Tables()
    results = [_result(r, shared) for r in report.results]
    return {
        "schema": REPORT_SCHEMA,
        "started_at": report.started_at.isoformat() if report.started_at else None,
        "elapsed_s": round(report.elapsed, 3),
        "exit_code": report.exit_code,
        "desired_version": report.desired_version,
        "cdn": report.cdn,
        "names_only": report.names_only,
        "sample": _sample(report.sample),
        "counts": report.counts(),
        "requests": report.requests,
        "retries": report.retries,
        # before the results, so a reader streaming the document has it first
        "not_compared_lists": shared.rows.table,
        "header_sets": shared.headers.table,
        "asset_columns": list(ASSET_COLUMNS),
        "results": results,
        "findings": [finding_json(f) for f in report.findings],
        "actions": [_action(a) for a in report.actions],
        **(
            {"previous_releases": [_previous(p) for p in report.previous]}
            if report.previous
            else {}
        ),
    }


def _previous_row(p: PreviousServed) -> tuple[str, str, str, str, str]:
    """version, where, the files missing, the files different, and what the check says."""
    where = f"CDN {p.base_url}" if p.where == ON_CDN else p.where
    if p.error is not None:
        state = f"not checked: {p.error}"
    elif p.wrong:
        state = "files gone or different"
    elif p.unchecked:
        state = f"{len(p.unchecked)} file(s) not checked"
    else:
        state = f"all {p.required} file(s) served" + (" (a sample)" if p.sampled else "")
    return p.version, where, ", ".join(p.missing) or "-", ", ".join(p.differs) or "-", state


def _previous(p: PreviousServed) -> dict[str, Any]:
    """One previous release at one place: the files gone or different there."""
    return {
        "version": p.version,
        "where": p.where,
        "url": p.base_url,
        "required": p.required,
        "total": p.total,
        "sampled": p.sampled,
        "missing": list(p.missing),
        "differs": list(p.differs),
        "unchecked": list(p.unchecked),
        "error": p.error,
    }


def render_json(report: Report, *, pretty: bool = True) -> str:
    """JSON text, stable key order, for ``--output json``.

    Compact (``pretty=False``) is what a pipe or file gets: the C encoder is only used
    without indentation, and a 1,000-instance report is then markedly cheaper; a
    terminal gets it indented for people.
    """
    doc = to_json(report)
    if not pretty:
        return _compact(doc) + "\n"
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


_ELAPSED = ASSET_COLUMNS.index("elapsed_ms")


def _plain_number(x: float) -> bool:
    """Whether Python writes ``x`` without an exponent (and msgspec the same digits):
    zero, or finite from 1e-4 up to 1e16."""
    return x == 0 or 1e-4 <= abs(x) < 1e16


def _compact(doc: dict[str, Any]) -> str:
    """``json.dumps(doc, separators=(",", ":"))``, the same text, mostly from C.

    At 1,000 instances the standard library's encoder is a large share of what the
    main process does alone after the last observation (docs/benchmarks.md). msgspec's
    encoder writes the same text for what a report holds but for non-ASCII (raw, where
    ``json.dumps`` escapes it), DEL, floats outside :func:`_plain_number` and keys that
    are neither strings nor numbers. The report's only floats are its elapsed times,
    checked here; the output is checked for the rest; so the text comes from
    ``json.dumps`` whenever msgspec's could differ.
    """
    floats = [doc["elapsed_s"]]
    for result in doc["results"]:
        if "elapsed_ms" in result:
            floats.append(result["elapsed_ms"])
            floats.extend(row[_ELAPSED] for row in result["assets"])
    if all(map(_plain_number, floats)):
        try:
            out = compact_json(doc)
        except TypeError:  # a key json.dumps writes and msgspec refuses (None, a bool)
            pass
        else:
            if out.isascii() and b"\x7f" not in out:
                return out.decode("ascii")
    return json.dumps(doc, separators=(",", ":"))


# --------------------------------------------------------------------------- JUnit


def _classname(suite: str, version: str | None) -> str:
    """``suite.version`` with the version's dots replaced: Jenkins reads every dot of a
    classname as a package separator, so ``artifactcheck.1.0.0`` would become three
    nested packages."""
    return f"{suite}.{_pattern(_CLASS_UNSAFE).sub('_', version) if version else 'unversioned'}"


def _lines(findings: Iterable[Finding]) -> str:
    return "\n".join(f"[{f.kind.value}] {f.severity.value}: {f.message}" for f in findings)


def render_junit(report: Report, *, suite: str = "artifactcheck") -> str:
    """JUnit XML: one test case per instance; bad verdicts fail, unknown ones error.

    An instance that could not be judged (unreachable, inconclusive) and a fleet-wide
    dependency outage are ``<error>``: nothing was shown to be wrong. What was compared
    (coverage, sample, names only) and every warning (a certificate about to expire)
    is in ``<system-out>``, also for passing cases. The suite's counts are those of
    its test cases.
    """
    from xml.etree import ElementTree as ET  # only a JUnit report needs it

    root = ET.Element("testsuite", name=suite)
    notes = _notes(report)
    for r in report.results:
        case = ET.SubElement(
            root,
            "testcase",
            classname=_classname(suite, r.reported_version),
            name=r.instance.name,
            time=f"{(r.observation.elapsed if r.observation else 0.0):.3f}",
        )
        detail = _lines(r.findings)
        if r.verdict in UNKNOWN_VERDICTS:
            el = ET.SubElement(case, "error", message=r.reason, type=r.verdict.value)
            el.text = detail
        elif r.verdict in BAD_VERDICTS:
            el = ET.SubElement(case, "failure", message=r.reason, type=r.verdict.value)
            el.text = detail
        out = [f"{r.verdict.value}: {r.reason}", f"compared: {_coverage_text(r, report)}"]
        shown = [f for f in r.findings if f.severity is not Severity.INFO]
        if shown:
            out.append(_lines(shown))
        ET.SubElement(case, "system-out").text = "\n".join(out)
    for f in report.findings:
        if f.severity not in (Severity.ALERT, Severity.ERROR):
            continue
        case = ET.SubElement(root, "testcase", classname=f"{suite}.fleet", name=f.kind.value)
        tag = "error" if f.kind in OUTAGE_KINDS else "failure"
        ET.SubElement(case, tag, message=f.message, type=f.kind.value).text = f.message
    warnings = [f for f in report.findings if f.severity is Severity.WARNING]
    if notes or warnings:
        ET.SubElement(root, "system-out").text = "\n".join([*notes, _lines(warnings)]).strip()
    cases = root.findall("testcase")
    root.set("tests", str(len(cases)))
    root.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    root.set("errors", str(sum(1 for c in cases if c.find("error") is not None)))
    root.set("skipped", "0")
    root.set("time", f"{report.elapsed:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --------------------------------------------------------------------------- Markdown

#: What each exit code of ``verify`` says (as ``verify --help`` says it).
EXIT_MEANING = {
    0: "every checked instance is consistent",
    1: "something served is wrong",
    2: "usage or configuration error",
    3: "inconclusive: an instance could not be judged",
}


def md_cell(text: str | None) -> str:
    """Text as one Markdown table cell: line breaks and control characters become
    spaces (a newline would end the row), markup characters are escaped (a ``|``
    would split the cell, ``<`` start HTML, a backtick a code span), long text is cut."""
    flat = _pattern(_MD_BREAKS).sub(" ", text or "").strip()
    if len(flat) > MARKDOWN_MAX_CELL:
        flat = flat[: MARKDOWN_MAX_CELL - 3].rstrip() + "..."
    return _pattern(_MD_SPECIAL).sub(r"\\\1", flat) or "-"


def _md_table(header: list[str], rows: list[list[str]], *, what: str) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows[:MARKDOWN_MAX_ROWS]:
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    if len(rows) > MARKDOWN_MAX_ROWS:
        lines += [
            f"... and {len(rows) - MARKDOWN_MAX_ROWS} more {what} (JSON and JUnit have all).",
            "",
        ]
    return lines


#: Findings whose message names a file but not its hashes: a rendering adds them once,
#: "(expected X, got Y)". A CDN difference says both hashes in its own message (which
#: side holds which), so adding them again would say each twice.
HASHES_UNSAID = frozenset({FindingKind.CONTENT_DIFFERS})


def hashes_note(f: Finding) -> str | None:
    """ "(expected X, got Y)" for a finding whose message does not say its hashes."""
    if f.kind in HASHES_UNSAID and f.expected and f.actual:
        return f"(expected {short(f.expected)}, got {short(f.actual)})"
    return None


def _md_finding_row(instance: str, f: Finding) -> list[str]:
    """instance, kind, severity, message (with the short hashes of a content finding)."""
    text = md_cell(f.message)
    note = hashes_note(f)
    if note is not None:
        text += f" {md_cell(note)}"
    return [md_cell(instance), md_cell(f.kind.value), md_cell(f.severity.value), text]


def render_markdown(report: Report, *, verbose: bool = False) -> str:
    """Markdown for a CI job summary: the outcome, the verdicts counted, one row per
    instance (wrong ones first), the findings a reader must see and the actions.

    Every piece of text that comes from an instance, a manifest or a server is
    escaped (:func:`md_cell`): a pod name or an error message cannot break a table
    or inject HTML into the page the summary is shown on.
    """
    code = report.exit_code
    out = [
        f"### artifactcheck: exit {code}, {EXIT_MEANING.get(code, 'see the report')}",
        "",
        f"{len(report.results)} instance(s) checked; {report.requests} requests "
        f"({report.retries} retries) in {report.elapsed:.2f}s.",
        "",
    ]
    counts = [[md_cell(v), str(n)] for v, n in report.counts().items() if n]
    if counts:
        out += _md_table(["verdict", "instances"], counts, what="verdicts")
    ordered = sorted(
        report.results, key=lambda r: (r.verdict is Verdict.CONSISTENT, r.instance.name)
    )
    rows = [
        [
            md_cell(r.instance.name),
            md_cell(r.reported_version),
            md_cell(r.verdict.value)
            if r.verdict is Verdict.CONSISTENT
            else f"**{md_cell(r.verdict.value)}**",
            md_cell(_serves(r)),
            md_cell(_coverage_text(r, report)),
            md_cell(_why(r)),
        ]
        for r in ordered
    ]
    if rows:
        out += _md_table(
            ["instance", "reports", "verdict", "serves", "compared", "why"], rows, what="instances"
        )
    for note in _notes(report):
        out += [f"> {md_cell(note)}", ""]
    findings: list[list[str]] = []
    for r in ordered:
        items = _shown(r, verbose)
        limit = len(items) if verbose else MAX_FINDINGS_PER_INSTANCE
        for f in items[:limit]:
            findings.append(_md_finding_row(r.instance.name, f))
        if len(items) > limit:
            more = f"... and {len(items) - limit} more (--verbose-report or --output json)"
            findings.append([md_cell(r.instance.name), "-", "-", md_cell(more)])
    findings += [_md_finding_row(f.instance or "(fleet)", f) for f in report.findings]
    if findings:
        out += ["#### Findings", ""]
        out += _md_table(["instance", "kind", "severity", "message"], findings, what="findings")
    if report.previous:
        out += ["#### Previous releases", ""]
        rows = [[md_cell(c) for c in _previous_row(p)] for p in report.previous]
        out += _md_table(["version", "where", "missing", "differs", "state"], rows, what="places")
    if report.actions:
        actions = [
            [
                md_cell(a.kind.value + (" (dry-run)" if a.dry_run else "")),
                md_cell(a.target),
                md_cell(a.reason),
            ]
            for a in report.actions
        ]
        out += ["#### Actions", ""]
        out += _md_table(["action", "target", "reason"], actions, what="actions")
    return "\n".join(out)


# --------------------------------------------------------------------------- table


def _is_sampled(s: SampleInfo) -> bool:
    return s.instances_checked < s.instances_total or s.assets_per_instance is not None


def _serves(r: InstanceResult) -> str:
    """What the "serves" column shows, saying which of the two it is."""
    if r.serves_version:
        return f"release {r.serves_version}"
    if r.fingerprint:
        return f"content {r.fingerprint}"
    return "-"


def _coverage_text(r: InstanceResult, report: Report) -> str:
    """ "9 of 9 files", "3 of 9 files (sampled)", "names only", with the encodings."""
    c = r.coverage
    obs = r.observation
    if c is None:
        if obs is not None and obs.error is not None:
            return "nothing (not observed)"
        return "-"
    text = f"{c.compared} of {c.total} files"
    if obs is not None and obs.sampled:
        text += " (sampled)"
    if report.names_only:
        text += ", names only"
    if tuple(c.encodings) != ("identity",):
        text += f", {'+'.join(c.encodings)}"
    if tuple(c.hashes) != ("sha256",):  # an ngsw.json release vouches with SHA-1
        text += f", {'+'.join(c.hashes)}"
    return text


def _notes(report: Report) -> list[str]:
    """Lines said once per report: sampling and names-only mode."""
    notes = []
    s = report.sample
    if s is not None and _is_sampled(s):
        parts = [f"{s.instances_checked} of {s.instances_total} instances checked"]
        if s.assets_per_instance is not None:
            parts.append(f"{s.assets_per_instance} files per instance besides entry points")
        notes.append(
            f"sample: {', '.join(parts)}; seed {s.seed} (repeat this sample with --seed {s.seed})"
        )
    if report.names_only:
        notes.append(
            "names only: the release source has no content hashes; file names were "
            "compared, bytes were not"
        )
    said = {r.observation.endpoint_note for r in report.results if r.observation is not None}
    notes += sorted(n for n in said if n)
    return notes


def _why(r: InstanceResult) -> str:
    """The reason, with what the verdict hides appended: a certificate warning, and
    why the version endpoint could not be read (a 404, a pointer typo, not JSON), so
    "reports no version" is not the last word where the user looks."""
    reason = r.reason
    for f in r.findings:
        if f.kind is FindingKind.TLS_EXPIRING and f.message not in reason:
            reason += f"; {f.message}"
    obs = r.observation
    if obs is not None and obs.endpoint_error and obs.endpoint_error not in reason:
        reason += f"; {obs.endpoint_error}"
    return reason


def _shown(r: InstanceResult, verbose: bool) -> list[Finding]:
    if verbose:
        return list(r.findings)
    if r.verdict is Verdict.CONSISTENT:
        return [f for f in r.findings if f.kind in ALWAYS_SHOWN]
    return [f for f in r.findings if f.severity is not Severity.INFO]


def render_table(report: Report, console: Console, *, verbose: bool = False) -> None:
    """Print the human report: one row per instance, then findings and actions.

    Not on a terminal (a CI log, a file), lines are not wrapped at the console's
    default 80 columns: a cut file name or hash is worse than a long line.
    """
    restore = None
    if not console.is_terminal and "COLUMNS" not in os.environ:
        restore = console.width
        console.width = max(console.width, PIPED_WIDTH)
    try:
        _render_table(report, console, verbose=verbose)
    finally:
        if restore is not None:
            console.width = restore


def _render_table(report: Report, console: Console, *, verbose: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="artifactcheck", title_justify="left", expand=False)
    table.add_column("instance", overflow="fold")
    table.add_column("reports")
    table.add_column("verdict")
    table.add_column("serves")
    table.add_column("compared")
    table.add_column("why", overflow="fold")
    for r in sorted(
        report.results, key=lambda r: (r.verdict is Verdict.CONSISTENT, r.instance.name)
    ):
        table.add_row(
            r.instance.name,
            r.reported_version or "-",
            Text(r.verdict.value, style=VERDICT_STYLE[r.verdict]),
            _serves(r),
            _coverage_text(r, report),
            _why(r),
        )
    console.print(table)
    for note in _notes(report):
        console.print(Text(note, style="bold"))
    shown = 0
    for r in report.results:
        items = _shown(r, verbose)
        if not items:
            continue
        if shown == 0:
            console.print(Text("findings", style="bold"))
        shown += 1
        console.print(Text(f"  {r.instance.name}", style=VERDICT_STYLE[r.verdict]))
        limit = len(items) if verbose else MAX_FINDINGS_PER_INSTANCE
        for f in items[:limit]:
            _print_finding(console, f, indent="    ", with_instance=False)
        if len(items) > limit:
            console.print(
                f"    ... and {len(items) - limit} more (--verbose-report or --output json)"
            )
    _print_findings(console, "fleet", report.findings)
    if report.previous:
        console.print(Text("previous releases", style="bold"))
        for p in report.previous:
            version, where, missing, differs, state = _previous_row(p)
            console.print(
                f"  {version} on {where}: {state}; missing: {missing}; differs: {differs}"
            )
    if report.actions:
        console.print(Text("actions", style="bold"))
        for a in report.actions:
            tag = " (dry-run)" if a.dry_run else ""
            console.print(f"  {a.kind.value}{tag} {a.target}: {a.reason}")
    counts = {k: v for k, v in report.counts().items() if v}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items()) or "no instances"
    console.print(
        f"{len(report.results)} instance(s): {summary}; {report.requests} requests "
        f"({report.retries} retries) in {report.elapsed:.2f}s; exit {report.exit_code}"
    )


def _print_finding(console: Console, f: Finding, *, indent: str, with_instance: bool) -> None:
    from rich.text import Text

    line = Text(f"{indent}[{f.kind.value}] ", style=SEVERITY_STYLE[f.severity])
    line.append((f"{f.instance}: " if with_instance and f.instance else "") + f.message)
    note = hashes_note(f)
    if note is not None:
        line.append(f" {note}", style="dim")
    console.print(line)


def _print_findings(console: Console, title: str, findings: Iterable[Finding]) -> None:
    from rich.text import Text

    items = list(findings)
    if not items:
        return
    console.print(Text(title, style="bold"))
    for f in items:
        _print_finding(console, f, indent="  ", with_instance=True)
