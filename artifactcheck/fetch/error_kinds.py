"""Which :class:`~artifactcheck.model.errors.ErrorKind` a failed request is, and why.

Our own HTTP/1.1 transport, directly and through HTTP proxies, raises the tree below
(a transport injected into the Fetcher for a test raises it too). It keeps the shape
and the names of httpx's (a ``ConnectTimeout`` is a ``TimeoutException`` is a
``TransportError``), so a reader who knows httpx knows it, without importing httpx:
httpx's import is most of a small check's start-up (docs/http-stacks.md).

:data:`RULES` is the one table from exceptions to kinds and messages; the first row
that matches wins. The messages are what a user reads in a report, so they name the
setting that ran out (``connect_timeout``, ``read_timeout``).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from typing import Final, Literal

from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import Record
from artifactcheck.model.settings import HttpSettings

__all__ = [
    "RULES",
    "ConnectError",
    "ConnectTimeout",
    "EgressRefused",
    "HeaderRefused",
    "ProtocolViolation",
    "ProxyError",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "RequestTimeout",
    "TransportError",
    "UnsupportedProtocol",
    "classified",
    "classify",
    "root_message",
    "unexpected",
]


# --------------------------------------------------------------------------- the lean tree


class TransportError(Exception):
    """Any failure of our own transport (httpx: ``TransportError``)."""


class TimeoutException(TransportError):
    """A timeout of connecting or reading."""


class ConnectTimeout(TimeoutException):
    """No connection within ``connect_timeout``."""


class ReadTimeout(TimeoutException):
    """No data within ``read_timeout``."""


class NetworkError(TransportError):
    """The network failed under a connection."""


class ConnectError(NetworkError):
    """No connection could be made (refused, unreachable, TLS handshake)."""


class ReadError(NetworkError):
    """A read failed on an open connection."""


class ProtocolError(TransportError):
    """The HTTP exchange broke its rules."""


class RemoteProtocolError(ProtocolError):
    """The server broke HTTP/1.1 (or closed the connection mid-message)."""


class LocalProtocolError(ProtocolError):
    """We would have broken HTTP/1.1: nothing is sent."""


class UnsupportedProtocol(TransportError):
    """A URL scheme other than http and https."""


class ProtocolViolation(RemoteProtocolError):
    """A response no correct server sends (impossible status, framing we refuse to guess
    at, numbers no body has): an error of that response, never retried."""


class HeaderRefused(LocalProtocolError):
    """A request header that would corrupt the request on the wire: nothing is sent."""


class ProxyError(TransportError):
    """The HTTP proxy refused to open a tunnel (``CONNECT`` answered other than 2xx)."""


class EgressRefused(TransportError):
    """The egress policy refused the address a new connection would go to."""


class RequestTimeout(Exception):
    """The whole request's deadline (``request_timeout``) passed before its response
    was read completely.

    Raised by the transport that keeps the deadline itself (the connection's one timer,
    instead of an ``asyncio.timeout`` per request) and answered by the Fetcher alone, as
    it answers its own ``asyncio.timeout``. Deliberately no :class:`TransportError` and
    no ``OSError`` (so no ``TimeoutError``): whatever catches :func:`classified` errors
    (the draining of an unused error body) must let it pass, as it lets a cancellation
    pass; caught there, a dripping error body would be a status, not a timeout.
    """


# --------------------------------------------------------------------------- messages


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """An exception and its causes, outermost first (transports wrap the real error)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _text(exc: BaseException) -> str:
    """One line of text for an exception (a message quoting a hostile header may span
    lines)."""
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    return " ".join(text.split())


_MAX_MESSAGE = 300  # an error message quoting a hostile header is cut here


def root_message(exc: BaseException) -> str:
    """The most specific message in an exception chain, at most ``_MAX_MESSAGE`` long."""
    messages = [_text(e) for e in _chain(exc) if _text(e)]
    message = messages[-1] if messages else type(exc).__name__
    return message if len(message) <= _MAX_MESSAGE else message[:_MAX_MESSAGE] + "..."


def unexpected(exc: BaseException) -> tuple[ErrorKind, str]:
    """(kind, message) for an exception no row of the table expects: a bug, or a
    response so broken that a library failed on it; an error of that one fetch."""
    return ErrorKind.PROTOCOL, f"unexpected error: {type(exc).__name__}: {root_message(exc)}"


def _verify_reason(exc: BaseException) -> str:
    return getattr(exc, "verify_message", None) or _text(exc)


# --------------------------------------------------------------------------- the table


class MessageContext(Record):
    """What a message may name: the settings, and whether the body was being read."""

    http: HttpSettings
    reading_body: bool

    @property
    def body(self) -> str:
        return " while reading the body" if self.reading_body else ""


class Rule(Record):
    """One row: exceptions of ``types`` are ``kind``, told with ``message``.

    ``scope`` "chain" matches any exception in the chain (our own exceptions and ssl
    errors are found under the errors that wrap them); "error" matches the error itself.
    ``phase`` limits a row to errors before or while the body is read.
    """

    types: tuple[type[BaseException], ...]
    kind: ErrorKind
    message: Callable[[BaseException, MessageContext], str]
    scope: Literal["chain", "error"] = "error"
    phase: Literal["any", "body"] = "any"


def _lost(e: BaseException, c: MessageContext) -> str:
    return f"connection lost{c.body}: {root_message(e)}"


def _cannot_connect(e: BaseException, c: MessageContext) -> str:
    return f"cannot connect: {root_message(e)}"


#: The one table from transport exceptions to (kind, message); the first match wins.
RULES: Final[tuple[Rule, ...]] = (
    # Ours: raised by the HTTP/1.1 transport, wherever a library wrapped them.
    Rule((EgressRefused,), ErrorKind.EGRESS, lambda e, c: _text(e), "chain"),
    Rule((HeaderRefused,), ErrorKind.CONFIG, lambda e, c: _text(e), "chain"),
    Rule(
        (ProtocolViolation,),
        ErrorKind.PROTOCOL,
        lambda e, c: f"invalid HTTP response: {_text(e)}",
        "chain",
    ),
    # TLS.
    Rule(
        (ssl.SSLCertVerificationError,),
        ErrorKind.TLS,
        lambda e, c: f"TLS certificate verification failed: {_verify_reason(e)}",
        "chain",
    ),
    Rule(
        (ssl.SSLError,),
        ErrorKind.TLS,
        lambda e, c: f"TLS handshake failed: {root_message(e)}",
        "chain",
    ),
    # Timeouts.
    Rule(
        (ConnectTimeout,),
        ErrorKind.TIMEOUT,
        lambda e, c: f"connect timed out (connect_timeout={c.http.connect_timeout}s)",
    ),
    Rule(
        (ReadTimeout,),
        ErrorKind.TIMEOUT,
        lambda e, c: f"no data for {c.http.read_timeout}s{c.body} (read_timeout)",
    ),
    Rule(
        (TimeoutException,),
        ErrorKind.TIMEOUT,
        lambda e, c: f"timed out: {root_message(e)}",
    ),
    # A body that ended early.
    Rule((RemoteProtocolError, ReadError), ErrorKind.TRUNCATED, _lost, phase="body"),
    # No usable connection.
    Rule(
        (ProxyError,),
        ErrorKind.CONNECT,
        lambda e, c: f"the HTTP proxy refused the request: {root_message(e)}",
    ),
    Rule((ConnectError,), ErrorKind.CONNECT, _cannot_connect),
    Rule(
        (RemoteProtocolError,),
        ErrorKind.CONNECT,
        lambda e, c: f"invalid HTTP response: {root_message(e)}",
    ),
    Rule(
        (NetworkError, OSError),
        ErrorKind.CONNECT,
        lambda e, c: f"connection failed: {root_message(e)}",
    ),
)


def classified() -> tuple[type[BaseException], ...]:
    """Every exception class the table classifies (what a transport may raise)."""
    return (TransportError, OSError)


def classify(
    exc: BaseException, *, reading_body: bool, http: HttpSettings
) -> tuple[ErrorKind, str]:
    """(kind, message) for an exception raised by a transport: the first row of
    :data:`RULES` that matches."""
    context = MessageContext(http, reading_body)
    chain = list(_chain(exc))
    for rule in RULES:
        if rule.phase == "body" and not reading_body:
            continue
        for e in chain if rule.scope == "chain" else (exc,):
            if isinstance(e, rule.types):
                return rule.kind, rule.message(e, context)
    # any other transport error: no usable connection
    return ErrorKind.CONNECT, f"{type(exc).__name__}: {root_message(exc)}"
