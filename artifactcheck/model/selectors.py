"""Kubernetes label selectors: parsing and matching.

One grammar for everything in the product that takes a label selector (the verdict API,
:mod:`artifactcheck.control.api`: which of a check's pods a canary asks about). It follows
the real one (``k8s.io/apimachinery/pkg/labels``) closely enough that a selector the real
API server accepts is accepted here with the same meaning, and a selector it rejects is
rejected here too (the API answers 400). Written by hand: no maintained Python library
parses the string form (the official client passes selectors through to the server
unparsed). Field selectors are only ever parsed by a server, so their grammar lives with
the simulator's fake API server (``artifactcheck_sim.field_selectors``), which shares
this module's :class:`SelectorError`.

Label selectors: comma-joined requirements, each one of ``key``, ``!key``,
``key=value``, ``key==value``, ``key!=value``, ``key in (a,b)``,
``key notin (a,b)``, ``key>N``, ``key<N``.  ``!=`` and ``notin`` also match
objects that do not have the label at all, exactly as in Kubernetes.  Keys and
values are validated like label keys and values are.

Not covered: the set-based ``matchExpressions`` JSON form (clients turn that
into the string form before it reaches a server anyway).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Self

from artifactcheck.model.records import Record

__all__ = [
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "label_key_error",
    "label_value_error",
]


class SelectorError(ValueError):
    """A selector that does not parse, or names something invalid."""


_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid label key (a qualified name), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f"prefix part must be non-empty in {key!r}"
        if len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix):
            return f"prefix part of {key!r} must be a lowercase RFC 1123 subdomain"
    if not name:
        return f"name part must be non-empty in {key!r}"
    if len(name) > 63:
        return f"name part of {key!r} must be no more than 63 characters"
    if not _NAME_RE.match(name):
        return (
            f"name part of {key!r} must consist of alphanumeric characters, '-', '_' or '.',"
            " and must start and end with an alphanumeric character"
        )
    return None


def label_value_error(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None."""
    if len(value) > 63:
        return f"label value {value!r} must be no more than 63 characters"
    if value and not _NAME_RE.match(value):
        return (
            f"label value {value!r} must consist of alphanumeric characters, '-', '_' or '.',"
            " and must start and end with an alphanumeric character"
        )
    return None


# --------------------------------------------------------------------------- labels

_EQUALS = "="
_NOT_EQUALS = "!="
_IN = "in"
_NOT_IN = "notin"
_EXISTS = "exists"
_DOES_NOT_EXIST = "!"
_GREATER = "gt"
_LESS = "lt"


class LabelRequirement(Record):
    """One requirement of a label selector; ``op`` is one of the constants above."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == _EXISTS:
            return present
        if self.op == _DOES_NOT_EXIST:
            return not present
        if self.op in (_EQUALS, _IN):
            return present and labels[self.key] in self.values
        if self.op in (_NOT_EQUALS, _NOT_IN):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have = int(labels[self.key])
        except ValueError:
            return False
        want = int(self.values[0])
        return have > want if self.op == _GREATER else have < want

    def __str__(self) -> str:
        if self.op == _EXISTS:
            return self.key
        if self.op == _DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.op in (_IN, _NOT_IN):
            return f"{self.key} {self.op} ({','.join(self.values)})"
        symbol = {_EQUALS: "=", _NOT_EQUALS: "!=", _GREATER: ">", _LESS: "<"}[self.op]
        return f"{self.key}{symbol}{self.values[0]}"


# token kinds
_T_IDENT = "ident"
_T_IN = "in"
_T_NOTIN = "notin"
_SYMBOLS = ("==", "!=", "=", "!", "(", ")", ",", "<", ">")
_SPECIAL_CHARS = frozenset("=!(),<>")


def _lex(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c in _SPECIAL_CHARS:
            for symbol in _SYMBOLS:
                if text.startswith(symbol, i):
                    tokens.append((symbol, symbol))
                    i += len(symbol)
                    break
            continue
        start = i
        while i < n and not text[i].isspace() and text[i] not in _SPECIAL_CHARS:
            i += 1
        word = text[start:i]
        kind = _T_IN if word == "in" else _T_NOTIN if word == "notin" else _T_IDENT
        tokens.append((kind, word))
    return tokens


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _lex(text)
        self.pos = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _next(self) -> tuple[str, str] | None:
        tok = self._peek()
        self.pos += 1
        return tok

    def _fail(self, what: str) -> SelectorError:
        return SelectorError(f"unable to parse requirement: {what} in {self.text!r}")

    def _key(self) -> str:
        tok = self._next()
        if tok is None or tok[0] not in (_T_IDENT, _T_IN, _T_NOTIN):
            found = "end of string" if tok is None else repr(tok[1])
            raise self._fail(f"found {found}, expected: identifier")
        error = label_key_error(tok[1])
        if error:
            raise SelectorError(f"invalid label key {tok[1]!r}: {error}")
        return tok[1]

    @staticmethod
    def _value(value: str) -> str:
        error = label_value_error(value)
        if error:
            raise SelectorError(f"invalid label value: {error}")
        return value

    def _set(self) -> tuple[str, ...]:
        tok = self._next()
        if tok is None or tok[0] != "(":
            raise self._fail("found no '(' after 'in'/'notin'")
        values: list[str] = []
        expect_value = True
        while True:
            tok = self._next()
            if tok is None:
                raise self._fail("found end of string, expected: ')'")
            kind, text = tok
            if kind == ")":
                if expect_value and values:
                    values.append("")  # "(a,)" has an empty value, as in Kubernetes
                break
            if kind == ",":
                if expect_value:
                    values.append("")
                expect_value = True
                continue
            if kind in (_T_IDENT, _T_IN, _T_NOTIN) and expect_value:
                values.append(self._value(text))
                expect_value = False
                continue
            raise self._fail(f"found {text!r}, expected: ',' or ')'")
        if not values:
            raise SelectorError(
                f"for 'in', 'notin' operators, values set can't be empty in {self.text!r}"
            )
        return tuple(dict.fromkeys(values))

    def _requirement(self) -> LabelRequirement:
        tok = self._peek()
        if tok is not None and tok[0] == "!":
            self.pos += 1
            return LabelRequirement(self._key(), _DOES_NOT_EXIST)
        key = self._key()
        tok = self._peek()
        if tok is None or tok[0] == ",":
            return LabelRequirement(key, _EXISTS)
        kind = tok[0]
        self.pos += 1
        if kind in ("=", "==", "!="):
            nxt = self._peek()
            if nxt is None or nxt[0] == ",":
                value = ""
            elif nxt[0] in (_T_IDENT, _T_IN, _T_NOTIN):
                value = self._value(nxt[1])
                self.pos += 1
            else:
                raise self._fail(f"found {nxt[1]!r}, expected: identifier")
            return LabelRequirement(key, _NOT_EQUALS if kind == "!=" else _EQUALS, (value,))
        if kind in (_T_IN, _T_NOTIN):
            return LabelRequirement(key, _IN if kind == _T_IN else _NOT_IN, self._set())
        if kind in ("<", ">"):
            nxt = self._next()
            if nxt is None or nxt[0] != _T_IDENT or not re.fullmatch(r"-?[0-9]+", nxt[1]):
                raise self._fail("for 'Gt', 'Lt' operators, the value must be an integer")
            return LabelRequirement(key, _GREATER if kind == ">" else _LESS, (nxt[1],))
        raise self._fail(f"found {tok[1]!r}, expected: in, notin, =, ==, !=, gt, lt")

    def parse(self) -> tuple[LabelRequirement, ...]:
        if not self.tokens:
            return ()
        requirements = [self._requirement()]
        while self.pos < len(self.tokens):
            tok = self._next()
            if tok is None or tok[0] != ",":
                found = "end of string" if tok is None else repr(tok[1])
                raise self._fail(f"found {found}, expected: ','")
            if self._peek() is None:
                raise self._fail("found end of string after ',', expected: identifier")
            requirements.append(self._requirement())
        return tuple(requirements)


class LabelSelector(Record):
    """A parsed label selector: requirements that must all hold (none: matches everything)."""

    requirements: tuple[LabelRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> Self:
        """Parse the string form; raises :class:`SelectorError` when it is invalid."""
        if not text or not text.strip():
            return cls()
        return cls(_LabelParser(text).parse())

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        have = labels or {}
        return all(req.matches(have) for req in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(req) for req in self.requirements)
