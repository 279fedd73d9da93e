"""Admission and egress rules as tables: every refusal names its field and rule."""

from __future__ import annotations

from typing import Any

import pytest

from artifactcheck.control.addresses import own_addresses
from artifactcheck.model.errors import ConfigError
from artifactcheck.tenancy.admission import (
    AdminConfig,
    RequestBudget,
    admit,
    load_admin_config,
    source_hosts,
)
from artifactcheck.tenancy.egress import (
    AddressRules,
    EgressPolicy,
    HostRule,
    addresses_of,
    parse_address,
)

CDN = "https://cdn.shop.example.com/"
RELEASES = "https://cdn.shop.example.com/releases/{version}/artifactcheck.json"

ADMIN = AdminConfig.model_validate(
    {
        "credentials": [
            {
                "name": "cdn-token",
                "namespaces": ["shop", "team-*"],
                "header_files": {"X-CDN-Token": "/var/run/secrets/artifactcheck/cdn-token"},
                "hosts": ["https://cdn.shop.example.com/"],
            },
            {
                "name": "internal-ca",
                "namespaces": ["shop"],
                "ca_bundle": "/etc/artifactcheck/ca/ca.pem",
                "header_env": {"X-Api-Key": "SHOP_API_KEY"},
                "hosts": ["cdn.shop.example.com"],
            },
            {
                "name": "billing-only",
                "namespaces": ["billing"],
                "header_env": {"X-B": "B"},
                "hosts": ["releases.billing.example.com"],
            },
        ],
        "egress": {
            "allow": [
                "https://cdn.shop.example.com/",
                {"allow": "releases.billing.example.com", "namespaces": ["billing"]},
                "https://assets.example.com/shop/",
                "https://files.example.com/shop",
            ]
        },
        "limits": {
            "min_interval": 30,
            "max_instances": 50,
            "max_assets_per_instance": 200,
            "max_checks_per_namespace": 3,
        },
    }
)


def good(**extra: Any) -> dict[str, Any]:
    """A spec the admin configuration above accepts in namespace shop."""
    spec: dict[str, Any] = {
        "kubernetes": {"namespace": "shop", "selector": "app=web"},
        "release": {"manifests": RELEASES},
        "cdn": CDN,
        "interval": 60,
    }
    spec.update(extra)
    return spec


def refused(spec: dict[str, Any], namespace: str = "shop", **kw: Any) -> set[tuple[str, str]]:
    result = admit(namespace, spec, ADMIN, **kw)
    assert result.spec is None, "expected a refusal"
    assert result.message and result.reason != "Accepted"
    return {(r.field, r.rule) for r in result.refusals}


def test_a_good_check_is_accepted_and_resolved() -> None:
    result = admit("shop", good(http={"credentials": ["cdn-token", "internal-ca"]}), ADMIN)
    assert result.accepted and result.reason == "Accepted"
    spec = result.spec
    assert spec is not None and spec.kubernetes is not None
    assert spec.kubernetes.namespace == "shop"
    # the credentials' headers go per request, where each says (test_credential_scope.py)
    assert spec.http.header_files == {} and spec.http.header_env == {}
    assert [c.name for c in result.credentials] == ["cdn-token", "internal-ca"]
    assert spec.http.ca_bundle == "/etc/artifactcheck/ca/ca.pem"
    # unbounded sampling becomes the admin's maximum
    assert spec.sampling.instances == 50 and spec.sampling.assets_per_instance == 200
    assert source_hosts(result) == (HostRule("cdn.shop.example.com", 443),)


def test_no_kubernetes_section_selects_the_own_namespace() -> None:
    spec = good()
    del spec["kubernetes"]
    result = admit("shop", spec, ADMIN)
    assert result.spec is not None and result.spec.kubernetes is not None
    assert result.spec.kubernetes.namespace == "shop"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            good(http={"header_files": {"X-Leak": "/var/run/secrets/kubernetes.io/token"}}),
            ("spec.http.header_files", "LocalFileRefused"),
        ),
        (
            good(http={"header_env": {"X-Leak": "HOME"}}),
            ("spec.http.header_env", "EnvironmentRefused"),
        ),
        (good(http={"ca_bundle": "/etc/shadow"}), ("spec.http.ca_bundle", "LocalFileRefused")),
        (good(http={"transport": "http1"}), ("spec.http.transport", "TransportRefused")),
        (
            good(release={"manifests": "/etc/passwd"}),
            ("spec.release.manifests[0]", "LocalPathRefused"),
        ),
        (
            good(release={"manifests": [RELEASES, "releases/1.4.1.json"]}),
            ("spec.release.manifests[1]", "LocalPathRefused"),
        ),
        (
            good(release={"image": {"reference": "web:{version}"}}),
            ("spec.release.image", "ReleaseImageRefused"),
        ),
        (good(release_image_path="/srv"), ("spec.release_image_path", "RetiredField")),
        (good(targets=[{"url": "http://10.0.0.1/"}]), ("spec.targets", "BareTargetsRefused")),
        (good(docker={"labels": ["a=b"]}), ("spec.docker", "DockerRefused")),
        (
            good(kubernetes={"namespace": "kube-system"}),
            ("spec.kubernetes.namespace", "OtherNamespace"),
        ),
        (good(interval=0.001), ("spec.interval", "IntervalBelowMinimum")),
        (good(sampling={"instances": 51}), ("spec.sampling.instances", "SamplingAboveMaximum")),
        (
            good(sampling={"assets_per_instance": 201}),
            ("spec.sampling.assets_per_instance", "SamplingAboveMaximum"),
        ),
        (good(policy={"cordon_nodes": True}), ("spec.policy.cordon_nodes", "ClusterScopedAction")),
        (good(cdn="https://10.96.0.1/"), ("spec.cdn", "EgressNotAllowed")),
        (good(cdn="http://169.254.169.254/"), ("spec.cdn", "EgressNotAllowed")),
        (good(cdn="http://cdn.shop.example.com/"), ("spec.cdn", "EgressNotAllowed")),  # scheme
        (good(cdn="https://cdn.shop.example.com:8443/"), ("spec.cdn", "EgressNotAllowed")),
        (good(cdn="https://cdn.shop.example.com@evil.example/"), ("spec.cdn", "EgressNotAllowed")),
        (good(cdn="https://cdn.shop.example.com.evil.example/"), ("spec.cdn", "EgressNotAllowed")),
        (
            good(release={"manifests": "https://cdn.shop.example.com/../admin/{version}.json"}),
            ("spec.release.manifests[0]", "EgressNotAllowed"),
        ),
        (
            good(release={"manifests": "https://{version}.cdn.shop.example.com/x.json"}),
            ("spec.release.manifests[0]", "EgressNotAllowed"),
        ),
        (
            good(release={"manifests": "https://cdn.shop.example.com{version}/x.json"}),
            ("spec.release.manifests[0]", "EgressNotAllowed"),  # the version would be the host
        ),
        (good(cdn="https://me:pw@cdn.shop.example.com/"), ("spec.cdn", "EgressNotAllowed")),
        (good(cdn="https://assets.example.com/other/"), ("spec.cdn", "EgressNotAllowed")),
        (good(cdn="https://assets.example.com/shopping/"), ("spec.cdn", "EgressNotAllowed")),
        (good(cdn="https://files.example.com/shopping/"), ("spec.cdn", "EgressNotAllowed")),
        (
            good(release={"manifests": "https://releases.billing.example.com/{version}.json"}),
            ("spec.release.manifests[0]", "EgressNotAllowed"),  # allowed for billing only
        ),
        (
            good(http={"credentials": ["nope"]}),
            ("spec.http.credentials[0]", "CredentialNotGranted"),
        ),
        (
            good(http={"credentials": ["billing-only"]}),
            ("spec.http.credentials[0]", "CredentialNotGranted"),
        ),
        (
            good(http={"credentials": ["cdn-token"], "headers": {"x-cdn-token": "mine"}}),
            ("spec.http.credentials[0]", "CredentialConflict"),
        ),
        (good(interval="soon"), ("spec", "InvalidSpec")),
    ],
    ids=lambda v: v[1] if isinstance(v, tuple) else None,
)
def test_refusals_name_field_and_rule(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    assert expected in refused(spec)


def test_every_refusal_is_reported_at_once() -> None:
    spec = good(
        interval=0.001,
        http={"header_files": {"X": "/t"}, "header_env": {"Y": "Z"}},
        cdn="http://127.0.0.1:6443/",
    )
    assert refused(spec) >= {
        ("spec.interval", "IntervalBelowMinimum"),
        ("spec.http.header_files", "LocalFileRefused"),
        ("spec.http.header_env", "EnvironmentRefused"),
        ("spec.cdn", "EgressNotAllowed"),
    }


def test_checks_per_namespace() -> None:
    assert admit("shop", good(), ADMIN, checks_in_namespace=2).accepted
    assert refused(good(), checks_in_namespace=3) == {("metadata.namespace", "TooManyChecks")}


def test_credential_granted_by_glob_and_not_by_prefix() -> None:
    assert admit("team-a", good(kubernetes={}, http={"credentials": ["cdn-token"]}), ADMIN).accepted
    assert refused(good(kubernetes={}, http={"credentials": ["cdn-token"]}), namespace="teams")


@pytest.mark.parametrize(
    "url",
    [
        "https://assets.example.com/shop/",
        "https://assets.example.com/shop/v/",
        "https://files.example.com/shop",
        "https://files.example.com/shop/x/",
        "https://CDN.shop.example.com:443/a/",
    ],
)
def test_url_prefixes_allow_what_is_under_them(url: str) -> None:
    assert admit("shop", good(cdn=url), ADMIN).accepted


def test_namespace_scoped_egress_rule() -> None:
    spec = good(release={"manifests": "https://releases.billing.example.com/{version}.json"})
    spec.pop("kubernetes")
    assert admit("billing", spec, ADMIN).accepted


def test_the_strict_default_grants_nothing() -> None:
    result = admit("shop", good(), AdminConfig())
    assert {(r.field, r.rule) for r in result.refusals} == {
        ("spec.release.manifests[0]", "EgressNotAllowed"),
        ("spec.cdn", "EgressNotAllowed"),
    }
    consensus = admit("shop", {"interval": 60}, AdminConfig())
    assert consensus.accepted  # pods only: consensus mode needs no egress


def test_admin_config_file_bare_or_configmap(tmp_path: Any) -> None:
    bare = tmp_path / "bare.yaml"
    bare.write_text("limits: {min_interval: 5}\n")
    assert load_admin_config(bare).limits.min_interval == 5
    cm = tmp_path / "cm.yaml"
    cm.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
        "data:\n  admin-config.yaml: |\n    limits: {max_checks_per_namespace: 1}\n"
    )
    assert load_admin_config(cm).limits.max_checks_per_namespace == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("credentials: [{name: a, namespaces: ['*']}, {name: a, namespaces: ['*']}]\n")
    with pytest.raises(ConfigError, match="unique"):
        load_admin_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_admin_config(tmp_path / "missing.yaml")
    typo = tmp_path / "typo.yaml"
    typo.write_text("limts: {}\n")
    with pytest.raises(ConfigError, match="limts: unknown field"):
        load_admin_config(typo)
    assert load_admin_config(None) == AdminConfig()


# --------------------------------------------------------------------------- egress

RULES = AddressRules(
    allow_loopback=False,
    api_server=frozenset({parse_address("10.96.0.1"), parse_address("172.18.0.2")}),  # type: ignore[arg-type]
    own=frozenset({parse_address("10.244.1.7")}),  # type: ignore[arg-type]
    denied=(),
)


@pytest.mark.parametrize(
    ("ip", "words"),
    [
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("::ffff:169.254.169.254", "metadata"),
        ("169.254.10.1", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("10.96.0.1", "API server"),
        ("172.18.0.2", "API server"),
        ("10.244.1.7", "controller itself"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("not-an-ip", "not an IP"),
    ],
)
def test_address_rules_refuse(ip: str, words: str) -> None:
    reason = RULES.refusal(ip)
    assert reason is not None and words in reason


def test_loopback_only_when_allowed_and_denied_networks() -> None:
    import ipaddress

    rules = AddressRules(allow_loopback=True, denied=(ipaddress.ip_network("127.66.0.0/16"),))
    assert rules.refusal("127.0.0.5") is None
    assert "denied by the admin" in (rules.refusal("127.66.1.1") or "")
    assert rules.refusal("10.0.0.8") is None


def test_policy_instances_by_address_sources_by_allow_list() -> None:
    pods = ["10.244.2.5", "fd00::5"]
    policy = EgressPolicy(
        rules=RULES,
        sources=(HostRule("cdn.shop.example.com", 443),),
        instance_addresses=lambda: addresses_of(pods),
    )
    assert policy("10.244.2.5", "10.244.2.5", 8080) is None  # a selected pod
    assert policy("[fd00::5]", "fd00::5", 80) is None
    assert policy("cdn.shop.example.com", "93.184.216.34", 443) is None
    # an allow-listed name that resolves to a forbidden address (rebinding, metadata)
    assert "metadata" in (policy("cdn.shop.example.com", "169.254.169.254", 443) or "")
    assert "API server" in (policy("cdn.shop.example.com", "10.96.0.1", 443) or "")
    # a pod that is not selected, another port of the CDN, a name that is not listed
    assert "allow-list" in (policy("10.244.2.6", "10.244.2.6", 8080) or "")
    assert "allow-list" in (policy("cdn.shop.example.com", "93.184.216.34", 22) or "")
    assert "allow-list" in (policy("evil.example", "93.184.216.34", 443) or "")
    # a pod IP that is an API server address (a hostNetwork pod on a control-plane node)
    pods.append("10.96.0.1")
    assert "API server" in (policy("10.96.0.1", "10.96.0.1", 443) or "")
    # a URL naming the pod's IP but connecting elsewhere is not that pod
    assert "allow-list" in (policy("10.244.2.5", "10.244.9.9", 8080) or "")


def test_own_addresses_from_the_downward_api() -> None:
    found = own_addresses({"POD_IP": "10.244.1.7", "POD_IPS": "10.244.1.7,fd00::7"})
    assert found == {parse_address("10.244.1.7"), parse_address("fd00::7")}
    assert own_addresses({}) == frozenset()


def test_request_budget_refills_and_goes_into_debt_once() -> None:
    now = [0.0]
    budget = RequestBudget(per_minute=60, clock=lambda: now[0])
    assert budget.wait_time("a") == 0
    budget.spend("a", 100)  # one cycle may overdraw
    assert budget.tokens("a") == -40
    assert budget.wait_time("a") == pytest.approx(41.0)
    assert budget.wait_time("b") == 0  # namespaces do not share a bucket
    now[0] = 41.0
    assert budget.wait_time("a") == 0
    now[0] = 1000.0
    assert budget.tokens("a") == 60  # capped at one minute's worth


@pytest.mark.parametrize("pod_ip", ["metadata.google.internal", "localhost", "10.0.0.1 "])
def test_a_pod_ip_that_is_not_an_address_is_no_instance(pod_ip: str) -> None:
    """A name would be resolved by the fetcher: never where kubelet put the pod."""
    from artifactcheck.discover.kube_pods import pod_to_instance

    pod = {"metadata": {"name": "p", "namespace": "shop"}, "status": {"podIP": pod_ip}}
    assert pod_to_instance(pod) is None
    pod["status"]["podIP"] = "10.244.0.9"
    assert pod_to_instance(pod) is not None


def test_release_directories_granted_by_the_admin() -> None:
    config = AdminConfig.model_validate(
        {
            "release_directories": [
                {"directory": "/etc/artifactcheck/releases/shop", "namespaces": ["shop"]}
            ]
        }
    )

    def ok(path: str, namespace: str = "shop") -> bool:
        return admit(namespace, {"release": {"manifests": path}, "interval": 60}, config).accepted

    assert ok("/etc/artifactcheck/releases/shop/{version}.json")
    assert ok("/etc/artifactcheck/releases/shop/v/{version}/artifactcheck.json")
    assert ok("/etc/artifactcheck/releases/shop/1.4.2.json")
    assert not ok("/etc/artifactcheck/releases/shop/{version}.json", "billing")
    assert not ok("/etc/artifactcheck/releases/shopping/{version}.json")
    assert not ok("/etc/artifactcheck/releases/shop/../billing/{version}.json")
    assert not ok("/etc/artifactcheck/releases/{version}.json")
    assert not ok("/var/run/secrets/kubernetes.io/serviceaccount/token")
    assert not ok("releases/shop/{version}.json")
    with pytest.raises(ValueError, match="absolute"):
        AdminConfig.model_validate(
            {"release_directories": [{"directory": "rel", "namespaces": ["*"]}]}
        )
