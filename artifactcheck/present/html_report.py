"""``verify --output html=FILE``: the fleet at a glance, as one file a browser opens.

An on-call engineer facing hundreds of instances would rather see the fleet than read a
table, and a CI job keeps files, not terminals. The page is built from the report's JSON
document (:func:`artifactcheck.present.report.to_json`, schema ``report-v3``) and from
nothing else, so it never says more than ``--output json`` does: what an instance served
is hashed there, and the text of a file is not, so the page shows hashes, never a diff.

Everything an instance sent (its reported version, its URL, the text of a finding)
is hostile until shown: the template is rendered by Jinja2 with autoescape on, and
the page carries a Content-Security-Policy that allows inline styles and nothing else
(no script, no image, no font, no fetch), so the file is safe to publish as a CI
artifact. Jinja2 rather than ``html.escape`` and string building: autoescape escapes
every value by default, and a template a reviewer reads as HTML keeps the page's shape
in one place.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from artifactcheck.model.verdicts import (
    BAD_VERDICTS,
    CDN_WRONG,
    INSTANCE_WRONG,
    UNKNOWN_VERDICTS,
    VERDICTS,
    WORST_FIRST,
    Verdict,
)

TEMPLATE = "report.html.j2"

#: The page's Content-Security-Policy: inline styles only; nothing runs, nothing loads.
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

#: Verdicts from the worst (shown first) to the best, as the verdict table ranks them.
VERDICT_ORDER = WORST_FIRST
_RANK = {v.value: n for n, v in enumerate(VERDICT_ORDER)}
_BAD = frozenset(v.value for v in BAD_VERDICTS)
_UNKNOWN = frozenset(v.value for v in UNKNOWN_VERDICTS)
#: Bad verdicts about the instance's own bytes (a card each), not about the CDN.
_CONTENT_BAD = frozenset(v.value for v in INSTANCE_WRONG)
_CDN_BAD = frozenset(v.value for v in CDN_WRONG)
#: Each verdict's colour (a custom property), label and card border, from the verdict
#: table: the template names no verdict, so a new one is coloured without touching it.
VERDICT_CSS = {
    "colours": ":root{" + "".join(f"--{v}:{t.colour};" for v, t in VERDICTS.items()) + "}",
    "labels": "".join(f".v-{v}{{background:var(--{v})}}" for v in VERDICTS),
    "cards": "".join(f".card.b-{v}{{border-left-color:var(--{v})}}" for v in VERDICTS),
}
#: Cards shown before "and N more": a page for a glance, the full list further down.
MAX_CARDS = 24
MAX_NAMES = 40
#: Bad instances shown unfolded under "Every instance" while there are at most this many:
#: beyond, folded, so a browser lays out a page of summaries, not of every file row.
MAX_OPEN = 50
_CDN_KINDS = frozenset({"cdn-missing", "cdn-differs"})
#: Findings about one file, shown as a row of the instance's "files that differ".
_FILE_KINDS = frozenset(
    {"content-differs", "file-missing", "file-unexpected", "integrity-failed", "cdn-differs"}
)
#: Findings too quiet to list for every instance of a large fleet (the JSON keeps them).
_QUIET = frozenset({"info"})


def render_html(doc: Mapping[str, Any]) -> str:
    """The self-contained HTML page of a report document (``to_json``'s output)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("artifactcheck.present", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(TEMPLATE).render(page=page_model(doc), csp=CSP, verdict_css=VERDICT_CSS)


def page_model(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What the template shows, computed from the report document alone (pure)."""
    columns = list(doc.get("asset_columns") or ())
    results = [_instance(n, r, columns) for n, r in enumerate(doc.get("results") or ())]
    counts = Counter(r["verdict"] for r in results)
    total = len(results)
    bad = [r for r in results if r["bad"]]
    wrong = sorted((r for r in results if r["verdict"] in _CONTENT_BAD), key=_worst_first)
    fleet_findings = [dict(f) for f in doc.get("findings") or ()]
    cdn = _cdn_findings(fleet_findings, results)
    return {
        "exit_code": doc.get("exit_code"),
        "headline": _headline(total, len(wrong), counts),
        "also": _also(len(wrong), counts),
        "status": "bad" if bad else "ok" if total and counts["consistent"] == total else "unknown",
        "total": total,
        "bars": [
            {"verdict": v.value, "n": counts[v.value], "pct": 100.0 * counts[v.value] / total}
            for v in VERDICT_ORDER
            if counts.get(v.value)
        ],
        "cards": wrong[:MAX_CARDS],
        "more_cards": len(wrong) - MAX_CARDS if len(wrong) > MAX_CARDS else 0,
        "others": _others(results),
        "versions": _by_version(results),
        "cdn": doc.get("cdn"),
        "cdn_findings": cdn,
        "fleet_findings": [f for f in fleet_findings if f["kind"] not in _CDN_KINDS],
        "instances": sorted(results, key=_worst_first),
        "open_bad": len(bad) <= MAX_OPEN,
        "settings": _settings(doc),
        "actions": [dict(a) for a in doc.get("actions") or ()],
    }


def _worst_first(r: Mapping[str, Any]) -> tuple[int, int]:
    return (_RANK.get(r["verdict"], 0), r["index"])


def _headline(total: int, wrong: int, counts: Counter[str]) -> str:
    """The sentence read first: the worst news, in numbers of instances."""
    cdn = sum(counts.get(v, 0) for v in _CDN_BAD)
    unknown = sum(counts.get(v, 0) for v in _UNKNOWN)
    if not total:
        return "No instance was checked"
    if wrong:
        return f"{wrong} of {total} instances {_serve(wrong)} wrong content"
    if cdn:
        return f"The CDN differs from what {cdn} of {total} instances {_serve(cdn)}"
    if unknown:
        return f"{unknown} of {total} instances could not be judged; none serves wrong content"
    consistent = counts.get("consistent", 0)
    if consistent == total:
        return f"All {total} instances are consistent"
    # a verdict this page does not know (a newer report): never read as consistent
    return f"{total - consistent} of {total} instances are not consistent"


def _serve(n: int) -> str:
    return "serves" if n == 1 else "serve"


def _also(wrong: int, counts: Counter[str]) -> list[tuple[str, int]]:
    """The other verdicts than the headline's, worst first, as (verdict, count)."""
    shown = _CONTENT_BAD if wrong else _CDN_BAD if any(counts.get(v) for v in _CDN_BAD) else set()
    return [
        (v.value, counts[v.value])
        for v in VERDICT_ORDER
        if counts.get(v.value) and v.value not in shown and v is not Verdict.CONSISTENT
    ]


def _others(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Instances whose verdict is about the CDN or could not be judged, one line per verdict."""
    out = []
    for v in VERDICT_ORDER:
        if v.value in _CONTENT_BAD or v is Verdict.CONSISTENT:
            continue
        members = [r for r in results if r["verdict"] == v.value]
        if members:
            out.append(
                {
                    "verdict": v.value,
                    "cdn": v in CDN_WRONG,
                    "n": len(members),
                    "shown": members[:MAX_NAMES],
                    "more": max(0, len(members) - MAX_NAMES),
                }
            )
    return out


def _instance(index: int, r: Mapping[str, Any], columns: list[str]) -> dict[str, Any]:
    """One result as the page shows it: verdict, where it runs, what it serves, findings."""
    assets = [dict(zip(columns, row, strict=False)) for row in r.get("assets") or ()]
    findings = [dict(f) for f in r.get("findings") or ()]
    verdict = str(r.get("verdict"))
    url = str(r.get("url") or "")
    return {
        "index": index,
        "anchor": f"i{index}",  # never the instance's name: that came from outside
        "name": r.get("instance"),
        "url": url,
        "host": _host(url),
        "node": r.get("node"),
        "namespace": r.get("namespace"),
        "owner": r.get("owner"),
        "verdict": verdict,
        "bad": verdict in _BAD,
        "unknown": verdict in _UNKNOWN,
        "reason": r.get("reason"),
        "reported": r.get("reported_version"),
        "serves": r.get("serves_version"),
        # the judge's digest of what was served (manifest and asset hashes): one content,
        # one key, as ``fleet`` groups instances
        "content": str(r.get("fingerprint") or "nothing served"),
        "findings": [f for f in findings if f.get("severity") not in _QUIET or verdict in _BAD],
        "files": [f for f in findings if f.get("kind") in _FILE_KINDS and f.get("path")],
        "hashes": {a["path"]: a.get("sha256") for a in assets if a.get("path")},
        "error": r.get("error"),
        # why no version was read, or the served manifest was not: the instance's words
        "notes": [
            str(n)
            for n in (
                r.get("endpoint_error"),
                r.get("endpoint_note"),
                (r.get("manifest") or {}).get("error"),
            )
            if n
        ],
    }


def _host(url: str) -> str:
    try:
        return urlsplit(url).netloc
    except ValueError:
        return ""


def _by_version(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Instances grouped by reported version, then by content; the largest group first."""
    versions: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        versions[str(r["reported"] or "no version")][r["content"]].append(r)
    out = []
    for version, contents in versions.items():
        groups = sorted(contents.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        largest = len(groups[0][1])
        out.append(
            {
                "version": version,
                "n": sum(len(g) for _, g in groups),
                "groups": [
                    {
                        "content": key,
                        "instances": sorted(members, key=_worst_first),
                        # a group smaller than the version's largest stands out
                        "odd": len(groups) > 1 and len(members) < largest,
                        "serves": sorted({str(m["serves"]) for m in members if m["serves"]}),
                    }
                    for key, members in groups
                ],
            }
        )
    return sorted(out, key=lambda v: (-v["n"], v["version"]))


def _cdn_findings(
    fleet: list[dict[str, Any]], results: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The CDN's findings, fleet-wide ones and those reported on an instance, once each."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for f in [*fleet, *(f for r in results for f in r["findings"])]:
        if f.get("kind") not in _CDN_KINDS:
            continue
        key = (str(f.get("kind")), str(f.get("path")), str(f.get("message")))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _settings(doc: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The run's settings and figures as (label, value) rows."""
    sample = doc.get("sample") or {}
    rows: list[tuple[str, Any]] = [
        ("exit code", doc.get("exit_code")),
        ("expected version", doc.get("desired_version") or "each instance's own"),
        ("CDN", doc.get("cdn") or "none"),
        ("started", doc.get("started_at")),
        ("elapsed", f"{doc.get('elapsed_s')} s"),
        ("requests", doc.get("requests")),
        ("retries", doc.get("retries")),
        ("names only", "yes" if doc.get("names_only") else "no"),
        ("schema", doc.get("schema")),
    ]
    if sample:
        rows.append(
            (
                "sample",
                f"{sample.get('instances_checked')} of {sample.get('instances_total')} "
                f"instances, {sample.get('assets_per_instance') or 'all'} assets each, "
                f"seed {sample.get('seed')}",
            )
        )
    return rows
