"""A deep copy of a JSON value, made the way only JSON needs.

The fake API server copies objects on every write (the stored object, the patch, the
status kept across a main-resource update), as the real one decodes a fresh object per
request. ``copy.deepcopy`` handles any Python object (a memo of shared references,
``__deepcopy__`` and ``__reduce__`` hooks), which made most of a PATCH's CPU; a JSON
value is a tree of dicts and lists over immutable scalars, copied here by a walk of
those two types. Anything else is left to ``copy.deepcopy``, so a value of another kind
is copied exactly as before.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

__all__ = ["json_copy"]

T = TypeVar("T")

_IMMUTABLE = (str, int, float, bool, type(None))


def json_copy(value: T) -> T:
    """A deep copy of ``value``: new dicts and lists all the way down, scalars shared."""
    return _copy(value)  # type: ignore[no-any-return]


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)
