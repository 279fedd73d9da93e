"""Manifests are served by instances, and instances are hostile until proven otherwise.

Whatever the bytes, reading them ends in a Manifest (unsafe paths in ``rejected``) or
a ManifestError subclass: a TypeError, KeyError, RecursionError or UnicodeError from
a reader is a bug. The table covers the hostile cases one by one; the property
tests throw arbitrary JSON at every reader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artifactcheck.manifests import FORMATS, parse_manifest
from artifactcheck.manifests.limits import ManifestLimits, normalise_path
from artifactcheck.model.errors import ManifestError, ManifestFormatError, ManifestLimitError
from artifactcheck.model.values import Manifest

from .builds import REAL_FORMATS, real_manifest

ALL = ("auto", *FORMATS)
UNSAFE = [
    "../../etc/passwd",
    "assets/../../etc/passwd",
    "/..%2f..%2fetc/passwd",
    "http://169.254.169.254/latest",
    "HTTPS://evil.com/x.js",
    "//evil.com/x",
    "\\\\evil.com\\x",
    "/\\evil.com/x",
    "javascript:alert(1)",
    "data:text/javascript,alert(1)",
    "assets/a\x00.js",
    "assets/a%00.js",
    "assets/\ud800.js",
    " assets/a.js",
    "",
    "/",
]
GOOD = "assets/app-1234abcd.js"


def read(data: bytes | str, fmt: str, **kwargs: Any) -> Manifest | ManifestError:
    """The outcome of reading: a Manifest or a ManifestError (anything else escapes)."""
    try:
        return parse_manifest(data, format=fmt, **kwargs)
    except ManifestError as exc:
        return exc


def documents_with(path: str) -> dict[str, Any]:
    """One document per format that names ``path`` next to a good file."""
    sri = "sha256-" + "A" * 43 + "="
    return {
        "native": {
            "schema": "artifactcheck/release-manifest/v1",
            "version": "1",
            "files": {p: {"sha256": "0" * 64, "size": 1} for p in (GOOD, path)},
        },
        "vite": {
            "index.html": {"file": GOOD, "isEntry": True, "css": [path], "assets": [path]},
            "src/x.js": {"file": path},
        },
        "webpack-manifest": {"main.js": "/" + GOOD, "evil.js": path},
        "cra": {"files": {"main.js": "/" + GOOD, "evil.js": path}, "entrypoints": [path]},
        "webpack-assets": {
            "main.js": {"src": GOOD, "integrity": sri},
            "evil.js": {"src": path, "integrity": sri},
            "entrypoints": {"main": {"assets": {"js": [path, GOOD]}}},
        },
        "django": {"paths": {"app.js": GOOD, "evil.js": path}, "version": "1.1"},
        "ngsw": {
            "configVersion": 1,
            "index": "/index.html",
            "assetGroups": [{"name": "app", "urls": ["/" + GOOD, path]}],
            "hashTable": {"/" + GOOD: "a" * 40, path: "b" * 40},
        },
        "sprockets": {
            "files": {GOOD: {"logical_path": "app.js", "digest": "c" * 64}, path: {"digest": 1}},
            "assets": {"app.js": GOOD, "evil.js": path},
        },
        "propshaft": {
            "app.js": {"digested_path": GOOD, "integrity": sri},
            "evil.js": {"digested_path": path},
        },
    }


@pytest.mark.parametrize("path", UNSAFE, ids=repr)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_unsafe_path_is_rejected_and_the_rest_kept(fmt: str, path: str) -> None:
    data = json.dumps(documents_with(path)[fmt])
    manifest = parse_manifest(data, format=fmt)
    assert GOOD in manifest.files
    assert path in {raw for raw, _ in manifest.rejected}
    for kept in manifest.files:
        assert normalise_path(kept) == kept
        assert not kept.startswith(("/", "http")) and ".." not in kept.split("/")
        assert "\x00" not in kept and "evil" not in kept


@pytest.mark.parametrize("fmt", ALL)
def test_more_bytes_than_the_cap(fmt: str) -> None:
    limits = ManifestLimits(max_bytes=1000)
    data = json.dumps({f"k{i}.js": f"/k{i}.js" for i in range(100)})
    assert isinstance(read(data, fmt, limits=limits), ManifestLimitError)
    assert isinstance(read(data.encode(), fmt, limits=limits), ManifestLimitError)


@pytest.mark.parametrize("fmt", ALL)
def test_the_default_byte_cap_is_checked_before_parsing(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Structural, not timed: a document over the cap never reaches the JSON parser."""
    parsed: list[int] = []

    def counting_loads(text: Any, *args: Any, **kw: Any) -> Any:
        parsed.append(len(text))
        return real_loads(text, *args, **kw)

    real_loads = json.loads
    monkeypatch.setattr(json, "loads", counting_loads)
    huge = b'{"a.js": "' + b"x" * (9 * 1024 * 1024) + b'"}'
    for data in (huge, huge.decode()):
        got = read(data, fmt)
        assert isinstance(got, ManifestLimitError) and "more than the cap" in str(got), got
    assert parsed == []
    assert isinstance(read(b'{"a.js": "/a.js"}', fmt), (Manifest, ManifestError))
    assert parsed, "the parser is watched: a small document reaches it"


@pytest.mark.parametrize("opener", ["[", '{"a":'])
@pytest.mark.parametrize("depth", [33, 200, 10_000, 100_000])
@pytest.mark.parametrize("fmt", ALL)
def test_deep_nesting(fmt: str, depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    data = opener * depth + "1" + closer * depth
    assert isinstance(read(data, fmt), ManifestLimitError)


def big(fmt: str, n: int) -> Any:
    """A well-formed document of one format with ``n`` entries."""
    names = [f"static/c{i}.js" for i in range(n)]
    sri = "sha256-" + "A" * 43 + "="
    makers: dict[str, Callable[[], Any]] = {
        "native": lambda: {
            "schema": "artifactcheck/release-manifest/v1",
            "files": {p: {"sha256": "0" * 64, "size": 1} for p in names},
        },
        "vite": lambda: {p: {"file": p} for p in names},
        "webpack-manifest": lambda: {p: "/" + p for p in names},
        "cra": lambda: {"files": {p: "/" + p for p in names}},
        "webpack-assets": lambda: {p: {"src": p, "integrity": sri} for p in names},
        "django": lambda: {"paths": {p: p for p in names}, "version": "1.1"},
        "ngsw": lambda: {"configVersion": 1, "hashTable": {"/" + p: "a" * 40 for p in names}},
        "sprockets": lambda: {"files": {p: {"logical_path": p} for p in names}, "assets": {}},
        "propshaft": lambda: {p: {"digested_path": p} for p in names},
    }
    return makers[fmt]()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_two_hundred_thousand_entries(fmt: str) -> None:
    data = json.dumps(big(fmt, 200_000))
    started = time.perf_counter()
    assert isinstance(read(data, fmt), ManifestLimitError)
    assert isinstance(read(data, "auto", path_hint="manifest.json"), ManifestLimitError)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_up_to_the_entry_cap_is_fine(fmt: str) -> None:
    limits = ManifestLimits(max_entries=500)
    manifest = parse_manifest(json.dumps(big(fmt, 500)), format=fmt, limits=limits)
    assert len(manifest.files) == 500
    over = read(json.dumps(big(fmt, 501)), fmt, limits=limits)
    assert isinstance(over, ManifestLimitError)


@pytest.mark.parametrize(
    "doc",
    [
        {"index.html": {"file": "a.js", "css": [f"c{i}.css" for i in range(200_000)]}},
        {"files": {}, "entrypoints": [f"e{i}.js" for i in range(200_000)]},
        {"a.js": {"src": "a.js"}, "entrypoints": {"m": {"assets": {"js": ["x.js"] * 200_000}}}},
        {"configVersion": 1, "hashTable": {}, "assetGroups": [{"urls": ["/a.js"] * 200_000}]},
    ],
    ids=["vite-css", "cra-entrypoints", "webpack-assets-entrypoints", "ngsw-urls"],
)
def test_entry_cap_counts_nested_references(doc: dict[str, Any]) -> None:
    started = time.perf_counter()
    assert isinstance(read(json.dumps(doc), "auto"), ManifestLimitError)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("fmt", ALL)
@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe\x00{",
        b'{"a.js": "\xc3\x28"}',
        b'{"a.js": "/a\x00.js"}',
        b"",
        b"   ",
        b"nul",
        b'{"a.js": "/a.js"',
        b"\xef\xbb\xbf\xef\xbb\xbf{}",
        b'{"a": 1e999999}',
        b'{"a": ' + b"1" * 5000 + b"}",
        b"[]",
        b"null",
        b'"manifest.json"',
        b"42",
        b"true",
    ],
    ids=repr,
)
def test_garbage_bytes(fmt: str, data: bytes) -> None:
    assert isinstance(read(data, fmt), ManifestError)


WRONG_TYPES: list[Any] = [None, True, 0, -1, 1.5, "", "x", [], [None], {}, {"a": None}]


@pytest.mark.parametrize("wrong", WRONG_TYPES, ids=repr)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_wrong_types_in_every_field(fmt: str, wrong: Any) -> None:
    """Each field of a valid document replaced, one at a time, by each wrong type."""
    doc = documents_with(GOOD)[fmt]
    for variant in _replacements(doc, wrong):
        outcome = read(json.dumps(variant), fmt)
        if isinstance(outcome, Manifest):
            for path in outcome.files:
                assert normalise_path(path) == path


def _replacements(node: Any, wrong: Any) -> list[Any]:
    """Copies of node with one field (at any depth) replaced by ``wrong``."""
    out: list[Any] = [wrong]
    if isinstance(node, dict):
        for key, value in node.items():
            out += [{**node, key: sub} for sub in _replacements(value, wrong)]
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += [node[:index] + [sub] + node[index + 1 :] for sub in _replacements(value, wrong)]
    return out


@pytest.mark.parametrize(
    ("fmt", "doc"),
    [
        ("vite", {"a": {"file": 1, "css": "x", "assets": [None]}, "b": 3}),
        ("webpack-manifest", {"a.js": 1, "b.js": None, "c.js": ["x"]}),
        ("cra", {"files": {"a": 1, "b": None}, "entrypoints": [1, {}]}),
        ("webpack-assets", {"a": {"src": 1, "integrity": 2}, "b": 7}),
        ("django", {"paths": {"a": 1, "b": None}, "version": "1.1"}),
        ("ngsw", {"configVersion": 1, "hashTable": {}, "assetGroups": [1, {"urls": [2]}]}),
        ("sprockets", {"files": {"a": 1}, "assets": {"x": None}}),
        ("propshaft", {"a": 1, "b": {"digested_path": 2}}),
    ],
)
def test_a_manifest_of_nothing_but_garbage_is_a_format_error(fmt: str, doc: Any) -> None:
    with pytest.raises(ManifestFormatError, match=fmt):
        parse_manifest(json.dumps(doc), format=fmt)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_manifest_of_only_unsafe_paths_is_a_value_not_an_error(fmt: str) -> None:
    doc = documents_with("http://169.254.169.254/latest")[fmt]
    text = json.dumps(doc).replace(GOOD, "//evil.com/x.js")
    manifest = parse_manifest(text, format=fmt)
    assert set(manifest.files) <= {"index.html"}  # Vite's and ngsw's page is still known
    rejected = [raw for raw, _ in manifest.rejected]
    assert "http://169.254.169.254/latest" in rejected
    assert any(raw.endswith("//evil.com/x.js") for raw in rejected)


def test_long_strings_hit_the_string_cap() -> None:
    limits = ManifestLimits(max_string=100)
    doc = {"index.html": {"file": "a/" * 60 + "x.js"}}
    assert isinstance(read(json.dumps(doc), "vite", limits=limits), ManifestLimitError)
    doc2 = {"k" * 200 + ".js": {"src": "a.js", "integrity": "sha256-" + "A" * 200}}
    assert isinstance(read(json.dumps(doc2), "webpack-assets", limits=limits), ManifestLimitError)


# -- properties -------------------------------------------------------------------------

VOCABULARY = [
    "schema", "version", "files", "entrypoints", "file", "css", "assets", "imports",
    "isEntry", "src", "integrity", "paths", "hash", "configVersion", "index", "hashTable",
    "assetGroups", "urls", "logical_path", "digest", "size", "digested_path", "sha256",
    "main.js", "index.html", "start_url", "image_id",
]  # fmt: skip
STRINGS = st.one_of(
    st.sampled_from(
        [
            "artifactcheck/release-manifest/v1",
            "1.1",
            "/index.html",
            "assets/a-1234.js",
            "auto/x.js",
            "../x",
            "//evil.com/a.js",
            "sha256-" + "A" * 43 + "=",
            "sha384-" + "B" * 64 + " sha256-" + "C" * 43 + "=",
            "a" * 40,
            "b" * 64,
            "",
        ]
    ),
    st.text(max_size=30),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), STRINGS)
KEYS = st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=20))
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(KEYS, inner, max_size=6)),
    max_leaves=40,
)


def _check(doc: Any) -> None:
    data = json.dumps(doc)
    for fmt in ALL:
        for hint in (None, "manifest.json", "static/staticfiles.json"):
            outcome = read(data, fmt, location=hint)
            if isinstance(outcome, Manifest):
                for path, entry in outcome.files.items():
                    assert entry.path == path
                    assert normalise_path(path) == path
                    assert all(v == v.lower() for v in entry.hashes.values())
                outcome.fingerprint()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_any_json_value_reads_or_raises_a_manifest_error(doc: Any) -> None:
    _check(doc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, JSON, min_size=1, max_size=8))
def test_any_json_object_reads_or_raises_a_manifest_error(doc: dict[str, Any]) -> None:
    _check(doc)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_read_or_raise_a_manifest_error(data: bytes) -> None:
    for fmt in ALL:
        read(data, fmt)


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a document, as a tuple of keys/indices."""
    out = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*here, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*here, index))
    return out


def _put(node: Any, at: tuple[Any, ...], value: Any) -> Any:
    if not at:
        return value
    copy = dict(node) if isinstance(node, dict) else list(node)
    copy[at[0]] = _put(node[at[0]], at[1:], value)
    return copy


REAL_DOCS = {fmt: json.loads(real_manifest(fmt, "r1").file.read_bytes()) for fmt in REAL_FORMATS}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(REAL_DOCS)), st.data())
def test_real_manifests_with_a_random_part_replaced(fmt: str, data: st.DataObject) -> None:
    doc = REAL_DOCS[fmt]
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.sampled_from(_paths(doc)))
        doc = _put(doc, at, data.draw(JSON))
    _check(doc)
