"""No SSRF: only URLs under the base are requested, redirects included; secrets stay secret."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from artifactcheck.fetch import Fetcher
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import HttpSettings, RetrySettings
from artifactcheck_sim.web import Body, Redirect, Site, WebFleet


async def test_redirect_to_another_host_is_refused(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    victim = fleet.add(Site(overrides={"/secret": b"internal"}), host())
    base = fleet.add(Site(overrides={"/a.js": Redirect(f"{victim}secret")}), host())
    async with make_fetcher() as f:
        got = await f.get_asset(base, "a.js")
    assert got.error_kind == "redirect-off-base"
    assert got.status == 302 and not got.hashes
    assert f"{victim}secret" in (got.error or "")
    assert fleet.server(victim).request_count == 0
    assert fleet.server(victim).connections_total == 0


@pytest.mark.parametrize(
    "location",
    [
        "http://{host}:1/a.js",  # same host, other port
        "https://{host}:{port}/a.js",  # other scheme
        "/elsewhere/a.js",  # same origin, outside the base path
        "../a.js",
        "/app/%2e%2e/a.js",
        "http://user@{host}:{port}/app/a.js",
        "//169.254.169.254/latest/meta-data",
    ],
)
async def test_redirects_leaving_the_base_path_are_refused(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], location: str
) -> None:
    address = host()
    site = Site(overrides={"/elsewhere/a.js": b"no", "/a.js": b"no"})
    root = fleet.add(site, address)
    port = root.rsplit(":", 1)[1].rstrip("/")
    site.overrides["/app/x.js"] = Redirect(location.format(host=address, port=port))
    async with make_fetcher() as f:
        got = await f.get_asset(f"{root}app/", "x.js")
    assert got.error_kind == "redirect-off-base", got.error
    assert fleet.server(root).paths == ["/app/x.js"]


async def test_redirects_under_the_base_are_followed(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    site = Site(
        overrides={
            "/app/a.js": Redirect("b.js", 301),
            "/app/b.js": Redirect("/app/dir/../c.js", 307),
            "/app/c.js": Body(b"content"),
        }
    )
    root = fleet.add(site, host())
    async with make_fetcher() as f:
        got = await f.get_asset(f"{root}app/", "a.js")
    assert got.ok and got.url.endswith("/app/c.js") and got.path == "a.js"
    assert got.attempts == 3
    assert f.stats.redirects == 2


async def test_redirect_loops_stop_after_five_hops(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    site = Site(overrides={"/a.js": Redirect("/b.js"), "/b.js": Redirect("/a.js")})
    base = fleet.add(site, host())
    async with make_fetcher() as f:
        got = await f.get_asset(base, "a.js")
    assert got.error_kind == "status" and "more than 5 redirects" in (got.error or "")
    assert fleet.server(base).request_count == 6


@pytest.mark.parametrize(
    "path",
    [
        "../../etc/passwd",
        "assets/../../x.js",
        "%2e%2e/x.js",
        "http://127.0.0.1:1/x.js",
        "//127.0.0.1:1/x.js",
        "file:///etc/passwd",
    ],
)
async def test_unsafe_paths_are_refused_without_a_request(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], path: str
) -> None:
    base = fleet.add(Site(), host())
    async with make_fetcher() as f:
        asset = await f.get_asset(base, path)
        document = await f.get_document(base, path)
        assert f.stats.requests == 0
    for got in (asset, document):
        assert got.error_kind == "unsafe" and got.attempts == 0
        assert got.error and got.error.startswith("refused without a request")
    assert fleet.server(base).request_count == 0
    assert fleet.server(base).connections_total == 0


async def test_host_header_and_extra_headers(
    make_fetcher,
    fleet: WebFleet,
    host: Callable[[], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-secret-123\n")
    monkeypatch.setenv("CDN_TOKEN", "env-secret-456")
    base = fleet.add(Site(overrides={"/a.js": b"a"}), host())
    http = {
        "host_header": "shop.example",
        "headers": {"X-Plain": "plain-secret-789"},
        "header_env": {"X-Cdn-Token": "CDN_TOKEN"},
        "header_files": {"Authorization": str(token_file)},
    }
    caplog.set_level(logging.DEBUG)
    async with make_fetcher(http=http) as f:
        await f.get_asset(base, "a.js")
        await f.get_asset(base, "a.js", host_header="other.example")
        await f.get_asset(base, "a.js", host_header="")  # "" = the URL's own host
        shown = repr(f)
    first, second, third = fleet.server(base).received
    assert first.host == "shop.example" and second.host == "other.example"
    assert third.host == base.split("/")[2]
    assert first.headers["x-plain"] == "plain-secret-789"
    assert first.headers["x-cdn-token"] == "env-secret-456"
    assert first.headers["authorization"] == "file-secret-123"
    for secret in ("plain-secret-789", "env-secret-456", "file-secret-123"):
        assert secret not in shown
        assert secret not in caplog.text
    assert "X-Cdn-Token" in shown and "***" in shown


@pytest.mark.parametrize(
    ("http", "field"),
    [
        ({"header_env": {"X-Token": "ARTIFACTCHECK_TEST_UNSET"}}, "http.header_env.X-Token"),
        ({"header_files": {"X-Token": "/nonexistent/token"}}, "http.header_files.X-Token"),
        ({"headers": {"X-Token": "a\r\nInjected: 1"}}, "X-Token"),
        ({"ca_bundle": "/nonexistent/ca.pem"}, "http.ca_bundle"),
    ],
)
async def test_bad_header_configuration_names_the_field(http: dict, field: str) -> None:
    # model_copy skips the settings' own validation: the Fetcher defends on its own
    with pytest.raises(ConfigError) as info:
        Fetcher(http=HttpSettings().model_copy(update=http), retry=RetrySettings())
    assert field in str(info.value)
    assert "Injected" not in str(info.value)


async def test_fetcher_must_be_entered() -> None:
    fetcher = Fetcher(http=HttpSettings(), retry=RetrySettings())
    with pytest.raises(RuntimeError):
        await fetcher.get_asset("http://127.0.0.1:9/", "a.js")
