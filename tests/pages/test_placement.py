"""Where a page's reference is requested: the instance, the CDN, or never."""

from __future__ import annotations

import base64
import hashlib

import pytest

from artifactcheck.manifests.page import parse_integrity, parse_page
from artifactcheck.manifests.placement import Where, place_reference
from artifactcheck.manifests.subresource import IntegrityVerdict, check_integrity

BASE = "http://10.0.0.5:8080/"
CDN = "https://cdn.example/static/"


@pytest.mark.parametrize(
    ("url", "where", "asked", "release"),
    [
        ("http://10.0.0.5:8080/static/a.js", Where.INSTANCE, "static/a.js", "a.js"),
        ("http://10.0.0.5:8080/static/a.js?v=3", Where.INSTANCE, "static/a.js?v=3", "a.js"),
        ("HTTP://10.0.0.5:8080/static/a.js#x", Where.INSTANCE, "static/a.js", "a.js"),
        ("http://10.0.0.5:8080/assets/a.css", Where.INSTANCE, "assets/a.css", None),
        ("http://10.0.0.5:8080/login", Where.INSTANCE, "login", None),
        ("https://cdn.example/static/a.js?v=1", Where.CDN, "a.js?v=1", "a.js"),
        ("https://CDN.example:443/static/img/b.png", Where.CDN, "img/b.png", "img/b.png"),
        ("https://cdn.example/other/a.js", Where.OTHER_ORIGIN, None, None),
        ("http://cdn.example/static/a.js", Where.OTHER_ORIGIN, None, None),
        ("https://evil.example/static/a.js", Where.OTHER_ORIGIN, None, None),
        ("http://10.0.0.5:8081/static/a.js", Where.OTHER_ORIGIN, None, None),
        ("https://10.0.0.5:8080/static/a.js", Where.OTHER_ORIGIN, None, None),
        ("http://www.site.example/static/a.css", Where.INSTANCE, "static/a.css", "a.css"),
        ("http://10.0.0.5:8080/a%2500.js", Where.UNUSABLE, None, None),
        ("ftp://10.0.0.5/a.js", Where.UNUSABLE, None, None),
    ],
)
def test_place(url: str, where: Where, asked: str | None, release: str | None) -> None:
    got = place_reference(
        url, instance_base=BASE, cdn_base=CDN, prefix="static/", host_header="www.site.example"
    )
    assert (got.where, got.request_path, got.release_path) == (where, asked, release)
    assert got.requested == (where in (Where.INSTANCE, Where.CDN))
    if not got.requested:
        assert got.reason


def test_without_a_prefix_the_release_path_is_the_request_path_less_its_query() -> None:
    got = place_reference("http://10.0.0.5:8080/assets/a%20b.js?v=3", instance_base=BASE)
    assert (got.request_path, got.release_path) == ("assets/a%20b.js?v=3", "assets/a b.js")


def test_outside_the_instance_base_url_is_not_requested() -> None:
    got = place_reference(
        "http://10.0.0.5:8080/other/a.js", instance_base="http://10.0.0.5:8080/app/"
    )
    assert got.where is Where.OUTSIDE_BASE and not got.requested


def test_without_a_host_header_the_site_name_is_another_origin() -> None:
    got = place_reference("http://www.site.example/a.css", instance_base=BASE)
    assert got.where is Where.OTHER_ORIGIN


def test_base_href_to_another_host_moves_nothing_off_the_origin() -> None:
    page = parse_page(
        b'<base href="http://evil.example/"><script src="/assets/a.js"></script>',
        "http://10.0.0.5:8080/",
    )
    (ref,) = page.references
    placed = place_reference(ref.url, instance_base=BASE, cdn_base=CDN)
    assert placed.where is Where.OTHER_ORIGIN and not placed.requested


def sri(algo: str, data: bytes) -> str:
    return f"{algo}-" + base64.b64encode(hashlib.new(algo, data).digest()).decode()


def digests(data: bytes) -> dict[str, str]:
    return {a: hashlib.new(a, data).hexdigest() for a in ("sha256", "sha384", "sha512")}


BODY = b"console.log('served')"
OTHER = b"console.log('other')"


@pytest.mark.parametrize(
    ("integrity", "verdict"),
    [
        (sri("sha256", BODY), IntegrityVerdict.OK),
        (sri("sha384", BODY), IntegrityVerdict.OK),
        (sri("sha512", BODY), IntegrityVerdict.OK),
        (sri("sha256", OTHER), IntegrityVerdict.MISMATCH),
        # any of several hashes of the strongest algorithm
        (f"{sri('sha384', OTHER)} {sri('sha384', BODY)}", IntegrityVerdict.OK),
        # only the strongest algorithm counts: a matching sha256 does not save a bad sha512
        (f"{sri('sha256', BODY)} {sri('sha512', OTHER)}", IntegrityVerdict.MISMATCH),
        (f"{sri('sha256', OTHER)} {sri('sha512', BODY)}", IntegrityVerdict.OK),
        # unknown algorithms are ignored, as browsers ignore them
        (f"md5-abc {sri('sha256', BODY)}", IntegrityVerdict.OK),
        ("md5-abc sha1-xyz", IntegrityVerdict.UNSUPPORTED),
        ("", IntegrityVerdict.UNSUPPORTED),
        (sri("sha256", BODY) + "?opt", IntegrityVerdict.OK),
    ],
)
def test_subresource_integrity(integrity: str, verdict: IntegrityVerdict) -> None:
    assert check_integrity(parse_integrity(integrity), digests(BODY)) is verdict


def test_strongest_digest_not_computed_is_never_a_mismatch() -> None:
    pairs = parse_integrity(sri("sha512", OTHER))
    assert check_integrity(pairs, {"sha256": hashlib.sha256(BODY).hexdigest()}) is (
        IntegrityVerdict.NOT_COMPUTED
    )
