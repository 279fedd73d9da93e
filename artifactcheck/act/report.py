"""Reports of a check: a readable table, a versioned JSON document, JUnit XML.

The table is for people (rich renders colour on a terminal and plain text when
piped); JSON is for machines and carries a ``schema`` name so consumers can rely on
its shape; JUnit XML lets any CI system show one test case per instance.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from xml.etree import ElementTree as ET

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..models import (
    Action,
    Finding,
    InstanceResult,
    Report,
    Severity,
    Verdict,
)

REPORT_SCHEMA = "artifactcheck/report/v1"
MAX_FINDINGS_PER_INSTANCE = 6

VERDICT_STYLE = {
    Verdict.CONSISTENT: "green",
    Verdict.DRIFT: "yellow",
    Verdict.SIGNAL_CONFLICT: "magenta",
    Verdict.CDN_MISSING: "red",
    Verdict.CDN_MISMATCH: "red",
    Verdict.MISMATCH: "bold red",
    Verdict.UNREACHABLE: "dim",
    Verdict.INCONCLUSIVE: "yellow",
}
SEVERITY_STYLE = {
    Severity.INFO: "dim",
    Severity.WARNING: "yellow",
    Severity.ERROR: "red",
    Severity.ALERT: "bold red",
}


def _finding(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": f.kind.value, "severity": f.severity.value, "message": f.message}
    for key in ("instance", "path", "expected", "actual"):
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


def _result(r: InstanceResult) -> dict[str, Any]:
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
        "signals": [{"source": s.source, "value": s.value} for s in inst.signals],
        "image_id": inst.image_id,
        "node": inst.node,
        "owner": inst.owner,
        "namespace": inst.namespace,
        "findings": [_finding(f) for f in r.findings],
    }
    if obs is not None:
        doc["manifest"] = {
            "path": obs.manifest_path,
            "format": obs.manifest.format if obs.manifest else None,
            "entries": len(obs.manifest.files) if obs.manifest else None,
            "error": obs.manifest_error,
        }
        doc["endpoint_version"] = obs.endpoint_version
        doc["assets"] = [
            {
                "path": path,
                "status": f.status,
                "sha256": f.sha256,
                "size": f.size,
                "error": f.error,
                "elapsed_ms": round(f.elapsed * 1000, 1),
                "headers": dict(f.headers),
            }
            for path, f in obs.assets.items()
        ]
        doc["elapsed_ms"] = round(obs.elapsed * 1000, 1)
    return doc


def to_json(report: Report) -> dict[str, Any]:
    """The versioned JSON document of a report."""
    return {
        "schema": REPORT_SCHEMA,
        "started_at": report.started_at.isoformat() if report.started_at else None,
        "elapsed_s": round(report.elapsed, 3),
        "exit_code": report.exit_code,
        "desired_version": report.desired_version,
        "cdn": report.cdn,
        "counts": report.counts(),
        "requests": report.requests,
        "retries": report.retries,
        "results": [_result(r) for r in report.results],
        "findings": [_finding(f) for f in report.findings],
        "actions": [_action(a) for a in report.actions],
    }


def render_json(report: Report, *, pretty: bool = True) -> str:
    """JSON text, stable key order, for ``--output json``.

    Compact (``pretty=False``) is what a pipe or file gets: the C encoder is only used
    without indentation, and a 1,000-instance report is then markedly cheaper
    (docs/benchmarks.md); a terminal gets it indented for people.
    """
    if not pretty:
        return json.dumps(to_json(report), separators=(",", ":")) + "\n"
    return json.dumps(to_json(report), indent=2, sort_keys=False) + "\n"


def render_junit(report: Report, *, suite: str = "artifactcheck") -> str:
    """JUnit XML: one test case per instance; bad verdicts fail, unknown ones error."""
    counts = report.counts()
    failures = sum(
        counts[v.value]
        for v in Verdict
        if v not in (Verdict.CONSISTENT, Verdict.UNREACHABLE, Verdict.INCONCLUSIVE)
    )
    errors = counts[Verdict.UNREACHABLE.value] + counts[Verdict.INCONCLUSIVE.value]
    root = ET.Element(
        "testsuite",
        name=suite,
        tests=str(len(report.results)),
        failures=str(failures),
        errors=str(errors),
        time=f"{report.elapsed:.3f}",
    )
    for r in report.results:
        case = ET.SubElement(
            root,
            "testcase",
            classname=f"{suite}.{r.reported_version or 'unversioned'}",
            name=r.instance.name,
            time=f"{(r.observation.elapsed if r.observation else 0.0):.3f}",
        )
        detail = "\n".join(f"[{f.kind.value}] {f.message}" for f in r.findings)
        if r.verdict in (Verdict.UNREACHABLE, Verdict.INCONCLUSIVE):
            el = ET.SubElement(case, "error", message=r.reason, type=r.verdict.value)
            el.text = detail
        elif r.verdict is not Verdict.CONSISTENT:
            el = ET.SubElement(case, "failure", message=r.reason, type=r.verdict.value)
            el.text = detail
    for f in report.findings:
        if f.severity in (Severity.ALERT, Severity.ERROR):
            case = ET.SubElement(root, "testcase", classname=f"{suite}.fleet", name=f.kind.value)
            ET.SubElement(case, "failure", message=f.message, type=f.kind.value)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "-"


def render_table(report: Report, console: Console, *, verbose: bool = False) -> None:
    """Print the human report: one row per instance, then findings and actions."""
    table = Table(title="artifactcheck", title_justify="left", expand=False)
    table.add_column("instance", overflow="fold")
    table.add_column("reports")
    table.add_column("verdict")
    table.add_column("serves")
    table.add_column("why", overflow="fold")
    for r in sorted(
        report.results, key=lambda r: (r.verdict is Verdict.CONSISTENT, r.instance.name)
    ):
        table.add_row(
            r.instance.name,
            r.reported_version or "-",
            Text(r.verdict.value, style=VERDICT_STYLE[r.verdict]),
            r.serves_version or (r.fingerprint or "-"),
            r.reason,
        )
    console.print(table)
    shown = 0
    for r in report.results:
        items = [
            f
            for f in r.findings
            if verbose or (r.verdict is not Verdict.CONSISTENT and f.severity is not Severity.INFO)
        ]
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
    line = Text(f"{indent}[{f.kind.value}] ", style=SEVERITY_STYLE[f.severity])
    line.append((f"{f.instance}: " if with_instance and f.instance else "") + f.message)
    if f.expected and f.actual and f.kind.value in ("content-differs", "cdn-differs"):
        line.append(f" (expected {_short(f.expected)}, got {_short(f.actual)})", style="dim")
    console.print(line)


def _print_findings(console: Console, title: str, findings: Iterable[Finding]) -> None:
    items = list(findings)
    if not items:
        return
    console.print(Text(title, style="bold"))
    for f in items:
        _print_finding(console, f, indent="  ", with_instance=True)
