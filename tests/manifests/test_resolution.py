"""A served manifest's references resolve as a browser resolves them (RFC 3986).

``parse_manifest(..., location=, mount=)``: a host-absolute value resolves against the
origin, a relative one against the manifest's own URL, and both are then made relative
to the mount (the target's path plus the prefix); one outside it, or on another host,
is rejected, never a file. Each case is checked against ``urllib.parse.urljoin``.
"""

from __future__ import annotations

import json
from urllib.parse import urljoin, urlsplit

import pytest

from artifactcheck.manifests import parse_manifest

ORIGIN = "https://shop.example"


def _webpack(values: dict[str, str]) -> bytes:
    return json.dumps(values).encode()


def _browser(location: str, mount: str, value: str) -> str | None:
    """Where a browser fetches ``value`` read in the manifest at ``location`` (from the
    origin), as a path below ``mount``; None outside it or on another origin."""
    url = urljoin(f"{ORIGIN}/{location.lstrip('/')}", value)
    parts = urlsplit(url)
    if f"{parts.scheme}://{parts.netloc}" != ORIGIN:
        return None
    head = f"/{mount}/" if mount else "/"
    return parts.path[len(head) :] if parts.path.startswith(head) else None


CASES = [
    # (location from the origin, mount, value)
    ("/build/manifest.json", "build", "/build/app.2c3f04b6.js"),  # Encore's default
    ("/build/manifest.json", "build", "/build/images/mark.1f833f10.svg"),
    ("/build/manifest.json", "build", "app.2c3f04b6.js"),  # publicPath auto: relative
    ("/build/manifest.json", "build", "./js/app.js"),
    ("/build/manifest.json", "build", "/static/js/main.js"),  # outside the mount
    ("/build/manifest.json", "build", "https://cdn.example/build/app.js"),  # another origin
    ("/build/manifest.json", "build", "//cdn.example/build/app.js"),
    ("/manifest.json", "", "/static/js/main.ca16dfb6.js"),  # CRA at the root
    ("/app/asset-manifest.json", "app", "/app/static/js/main.js"),  # CRA homepage /app/
    ("/app/build/manifest.json", "app/build", "/app/build/app.js"),  # target /app/, /build/
    ("/app/build/manifest.json", "app", "/app/build/app.js"),  # prefix "" under /app/
    ("/build/sub/manifest.json", "build", "x/y.js"),  # relative below the manifest
]


@pytest.mark.parametrize(("location", "mount", "value"), CASES)
def test_a_reference_resolves_where_a_browser_fetches_it(
    location: str, mount: str, value: str
) -> None:
    manifest = parse_manifest(
        _webpack({"a.js": value, "b.css": "/unrelated/b.css"}),
        format="webpack-manifest",
        location=location,
        mount=mount,
    )
    want = _browser(location, mount, value)
    rejected = {raw for raw, _ in manifest.rejected}
    if want is None:
        assert value in rejected, manifest.rejected
        assert len(manifest.files) + len(rejected) == 2  # each value once: a file or refused
    else:
        assert want in manifest.files, (want, sorted(manifest.files))
        assert value not in rejected


def test_a_host_absolute_value_outside_the_mount_is_rejected_with_where_it_points() -> None:
    manifest = parse_manifest(
        _webpack({"app.js": "/build/app.js", "old.js": "/assets/old.js"}),
        format="webpack-manifest",
        location="/build/manifest.json",
        mount="build",
    )
    assert sorted(manifest.files) == ["app.js"]
    ((raw, why),) = manifest.rejected
    assert raw == "/assets/old.js"
    assert "/build/" in why and "not fetched" in why


def test_without_a_mount_paths_stay_relative_to_the_origin() -> None:
    """The target is the origin's root and no prefix: a host-absolute path is its own
    release path (what every root-served build already relied on)."""
    manifest = parse_manifest(
        _webpack({"app.js": "/build/app.js", "rel.js": "rel.js"}),
        format="webpack-manifest",
        location="build/manifest.json",
    )
    assert sorted(manifest.files) == ["build/app.js", "build/rel.js"]
    assert manifest.rejected == ()


def test_a_location_relative_to_the_mount() -> None:
    """A location without ``/`` is below the mount (the prefix), as ``--manifest-path``
    without ``/`` is."""
    manifest = parse_manifest(
        _webpack({"app.js": "/build/app.js", "rel.js": "rel.js"}),
        format="webpack-manifest",
        location="manifest.json",
        mount="build",
    )
    assert sorted(manifest.files) == ["app.js", "rel.js"]
