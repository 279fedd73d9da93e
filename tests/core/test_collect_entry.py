"""The entry-point matcher of the manifest collector: a reference names a recorded file
only when exactly one matches, never one of several picked by chance."""

from __future__ import annotations

import pytest

from artifactcheck.manifests._collect import Collector
from artifactcheck.manifests.limits import ManifestLimits


def collect(files: list[str], ref: str, *, prefix: str = "") -> tuple[str | None, Collector]:
    out = Collector("cra", ManifestLimits(), prefix=prefix)
    for path in files:
        out.add(path, where="files")
    return out.add_entry_ref(ref, where="entrypoints[0]"), out


@pytest.mark.parametrize(
    ("files", "ref", "found", "entries"),
    [
        pytest.param(
            ["static/js/main.js"],
            "static/js/main.js",
            "static/js/main.js",
            ["static/js/main.js"],
            id="exact",
        ),
        pytest.param(
            ["app/static/js/main.js"],
            "static/js/main.js",
            "app/static/js/main.js",
            ["app/static/js/main.js"],
            id="one-prefix-segment",
        ),
        pytest.param(
            ["a/b/c/main.js"], "main.js", "a/b/c/main.js", ["a/b/c/main.js"], id="three-segments"
        ),
        pytest.param(
            ["a/b/c/d/main.js"], "main.js", "main.js", ["main.js"], id="four-segments-too-far"
        ),
        pytest.param(
            ["a/x/main.js", "b/x/main.js"],
            "x/main.js",
            "x/main.js",
            ["x/main.js"],
            id="two-match-none-chosen",
        ),
        pytest.param(
            ["a/main.js", "b/c/main.js"],
            "main.js",
            "main.js",
            ["main.js"],
            id="two-at-different-depths",
        ),
        pytest.param(
            ["a/x/main.js", "b/y/main.js"],
            "x/main.js",
            "a/x/main.js",
            ["a/x/main.js"],
            id="one-of-two-suffixes",
        ),
        pytest.param(["main.js", "a/main.js"], "main.js", "main.js", ["main.js"], id="exact-wins"),
        pytest.param(
            ["static/js/other.js"],
            "static/js/main.js",
            "static/js/main.js",
            ["static/js/main.js"],
            id="unknown-is-added",
        ),
    ],
)
def test_entry_ref_exactly_one(files: list[str], ref: str, found: str, entries: list[str]) -> None:
    path, out = collect(files, ref)
    assert path == found
    assert sorted(p for p, e in out.files.items() if e.entry) == entries


def test_entry_ref_after_files_added_later_is_still_exactly_one() -> None:
    out = Collector("cra", ManifestLimits())
    out.add("a/x/main.js", where="files")
    assert out.add_entry_ref("x/main.js", where="e") == "a/x/main.js"
    out.add("b/x/main.js", where="files")  # the suffix index learns new files
    assert out.add_entry_ref("x/main.js", where="e") == "x/main.js"
    assert not out.files["b/x/main.js"].entry


def test_entry_ref_with_prefix_tries_the_raw_reference() -> None:
    path, out = collect(["/static/js/main.js"], "static/js/main.js", prefix="app")
    assert path == "static/js/main.js"
    assert out.files["static/js/main.js"].entry
