"""A small body received with its head is taken at once, with the streamed result.

:meth:`artifactcheck.fetch.http1.Body.buffered` hands :func:`artifactcheck.fetch.response.read`
a Content-Length body that is all on the connection already, without a stream. These
tests pin what it must keep: exactly the declared bytes are hashed, kept and counted,
the connection goes back to the pool, and bytes after the body (a response nobody
asked for) are never taken into it and keep the connection out of the pool.
"""

from __future__ import annotations

import hashlib

from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.settings import HttpSettings, RetrySettings

BODY = b"console.log('v1');\n" * 40


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_a_body_sent_with_its_head_is_hashed_and_its_connection_reused() -> None:
    def answer(_conn: RawConn, _head: bytes) -> bytes:
        return response(200, BODY)  # head and body in one send

    with RawServer("127.0.0.1", serve_each(answer)) as server:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            first = await fetcher.get_asset(server.url, "app.js", algorithms=("sha384",))
            second = await fetcher.get_document(server.url, "app.js")
        assert first.ok and second.ok, (first.error, second.error)
        assert first.hashes == {
            "sha256": _sha(BODY),
            "sha384": hashlib.sha384(BODY).hexdigest(),
        }
        assert first.size == second.size == len(BODY)
        assert first.body is None and second.body == BODY
        assert server.connections == 1  # read completely: pooled, then reused
        assert fetcher.stats.bytes_read == 2 * len(BODY)


async def test_an_empty_body_sent_with_its_head_is_the_empty_content() -> None:
    def answer(_conn: RawConn, _head: bytes) -> bytes:
        return response(200, b"")

    with RawServer("127.0.0.1", serve_each(answer)) as server:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            got = [await fetcher.get_document(server.url, "empty.txt") for _ in range(2)]
        assert [(g.ok, g.size, g.body, g.hashes["sha256"]) for g in got] == [
            (True, 0, b"", _sha(b""))
        ] * 2
        assert server.connections == 1


async def test_bytes_after_the_body_are_not_taken_and_the_connection_is_not_pooled() -> None:
    forged = response(200, b"forged")

    def answer(conn: RawConn, _head: bytes) -> bytes:
        if conn.index == 0:  # a second response nobody asked for, in the same send
            return response(200, BODY) + forged
        return response(200, BODY + b"!")

    with RawServer("127.0.0.1", serve_each(answer)) as server:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            first = await fetcher.get_document(server.url, "app.js")
            second = await fetcher.get_document(server.url, "app.js")
        assert (first.ok, first.body, first.hashes["sha256"]) == (True, BODY, _sha(BODY))
        # the forged response is never read as the answer to the next request
        assert (second.ok, second.body) == (True, BODY + b"!")
        assert server.connections == 2


async def test_a_body_of_exactly_the_cap_sent_with_its_head_is_read() -> None:
    def answer(_conn: RawConn, _head: bytes) -> bytes:
        return response(200, BODY)

    with RawServer("127.0.0.1", serve_each(answer)) as server:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            at_cap = await fetcher.get_document(server.url, "a.js", max_bytes=len(BODY))
            over = await fetcher.get_document(server.url, "a.js", max_bytes=len(BODY) - 1)
        assert (at_cap.ok, at_cap.body) == (True, BODY)
        assert over.error_kind is ErrorKind.TOO_LARGE and over.body is None
