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
from typing import Any

from artifactcheck.sim.apiserver_resources import Pruner, ResourceType
from artifactcheck.sim.apiserver_schema import Schema, prune

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


def _paths(resource: ResourceType, name: str, list_name: str) -> dict[str, JsonObj]:
    base = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    scope = "/namespaces/{namespace}" if resource.namespaced else ""
    camel = re.sub(r"[^A-Za-z0-9]", "", resource.group.title()) or "Core"
    suffix = f"{camel}{resource.version.title()}{'Namespaced' if resource.namespaced else ''}"
    kind = resource.kind
    ns_param = [_param("namespace", "path", "object name and auth scope")]
    common = [_param("pretty", "query", "If 'true', then the output is pretty printed.")]
    write_body = {"content": _content(name), "required": True}
    patch_types = ["application/json-patch+json", "application/merge-patch+json"]
    if resource.strategic_merge and builtin_schema_name(resource) is not None:
        patch_types.append("application/strategic-merge-patch+json")
    patch_types.append("application/apply-patch+yaml")
    patch_body = {
        "content": {
            t: {"schema": {"$ref": _REF + "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}
            for t in patch_types
        },
        "required": True,
    }
    collection = f"{base}{scope}/{resource.plural}"
    item = collection + "/{name}"
    name_param = [_param("name", "path", f"name of the {kind}")]
    paths: dict[str, JsonObj] = {
        collection: {
            "get": _operation(
                resource,
                "list",
                f"list{suffix}{kind}",
                f"list or watch objects of kind {kind}",
                list_name,
                params=_LIST_PARAMS,
            ),
            "post": _operation(
                resource,
                "post",
                f"create{suffix}{kind}",
                f"create a {kind}",
                name,
                params=_WRITE_PARAMS,
                body=write_body,
            ),
            "delete": _operation(
                resource,
                "deletecollection",
                f"deletecollection{suffix}{kind}",
                f"delete collection of {kind}",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                params=_LIST_PARAMS,
            ),
            "parameters": (ns_param if resource.namespaced else []) + common,
        },
        item: {
            "get": _operation(
                resource, "get", f"read{suffix}{kind}", f"read the specified {kind}", name
            ),
            "put": _operation(
                resource,
                "put",
                f"replace{suffix}{kind}",
                f"replace the specified {kind}",
                name,
                params=_WRITE_PARAMS,
                body=write_body,
            ),
            "patch": _operation(
                resource,
                "patch",
                f"patch{suffix}{kind}",
                f"partially update the specified {kind}",
                name,
                params=(*_WRITE_PARAMS, _param("force", "query", "Force apply.", "boolean")),
                body=patch_body,
            ),
            "delete": _operation(
                resource,
                "delete",
                f"delete{suffix}{kind}",
                f"delete a {kind}",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
                params=_WRITE_PARAMS[:1],
            ),
            "parameters": name_param + (ns_param if resource.namespaced else []) + common,
        },
    }
    if resource.status_subresource:
        paths[item + "/status"] = {
            "get": _operation(
                resource,
                "get",
                f"read{suffix}{kind}Status",
                f"read status of the specified {kind}",
                name,
            ),
            "put": _operation(
                resource,
                "put",
                f"replace{suffix}{kind}Status",
                f"replace status of the specified {kind}",
                name,
                params=_WRITE_PARAMS,
                body=write_body,
            ),
            "patch": _operation(
                resource,
                "patch",
                f"patch{suffix}{kind}Status",
                f"partially update status of the specified {kind}",
                name,
                params=_WRITE_PARAMS,
                body=patch_body,
            ),
            "parameters": name_param + (ns_param if resource.namespaced else []) + common,
        }
    if resource.namespaced:
        paths[f"{base}/{resource.plural}"] = {
            "get": _operation(
                resource,
                "list",
                f"list{suffix.replace('Namespaced', '')}{kind}ForAllNamespaces",
                f"list or watch objects of kind {kind}",
                list_name,
                params=_LIST_PARAMS,
            ),
            "parameters": common,
        }
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
