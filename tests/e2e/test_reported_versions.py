"""The version an instance reports on its endpoint, read as the user wrote the flag.

``--version-endpoint /version`` without a JSON pointer on an endpoint answering
``{"version": "1.0.0"}`` reads its ``version`` member and says so; a JSON body without
one, an error page, the SPA's fallback page or a value outside the version grammar is
``inconclusive`` (exit 3) with the reason in the table, never a version that conflicts
with the others (exit 1 on a correct fleet).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck_sim.web import Site


def verify(*args: str) -> Any:
    return CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)


def site_answering(fleet: Any, web: Any, host: str, body: bytes | None, **kw: Any) -> str:
    """An instance serving release 1.4.1 whose /version answers ``body`` (None: 404)."""
    overrides: dict[str, Any] = {} if body is None else {"version": body}
    return web.add(Site(root=fleet.releases["1.4.1"], overrides=overrides, **kw), host)


@pytest.fixture
def fleet(make_fleet: Any) -> Any:
    return make_fleet(1, version="1.4.1")


def base(fleet: Any, *targets: str) -> list[str]:
    args = ["--release-manifest", fleet.release_template]
    for t in targets:
        args += ["--target", t]
    return args


@pytest.mark.parametrize("with_target_version", [False, True])
def test_a_json_body_without_a_pointer_is_read_at_its_version_member(
    fleet: Any, web: Any, with_target_version: bool
) -> None:
    url = site_answering(fleet, web, f"127.93.40.{1 + with_target_version}", b'{"version":"1.4.1"}')
    target = f"{url}=1.4.1" if with_target_version else url
    table = verify(*base(fleet, target), "--version-endpoint", "/version")
    assert table.exit_code == 0, table.output
    assert "its 'version' member was read" in table.output
    assert "/version#/version" in table.output  # how to say so explicitly
    out = verify(*base(fleet, target), "--version-endpoint", "/version", "-o", "json")
    assert out.exit_code == 0, out.output
    (r,) = json.loads(out.stdout)["results"]
    assert r["verdict"] == "consistent" and r["reported_version"] == "1.4.1"
    assert r["endpoint_version"] == "1.4.1" and r["endpoint_error"] is None
    assert "'version' member was read" in r["endpoint_note"]


def test_an_explicit_pointer_needs_no_note(fleet: Any, web: Any) -> None:
    url = site_answering(fleet, web, "127.93.40.3", b'{"version":"1.4.1"}')
    out = verify(*base(fleet, url), "--version-endpoint", "/version#/version", "-o", "json")
    assert out.exit_code == 0, out.output
    (r,) = json.loads(out.stdout)["results"]
    assert r["endpoint_version"] == "1.4.1" and r["endpoint_note"] is None


@pytest.mark.parametrize(
    ("body", "said"),
    [
        pytest.param(b'{"release":"1.4.1"}', "no 'version' member", id="other-member"),
        pytest.param(b'{"version":{"app":"1.4.1"}}', "member is dict", id="object"),
        pytest.param(b'["1.4.1"]', "a JSON list", id="array"),
        pytest.param(b"<!doctype html><html></html>", "an HTML page", id="html"),
        pytest.param(b"../1.4.1", "is not a version", id="traversal"),
        pytest.param(b'{"version":"1.4.1?a"}', "is not a version", id="hostile-member"),
    ],
)
def test_no_readable_version_is_inconclusive_with_the_reason_in_the_table(
    fleet: Any, web: Any, body: bytes, said: str
) -> None:
    url = site_answering(fleet, web, "127.93.41.1", body)
    table = verify(*base(fleet, url), "--version-endpoint", "/version")
    assert table.exit_code == 3, table.output
    assert said in table.output
    assert "version endpoint /version" in table.output
    if said.startswith(("no 'version'", "member is")):
        assert "--version-endpoint '/version#/version'" in table.output


def test_an_invalid_endpoint_answer_beside_a_given_version_is_shown_not_a_conflict(
    fleet: Any, web: Any
) -> None:
    """The target says 1.4.1, the endpoint answers garbage: the content decides (exit 0),
    the endpoint's problem is in the table; it is never a signal conflict (exit 1)."""
    url = site_answering(fleet, web, "127.93.42.1", b'{"version":"1.4.1 (build 7)"}')
    table = verify(*base(fleet, f"{url}=1.4.1"), "--version-endpoint", "/version")
    assert table.exit_code == 0, table.output
    assert "signal-conflict" not in table.output
    assert "'1.4.1 (build 7)' is not a version" in table.output


def test_an_endpoint_error_is_in_the_table_not_only_in_json(fleet: Any, web: Any) -> None:
    """404, pointer typo, not JSON: the row's "why" says so, where the user looks."""
    missing = site_answering(fleet, web, "127.93.43.1", None)
    typo = site_answering(fleet, web, "127.93.43.2", b'{"version":"1.4.1"}')
    text = site_answering(fleet, web, "127.93.43.3", b"1.4.1\n")
    table = verify(*base(fleet, missing, typo, text), "--version-endpoint", "/version#/verison")
    assert table.exit_code == 3, table.output
    assert "version endpoint /version answers HTTP 404" in table.output
    assert "has no JSON member at pointer '/verison'" in table.output
    assert "is not JSON (JSON pointer '/verison' given)" in table.output
    assert table.output.count("no reported version to judge against") == 3


def test_a_forgotten_version_says_how_to_give_one(fleet: Any, web: Any) -> None:
    url = site_answering(fleet, web, "127.93.44.1", None)
    table = verify(*base(fleet, url))
    assert table.exit_code == 3, table.output
    assert "no reported version to judge against" in table.output
    assert "URL=VERSION" in table.output and "--version-endpoint" in table.output


def test_investigate_says_how_the_endpoint_was_read(fleet: Any, web: Any) -> None:
    url = site_answering(fleet, web, "127.93.45.1", b'{"version":"1.4.1","commit":"abc"}')
    args = ["investigate", url, "--release-manifest", fleet.release_template]
    out = CliRunner().invoke(main, [*args, "--version-endpoint", "/version", "-o", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    (endpoint,) = [s for s in doc["signals"]["items"] if s["source"] == "endpoint"]
    assert endpoint["value"] == "1.4.1" and endpoint["agrees"] is True
    assert "its 'version' member was read" in endpoint["note"]
