"""Kubernetes field selectors, as the fake API server parses and matches them.

Only a server parses field selectors (the product passes none it has to understand), so
this grammar lives with the fake API server rather than in the product; label selectors
stay in :mod:`artifactcheck.model.selectors` (the verdict API takes them), whose
:class:`~artifactcheck.model.selectors.SelectorError` this module raises too, so one
``except`` answers 400 for both halves of a list or watch query. It follows
``k8s.io/apimachinery/pkg/fields``: a selector the real API server accepts is accepted
here with the same meaning, and one it rejects is rejected.

Comma-joined ``field=value``, ``field==value`` or ``field!=value`` terms, with ``\\,``,
``\\=`` and ``\\\\`` escapes in values.  Which fields exist is up to the resource;
:meth:`FieldSelector.matches` takes a function that reads a field from the object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from artifactcheck.model.selectors import SelectorError

__all__ = ["FieldRequirement", "FieldSelector", "SelectorError"]

_FIELD_OPERATORS = ("!=", "==", "=")


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str

    def matches(self, actual: str) -> bool:
        return (actual == self.value) if self.op == "=" else (actual != self.value)


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    start = 0
    escaped = False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    escaped = False
    for i, c in enumerate(term):
        if escaped:
            escaped = False
            continue
        if c == "\\":
            escaped = True
            continue
        for op in _FIELD_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            if c not in "\\,=":
                raise SelectorError(f"invalid field selector value {value!r}: bad escape '\\{c}'")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise SelectorError(f"invalid field selector value {value!r}: unescaped {c!r}")
        else:
            out.append(c)
    if escaped:
        raise SelectorError(f"invalid field selector value {value!r}: trailing backslash")
    return "".join(out)


def _requirements(text: str) -> tuple[FieldRequirement, ...]:
    requirements: list[FieldRequirement] = []
    for term in _split_terms(text):
        if not term:
            continue
        parts = _split_term(term)
        if parts is None:
            raise SelectorError(f"invalid selector: {text!r}; can't understand {term!r}")
        field, op, value = parts
        field = field.strip()
        if not field:
            raise SelectorError(f"invalid selector: {text!r}; empty field name in {term!r}")
        requirements.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape(value)))
    return tuple(requirements)


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: terms that must all hold (none: matches everything)."""

    requirements: tuple[FieldRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> Self:
        """Parse the string form; raises :class:`SelectorError` when it is invalid."""
        if not text or not text.strip():
            return cls()
        return cls(_requirements(text))

    @property
    def empty(self) -> bool:
        return not self.requirements

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(req.field for req in self.requirements)

    def matches(self, get: Callable[[str], str]) -> bool:
        """``get(field)`` returns the object's value of a field as a string."""
        return all(req.matches(get(req.field)) for req in self.requirements)

    def __str__(self) -> str:
        def esc(v: str) -> str:
            return v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")

        return ",".join(f"{r.field}{r.op}{esc(r.value)}" for r in self.requirements)
