"""A spec mapping with its keys turned into field names (camelCase or snake_case).

An ArtifactCheck spells fields in camelCase (the CRD's names), a YAML file or an old
object may use snake_case, and :class:`~artifactcheck.model.settings.CheckSpec` accepts
both. The CLI turns a ``--config`` file's keys into field names before its flags are
laid over them, and admission (:mod:`artifactcheck.tenancy.admission`) judges its rules
on field names and names each refusal as the object spelled it: both read a spec here,
which needs the settings models only (not the admin configuration's).
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from artifactcheck.model.records import MutableRecord
from artifactcheck.model.settings import CheckSpec, loc_part

__all__ = ["FieldPath", "Spelling", "spelled_as_fields"]

FieldPath = tuple[str, ...]


class Spelling(MutableRecord):
    """A spec mapping with its keys turned into field names, and how the object spelled them.

    An ArtifactCheck spells fields in camelCase (the CRD's names), a YAML file or an old
    object may use snake_case, and the model accepts both: every admission rule works on
    field names, so a ``headerFiles`` is refused exactly as a ``header_files``, and each
    refusal names the field as the object wrote it (``spec.http.headerFiles``).
    """

    spec: dict[str, Any]
    #: field-name path -> the keys the object used, e.g. ("http", "header_files") ->
    #: ("http", "headerFiles")
    written: dict[FieldPath, FieldPath]
    #: fields given under both names, as the object wrote them
    twice: list[tuple[str, str]]

    def name(self, *path: str) -> str:
        """``spec.``-prefixed path of a field as the object spelled it (field names
        where it did not, e.g. for a field it left out)."""
        for cut in range(len(path), 0, -1):
            if path[:cut] in self.written:
                return ".".join(("spec", *self.written[path[:cut]], *path[cut:]))
        return ".".join(("spec", *path))

    def name_of(self, loc: tuple[str | int, ...]) -> str | None:
        """A validation error's location as the object spelled it, without ``spec.``."""
        parts = tuple(str(p) for p in loc)
        for cut in range(len(parts), 0, -1):
            if parts[:cut] in self.written and parts[:cut] != self.written[parts[:cut]]:
                return ".".join((*self.written[parts[:cut]], *(loc_part(p) for p in loc[cut:])))
        return None  # spelled as the field names: the usual rendering


def _sub_models(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (directly, optionally or as list items), and whether in a list.

    Dicts are never entered: their keys are user data (header names), not field names.
    """
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = typing.get_origin(annotation)
    if origin is dict:
        return None, False
    args = typing.get_args(annotation)
    if origin is list and args:
        inner, _ = _sub_models(args[0])
        return inner, True
    for arg in args:  # X | None
        inner, listed = _sub_models(arg)
        if inner is not None:
            return inner, listed
    return None, False


@functools.cache
def _keys_of(
    model: type[BaseModel],
) -> tuple[dict[str, str], dict[str, tuple[type[BaseModel] | None, bool]]]:
    """A model's field name by each key that names it (the field name, its alias), and
    the model each field holds (:func:`_sub_models`): the same for every item of a list,
    so a spec of a thousand targets reads the Target model's fields once, not per item."""
    by_key: dict[str, str] = {}
    subs: dict[str, tuple[type[BaseModel] | None, bool]] = {}
    for field_name, info in model.model_fields.items():
        by_key[field_name] = field_name
        if info.alias:
            by_key[info.alias] = field_name
        subs[field_name] = _sub_models(info.annotation)
    return by_key, subs


def _field_names(
    data: Mapping[str, Any],
    model: type[BaseModel],
    field_path: FieldPath,
    written_path: FieldPath,
    out: Spelling,
) -> dict[str, Any]:
    by_key, subs = _keys_of(model)
    result: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for key, value in data.items():
        name = by_key.get(key) if isinstance(key, str) else None
        if name is None:
            result[key] = value  # unknown: load_spec names it ("unknown field")
            continue
        if name in seen:
            where = ".".join(("spec", *written_path))
            out.twice.append((f"{where}.{seen[name]}", f"{where}.{key}"))
            continue
        seen[name] = key
        here, spelled = (*field_path, name), (*written_path, key)
        out.written[here] = spelled
        sub, listed = subs[name]
        if sub is not None and not listed and isinstance(value, Mapping):
            value = _field_names(value, sub, here, spelled, out)
        elif sub is not None and listed and isinstance(value, list):
            value = [
                _field_names(item, sub, here, spelled, out) if isinstance(item, Mapping) else item
                for item in value
            ]
        result[name] = value
    return result


def spelled_as_fields(spec: Mapping[str, Any]) -> Spelling:
    """``spec`` with CheckSpec's own keys (camelCase or snake_case) as field names, recursively;
    keys of dict-valued fields (``http.headers``) are left as they are."""
    out = Spelling({}, {}, [])
    out.spec = _field_names(spec, CheckSpec, (), (), out)
    return out
