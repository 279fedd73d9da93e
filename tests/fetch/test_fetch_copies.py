"""A body equal byte for byte to one hashed before reuses its digests; nothing else does.

:mod:`artifactcheck.fetch.copies` keeps small bodies with their digests, by path and
size. These tests serve exact bytes from raw sockets on two loopback addresses (two
instances of one fleet) and pin what the reuse must never change: every digest is the
digest of the bytes this instance served, whatever another instance served at the same
path and size before, and whatever the headers claim.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch.copies import MIN_SIZE, KnownBodies
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.model.settings import HttpSettings, RetrySettings

BODY = (b"export const build = 'r1';\n" * 400)[:12_000]
ONE_BYTE_OFF = BODY[:-2] + b"2\n"  # the same size, the last line another build's
SMALL = b"x" * (MIN_SIZE - 1)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _serving(body: bytes, *, etag: str = '"5f3a-2ee0"') -> RawServer:
    """An instance serving ``body`` at every path, with the same validators as any other
    (nginx's ETag is the file's mtime and size: two builds can share it)."""

    def answer(_conn: RawConn, _head: bytes) -> bytes:
        return response(200, body, headers={"ETag": etag, "Content-Type": "text/javascript"})

    return RawServer("127.0.0.1", serve_each(answer))


async def test_a_copy_reuses_the_digest_and_a_body_one_byte_off_never_does() -> None:
    with (
        _serving(BODY) as first,
        _serving(BODY) as copy,
        _serving(ONE_BYTE_OFF) as drifted,
        _serving(ONE_BYTE_OFF) as drifted_copy,
    ):
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            got = [
                await fetcher.get_asset(server.url, "assets/app-4f2a.js")
                for server in (first, copy, drifted, drifted_copy, first)
            ]
        assert all(g.ok for g in got), [g.error for g in got]
        assert [g.hashes["sha256"] for g in got] == [
            _sha(BODY),
            _sha(BODY),
            _sha(ONE_BYTE_OFF),
            _sha(ONE_BYTE_OFF),
            _sha(BODY),
        ]
        assert _sha(BODY) != _sha(ONE_BYTE_OFF)
        # the copy and the drifted copy; the drifted body and the last (the slot then held
        # the other build's bytes) were hashed
        assert fetcher.stats.hashes_reused == 2
        assert [g.size for g in got] == [len(BODY)] * 5


async def test_a_kept_body_answers_only_for_the_same_algorithms() -> None:
    with _serving(BODY) as first, _serving(BODY) as copy:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            plain = await fetcher.get_asset(first.url, "app.js")
            integrity = await fetcher.get_asset(copy.url, "app.js", algorithms=("sha384",))
        assert plain.hashes == {"sha256": _sha(BODY)}
        assert integrity.hashes == {
            "sha256": _sha(BODY),
            "sha384": hashlib.sha384(BODY).hexdigest(),
        }
        assert fetcher.stats.hashes_reused == 0


async def test_a_document_kept_with_its_body_is_the_bytes_this_instance_served() -> None:
    with _serving(BODY) as first, _serving(ONE_BYTE_OFF) as drifted, _serving(BODY) as copy:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            got = [
                await fetcher.get_document(server.url, "index.html")
                for server in (first, drifted, copy)
            ]
        assert [g.body for g in got] == [BODY, ONE_BYTE_OFF, BODY]
        assert [g.hashes["sha256"] for g in got] == [_sha(BODY), _sha(ONE_BYTE_OFF), _sha(BODY)]
        assert fetcher.stats.hashes_reused == 0  # the drifted body took the path's slot


async def test_a_small_body_is_always_hashed() -> None:
    with _serving(SMALL) as first, _serving(SMALL) as copy:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            got = [await fetcher.get_asset(s.url, "tiny.js") for s in (first, copy)]
        assert [g.hashes["sha256"] for g in got] == [_sha(SMALL)] * 2
        assert fetcher.stats.hashes_reused == 0


def test_the_bodies_held_stay_under_the_limit_the_least_recently_used_dropped() -> None:
    known = KnownBodies(limit=3 * MIN_SIZE)
    bodies = {name: name.encode() * MIN_SIZE for name in "abcd"}  # MIN_SIZE bytes each
    for name in "abc":
        known.keep(f"http://10.0.0.1/{name}.js", ("sha256",), bodies[name], {"sha256": name})
    assert known.held == 3 * MIN_SIZE
    assert known.digests("http://10.0.0.2/a.js", ("sha256",), bodies["a"]) == {"sha256": "a"}
    known.keep("http://10.0.0.1/d.js", ("sha256",), bodies["d"], {"sha256": "d"})  # b goes
    assert known.held == 3 * MIN_SIZE and len(known) == 3
    assert known.digests("http://10.0.0.2/b.js", ("sha256",), bodies["b"]) is None
    assert known.digests("http://10.0.0.2/a.js", ("sha256",), bodies["a"]) == {"sha256": "a"}
    assert known.digests("http://10.0.0.2/d.js", ("sha256",), bodies["d"]) == {"sha256": "d"}
    known.keep("http://10.0.0.1/big.js", ("sha256",), b"z" * (4 * MIN_SIZE), {"sha256": "z"})
    assert known.held == 3 * MIN_SIZE  # over the limit alone: never kept


def test_the_key_is_the_path_and_query_not_the_host() -> None:
    known = KnownBodies()
    body = b"q" * MIN_SIZE
    known.keep("https://web-1.internal:8443/app.js?v=2", ("sha256",), body, {"sha256": "d"})
    assert known.digests("https://web-2.internal/app.js?v=2", ("sha256",), body) == {"sha256": "d"}
    assert known.digests("https://web-2.internal/app.js?v=3", ("sha256",), body) is None
    assert known.digests("https://web-2.internal/app.js", ("sha256",), body) is None


_VARIANTS = [BODY, ONE_BYTE_OFF, BODY[:-1] + b"\x00", b"\x00" + BODY[1:], BODY[:-1]]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["/a.js", "/b.js"]), st.integers(0, len(_VARIANTS) - 1)),
        max_size=30,
    ),
    st.integers(MIN_SIZE, 4 * len(BODY)),
)
def test_whatever_was_kept_the_digests_given_are_those_of_the_bytes(
    reads: list[tuple[str, int]], limit: int
) -> None:
    known = KnownBodies(limit=limit)
    for path, variant in reads:
        body = _VARIANTS[variant]
        url = f"http://127.0.0.{variant + 1}{path}"
        digests = known.digests(url, ("sha256",), body)
        if digests is None:
            digests = {"sha256": _sha(body)}
            known.keep(url, ("sha256",), body, digests)
        assert digests == {"sha256": _sha(body)}
        assert known.held <= limit


@pytest.mark.parametrize(
    ("url", "root"), [("http://h", True), ("http://h:80", True), ("", True), ("h/x", False)]
)
def test_a_url_without_a_path_is_keyed_as_the_root(url: str, root: bool) -> None:
    known = KnownBodies()
    body = b"r" * MIN_SIZE
    known.keep(url, ("sha256",), body, {"sha256": "r"})
    found = known.digests("http://other/", ("sha256",), body)
    assert found == ({"sha256": "r"} if root else None)
