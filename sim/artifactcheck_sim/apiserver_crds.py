"""``apiextensions.k8s.io/v1`` CustomResourceDefinitions for the fake API server.

Why: the project's CRD (``k8s/crd.yaml``) carries the ArtifactCheck schema, and a
real cluster enforces it: unknown fields are pruned, ``default:`` values filled in,
wrong values refused with 422.  Tests that run against a lenient fake would accept
ArtifactChecks a cluster refuses.  So the fake serves CRDs as a real server does:
creating one makes its group/version/resource appear in discovery and be served
(with the short names, categories, status subresource and printer columns it
declares), a schema-driven :class:`ResourceType` per served version; updating it
re-registers; deleting it stops serving the resource and deletes its objects.

Validation of the CRD itself is the subset a client meets in practice (name is
``<plural>.<group>``, names and scope present, one storage version, a schema per
version, no ``additionalProperties: false``, immutable group and scope); the
CRD gets ``NamesAccepted`` and ``Established`` conditions at once (there is no
controller to wait for).  Conversion webhooks, CEL rules and ``scale`` are not
implemented.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from artifactcheck_sim.apiserver_errors import FieldError
from artifactcheck_sim.apiserver_resources import (
    ResourceType,
    Strategy,
    builtin,
    dns_label_error,
    dns_subdomain_error,
    scope_fields,
)
from artifactcheck_sim.apiserver_schema import apply_defaults, prune, validate
from artifactcheck_sim.apiserver_store import now_rfc3339

__all__ = ["CRDS", "custom_resources"]

JsonObj = dict[str, Any]

_STATUS_CONDITIONS = ("NamesAccepted", "Established")


def _default_crd(crd: JsonObj) -> None:
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str):
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
    spec.setdefault("conversion", {"strategy": "None"})


def _crd_status(crd: JsonObj) -> JsonObj:
    spec = crd.get("spec") or {}
    now = now_rfc3339()
    stored = [
        v.get("name")
        for v in spec.get("versions") or ()
        if isinstance(v, dict) and v.get("storage")
    ]
    reasons = {
        "NamesAccepted": ("NoConflicts", "no conflicts found"),
        "Established": ("InitialNamesAccepted", "the initial names have been accepted"),
    }
    return {
        "acceptedNames": copy.deepcopy(spec.get("names") or {}),
        "conditions": [
            {
                "type": ctype,
                "status": "True",
                "lastTransitionTime": now,
                "reason": reasons[ctype][0],
                "message": reasons[ctype][1],
            }
            for ctype in _STATUS_CONDITIONS
        ],
        "storedVersions": stored,
    }


def _prepare_crd_create(crd: JsonObj) -> None:
    crd["status"] = _crd_status(crd)


def _schema_errors(schema: Any, path: str) -> list[FieldError]:
    """The structural-schema rules a CRD author trips over most."""
    errors: list[FieldError] = []
    if not isinstance(schema, dict):
        return [FieldError(path, "required", "schemas are required")]
    if path.endswith("openAPIV3Schema") and not schema.get("type"):
        errors.append(FieldError(f"{path}.type", "required", "must not be empty at the root"))

    def walk(node: Any, where: str) -> None:
        if not isinstance(node, dict):
            return
        extra = node.get("additionalProperties")
        why = None
        if extra is False:
            why = "additionalProperties cannot be set to false"
        elif node.get("properties") and isinstance(extra, dict):
            why = "additionalProperties and properties are mutual exclusive"
        if why:
            errors.append(FieldError(f"{where}.additionalProperties", "forbidden", why))
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, f"{where}.properties[{name}]")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{where}.items")
        if isinstance(extra, dict):
            walk(extra, f"{where}.additionalProperties")

    walk(schema, path)
    return errors


def _validate_crd(crd: JsonObj, old: JsonObj | None) -> list[FieldError]:
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("spec", "required")]
    group = spec.get("group")
    errors = _group_errors(group)
    names = spec.get("names")
    if not isinstance(names, dict):
        errors.append(FieldError("spec.names", "required"))
        names = {}
    errors += _names_errors(names, (crd.get("metadata") or {}).get("name"), group)
    errors += _scope_errors(spec.get("scope"))
    errors += _versions_errors(spec.get("versions"))
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("group", "scope"):
            if old_spec.get(key) != spec.get(key):
                errors.append(
                    FieldError(f"spec.{key}", "invalid", "field is immutable", spec.get(key))
                )
    return errors


def _group_errors(group: Any) -> list[FieldError]:
    if not isinstance(group, str) or not group:
        return [FieldError("spec.group", "required")]
    if "." not in group:
        return [
            FieldError("spec.group", "invalid", "should be a domain with at least one dot", group)
        ]
    why = dns_subdomain_error(group)
    return [FieldError("spec.group", "invalid", why, group)] if why else []


def _names_errors(names: JsonObj, name: Any, group: Any) -> list[FieldError]:
    """``spec.names`` has a plural and a kind, DNS-label names, and the CRD is named
    ``<plural>.<group>``."""
    errors = [
        FieldError(f"spec.names.{key}", "required")
        for key in ("plural", "kind")
        if not names.get(key)
    ]
    for key in ("plural", "singular"):
        value = names.get(key)
        why = dns_label_error(value) if isinstance(value, str) and value else None
        if why:
            errors.append(FieldError(f"spec.names.{key}", "invalid", why, value))
    if names.get("plural") and group and name != f"{names['plural']}.{group}":
        errors.append(
            FieldError("metadata.name", "invalid", 'must be spec.names.plural+"."+spec.group', name)
        )
    return errors


def _scope_errors(scope: Any) -> list[FieldError]:
    if scope in ("Cluster", "Namespaced"):
        return []
    if not scope:
        return [FieldError("spec.scope", "required")]
    return [FieldError.not_supported("spec.scope", scope, ("Cluster", "Namespaced"))]


_ONE_STORAGE = "must have exactly one version marked as storage version"


def _versions_errors(versions: Any) -> list[FieldError]:
    if not isinstance(versions, list) or not versions:
        return [FieldError("spec.versions", "invalid", _ONE_STORAGE, versions)]
    errors: list[FieldError] = []
    storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
    if len(storage) != 1:
        stored = [v.get("name") for v in storage]
        errors.append(FieldError("spec.versions", "invalid", _ONE_STORAGE, stored))
    seen: set[str] = set()
    for i, version in enumerate(versions):
        errors += _version_errors(f"spec.versions[{i}]", version, seen)
    return errors


_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")


def _version_errors(where: str, version: Any, seen: set[str]) -> list[FieldError]:
    """One entry of ``spec.versions`` (its name is added to ``seen``)."""
    if not isinstance(version, dict):
        return [FieldError(where, "invalid", "must be an object", version)]
    errors: list[FieldError] = []
    vname = version.get("name")
    if not vname or not isinstance(vname, str):
        errors.append(FieldError(f"{where}.name", "required"))
    elif vname in seen:
        errors.append(FieldError(f"{where}.name", "duplicate", "", vname))
    else:
        seen.add(vname)
    for key in ("served", "storage"):
        if not isinstance(version.get(key), bool):
            errors.append(FieldError(f"{where}.{key}", "required"))
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    errors.extend(_schema_errors(schema, f"{where}.schema.openAPIV3Schema"))
    for j, column in enumerate(version.get("additionalPrinterColumns") or ()):
        if isinstance(column, dict):
            errors += _column_errors(f"{where}.additionalPrinterColumns[{j}]", column)
    return errors


def _column_errors(where: str, column: JsonObj) -> list[FieldError]:
    errors = [
        FieldError(f"{where}.{key}", "required")
        for key in ("name", "type", "jsonPath")
        if not column.get(key)
    ]
    ctype = column.get("type")
    if ctype and ctype not in _COLUMN_TYPES:
        errors.append(FieldError.not_supported(f"{where}.type", ctype, _COLUMN_TYPES))
    return errors


CRDS = builtin(
    "apiextensions.k8s.io/v1",
    "CustomResourceDefinition",
    "crd",
    "crds",
    cluster_scoped=True,
    categories=("api-extensions",),
    status_subresource=True,
    track_generation=True,
    strategy=Strategy(_default_crd, _prepare_crd_create, _validate_crd),
)


# --------------------------------------------------------------------------- custom resources


def _hooks(
    schema: JsonObj, kind: str, has_status: bool
) -> tuple[
    Callable[[JsonObj], None],
    Callable[[JsonObj], list[str]],
    Callable[[JsonObj, JsonObj | None], list[FieldError]],
    Callable[[JsonObj], None],
]:
    def default(obj: JsonObj) -> None:
        apply_defaults(obj, schema)

    def pruner(obj: JsonObj) -> list[str]:
        return prune(obj, schema)

    def check(obj: JsonObj, old: JsonObj | None) -> list[FieldError]:
        return validate(obj, schema, "", root=True)

    def prepare(obj: JsonObj) -> None:
        if has_status:
            obj.pop("status", None)

    return default, pruner, check, prepare


def _convert_to(api_version: str) -> Callable[[JsonObj], JsonObj]:
    def convert(obj: JsonObj) -> JsonObj:
        if obj.get("apiVersion") == api_version:
            return obj
        return {**obj, "apiVersion": api_version}

    return convert


def custom_resources(crd: JsonObj) -> list[ResourceType]:
    """One :class:`ResourceType` per served version of a (valid) CRD."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group"))
    versions = [v for v in spec.get("versions") or () if isinstance(v, dict)]
    storage = next((v["name"] for v in versions if v.get("storage")), None)
    out: list[ResourceType] = []
    for version in versions:
        if not version.get("served"):
            continue
        schema = copy.deepcopy((version.get("schema") or {}).get("openAPIV3Schema") or {})
        has_status = "status" in (version.get("subresources") or {})
        default, pruner, check, prepare = _hooks(schema, str(names.get("kind")), has_status)
        columns = version.get("additionalPrinterColumns")
        if columns is None:
            columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        namespaced = spec.get("scope") == "Namespaced"
        multi = len(versions) > 1 and storage is not None
        out.append(
            ResourceType(
                group=group,
                version=str(version["name"]),
                kind=str(names.get("kind")),
                plural=str(names.get("plural")),
                singular=str(names.get("singular") or str(names.get("kind")).lower()),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                namespaced=namespaced,
                status_subresource=has_status,
                strategic_merge=False,
                allow_unconditional_update=False,
                track_generation=True,
                field_labels=scope_fields(not namespaced),
                to_storage=_convert_to(f"{group}/{storage}") if multi else None,
                from_storage=_convert_to(f"{group}/{version['name']}") if multi else None,
                strategy=Strategy(default, prepare, check),
                prune=pruner,
                crd_name=str((crd.get("metadata") or {}).get("name")),
                openapi_schema=schema,
                printer_columns=tuple(copy.deepcopy(c) for c in columns if isinstance(c, dict)),
            )
        )
    return out
