"""The on-call views as rich tables: colour on a terminal, plain ASCII when piped.

On a terminal rich adds colour; piped (a ticket, a log, ``| less``) the output is
plain ASCII text with the same words, because an incident channel is where these lines
end up. Loaded only to draw a table (:mod:`artifactcheck.present.views` imports it when one
is asked for): ``--output json`` never pays for rich.
"""

from __future__ import annotations

from datetime import datetime

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from artifactcheck.model.names import ANNOTATION_PREFIX
from artifactcheck.model.values import Finding, Verdict
from artifactcheck.present.oncall import age, clock, short, view_models
from artifactcheck.present.report import SEVERITY_STYLE, VERDICT_STYLE, hashes_note

#: Like ``box.SIMPLE`` but pure ASCII, for output that is piped into tickets and logs.
PLAIN_BOX = box.Box("    \n    \n -- \n    \n    \n -- \n    \n    \n", ascii=True)

_STATE_STYLE = {
    "same": "green",
    "differs": "bold red",
    "missing": "red",
    "unexpected": "red",
    "error": "yellow",
    "unchecked": "dim",
    "not-fetched": "dim",
    "not-checked": "dim",
}


def _box(console: Console) -> box.Box:
    """Box drawing on a terminal, ASCII rules when piped (tickets, logs, e-mail)."""
    return box.SIMPLE_HEAD if console.is_terminal else PLAIN_BOX


def _table(console: Console, title: str) -> Table:
    """A compact left-titled table, the one look every section shares."""
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=_box(console),
        pad_edge=False,
        expand=False,
    )


def _verdict(verdict: Verdict) -> Text:
    """A verdict in the colour the verify report uses for it."""
    return Text(verdict.value, style=VERDICT_STYLE[verdict])


def _state(value: str) -> Text:
    """A file or CDN state in its colour: red for wrong, yellow for unknown."""
    return Text(value, style=_STATE_STYLE.get(value, ""))


# --------------------------------------------------------------------------- investigate


def investigation_renderables(
    inv: view_models.Investigation, console: Console
) -> list[RenderableType]:
    """Every section of an investigation, summary first, as rich renderables.

    The order is the order of questions at 3 a.m.: what is wrong, what can't we tell,
    do the signals lie, where does it run, which files, whose bytes, since when.
    """
    out: list[RenderableType] = []
    head = Text()
    head.append(f"{inv.target.name} ", style="bold")
    head.append_text(_verdict(inv.verdict))
    head.append(f"  {inv.url}", style="dim")
    out.append(head)
    out.append(Text(inv.summary, style="bold" if inv.exit_code else ""))
    if inv.notes:
        notes = Text()
        for note in inv.notes:
            notes.append(f"  ! {note}\n", style="yellow")
        notes.rstrip()
        out.append(notes)
    out.append(Text(""))
    out.append(_signals(inv, console))
    out.append(_facts(inv, console))
    out.extend(_manifest(inv, console))
    out.append(_assets(inv, console))
    out.append(_evidence_table(inv, console))
    out.append(_tls(inv, console))
    if inv.pod is not None:
        out.extend(_pod(inv, console))
    if inv.findings:
        out.append(_findings(inv.findings))
    for diff in inv.diffs:
        out.append(_diff(diff))
    if not inv.diffs and any(r.state == "differs" and r.is_text for r in inv.assets):
        out.append(Text("add --diff to see how the differing text files differ", style="dim"))
    fetched = sum(1 for r in inv.assets if r.state != "not-fetched")
    out.append(
        Text(
            f"{inv.siblings.total} instance(s) checked; {fetched} of {len(inv.assets)} "
            f"file(s) of this one fetched; "
            f"{inv.requests} requests in {inv.elapsed:.2f}s; exit {inv.exit_code}",
            style="dim",
        )
    )
    return out


def _signals(inv: view_models.Investigation, console: Console) -> Table:
    """Every version signal side by side, with agreement: the lie shows here first."""
    agree = "all agree" if inv.signals_agree else "they DISAGREE"
    table = _table(console, f"version signals ({agree})")
    table.add_column("signal")
    table.add_column("says")
    table.add_column("agrees")
    table.add_column("note", overflow="fold")
    for row in inv.signals:
        mark = {True: Text("yes", "green"), False: Text("NO", "bold red"), None: Text("-")}
        table.add_row(row.source, row.value or "-", mark[row.agrees], row.note)
    if not inv.signals:
        table.add_row("(none)", "-", "-", "the instance reports no version")
    return table


def _facts(inv: view_models.Investigation, console: Console) -> Table:
    """Where the instance runs and what image, against its siblings of the same version."""
    t = inv.target
    sib = inv.siblings
    table = _table(console, f"{'instance' if t.kind == 'url' else t.kind} and its siblings")
    table.add_column("field")
    table.add_column("value", overflow="fold")
    now = inv.generated_at
    table.add_row("kind", t.kind + (f" in namespace {t.namespace}" if t.namespace else ""))
    table.add_row("url", inv.url)
    table.add_row("node", t.node or "unknown")
    table.add_row("owner", t.owner or "unknown")
    if t.started_at is not None:
        started = f"{clock(t.started_at, now)} ({age((now - t.started_at).total_seconds())} ago)"
    else:
        started = "unknown"
    table.add_row("started", started)
    if t.image:
        table.add_row("image", t.image)
    if t.image_id:
        same = f"{sib.image_same} of {sib.image_total} {sib.noun} reporting {inv.reported_version}"
        if sib.image_same == sib.image_total:
            digest = Text(f"{t.image_id}\nsame as every sibling of its version ({same})")
        else:
            digest = Text(f"{t.image_id}\n", style="")
            digest.append(
                f"DIFFERS: only {same} run it; most run {sib.majority_image}", style="bold red"
            )
        table.add_row("image digest", digest)
    else:
        table.add_row("image digest", "unknown")
    table.add_row(
        "siblings",
        f"{sib.same_version} of {sib.total} {sib.noun} report {inv.reported_version or '-'}; "
        + (
            "this one's content could not be observed"
            if inv.fingerprint is None
            else "it serves no file to compare with them (404s, refusals or the fallback page)"
            if not sib.content_served
            else f"{sib.same_version_same_content} of those "
            f"{'serves' if sib.same_version_same_content == 1 else 'serve'} this content"
        ),
    )
    return table


def _unobserved(inv: view_models.Investigation) -> bool:
    """The instance answered nothing usable: no file of it was fetched."""
    return all(r.state == "not-fetched" for r in inv.assets)


def _not_compared_why(inv: view_models.Investigation) -> str:
    if _unobserved(inv):
        return "the instance could not be observed"
    return "sampled out, or not served where it could be fetched"


def _manifest(inv: view_models.Investigation, console: Console) -> list[RenderableType]:
    """Served manifest against the expected release, and which release the bytes are."""
    m = inv.manifest
    text = Text()
    text.append("served manifest vs expected release\n", style="bold")
    served = (
        f"{m.served_path} ({m.served_format}, {m.served_entries} entries)"
        if m.served_format
        else (m.served_path or ("nothing fetched" if _unobserved(inv) else "none found"))
    )
    text.append(f"  served:   {served}\n")
    if m.served_error:
        text.append(f"  unusable: {m.served_error}\n", style="red")
    if m.expected_from is None:
        why = m.expected_error or "no expected release"
        text.append(f"  expected: could not check: {why}\n", style="yellow")
    else:
        stale = " (last known good copy: the source is failing)" if m.expected_stale else ""
        text.append(f"  expected: {m.expected_version} from {m.expected_from}{stale}\n")
    for label, paths, style in (
        ("changed", m.changed, "bold red"),
        ("added", m.added, "red"),
        ("removed", m.removed, "red"),
    ):
        if paths:
            text.append(f"  {label} ({len(paths)}): ", style=style)
            text.append(", ".join(paths) + "\n")
    text.append(f"  unchanged: {m.unchanged} file(s)\n", style="green" if m.unchanged else "")
    if m.not_compared:
        text.append(
            f"  not compared ({len(m.not_compared)}): in the release but not fetched "
            f"({_not_compared_why(inv)}): {', '.join(m.not_compared)}\n",
            style="dim",
        )
    if m.release_matches:
        parts = [
            f"{r.version}: {r.matching} of {r.total} files" + (" (all)" if r.complete else "")
            for r in m.release_matches
        ]
        text.append(f"  bytes found in known releases: {'; '.join(parts)}\n")
    if m.serves_version:
        text.append(f"  the differing files are release {m.serves_version}'s\n", style="bold red")
    text.rstrip()
    return [text]


def _cdn_cell(row: view_models.AssetRow) -> Text:
    """The CDN column: status, state and hash prefix in one cell."""
    if row.cdn_state == "not-checked":
        return Text("-", style="dim")
    if row.cdn_state == "error":
        return Text(f"error: {row.cdn_error or row.cdn_status}", style="yellow")
    if row.cdn_state == "missing":
        return Text(f"{row.cdn_status} missing", style="red")
    cell = _state(row.cdn_state)
    cell.append(f" {short(row.cdn_sha256)}", style="")
    return cell


def _served_cell(row: view_models.AssetRow) -> Text:
    """The served column; for a wrong file, which known release file has these bytes."""
    if row.state == "not-fetched":
        return Text("not fetched", style="dim")
    if row.served_sha256 is None:
        return Text(row.error or f"HTTP {row.status}", style="yellow")
    cell = Text(short(row.served_sha256), style=_STATE_STYLE.get(row.state, ""))
    if row.state in ("differs", "unexpected") and row.matches:
        cell.append(f"\n= {row.matches[0]}", style="dim")
    return cell


def _assets(inv: view_models.Investigation, console: Console) -> Table:
    """The per-file table, problems first, expected/served/CDN side by side."""
    table = _table(console, f"files ({len(inv.assets)})")
    table.add_column("path", overflow="fold")
    table.add_column("state")
    table.add_column("expected")
    table.add_column("served", overflow="fold")
    table.add_column("size", justify="right")
    table.add_column("CDN")
    table.add_column("ms", justify="right")
    for row in inv.assets:
        table.add_row(
            row.path + (f" (loaded by {', '.join(row.loaded_by)})" if row.loaded_by else ""),
            _state(row.state),
            short(row.expected_sha256),
            _served_cell(row),
            "" if row.size is None else str(row.size),
            _cdn_cell(row),
            "" if row.elapsed_ms is None else f"{row.elapsed_ms:.0f}",
        )
    return table


def _ev(e: view_models.Evidence | None) -> tuple[str, str, str, str, str]:
    """Evidence as five cells, '-' for absent headers."""
    if e is None:
        return ("-", "-", "-", "-", "-")
    return (
        e.etag or "-",
        e.age or "-",
        e.cache_control or "-",
        e.cache_status or "-",
        e.server or "-",
    )


def _evidence_table(inv: view_models.Investigation, console: Console) -> Table:
    """ETag/Age/Cache-Control/cache/Server per file, instance then CDN.

    A rebuilt file often gives itself away here first (another ETag, no immutable
    caching), before anyone compares bytes.
    """
    table = _table(console, "evidence headers (instance, then CDN)")
    table.add_column("path", overflow="fold")
    table.add_column("from")
    for name in ("ETag", "Age", "Cache-Control", "cache status", "Server"):
        table.add_column(name, overflow="fold")
    for row in inv.assets:
        if row.state == "not-fetched":
            continue
        table.add_row(row.path, "instance", *_ev(row.evidence))
        if row.cdn_evidence is not None:
            table.add_row("", "CDN", *_ev(row.cdn_evidence), style="dim")
    return table


def _tls(inv: view_models.Investigation, console: Console) -> Table:
    """Certificate subject and expiry per endpoint; an expired one started an outage."""
    table = _table(console, "TLS certificates")
    table.add_column("endpoint", overflow="fold")
    table.add_column("subject", overflow="fold")
    table.add_column("expires")
    for t in inv.tls:
        if t.not_after is None:
            table.add_row(f"{t.role} {t.endpoint}", Text(t.note or "-", style="dim"), "-")
            continue
        days = t.days_left if t.days_left is not None else 0.0
        style = "bold red" if days < 0 else ("yellow" if days < 14 else "green")
        when = Text(f"{t.not_after:%Y-%m-%d} ({days:.0f} days)", style=style)
        table.add_row(f"{t.role} {t.endpoint}", t.subject or "-", when)
    return table


def _pod(inv: view_models.Investigation, console: Console) -> list[RenderableType]:
    """The pod's gate condition, annotations and Events, as kubectl describe would."""
    pod = inv.pod
    assert pod is not None
    gate = Text()
    gate.append("pod\n", style="bold")
    if pod.has_gate:
        status = pod.gate_status or "not set yet"
        style = {"True": "green", "False": "bold red"}.get(pod.gate_status or "", "yellow")
        gate.append(f"  condition {pod.condition_type}: ")
        gate.append(status, style=style)
    else:
        gate.append(
            f"  no readiness gate {pod.condition_type}: it can only be flagged, not quarantined"
        )
    gate.append(f"\n  Ready: {'yes' if pod.ready else 'no'}")
    out: list[RenderableType] = [gate]
    if pod.annotations:
        table = _table(console, "annotations")
        table.add_column("key", overflow="fold")
        table.add_column("value", overflow="fold", max_width=80)
        for key, value in pod.annotations:
            style = "bold" if key.startswith(ANNOTATION_PREFIX) else ""
            table.add_row(Text(key, style=style), value)
        out.append(table)
    events = _table(console, "recent events")
    events.add_column("type")
    events.add_column("reason")
    events.add_column("count", justify="right")
    events.add_column("last seen")
    events.add_column("message", overflow="fold")
    for ev in pod.events:
        seen = clock(ev.last_seen, inv.generated_at) if ev.last_seen else "-"
        style = "yellow" if ev.type == "Warning" else ""
        events.add_row(Text(ev.type, style=style), ev.reason, str(ev.count), seen, ev.message)
    if not pod.events:
        events.add_row("-", "-", "-", "-", pod.events_note or "none")
    out.append(events)
    return out


def _findings(findings: tuple[Finding, ...]) -> Text:
    """The target's findings in the verify report's wording."""
    text = Text("findings\n", style="bold")
    for f in findings:
        text.append(f"  [{f.kind.value}] ", style=SEVERITY_STYLE[f.severity])
        text.append(f.message)
        note = hashes_note(f)
        if note is not None:
            text.append(f" {note}", style="dim")
        text.append("\n")
    text.rstrip()
    return text


def _diff(diff: view_models.DiffView) -> Text:
    """A unified diff with +/- colours and where the expected bytes came from."""
    text = Text(f"diff {diff.path}\n", style="bold")
    if diff.expected_source:
        text.append(f"  expected bytes from {diff.expected_source}\n", style="dim")
    if diff.note:
        text.append(f"  {diff.note}\n", style="yellow" if not diff.lines else "dim")
    for line in diff.lines:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = ""
        text.append(line + "\n", style=style)
    if diff.truncated:
        text.append(f"  ... {diff.truncated} more diff line(s) not shown (--diff-lines)\n")
    text.rstrip()
    return text


# --------------------------------------------------------------------------- fleet


def _ages(g: view_models.FleetGroup, now: datetime) -> str:
    """Age range of a group ('17m-21m'): a fresh group is where a bad rebuild lands."""
    if g.first_started is None or g.last_started is None:
        return "-"
    oldest = age((now - g.first_started).total_seconds())
    newest = age((now - g.last_started).total_seconds())
    return oldest if oldest == newest else f"{newest}-{oldest}"


def _names(items: tuple[str, ...], limit: int = 4) -> str:
    """The first few names and how many more, to keep rows one screen wide."""
    if not items:
        return "-"
    shown = ", ".join(items[:limit])
    return shown + (f" +{len(items) - limit}" if len(items) > limit else "")


def fleet_renderable(view: view_models.FleetView, console: Console) -> RenderableType:
    """The fleet view as one renderable, so ``--watch`` can redraw it in place.

    Headlines first (the odd ones in red), then notes, then the groups; columns that no
    group has a value for are left out rather than filled with dashes.
    """
    parts: list[RenderableType] = []
    for line in view.headlines:
        odd = any(w in line for w in ("different", "disagree", "could not", "Verdicts"))
        parts.append(Text(line, style="bold red" if odd else "bold"))
    for note in view.notes:
        parts.append(Text(f"  ! {note}", style="yellow"))
    parts.append(_fleet_table(view, console))
    counts = ", ".join(f"{v} {k}" for k, v in view.counts.items()) or "no instances"
    parts.append(
        Text(
            f"{counts}; {view.requests} requests in {view.elapsed:.2f}s at "
            f"{view.generated_at:%H:%M:%S} UTC; exit {view.exit_code}",
            style="dim",
        )
    )
    return Group(*parts)


def _fleet_table(view: view_models.FleetView, console: Console) -> Table:
    """One row per group; the image, nodes, owners and age columns only when any group
    has a value for them."""
    table = _table(
        console,
        f"{view.total} {view.noun} in {len(view.groups)} group(s) by version, content and image",
    )
    # columns no group has a value for (URL targets have no node, owner or start) are noise
    has = {
        "image": any(g.image_id for g in view.groups),
        "nodes": any(g.nodes for g in view.groups),
        "owners": any(g.owners for g in view.groups),
        "age": any(g.first_started for g in view.groups),
    }
    table.add_column("", width=1)
    table.add_column("n", justify="right")
    table.add_column("version")
    table.add_column("content")
    if has["image"]:
        table.add_column("image", overflow="fold", max_width=22)
    table.add_column("verdicts", overflow="fold")
    if has["nodes"]:
        table.add_column("nodes", overflow="fold")
    if has["owners"]:
        table.add_column("owners", overflow="fold")
    if has["age"]:
        table.add_column("age")
    table.add_column("instances", overflow="fold")
    for g in view.groups:
        table.add_row(*_fleet_cells(g, has, view.generated_at), style="bold" if g.odd else "")
    return table


def _fleet_cells(
    g: view_models.FleetGroup, has: dict[str, bool], now: datetime
) -> list[RenderableType]:
    """The cells of one group's row, for the columns the table has."""
    verdicts = Text()
    for i, (name, n) in enumerate(g.verdicts.items()):
        if i:
            verdicts.append(", ")
        verdicts.append(f"{n} {name}", style=VERDICT_STYLE[Verdict(name)])
    if g.serves_version:
        verdicts.append(f" (serves {g.serves_version})", style="bold red")
    marker = Text("!", style="bold red") if g.odd else Text(" ")
    image = (
        g.image_id.rsplit(":", 1)[-1][:12]
        if g.image_id and ":" in g.image_id
        else (g.image_id or "-")
    )
    instances = Text(_names(g.instances))
    if g.why:
        instances.append(f"\n{g.why}", style="red")
    cells: list[RenderableType] = [marker, str(g.count), g.version or "-", g.fingerprint or "-"]
    if has["image"]:
        cells.append(image)
    cells.append(verdicts)
    if has["nodes"]:
        cells.append(_names(g.nodes, 3))
    if has["owners"]:
        cells.append(_names(g.owners, 3))
    if has["age"]:
        cells.append(_ages(g, now))
    cells.append(instances)
    return cells
