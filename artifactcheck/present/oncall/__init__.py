"""The on-call views: one instance investigated, and the fleet grouped by what it serves.

An engineer woken at 3 a.m. must see in one screen which instances serve what, and
why; in the outage that motivates artifactcheck every dashboard agreed on the version
and the truth came from curl. This package turns a :class:`~artifactcheck.model.values.Report`
(plus what the check saw of the CDN and the releases) into frozen view models: a
plain-language summary first, then every signal side by side. It is pure, like
:mod:`artifactcheck.judge.compare` — no I/O, no clock (``now`` is a parameter) — so every
sentence can be pinned by a test; fetching lives in :mod:`artifactcheck.observe.evidence`,
rendering in :mod:`artifactcheck.present.views`.
"""

from __future__ import annotations

from artifactcheck.judge.answers import short
from artifactcheck.judge.order import natural
from artifactcheck.present.oncall.assets import asset_rows, manifest_comparison
from artifactcheck.present.oncall.builders import build_fleet, build_investigation
from artifactcheck.present.oncall.diffs import DiffPlan, diff_plans, text_diff
from artifactcheck.present.oncall.pods import pod_view, tls_view
from artifactcheck.present.oncall.siblings import siblings
from artifactcheck.present.oncall.signals import signal_rows
from artifactcheck.present.oncall.summary import summarise
from artifactcheck.present.oncall.target import find_target, unknown_target
from artifactcheck.present.oncall.view_models import (
    FLEET_SCHEMA,
    INVESTIGATE_SCHEMA,
    TEXT_SUFFIXES,
    AssetRow,
    DiffView,
    Evidence,
    FleetGroup,
    FleetView,
    Investigation,
    ManifestComparison,
    PodEvent,
    PodView,
    ReleaseMatch,
    Siblings,
    SignalRow,
    TlsView,
)
from artifactcheck.present.oncall.words import (
    age,
    clock,
    file_names,
    join_words,
    noun_for,
    plural,
)

__all__ = [
    "natural",
    "short",
    "AssetRow",
    "DiffPlan",
    "DiffView",
    "Evidence",
    "FLEET_SCHEMA",
    "FleetGroup",
    "FleetView",
    "INVESTIGATE_SCHEMA",
    "Investigation",
    "ManifestComparison",
    "PodEvent",
    "PodView",
    "ReleaseMatch",
    "Siblings",
    "SignalRow",
    "TEXT_SUFFIXES",
    "TlsView",
    "age",
    "asset_rows",
    "build_fleet",
    "build_investigation",
    "clock",
    "diff_plans",
    "file_names",
    "find_target",
    "join_words",
    "manifest_comparison",
    "noun_for",
    "plural",
    "pod_view",
    "siblings",
    "signal_rows",
    "summarise",
    "text_diff",
    "tls_view",
    "unknown_target",
]
