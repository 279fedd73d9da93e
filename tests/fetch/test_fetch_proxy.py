"""Proxies: release sources and CDNs through the proxy, instances direct.

A real logging proxy on loopback (:mod:`proxy_support`) sees every request sent through
it. A CDN or release source is fetched for its own host (``host_header=""``); an
instance with the default. What must hold: the CDN's requests reach the proxy and the
instance's do not (unless ``http.proxy_instances``), ``NO_PROXY`` sends a host direct,
and a proxy that refuses is a clear connect error with nothing hashed, never an answer
to judge.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trustme
from click.testing import CliRunner
from fetch_support import server_context
from hypothesis import example, given
from hypothesis import strategies as st
from proxy_support import LoggingProxy
from pydantic import ValidationError
from rawserver import RawServer, response, serve_each

from artifactcheck.cli.main import main
from artifactcheck.fetch.proxy import Proxies, proxies_of
from artifactcheck.model.errors import ConfigError
from artifactcheck.tenancy.admission import AdminConfig
from artifactcheck_sim.fleet import SimFleet
from artifactcheck_sim.web import Site, WebFleet

HELLO = b"hello"
SHA = hashlib.sha256(HELLO).hexdigest()


def origin(host: str) -> RawServer:
    return RawServer(host, serve_each(lambda conn, head: response(200, HELLO)))


async def test_a_cdn_request_goes_through_the_proxy_and_an_instance_request_does_not(
    make_fetcher, host: Callable[[], str]
) -> None:
    with LoggingProxy(host()) as proxy, origin(host()) as cdn, origin(host()) as instance:
        async with make_fetcher(proxies=Proxies.single(proxy.url)) as f:
            via = await f.get_asset(cdn.url, "a.js", host_header="")
            direct = await f.get_asset(instance.url, "a.js")
    assert via.ok and via.hashes["sha256"] == SHA, via.error
    assert direct.ok and direct.hashes["sha256"] == SHA, direct.error
    assert proxy.requests == [f"GET {cdn.url}a.js HTTP/1.1"]  # absolute form, once
    assert instance.connections == 1 and cdn.connections == 1


async def test_proxy_instances_sends_the_instances_through_the_proxy_too(
    make_fetcher, host: Callable[[], str]
) -> None:
    with LoggingProxy(host()) as proxy, origin(host()) as instance:
        proxies = Proxies.single(proxy.url)
        async with make_fetcher(http={"proxy_instances": True}, proxies=proxies) as f:
            got = await f.get_asset(instance.url, "a.js")
    assert got.ok and got.hashes["sha256"] == SHA, got.error
    assert proxy.requests == [f"GET {instance.url}a.js HTTP/1.1"]


async def test_no_proxy_sends_a_named_host_direct(make_fetcher, host: Callable[[], str]) -> None:
    with LoggingProxy(host()) as proxy, origin(host()) as cdn, origin(host()) as other:
        proxies = Proxies.single(proxy.url, no_proxy=f"example.org,{cdn.host}")
        async with make_fetcher(proxies=proxies) as f:
            direct = await f.get_asset(cdn.url, "a.js", host_header="")
            via = await f.get_asset(other.url, "a.js", host_header="")
    assert direct.ok and via.ok, (direct.error, via.error)
    assert proxy.requests == [f"GET {other.url}a.js HTTP/1.1"]
    assert cdn.connections == 1


@pytest.mark.parametrize("named", [True, False], ids=["certificate-matches", "other-name"])
async def test_https_goes_through_a_connect_tunnel_verified_end_to_end(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], tmp_path: Path, named: bool
) -> None:
    """The proxy sees only ``CONNECT host:port``; TLS is between us and the CDN, so a
    certificate for another name is refused as it would be directly."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    address = host()
    context = server_context(ca, address if named else "other.example")
    cdn = fleet.add(Site(overrides={"/a.js": HELLO}), address, ssl_context=context)
    with LoggingProxy(host()) as proxy:
        proxies = Proxies.single(proxy.url)
        http = {"ca_bundle": str(ca_file)}
        async with make_fetcher(http=http, proxies=proxies, retry={"attempts": 1}) as f:
            got = await f.get_asset(cdn, "a.js", host_header="")
    assert proxy.requests == [f"CONNECT {urlsplit(cdn).netloc} HTTP/1.1"]
    if named:
        assert got.ok and got.hashes["sha256"] == SHA, got.error
    else:
        assert got.error_kind == "tls" and not got.hashes, (got.error_kind, got.error)


@pytest.mark.parametrize(
    ("scheme", "status"), [("https", 403), ("https", 407), ("http", 403), ("http", 407)]
)
async def test_a_proxy_that_refuses_is_a_connect_error_never_an_answer(
    make_fetcher, host: Callable[[], str], scheme: str, status: int
) -> None:
    """CONNECT refused (https), or 403/407 for a plain http URL: the proxy's answer is
    not the CDN's, so it is a connect error (inconclusive upstream) with nothing hashed."""
    with LoggingProxy(host(), refuse=True, status=status) as proxy:
        target = f"{scheme}://{host()}:8443/"
        async with make_fetcher(proxies=Proxies.single(proxy.url), retry={"attempts": 1}) as f:
            got = await f.get_asset(target, "a.js", host_header="")
    assert got.error_kind == "connect" and not got.hashes, (got.error_kind, got.error)
    assert "the HTTP proxy" in (got.error or ""), got.error  # names the proxy, not the CDN
    assert len(proxy.requests) == 1


async def test_a_proxy_that_is_down_is_named_in_the_error(
    make_fetcher, host: Callable[[], str]
) -> None:
    """Nothing listens at the proxy's address: a connect error that names the proxy, not
    only the CDN the user would go and look at."""
    closed = LoggingProxy(host())  # bound, then closed: its port refuses
    closed.__exit__(None, None, None)
    async with make_fetcher(proxies=Proxies.single(closed.url), retry={"attempts": 1}) as f:
        got = await f.get_asset(f"http://{host()}:8080/", "a.js", host_header="")
    assert got.error_kind == "connect" and not got.hashes, (got.error_kind, got.error)
    assert f"through the HTTP proxy {closed.url}" in (got.error or ""), got.error


@pytest.mark.parametrize(
    ("environ", "url", "expected"),
    [
        ({"HTTPS_PROXY": "http://p:3128"}, "https://cdn.example.com/a.js", "http://p:3128"),
        ({"HTTPS_PROXY": "http://p:3128"}, "http://cdn.example.com/a.js", None),
        ({"http_proxy": "http://p:1", "HTTP_PROXY": "http://P:2"}, "http://x/", "http://p:1"),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "example.com"}, "https://cdn.example.com/", None),
        ({"HTTPS_PROXY": "http://p", "no_proxy": ".example.com"}, "https://example.com/", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "*"}, "https://anything/", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "ample.com"}, "https://example.com/", "http://p"),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "c.io:8443"}, "https://c.io:8443/", None),
        ({"HTTPS_PROXY": "http://p", "NO_PROXY": "c.io:8443"}, "https://c.io/", "http://p"),
        ({}, "https://cdn.example.com/", None),
        ({"ALL_PROXY": "http://all:1"}, "https://cdn.example.com/", "http://all:1"),
        ({"ALL_PROXY": "http://all:1", "HTTPS_PROXY": "http://p:2"}, "https://c/", "http://p:2"),
        ({"HTTPS_PROXY": "proxy.corp:3128"}, "https://c/", "http://proxy.corp:3128"),
    ],
)
def test_the_environment_is_read_as_curl_reads_it(
    environ: dict[str, str], url: str, expected: str | None
) -> None:
    assert Proxies.from_environment(environ).for_url(url) == expected


# ------------------------------------------------------------- the CLI, end to end


@pytest.fixture
def sim(host: Callable[[], str]) -> Iterator[tuple[SimFleet, str]]:
    """A three-instance fleet, its CDN, and its releases served over HTTP."""
    with WebFleet(name="test-proxy") as web:
        fleet = SimFleet(
            instances=3, version="1.4.1", first_host=host(), cdn_host=host(), web=web
        ).start()
        try:
            source = web.add(Site(root=Path(fleet.release_template).parent), host())
            yield fleet, source + "{version}.json"
        finally:
            fleet.stop()


def verify(fleet: SimFleet, template: str) -> tuple[int, dict[str, Any]]:
    args = ["verify", "--output", "json", "--deadline", "20", "--cdn", fleet.cdn_url]
    args += ["--release-manifest", template]
    for inst in fleet.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def authorities(requests: list[str]) -> set[str]:
    return {urlsplit(line.split(" ")[1]).netloc for line in requests}


def test_verify_sends_release_and_cdn_requests_through_http_proxy(
    sim: tuple[SimFleet, str], host: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, template = sim
    with LoggingProxy(host()) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        code, doc = verify(fleet, template)
    assert code == 0, doc["findings"]
    assert doc["counts"]["consistent"] == 3
    seen = authorities(proxy.requests)
    assert urlsplit(fleet.cdn_url).netloc in seen
    assert urlsplit(template).netloc in seen  # the release source
    assert not seen & {urlsplit(i.url).netloc for i in fleet.instances}  # instances direct


def test_verify_honours_no_proxy(
    sim: tuple[SimFleet, str], host: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, template = sim
    with LoggingProxy(host()) as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setenv("no_proxy", urlsplit(fleet.cdn_url).hostname or "")
        code, doc = verify(fleet, template)
    assert code == 0, doc["findings"]
    assert authorities(proxy.requests) == {urlsplit(template).netloc}


@pytest.mark.parametrize("status", [403, 407])
def test_verify_through_a_refusing_proxy_is_inconclusive_never_a_mismatch(
    sim: tuple[SimFleet, str],
    host: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    status: int,
) -> None:
    """A proxy's 403 over plain http looked like the CDN's: every file cdn-missing,
    exit 1, though nothing was known about the CDN."""
    fleet, template = sim
    with LoggingProxy(host(), refuse=True, status=status) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        code, doc = verify(fleet, template)
    assert code == 3, (doc["counts"], doc["findings"])
    assert doc["counts"].get("mismatch", 0) == 0 and doc["counts"]["inconclusive"] == 3
    assert proxy.requests  # it was asked, and said no


# ------------------------------------------------------------- the controller's proxy


async def test_egress_judges_the_destination_behind_the_proxy_not_the_proxy(
    make_fetcher, host: Callable[[], str]
) -> None:
    """The controller's fetcher: a policy, and the admin's proxy. The proxy's own
    address is nowhere on the allow-list, and a request through it is judged as if it
    went direct: the allowed CDN goes through, the other is refused unsent."""
    asked: list[tuple[str, str, int]] = []

    def policy(name: str, ip: str, port: int) -> str | None:
        asked.append((name, ip, port))
        return None if name == allowed.host else "not on the allow-list"

    with LoggingProxy(host()) as proxy, origin(host()) as allowed, origin(host()) as other:
        async with make_fetcher(egress=policy, proxies=Proxies.single(proxy.url)) as f:
            ok = await f.get_asset(allowed.url, "a.js", host_header="")
            refused = await f.get_asset(other.url, "a.js", host_header="")
    assert ok.ok and ok.hashes["sha256"] == SHA, ok.error
    assert refused.error_kind == "egress" and not refused.hashes, refused.error
    assert "not on the allow-list" in (refused.error or "")
    assert proxy.requests == [f"GET {allowed.url}a.js HTTP/1.1"]  # nothing sent for other
    assert {name for name, _, _ in asked} == {allowed.host, other.host}  # never the proxy
    assert other.connections == 0


def test_the_controller_proxy_comes_from_the_admin_configuration_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://from-env:3128")
    assert proxies_of(AdminConfig().egress) is None  # the environment is never read
    admin = AdminConfig.model_validate(
        {"egress": {"proxy": "http://proxy.corp:3128", "no_proxy": "internal.corp"}}
    )
    proxies = proxies_of(admin.egress)
    assert proxies is not None
    assert proxies.for_url("https://cdn.example.com/a.js") == "http://proxy.corp:3128"
    assert proxies.for_url("https://www.internal.corp/a.js") is None


@pytest.mark.parametrize("bad", ["https://p:3128", "http://user:pw@p:3128", "p:3128", "http://p/x"])
def test_an_admin_proxy_the_fetcher_cannot_use_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="proxy"):
        AdminConfig.model_validate({"egress": {"proxy": bad}})


@pytest.mark.parametrize("value", ["socks5://p:1080", "http://", "ftp://p:21"])
def test_a_proxy_from_the_environment_no_request_can_use_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="HTTPS_PROXY"):
        Proxies.from_environment({"HTTPS_PROXY": value})


def test_verify_with_an_unusable_proxy_exits_2_naming_the_variable(
    sim: tuple[SimFleet, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet, template = sim
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    args = ["verify", "--cdn", fleet.cdn_url, "--release-manifest", template]
    for inst in fleet.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "HTTPS_PROXY" in result.stderr


_NAMES = st.sampled_from(
    ["HTTP_PROXY", "http_proxy", "Http_Proxy", "HTTP_proxy", "HTTPS_PROXY", "https_proxy",
     "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD", "PATH", "_proxy"]
)  # fmt: skip


@given(st.dictionaries(_NAMES, st.sampled_from(["", "http://p:3128", "q:8080", "GET"])))
@example({"REQUEST_METHOD": "GET", "HTTP_PROXY": "http://p:3128"})  # CGI: ignored
@example({"REQUEST_METHOD": "GET", "http_proxy": "http://p:3128"})  # lowercase: kept
@example({"HTTP_PROXY": "http://p:3128", "http_proxy": ""})  # an empty lowercase removes
@example({"Http_Proxy": "http://p:3128"})
def test_proxy_variables_are_read_as_urllib_reads_them(environ: dict[str, str]) -> None:
    """fetch/proxy.py reads the variables itself (no urllib.request import): the same
    result as the standard library's reading of the same environment."""
    import urllib.request
    from unittest import mock

    from artifactcheck.fetch.proxy import proxy_variables

    with mock.patch.dict(os.environ, environ, clear=True):
        expected = urllib.request.getproxies_environment()
    assert proxy_variables(environ) == expected
