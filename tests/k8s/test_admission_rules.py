"""Admission and egress rules no row of test_tenancy_rules pinned: the broadcast and the
Alibaba metadata addresses, percent-encoded dot segments, two CA bundles.

Each was broken once on purpose to see it fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from artifactcheck.tenancy.admission import AdminConfig, admit
from artifactcheck.tenancy.egress import AddressRules

RELEASES = "https://cdn.shop.example.com/releases/{version}/artifactcheck.json"


def admin(*credentials: dict[str, Any]) -> AdminConfig:
    return AdminConfig.model_validate(
        {
            "credentials": list(credentials),
            "egress": {"allow": ["https://cdn.shop.example.com/"]},
        }
    )


def spec(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kubernetes": {"namespace": "shop", "selector": "app=web"},
        "release": {"manifests": RELEASES},
        "interval": 60,
    }
    out.update(extra)
    return out


def refusals(result: Any) -> set[tuple[str, str]]:
    return {(r.field, r.rule) for r in result.refusals}


# --------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("ip", "words"),
    [
        ("255.255.255.255", "broadcast address"),
        ("::ffff:255.255.255.255", "broadcast address"),
        ("100.100.100.200", "cloud metadata address"),  # Alibaba Cloud's
        ("::ffff:100.100.100.200", "cloud metadata address"),
    ],
)
def test_broadcast_and_the_alibaba_metadata_address_are_refused(ip: str, words: str) -> None:
    """Even with loopback allowed and nothing denied: these are never a pod or a CDN."""
    reason = AddressRules(allow_loopback=True).refusal(ip)
    assert reason is not None and words in reason, reason


@pytest.mark.parametrize("ip", ["100.100.100.199", "100.100.100.201", "255.255.255.254"])
def test_their_neighbours_are_not(ip: str) -> None:
    """The control: the refusals are of those addresses, not of their networks."""
    assert AddressRules(allow_loopback=True).refusal(ip) is None


# --------------------------------------------------------------- dot segments


@pytest.mark.parametrize(
    "url",
    [
        "https://cdn.shop.example.com/releases/%2e%2e/admin/{version}.json",
        "https://cdn.shop.example.com/releases/%2E%2E/admin/{version}.json",
        "https://cdn.shop.example.com/releases/.%2e/admin/{version}.json",
        "https://cdn.shop.example.com/releases/%2e/{version}.json",
    ],
)
def test_percent_encoded_dot_segments_are_refused_at_admission(url: str) -> None:
    """A server decodes %2e before it resolves the path: /releases/%2e%2e/admin is
    /admin, outside the prefix the admin allowed, so it is refused as ``..`` is."""
    result = admit("shop", spec(release={"manifests": url}), admin())
    assert result.spec is None
    assert refusals(result) == {("spec.release.manifests[0]", "EgressNotAllowed")}
    assert "dot segments" in (result.message or ""), result.message


def test_a_percent_encoded_dot_inside_a_name_is_no_segment() -> None:
    """The control: ``%2ewell-known`` is a name that starts with a dot, not ``.``."""
    url = "https://cdn.shop.example.com/releases/%2ehidden/{version}.json"
    assert admit("shop", spec(release={"manifests": url}), admin()).accepted


# --------------------------------------------------------------- CA bundles


def test_two_credentials_with_different_ca_bundles_are_refused() -> None:
    """One fetcher has one trust store: which CA would verify the CDN is no guess."""
    config = admin(
        {"name": "ca-a", "namespaces": ["shop"], "ca_bundle": "/etc/artifactcheck/ca/a.pem"},
        {"name": "ca-b", "namespaces": ["shop"], "ca_bundle": "/etc/artifactcheck/ca/b.pem"},
    )
    result = admit("shop", spec(http={"credentials": ["ca-a", "ca-b"]}), config)
    assert result.spec is None
    assert refusals(result) == {("spec.http.credentials[1]", "CredentialConflict")}
    assert "two credentials bring a CA bundle" in (result.message or ""), result.message


def test_two_credentials_with_the_same_ca_bundle_are_one_trust_store() -> None:
    config = admin(
        {"name": "ca-a", "namespaces": ["shop"], "ca_bundle": "/etc/artifactcheck/ca/a.pem"},
        {"name": "token", "namespaces": ["shop"], "ca_bundle": "/etc/artifactcheck/ca/a.pem"},
    )
    result = admit("shop", spec(http={"credentials": ["ca-a", "token"]}), config)
    assert result.accepted and result.spec is not None, result.message
    assert result.spec.http.ca_bundle == "/etc/artifactcheck/ca/a.pem"


@pytest.mark.parametrize("field", ["credentials", "release_keys"])
def test_two_admin_entries_with_one_name_are_refused(field: str) -> None:
    """A check names the admin's credentials and keys: two under one name are ambiguous."""
    entry = {"name": "cdn", "namespaces": ["shop"]} | ({"pem": "x"} if "keys" in field else {})
    with pytest.raises(ValueError, match=r"names must be unique: cdn"):
        AdminConfig.model_validate({field: [entry, dict(entry)]})
    AdminConfig.model_validate({field: [entry, {**entry, "name": "other"}]})
