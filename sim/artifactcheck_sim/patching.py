"""The three patch formats of the Kubernetes API, on plain JSON values.

Used by the fake API server (:mod:`artifactcheck_sim.apiserver`) for PATCH
requests; pure functions over ``dict``/``list``/scalars, no I/O.

* :func:`json_merge_patch` -- RFC 7386 (``application/merge-patch+json``):
  maps merge recursively, ``null`` deletes a key, everything else (lists
  included) replaces.
* :func:`json_patch` -- RFC 6902 (``application/json-patch+json``): ``add``,
  ``remove``, ``replace``, ``move``, ``copy`` and ``test`` operations on
  RFC 6901 pointers (``~0``/``~1`` escapes, ``-`` to append).
* :func:`strategic_merge_patch` -- Kubernetes' own
  (``application/strategic-merge-patch+json``): like a merge patch, but a
  list the type declares with ``patchStrategy=merge`` is merged by its
  ``patchMergeKey`` (pod ``status.conditions`` by ``type``, ``spec.containers``
  by ``name``...) or, for lists of scalars such as ``metadata.finalizers``, as a
  set union.  Which lists merge and on which key is given by a
  :data:`MergeSchema`, since real servers take it from the Go struct tags.
  Directives supported: ``$patch: replace|delete|merge`` in maps; in lists
  merged by key, an item with ``$patch: delete`` removes the items with its
  merge key and any item with ``$patch: replace`` makes the list the patch's
  plain items (as ``mergeSliceWithSpecialElements`` does);
  ``$deleteFromPrimitiveList/<field>``, ``$setElementOrder/<field>`` and
  ``$retainKeys``.  Not reproduced: the validation errors of the
  ``retainKeys`` strategy, and exact error texts.  Lists without a merge
  strategy are replaced whole, as on real servers.

Errors raise :class:`PatchError`, carrying the HTTP status the real API server
answers with: 400 for a patch document that is malformed, 422 for a patch that
is well-formed but cannot be applied (a failing JSON patch ``test``, a path that
does not exist).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from artifactcheck_sim.json_values import json_copy

__all__ = [
    "ListStrategy",
    "MergeSchema",
    "PatchError",
    "json_equal",
    "json_merge_patch",
    "json_patch",
    "strategic_merge_patch",
]


class PatchError(Exception):
    """A patch that is malformed (``status`` 400) or cannot be applied (422)."""

    def __init__(self, message: str, *, status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class ListStrategy:
    """How a strategic merge patch merges one list field.

    ``merge_key`` is the ``patchMergeKey``; ``None`` means a list of scalars
    merged as a set union (e.g. ``metadata.finalizers``).  ``item`` is the
    schema of the list's items (for lists of maps).
    """

    merge_key: str | None
    item: MergeSchema = field(default_factory=dict)


#: Field name -> nested schema (for a map field) or :class:`ListStrategy`
#: (for a list merged by key).  Fields not named are merged as maps when both
#: sides are maps and replaced otherwise, which is what real servers do for
#: fields without a patch strategy.
MergeSchema = Mapping[str, Union["MergeSchema", ListStrategy]]

JsonValue = Any


def json_equal(a: JsonValue, b: JsonValue) -> bool:
    """Equality of JSON values: ``True`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


# --------------------------------------------------------------------------- RFC 7386


def json_merge_patch(target: JsonValue, patch: JsonValue) -> JsonValue:
    """Apply an RFC 7386 JSON merge patch; returns a new value."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    result: dict[str, JsonValue] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------------- RFC 6902


def _pointer(path: Any, what: str = "path") -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"operation missing or non-string {what!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if allow_end and token == "-":
        return size
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > size or (idx == size and not allow_end):
        raise PatchError(f"array index {idx} out of bounds")
    return idx


def _walk(doc: JsonValue, tokens: list[str], path: str) -> JsonValue:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"doc is missing path: {path!r}")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, len(node), allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return node


def _add(doc: JsonValue, tokens: list[str], value: JsonValue, path: str) -> JsonValue:
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def _remove(doc: JsonValue, tokens: list[str], path: str) -> tuple[JsonValue, JsonValue]:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent), allow_end=False))
    raise PatchError(f"doc is missing path: {path!r}")


def json_patch(doc: JsonValue, operations: JsonValue) -> JsonValue:
    """Apply an RFC 6902 JSON patch (a list of operations); returns a new value.

    Raises :class:`PatchError` with status 400 when ``operations`` is not a
    list of objects, 422 when an operation fails (including a ``test``).
    """
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise PatchError("json patch must be a JSON array of operation objects", status=400)
    result = json_copy(doc)
    for operation in operations:
        op = operation.get("op")
        path = operation.get("path")
        tokens = _pointer(path)
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"{op} operation does not apply: missing value")
        if op == "add":
            result = _add(result, tokens, json_copy(operation["value"]), str(path))
        elif op == "remove":
            result, _ = _remove(result, tokens, str(path))
        elif op == "replace":
            if tokens:
                _walk(result, tokens, str(path))  # must exist
                result, _ = _remove(result, tokens, str(path))
            result = _add(result, tokens, json_copy(operation["value"]), str(path))
        elif op in ("move", "copy"):
            source = operation.get("from")
            from_tokens = _pointer(source, "from")
            if op == "move":
                if tokens[: len(from_tokens)] == from_tokens and len(tokens) > len(from_tokens):
                    raise PatchError(f"cannot move {source!r} into its own child {path!r}")
                _walk(result, from_tokens, str(source))
                result, value = _remove(result, from_tokens, str(source))
            else:
                value = json_copy(_walk(result, from_tokens, str(source)))
            result = _add(result, tokens, value, str(path))
        elif op == "test":
            try:
                actual = _walk(result, tokens, str(path))
            except PatchError as exc:
                raise PatchError(f"testing value {path} failed: {exc.message}") from None
            if not json_equal(actual, operation["value"]):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {op}")
    return result


# --------------------------------------------------------------------------- strategic


class _Delete:
    """Marker: the map carrying ``$patch: delete`` is to be removed."""


_DELETE = _Delete()
_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ELEMENT_ORDER = "$setElementOrder/"


def _strip(value: JsonValue) -> JsonValue:
    """Copy a patch fragment that is used as a literal value, minus directives."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _sub_schema(schema: MergeSchema, key: str) -> MergeSchema:
    sub = schema.get(key)
    return sub if isinstance(sub, Mapping) else {}


def _merge_map(
    original: dict[str, JsonValue], patch: dict[str, JsonValue], schema: MergeSchema
) -> dict[str, JsonValue] | _Delete:
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return {k: _strip(v) for k, v in patch.items() if k != _DIRECTIVE}
    if directive not in (None, "merge"):
        raise PatchError(f"Unknown patch type: {directive}", status=400)
    result = dict(original)
    orders: dict[str, list[JsonValue]] = {}
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN_KEYS):
            continue
        if key.startswith(_DELETE_FROM_PRIMITIVE):
            name = key[len(_DELETE_FROM_PRIMITIVE) :]
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list", status=400)
            current = result.get(name)
            if isinstance(current, list):
                result[name] = [v for v in current if not any(json_equal(v, d) for d in value)]
            continue
        if key.startswith(_SET_ELEMENT_ORDER):
            if not isinstance(value, list):
                raise PatchError(f"{key} must be a list", status=400)
            orders[key[len(_SET_ELEMENT_ORDER) :]] = value
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            merged = _merge_map(
                current if isinstance(current, dict) else {}, value, _sub_schema(schema, key)
            )
            if isinstance(merged, _Delete):
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            strategy = schema.get(key)
            current = result.get(key)
            if isinstance(strategy, ListStrategy):
                result[key] = _merge_list(
                    current if isinstance(current, list) else [], value, strategy
                )
            else:
                result[key] = _strip(value)
        else:
            result[key] = value
    for name, order in orders.items():
        strategy = schema.get(name)
        current = result.get(name)
        if isinstance(current, list):
            result[name] = _reorder(
                current, order, strategy if isinstance(strategy, ListStrategy) else None
            )
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"{_RETAIN_KEYS} must be a list", status=400)
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(
    original: list[JsonValue], patch: list[JsonValue], strategy: ListStrategy
) -> list[JsonValue]:
    key = strategy.merge_key
    if key is None:
        result = list(original)
        for value in patch:
            if isinstance(value, dict) and value.get(_DIRECTIVE) == "replace":
                return [_strip(v) for v in patch if not isinstance(v, dict)]
            if not any(json_equal(value, have) for have in result):
                result.append(value)
        return result
    # As mergeSliceWithSpecialElements: directive elements first (any "$patch: replace"
    # element replaces the whole list with the plain elements), then the plain ones.
    result = [json_copy(item) for item in original]
    plain: list[dict[str, JsonValue]] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(
                f"list item {item!r} must be a map: the list is merged on key {key!r}", status=400
            )
        directive = item.get(_DIRECTIVE)
        if directive is None:
            plain.append(item)
        elif directive == "delete":
            if key not in item:
                raise PatchError(
                    f"map: {item!r} does not contain declared merge key: {key}", status=400
                )
            result = [
                have
                for have in result
                if not (isinstance(have, dict) and json_equal(have.get(key), item[key]))
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch", status=400)
        else:
            raise PatchError(f"Unknown patch type: {directive} in map: {item!r}", status=400)
    if replace:
        return [_strip(item) for item in plain]
    for item in plain:
        if key not in item:
            raise PatchError(
                f"map: {item!r} does not contain declared merge key: {key}", status=400
            )
        wanted = item[key]
        index = next(
            (
                i
                for i, have in enumerate(result)
                if isinstance(have, dict) and json_equal(have.get(key), wanted)
            ),
            None,
        )
        if index is None:
            merged = _merge_map({}, item, strategy.item)
            if not isinstance(merged, _Delete):
                result.append(merged)
            continue
        merged = _merge_map(result[index], item, strategy.item)
        if isinstance(merged, _Delete):
            del result[index]
        else:
            result[index] = merged
    return result


def _reorder(
    items: list[JsonValue], order: list[JsonValue], strategy: ListStrategy | None
) -> list[JsonValue]:
    key = strategy.merge_key if strategy is not None else None

    def ident(value: JsonValue) -> JsonValue:
        if key is not None and isinstance(value, dict):
            return value.get(key)
        return value

    wanted = [ident(o) for o in order]
    ranked: list[tuple[int, int, JsonValue]] = []
    for pos, item in enumerate(items):
        ident_value = ident(item)
        rank = next((i for i, w in enumerate(wanted) if json_equal(w, ident_value)), len(wanted))
        ranked.append((rank, pos, item))
    ranked.sort(key=lambda t: (t[0], t[1]))
    return [item for _, _, item in ranked]


def strategic_merge_patch(
    original: dict[str, JsonValue], patch: JsonValue, schema: MergeSchema
) -> dict[str, JsonValue]:
    """Apply a Kubernetes strategic merge patch; returns a new object."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", status=400)
    merged = _merge_map(json_copy(original), patch, schema)
    if isinstance(merged, _Delete):
        raise PatchError("cannot delete the whole object with a patch", status=400)
    return merged
