"""``pages``: which entry pages are read, from YAML, the CRD and ``--page``."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.cli.options import spec_from_options
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import MAX_PAGES, load_spec


def _opts(**given: Any) -> dict[str, Any]:
    """Every shared flag unset, as click passes them, then ``given``."""
    from artifactcheck.cli.main import verify

    opts: dict[str, Any] = {}
    for param in verify.params:
        assert param.name is not None
        opts[param.name] = () if getattr(param, "multiple", False) else None
    opts.update(given)
    return opts


def test_default_is_the_target_itself() -> None:
    assert load_spec({}).pages == ["/"]


def test_yaml_and_crd_spelling() -> None:
    assert load_spec({"pages": ["/", "/login", "/docs/intro/"]}).pages == [
        "/",
        "/login",
        "/docs/intro/",
    ]
    assert load_spec({"pages": []}).pages == []


@pytest.mark.parametrize(
    ("pages", "message"),
    [
        (["login"], "starting with one '/'"),
        (["//evil.example/x"], "starting with one '/'"),
        (["https://evil.example/"], "starting with one '/'"),
        (["/a?b=1"], "no query"),
        (["/a#top"], "no query"),
        (["/a b"], "space"),
        (["/a\x00"], "plain path"),
        (["/a\\b"], "plain path"),
        (["/../etc/passwd"], "climb"),
        (["/a/./b"], "climb"),
        (["/a", "/a"], "same page twice"),
        ([f"/p{i}" for i in range(MAX_PAGES + 1)], f"at most {MAX_PAGES}"),
        (["/" + "a" * 2048], "more than 2048"),
        ("/", "valid list"),
    ],
)
def test_bad_pages_are_refused_naming_the_field(pages: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="pages") as caught:
        load_spec({"pages": pages})
    assert message in str(caught.value)


def test_page_flag_adds_to_the_target_itself() -> None:
    spec = spec_from_options(
        _opts(targets=("http://127.0.0.1:1/=1",), pages=("/login", "/docs/")), preflight=False
    )
    assert spec.pages == ["/", "/login", "/docs/"]


def test_page_flag_adds_to_the_config_files_pages(tmp_path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("pages: ['/home']\n")
    spec = spec_from_options(_opts(config=str(config), pages=("/login",)), preflight=False)
    assert spec.pages == ["/home", "/login"]


def test_a_bad_page_flag_is_named() -> None:
    with pytest.raises(ConfigError, match="--page"):
        spec_from_options(_opts(targets=("http://127.0.0.1:1/=1",), pages=("login",)))


def test_bad_page_flag_exits_2() -> None:
    result = CliRunner().invoke(
        main, ["verify", "--target", "http://127.0.0.1:1/=1", "--page", "x"]
    )
    assert result.exit_code == 2, result.output
    assert "--page" in result.output


def test_help_names_the_flag() -> None:
    text = " ".join(CliRunner().invoke(main, ["verify", "--help"]).output.split())
    assert "--page PATH" in text
