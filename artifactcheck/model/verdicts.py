"""Every verdict and what it means, in one table.

A verdict is read in many places: the exit code, the policy that flags and quarantines,
the gate that opens on right bytes, the Kubernetes Event, the terminal table, the HTML
page, the investigation's summary and the JSON schemas. Each reads its column of
:data:`VERDICTS` (or a set derived from it here), so a new verdict is one row in this
table and one rule in :mod:`artifactcheck.judge.ladder`. The JSON schemas' verdict enums
are written from the table (``python -m artifactcheck.present.schema_enums``) and a test
fails when they, or a set declared by hand elsewhere in the package, disagree with it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Literal

from artifactcheck.model.records import Record


class Verdict(enum.StrEnum):
    """The judgement on one instance; what each one means is its row of :data:`VERDICTS`.

    Declared in the order reports count them (``Report.counts``, the CRD's status).
    """

    CONSISTENT = "consistent"
    DRIFT = "drift"
    SIGNAL_CONFLICT = "signal-conflict"
    CDN_MISSING = "cdn-missing"
    CDN_MISMATCH = "cdn-mismatch"
    MISMATCH = "mismatch"
    UNREACHABLE = "unreachable"
    INCONCLUSIVE = "inconclusive"


class VerdictTraits(Record, kw_only=True):
    """One verdict's row: how every part of the product reads it."""

    #: Its contribution to the exit code: 0 right, 1 something served is wrong (the
    #: instance is flagged once confirmed: annotation, Event, metric), 3 could not judge
    #: (no evidence either way: a confirmation streak neither grows nor resets).
    exit_code: Literal[0, 1, 3]
    #: Quarantines once confirmed (only with exit code 1).
    quarantines: bool = False
    #: The instance's own bytes may still be right under it: a gate may open and a
    #: quarantine be undone when the bytes were verified.
    may_be_right: bool = False
    #: The verdict alone says the bytes are right for their version: a result built
    #: without a record of what was compared is verified by it.
    vouches: bool = False
    #: A readiness gate may fail open on it, by policy, when nothing speaks against the pod.
    fail_open: bool = False
    #: Which side holds the wrong bytes: the instance's (a card of its own on the HTML
    #: page, "serves wrong content") or the CDN's; None when nothing is known wrong.
    wrong_side: Literal["instance", "cdn"] | None = None
    #: The Kubernetes Event and condition reason (CamelCase, as Kubernetes reasons are).
    event_reason: str
    #: Its style in the terminal (a rich style).
    style: str
    #: Its colour on the HTML page (a CSS colour).
    colour: str
    #: Its place on the HTML page, worst first (the lowest is shown first); tens, so a
    #: new verdict goes between two without renumbering them.
    rank: int
    #: What it means, in the words of a report: the investigation's summary says this
    #: when it has no clause of its own for the verdict.
    meaning: str


#: The table. Properties nobody reads from here are not in it.
VERDICTS: Mapping[Verdict, VerdictTraits] = {
    Verdict.CONSISTENT: VerdictTraits(
        exit_code=0,
        may_be_right=True,
        vouches=True,
        fail_open=True,
        event_reason="ContentConsistent",
        style="green",
        colour="#2e7d32",
        rank=80,
        meaning="serves the bytes of the release it reports",
    ),
    Verdict.DRIFT: VerdictTraits(
        exit_code=1,
        may_be_right=True,
        vouches=True,
        wrong_side="instance",
        event_reason="ContentDrift",
        style="yellow",
        colour="#d84315",
        rank=20,
        meaning="serves the release it reports, which is not the desired one",
    ),
    Verdict.SIGNAL_CONFLICT: VerdictTraits(
        exit_code=1,
        wrong_side="instance",
        event_reason="SignalConflict",
        style="magenta",
        colour="#ad1457",
        rank=30,
        meaning="reports two different versions in two places",
    ),
    Verdict.CDN_MISSING: VerdictTraits(
        exit_code=1,
        may_be_right=True,
        wrong_side="cdn",
        event_reason="CdnMissing",
        style="red",
        colour="#ef6c00",
        rank=50,
        meaning="a file it serves is absent on the CDN",
    ),
    Verdict.CDN_MISMATCH: VerdictTraits(
        exit_code=1,
        may_be_right=True,
        wrong_side="cdn",
        event_reason="CdnMismatch",
        style="red",
        colour="#e65100",
        rank=40,
        meaning="a file it serves has other bytes on the CDN",
    ),
    Verdict.MISMATCH: VerdictTraits(
        exit_code=1,
        quarantines=True,
        wrong_side="instance",
        event_reason="ContentMismatch",
        style="bold red",
        colour="#b71c1c",
        rank=10,
        meaning="serves other bytes than the release it reports",
    ),
    Verdict.UNREACHABLE: VerdictTraits(
        exit_code=3,
        event_reason="ContentUnreachable",
        style="dim",
        colour="#616161",
        rank=60,
        meaning="could not be reached",
    ),
    Verdict.INCONCLUSIVE: VerdictTraits(
        exit_code=3,
        fail_open=True,
        event_reason="ContentInconclusive",
        style="yellow",
        colour="#f9a825",
        rank=70,
        meaning="could not be judged",
    ),
}


def _where(test: str) -> frozenset[Verdict]:
    """The verdicts whose row has ``test`` true (an attribute name of the row)."""
    return frozenset(v for v, t in VERDICTS.items() if getattr(t, test))


#: Something served is wrong (exit code 1): grows the confirmation streak, flagged once
#: confirmed.
BAD_VERDICTS = frozenset(v for v, t in VERDICTS.items() if t.exit_code == 1)
#: Could not judge (exit code 3): no evidence either way.
UNKNOWN_VERDICTS = frozenset(v for v, t in VERDICTS.items() if t.exit_code == 3)
#: Quarantine once confirmed.
QUARANTINABLE = _where("quarantines")
#: The instance's own bytes may still be right: a quarantine can be undone, a gate open.
MAY_BE_RIGHT = _where("may_be_right")
#: The verdict alone vouches for the bytes (a result without a record of what was compared).
VOUCHING = _where("vouches")
#: A gate may fail open on them: nothing could be verified, nothing spoke against the pod.
FAIL_OPEN_VERDICTS = _where("fail_open")
#: The wrong bytes are the instance's own.
INSTANCE_WRONG = frozenset(v for v, t in VERDICTS.items() if t.wrong_side == "instance")
#: The wrong bytes are the CDN's.
CDN_WRONG = frozenset(v for v, t in VERDICTS.items() if t.wrong_side == "cdn")
#: Every verdict, the worst first (the order of the HTML page).
WORST_FIRST = tuple(sorted(VERDICTS, key=lambda v: VERDICTS[v].rank))
