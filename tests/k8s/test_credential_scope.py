"""Credentials go only where granted (docs/security.md, artifactcheck/tenancy/credentials.py).

An admin credential lists the hosts its headers may be sent to (egress allow-list
syntax) and goes to the checked pods only with ``send_to_pods: true``. The real
controller runs against real loopback servers (the pods, the CDN, the release server),
which record every request: the tests read the headers they received.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tenant_support import TenantCluster, admin_config, running

from artifactcheck.model.errors import ConfigError
from artifactcheck.tenancy.admission import AdminConfig, Credential, load_admin_config
from artifactcheck.tenancy.credentials import CredentialScope
from artifactcheck.tenancy.egress import parse_address
from artifactcheck_sim.cluster import wait_for

_net = itertools.count(1)
TOKEN = "cdn-token-5f1e0c9a"
HEADER = "x-cdn-token"


@pytest.fixture
def tc() -> Any:
    n = next(_net)
    with TenantCluster(
        first_host=f"127.84.{n}.1",
        cdn_host=f"127.84.{200 + n}.1",
        release_host=f"127.84.{100 + n}.1",
    ) as c:
        yield c


@pytest.fixture
def token_file(tmp_path: Path) -> str:
    path = tmp_path / "cdn-token"
    path.write_text(TOKEN + "\n")
    return str(path)


def received(tc: TenantCluster) -> dict[str, list[Any]]:
    """The requests each kind of server received: cdn, release, pods."""
    cdn, release = tc.web.server(tc.cdn_url), tc.web.server(tc.release_url)
    out: dict[str, list[Any]] = {"cdn": list(cdn.received), "release": list(release.received)}
    out["pods"] = [r for s in tc.web if s not in (cdn, release) for r in list(s.received)]
    return out


def run_until_all_asked(tc: TenantCluster, credential: dict[str, Any], pods: int = 2) -> Any:
    """Run the controller with ``credential`` granted to a check, until the pods, the
    CDN and the release server have all been asked (two cycles at least)."""
    for _ in range(pods):
        tc.add_pod()
    tc.add_check(interval=0.3, http={"credentials": [credential["name"]]})
    admin = admin_config(tc, credentials=[credential])
    with running(tc, admin) as ctl:
        accepted = wait_for(lambda: tc.condition_of("Accepted"), timeout=15)
        assert accepted["status"] == "True", accepted
        wait_for(lambda: ctl.controller.cycles_completed >= 2, timeout=20)
        got = wait_for(lambda: (r := received(tc)) and all(r.values()) and r, timeout=15)
    return got


def carried(requests: list[Any]) -> set[str | None]:
    return {r.headers.get(HEADER) for r in requests}


def test_the_cdn_receives_the_header_and_the_pods_never(tc: TenantCluster, token_file: str) -> None:
    cred = {
        "name": "cdn-token",
        "namespaces": ["shop"],
        "header_files": {"X-CDN-Token": token_file},
        "hosts": [tc.cdn_url],  # a URL prefix: the CDN only, not the release server
    }
    got = run_until_all_asked(tc, cred)
    assert carried(got["cdn"]) == {TOKEN}
    assert carried(got["pods"]) == {None}, "a pod received the CDN's credential"
    assert carried(got["release"]) == {None}, "the release server is not in hosts"


def test_the_admin_may_send_it_to_the_pods_explicitly(tc: TenantCluster, token_file: str) -> None:
    cred = {
        "name": "pod-token",
        "namespaces": ["shop"],
        "header_files": {"X-CDN-Token": token_file},
        "send_to_pods": True,  # and no host: the CDN and the release server never
    }
    got = run_until_all_asked(tc, cred)
    assert carried(got["pods"]) == {TOKEN}
    assert carried(got["cdn"]) == carried(got["release"]) == {None}


def test_a_host_entry_covers_every_port_and_path_of_that_host(
    tc: TenantCluster, token_file: str
) -> None:
    """``hosts: [127.84.n.1]`` (a host, no port) matches the release server's URLs,
    whatever their path; the CDN, another host, gets nothing."""
    release_host = tc.release_url.split("//", 1)[1].split(":", 1)[0]
    cred = {
        "name": "release-token",
        "namespaces": ["shop"],
        "header_files": {"X-CDN-Token": token_file},
        "hosts": [release_host],
    }
    got = run_until_all_asked(tc, cred)
    assert carried(got["release"]) == {TOKEN}
    assert carried(got["cdn"]) == carried(got["pods"]) == {None}


# -- the configuration -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("credential", "message"),
    [
        (
            {"name": "t", "namespaces": ["*"], "header_env": {"X-T": "T"}},
            "credential 't' has headers but no hosts",
        ),
        (
            {"name": "t", "namespaces": ["*"], "header_env": {"X-T": "T"}, "sendToPods": True},
            "sendToPods",  # unknown fields stay errors: the admin file is snake_case
        ),
        (
            {"name": "t", "namespaces": ["*"], "header_env": {"X-T": "T"}, "host": ["a.b"]},
            "host",
        ),
        (
            {"name": "t", "namespaces": ["*"], "header_env": {"X-T": "T"}, "hosts": ["ftp://a/"]},
            "a URL prefix must be http(s)://host/",
        ),
        (
            {"name": "t", "namespaces": ["*"], "header_env": {"X-T": "T"}, "hosts": ["a/b"]},
            "expected a host or an http(s) URL prefix",
        ),
    ],
)
def test_a_credential_that_goes_nowhere_or_is_misspelt_is_an_error(
    tmp_path: Path, credential: dict[str, Any], message: str
) -> None:
    import yaml

    path = tmp_path / "admin-config.yaml"
    path.write_text(yaml.safe_dump({"credentials": [credential]}))
    with pytest.raises(ConfigError) as err:
        load_admin_config(path)
    text = str(err.value)
    assert str(path) in text and "credentials.0" in text and message in text, text


def test_a_ca_bundle_alone_needs_no_hosts() -> None:
    """TLS trust discloses nothing: a credential with only a CA bundle stays valid."""
    config = AdminConfig.model_validate(
        {"credentials": [{"name": "ca", "namespaces": ["*"], "ca_bundle": "/etc/ca.pem"}]}
    )
    assert config.credentials[0].hosts == []


def test_the_controller_refuses_to_start_on_such_a_file(tc: TenantCluster, tmp_path: Path) -> None:
    """``artifactcheck controller --admin-config`` with a credential that goes nowhere:
    exit 2, and the message names the file and the field."""
    bad = tmp_path / "admin-config.yaml"
    bad.write_text("credentials:\n  - {name: t, namespaces: ['*'], header_env: {X-T: T}}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "artifactcheck",
            "controller",
            "--kubeconfig",
            tc.api.write_kubeconfig(str(tmp_path / "kubeconfig")),
            "--namespace-scope",
            "shop",
            "--lease-namespace",
            "shop",
            "--admin-config",
            str(bad),
            "--bind",
            "127.0.0.1",
            "--health-port",
            "0",
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert str(bad) in proc.stderr and "credentials.0" in proc.stderr
    assert "has headers but no hosts" in proc.stderr


# -- which request carries which credential -----------------------------------------------

POD = "10.1.2.3"


def scope(*creds: dict[str, Any]) -> CredentialScope:
    models = [Credential.model_validate({"namespaces": ["*"], **c}) for c in creds]
    pods = frozenset({parse_address(POD)})
    return CredentialScope(
        [(m, {h: f"{m.name}-value" for h in m.header_env}) for m in models],
        lambda: pods,  # type: ignore[arg-type,return-value]
    )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://cdn.example.com/assets/a.js", {"X-Cdn": "cdn-value"}),
        ("https://CDN.example.com/assets/a.js", {"X-Cdn": "cdn-value"}),
        # as the allow-list's URL prefixes: the host exactly (admission refuses such
        # a CDN URL for the same reason)
        ("https://cdn.example.com./assets/a.js", {}),
        ("http://cdn.example.com/assets/a.js", {}),  # the prefix is https (port 443)
        ("https://cdn.example.com:8443/assets/a.js", {}),  # another port
        ("https://cdn.example.com/other/a.js", {}),  # outside the prefix
        ("https://cdn.example.com/assetsX/a.js", {}),  # a prefix ends at a "/"
        ("https://evil.example.com/assets/a.js", {}),
        ("https://files.example.com:9000/x", {"X-Files": "files-value"}),  # host: any port
        (f"http://{POD}:8080/index.html", {"X-Pod": "pod-value"}),  # pods: only opt-ins
        (f"https://{POD}/assets/a.js", {"X-Pod": "pod-value"}),
        ("http://10.1.2.4:8080/", {}),  # an address that is no pod of the check
        ("http://[::1]:80/", {}),
    ],
)
def test_which_request_carries_which_credential(url: str, expected: dict[str, str]) -> None:
    got = scope(
        {"name": "cdn", "header_env": {"X-Cdn": "A"}, "hosts": ["https://cdn.example.com/assets/"]},
        {"name": "files", "header_env": {"X-Files": "B"}, "hosts": ["files.example.com"]},
        {"name": "pod", "header_env": {"X-Pod": "C"}, "send_to_pods": True},
    )
    assert dict(got(url)) == expected


def test_a_pod_gets_a_credential_listing_its_address_only_with_the_opt_in() -> None:
    """Listing a pod's address in ``hosts`` does not send it to the pod: pods are the
    tenant's, and only ``send_to_pods`` says the tenant may read it."""
    got = scope({"name": "cdn", "header_env": {"X-Cdn": "A"}, "hosts": [POD]})
    assert dict(got(f"http://{POD}:8080/")) == {}
    assert dict(got("http://10.1.2.4:8080/")) == {}
    assert not scope({"name": "ca", "ca_bundle": "/etc/ca.pem"})  # nothing to send
