"""Text diffs of a file's expected and served bytes, and the plan of which to fetch."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from artifactcheck.model.values import (
    Fetched,
    Report,
)
from artifactcheck.present.oncall.view_models import DiffView, Investigation

_BREAK = re.compile(r"(?<=[;{}])")


def _reflow(text: str, width: int = 100) -> list[str]:
    """Lines for diffing; minified lines are broken after ``; { }`` so a diff is readable."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        piece = ""
        for part in _BREAK.split(line):
            if piece and len(piece) + len(part) > width:
                out.append(piece)
                piece = ""
            piece += part
            while len(piece) > width * 2:  # no separator for a long stretch: hard wrap
                out.append(piece[:width])
                piece = piece[width:]
        if piece:
            out.append(piece)
    return out


def text_diff(
    path: str,
    expected: bytes,
    served: bytes,
    *,
    expected_source: str,
    max_lines: int = 40,
) -> DiffView:
    """A unified diff (difflib) of expected against served, the first ``max_lines`` lines.

    Bundles are minified onto one line, where a line diff says only "everything
    changed"; both sides are broken at the same statement boundaries first so the diff
    points at the changed statement. Bytes that decode to the same text are said to.
    """
    a = expected.decode("utf-8", errors="replace")
    b = served.decode("utf-8", errors="replace")
    left, right = _reflow(a), _reflow(b)
    reflowed = len(left) != len(a.splitlines()) or len(right) != len(b.splitlines())
    lines = [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            left, right, fromfile=f"expected/{path}", tofile=f"served/{path}", lineterm="", n=2
        )
    ]
    note = None
    if reflowed:
        note = "long minified lines were broken after ; { } to make the diff readable"
    if not lines:
        note = "the bytes differ but the text is the same (encoding or line endings)"
    return DiffView(
        path=path,
        expected_source=expected_source,
        lines=tuple(lines[:max_lines]),
        truncated=max(0, len(lines) - max_lines),
        note=note,
    )


@dataclass(frozen=True, slots=True)
class DiffPlan:
    """Where to fetch the expected bytes of one mismatching text file from."""

    path: str
    expected_sha256: str
    served_sha256: str | None
    sources: tuple[tuple[str, str], ...]  # (label, base_url), best first


def diff_plans(
    inv: Investigation, report: Report, cdn_assets: Mapping[str, Fetched]
) -> tuple[DiffPlan, ...]:
    """For each mismatching text file: siblings that serve the expected bytes, then the CDN.

    Only sources whose observed sha256 equals the expected one qualify, so the diff is
    against the real expected bytes, never against another wrong copy.
    """
    plans = []
    for row in inv.assets:
        if row.state != "differs" or not row.is_text or row.expected_sha256 is None:
            continue
        sources: list[tuple[str, str]] = []
        for r in report.results:
            if r.instance.name == inv.target.name or r.observation is None:
                continue
            got = r.observation.assets.get(row.path)
            if got is None and r.observation.manifest_path == row.path:
                got = r.observation.manifest_fetch
            if got is not None and got.ok and got.sha256 == row.expected_sha256:
                label = f"sibling {r.instance.name}"
                if r.instance.name != r.instance.base_url:
                    label += f" ({r.instance.base_url})"
                sources.append((label, r.instance.base_url))
        on_cdn = cdn_assets.get(row.path)
        if (
            inv.cdn is not None
            and on_cdn is not None
            and on_cdn.ok
            and on_cdn.sha256 == row.expected_sha256
        ):
            sources.append((f"CDN {inv.cdn}", inv.cdn))
        plans.append(
            DiffPlan(
                path=row.path,
                expected_sha256=row.expected_sha256,
                served_sha256=row.served_sha256,
                sources=tuple(sources[:3]),
            )
        )
    return tuple(plans)
