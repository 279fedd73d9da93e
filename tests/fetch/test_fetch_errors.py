"""The one table from transport exceptions to kinds and messages (fetch/error_kinds.py):
each error the transport raises, before and while the body is read, is the kind a
report shows, told in words that name the setting that ran out."""

from __future__ import annotations

import ssl

import pytest

from artifactcheck.fetch import error_kinds
from artifactcheck.model.settings import HttpSettings

HTTP = HttpSettings(connect_timeout=3.0, read_timeout=7.0)


def unverified(reason: str) -> ssl.SSLCertVerificationError:
    """The error ssl raises for a chain it cannot verify (its reason on the side)."""
    error = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] failed")
    error.verify_message = reason
    return error


#: error, (kind, words) before the body, (kind, words) while reading the body
TABLE: list[tuple[BaseException, tuple[str, str], tuple[str, str]]] = [
    (
        error_kinds.ConnectTimeout("x"),
        ("timeout", "connect timed out (connect_timeout=3.0s)"),
        ("timeout", "connect timed out (connect_timeout=3.0s)"),
    ),
    (
        error_kinds.ReadTimeout("x"),
        ("timeout", "no data for 7.0s (read_timeout)"),
        ("timeout", "no data for 7.0s while reading the body (read_timeout)"),
    ),
    (error_kinds.TimeoutException("x"), ("timeout", "timed out: x"), ("timeout", "timed out: x")),
    (
        error_kinds.ConnectError("refused"),
        ("connect", "cannot connect: refused"),
        ("connect", "cannot connect: refused"),
    ),
    (
        error_kinds.ReadError("reset"),
        ("connect", "connection failed: reset"),
        ("truncated", "connection lost while reading the body: reset"),
    ),
    (
        error_kinds.RemoteProtocolError("closed"),
        ("connect", "invalid HTTP response: closed"),
        ("truncated", "connection lost while reading the body: closed"),
    ),
    (
        error_kinds.ProtocolViolation("status 600"),
        ("protocol", "invalid HTTP response: status 600"),
        ("protocol", "invalid HTTP response: status 600"),
    ),
    (
        error_kinds.ProxyError("CONNECT a:443 answered 407"),
        ("connect", "the HTTP proxy refused the request: CONNECT a:443 answered 407"),
        ("connect", "the HTTP proxy refused the request: CONNECT a:443 answered 407"),
    ),
    (
        error_kinds.EgressRefused("not allowed"),
        ("egress", "not allowed"),
        ("egress", "not allowed"),
    ),
    (error_kinds.HeaderRefused("bad header"), ("config", "bad header"), ("config", "bad header")),
    (
        error_kinds.UnsupportedProtocol("ftp"),
        ("connect", "UnsupportedProtocol: ftp"),
        ("connect", "UnsupportedProtocol: ftp"),
    ),
    (
        unverified("unable to get local issuer certificate"),
        ("tls", "TLS certificate verification failed: unable to get local issuer certificate"),
        ("tls", "TLS certificate verification failed: unable to get local issuer certificate"),
    ),
    (
        ConnectionResetError("reset by peer"),
        ("connect", "connection failed: reset by peer"),
        ("connect", "connection failed: reset by peer"),
    ),
]


@pytest.mark.parametrize(("error", "before", "during"), TABLE, ids=lambda v: type(v).__name__)
def test_each_transport_error_is_its_kind_in_each_phase(
    error: BaseException, before: tuple[str, str], during: tuple[str, str]
) -> None:
    assert error_kinds.classify(error, reading_body=False, http=HTTP) == before
    assert error_kinds.classify(error, reading_body=True, http=HTTP) == during


def test_our_errors_are_found_under_the_errors_that_wrap_them() -> None:
    try:
        try:
            raise error_kinds.EgressRefused("10.0.0.1 is another tenant's")
        except error_kinds.EgressRefused as inner:
            raise OSError("connect failed") from inner
    except OSError as outer:
        got = error_kinds.classify(outer, reading_body=False, http=HTTP)
    assert got == ("egress", "10.0.0.1 is another tenant's")


def test_every_error_of_the_table_is_caught_as_classified() -> None:
    for error, _, _ in TABLE:
        assert isinstance(error, error_kinds.classified()), error
