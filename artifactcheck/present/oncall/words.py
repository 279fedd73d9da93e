"""Words for people: lists, counts, ages and clock times as an engineer reads them at 3 a.m."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from artifactcheck.model.values import (
    Instance,
)


def join_words(items: Sequence[str], *, conj: str = "and") -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return f"{', '.join(items[:-1])} {conj} {items[-1]}"


def file_names(paths: Sequence[str], *, limit: int = 4) -> str:
    """Base names when they are unambiguous (a tired human reads those), else paths."""
    bases = [p.rsplit("/", 1)[-1] for p in paths]
    shown = bases if len(set(bases)) == len(bases) else list(paths)
    if len(shown) > limit:
        return f"{', '.join(shown[:limit])} and {len(shown) - limit} more"
    return join_words(shown)


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 file`` / ``3 files``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def age(seconds: float) -> str:
    """A short human duration: 45s, 12m, 3h05m, 2d04h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def clock(moment: datetime, now: datetime) -> str:
    """``12:04 UTC`` today, ``2024-05-01 12:04 UTC`` otherwise."""
    if moment.tzinfo is not None and now.tzinfo is not None:
        moment = moment.astimezone(now.tzinfo)
    if moment.date() == now.date():
        return moment.strftime("%H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def noun_for(instances: Iterable[Instance]) -> str:
    """The plural noun for a set of instances: pods, containers, or instances when mixed."""
    kinds = {i.kind for i in instances}
    if kinds == {"pod"}:
        return "pods"
    if kinds == {"container"}:
        return "containers"
    return "instances"


def _verb(n: int, one: str, many: str) -> str:
    """Subject-verb agreement: '1 of 6 serves', '2 of 6 serve'."""
    return one if n == 1 else many
