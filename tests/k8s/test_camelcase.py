"""ArtifactChecks spell fields in camelCase (Kubernetes API conventions), the CLI's YAML
may keep snake_case, and admission refuses a CLI-only field whatever its spelling.

The model accepts both names of every field (``populate_by_name`` plus camelCase
aliases), so a refusal rule keyed on ``header_files`` alone would let ``headerFiles``
through: admission turns the spec's keys into field names first (only the model's own
keys: header names in ``http.headers`` are data) and names each refused field as the
object wrote it.
"""

from __future__ import annotations

from typing import Any

import pytest

from artifactcheck.control.crd import crd_manifest
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import (
    ReleaseSource,
    camel_name,
    load_spec,
    load_spec_file,
)
from artifactcheck.tenancy.admission import CONTROLLER_REFUSED_FIELDS, AdminConfig, admit
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.cluster import SimCluster

RELEASES = "https://cdn.shop.example.com/releases/{version}/artifactcheck.json"
ADMIN = AdminConfig.model_validate(
    {
        "egress": {"allow": ["https://cdn.shop.example.com/"]},
        "limits": {"min_interval": 30, "allow_cordon_namespaces": ["shop"]},
        "credentials": [
            {
                "name": "cdn-token",
                "namespaces": ["shop"],
                "header_files": {"X-CDN-Token": "/var/run/secrets/artifactcheck/cdn-token"},
                "hosts": ["https://cdn.shop.example.com/"],
            }
        ],
    }
)

#: A value that makes each CLI-only field present (non-empty, not its default).
VALUES: dict[tuple[str, ...], Any] = {
    ("targets",): [{"url": "http://169.254.169.254/"}],
    ("docker",): {"labels": ["app=web"]},
    ("release", "image"): {
        "reference": "registry.local/web:{version}",
        "registry": {"auth": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
    },
    ("http", "header_files"): {"X-Leak": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
    ("http", "header_env"): {"X-Leak": "HOME"},
    ("http", "ca_bundle"): "/etc/shadow",
    ("http", "transport"): "http1",
}


def good(**extra: Any) -> dict[str, Any]:
    """A camelCase spec the admin configuration above accepts in namespace shop."""
    return {
        "kubernetes": {"namespace": "shop", "selector": "app=web"},
        "release": {"manifests": [RELEASES]},
        "interval": 60,
        **extra,
    }


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {path[-1]: value}
    for name in reversed(path[:-1]):
        doc = {name: doc}
    return doc


def test_every_refused_field_has_a_value_here() -> None:
    assert set(VALUES) == set(CONTROLLER_REFUSED_FIELDS)


def test_camel_names_follow_the_api_conventions() -> None:
    assert camel_name("config_maps") == "configMaps"
    assert camel_name("max_connections") == "maxConnections"
    assert camel_name("gate_fail_open") == "gateFailOpen"
    assert camel_name("version_endpoint") == "versionEndpoint"
    assert camel_name("release_configmaps") == "releaseConfigMaps"  # the kind's own case
    assert camel_name("verify_tls") == "verifyTLS"  # an acronym keeps one case
    assert camel_name("ca_bundle") == "caBundle"
    assert camel_name("registry_ca_bundle") == "registryCABundle"
    assert camel_name("interval") == "interval"
    assert ReleaseSource.model_fields["config_maps"].alias == "configMaps"


@pytest.mark.parametrize("spelling", ["camelCase", "snake_case"])
@pytest.mark.parametrize("path", sorted(CONTROLLER_REFUSED_FIELDS), ids=lambda p: ".".join(p))
def test_a_cli_only_field_is_refused_in_either_spelling(
    path: tuple[str, ...], spelling: str
) -> None:
    written = tuple(camel_name(p) for p in path) if spelling == "camelCase" else path
    spec = {**good(), **_nested(written, VALUES[path])}
    if path[0] in ("targets", "docker"):
        del spec["kubernetes"]
    rule, _ = CONTROLLER_REFUSED_FIELDS[path]
    admission = admit("shop", spec, ADMIN)
    assert not admission.accepted
    named = "spec." + ".".join(written)
    assert (named, rule) in {(r.field, r.rule) for r in admission.refusals}, admission.message
    if spelling == "camelCase" and written != path:
        assert "spec." + ".".join(path) not in admission.message  # as the object spelled it


@pytest.mark.parametrize(
    "spec",
    [
        {"http": {"headerFiles": {}, "header_files": {"X-Leak": "/token"}}},
        {"http": {"header_files": {"X-Leak": "/token"}, "headerFiles": {}}},
        {"release": {"configMaps": None, "config_maps": {}}},
    ],
    ids=["camel-empty-first", "snake-first", "release-config-maps"],
)
def test_a_field_given_under_both_names_is_refused(spec: dict[str, Any]) -> None:
    """An empty camelCase key must not hide a snake_case one (or the other way round)."""
    admission = admit("shop", good(**spec), ADMIN)
    assert not admission.accepted
    assert "DuplicateField" in {r.rule for r in admission.refusals}, admission.message


@pytest.mark.parametrize(
    "spec",
    [
        {"http": {"HeaderFiles": {"X-Leak": "/token"}}},
        {"http": {"header-files": {"X-Leak": "/token"}}},
        {"http": {"headerfiles": {"X-Leak": "/token"}}},
        {"ReleaseImage": "web:{version}"},
    ],
    ids=repr,
)
def test_any_other_spelling_is_an_unknown_field(spec: dict[str, Any]) -> None:
    admission = admit("shop", good(**spec), ADMIN)
    assert not admission.accepted and admission.reason == "InvalidSpec"
    assert "unknown field" in admission.message


def test_header_names_are_data_never_renamed() -> None:
    """Keys of http.headers look like field names here, and are sent as they are."""
    headers = {"headerFiles": "a", "ca_bundle": "b", "X-Max_Connections": "c"}
    admission = admit("shop", good(http={"headers": headers}), ADMIN)
    assert admission.accepted, admission.message
    assert admission.spec is not None
    assert admission.spec.http.headers == headers
    assert admission.spec.http.header_files == {}


def test_both_spellings_admit_the_same_check() -> None:
    camel = good(
        http={"maxConnections": 8, "verifyTLS": False, "credentials": ["cdn-token"]},
        policy={"gateFailOpen": False, "maxQuarantineFraction": 0.5},
        versionEndpoint={"path": "/v", "pointer": "/version"},
        sampling={"assetsPerInstance": 20},
    )
    snake = {
        "kubernetes": camel["kubernetes"],
        "release": {"manifests": [RELEASES]},
        "interval": 60,
        "http": {"max_connections": 8, "verify_tls": False, "credentials": ["cdn-token"]},
        "policy": {"gate_fail_open": False, "max_quarantine_fraction": 0.5},
        "version_endpoint": {"path": "/v", "pointer": "/version"},
        "sampling": {"assets_per_instance": 20},
    }
    one, other = admit("shop", camel, ADMIN), admit("shop", snake, ADMIN)
    assert one.accepted and other.accepted, (one.message, other.message)
    assert one.spec == other.spec
    assert one.spec is not None and one.spec.http.max_connections == 8
    assert [c.name for c in one.credentials] == ["cdn-token"] == [c.name for c in other.credentials]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"release": {"manifests": ["/etc/{version}.json"]}}, "spec.release.manifests[0]"),
        ({"releaseManifest": ["/etc/{version}.json"]}, "spec.releaseManifest"),
        ({"policy": {"cordonNodes": True}}, None),
        ({"sampling": {"assetsPerInstance": 5000}}, "spec.sampling.assetsPerInstance"),
        ({"sampling": {"assets_per_instance": 5000}}, "spec.sampling.assets_per_instance"),
        ({"http": {"credentials": ["nope"]}}, "spec.http.credentials[0]"),
        ({"http": {"maxConnections": 0}}, "http.maxConnections"),
        ({"http": {"max_connections": 0}}, "http.max_connections"),
        ({"versionEndpoint": {"pointer": "x"}}, "versionEndpoint.pointer"),
        ({"versionEndpoint": {"bogus": 1}}, "versionEndpoint.bogus"),
    ],
    ids=repr,
)
def test_refusals_name_fields_as_the_object_wrote_them(
    extra: dict[str, Any], field: str | None
) -> None:
    admission = admit("shop", good(**extra), ADMIN)
    if field is None:  # cordonNodes is allowed for shop: accepted, in camelCase
        assert admission.accepted and admission.spec is not None, admission.message
        assert admission.spec.policy.cordon_nodes
        refused = admit("other", good(**extra, kubernetes={"selector": "a=b"}), ADMIN)
        assert refused.refusals[0].field == "spec.policy.cordonNodes"
        return
    assert not admission.accepted
    assert field in admission.message, admission.message


def test_the_cli_yaml_takes_either_spelling_and_names_snake_case(tmp_path: Any) -> None:
    snake = tmp_path / "snake.yaml"
    snake.write_text("release:\n  config_maps: {}\nkubernetes: {}\nhttp:\n  max_connections: 3\n")
    camel = tmp_path / "camel.yaml"
    camel.write_text("release:\n  configMaps: {}\nkubernetes: {}\nhttp:\n  maxConnections: 3\n")
    assert load_spec_file(snake) == load_spec_file(camel)
    bad = tmp_path / "bad.yaml"
    bad.write_text("http:\n  maxConnections: 0\n")
    with pytest.raises(ConfigError, match=r"http\.max_connections: Input should be"):
        load_spec_file(bad)


# ------------------------------------------------------------ what the API server keeps


def _body(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "artifactcheck.io/v1alpha1",
        "kind": "ArtifactCheck",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }


def test_the_crd_keeps_camel_case_and_prunes_snake_case() -> None:
    """As a real cluster does: the CRD offers one spelling; the other is unknown."""
    server = FakeApiServer()
    server.create(crd_manifest())
    stored = server.create(
        _body(
            {
                "kubernetes": {"selector": "app=web", "readyOnly": False},
                "release": {"manifests": [RELEASES]},
                "known_versions": ["1.4.1"],
                "http": {"maxConnections": 3, "max_per_host": 2, "headers": {"x_a": "b"}},
                "policy": {"gateFailOpen": False},
            }
        )
    )["spec"]
    assert stored["release"]["manifests"] == [RELEASES]
    assert stored["kubernetes"]["readyOnly"] is False
    assert stored["http"]["maxConnections"] == 3
    assert stored["http"]["headers"] == {"x_a": "b"}  # a header name, kept
    assert stored["policy"]["gateFailOpen"] is False
    assert "known_versions" not in stored and "max_per_host" not in stored["http"]
    assert stored["http"]["maxPerHost"] == 4  # defaulted, in camelCase
    spec = load_spec(stored)
    assert spec.http.max_connections == 3 and spec.policy.gate_fail_open is False


def test_sim_cluster_refuses_to_send_what_the_crd_prunes() -> None:
    with SimCluster() as cluster:
        cluster.add_check("camel", knownVersions=["1.4.1"], policy={"gateFailOpen": False})
        with pytest.raises(ValueError, match=r"spec\.policy\.gate_fail_open"):
            cluster.add_check("snake", policy={"gate_fail_open": False})
        cluster.add_check("lenient", pruned_ok=True, known_versions=["1.4.1"])
