"""The manifests in ``k8s/`` are valid, least-privilege, and in step with the code.

No real kube-apiserver runs here, so what ``kubectl apply`` would check is checked
offline: built-in kinds against the Kubernetes OpenAPI schemas bundled with
kubernetes-validate (strict: unknown fields are errors), the CRD against the
structural-schema rules the API server enforces, and the example ArtifactCheck both
against the CRD's schema and against :class:`CheckSpec` (the CRD says what the server
accepts, the model what the controller accepts; the two must agree).

RBAC is checked twice: statically (no delete, no secrets, no wildcards, nodes only in
the opt-in cordon role) and against the code. ``test_rbac_covers_code`` runs the scanner
of tests/tools/rbac_scan.py: it maps each call of the official ``kubernetes`` client to
the (API group, resource, verb) it needs and fails naming the method and the missing
rule, so a forgotten permission shows up here and not as a 403 in production; and it
fails on a grant no call needs.
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate import utils as kv_utils
from pydantic import create_model
from tools import rbac_scan
from tools.rbac_scan import SERVICE_ACCOUNT

from artifactcheck.control import crd
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import CheckSpec, HttpSettings, camel_name, load_spec
from artifactcheck.model.values import Severity, Verdict
from artifactcheck.tenancy.admission import CONTROLLER_REFUSED_FIELDS

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
PACKAGE = REPO / "artifactcheck"

#: Kubernetes versions validated against: the newest schemas bundled with
#: kubernetes-validate, and 1.30, the oldest minor we promise to install on.
KUBE_VERSIONS = ("1.30", kv_utils.major_minor(kv_utils.latest_version()))

#: Kinds with no upstream schema: our own CRD's kind (checked against crd.yaml and
#: CheckSpec below) and kustomize's build file (not an API object).
NON_BUILTIN_KINDS = {
    ("artifactcheck.io/v1alpha1", "ArtifactCheck"),
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
}

#: Applied only on purpose, never by ``kubectl apply -k k8s/``.
OPT_IN_FILES = {"rbac-node-cordon.yaml"}
FORBIDDEN_VERBS = {"delete", "deletecollection", "*", "escalate", "bind", "impersonate"}
EXPECTED_VERDICTS = [
    "consistent",
    "drift",
    "signal-conflict",
    "cdn-missing",
    "cdn-mismatch",
    "mismatch",
    "unreachable",
    "inconclusive",
]


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Doc:
    """One YAML document of one file in ``k8s/``."""

    file: str
    index: int
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind")) if isinstance(self.body, dict) else "?"

    @property
    def name(self) -> str:
        meta = self.body.get("metadata") if isinstance(self.body, dict) else None
        return str(meta.get("name")) if isinstance(meta, dict) else "?"

    def __str__(self) -> str:
        return f"{self.file}#{self.index} {self.kind}/{self.name}"


def _yaml_files() -> list[Path]:
    return sorted(K8S.glob("*.yaml")) + sorted(K8S.glob("*.yml"))


@cache
def _all_docs() -> tuple[Doc, ...]:
    docs = []
    for path in _yaml_files():
        for i, body in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            if body is not None:
                docs.append(Doc(path.name, i, body))
    return tuple(docs)


def _docs(kind: str | None = None, file: str | None = None) -> list[Doc]:
    return [
        d
        for d in _all_docs()
        if (kind is None or d.kind == kind) and (file is None or d.file == file)
    ]


def _one(kind: str, file: str | None = None, name: str | None = None) -> dict[str, Any]:
    found = [d for d in _docs(kind, file) if name is None or d.name == name]
    assert len(found) == 1, f"expected one {kind} {name or ''} in {file or 'k8s/'}: {found}"
    return found[0].body


def _builtin_docs() -> list[Doc]:
    return [d for d in _all_docs() if (d.body.get("apiVersion"), d.kind) not in NON_BUILTIN_KINDS]


def test_every_document_is_an_api_object() -> None:
    """A stray list or scalar document would be silently skipped by kubectl."""
    assert _yaml_files(), "k8s/ has no manifests"
    for doc in _all_docs():
        assert isinstance(doc.body, dict), doc
        assert doc.body.get("apiVersion") and doc.body.get("kind"), doc
        if doc.kind != "Kustomization":
            assert doc.body.get("metadata", {}).get("name"), f"{doc}: no metadata.name"


def test_expected_files_are_present() -> None:
    names = {p.name for p in K8S.iterdir()}
    for required in (
        "namespace.yaml",
        "crd.yaml",
        "serviceaccount.yaml",
        "rbac.yaml",
        "rbac-node-cordon.yaml",
        "deployment.yaml",
        "service.yaml",
        "example-artifactcheck.yaml",
        "example-web-deployment.yaml",
        "kustomization.yaml",
        "README.md",
    ):
        assert required in names, f"k8s/{required} is missing"


# ------------------------------------------------------ built-in kinds, offline schemas


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("doc", _builtin_docs(), ids=str)
def test_builtin_kinds_validate_strictly(doc: Doc, version: str) -> None:
    """Every built-in object (the CRD included) passes the upstream schema, strictly."""
    try:
        kubernetes_validate.validate(copy.deepcopy(doc.body), version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{doc} is invalid for Kubernetes {version}: {where}: {exc.message}")
    except kubernetes_validate.SchemaNotFoundError as exc:
        pytest.fail(f"{doc}: {exc.message}; a custom kind must be listed in NON_BUILTIN_KINDS")


@pytest.mark.parametrize(
    "bad",
    [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"prot": 1}},
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "xs.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"kind": "X", "plural": "xs"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        # JSON Schema 2020-12 style; OpenAPI v3.0 wants a boolean here.
                        "schema": {"openAPIV3Schema": {"type": "number", "exclusiveMinimum": 0}},
                    }
                ],
            },
        },
    ],
    ids=["unknown-field", "numeric-exclusiveMinimum"],
)
def test_validator_is_not_vacuous(bad: dict[str, Any]) -> None:
    """The offline validator does reject what the API server would reject."""
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE_VERSIONS[-1], strict=True)


# ------------------------------------------------------------------------------ the CRD


def test_release_acceptance_crd_yaml_is_up_to_date() -> None:
    """k8s/crd-releaseacceptance.yaml is what the generator prints for it."""
    out = subprocess.run(
        [sys.executable, "-m", "artifactcheck.control.crd", "releaseacceptance"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out == (K8S / "crd-releaseacceptance.yaml").read_text(encoding="utf-8"), (
        "run `python -m artifactcheck.control.crd releaseacceptance > "
        "k8s/crd-releaseacceptance.yaml` and commit it"
    )
    assert yaml.safe_load(out) == crd.acceptance_crd_manifest()


def test_crd_yaml_is_up_to_date() -> None:
    """k8s/crd.yaml is exactly what ``python -m artifactcheck.control.crd`` prints."""
    out = subprocess.run(
        [sys.executable, "-m", "artifactcheck.control.crd"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    committed = (K8S / "crd.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(out) == crd.crd_manifest()
    assert committed == out, (
        "k8s/crd.yaml is out of date with CheckSpec: run "
        "`python -m artifactcheck.control.crd > k8s/crd.yaml` and commit it"
    )


def test_crd_identity() -> None:
    body = _one("CustomResourceDefinition", "crd.yaml")
    spec = body["spec"]
    assert body["metadata"]["name"] == "artifactchecks.artifactcheck.io"
    assert spec["group"] == "artifactcheck.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "ArtifactCheck"
    assert spec["names"]["plural"] == "artifactchecks"
    assert spec["names"]["singular"] == "artifactcheck"
    assert spec["names"]["shortNames"] == ["ac"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1"
    assert version["served"] is True and version["storage"] is True
    assert version["subresources"] == {"status": {}}


def _crd_schema() -> dict[str, Any]:
    body = _one("CustomResourceDefinition", "crd.yaml")
    schema: dict[str, Any] = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


_SCHEMA_TYPES = {"object", "array", "string", "number", "integer", "boolean"}
_NOT_STRUCTURAL = {
    "$ref",
    "$defs",
    "definitions",
    "$schema",
    "id",
    "title",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "const",
    "prefixItems",
}


def _structural_problems(node: Mapping[str, Any], path: str) -> Iterator[str]:
    """Rules of a structural schema, as the API server checks them (and a few of ours)."""
    for key in sorted(_NOT_STRUCTURAL & set(node)):
        yield f"{path}: {key!r} is not allowed in a structural schema"
    kind = node.get("type")
    escape = node.get("x-kubernetes-int-or-string") or node.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    if kind not in _SCHEMA_TYPES and not escape:
        yield f"{path}: every node needs a type, got {kind!r}"
    for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node and (node[bound] is not True or plain not in node):
            yield f"{path}: OpenAPI v3.0 {bound} is a boolean next to {plain}"
    if node.get("uniqueItems"):
        yield f"{path}: uniqueItems is forbidden (use x-kubernetes-list-type: set)"
    if node.get("nullable") and "default" in node and node["default"] is None:
        yield f"{path}: default null is pruned; leave the default out"
    if "enum" in node:
        python: dict[str, type | tuple[type, ...]] = {
            "string": str,
            "integer": int,
            "number": (int, float),
            "boolean": bool,
        }
        want = python.get(str(kind))
        if want and not all(isinstance(v, want) for v in node["enum"]):
            yield f"{path}: enum values do not match type {kind}"
    extra = node.get("additionalProperties")
    if "properties" in node and extra is not None:
        yield f"{path}: properties and additionalProperties are mutually exclusive"
    if extra is False:
        yield f"{path}: additionalProperties: false is forbidden in a CRD"
    if kind == "array" and not isinstance(node.get("items"), Mapping):
        yield f"{path}: an array needs items"
    if node.get("x-kubernetes-list-type") == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        required = node.get("items", {}).get("required", [])
        if not keys or not set(keys) <= set(required):
            yield f"{path}: list-type map needs list-map-keys that items require"
    for name, sub in node.get("properties", {}).items():
        yield from _structural_problems(sub, f"{path}.{name}")
    if isinstance(node.get("items"), Mapping):
        yield from _structural_problems(node["items"], f"{path}[]")
    if isinstance(extra, Mapping):
        yield from _structural_problems(extra, f"{path}.*")


def test_crd_schema_is_structural() -> None:
    schema = _crd_schema()
    assert list(_structural_problems(schema, "openAPIV3Schema")) == []
    # At the root, only name/generateName of metadata may be constrained.
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["required"] == ["spec"]


def test_structural_checker_catches_pydantic_output() -> None:
    """The checker above is not vacuous: raw pydantic JSON Schema fails it."""
    problems = list(_structural_problems(CheckSpec.model_json_schema(), "spec"))
    assert any("'$ref'" in p for p in problems)
    assert any("anyOf" in p for p in problems)
    assert any("exclusiveMinimum" in p for p in problems)


def _schema_of(annotation: Any) -> dict[str, Any]:
    model = create_model("M", field=(annotation, ...))
    return crd.structural_schema(model.model_json_schema())["properties"]["field"]


def test_generator_maps_or_refuses_what_pydantic_can_express() -> None:
    """New CheckSpec field types either map to a structural schema or fail generation."""
    assert _schema_of(dict[str, Any]) == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert _schema_of(set[str]) == {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "set",
    }
    assert _schema_of(Literal["only"]) == {"type": "string", "enum": ["only"]}
    assert _schema_of(int | None) == {"type": "integer", "nullable": True}
    with pytest.raises(ValueError, match=r"spec\.field: anyOf"):
        _schema_of(int | str)
    with pytest.raises(ValueError, match=r"spec\.field"):
        _schema_of(tuple[int, str])


def test_crd_spec_mirrors_checkspec() -> None:
    """Every CheckSpec field the controller honours is in the CRD, with its description,
    default and bounds; the CLI-only ones (files, environment, Docker, bare URLs) are not."""
    spec = _crd_schema()["properties"]["spec"]
    top_refused = {p[0] for p in CONTROLLER_REFUSED_FIELDS if len(p) == 1}
    # camelCase, as Kubernetes API conventions want; the model's fields are snake_case
    # the retired 0.2 fields stay in the schema, unpruned, so the controller refuses them
    retired = {"releaseManifest", "releaseConfigMaps"}
    assert (
        set(spec["properties"])
        == {camel_name(f) for f in set(CheckSpec.model_fields) - top_refused} | retired
    )
    assert {"release", "versionEndpoint"} <= set(spec["properties"])
    assert set(spec["properties"]["release"]["properties"]) == {"manifests", "configMaps"}
    assert not any("_" in name for name in spec["properties"])
    http_refused = {p[1] for p in CONTROLLER_REFUSED_FIELDS if p[0] == "http"}
    assert http_refused == {"header_files", "header_env", "ca_bundle", "transport"}
    http_fields = set(spec["properties"]["http"]["properties"])
    assert http_fields == {camel_name(f) for f in set(HttpSettings.model_fields) - http_refused}
    assert {"credentials", "maxConnections", "verifyTLS"} <= http_fields
    assert "gateFailOpen" in spec["properties"]["policy"]["properties"]
    policy = spec["properties"]["policy"]["properties"]
    assert policy["mode"]["enum"] == ["report", "flag", "quarantine"]
    assert policy["mode"]["default"] == "flag"
    assert policy["confirmations"] == {
        "type": "integer",
        "description": "Consecutive bad verdicts before acting.",
        "default": 2,
        "minimum": 1,
        "maximum": 100,
    }
    interval = spec["properties"]["interval"]
    assert (interval["minimum"], interval["exclusiveMinimum"]) == (0, True)
    kube = spec["properties"]["kubernetes"]
    assert kube["nullable"] is True and kube["type"] == "object"
    assert kube["description"] == CheckSpec.model_fields["kubernetes"].description
    assert "default" not in kube["properties"]["namespace"], "no server-side namespace"
    headers = spec["properties"]["http"]["properties"]["headers"]
    assert headers["additionalProperties"] == {"type": "string"}


def test_crd_status_schema() -> None:
    status = _crd_schema()["properties"]["status"]["properties"]
    assert status["observedGeneration"]["type"] == "integer"
    assert status["lastCheckTime"] == {
        "type": "string",
        "description": status["lastCheckTime"]["description"],
        "format": "date-time",
    }
    counts = status["counts"]["properties"]
    assert list(counts) == EXPECTED_VERDICTS == [v.value for v in Verdict]
    assert all(c["type"] == "integer" for c in counts.values())
    assert status["quarantined"]["type"] == "integer"
    finding = status["findings"]["items"]["properties"]
    assert set(finding) == {"kind", "severity", "instance", "message"}
    assert finding["severity"]["enum"] == [s.value for s in Severity]
    conditions = status["conditions"]
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert set(conditions["items"]["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }


def _schema_at(schema: Mapping[str, Any], json_path: str) -> Mapping[str, Any] | None:
    node: Mapping[str, Any] | None = schema
    for part in json_path.lstrip(".").split("."):
        node = (node or {}).get("properties", {}).get(part)
    return node


def test_printer_columns_point_at_status_fields() -> None:
    """A column whose jsonPath matches nothing shows <none> forever; catch typos here."""
    version = _one("CustomResourceDefinition", "crd.yaml")["spec"]["versions"][0]
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert list(columns) == [
        "Consistent",
        "Mismatch",
        "Inconclusive",
        "Quarantined",
        "Held",
        "Last Check",
        "Age",
    ]
    assert columns["Age"]["jsonPath"] == ".metadata.creationTimestamp"
    schema = _crd_schema()
    for name, column in columns.items():
        if name == "Age":
            continue
        node = _schema_at(schema, column["jsonPath"])
        assert node is not None, f"column {name}: {column['jsonPath']} is not in the schema"
        if column["type"] == "integer":
            assert node["type"] == "integer", name
        else:
            assert column["type"] == "date" and node.get("format") == "date-time", name


# ------------------------------------------------ the example against CRD and CheckSpec


def _openapi_to_jsonschema(node: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAPI v3.0 (Kubernetes flavour) to JSON Schema draft 4, as the server judges.

    Draft 4 shares v3.0's boolean ``exclusiveMinimum``; ``nullable`` becomes a null type;
    unknown fields are rejected, as server-side strict field validation does.
    """
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _openapi_to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _openapi_to_jsonschema(value)
        elif key.startswith("x-kubernetes-") or key in ("nullable", "default", "format"):
            continue
        else:
            out[key] = copy.deepcopy(value)
    if node.get("nullable"):
        out["type"] = [node["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if (
        node.get("type") == "object"
        and "properties" in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _crd_errors(obj: Any, schema: Mapping[str, Any] | None = None) -> list[str]:
    validator = jsonschema.Draft4Validator(_openapi_to_jsonschema(schema or _crd_schema()))
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def _example() -> dict[str, Any]:
    return _one("ArtifactCheck", "example-artifactcheck.yaml")


def test_example_artifactcheck_matches_crd() -> None:
    assert _crd_errors(_example()) == []


def test_example_artifactcheck_is_a_checkspec() -> None:
    spec = load_spec(_example()["spec"], origin="example-artifactcheck.yaml")
    assert spec.kubernetes is not None
    assert spec.kubernetes.namespace == _example()["metadata"]["namespace"] == "shop"
    assert spec.kubernetes.selector
    # no release server, no CDN: the example works on any cluster
    assert spec.release is not None and spec.release.kind_name == "config_maps"
    assert spec.cdn is None
    assert spec.policy.mode == "quarantine"
    assert spec.policy.confirmations == 2


def test_example_selects_the_example_web_pods() -> None:
    """The two examples fit: selector, version label and readiness gate line up."""
    spec = load_spec(_example()["spec"])
    assert spec.kubernetes is not None
    web = _one("Deployment", "example-web-deployment.yaml", "web")
    assert web["metadata"]["namespace"] == spec.kubernetes.namespace
    template = web["spec"]["template"]
    labels = template["metadata"]["labels"]
    for term in spec.kubernetes.selector.split(","):
        key, sep, value = re.split(r"(==|=)", term.strip(), maxsplit=1)
        assert sep and labels.get(key) == value, f"selector term {term!r} misses the pods"
    assert spec.kubernetes.version_label in labels
    gates = [g["conditionType"] for g in template["spec"].get("readinessGates", [])]
    assert gates == [spec.policy.condition_type] == ["artifactcheck.io/content-verified"]


# ------------------------------------------------- the example workload serves a build


EXAMPLE_GENERATOR = K8S / "examples" / "generate.py"


def _example_objects() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d.kind, d.name): d.body for d in _docs(file="example-web-deployment.yaml")}


def test_example_web_deployment_is_what_the_generator_writes() -> None:
    """The example's 140 kB of build is never hand-edited: it is regenerated, and a
    committed file that differs (stale build, hand edit) fails here."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLE_GENERATOR), "--stdout"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    committed = (K8S / "example-web-deployment.yaml").read_text(encoding="utf-8")
    assert committed == out, (
        "k8s/example-web-deployment.yaml is out of date: run "
        "`python k8s/examples/generate.py` and commit it"
    )


def _served_files() -> dict[str, bytes]:
    """What nginx serves from the example: the site ConfigMap through the volume items."""
    import base64

    objects = _example_objects()
    pod = objects[("Deployment", "web")]["spec"]["template"]["spec"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "site"]
    assert mount["mountPath"] == "/usr/share/nginx/html"
    (volume,) = [v for v in pod["volumes"] if v["name"] == "site"]
    site = objects[("ConfigMap", volume["configMap"]["name"])]
    by_key = {k: v.encode("utf-8") for k, v in (site.get("data") or {}).items()}
    by_key |= {k: base64.b64decode(v) for k, v in (site.get("binaryData") or {}).items()}
    items = volume["configMap"]["items"]
    assert sorted(i["key"] for i in items) == sorted(by_key), "every key mounted, once"
    for key in by_key:
        assert re.fullmatch(r"[-._a-zA-Z0-9]+", key), f"{key!r} is no ConfigMap key"
    return {i["path"]: by_key[i["key"]] for i in items}


def test_example_serves_the_demo_build_byte_for_byte() -> None:
    build = REPO / "sim" / "artifactcheck_sim" / "builds" / "vite-r2"
    files = {
        p.relative_to(build).as_posix(): p.read_bytes() for p in build.rglob("*") if p.is_file()
    }
    served = _served_files()
    assert sorted(served) == sorted(files)
    for path, data in files.items():
        assert served[path] == data, f"{path}: the ConfigMap does not hold the built bytes"


def test_example_release_manifest_vouches_for_what_is_served() -> None:
    """The release ConfigMap is for the version the pods report, hashes every served
    file, and is what the example check's release.configMaps selector finds."""
    import hashlib

    from artifactcheck.manifests import parse_manifest
    from artifactcheck.manifests.limits import ManifestLimits

    objects = _example_objects()
    releases = [
        body
        for (kind, _), body in objects.items()
        if kind == "ConfigMap"
        and body["metadata"]["labels"].get("artifactcheck.io/release-manifests") == "true"
    ]
    (release,) = releases
    labels = release["metadata"]["labels"]
    template = objects[("Deployment", "web")]["spec"]["template"]
    version = template["metadata"]["labels"]["app.kubernetes.io/version"]
    assert labels["artifactcheck.io/version"] == version == "1.4.2"
    manifest = parse_manifest(
        release["data"]["manifest.json"].encode(), limits=ManifestLimits(), source="example"
    )
    assert manifest.version == version
    served = _served_files()
    assert sorted(manifest.files) == sorted(served)
    for path, entry in manifest.files.items():
        assert entry.hashes.get("sha256") == hashlib.sha256(served[path]).hexdigest(), path
    # the check selects this ConfigMap (and its pods), in its own namespace
    spec = load_spec(_example()["spec"])
    assert spec.release is not None and spec.release.config_maps is not None
    assert spec.kubernetes is not None
    assert release["metadata"]["namespace"] == spec.kubernetes.namespace
    for term in spec.release.config_maps.selector.split(","):
        key, _, value = term.partition("=")
        assert labels.get(key) == value, f"release selector term {term!r} misses it"
    # nginx answers /version with the version the label reports
    conf_name = next(
        v["configMap"]["name"] for v in template["spec"]["volumes"] if v["name"] == "nginx-conf"
    )
    conf = objects[("ConfigMap", conf_name)]["data"]["default.conf"]
    assert "location = /version" in conf and f'{{"version": "{version}"}}' in conf
    assert spec.version_endpoint is not None and spec.version_endpoint.path == "/version"


def _controller_fields(dumped: dict[str, Any]) -> dict[str, Any]:
    """A model dump (by alias: camelCase) without the CLI-only fields the CRD does not offer."""
    out = copy.deepcopy(dumped)
    for path in CONTROLLER_REFUSED_FIELDS:
        node = out
        for name in path[:-1]:
            node = node[camel_name(name)] or {}  # a section left out (release: null)
        node.pop(camel_name(path[-1]), None)
    return out


def _full_spec() -> dict[str, Any]:
    """Every section of CheckSpec filled, as the model itself dumps it."""
    spec = CheckSpec.model_validate(
        {
            "kubernetes": {"namespace": "shop", "selector": "app=web"},
            "version_endpoint": {"path": "/version", "pointer": "/version"},
            "sampling": {"instances": 5, "seed": 1},
            "http": {"headers": {"X-A": "b"}, "credentials": ["cdn-token"]},
            "policy": {"mode": "quarantine", "cordon_nodes": True},
        }
    )
    return _controller_fields(spec.model_dump(mode="json", by_alias=True))


@pytest.mark.parametrize(
    "spec",
    [
        _controller_fields(CheckSpec.model_validate({}).model_dump(mode="json", by_alias=True)),
        _full_spec(),
        {},
    ],
    ids=["defaults", "full", "empty"],
)
def test_what_the_model_dumps_the_crd_accepts(spec: dict[str, Any]) -> None:
    """Any spec the model produces, CLI-only fields left out, passes the CRD."""
    assert _crd_errors(spec, _crd_schema()["properties"]["spec"]) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"targets": [{"url": "http://10.0.0.7:8080"}]},
        {"docker": {"labels": ["app=web"]}},
        {"release": {"image": {"reference": "web:{version}"}}},
        {"release": {"image": {"reference": "web", "path": "/srv"}}},
        {"release": {"image": {"reference": "web", "registry": {"auth": "/root/.docker/c"}}}},
        {"http": {"headerFiles": {"X-Leak": "/var/run/secrets/kubernetes.io/token"}}},
        {"http": {"header_files": {"X-Leak": "/var/run/secrets/kubernetes.io/token"}}},
        {"http": {"headerEnv": {"X-Leak": "HOME"}}},
        {"http": {"caBundle": "/etc/shadow"}},
        {"http": {"transport": "http1"}},
    ],
    ids=repr,
)
def test_crd_refuses_what_only_the_cli_honours(bad: dict[str, Any]) -> None:
    """Strict field validation refuses files, environment, Docker and bare URLs; the
    model still takes them (the CLI honours them for a user's own files)."""
    errors = _crd_errors(bad, _crd_schema()["properties"]["spec"])
    assert any("Additional properties are not allowed" in e for e in errors), errors
    load_spec(bad)


@pytest.mark.parametrize(
    "bad",
    [
        {"policy": {"mode": "nuke"}},
        {"policy": {"confirmations": 0}},
        {"policy": {"maxQuarantineFraction": 1.5}},
        {"interval": 0},
        {"http": {"maxPerHost": 0}},
        {"http": {"headers": {"X-A": 1}}},
        {"kubernetes": {"port": 70000}},
        {"kubernetes": {"scheme": "ftp"}},
        {"manifestFormat": "rollup"},
        {"targets": [{"version": "1"}]},
        {"polciy": {}},
        {"policy": {"dryRn": True}},
    ],
    ids=repr,
)
def test_crd_and_model_reject_the_same_mistakes(bad: dict[str, Any]) -> None:
    """kubectl apply refuses what the controller would refuse, with the field named."""
    assert _crd_errors(bad, _crd_schema()["properties"]["spec"]), "CRD accepted it"
    with pytest.raises(ConfigError):
        load_spec(bad)


def test_crd_defaults_are_valid_and_match_the_model() -> None:
    """A server-side default must pass its own schema and equal the model's default."""
    spec = _crd_schema()["properties"]["spec"]
    sections: dict[str, Any] = {
        "kubernetes": {},
        "docker": {},
        "versionEndpoint": {},
        "release": {"configMaps": {}},
    }
    dumped = CheckSpec.model_validate(sections).model_dump(mode="json", by_alias=True)

    def walk(node: Mapping[str, Any], model: Any, path: str) -> Iterator[str]:
        if "default" in node:
            if _crd_errors(node["default"], node):
                yield f"{path}: default {node['default']!r} fails its schema"
            if model != node["default"]:
                yield f"{path}: CRD default {node['default']!r} != model {model!r}"
        for name, sub in node.get("properties", {}).items():
            yield from walk(sub, (model or {}).get(name), f"{path}.{name}")

    assert list(walk(spec, dumped, "spec")) == []


def test_a_full_status_matches_the_crd() -> None:
    status = {
        "observedGeneration": 3,
        "lastCheckTime": "2025-06-12T10:00:00Z",
        "counts": {v: 0 for v in EXPECTED_VERDICTS} | {"consistent": 9, "mismatch": 1},
        "quarantined": 1,
        "findings": [
            {
                "kind": "content-differs",
                "severity": "error",
                "instance": "shop/web-7d9f-abcde",
                "message": "assets/index-Dk.js sha256 differs from release 1.4.2",
            }
        ],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "CycleCompleted",
                "message": "10 pods checked",
                "lastTransitionTime": "2025-06-12T10:00:00Z",
                "observedGeneration": 3,
            }
        ],
    }
    obj = {**_example(), "status": status}
    assert _crd_errors(obj) == []
    bad = {**status, "counts": {"mismatched": 1}}
    assert _crd_errors({**_example(), "status": bad}), "a misspelt verdict must not pass"


# ------------------------------------------------------------------- RBAC, statically


def _rbac_docs() -> list[Doc]:
    return [d for d in _all_docs() if d.body.get("apiVersion", "").startswith("rbac.")]


def _roles() -> list[Doc]:
    return [d for d in _rbac_docs() if d.kind in ("Role", "ClusterRole")]


def _rules() -> Iterator[tuple[Doc, dict[str, Any]]]:
    for role in _roles():
        for rule in role.body.get("rules") or []:
            yield role, rule


#: ClusterRoles for people, bound by the admin (k8s/rbac-roles.yaml): an editor deletes
#: ArtifactChecks, an approver its own ReleaseAcceptances; the controller never deletes.
PEOPLE_ROLES = {"artifactcheck-editor", "artifactcheck-release-approver"}


def test_rbac_never_deletes_never_reads_secrets_no_wildcards() -> None:
    assert _roles(), "no Role or ClusterRole found"
    for role, rule in _rules():
        forbidden = FORBIDDEN_VERBS - {"delete"} if role.name in PEOPLE_ROLES else FORBIDDEN_VERBS
        assert not set(rule.get("verbs", [])) & forbidden, f"{role}: {rule}"
        assert "nonResourceURLs" not in rule, f"{role}: {rule}"
        assert "*" not in rule.get("apiGroups", []), f"{role}: {rule}"
        for resource in rule.get("resources", []):
            assert "*" not in resource, f"{role}: wildcard resource in {rule}"
            assert resource.split("/")[0] != "secrets", f"{role}: secrets in {rule}"
            assert resource not in ("pods/exec", "pods/attach", "pods/portforward"), role
            assert resource != "pods/eviction", f"{role}: quarantine never evicts"
        assert role.body.get("aggregationRule") is None, role


def test_nodes_only_in_the_opt_in_cordon_role() -> None:
    for role, rule in _rules():
        if "nodes" in rule.get("resources", []) or any(
            r.startswith("nodes/") for r in rule.get("resources", [])
        ):
            assert (role.kind, role.name, role.file) == (
                "ClusterRole",
                "artifactcheck-node-cordon",
                "rbac-node-cordon.yaml",
            ), f"{role} grants nodes: only the opt-in cordon role may"
    cordon = _one("ClusterRole", "rbac-node-cordon.yaml", "artifactcheck-node-cordon")
    assert cordon["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}
    ]
    binding = _one("ClusterRoleBinding", "rbac-node-cordon.yaml")
    assert binding["roleRef"]["name"] == "artifactcheck-node-cordon"


def _allowed(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in rules:
        if group in rule.get("apiGroups", []) and resource in rule.get("resources", []):
            verbs |= set(rule.get("verbs", []))
    return verbs


def test_controller_cluster_role_grants_what_the_issue_lists() -> None:
    rules = _one("ClusterRole", "rbac.yaml", "artifactcheck")["rules"]
    assert _allowed(rules, "", "pods") == {"get", "list", "watch", "patch"}
    assert _allowed(rules, "", "pods/status") == {"patch"}
    assert _allowed(rules, "artifactcheck.io", "artifactchecks") == {"list", "watch", "patch"}
    assert _allowed(rules, "artifactcheck.io", "artifactchecks/status") == {"patch"}
    assert _allowed(rules, "artifactcheck.io", "releaseacceptances") == {"list", "watch"}
    assert _allowed(rules, "artifactcheck.io", "releaseacceptances/status") == {"patch"}
    assert _allowed(rules, "", "events") == {"create", "get", "list", "patch"}
    assert _allowed(rules, "events.k8s.io", "events") == set(), "no call uses events.k8s.io"
    # the ConfigMap release source lists and watches; nothing reads one by name
    assert _allowed(rules, "", "configmaps") == {"list", "watch"}
    assert _allowed(rules, "coordination.k8s.io", "leases") == set(), "leases: Role only"


def test_leases_only_in_a_namespaced_role() -> None:
    role = _one("Role", "rbac.yaml", "artifactcheck-leader-election")
    assert role["metadata"]["namespace"] == SERVICE_ACCOUNT[0]
    assert _allowed(role["rules"], "coordination.k8s.io", "leases") == {
        "get",
        "create",
        "patch",
    }


def test_bindings_bind_our_service_account_to_roles_that_exist() -> None:
    sa = _one("ServiceAccount", "serviceaccount.yaml")
    assert (sa["metadata"]["namespace"], sa["metadata"]["name"]) == SERVICE_ACCOUNT
    roles = {(d.kind, d.name) for d in _roles()}
    bindings = [d for d in _rbac_docs() if d.kind.endswith("Binding")]
    assert {d.kind for d in bindings} == {"ClusterRoleBinding", "RoleBinding"}
    for binding in bindings:
        ref = binding.body["roleRef"]
        assert (ref["kind"], ref["name"]) in roles, f"{binding}: roleRef to nothing"
        subjects = [(s["kind"], s.get("namespace"), s["name"]) for s in binding.body["subjects"]]
        assert subjects == [("ServiceAccount", *SERVICE_ACCOUNT)], binding


def test_kustomization_lists_the_default_install() -> None:
    """The default set is everything but the examples and the opt-in cordon RBAC."""
    kustomization = _one("Kustomization", "kustomization.yaml")
    listed = kustomization["resources"]
    for name in listed:
        assert (K8S / name).is_file(), f"kustomization.yaml lists missing {name}"
    expected = {
        p.name
        for p in _yaml_files()
        if not p.name.startswith("example-")
        and p.name not in OPT_IN_FILES
        and p.name != "kustomization.yaml"
    }
    assert set(listed) == expected
    assert listed.index("namespace.yaml") == 0, "the namespace comes first"
    assert listed.index("crd.yaml") < len(listed)


# ------------------------------------------------------------- Deployment and Service


def _controller() -> dict[str, Any]:
    return _one("Deployment", "deployment.yaml", "artifactcheck-controller")


def _container() -> dict[str, Any]:
    containers = _controller()["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def test_deployment_shape() -> None:
    dep = _controller()
    assert dep["metadata"]["namespace"] == "artifactcheck-system"
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT[1]
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    c = _container()
    assert c["image"] == "artifactcheck:0.2.0"
    command = c.get("command", []) + c.get("args", [])
    assert command[:2] == ["artifactcheck", "controller"]
    assert "--namespace-scope" in command and "--json-logs" in command
    assert command[command.index("--metrics-port") + 1] == "8080"
    assert command[command.index("--health-port") + 1] == "8081"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path and get["port"] in ("health", 8081), probe
    assert c["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }


def test_deployment_security_context() -> None:
    pod = _controller()["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = _container()["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc.get("privileged", False) is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    assert (
        "restricted"
        == _one("Namespace", "namespace.yaml")["metadata"]["labels"][
            "pod-security.kubernetes.io/enforce"
        ]
    )


def test_deployment_leader_election_identity() -> None:
    env = {e["name"]: e for e in _container()["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_cdn_token_is_mounted_not_read_through_the_api() -> None:
    """The token reaches the controller as a file: no RBAC on secrets is ever needed."""
    pod = _controller()["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m for m in _container()["volumeMounts"]}
    (name,) = [n for n, v in volumes.items() if "projected" in v or "secret" in v]
    volume, mount = volumes[name], mounts[name]
    assert mount["readOnly"] is True
    if "projected" in volume:
        (source,) = volume["projected"]["sources"]
        secret = source["secret"]
    else:
        secret = volume["secret"]
    assert secret["optional"] is True, "the controller must start without a token"
    files = [item["path"] for item in secret.get("items", [])]
    paths = [f"{mount['mountPath']}/{f}" for f in files] or [mount["mountPath"]]
    assert "/var/run/secrets/artifactcheck/cdn-token" in paths
    writable = [m["mountPath"] for m in mounts.values() if not m.get("readOnly")]
    assert writable == ["/tmp"]


def test_metrics_service_targets_the_controller() -> None:
    svc = _one("Service", "service.yaml")
    labels = _controller()["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (port,) = svc["spec"]["ports"]
    assert port["name"] == "metrics" and port["targetPort"] in ("metrics", 8080)


# ----------------------------------------------------------- RBAC against the code


def test_rbac_covers_code() -> None:
    """Every Kubernetes API call in the package is allowed by the shipped RBAC, and every
    grant of the shipped RBAC is needed by a call (the scanner: tests/tools/rbac_scan.py)."""
    failures = rbac_scan.check()
    assert not failures, "\n\n".join(failures)
