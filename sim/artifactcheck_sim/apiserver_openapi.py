"""OpenAPI v3 documents for what the fake API server serves, and built-in kinds' schemas.

Why: ``kubectl apply`` validates what it sends (by asking the server to, with
``fieldValidation=Strict``, when the server's OpenAPI says its PATCH operations take
that parameter), and ``kubectl explain`` reads the schemas.  A real server publishes
``/openapi/v3`` (an index of group-versions, each with a ``?hash=`` URL) and one
document per group-version: its paths, each operation tagged with
``x-kubernetes-group-version-kind`` and ``x-kubernetes-action``, and the schemas in
``components.schemas``.  This module builds those documents from the resource
registry: custom resources from their CRD's ``openAPIV3Schema``; built-in kinds from
the Kubernetes definitions shipped in the ``kubernetes-validate`` package (a test
dependency), converted to OpenAPI v3 references.  Without that package the built-in
kinds get a minimal schema (``apiVersion``, ``kind``, ``metadata``, anything else
preserved): ``kubectl`` still works, ``kubectl explain pods`` says little, and
unknown fields of built-in kinds are kept rather than dropped.

The same definitions let the server drop unknown fields of built-in kinds, as the
Go decoder of a real server does (:func:`builtin_pruner`).  OpenAPI v2
(``/openapi/v2``) is not served: kubectl 1.37 only falls back to it when v3 is absent.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.resources
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from artifactcheck_sim.apiserver_resources import Pruner, ResourceType
from artifactcheck_sim.apiserver_schema import Schema, prune

__all__ = [
    "OBJECT_META",
    "builtin_definitions",
    "builtin_pruner",
    "group_version_document",
    "index_document",
]

JsonObj = dict[str, Any]

_REF = "#/components/schemas/"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_API_VERSION_DOC = (
    "APIVersion defines the versioned schema of this representation of an object. Servers"
    " should convert recognized schemas to the latest internal value, and may reject"
    " unrecognized values."
)
_KIND_DOC = (
    "Kind is a string value representing the REST resource this object represents. Servers"
    " may infer this from the endpoint the client submits requests to. In CamelCase."
)
_METADATA_DOC = "Standard object's metadata."

#: Used when the Kubernetes definitions are not installed.
_MINIMAL_DEFINITIONS: dict[str, JsonObj] = {
    OBJECT_META: {
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "properties": {
            "name": {"type": "string", "description": "Name must be unique within a namespace."},
            "generateName": {"type": "string", "description": "Prefix of a generated name."},
            "namespace": {"type": "string", "description": "The namespace of the object."},
            "uid": {"type": "string", "description": "Unique in time and space."},
            "resourceVersion": {"type": "string", "description": "Internal version."},
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "ownerReferences": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
            "managedFields": {
                "type": "array",
                "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
    }
}


# --------------------------------------------------------------------------- built-in definitions


def _convert(node: Any) -> Any:
    """JSON Schema (``#/$defs``, ``type: [T, null]``) to OpenAPI v3 (``#/components``)."""
    if isinstance(node, list):
        return [_convert(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: JsonObj = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str):
            out[key] = _REF + value.rsplit("/", 1)[-1]
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out[key] = types[0] if len(types) == 1 else value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _convert(v) for k, v in value.items()}
        else:
            out[key] = _convert(value)
    if "$ref" in out and len(out) > 1:
        # As a real server writes it: siblings of a $ref go next to an allOf.
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


@functools.cache
def builtin_definitions() -> dict[str, JsonObj]:
    """The Kubernetes type definitions (OpenAPI v3 form), or {} when not installed."""
    try:
        root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
        versions = sorted(
            (p.name for p in root.iterdir() if re.match(r"^v[\d.]+-local$", p.name)),
            key=lambda n: tuple(int(x) for x in n[1:].split("-")[0].split(".")),
        )
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        return {}
    if not versions:
        return {}
    raw = json.loads((root / versions[-1] / "_definitions.json").read_text(encoding="utf-8"))
    defs = {name: _convert(schema) for name, schema in raw.get("$defs", {}).items()}
    int_or_string = defs.get("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
    if int_or_string is not None:
        defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = {
            "description": int_or_string.get("description", ""),
            "type": "string",
            "format": "int-or-string",
            "x-kubernetes-int-or-string": True,
        }
    return defs


@functools.cache
def _gvk_index() -> dict[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for name, schema in builtin_definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            index[(gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))] = name
    return index


def _resolve(schema: Schema) -> Schema:
    defs = builtin_definitions()
    for _ in range(8):
        ref = schema.get("$ref")
        if ref is None:
            parts = schema.get("allOf")
            if isinstance(parts, list) and len(parts) == 1 and "$ref" in parts[0]:
                ref = parts[0]["$ref"]
        if not isinstance(ref, str):
            return schema
        schema = defs.get(ref[len(_REF) :], {})
    return schema


def builtin_schema_name(resource: ResourceType) -> str | None:
    return _gvk_index().get((resource.group, resource.version, resource.kind))


def builtin_pruner(resource: ResourceType) -> Pruner | None:
    """Drops the fields a built-in kind does not have, as decoding into Go structs does."""
    name = builtin_schema_name(resource)
    if name is None:
        return None
    schema = builtin_definitions()[name]

    def pruner(obj: JsonObj) -> list[str]:
        return prune(obj, schema, resolve=_resolve, keep=("apiVersion", "kind"))

    return pruner


# --------------------------------------------------------------------------- documents


def _reversed_group(group: str) -> str:
    return ".".join(reversed(group.split("."))) if group else "core"


def _custom_schema(resource: ResourceType) -> JsonObj:
    schema = copy.deepcopy(resource.openapi_schema or {"type": "object"})
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": _API_VERSION_DOC}
    props["kind"] = {"type": "string", "description": _KIND_DOC}
    props["metadata"] = {"allOf": [{"$ref": _REF + OBJECT_META}], "description": _METADATA_DOC}
    return schema


def _minimal_schema(resource: ResourceType) -> JsonObj:
    return {
        "type": "object",
        "description": f"{resource.kind} (the full schema is not available in this fake server).",
        "properties": {
            "apiVersion": {"type": "string", "description": _API_VERSION_DOC},
            "kind": {"type": "string", "description": _KIND_DOC},
            "metadata": {"allOf": [{"$ref": _REF + OBJECT_META}], "description": _METADATA_DOC},
        },
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _schema_for(resource: ResourceType) -> tuple[str, str, JsonObj, JsonObj | None]:
    """Schema names and bodies of the kind and its list (body None: a built-in definition)."""
    gvk = [{"group": resource.group, "version": resource.version, "kind": resource.kind}]
    builtin = None if resource.crd_name else builtin_schema_name(resource)
    if builtin is not None:
        list_name = builtin + "List"
        defs = builtin_definitions()
        return builtin, list_name, defs[builtin], defs.get(list_name)
    if resource.crd_name:  # as the CRD OpenAPI builder names them: the group reversed
        prefix = f"{_reversed_group(resource.group)}.{resource.version}."
    else:
        prefix = f"io.k8s.api.{resource.group.split('.')[0] or 'core'}.{resource.version}."
    name = prefix + resource.kind
    body = _custom_schema(resource) if resource.crd_name else _minimal_schema(resource)
    body["x-kubernetes-group-version-kind"] = gvk
    list_body = {
        "type": "object",
        "description": f"{resource.list_kind} is a list of {resource.kind}",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": _API_VERSION_DOC},
            "items": {"type": "array", "items": {"$ref": _REF + name}},
            "kind": {"type": "string", "description": _KIND_DOC},
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "x-kubernetes-group-version-kind": [{**gvk[0], "kind": resource.list_kind}],
    }
    return name, prefix + resource.list_kind, body, list_body


def _refs(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            out.add(ref[len(_REF) :])
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def _closure(schemas: dict[str, JsonObj]) -> None:
    """Add every definition the schemas refer to (transitively)."""
    defs = builtin_definitions() or _MINIMAL_DEFINITIONS
    todo: set[str] = set()
    for schema in list(schemas.values()):
        _refs(schema, todo)
    while todo:
        name = todo.pop()
        if name in schemas:
            continue
        schema = defs.get(name) or _MINIMAL_DEFINITIONS.get(name) or {"type": "object"}
        schemas[name] = schema
        _refs(schema, todo)


def _param(name: str, where: str, description: str, kind: str = "string") -> JsonObj:
    param: JsonObj = {"name": name, "in": where, "description": description}
    param["schema"] = {"type": kind, "uniqueItems": True}
    if where == "path":
        param["required"] = True
    return param


_WRITE_PARAMS = (
    _param("dryRun", "query", "When present, modifications are not persisted (All)."),
    _param("fieldManager", "query", "A name associated with the actor making these changes."),
    _param(
        "fieldValidation",
        "query",
        "How the server handles unknown or duplicate fields: Ignore, Warn (the default) or Strict.",
    ),
)
_LIST_PARAMS = (
    _param("allowWatchBookmarks", "query", "Request BOOKMARK watch events.", "boolean"),
    _param("continue", "query", "The continue token of the previous page."),
    _param("fieldSelector", "query", "Restrict the returned objects by their fields."),
    _param("labelSelector", "query", "Restrict the returned objects by their labels."),
    _param("limit", "query", "Maximum number of responses for a list call.", "integer"),
    _param("resourceVersion", "query", "Where a watch starts; ignored for lists."),
    _param("sendInitialEvents", "query", "Start a watch with the current state.", "boolean"),
    _param("timeoutSeconds", "query", "Timeout for the list/watch call.", "integer"),
    _param("watch", "query", "Watch for changes instead of listing.", "boolean"),
)


def _content(ref: str) -> JsonObj:
    return {
        "application/json": {"schema": {"$ref": _REF + ref}},
        "application/yaml": {"schema": {"$ref": _REF + ref}},
    }


def _operation(
    resource: ResourceType,
    action: str,
    operation_id: str,
    description: str,
    response: str,
    *,
    params: Iterable[JsonObj] = (),
    body: JsonObj | None = None,
) -> JsonObj:
    op: JsonObj = {
        "description": description,
        "operationId": operation_id,
        "tags": [f"{_reversed_group(resource.group)}_{resource.version}"],
        "parameters": list(params),
        "responses": {"200": {"description": "OK", "content": _content(response)}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": resource.group,
            "version": resource.version,
            "kind": resource.kind,
        },
    }
    if body is not None:
        op["requestBody"] = body
    return op


_STATUS_REF = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_FORCE = _param("force", "query", "Force apply.", "boolean")


@dataclass(frozen=True)
class _Op:
    """One operation of a path: its HTTP method and ``x-kubernetes-action``, the verb
    its ``operationId`` starts with, what it answers (``object``, ``list``, ``status``)
    and what it takes (query parameters; a ``write`` or ``patch`` request body)."""

    method: str
    action: str
    verb: str
    description: str
    response: str
    params: tuple[JsonObj, ...] = ()
    body: str = ""


_COLLECTION_OPS = (
    _Op("get", "list", "list", "list or watch objects of kind {kind}", "list", _LIST_PARAMS),
    _Op("post", "post", "create", "create a {kind}", "object", _WRITE_PARAMS, "write"),
    _Op(
        "delete",
        "deletecollection",
        "deletecollection",
        "delete collection of {kind}",
        "status",
        _LIST_PARAMS,
    ),
)
_ITEM_OPS = (
    _Op("get", "get", "read", "read the specified {kind}", "object"),
    _Op("put", "put", "replace", "replace the specified {kind}", "object", _WRITE_PARAMS, "write"),
    _Op(
        "patch",
        "patch",
        "patch",
        "partially update the specified {kind}",
        "object",
        (*_WRITE_PARAMS, _FORCE),
        "patch",
    ),
    _Op("delete", "delete", "delete", "delete a {kind}", "status", _WRITE_PARAMS[:1]),
)
_STATUS_OPS = (
    _Op("get", "get", "read", "read status of the specified {kind}", "object"),
    _Op(
        "put",
        "put",
        "replace",
        "replace status of the specified {kind}",
        "object",
        _WRITE_PARAMS,
        "write",
    ),
    _Op(
        "patch",
        "patch",
        "patch",
        "partially update status of the specified {kind}",
        "object",
        _WRITE_PARAMS,
        "patch",
    ),
)


def _patch_body(resource: ResourceType) -> JsonObj:
    patch_types = ["application/json-patch+json", "application/merge-patch+json"]
    if resource.strategic_merge and builtin_schema_name(resource) is not None:
        patch_types.append("application/strategic-merge-patch+json")
    patch_types.append("application/apply-patch+yaml")
    patch = {"schema": {"$ref": _REF + "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}
    return {"content": {t: patch for t in patch_types}, "required": True}


def _paths(resource: ResourceType, name: str, list_name: str) -> dict[str, JsonObj]:
    """The paths of one resource, with the operations a real server documents."""
    base = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    scope = "/namespaces/{namespace}" if resource.namespaced else ""
    camel = re.sub(r"[^A-Za-z0-9]", "", resource.group.title()) or "Core"
    suffix = f"{camel}{resource.version.title()}{'Namespaced' if resource.namespaced else ''}"
    kind = resource.kind
    ns_param = [_param("namespace", "path", "object name and auth scope")]
    common = [_param("pretty", "query", "If 'true', then the output is pretty printed.")]
    name_param = [_param("name", "path", f"name of the {kind}")]
    responses = {"object": name, "list": list_name, "status": _STATUS_REF}
    bodies = {
        "write": {"content": _content(name), "required": True},
        "patch": _patch_body(resource),
    }

    def path(ops: Iterable[_Op], ident: str, params: list[JsonObj]) -> JsonObj:
        out: JsonObj = {}
        for op in ops:
            out[op.method] = _operation(
                resource,
                op.action,
                op.verb + ident,
                op.description.format(kind=kind),
                responses[op.response],
                params=op.params,
                body=bodies.get(op.body),
            )
        out["parameters"] = params
        return out

    collection = f"{base}{scope}/{resource.plural}"
    item = collection + "/{name}"
    scoped = ns_param if resource.namespaced else []
    paths = {
        collection: path(_COLLECTION_OPS, suffix + kind, scoped + common),
        item: path(_ITEM_OPS, suffix + kind, name_param + scoped + common),
    }
    if resource.status_subresource:
        paths[item + "/status"] = path(
            _STATUS_OPS, f"{suffix}{kind}Status", name_param + scoped + common
        )
    if resource.namespaced:
        every = f"{suffix.replace('Namespaced', '')}{kind}ForAllNamespaces"
        paths[f"{base}/{resource.plural}"] = path(_COLLECTION_OPS[:1], every, common)
    return paths


def group_version_document(
    resources: Iterable[ResourceType], group: str, version: str, server_version: str
) -> JsonObj:
    """The ``/openapi/v3/api[s]/<group>/<version>`` document."""
    schemas: dict[str, JsonObj] = {}
    paths: dict[str, JsonObj] = {}
    for resource in resources:
        if resource.group != group or resource.version != version:
            continue
        name, list_name, body, list_body = _schema_for(resource)
        schemas[name] = body
        if list_body is not None:
            schemas[list_name] = list_body
        paths.update(_paths(resource, name, list_name))
    for extra in (
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
    ):
        schemas.setdefault(
            extra,
            builtin_definitions().get(extra)
            or {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        )
    _closure(schemas)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version},
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def document_hash(text: str) -> str:
    """The ``?hash=`` of a document's URL, as a real server computes it (SHA-512, hex)."""
    return hashlib.sha512(text.encode()).hexdigest().upper()


def index_document(hashes: Mapping[str, str]) -> JsonObj:
    """``/openapi/v3``: each group-version's path (``api/v1``, ``apis/g/v``) and URL."""
    return {
        "paths": {
            path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
            for path, digest in sorted(hashes.items())
        }
    }
