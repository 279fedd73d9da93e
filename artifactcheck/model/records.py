"""The base classes of artifactcheck's value records, and the helpers that go with them.

A value record (an :class:`~artifactcheck.model.values.Observation`, a
:class:`~artifactcheck.model.values.Fetched`, a verdict's traits) is a frozen class of
typed fields, compared, hashed and printed by value. The standard library's frozen
dataclasses give exactly that, but Python 3.11 makes each one by generating and
compiling the source of every method, which on verify's import path costs a large part
of its start-up, and its generated ``__init__`` runs on every GET. ``msgspec.Struct``
gives the same semantics from C, at a small fraction of both costs; the figures are in
docs/benchmarks.md ("verify's start-up").

What :class:`Record` keeps of a frozen dataclass: positional and keyword construction
(``kw_only=True`` as a class keyword where a dataclass had it), field defaults and
``field(default_factory=...)``, ``__post_init__``, equality between instances of the
same class, hashing, ``repr``, ``__match_args__``, pickling, and an ``AttributeError``
on assignment. What differs: assignment raises ``AttributeError`` rather than its
subclass ``FrozenInstanceError``; a ``__post_init__`` that normalises a field uses
:func:`set_in_post_init` (``object.__setattr__`` refuses a record); the
``dataclasses`` functions do not take a record, so :func:`replace` and
:func:`field_names` here take both a record and a dataclass.

:class:`MutableRecord` is the same for classes whose fields change in place (a
``@dataclass(slots=True)``): counters and the state of one call or one check.

This is the only module that imports msgspec (an import-linter contract says so).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

import msgspec
from msgspec import field

__all__ = [
    "MutableRecord",
    "Record",
    "compact_json",
    "field",
    "field_names",
    "replace",
    "set_in_post_init",
]

_T = TypeVar("_T")


# msgspec applies its options to subclasses; this tells type checkers so (PEP 681).
@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class Record(msgspec.Struct, frozen=True):
    """A frozen value of typed fields; subclasses declare their fields as a dataclass does."""


@dataclass_transform(field_specifiers=(field,))
class MutableRecord(msgspec.Struct):
    """Typed fields that change in place (counters, one call's or one check's state),
    as a ``@dataclass(slots=True)``: equal by value, unhashable, no other attributes."""


def replace(obj: _T, /, **changes: Any) -> _T:
    """A copy of ``obj`` (a record or a dataclass) with ``changes``; its ``__post_init__``
    runs again, as :func:`dataclasses.replace` runs it."""
    if isinstance(obj, msgspec.Struct):
        return msgspec.structs.replace(obj, **changes)
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def field_names(cls_or_obj: object) -> tuple[str, ...]:
    """The names of the fields of a record or a dataclass (class or instance), in order."""
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    if issubclass(cls, msgspec.Struct):
        return cls.__struct_fields__
    return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]


def set_in_post_init(record: Record, name: str, value: object) -> None:
    """Set field ``name`` of a record that is still being made, from its
    ``__post_init__`` (where a frozen dataclass would call ``object.__setattr__``)."""
    msgspec.structs.force_setattr(record, name, value)


_JSON = msgspec.json.Encoder()


def compact_json(value: object) -> bytes:
    """Plain values (dicts with string keys, lists, strings, numbers) as compact JSON
    bytes from msgspec's C encoder, several times faster than the standard library's.
    Not the same text in every case: non-ASCII is written raw, floats from 1e16 or
    under 1e-4 without Python's exponent form, NaN as null; a caller that needs
    ``json.dumps``'s exact text checks for those (``present.report.render_json``)."""
    return _JSON.encode(value)
