"""The on-call views for machines (versioned JSON) and the entry points that draw them.

The same view model (:mod:`artifactcheck.present.oncall`) feeds the JSON documents
here and the tables of :mod:`artifactcheck.present.view_tables`, so what a human reads and
what a script parses never disagree. The documents carry a ``schema`` name
(``artifactcheck/investigate/v1``, ``artifactcheck/fleet/v1``) whose JSON Schema ships in
``present/schemas/``: consumers can validate against it, and a breaking change gets a new
version instead of silently changing the shape. rich is loaded only when a table is
drawn: ``--output json`` never pays for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from artifactcheck.present.oncall import (
    FLEET_SCHEMA,
    INVESTIGATE_SCHEMA,
    AssetRow,
    Evidence,
    FleetView,
    Investigation,
    PodView,
)
from artifactcheck.present.report import finding_json

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA_DIR = Path(__file__).parent / "schemas"


def view_schema_path(name: str) -> Path:
    """The JSON Schema file of ``investigate`` or ``fleet`` output."""
    return SCHEMA_DIR / f"{name}-v1.schema.json"


# --------------------------------------------------------------------------- tables


def render_investigation(inv: Investigation, console: Console) -> None:
    """Print an investigation: summary, signals, manifest, assets, TLS, pod, diffs."""
    from artifactcheck.present import view_tables  # rich loads only when a table is drawn

    for item in view_tables.investigation_renderables(inv, console):
        console.print(item)


def render_fleet(view: FleetView, console: Console) -> None:
    """Print the fleet view once."""
    from artifactcheck.present import view_tables

    console.print(view_tables.fleet_renderable(view, console))


# --------------------------------------------------------------------------- JSON


def _json_value(value: Any) -> Any:
    """A view value as JSON: ISO 8601 for a moment (the schemas' date-time format), an
    array for a tuple, an object for a mapping, the value of an enum."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Enum):
        return value.value
    return value


def _fields(obj: object, names: str, *, prefix: str = "") -> dict[str, Any]:
    """The attributes ``prefix + name`` of a view value, for each name in ``names``, as
    the JSON members ``name``, in that order: every member is always present (null when
    unknown), so consumers need no guessing."""
    return {name: _json_value(getattr(obj, prefix + name)) for name in names.split()}


def investigation_json(inv: Investigation) -> dict[str, Any]:
    """The ``artifactcheck/investigate/v1`` document (see present/schemas).

    Hashes are full length here, unlike the table's prefixes.
    """
    return {
        "schema": INVESTIGATE_SCHEMA,
        **_fields(inv, "generated_at exit_code summary notes"),
        "target": {
            **_fields(inv.target, "name kind"),
            "url": inv.url,
            **_fields(inv.target, "namespace node owner image image_id started_at"),
        },
        **_fields(inv, "verdict reason reported_version serves_version fingerprint"),
        "signals": {
            "agree": inv.signals_agree,
            "items": [_fields(s, "source value agrees note") for s in inv.signals],
        },
        "siblings": _fields(
            inv.siblings,
            "total same same_version same_version_same_content image_total image_same "
            "majority_image nodes first_started last_started",
        ),
        "manifest": {
            **_fields(
                inv.manifest,
                "served_path served_format served_entries served_error expected_version "
                "expected_from expected_stale expected_error added removed changed unchanged "
                "not_compared",
            ),
            "release_matches": [
                _fields(r, "version matching total") for r in inv.manifest.release_matches
            ],
        },
        "assets": [_asset_json(r) for r in inv.assets],
        "tls": [
            _fields(t, "role endpoint subject issuer not_after days_left note") for t in inv.tls
        ],
        "pod": None if inv.pod is None else _pod_json(inv.pod),
        # the target's findings as in the verify report, minus the instance (the target)
        "findings": [finding_json(f, instance=False) for f in inv.findings],
        "diffs": [_fields(d, "path expected_source lines truncated note") for d in inv.diffs],
        "run": _run_json(inv.counts, inv.elapsed, inv.requests),
        **_fields(inv, "desired_version cdn release_source"),
    }


def _evidence_json(e: Evidence | None) -> dict[str, Any] | None:
    """Evidence headers as a JSON object (null when the CDN did not answer)."""
    return None if e is None else _fields(e, "etag age cache_control cache_status server")


def _asset_json(r: AssetRow) -> dict[str, Any]:
    return {
        **_fields(
            r,
            "path state status error expected_sha256 expected_from served_sha256 size "
            "expected_size matches content_encoding elapsed_ms loaded_by",
        ),
        "evidence": _evidence_json(r.evidence),
        "cdn": {
            **_fields(r, "state status sha256 error elapsed_ms", prefix="cdn_"),
            "evidence": _evidence_json(r.cdn_evidence),
        },
    }


def _pod_json(pod: PodView) -> dict[str, Any]:
    return {
        **_fields(pod, "condition_type has_gate gate_status ready"),
        "annotations": dict(pod.annotations),
        "events": [_fields(e, "type reason message count last_seen") for e in pod.events],
        "events_note": pod.events_note,
    }


def _run_json(counts: Any, elapsed: float, requests: int) -> dict[str, Any]:
    """Counts, time and load of the run, so consumers can tell a cheap check from a costly one."""
    return {"counts": dict(counts), "elapsed_s": round(elapsed, 3), "requests": requests}


def fleet_json(view: FleetView) -> dict[str, Any]:
    """The ``artifactcheck/fleet/v1`` document (see present/schemas)."""
    return {
        "schema": FLEET_SCHEMA,
        **_fields(view, "generated_at exit_code noun total headlines notes"),
        "groups": [
            {
                **_fields(
                    g,
                    "version fingerprint image_id count instances verdicts serves_version "
                    "nodes owners first_started last_started odd",
                ),
                "why": g.why or None,
            }
            for g in view.groups
        ],
        "run": _run_json(view.counts, view.elapsed, view.requests),
        **_fields(view, "desired_version cdn release_source"),
    }


def dumps(doc: dict[str, Any], *, compact: bool = False) -> str:
    """JSON text: indented for people, one line per document for ``--watch`` streams."""
    if compact:
        return json.dumps(doc, separators=(",", ":")) + "\n"
    return json.dumps(doc, indent=2) + "\n"
