"""JSON caps and path hygiene shared by every reader."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from artifactcheck.manifests.limits import (
    DEFAULT_LIMITS,
    ManifestLimits,
    load_json,
    normalise_path,
    unusable_name,
)
from artifactcheck.model.errors import (
    ManifestFormatError,
    ManifestLimitError,
    UnsafeReferenceError,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("assets/a.js", "assets/a.js"),
        ("./assets/a.js", "assets/a.js"),
        ("/assets/a.js", "assets/a.js"),
        ("assets//a.js", "assets/a.js"),
        ("assets/./a.js", "assets/a.js"),
        ("assets/a.js?v=3#frag", "assets/a.js"),
        ("assets/a%20b.js", "assets/a b.js"),
        ("assets\\a.js", "assets/a.js"),
        ("assets/ünïcode-ß.js", "assets/ünïcode-ß.js"),
        ("a..b.js", "a..b.js"),
        ("100%.js", "100%.js"),
        ("a%zz.js", "a%zz.js"),
    ],
)
def test_normalise_path(raw: str, expected: str) -> None:
    assert normalise_path(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "/",
        "./",
        " a.js",
        "a.js\n",
        "a\x00.js",
        "a%00.js",
        "a%0a.js",
        "a\x7f.js",
        "a\x85.js",
        "\ud800.js",
        "..",
        "../a.js",
        "a/../../b.js",
        "a/%2e%2e/%2e%2e/b.js",
        "/..",
        "http://169.254.169.254/latest",
        "//evil.com/x",
        "\\\\evil.com\\x",
        "/\\evil.com/x",
        "\\/evil.com/x",
        "javascript:alert(1)",
        "file:///etc/passwd",
        "?only=query",
        "a%2541.js",
        "a%253F.js",
        "a%3Fb.js",
        "a%23b.js",
        "%68ttps:/evil.com/x.js",
        "/https%3A//evil.com/x.js",
        "%2F%2F..%2Fx",
        "#only-fragment",
    ],
)
def test_unsafe_paths(raw: str) -> None:
    with pytest.raises(UnsafeReferenceError):
        normalise_path(raw)


def test_normalise_path_types_and_length() -> None:
    with pytest.raises(ManifestFormatError):
        normalise_path(3)
    with pytest.raises(ManifestLimitError):
        normalise_path("a" * 5000)


def test_load_json_caps() -> None:
    limits = ManifestLimits(max_bytes=10, max_depth=3)
    assert load_json(b'{"a":[1]}', limits) == {"a": [1]}
    assert load_json(b'\xef\xbb\xbf{"a":1}', limits) == {"a": 1}
    with pytest.raises(ManifestLimitError):
        load_json(b'{"a":"' + b"x" * 10 + b'"}', limits)
    with pytest.raises(ManifestLimitError):
        load_json("é" * 6, limits)  # 6 characters, 12 bytes
    with pytest.raises(ManifestLimitError, match="nested"):
        load_json(b"[[[[1]]]]", limits)
    with pytest.raises(ManifestFormatError, match="UTF-8"):
        load_json(b'"\xff"', DEFAULT_LIMITS)
    with pytest.raises(ManifestFormatError, match="JSON"):
        load_json(b"{", DEFAULT_LIMITS)


def test_depth_counts_containers_not_brackets_in_strings() -> None:
    limits = ManifestLimits(max_depth=2)
    assert load_json('{"a": "[[[[{{{{", "b": [1]}', limits) == {"a": "[[[[{{{{", "b": [1]}


@settings(max_examples=1000, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(
            st.sampled_from(list("/\\.%?#:@ 2aAfF5-_")),
            st.characters(codec="utf-8"),
        ),
        max_size=24,
    )
)
def test_normalise_path_is_a_fixed_point(raw: str) -> None:
    """Paths are normalised again wherever they become URLs: that must change nothing."""
    try:
        path = normalise_path(raw)
    except (UnsafeReferenceError, ManifestFormatError, ManifestLimitError):
        return
    assert normalise_path(path) == path
    assert not path.startswith("/") and ".." not in path.split("/")


# every class of character no URL path can carry: C0, DEL, C1, a lone surrogate
# (what an undecodable byte in a file name becomes under surrogateescape)
UNUSABLE = ["\x00", "\x01", "\x1f", "\x7f", "\x80", "\x85", "\x9f", "\ud800", "\udcff"]


@pytest.mark.parametrize("char", UNUSABLE)
def test_unusable_name_is_the_one_rule_for_names_no_url_can_carry(char: str) -> None:
    """The rule the served manifests' paths and a release image's files share
    (release.registry.tree uses it): each class refused, in a name and in a path."""
    assert unusable_name(f"assets/a{char}b.js")
    with pytest.raises(UnsafeReferenceError):
        normalise_path(f"assets/a{char}b.js")


@pytest.mark.parametrize("name", ["assets/a.js", "a b.js", "ünïcode-ß.js", "\xa0nbsp", "100%.js"])
def test_usable_names_pass_the_rule(name: str) -> None:
    assert not unusable_name(name)
