"""Kubernetes label selectors, as the verdict API takes them in a query string.

The verdict API picks a subset of a check's pods by label (a canary ReplicaSet's
``rollouts-pod-template-hash``, a Flagger canary Deployment's ``app``), with the
grammar ``kubectl get -l`` accepts: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``,
``k notin (a,b)``, ``k`` and ``!k``, joined by commas. Keys and values are checked
as Kubernetes checks them, so a typo is a 400, not a silently empty selection.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_TOKEN = re.compile(r"\s*(notin\b|in\b|==|!=|=|!|\(|\)|,|[^\s=!(),]+)")
#: A selector longer than this is refused (it also travels in the request line).
MAX_SELECTOR = 1024


class SelectorError(ValueError):
    """The selector is not one Kubernetes would accept."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause: ``key op values``."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return has and value in self.values
        if self.op in ("!=", "notin"):
            return not has or value not in self.values
        if self.op == "exists":
            return has
        return not has  # "!"


@dataclass(frozen=True, slots=True)
class Selector:
    """All clauses must match (an empty selector matches every pod)."""

    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - the pattern matches any non-space run
            raise SelectorError(f"unexpected character at {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _key(word: str | None) -> str:
    if word is None or not _KEY.match(word):
        raise SelectorError(f"invalid label key {word!r}")
    return word


def _value(word: str | None) -> str:
    if word is None or word in ("(", ")", ",", "=", "==", "!=", "!") or not _VALUE.match(word):
        raise SelectorError(f"invalid label value {word!r}")
    return word


def parse_selector(text: str) -> Selector:
    """Parse ``text``; raise :class:`SelectorError` with what is wrong."""
    if len(text) > MAX_SELECTOR:
        raise SelectorError(f"selector longer than {MAX_SELECTOR} characters")
    tokens = _tokens(text)
    reqs: list[Requirement] = []
    i = 0

    def at(j: int) -> str | None:
        return tokens[j] if j < len(tokens) else None

    while i < len(tokens):
        if tokens[i] == "!":
            reqs.append(Requirement(_key(at(i + 1)), "!"))
            i += 2
        else:
            key = _key(tokens[i])
            op = at(i + 1)
            if op in ("=", "==", "!="):
                value = at(i + 2)
                # an empty value ("k=") is allowed, as in Kubernetes
                if value in (",", None):
                    reqs.append(Requirement(key, "!=" if op == "!=" else "=", frozenset({""})))
                    i += 2
                else:
                    reqs.append(
                        Requirement(key, "!=" if op == "!=" else "=", frozenset({_value(value)}))
                    )
                    i += 3
            elif op in ("in", "notin"):
                if at(i + 2) != "(":
                    raise SelectorError(f"expected '(' after {key} {op}")
                values: set[str] = set()
                j = i + 3
                while True:
                    word = at(j)
                    if word == ")" and not values:
                        raise SelectorError(f"{key} {op} (): an empty set")
                    values.add(_value(word))
                    sep = at(j + 1)
                    if sep == ")":
                        break
                    if sep != ",":
                        raise SelectorError(f"expected ',' or ')' in the values of {key}")
                    j += 2
                reqs.append(Requirement(key, op, frozenset(values)))
                i = j + 2
            else:
                reqs.append(Requirement(key, "exists"))
                i += 1
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(f"expected ',' before {tokens[i]!r}")
            i += 1
            if i == len(tokens):
                raise SelectorError("trailing ','")
    return Selector(text=text.strip(), requirements=tuple(reqs))


__all__ = ["Selector", "SelectorError", "parse_selector"]
