"""urls: every URL the fetcher builds or follows stays under its base URL."""

from __future__ import annotations

import pytest

from artifactcheck.fetch.urls import base_directory, host_key, is_under, join, resolve_redirect
from artifactcheck.model.errors import ArtifactCheckError, UnsafeReferenceError

BASE = "http://10.0.0.7:8080/"


@pytest.mark.parametrize(
    ("base", "path", "expected"),
    [
        (BASE, "assets/index-Dk.js", "http://10.0.0.7:8080/assets/index-Dk.js"),
        (BASE, "/assets/a.js", "http://10.0.0.7:8080/assets/a.js"),
        (BASE, "./assets//a.js", "http://10.0.0.7:8080/assets/a.js"),
        (BASE, "assets/a.js?v=1#x", "http://10.0.0.7:8080/assets/a.js"),
        (BASE, "assets/a%20b.js", "http://10.0.0.7:8080/assets/a%20b.js"),
        (BASE, "assets/ä.js", "http://10.0.0.7:8080/assets/%C3%A4.js"),
        ("https://h/app/", "/version", "https://h/app/version"),
        ("https://h/app", "x.js", "https://h/app/x.js"),
        ("https://h/app/?token=1", "x.js", "https://h/app/x.js"),
    ],
)
def test_join(base: str, path: str, expected: str) -> None:
    assert join(base, path) == expected
    assert is_under(base_directory(base), expected)


@pytest.mark.parametrize(
    "path",
    [
        "../etc/passwd",
        "assets/../../x",
        "/../x",
        "a\\..\\..\\x",
        "%2e%2e/x",
        "http://169.254.169.254/latest/meta-data",
        "https://evil.example/x.js",
        "//evil.example/x.js",
        "javascript:alert(1)",
        "",
        " assets/a.js",
        "a\nb",
        "a/%3Fq.js",  # decodes to a query: ambiguous, refused by normalise_path
        "%252e%252e/x",  # encoded twice
        # servlet containers drop path parameters, so "..;" is ".." to them
        "assets/..;/..;/x",
        "assets/..;jsessionid=1/x",
        "assets/%2e%2e;/x",
        "assets/.;/x",
        "..;/x",
    ],
)
def test_join_refuses_paths_leaving_the_base(path: str) -> None:
    with pytest.raises(UnsafeReferenceError):
        join(BASE, path)


def test_join_refuses_non_strings_with_a_typed_error() -> None:
    with pytest.raises(ArtifactCheckError):
        join(BASE, 42)


@pytest.mark.parametrize("base", ["ftp://h/", "/relative/", "http:///nohost", "http://u:p@h/"])
def test_join_refuses_unusable_bases(base: str) -> None:
    with pytest.raises(ValueError):
        join(base, "a.js")


@pytest.mark.parametrize(
    ("base", "url", "under"),
    [
        (BASE, "http://10.0.0.7:8080/assets/a.js", True),
        (BASE, "http://10.0.0.7:8080/", True),
        ("http://h/", "http://h:80/a", True),
        ("https://h/", "https://H:443/a", True),
        (BASE, "https://10.0.0.7:8080/a", False),
        (BASE, "http://10.0.0.8:8080/a", False),
        (BASE, "http://10.0.0.7:8081/a", False),
        (BASE, "http://10.0.0.7/a", False),
        ("http://h/app/", "http://h/app/x", True),
        ("http://h/app/", "http://h/app", True),
        ("http://h/app/", "http://h/application/x", False),
        ("http://h/app/", "http://h/other", False),
        ("http://h/app/", "http://h/app/../other", False),
        ("http://h/app/", "http://h/app/%2e%2e/other", False),
        ("http://h/app/", "http://h/app/x/../y", True),
        ("http://h/", "http://h/../../etc", False),
        ("http://h/", "http://user@h/a", False),
        ("http://h/", "http://h@evil/a", False),
        ("http://h/", "http://h:notaport/a", False),
        ("http://h/", "not a url", False),
        ("http://h/", "file:///etc/passwd", False),
        ("http://[::1]:8080/", "http://[::1]:8080/a", True),
        ("http://h/app/", "http://h/app/assets/..;/..;/x", False),
        ("http://h/app/", "http://h/app/a/..;x/b", False),
        ("http://h/app/", "http://h/app/a;v=1/b", True),  # parameters on a plain segment
        ("http://h/app/", "http://h/app/..a;/b", True),
    ],
)
def test_is_under(base: str, url: str, under: bool) -> None:
    assert is_under(base, url) is under


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://10.0.0.7:8080/a", "http://10.0.0.7:8080"),
        ("http://H/a", "http://h:80"),
        ("https://h/a", "https://h:443"),
        ("https://[::1]/a", "https://[::1]:443"),
    ],
)
def test_host_key(url: str, key: str) -> None:
    assert host_key(url) == key


@pytest.mark.parametrize(
    ("location", "target"),
    [
        ("b.js", "http://h/app/b.js"),
        ("/app/c.js", "http://h/app/c.js"),
        ("http://other/x", "http://other/x"),  # resolved here, refused by is_under
    ],
)
def test_resolve_redirect(location: str, target: str) -> None:
    assert resolve_redirect("http://h/app/a.js", location) == target


@pytest.mark.parametrize(
    "location",
    [
        "http://[",
        "http://[::1",
        "/a\x00b",
        "/a\x7fb",
        "/a\r\nb",
        "/a\tb",
        "//h:99999/x",
        "/" * 9000,
    ],
)
def test_resolve_redirect_refuses_unusable_values(location: str) -> None:
    with pytest.raises(ValueError):
        resolve_redirect("http://h/app/a.js", location)
