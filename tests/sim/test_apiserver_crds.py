"""CRDs, structural schemas, field validation, Tables and OpenAPI of the fake API server.

Through the official client (and plain HTTP for what it cannot send), the behaviour a
real server shows: a CRD makes its resource served and discoverable; the schema prunes,
defaults and validates custom objects (422 with field paths); the status subresource
separates spec and status writes; ``fieldValidation`` refuses or warns about unknown
fields; ``kubectl``'s Table media type gets server-side columns; ``/openapi/v3``
describes what is served.  tests/kubectl/ checks the same against a real kubectl.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from artifactcheck.control.crd import crd_manifest
from artifactcheck_sim.apiserver import FakeApiServer

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"
WIDGETS = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def widget_crd(**version_extra: Any) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                    "code": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                    "nested": {
                        "type": "object",
                        "default": {},
                        "properties": {"depth": {"type": "integer", "default": 3}},
                    },
                },
            },
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
        },
    }
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        **version_extra,
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": "Widget",
                "plural": PLURAL,
                "shortNames": ["wd"],
                "categories": ["all"],
            },
            "versions": [version],
        },
    }


def widget(name: str = "w", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 2, **spec},
    }


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as srv:
        yield srv


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[ApiClient]:
    with server.api_client() as api_client:
        yield api_client


@pytest.fixture
def custom(api: ApiClient, server: FakeApiServer) -> client.CustomObjectsApi:
    client.ApiextensionsV1Api(api).create_custom_resource_definition(widget_crd())
    return client.CustomObjectsApi(api)


def request(
    server: FakeApiServer,
    method: str,
    path: str,
    body: Any = None,
    *,
    accept: str = "application/json",
    content_type: str = "application/json",
) -> tuple[int, Any, http.client.HTTPMessage]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        headers = {"Accept": accept}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None, response.headers
    finally:
        conn.close()


def create_widget(custom: client.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = custom.create_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, body
    )
    return created


# ------------------------------------------------------------------------------ registration


def test_a_crd_is_served_discovered_and_gone_with_its_objects(
    api: ApiClient, server: FakeApiServer
) -> None:
    status, _, _ = request(server, "GET", WIDGETS)
    assert status == 404
    ext = client.ApiextensionsV1Api(api)
    crd = ext.create_custom_resource_definition(widget_crd())
    conditions = {c.type: c.status for c in crd.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd.spec.names.singular == "widget" and crd.spec.names.list_kind == "WidgetList"
    _, resources, _ = request(server, "GET", f"/apis/{GROUP}/{VERSION}")
    entry = {r["name"]: r for r in resources["resources"]}
    assert entry[PLURAL]["shortNames"] == ["wd"] and entry[PLURAL]["categories"] == ["all"]
    assert entry[PLURAL]["namespaced"] is True and f"{PLURAL}/status" in entry
    custom = client.CustomObjectsApi(api)
    create_widget(custom, widget())
    watch_status, _, _ = request(server, "GET", WIDGETS)
    assert watch_status == 200
    ext.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    assert request(server, "GET", WIDGETS)[0] == 404
    groups = [g["name"] for g in request(server, "GET", "/apis")[1]["groups"]]
    assert GROUP not in groups
    # Created again, it starts empty: the objects went with the CRD.
    ext.create_custom_resource_definition(widget_crd())
    assert custom.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)["items"] == []


def test_an_invalid_crd_is_refused(api: ApiClient) -> None:
    bad = widget_crd()
    bad["metadata"]["name"] = "wrong.example.com"
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["additionalProperties"] = False
    with pytest.raises(ApiException) as info:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(bad)
    assert info.value.status == 422
    fields = {c["field"] for c in json.loads(info.value.body)["details"]["causes"]}
    assert "metadata.name" in fields
    assert "spec.versions[0].schema.openAPIV3Schema.additionalProperties" in fields


def test_the_project_crd_replaces_the_lenient_built_in_artifactcheck(server: FakeApiServer) -> None:
    body = {
        "apiVersion": "artifactcheck.io/v1alpha1",
        "kind": "ArtifactCheck",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"kubernetes": {"selector": "app=web", "port": 80}, "no_such_field": 1},
    }
    assert "no_such_field" in server.create(body)["spec"]  # no CRD yet: anything goes
    server.delete("artifactcheck.io/v1alpha1", "ArtifactCheck", "default", "web")
    server.create(crd_manifest())
    stored = server.create(body)
    assert "no_such_field" not in stored["spec"]
    assert stored["spec"]["interval"] == 60  # a CheckSpec default, from the schema


# ------------------------------------------------------------------------------ schema


def test_unknown_fields_are_pruned_and_defaults_applied(custom: client.CustomObjectsApi) -> None:
    created = create_widget(
        custom, widget(bogus=1, free={"anything": {"goes": True}}, labels={"a": "b"})
    )
    spec = created["spec"]
    assert "bogus" not in spec
    assert spec["free"] == {"anything": {"goes": True}}  # x-kubernetes-preserve-unknown-fields
    assert spec["labels"] == {"a": "b"}
    assert spec["color"] == "red"
    assert spec["nested"] == {"depth": 3}  # the default object, itself defaulted
    assert "status" not in created  # the status subresource resets it on create


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"size": "two"},
            "spec.size",
            'Invalid value: "string": spec.size in body must be of type integer: "string"',
        ),
        ({"size": 0}, "spec.size", "spec.size in body should be greater than or equal to 1"),
        ({"size": 11}, "spec.size", "spec.size in body should be less than or equal to 10"),
        (
            {"color": "green"},
            "spec.color",
            'Unsupported value: "green": supported values: "red", "blue"',
        ),
        ({"code": "ABC"}, "spec.code", "spec.code in body should match '^[a-z]+$'"),
        ({"code": "abcdefg"}, "spec.code", "Too long: may not be more than 5 bytes"),
        ({"tags": ["a", "b", "c"]}, "spec.tags", "Too many: 3: must have at most 2 items"),
        ({"labels": {"a": 1}}, "spec.labels.a", "must be of type string"),
        ({"size": None}, "spec.size", 'must be of type integer: "null"'),
    ],
)
def test_invalid_values_are_422_with_field_paths(
    custom: client.CustomObjectsApi, spec: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ApiException) as info:
        create_widget(custom, widget(**spec))
    assert info.value.status == 422
    status = json.loads(info.value.body)
    assert status["reason"] == "Invalid" and status["details"]["kind"] == "Widget"
    causes = {c["field"]: c["message"] for c in status["details"]["causes"]}
    assert message in causes[field], causes
    assert status["message"].startswith(f'Widget.{GROUP} "w" is invalid: {field}: ')


def test_required_fields(custom: client.CustomObjectsApi) -> None:
    body = widget()
    del body["spec"]["size"]
    with pytest.raises(ApiException) as info:
        create_widget(custom, body)
    cause = json.loads(info.value.body)["details"]["causes"][0]
    assert cause == {
        "reason": "FieldValueRequired",
        "message": "Required value",
        "field": "spec.size",
    }


def test_status_subresource_separates_spec_and_status(custom: client.CustomObjectsApi) -> None:
    create_widget(custom, widget())
    patched = custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "w", {"spec": {"size": 9}, "status": {"ready": True}}
    )
    assert patched["spec"]["size"] == 2 and patched["status"] == {"ready": True}
    assert patched["metadata"]["generation"] == 1
    patched = custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "w", {"spec": {"size": 3}, "status": {"ready": False}}
    )
    assert patched["spec"]["size"] == 3 and patched["status"] == {"ready": True}
    assert patched["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as info:  # the status is validated too
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", PLURAL, "w", {"status": {"ready": "yes"}}
        )
    assert info.value.status == 422


def test_field_validation_strict_refuses_and_warn_warns(
    custom: client.CustomObjectsApi, server: FakeApiServer
) -> None:
    status, body, _ = request(
        server, "POST", WIDGETS + "?fieldValidation=Strict", widget("s", bogus=1)
    )
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (
        'Widget in version "v1" cannot be handled as a Widget: strict decoding error:'
        ' unknown field "spec.bogus"'
    )
    status, body, headers = request(server, "POST", WIDGETS, widget("w", bogus=1))
    assert status == 201 and "bogus" not in body["spec"]
    assert headers.get_all("Warning") == ['299 - "unknown field \\"spec.bogus\\""']
    status, _, headers = request(
        server, "POST", WIDGETS + "?fieldValidation=Ignore", widget("i", bogus=1)
    )
    assert status == 201 and headers.get_all("Warning") is None
    status, _, _ = request(
        server,
        "PATCH",
        WIDGETS + "/w?fieldValidation=Strict",
        {"spec": {"other": 1}},
        content_type="application/merge-patch+json",
    )
    assert status == 400


def test_built_in_kinds_drop_unknown_fields(server: FakeApiServer) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "imagePolcy": "Always"}]},
    }
    status, body, _ = request(
        server, "POST", "/api/v1/namespaces/default/pods?fieldValidation=Strict", pod
    )
    assert status == 400 and 'unknown field "spec.containers[0].imagePolcy"' in body["message"]
    created = server.create(pod)
    assert "imagePolcy" not in created["spec"]["containers"][0]


# ------------------------------------------------------------------------------ tables


def test_tables_have_the_printer_columns(
    custom: client.CustomObjectsApi, server: FakeApiServer
) -> None:
    create_widget(custom, widget(size=4))
    status, table, _ = request(server, "GET", WIDGETS, accept=TABLE)
    assert status == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Color", "Age"]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 1, 0]
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["w", 4, "red"] and cells[3].endswith("s")
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["rows"][0]["object"]["metadata"]["namespace"] == "default"
    _, one, _ = request(server, "GET", WIDGETS + "/w?includeObject=None", accept=TABLE)
    assert one["kind"] == "Table" and "object" not in one["rows"][0]
    # Without the Table media type: the plain list, as for every other client.
    assert request(server, "GET", WIDGETS)[1]["kind"] == "WidgetList"


def test_pod_table(server: FakeApiServer) -> None:
    server.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1"},
        }
    )
    _, table, _ = request(server, "GET", "/api/v1/namespaces/default/pods", accept=TABLE)
    names = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0]
    assert names == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:4] == ["p", "0/1", "Pending", "0"]
    assert table["rows"][0]["cells"][6] == "n1"


# ------------------------------------------------------------------------------ openapi


def test_openapi_v3_describes_what_is_served(
    custom: client.CustomObjectsApi, server: FakeApiServer
) -> None:
    _, index, _ = request(server, "GET", "/openapi/v3")
    url = index["paths"][f"apis/{GROUP}/{VERSION}"]["serverRelativeURL"]
    assert "?hash=" in url and "api/v1" in index["paths"]
    _, doc, _ = request(server, "GET", url)
    schema = doc["components"]["schemas"][f"com.example.{VERSION}.Widget"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": GROUP, "version": VERSION, "kind": "Widget"}
    ]
    assert schema["properties"]["spec"]["properties"]["size"]["maximum"] == 10
    patch = doc["paths"][f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}/{{name}}"][
        "patch"
    ]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    # The hash changes with the document: a new CRD version is a new URL for caches.
    crd = widget_crd()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "changed"
    current = server.get(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", None, crd["metadata"]["name"]
    )
    assert current is not None
    crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    server.update(crd)
    _, index2, _ = request(server, "GET", "/openapi/v3")
    assert index2["paths"][f"apis/{GROUP}/{VERSION}"]["serverRelativeURL"] != url
