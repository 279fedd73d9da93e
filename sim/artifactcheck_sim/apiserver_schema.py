"""Structural OpenAPI v3 schemas as the API server applies them: prune, default, validate.

A real kube-apiserver treats a custom object in three steps, all driven by the
CRD's ``openAPIV3Schema``: it *prunes* fields the schema does not declare (unless
``x-kubernetes-preserve-unknown-fields``), applies ``default:`` values, and
validates what is left, answering 422 ``Invalid`` with one cause per failing
field (``spec.interval: Invalid value: "string": spec.interval in body must be
of type number: "string"``).  Built-in kinds are decoded into Go structs, which
drops unknown fields too; :func:`prune` serves both, given a resolver for the
``$ref`` s of the built-in definitions.

The messages follow ``k8s.io/kube-openapi/pkg/validation`` as converted by
``apiextensions-apiserver`` (same wording and field paths), not byte-for-byte in
every corner.  Not implemented: CEL rules (``x-kubernetes-validations``), the
rarely used string formats (only ``date-time``, ``date``, ``byte``, ``uuid``,
``ipv4``, ``ipv6`` are checked), validation ratcheting.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from artifactcheck_sim.apiserver_errors import FieldError
from artifactcheck_sim.json_values import json_copy

__all__ = ["Resolver", "apply_defaults", "prune", "validate"]

JsonObj = dict[str, Any]
Schema = Mapping[str, Any]
#: Turns a schema with ``$ref`` (or ``allOf: [{$ref}]``) into the schema referred to.
Resolver = Callable[[Schema], Schema]

_ROOT_KEPT = ("apiVersion", "kind", "metadata")


def _no_refs(schema: Schema) -> Schema:
    return schema


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


#: Python type -> kube-openapi's name for it; bool before int, as bool is an int.
_GO_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
)


def _go_type(value: Any) -> str:
    """The name kube-openapi gives a JSON value's type in errors."""
    if value is None:
        return "null"
    return next((name for cls, name in _GO_TYPES if isinstance(value, cls)), "object")


# --------------------------------------------------------------------------- pruning


def prune(
    obj: Any,
    schema: Schema,
    *,
    resolve: Resolver = _no_refs,
    keep: tuple[str, ...] = _ROOT_KEPT,
) -> list[str]:
    """Drop the fields ``schema`` does not declare, in place; return their paths.

    The root fields in ``keep`` are left alone (for custom resources ``metadata``,
    which the server handles itself).
    """
    unknown: list[str] = []
    _prune(obj, schema, resolve, keep, "", unknown)
    return unknown


def _prune(
    value: Any, schema: Schema, resolve: Resolver, keep: tuple[str, ...], path: str, out: list[str]
) -> None:
    schema = resolve(schema)
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        if props is None and extra is None and not preserve and not schema.get("type"):
            # No structural information (an int-or-string, a free-form value).
            return
        for key in list(value):
            if key in keep:
                continue
            child = props.get(key) if isinstance(props, Mapping) else None
            if child is not None:
                _prune(value[key], child, resolve, (), _join(path, key), out)
            elif isinstance(extra, Mapping):
                _prune(value[key], extra, resolve, (), _join(path, key), out)
            elif extra is True or preserve:
                continue
            else:
                out.append(_join(path, key))
                del value[key]
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _prune(item, items, resolve, (), f"{path}[{i}]", out)


# --------------------------------------------------------------------------- defaulting


def apply_defaults(obj: Any, schema: Schema) -> None:
    """Apply ``default:`` values in place, top-down, as the structural defaulter does.

    A field is defaulted when it is absent, or null without ``nullable: true``; a
    default that creates an object is then defaulted itself.
    """
    if isinstance(obj, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for key, sub in props.items():
                if "default" in sub and (
                    key not in obj or (obj[key] is None and not sub.get("nullable"))
                ):
                    obj[key] = json_copy(sub["default"])
                if key in obj:
                    apply_defaults(obj[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for value in obj.values():
                apply_defaults(value, extra)
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for item in obj:
                apply_defaults(item, items)


# --------------------------------------------------------------------------- validation

_DATE_TIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")


def _format_ok(fmt: str, value: str) -> bool:
    if fmt in ("date-time", "datetime"):
        return bool(_DATE_TIME_RE.match(value))
    if fmt == "date":
        return bool(_DATE_RE.match(value))
    if fmt == "uuid":
        return bool(_UUID_RE.match(value))
    if fmt == "byte":
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return False
        return True
    if fmt in ("ipv4", "ipv6"):
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return False
        return address.version == (4 if fmt == "ipv4" else 6)
    return True


def _type_ok(kind: str, value: Any) -> bool:
    """Whether ``value`` is of the schema's ``type`` (an integer is also a number)."""
    if kind == "object":
        return isinstance(value, dict)
    if kind not in ("array", "string", "boolean", "integer", "number"):
        return True
    actual = _go_type(value)
    return actual == kind or (kind == "number" and actual == "integer")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def validate(value: Any, schema: Schema, path: str, *, root: bool = False) -> list[FieldError]:
    """Check ``value`` against a structural schema; the failures, as field errors."""
    errors: list[FieldError] = []
    _validate(value, schema, path, root, errors)
    return errors


def _validate(value: Any, schema: Schema, path: str, root: bool, out: list[FieldError]) -> None:
    where = path or "<root>"
    if value is None:
        if schema.get("nullable") or not schema.get("type"):
            return
        out.append(
            FieldError(
                path,
                "type_invalid",
                f'{where} in body must be of type {schema["type"]}: "null"',
                "null",
            )
        )
        return
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            out.append(
                FieldError(
                    path,
                    "type_invalid",
                    f'{where} in body must be of type integer,string: "{_go_type(value)}"',
                    _go_type(value),
                )
            )
            return
    elif isinstance(kind, str) and not _type_ok(kind, value):
        out.append(
            FieldError(
                path,
                "type_invalid",
                f'{where} in body must be of type {kind}: "{_go_type(value)}"',
                _go_type(value),
            )
        )
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and _canonical(value) not in {_canonical(e) for e in enum}:
        supported = ", ".join(json.dumps(e) for e in enum)
        out.append(FieldError(path, "not_supported", f"supported values: {supported}", value))
    if isinstance(value, str):
        _validate_string(value, schema, path, where, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(value, schema, path, where, out)
    elif isinstance(value, list):
        _validate_array(value, schema, path, where, out)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, where, root, out)
    for sub in schema.get("allOf") or ():
        _validate(value, sub, path, root, out)
    for key, label in (("anyOf", "any"), ("oneOf", "one")):
        branches = schema.get(key)
        if branches:
            passing = sum(1 for b in branches if not validate(value, b, path, root=root))
            if (key == "anyOf" and passing == 0) or (key == "oneOf" and passing != 1):
                out.append(_in_body(path, where, f"must validate {label} schema", value))
    if isinstance(schema.get("not"), Mapping) and not validate(value, schema["not"], path):
        out.append(FieldError(path, "invalid", f"{where} in body must not validate the schema"))


def _in_body(path: str, where: str, should: str, value: Any) -> FieldError:
    """The ``invalid`` error a schema keyword gives: ``<where> in body <should>``."""
    return FieldError(path, "invalid", f"{where} in body {should}", value)


def _count_errors(
    count: int,
    schema: Schema,
    keywords: tuple[str, str, str],
    path: str,
    where: str,
    out: list[FieldError],
) -> None:
    """``maxItems``/``minItems`` (or ``maxProperties``/``minProperties``): ``keywords``
    names the two and what is counted."""
    most, least, noun = keywords
    limit = schema.get(most)
    if isinstance(limit, int) and count > limit:
        out.append(FieldError(path, "too_many", f"must have at most {limit} items", count, True))
    limit = schema.get(least)
    if isinstance(limit, int) and count < limit:
        out.append(_in_body(path, where, f"should have at least {limit} {noun}", count))


def _validate_string(
    value: str, schema: Schema, path: str, where: str, out: list[FieldError]
) -> None:
    max_length = schema.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        out.append(FieldError(path, "too_long", f"may not be more than {max_length} bytes"))
    min_length = schema.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        out.append(_in_body(path, where, f"should be at least {min_length} chars long", value))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True
        if not matched:
            out.append(_in_body(path, where, f"should match '{pattern}'", value))
    fmt = schema.get("format")
    if isinstance(fmt, str) and not _format_ok(fmt, value):
        out.append(FieldError(path, "invalid", f"{where} in body must be of type {fmt}: {value!r}"))


def _num(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _validate_number(
    value: float, schema: Schema, path: str, where: str, out: list[FieldError]
) -> None:
    minimum = schema.get("minimum")
    if isinstance(minimum, (int, float)):
        if schema.get("exclusiveMinimum") is True and value <= minimum:
            out.append(_in_body(path, where, f"should be greater than {_num(minimum)}", value))
        elif value < minimum:
            out.append(
                _in_body(path, where, f"should be greater than or equal to {_num(minimum)}", value)
            )
    maximum = schema.get("maximum")
    if isinstance(maximum, (int, float)):
        if schema.get("exclusiveMaximum") is True and value >= maximum:
            out.append(_in_body(path, where, f"should be less than {_num(maximum)}", value))
        elif value > maximum:
            out.append(
                _in_body(path, where, f"should be less than or equal to {_num(maximum)}", value)
            )
    multiple = schema.get("multipleOf")
    if isinstance(multiple, (int, float)) and multiple > 0:
        quotient = value / multiple
        if abs(quotient - round(quotient)) > 1e-9:
            out.append(_in_body(path, where, f"should be a multiple of {_num(multiple)}", value))


def _validate_array(
    value: list[Any], schema: Schema, path: str, where: str, out: list[FieldError]
) -> None:
    _count_errors(len(value), schema, ("maxItems", "minItems", "items"), path, where, out)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set" or schema.get("uniqueItems"):
        seen: set[str] = set()
        for i, item in enumerate(value):
            key = _canonical(item)
            if key in seen:
                out.append(FieldError(f"{path}[{i}]", "duplicate", "", item))
            seen.add(key)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = _canonical({k: item.get(k) for k in keys})
            if key in seen_keys:
                shown = ",".join(f"{k}:{item.get(k)}" for k in keys)
                out.append(FieldError(f"{path}[{i}]", "duplicate", "", f"map[{shown}]"))
            seen_keys.add(key)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _validate(item, items, f"{path}[{i}]", False, out)


def _validate_object(
    value: JsonObj, schema: Schema, path: str, where: str, root: bool, out: list[FieldError]
) -> None:
    for name in schema.get("required") or ():
        if name not in value:
            out.append(FieldError(_join(path, name), "required"))
    counted = ("maxProperties", "minProperties", "properties")
    _count_errors(len(value), schema, counted, path, where, out)
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    for key, child in value.items():
        if root and key in _ROOT_KEPT:
            continue
        sub = props.get(key) if isinstance(props, Mapping) else None
        if sub is None and isinstance(extra, Mapping):
            sub = extra
        if sub is not None:
            _validate(child, sub, _join(path, key), False, out)
