"""Content codings compared: each one judged on its own, in an order the flags cannot change.

A server with precompressed files (nginx ``gzip_static``, Apache's rewrite to ``.gz``)
answers one path with different files depending on ``Accept-Encoding``: a plain file
replaced while its ``.gz`` was left stale is right for one coding and wrong for the
other. Keeping one answer per path and guessing which loses that evidence for one of
the two orders of ``--compare-encoding``; so every coding's answer is kept
(:attr:`Fetched.codings`) and a path is right only when every coding asked for is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from artifactcheck.model.records import replace
from artifactcheck.model.values import STORED_CODINGS, Fetched, Observation


def canonical_codings(codings: Iterable[str]) -> tuple[str, ...]:
    """The codings in the one order they are fetched, kept and reported in: identity
    first, then by name, whatever order they were given in."""
    return tuple(sorted(set(codings), key=lambda c: (c != "identity", c)))


def stored_coding(path: str) -> str | None:
    """The content coding a file is stored in, by its name (``.gz``: gzip), else None."""
    name = path.split("?", 1)[0].rsplit("/", 1)[-1].lower()
    return next((c for end, c in STORED_CODINGS.items() if name.endswith(end)), None)


def decoded(got: Fetched) -> bool:
    """True when the bytes judged are a coding's, undone: labelled with a coding that is
    not the one the file is stored in (a stored ``x.css.gz`` labelled gzip is hashed
    as stored, :func:`artifactcheck.fetch.decoders.beyond_stored`)."""
    coding = got.content_encoding
    return coding not in (None, "identity") and coding != stored_coding(got.path)


def distinguishable(a: Fetched, b: Fetched) -> bool:
    """Two answers for one path that a client could tell apart (status, bytes, failure)."""
    return (a.status, a.sha256, a.error_kind) != (b.status, b.sha256, b.error_kind)


def kept_answer(answers: Mapping[str, Fetched]) -> Fetched:
    """The one answer recorded for a path fetched in ``answers``' codings (in canonical
    order), carrying all of them when they differ.

    The shown answer is the first that differs from the first coding's (browsers get
    it: a stale ``.gz``); a failure of the first coding stays in view. Judging reads
    every coding's answer (:func:`coding_answers`), never only the shown one.
    """
    if len(answers) == 1:  # the usual case: one coding compared
        return next(iter(answers.values()))
    ordered = [answers[c] for c in canonical_codings(answers)]
    first = ordered[0]
    others = [a for a in ordered[1:] if distinguishable(first, a)]
    if not others:
        return first
    shown = others[0] if first.ok else first
    return replace(shown, codings={c: answers[c] for c in canonical_codings(answers)})


def coding_answers(got: Fetched) -> tuple[Fetched, ...]:
    """Every compared coding's answer for one path, in canonical order."""
    return tuple(got.codings.values()) if got.codings else (got,)


def coding_view(obs: Observation, coding: str) -> Observation:
    """``obs`` as if only ``coding`` had been asked for: each path's answer in it."""
    if not any(f.codings for f in obs.assets.values()):
        return obs
    assets = {p: f.codings.get(coding, f) if f.codings else f for p, f in obs.assets.items()}
    return replace(obs, assets=assets)


def coding_views(observations: Sequence[Observation]) -> list[list[Observation]]:
    """The fleet once per compared coding (one list when a single coding was compared):
    siblings agree on a path only when they agree in every coding."""
    codings = canonical_codings(c for o in observations for c in o.encodings) or ("identity",)
    if len(codings) == 1:
        return [list(observations)]
    return [[coding_view(o, c) for o in observations] for c in codings]
