"""HTTP observation of instances and the CDN: the only module that imports httpx.

Everything the network edge must guarantee lives here, in one place
(docs/architecture.md, docs/reliability.md):

- every GET has connect/read timeouts (``httpx.Timeout``) and a whole-request limit
  (``asyncio.timeout`` around headers *and* body); the per-instance deadline is the
  caller's ``asyncio.timeout``, and cancellation closes the connection it interrupts;
- bodies are hashed while streaming, under a byte cap that is enforced on the decoded
  bytes piece by piece (a gzip bomb stops at the cap, it is never inflated whole);
- one retry loop: connection errors, timeouts, 5xx and 429 only, exponential backoff
  with full jitter, ``Retry-After`` honoured, and a :class:`RetryBudget` per run so a
  failing fleet never receives more than a small multiple of its normal load;
- concurrency bounded in total and per host by semaphores we own, over ONE client
  whose connections are kept alive for the whole run;
- only URLs under the given base URL are requested, and redirects are followed by
  hand, only while they stay under that base (no SSRF);
- per-request problems are returned as values (:class:`~artifactcheck.model.values.Fetched`
  with ``error_kind``), never raised: "could not observe" must stay apart from
  "observed something wrong", and a fleet check must not die of one bad pod; this
  holds for any exception inside one fetch, only cancellation propagates;
- every byte of a response is hostile: impossible statuses, oversized numbers, transfer
  codings other than one ``chunked``, more than :data:`MAX_CONTENT_CODINGS` content
  codings and unusable ``Location`` values are protocol errors of that response; a
  kept-alive connection is reused only while its socket is silent, and bytes arriving
  while no request is outstanding condemn it unread (HTTP/1.1 has no request ids: an
  early response would be taken as the answer to the next request);
- every header we send is checked where it is written (an RFC 9110 token for a name, no
  control character in a value), so no configuration can put a second header line on
  the wire.

The transport under httpx is chosen deliberately (docs/benchmarks.md):
httpx's own async pool degrades with many hosts, and httpx over aiohttp spends most of
its CPU per request in the two clients' layers. ``http.transport`` "auto" is
:class:`_Http1Transport`, a lean HTTP/1.1 keep-alive transport on asyncio protocols
(about 3x less CPU per request at 1,000 hosts); "aiohttp" puts
``httpx_aiohttp.AiohttpTransport`` over an aiohttp connector we configure ourselves.
Requests go straight to the transport (not through ``AsyncClient.send``): redirects are
followed by hand and cookies refused, so the client's flows would only cost CPU.
httpx-aiohttp 0.2 maps aiohttp errors imprecisely (a refused connection and a read
timeout both surface as ``httpx.ConnectTimeout``), so errors are classified from the
original aiohttp exception kept in ``__cause__``. It passes the ``sni_hostname``
extension to aiohttp as ``server_hostname`` and aiohttp keys pooled connections by it,
so Host header + SNI work with both transports and no fallback is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.cookiejar
import ipaddress
import logging
import os
import random
import re
import select
import socket
import ssl
import sys
import threading
import time
import zlib
from collections import Counter, OrderedDict, deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Protocol, Self, cast

import httpx

from artifactcheck.fetch import urls
from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.errors import (
    ArtifactCheckError,
    BodyTooLarge,
    ConfigError,
    FetchConnectError,
    FetchError,
    FetchStatusError,
    FetchTimeout,
    RetryBudgetExhausted,
    UnsafeReferenceError,
)
from artifactcheck.model.settings import HttpSettings, RetrySettings
from artifactcheck.model.values import Fetched

__all__ = [
    "EVIDENCE_HEADERS",
    "ErrorKind",
    "FetchStats",
    "Fetcher",
    "MAX_CONTENT_CODINGS",
    "HostStats",
    "RetryBudget",
    "as_error",
    "backoff_delay",
    "build_ssl_context",
    "parse_retry_after",
]

ErrorKind = Literal[
    "timeout",
    "connect",
    "tls",
    "status",
    "too-large",
    "unsafe",
    "redirect-off-base",
    "budget",
    "decode",
    "truncated",
    "protocol",
    "egress",
    "config",
]

#: Response headers kept as evidence in :attr:`Fetched.headers` (lowercase names).
EVIDENCE_HEADERS: Final = (
    "etag",
    "age",
    "cache-control",
    "cache-status",
    "x-cache",
    "x-cache-status",
    "cf-cache-status",
    "x-served-by",
    "server",
    "content-length",
    "content-type",
    "content-encoding",
    "last-modified",
    "date",
    "via",
    "retry-after",
)

_EVIDENCE = frozenset(EVIDENCE_HEADERS)
MAX_REDIRECTS: Final = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_RETRY_KINDS = frozenset({"timeout", "connect", "truncated"})
_DRAIN_LIMIT = 64 * 1024  # read at most this much of an error body to keep the connection
_PIECE = 256 * 1024  # largest decoded piece held at once
_KEEPALIVE = 30.0  # seconds an idle pooled connection is kept
_USER_AGENT = "artifactcheck"
_MEMO_LIMIT = 65_536  # base URLs / hosts memoised before the memo is reset


# --------------------------------------------------------------------------- budget


class RetryBudget:
    """Retries allowed per run: ``minimum + ratio * first_attempts``; shareable, thread-safe.

    A budget caps the extra load a run adds when many servers fail at once (the
    incident where retries put 28x the normal load on a fleet): retries beyond it are
    not made.
    """

    def __init__(self, *, ratio: float = 0.2, minimum: int = 10) -> None:
        if ratio < 0 or minimum < 0:
            raise ValueError("ratio and minimum must be >= 0")
        self._ratio = ratio
        self._minimum = minimum
        self._first_attempts = 0
        self._retries = 0
        self._denied = 0
        self._lock = threading.Lock()  # one run may fetch from several loops or threads

    @classmethod
    def from_settings(cls, retry: RetrySettings) -> RetryBudget:
        """The budget described by ``retry.budget_ratio`` and ``retry.budget_min``."""
        return cls(ratio=retry.budget_ratio, minimum=retry.budget_min)

    def record_first_attempt(self) -> None:
        """Count one new request (not a retry); each one earns ``ratio`` retries."""
        with self._lock:
            self._first_attempts += 1

    def try_spend(self) -> bool:
        """Take one retry from the budget; False (and nothing taken) when it is spent."""
        with self._lock:
            if self._retries + 1 > self._minimum + self._ratio * self._first_attempts:
                self._denied += 1
                return False
            self._retries += 1
            return True

    @property
    def first_attempts(self) -> int:
        """Requests recorded so far, retries excluded."""
        return self._first_attempts

    @property
    def retries(self) -> int:
        """Retries taken so far."""
        return self._retries

    @property
    def denied(self) -> int:
        """Retries refused because the budget was spent."""
        return self._denied

    @property
    def allowance(self) -> float:
        """Retries allowed for the first attempts recorded so far."""
        with self._lock:
            return self._minimum + self._ratio * self._first_attempts

    def __repr__(self) -> str:
        return (
            f"RetryBudget(retries={self._retries}, allowance={self.allowance:g}, "
            f"first_attempts={self._first_attempts}, denied={self._denied})"
        )


# --------------------------------------------------------------------------- stats


@dataclass(slots=True)
class HostStats:
    """Counters for one ``scheme://host:port``."""

    requests: int = 0
    retries: int = 0
    errors: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0


@dataclass(slots=True)
class FetchStats:
    """What a :class:`Fetcher` did: load it put on the fleet, for reports and tests."""

    requests: int = 0  # requests sent: first attempts, retries and redirect hops
    first_attempts: int = 0  # get_document/get_asset calls that sent a request
    retries: int = 0
    redirects: int = 0
    budget_denied: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    bytes_read: int = 0  # bytes off the wire, before decoding
    errors: Counter[str] = field(default_factory=Counter)  # error_kind -> results
    per_host: dict[str, HostStats] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def build_ssl_context(http: HttpSettings) -> ssl.SSLContext:
    """The one client TLS context of a run: system CAs plus ``http.ca_bundle``.

    Building a context loads and parses every trusted CA, which is slow; httpx
    builds one per client unless given one, so a run builds exactly one and shares it
    with every connection and with :func:`artifactcheck.fetch.tls.probe_certificate`.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if not http.verify_tls:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        paths = ssl.get_default_verify_paths()
        if not any(p and os.path.exists(p) for p in (paths.cafile, paths.capath)):
            import certifi  # a minimal image without a system store: use httpx's default

            ctx.load_verify_locations(cafile=certifi.where())
        if http.ca_bundle:
            try:
                ctx.load_verify_locations(cafile=http.ca_bundle)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"http.ca_bundle: cannot load {http.ca_bundle}: {exc}") from exc
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


# RFC 9110 section 5.1 field-name (a token) and section 5.5 field-value: no control
# characters other than HTAB, so no CR, LF or NUL can end a header line early.
_FIELD_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FIELD_VALUE_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _header_problem(name: str, value: str) -> str | None:
    """Why a request header must not be sent (None when it may); never quotes the value,
    which may be a secret."""
    if not _FIELD_NAME.fullmatch(name):
        return f"request header name {name[:60]!r} is not an RFC 9110 token"
    if _FIELD_VALUE_BAD.search(value):
        return f"value of request header {name!r} contains CR, LF, NUL or another control"
    return None


def _configured_headers(http: HttpSettings) -> dict[str, str]:
    """Extra request headers with their secret values resolved; ConfigError names the field."""
    headers = dict(http.headers)
    for name, var in http.header_env.items():
        value = os.environ.get(var)
        if value is None:
            raise ConfigError(f"http.header_env.{name}: environment variable {var} is not set")
        headers[name] = value.strip()
    for name, path in http.header_files.items():
        try:
            headers[name] = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(f"http.header_files.{name}: cannot read {path}: {reason}") from exc
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0"):  # never echo the value: it is a secret
            raise ConfigError(f"http headers: value of {name!r} contains a line break")
        problem = _header_problem(name, value)
        if problem is not None:
            raise ConfigError(f"http headers: {problem}")
    if http.host_header is not None:
        problem = _header_problem("host", http.host_header)
        if problem is not None:
            raise ConfigError(f"http.host_header: {problem}")
    return headers


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or HTTP-date), or None."""
    if not value:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 and seconds == seconds else None  # NaN-safe
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def backoff_delay(
    attempt: int, retry: RetrySettings, rng: random.Random, retry_after: float | None = None
) -> float:
    """Seconds before try ``attempt + 1``: full jitter, or the server's capped Retry-After.

    Full jitter (``uniform(0, min(max_delay, base_delay * 2**(attempt-1)))``) spreads a
    fleet's retries instead of synchronising them into waves.
    """
    if retry_after is not None:
        return min(retry_after, retry.max_retry_after)
    ceiling = min(retry.max_delay, retry.base_delay * 2 ** (attempt - 1))
    return rng.uniform(0, ceiling)


def as_error(fetched: Fetched) -> ArtifactCheckError | None:
    """The typed error matching a failed :class:`Fetched`, for callers that raise."""
    kind, message = fetched.error_kind, f"{fetched.url}: {fetched.error}"
    if fetched.error is None:
        return None
    if kind == "timeout":
        return FetchTimeout(message)
    if kind in ("connect", "tls", "truncated"):
        return FetchConnectError(message)
    if kind == "status":
        return FetchStatusError(message, status=fetched.status or 0)
    if kind == "too-large":
        return BodyTooLarge(message)
    if kind == "budget":
        return RetryBudgetExhausted(message)
    if kind in ("unsafe", "redirect-off-base"):
        return UnsafeReferenceError(message)
    if kind == "config":
        return ConfigError(message)
    return FetchError(message)


def _evidence(headers: httpx.Headers) -> dict[str, str]:
    """The evidence headers present in a response, lowercase names, values joined."""
    out: dict[str, str] = {}
    for name, value in headers.multi_items():  # one pass: Headers lookups are linear
        name = name.lower()
        if name in _EVIDENCE:
            out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def _content_length(headers: httpx.Headers) -> int | None:
    """Content-Length as an int, None when absent or unusable."""
    raw = headers.get("content-length")
    if raw is None:
        return None
    text = raw.split(",")[0].strip()
    if not text.isdigit() or len(text) > _MAX_DIGITS:  # int() of 4,300+ digits raises
        return None
    return int(text)


def _response_problem(response: httpx.Response) -> str | None:
    """Why a response from any transport cannot be read as content, None when it can.

    A status outside 100..599, or a transfer coding other than one final ``chunked``
    (the bytes handed over would still be encoded, and hashed as if they were the file).
    """
    if not 100 <= response.status_code <= 599:
        return f"invalid status code {response.status_code}"
    codings = [
        c.strip().lower()
        for value in response.headers.get_list("transfer-encoding")
        for c in value.split(",")
        if c.strip()
    ]
    if codings and codings != ["chunked"]:
        return f"unsupported Transfer-Encoding {', '.join(codings)[:80]!r}"
    return None


def _server_name(host_header: str) -> str:
    """The TLS server name for a Host header value: the host without its port."""
    host = host_header.strip()
    if host.startswith("["):  # [v6]:port
        return host[1 : host.index("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


async def _raw_chunks(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body as it came off the wire; an async generator, closed by the caller."""
    if response.is_stream_consumed:  # an injected transport that pre-read the body
        yield response.content
        return
    async with contextlib.aclosing(cast(AsyncGenerator[bytes, None], response.aiter_raw())) as raw:
        async for chunk in raw:
            yield chunk


# --------------------------------------------------------------------------- decoding


class _DecodeError(Exception):
    """A compressed body could not be decoded, or uses an encoding we cannot decode."""

    kind = "decode"


class _CodingChainTooLong(_DecodeError):
    """More stacked content codings than any real server sends: a protocol violation."""

    kind = "protocol"


#: Content codings a caller may ask for by name (``get_asset(accept_encoding=...)``).
_ACCEPTED_CODINGS = frozenset({"identity", "gzip", "deflate", "br"})

#: Content codings accepted in one response, as urllib3 2.6 does after CVE-2025-66418:
#: each coding is one more decoder in the chain, and a header listing thousands of them
#: would cost a decoder (and a stack frame per piece) each.
MAX_CONTENT_CODINGS: Final = 5


class _Decoder(Protocol):
    """Undoes one Content-Encoding in bounded pieces, so the cap is checked between them."""

    def feed(self, data: bytes) -> Iterator[bytes]: ...
    def flush(self) -> Iterator[bytes]: ...
    @property
    def complete(self) -> bool: ...


class _Identity:
    """No content coding: bytes pass through unchanged."""

    complete = True

    def feed(self, data: bytes) -> Iterator[bytes]:
        yield data

    def flush(self) -> Iterator[bytes]:
        return iter(())


class _Zlib:
    """gzip / deflate, inflated at most ``_PIECE`` bytes at a time (bomb-safe)."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._raw_fallback = not self._gzip  # "deflate" is zlib-wrapped, or raw in the wild
        self._started = False
        self._d = self._new()

    def _new(self, wbits: int | None = None) -> Any:
        if wbits is None:
            wbits = 16 + zlib.MAX_WBITS if self._gzip else zlib.MAX_WBITS
        return zlib.decompressobj(wbits)

    @property
    def complete(self) -> bool:
        return bool(self._d.eof)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._d.decompress(data, _PIECE)
            except zlib.error as exc:
                if self._raw_fallback and not self._started:
                    self._raw_fallback = False
                    self._d = self._new(-zlib.MAX_WBITS)
                    continue
                raise _DecodeError(f"invalid compressed data: {exc}") from exc
            self._started = True
            if out:
                yield out
            data = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data
                if self._gzip and rest.strip(b"\0"):  # another gzip member follows
                    self._d = self._new()
                    data = rest
                    continue
                return
            if not data and len(out) < _PIECE:
                return

    def flush(self) -> Iterator[bytes]:
        yield from self.feed(b"")


class _Brotli:  # pragma: no cover - brotli is optional and not installed in CI
    """br, only with a brotli module that can bound its output (max_output_length)."""

    def __init__(self) -> None:
        import brotli

        self._d = brotli.Decompressor()
        self._error = brotli.error

    @property
    def complete(self) -> bool:
        return bool(self._d.is_finished())

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            out = self._d.process(data, max_output_length=_PIECE)
            while True:
                if out:
                    yield out
                if len(out) < _PIECE and self._d.can_accept_more_data():
                    return
                out = self._d.process(b"", max_output_length=_PIECE)
        except self._error as exc:
            raise _DecodeError(f"invalid brotli data: {exc}") from exc

    def flush(self) -> Iterator[bytes]:
        return iter(())


def _brotli_usable() -> bool:
    """True when brotli can bound its output; without that a br bomb cannot be capped."""
    try:
        import brotli
    except ImportError:
        return False
    return hasattr(brotli.Decompressor, "can_accept_more_data")


_BROTLI = _brotli_usable()


class _Chain:
    """Several content codings, undone last-applied first."""

    def __init__(self, decoders: list[_Decoder]) -> None:
        self._decoders = decoders

    @property
    def complete(self) -> bool:
        return all(d.complete for d in self._decoders)

    def _through(self, pieces: Iterable[bytes], index: int) -> Iterator[bytes]:
        if index == len(self._decoders):
            yield from pieces
            return
        decoder = self._decoders[index]
        for piece in pieces:
            yield from self._through(decoder.feed(piece), index + 1)

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._through([data], 0)

    def flush(self) -> Iterator[bytes]:
        for index, decoder in enumerate(self._decoders):
            yield from self._through(decoder.flush(), index + 1)


def _decoder_for(content_encoding: str | None) -> tuple[_Decoder, str | None]:
    """A decoder for a Content-Encoding header and the encoding to report (None: identity)."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    if len(codings) > MAX_CONTENT_CODINGS:
        raise _CodingChainTooLong(
            f"Content-Encoding lists {len(codings)} codings, more than the"
            f" {MAX_CONTENT_CODINGS} accepted"
        )
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Identity(), None
    decoders: list[_Decoder] = []
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip", "deflate"):
            decoders.append(_Zlib(coding))
        elif coding == "br" and _BROTLI:  # pragma: no cover - optional dependency
            decoders.append(_Brotli())
        else:
            raise _DecodeError(f"unsupported Content-Encoding {coding!r}")
    decoder: _Decoder = decoders[0] if len(decoders) == 1 else _Chain(decoders)
    return decoder, ", ".join(codings)


# --------------------------------------------------------------------------- errors


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """An exception and its causes, outermost first (transports wrap the real error)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _text(exc: BaseException) -> str:
    """One line of text for an exception (aiohttp's HttpProcessingError spans lines)."""
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    return " ".join(text.split())


_MAX_MESSAGE = 300  # an error message quoting a hostile header is cut here


def _root_message(exc: BaseException) -> str:
    """The most specific message in an exception chain, at most ``_MAX_MESSAGE`` long."""
    messages = [_text(e) for e in _chain(exc) if _text(e)]
    message = messages[-1] if messages else type(exc).__name__
    return message if len(message) <= _MAX_MESSAGE else message[:_MAX_MESSAGE] + "..."


class _NoAiohttp:
    """Stand-ins for aiohttp's exception types while aiohttp is not loaded: then no
    exception can be one of them, and verify need not import aiohttp at all."""

    class ClientError(Exception):
        pass

    ClientConnectorCertificateError = ClientSSLError = ConnectionTimeoutError = ClientError
    ServerTimeoutError = ClientPayloadError = ClientConnectorError = ClientError
    ServerDisconnectedError = ClientOSError = ClientResponseError = ClientError


def _aiohttp_errors() -> Any:
    """The aiohttp module once loaded (by the "aiohttp" transport), else stand-ins."""
    return sys.modules.get("aiohttp") or _NoAiohttp


def _classify(exc: BaseException, *, reading_body: bool, http: HttpSettings) -> tuple[str, str]:
    """(error_kind, message) for a transport exception from either transport."""
    aiohttp = _aiohttp_errors()
    chain = list(_chain(exc))
    for e in chain:
        if isinstance(e, _EgressRefused):
            return "egress", _text(e)
        if isinstance(e, _HeaderRefused):
            return "config", _text(e)
        if isinstance(e, _ProtocolViolation):
            return "protocol", f"invalid HTTP response: {_text(e)}"
    for e in chain:
        if isinstance(e, aiohttp.ClientConnectorCertificateError):
            e = e.certificate_error
        if isinstance(e, ssl.SSLCertVerificationError):
            reason = getattr(e, "verify_message", None) or _text(e)
            return "tls", f"TLS certificate verification failed: {reason}"
    for e in chain:
        if isinstance(e, ssl.SSLError | aiohttp.ClientSSLError):
            return "tls", f"TLS handshake failed: {_root_message(e)}"
    original = next((e for e in chain if isinstance(e, aiohttp.ClientError)), None)
    if original is not None:  # httpx-aiohttp's own mapping is imprecise: use the source
        exc = original
    body = " while reading the body" if reading_body else ""
    match exc:
        case aiohttp.ConnectionTimeoutError() | httpx.ConnectTimeout() | httpx.PoolTimeout():
            return "timeout", f"connect timed out (connect_timeout={http.connect_timeout}s)"
        case aiohttp.ServerTimeoutError() | httpx.ReadTimeout() | httpx.WriteTimeout():
            return "timeout", f"no data for {http.read_timeout}s{body} (read_timeout)"
        case httpx.TimeoutException():
            return "timeout", f"timed out: {_root_message(exc)}"
        case aiohttp.ClientPayloadError():
            return "truncated", f"body ended early: {_root_message(exc)}"
        case aiohttp.ClientConnectorError():
            return "connect", f"cannot connect: {_root_message(exc)}"
        case aiohttp.ServerDisconnectedError() | aiohttp.ClientOSError() if reading_body:
            return "truncated", f"connection lost{body}: {_root_message(exc)}"
        case httpx.RemoteProtocolError() | httpx.ReadError() if reading_body:
            return "truncated", f"connection lost{body}: {_root_message(exc)}"
        case aiohttp.ServerDisconnectedError():
            return "connect", "server closed the connection without a response"
        case httpx.ConnectError():
            return "connect", f"cannot connect: {_root_message(exc)}"
        case httpx.RemoteProtocolError() | aiohttp.ClientResponseError():
            return "connect", f"invalid HTTP response: {_root_message(exc)}"
        case httpx.NetworkError() | aiohttp.ClientOSError() | OSError():
            return "connect", f"connection failed: {_root_message(exc)}"
    return "connect", f"{type(exc).__name__}: {_root_message(exc)}"


# --------------------------------------------------------------------------- transport


_MAX_HEAD = 64 * 1024  # largest response head accepted
_MAX_LINE = 4 * 1024  # largest chunk-size or trailer line accepted
_HIGH_WATER = 1024 * 1024  # received but unread bytes before the socket is paused
_MAX_INTERIM = 8  # 1xx responses skipped before the final one
_MAX_DIGITS = 18  # a Content-Length longer than this is no real length (int() caps 4,300)
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")
_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VALUE_BAD = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


class _ProtocolViolation(httpx.RemoteProtocolError):
    """A response no correct server sends (impossible status, framing we refuse to guess
    at, numbers no body has): an error of that response, never retried."""


class _HeaderRefused(httpx.LocalProtocolError):
    """A request header that would corrupt the request on the wire: nothing is sent."""


class _EgressRefused(httpx.TransportError):
    """The egress policy refused the address a new connection would go to."""


def _pending(transport: asyncio.BaseTransport) -> bool:
    """True when the socket under ``transport`` is readable: bytes (or a FIN, or an
    error) arrived that asyncio has not delivered yet.

    An idle keep-alive connection must be silent; a response the server sent before we
    asked would otherwise be read as the answer to our next request.
    """
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        fd = sock.fileno()
    except (OSError, ValueError):
        return True
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - no poll()
    return bool(readable)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: received bytes are queued as they arrive (no copy).

    The first queued piece is consumed through an offset, so taking many small pieces
    (1-byte chunks) costs their size, not a copy of what is left each time. While the
    connection sits idle in the pool no request is outstanding: any byte arriving then
    is a response nobody asked for, and it condemns the connection unread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, key: tuple[str, str, int, str | None]):
        self.loop = loop
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.offset = 0  # bytes of chunks[0] already taken
        self.size = 0  # bytes queued in chunks, not yet taken
        self.idle = False  # pooled, no request outstanding
        self.condemned = False  # received bytes while idle: never reused
        self.eof = False
        self.error: BaseException | None = None
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.lost = False  # connection_lost was called: the socket is closed

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.idle or self.condemned:  # unsolicited: never parsed, never reused
            self.condemned = True
            self.close()
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self.lost = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading
    @property
    def usable(self) -> bool:
        """Open and silent, also at the socket: safe to send the next request on."""
        transport = self.transport
        return (
            not self.eof
            and not self.condemned
            and not self.chunks
            and transport is not None
            and not transport.is_closing()
            and not _pending(transport)
        )

    async def wait(self, timeout: float | None) -> None:
        """Wait until more bytes arrive or the peer closes; ReadTimeout after ``timeout``."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        waiter = self._waiter = self.loop.create_future()
        timer = None if timeout is None else self.loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def take(self, limit: int) -> bytes:
        """Up to ``limit`` queued bytes, whole received pieces when they fit.

        Only the bytes returned are copied: the rest of the first piece stays where it
        is, behind :attr:`offset`.
        """
        first = self.chunks[0]
        start = self.offset
        if len(first) - start <= limit:
            self.chunks.popleft()
            self.offset = 0
            piece = first[start:] if start else first
        else:
            end = start + limit
            piece = first[start:end]
            self.offset = end
        self.size -= len(piece)
        return piece

    def find(self, sep: bytes, limit: int) -> int:
        """Index of ``sep`` in the queued bytes (from :attr:`offset`), merging leading
        pieces; -1 if absent yet."""
        chunks = self.chunks
        if not chunks:
            return -1
        first, start = chunks[0], self.offset
        index = first.find(sep, start, start + limit + len(sep))
        if index >= 0:
            return index - start
        while len(chunks) > 1 and len(first) - start <= limit:
            rest = len(first) - start
            merged = first[start:] + chunks[1]
            chunks.popleft()
            chunks[0] = merged
            self.offset = start = 0
            first = merged
            index = merged.find(sep, max(0, rest - len(sep) + 1), limit + len(sep))
            if index >= 0:
                return index
        return -1

    def close(self) -> None:
        # abort, not close: a connection we give up is never written to again, and a TLS
        # close (close_notify) finishes only when the peer answers, so a graceful close
        # can outlive the event loop of the run (an fd held until GC, a ResourceWarning)
        if self.transport is not None:
            self.transport.abort()
        self.eof = True


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout("timed out waiting for data"))


def _closed_error(conn: _Connection, what: str) -> httpx.HTTPError:
    """The error for a connection that ended ``what`` (reset vs orderly close)."""
    if conn.error is not None:
        err: httpx.HTTPError = httpx.ReadError(str(conn.error) or type(conn.error).__name__)
        err.__cause__ = conn.error
        return err
    return httpx.RemoteProtocolError(what)


def _line(conn: _Connection, what: str) -> bytes | None:
    """The next CRLF-terminated line already received (without CRLF), None if not yet."""
    index = conn.find(b"\r\n", _MAX_LINE)
    if index >= 0:
        return conn.take(index + 2)[:-2]
    if conn.size > _MAX_LINE:
        raise httpx.RemoteProtocolError(f"{what} longer than {_MAX_LINE} bytes")
    if conn.eof:
        raise _closed_error(conn, f"connection closed while reading the {what}")
    return None


async def _read_line(conn: _Connection, timeout: float | None, what: str) -> bytes:
    while (line := _line(conn, what)) is None:
        await conn.wait(timeout)
    return line


class _Body(httpx.AsyncByteStream):
    """A response body read off one connection; back to the pool when read completely."""

    def __init__(
        self,
        pool: _Http1Transport,
        conn: _Connection,
        *,
        length: int | None,
        chunked: bool,
        reusable: bool,
        timeout: float | None,
    ) -> None:
        self._pool = pool
        self._conn = conn
        self._length = length  # None: until the connection closes (or chunked)
        self._chunked = chunked
        self._reusable = reusable
        self._timeout = timeout
        self._complete = length == 0
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._complete:
            return
        if self._chunked:
            async for piece in self._chunks():
                yield piece
        else:
            async for piece in self._sized():
                yield piece
        self._complete = True

    async def _sized(self) -> AsyncIterator[bytes]:
        conn, left, received = self._conn, self._length, 0
        while left is None or left > 0:
            if conn.chunks:
                piece = conn.take(left if left is not None else conn.size)
                received += len(piece)
                if left is not None:
                    left -= len(piece)
                yield piece
            elif conn.eof:
                if left is None and conn.error is None:
                    return  # read-until-close body ended
                raise _closed_error(
                    conn,
                    "peer closed connection without sending complete message body "
                    f"(received {received} bytes, expected {self._length})",
                )
            else:
                await conn.wait(self._timeout)

    async def _chunks(self) -> AsyncIterator[bytes]:
        """The chunked body's data. Data of consecutive chunks already received is
        handed on as one piece (up to ``_PIECE`` bytes): a body of tiny chunks costs a
        parse per chunk, not a trip through every layer above per chunk. Nothing is
        held back while waiting for the network."""
        conn, timeout = self._conn, self._timeout
        held: list[bytes] = []
        size = 0
        while True:
            line = _line(conn, "chunk size line")
            if line is None:
                if held:
                    yield b"".join(held)
                    held.clear()
                    size = 0
                line = await _read_line(conn, timeout, "chunk size line")
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if not _CHUNK_SIZE.fullmatch(size_text):
                raise httpx.RemoteProtocolError(f"invalid chunk size {size_text[:20]!r}")
            left = int(size_text, 16)
            if left == 0:
                if held:
                    yield b"".join(held)
                trailers = 0
                while line := await _read_line(conn, timeout, "trailer"):
                    trailers += len(line) + 2
                    if trailers > _MAX_HEAD:
                        raise _ProtocolViolation(f"trailers longer than {_MAX_HEAD} bytes")
                return
            while left > 0:
                if conn.chunks:
                    piece = conn.take(left)
                    left -= len(piece)
                    held.append(piece)
                    size += len(piece)
                    if size >= _PIECE:
                        yield b"".join(held) if len(held) > 1 else piece
                        held.clear()
                        size = 0
                elif conn.eof:
                    raise _closed_error(conn, "connection closed in the middle of a chunk")
                else:
                    if held:
                        yield b"".join(held)
                        held.clear()
                        size = 0
                    await conn.wait(timeout)
            end = _line(conn, "chunk end")
            if end is None:
                if held:
                    yield b"".join(held)
                    held.clear()
                    size = 0
                end = await _read_line(conn, timeout, "chunk end")
            if end != b"":
                raise httpx.RemoteProtocolError("chunk data longer than its declared size")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._complete and self._reusable:
            self._pool.release(self._conn)
        else:
            self._conn.close()  # mid-body or not reusable: never pooled


class _Http1Transport(httpx.AsyncBaseTransport):
    """A lean HTTP/1.1 client transport on asyncio protocols, for fleets of many hosts.

    Per request it does what a GET needs and nothing else: one pooled keep-alive
    connection per (scheme, host, port, server name), the request written in one
    send, the response head parsed once, the body streamed as the socket delivers it
    (Content-Length, chunked or until close). Measured (docs/benchmarks.md): httpx's own async
    pool degrades with many hosts, and httpx over aiohttp spends about three quarters
    of its CPU per request in the two clients' layers, not in I/O. The concurrency
    limits are the Fetcher's semaphores; this pool only keeps at most ``max_idle``
    idle connections (least recently used closed first), each for ``keepalive`` s.
    Errors are raised as the httpx exceptions httpcore raises for the same events.

    A pooled connection is reused only while its socket is silent (checked with
    ``poll`` right before reuse, as httpcore does): HTTP/1.1 has no request ids, so a
    response the server sent early would be taken as the answer to the next request.
    With ``egress``, every new connection goes to one address resolved once and
    approved by the policy (see :class:`Fetcher`).
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext,
        keepalive: float = _KEEPALIVE,
        max_idle: int = 256,
        egress: Callable[[str, str, int], str | None] | None = None,
    ) -> None:
        self._ssl = ssl_context
        self._egress = egress
        self._keepalive = keepalive
        self._max_idle = max_idle
        self._idle: dict[tuple[str, str, int, str | None], list[_Connection]] = {}
        self._lru: OrderedDict[_Connection, None] = OrderedDict()
        self._closed = False

    def release(self, conn: _Connection) -> None:
        """Keep a connection whose response was read completely, if it is still clean."""
        if self._closed or not conn.usable:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        conn.idle = True
        self._idle.setdefault(conn.key, []).append(conn)
        self._lru[conn] = None
        while len(self._lru) > self._max_idle:
            oldest, _ = self._lru.popitem(last=False)
            self._idle[oldest.key].remove(oldest)
            oldest.close()

    def _checkout(self, key: tuple[str, str, int, str | None]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            self._lru.pop(conn, None)
            if conn.usable and now - conn.idle_since < self._keepalive:
                conn.idle = False
                return conn
            conn.close()
        if idle is not None:
            del self._idle[key]
        return None

    async def _connect(
        self, key: tuple[str, str, int, str | None], timeout: float | None
    ) -> _Connection:
        scheme, host, port, server_name = key
        loop = asyncio.get_running_loop()
        options: dict[str, Any] = {}
        if scheme == "https":
            options = {"ssl": self._ssl, "server_hostname": server_name or host}
        try:
            async with asyncio.timeout(timeout):
                address = host
                if self._egress is not None:
                    address = await self._approved_address(loop, host, port)
                _transport, conn = await loop.create_connection(
                    lambda: _Connection(loop, key), address, port, **options
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out") from exc
        except OSError as exc:  # ssl.SSLError is an OSError
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return conn

    async def _approved_address(self, loop: asyncio.AbstractEventLoop, host: str, port: int) -> str:
        """The one IP address a new connection to ``host`` may use, or _EgressRefused.

        The name is resolved once and the connection is made to the very address the
        policy approved, so a DNS answer that changes between the check and the connect
        (rebinding) cannot send the request elsewhere.
        """
        assert self._egress is not None
        try:
            ipaddress.ip_address(host)
            ip = host  # an IP literal is checked as it is
        except ValueError:
            infos = await loop.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
            if not infos:
                raise httpx.ConnectError(f"{host} has no address") from None
            ip = str(infos[0][4][0])
        try:
            reason = self._egress(host, ip, port)
        except Exception as exc:  # a failing policy refuses: it never lets traffic through
            reason = f"the egress policy failed ({type(exc).__name__})"
        if reason is not None:
            where = host if ip == host else f"{host} ({ip})"
            raise _EgressRefused(f"connection to {where} port {port} refused: {reason}")
        return ip

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the transport is closed")
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        timeouts = request.extensions.get("timeout", {})
        server_name = request.extensions.get("sni_hostname")
        key = (scheme, url.host, url.port or (443 if scheme == "https" else 80), server_name)
        content = request.content  # GETs carry none; a small body is sent as is
        head = [b"%s %s HTTP/1.1" % (request.method.encode(), url.raw_path)]
        for name, value in request.headers.raw:
            # The last line of defence: whatever validated the configuration, a header
            # that would end its line early (and start another) is never written.
            if not _TOKEN.fullmatch(name):
                raise _HeaderRefused(f"request header name {name[:60]!r} is not a token; not sent")
            if _VALUE_BAD.search(value):
                raise _HeaderRefused(
                    f"value of request header {name.decode('latin-1')!r} contains CR, LF,"
                    " NUL or another control character; not sent"
                )
            head.append(b"%s: %s" % (name, value))
        payload = b"\r\n".join(head) + b"\r\n\r\n" + content

        conn = self._checkout(key)
        if conn is None:
            conn = await self._connect(key, timeouts.get("connect"))
        try:
            assert conn.transport is not None
            conn.transport.write(payload)
            read_timeout = timeouts.get("read")
            for _ in range(_MAX_INTERIM + 1):
                status, reason, headers, http11 = await self._read_head(conn, read_timeout)
                if status >= 200 or status == 101:
                    break  # 1xx interim responses are skipped
            else:  # a stream of 1xx would hold the request until its deadline
                raise _ProtocolViolation(f"more than {_MAX_INTERIM} interim (1xx) responses")
            if status == 101:
                raise httpx.RemoteProtocolError("101 Switching Protocols is not supported")
            length, chunked, reusable = _framing(request.method, status, headers, http11)
        except BaseException:
            conn.close()
            raise
        body = _Body(
            self, conn, length=length, chunked=chunked, reusable=reusable, timeout=read_timeout
        )
        return httpx.Response(
            status_code=status,
            headers=headers,
            stream=body,
            request=request,
            extensions={
                "http_version": b"HTTP/1.1" if http11 else b"HTTP/1.0",
                "reason_phrase": reason,
            },
        )

    @staticmethod
    async def _read_head(
        conn: _Connection, timeout: float | None
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bool]:
        while True:
            index = conn.find(b"\r\n\r\n", _MAX_HEAD)
            if index >= 0:
                break
            if conn.size > _MAX_HEAD:
                raise httpx.RemoteProtocolError(f"response head larger than {_MAX_HEAD} bytes")
            if conn.eof:
                if conn.size == 0:
                    raise _closed_error(conn, "Server disconnected without sending a response.")
                raise _closed_error(conn, "connection closed in the middle of the response head")
            await conn.wait(timeout)
        lines = conn.take(index + 4)[:-4].split(b"\r\n")
        match = _STATUS_LINE.fullmatch(lines[0])
        if match is None:
            if lines[0].startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")):  # HTTP, but no status
                raise _ProtocolViolation(f"invalid status line {lines[0][:60]!r}")
            raise httpx.RemoteProtocolError(f"invalid status line {lines[0][:60]!r}")
        if not 100 <= int(match[2]) <= 599:  # "099" is no interim response to skip
            raise _ProtocolViolation(f"invalid status code {match[2].decode()}")
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not _TOKEN.fullmatch(name):
                raise httpx.RemoteProtocolError(f"invalid header line {line[:60]!r}")
            headers.append((name, value.strip(b" \t")))
        return int(match[2]), match[3] or b"", headers, match[1] == b"1"

    async def aclose(self) -> None:
        self._closed = True
        closing = [conn for conns in self._idle.values() for conn in conns]
        for conn in closing:
            conn.close()
        self._idle.clear()
        self._lru.clear()
        # A TLS close (close_notify) finishes asynchronously: left alone, the socket
        # outlives the event loop of the run (an fd held until GC, a ResourceWarning).
        deadline = time.monotonic() + 1.0
        while any(not c.lost for c in closing) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in closing:
            if not conn.lost and conn.transport is not None:
                conn.transport.abort()
        await asyncio.sleep(0)  # let the aborted transports run connection_lost


def _framing(
    method: str, status: int, headers: list[tuple[bytes, bytes]], http11: bool
) -> tuple[int | None, bool, bool]:
    """(Content-Length or None, chunked, connection reusable) per RFC 9112 section 6."""
    lengths: set[bytes] = set()
    codings: list[bytes] = []
    close = not http11
    for name, value in headers:
        lower = name.lower()
        if lower == b"content-length":
            lengths.update(v.strip() for v in value.split(b","))
        elif lower == b"transfer-encoding":
            codings += [c.strip().lower() for c in value.split(b",") if c.strip()]
        elif lower == b"connection":
            tokens = {t.strip().lower() for t in value.split(b",")}
            if b"close" in tokens:
                close = True
            elif b"keep-alive" in tokens and not http11:
                close = False
    if method == "HEAD" or status in (204, 304):
        return 0, False, not close
    if codings:
        # Only "chunked" is undone here. Any other transfer coding (gzip, chunked; a
        # close-delimited gzip; chunked twice) would leave encoded bytes in the body,
        # to be hashed as content: refused, never guessed at.
        if codings != [b"chunked"]:
            listed = b", ".join(codings)[:80].decode("latin-1")
            raise _ProtocolViolation(f"unsupported Transfer-Encoding {listed!r}")
        return None, True, not close and not lengths
    if lengths:
        value = next(iter(lengths))
        if len(lengths) != 1 or not value.isdigit() or len(value) > _MAX_DIGITS:
            shown = sorted(v[:20] for v in lengths)
            raise _ProtocolViolation(f"invalid Content-Length {shown!r}")
        return int(value), False, not close
    return None, False, False  # until close


# --------------------------------------------------------------------------- fetcher


@dataclass(slots=True)
class _Attempt:
    """What one request (one hop, one try) produced."""

    url: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    size: int | None = None
    body: bytes | None = None
    content_encoding: str | None = None
    error: str | None = None
    error_kind: str | None = None
    location: str | None = None
    elapsed: float = 0.0

    @property
    def retry_reason(self) -> str | None:
        """Why this attempt deserves a retry, None when it does not."""
        if self.error_kind in _RETRY_KINDS:
            return f"{self.error_kind}: {self.error}"
        if self.error is None and self.status is not None:
            if self.status == 429 or self.status >= 500:
                return f"HTTP {self.status}"
        return None


@dataclass(slots=True)
class _Tally:
    """What one ``get_*`` call did so far, kept for the result of an unexpected error."""

    url: str = ""
    sent: int = 0
    elapsed: float = 0.0


class _Progress:
    """Which phase a request reached, so an exception can be told apart."""

    __slots__ = ("reading_body",)

    def __init__(self) -> None:
        self.reading_body = False


class Fetcher:
    """GETs under base URLs with limits, timeouts, retries and streaming hashes.

    Use as ``async with Fetcher(http=..., retry=...) as fetcher:``; one Fetcher (one
    client, one TLS context, one pool of kept-alive connections) serves a whole run.
    ``host_header=None`` on a call means ``http.host_header``; ``""`` means the URL's
    own host (e.g. for the CDN when instances are reached by IP with a site name).
    ``Fetched.attempts`` counts every request sent for the call, redirect hops included;
    ``Fetched.elapsed`` is the time spent in those requests, not in queues or backoff.

    Whatever an instance sends, and whatever goes wrong inside one fetch, ``get_*``
    return a :class:`Fetched` with ``error_kind`` set (``"protocol"`` for a response no
    correct server sends, or for an unexpected failure): an exception never escapes,
    except :class:`asyncio.CancelledError`, which always propagates.

    ``egress``, when given, is a policy ``egress(host, ip, port) -> reason | None``
    consulted for every new connection: the transport resolves ``host`` once (an IP
    literal is taken as it is) and calls the policy with the address it will connect
    to. A string refuses: the fetch fails with ``error_kind="egress"`` and that reason,
    and nothing is sent (an exception from the policy refuses too). ``None`` approves,
    and the connection goes to exactly that address, with the original host name kept
    for TLS SNI and the Host header, so a DNS answer that changes between check and
    connect (rebinding) cannot redirect it. Only the default transport (``"auto"``)
    can enforce a policy; combined with ``"httpx"``, ``"aiohttp"`` or an injected
    transport it is a ValueError, never a policy silently ignored.
    """

    def __init__(
        self,
        *,
        http: HttpSettings,
        retry: RetrySettings,
        logger: logging.Logger | logging.LoggerAdapter[Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        budget: RetryBudget | None = None,
        egress: Callable[[str, str, int], str | None] | None = None,
    ) -> None:
        if egress is not None and (transport is not None or http.transport != "auto"):
            chosen = "an injected transport" if transport is not None else repr(http.transport)
            raise ValueError(
                f"an egress policy is enforced only by the 'auto' transport, not {chosen}"
            )
        self._egress = egress
        self._http = http
        self._retry = retry
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self.budget = budget if budget is not None else RetryBudget.from_settings(retry)
        self.stats = FetchStats()
        self.ssl_context = build_ssl_context(http)
        self._secret_headers = _configured_headers(http)  # values never logged or shown
        encodings = "identity" if http.identity_encoding else "gzip, deflate"
        if not http.identity_encoding and _BROTLI:  # pragma: no cover - optional
            encodings += ", br"
        self._headers = {
            "user-agent": _USER_AGENT,
            "accept": "*/*",
            "accept-encoding": encodings,
            **self._secret_headers,
        }
        self._injected = transport
        self.transport_name = (
            "injected"
            if transport is not None
            else {"auto": "http1"}.get(http.transport, http.transport)
        )
        self._timeout = httpx.Timeout(
            connect=http.connect_timeout,
            read=http.read_timeout,
            write=http.read_timeout,
            pool=http.request_timeout,  # our semaphores already bound the wait for a slot
        )
        self._total = asyncio.Semaphore(http.max_connections)
        self._per_host: dict[str, asyncio.Semaphore] = {}
        self._client: httpx.AsyncClient | None = None
        self._transport: httpx.AsyncBaseTransport | None = None
        self._timeout_ext = self._timeout.as_dict()
        self._bases: dict[str, str] = {}  # base URL -> base directory
        self._keys: dict[str, str] = {}  # "scheme://authority" -> host key
        self._budget_warned = False

    @property
    def egress(self) -> Callable[[str, str, int], str | None] | None:
        """The egress policy this Fetcher enforces, for other connections of the same
        run (e.g. :func:`artifactcheck.fetch.tls.probe_certificate`)."""
        return self._egress

    def __repr__(self) -> str:
        headers = {name: "***" for name in self._secret_headers}
        return f"<Fetcher transport={self.transport_name} extra_headers={headers}>"

    # ----------------------------------------------------------------- lifecycle

    def _make_transport(self) -> httpx.AsyncBaseTransport:
        """The transport chosen by ``http.transport``, sized to our own limits."""
        if self._injected is not None:
            return self._injected
        if self.transport_name == "http1":
            return _Http1Transport(
                ssl_context=self.ssl_context,
                keepalive=_KEEPALIVE,
                max_idle=max(self._http.max_connections * 2, 64),
                egress=self._egress,
            )
        if self.transport_name == "httpx":
            limits = httpx.Limits(
                max_connections=self._http.max_connections,
                max_keepalive_connections=self._http.max_connections,
                keepalive_expiry=_KEEPALIVE,
            )
            return httpx.AsyncHTTPTransport(verify=self.ssl_context, limits=limits, trust_env=False)
        import aiohttp  # only this transport needs it: ~0.15 s of imports otherwise
        from httpx_aiohttp import AiohttpTransport

        connector = aiohttp.TCPConnector(
            limit=self._http.max_connections,
            limit_per_host=self._http.max_per_host,
            ssl=self.ssl_context,
            keepalive_timeout=_KEEPALIVE,
        )
        session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # we decode and cap ourselves
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),  # per request, from httpx.Timeout
        )
        # aiohttp silently resends a GET once when a pooled connection fails; that would
        # be a second, uncounted retry loop (and 2x load on a resetting server). aiohttp's
        # own test client turns it off the same way; there is no public switch.
        if hasattr(session, "_retry_connection"):
            session._retry_connection = False
        return AiohttpTransport(client=session, verify=self.ssl_context, trust_env=False)

    async def __aenter__(self) -> Self:
        if self._client is not None:
            raise RuntimeError("this Fetcher is already open")
        transport = self._make_transport()
        client = httpx.AsyncClient(
            transport=transport,
            timeout=self._timeout,
            follow_redirects=False,  # followed by hand, only under the base URL
            trust_env=False,  # no proxies or CA files picked up from the environment
            headers=self._headers,
        )
        # Instances must not be able to steer later requests with cookies.
        client.cookies.jar.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        self._client = client
        self._transport = transport
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client and every pooled connection."""
        client, self._client = self._client, None
        self._transport = None
        if client is not None:
            await client.aclose()

    # ----------------------------------------------------------------- public API

    async def get_document(
        self,
        base_url: str,
        path: str,
        *,
        max_bytes: int | None = None,
        host_header: str | None = None,
    ) -> Fetched:
        """GET a small document (manifest, /version), keeping its decoded body.

        The body is capped at ``max_bytes`` (default ``http.max_manifest_bytes``).
        """
        cap = self._http.max_manifest_bytes if max_bytes is None else max_bytes
        return await self._fetch(
            base_url, path, cap=cap, algorithms=("sha256",), keep_body=True, host=host_header
        )

    async def get_asset(
        self,
        base_url: str,
        path: str,
        *,
        algorithms: Iterable[str] = ("sha256",),
        host_header: str | None = None,
        accept_encoding: str | None = None,
    ) -> Fetched:
        """GET an asset, hashing it while streaming with sha256 and ``algorithms``.

        The body is never kept; it is capped at ``http.max_body_bytes``. An unknown
        algorithm name is a programming error and raises ValueError before any request.
        ``accept_encoding`` asks for one content coding (``gzip``, ``br``) instead of the
        configured one: browsers receive those bytes, and a stale precompressed file
        (nginx ``gzip_static``) differs only there. What arrives is decoded before it is
        hashed, so the digest is of the content in every coding.
        """
        names = ["sha256"]
        for name in algorithms:
            name = name.lower()
            if name not in names:
                hashlib.new(name)  # ValueError for an unknown algorithm
                names.append(name)
        return await self._fetch(
            base_url,
            path,
            cap=self._http.max_body_bytes,
            algorithms=tuple(names),
            keep_body=False,
            host=host_header,
            accept_encoding=accept_encoding,
        )

    # ----------------------------------------------------------------- the retry loop

    async def _fetch(
        self,
        base_url: str,
        path: str,
        *,
        cap: int,
        algorithms: tuple[str, ...],
        keep_body: bool,
        host: str | None,
        accept_encoding: str | None = None,
    ) -> Fetched:
        """The one retry loop: validate, send, follow safe redirects, retry, give up."""
        if self._client is None:
            raise RuntimeError("use the Fetcher as 'async with Fetcher(...) as fetcher'")
        try:
            relative = normalise_path(path)
            url = urls.join(base_url, relative)
            base = self._bases.get(base_url) or self._base_directory(base_url)
        except (ArtifactCheckError, ValueError) as exc:
            self.stats.errors["unsafe"] += 1
            return Fetched(
                url=path if isinstance(path, str) else "",
                path=str(path),
                error=f"refused without a request: {exc}",
                error_kind="unsafe",
                attempts=0,
            )
        host = self._http.host_header if host is None else (host or None)
        problem = _header_problem("host", host) if host else None
        if problem is not None:
            self.stats.errors["config"] += 1
            return Fetched(
                url=url,
                path=relative,
                error=f"refused without a request: {problem}",
                error_kind="config",
                attempts=0,
            )
        headers = {"host": host} if host else {}
        if accept_encoding is not None:
            if accept_encoding not in _ACCEPTED_CODINGS:
                raise ValueError(f"unknown content coding {accept_encoding!r}")
            headers["accept-encoding"] = accept_encoding
        extensions: dict[str, Any] = {}
        if host and url.startswith("https:"):
            extensions["sni_hostname"] = _server_name(host)

        self.budget.record_first_attempt()
        self.stats.first_attempts += 1
        tally = _Tally()
        try:
            return await self._attempts(
                url, base, relative, headers, extensions, cap, algorithms, keep_body, tally
            )
        except Exception as exc:  # noqa: BLE001 - one fetch's failure is its result
            self._log.debug("GET %s failed unexpectedly", url, exc_info=True)
            result = _Attempt(
                tally.url or url,
                error=f"unexpected error: {type(exc).__name__}: {_root_message(exc)}",
                error_kind="protocol",
            )
            return self._finish(result, relative, tally.sent, tally.elapsed)

    async def _attempts(
        self,
        url: str,
        base: str,
        relative: str,
        headers: Mapping[str, str],
        extensions: Mapping[str, Any],
        cap: int,
        algorithms: tuple[str, ...],
        keep_body: bool,
        tally: _Tally,
    ) -> Fetched:
        """Send, follow safe redirects, retry, give up; ``tally`` follows the progress."""
        attempts = self._retry.attempts
        tries = 0  # tries of the current URL
        hops = 0
        while True:
            tries += 1
            tally.url = url
            result = await self._exchange(
                url,
                headers=headers,
                extensions=extensions,
                cap=cap,
                algorithms=algorithms,
                keep_body=keep_body,
            )
            tally.sent += 1
            tally.elapsed += result.elapsed
            sent, elapsed = tally.sent, tally.elapsed

            if result.location is not None:
                try:
                    target = urls.resolve_redirect(url, result.location)
                except ValueError as exc:
                    result.error = f"HTTP {result.status} redirect to an unusable Location: {exc}"
                    result.error_kind = "protocol"
                    return self._finish(result, relative, sent, elapsed)
                if not urls.is_under(base, target):
                    result.error = (
                        f"HTTP {result.status} redirect to {target} leaves {base}; not followed"
                    )
                    result.error_kind = "redirect-off-base"
                elif hops >= MAX_REDIRECTS:
                    result.error = f"more than {MAX_REDIRECTS} redirects; last to {target}"
                    result.error_kind = "status"
                else:
                    hops += 1
                    self.stats.redirects += 1
                    url, tries = target, 0
                    continue

            reason = result.retry_reason
            if reason is None:
                return self._finish(result, relative, sent, elapsed)
            if tries >= attempts:
                if result.error is None:
                    result.error = f"HTTP {result.status} after {tries} attempt(s)"
                    result.error_kind = "status"
                return self._finish(result, relative, sent, elapsed)
            if not self.budget.try_spend():
                self.stats.budget_denied += 1
                self._budget_spent(url, tries, attempts, reason)
                result.error = f"{reason}; not retried: the retry budget of this run is spent"
                result.error_kind = "budget"
                return self._finish(result, relative, sent, elapsed)
            retry_after = None
            if result.status in (429, 503):
                retry_after = parse_retry_after(result.headers.get("retry-after"))
            delay = backoff_delay(tries, self._retry, self._rng, retry_after)
            self._log.info(
                "GET %s attempt %d/%d failed (%s); retrying in %.2fs",
                url,
                tries,
                attempts,
                reason,
                delay,
            )
            self.stats.retries += 1
            self._host_stats(url).retries += 1
            await self._sleep(delay)

    def _budget_spent(self, url: str, tries: int, attempts: int, reason: str) -> None:
        """Warn once per Fetcher: a failing fleet would otherwise flood the log."""
        level = logging.DEBUG if self._budget_warned else logging.WARNING
        self._budget_warned = True
        self._log.log(
            level,
            "GET %s attempt %d/%d failed (%s); not retried: retry budget spent (%r)",
            url,
            tries,
            attempts,
            reason,
            self.budget,
        )

    def _finish(self, result: _Attempt, path: str, sent: int, elapsed: float) -> Fetched:
        """The frozen observation handed to the caller, counted in the stats."""
        if result.error_kind is not None:
            self.stats.errors[result.error_kind] += 1
            self._host_stats(result.url).errors += 1
        return Fetched(
            url=result.url,
            path=path,
            status=result.status,
            hashes=result.hashes,
            size=result.size,
            headers=result.headers,
            elapsed=elapsed,
            error=result.error,
            error_kind=result.error_kind,
            attempts=sent,
            content_encoding=result.content_encoding,
            body=result.body,
        )

    def _base_directory(self, base_url: str) -> str:
        if len(self._bases) > _MEMO_LIMIT:
            self._bases.clear()
        base = self._bases[base_url] = urls.base_directory(base_url)
        return base

    def _host_key(self, url: str) -> str:
        """:func:`urls.host_key`, memoised by the URL's scheme and authority."""
        end = url.find("/", url.find("//") + 2)
        authority = url if end < 0 else url[:end]
        key = self._keys.get(authority)
        if key is None:
            if len(self._keys) > _MEMO_LIMIT:
                self._keys.clear()
            key = self._keys[authority] = urls.host_key(url)
        return key

    def _host_stats(self, url: str) -> HostStats:
        """The counters of a URL's ``scheme://host:port``."""
        key = self._host_key(url)
        stats = self.stats.per_host.get(key)
        if stats is None:
            stats = self.stats.per_host[key] = HostStats()
        return stats

    # ----------------------------------------------------------------- one request

    async def _exchange(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        extensions: Mapping[str, Any],
        cap: int,
        algorithms: tuple[str, ...],
        keep_body: bool,
    ) -> _Attempt:
        """One request under the concurrency slots and the whole-request timeout."""
        key = self._host_key(url)
        per_host = self._per_host.get(key)
        if per_host is None:
            per_host = self._per_host[key] = asyncio.Semaphore(self._http.max_per_host)
        host_stats = self.stats.per_host.get(key)
        if host_stats is None:
            host_stats = self.stats.per_host[key] = HostStats()
        # The host slot first: a request waiting for a busy host holds no global slot.
        async with per_host, self._total:
            stats = self.stats
            stats.requests += 1
            stats.in_flight += 1
            stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
            host_stats.requests += 1
            host_stats.in_flight += 1
            host_stats.peak_in_flight = max(host_stats.peak_in_flight, host_stats.in_flight)
            progress = _Progress()
            started = time.monotonic()
            deadline = asyncio.timeout(self._http.request_timeout)
            try:
                async with deadline:
                    result = await self._send(
                        url, headers, extensions, cap, algorithms, keep_body, progress
                    )
            except TimeoutError as exc:
                if deadline.expired():
                    message = (
                        f"no complete response within {self._http.request_timeout}s"
                        " (request_timeout)"
                    )
                    result = _Attempt(url, error=message, error_kind="timeout")
                else:
                    kind, message = _classify(
                        exc, reading_body=progress.reading_body, http=self._http
                    )
                    result = _Attempt(url, error=message, error_kind=kind)
            except (httpx.HTTPError, _aiohttp_errors().ClientError, OSError) as exc:
                kind, message = _classify(exc, reading_body=progress.reading_body, http=self._http)
                result = _Attempt(url, error=message, error_kind=kind)
            except Exception as exc:  # noqa: BLE001 - anything else: this request's error
                self._log.debug("GET %s failed unexpectedly", url, exc_info=True)
                message = f"unexpected error: {type(exc).__name__}: {_root_message(exc)}"
                result = _Attempt(url, error=message, error_kind="protocol")
            finally:
                stats.in_flight -= 1
                host_stats.in_flight -= 1
            result.elapsed = time.monotonic() - started
            return result

    async def _send(
        self,
        url: str,
        headers: Mapping[str, str],
        extensions: Mapping[str, Any],
        cap: int,
        algorithms: tuple[str, ...],
        keep_body: bool,
        progress: _Progress,
    ) -> _Attempt:
        """Send and read; the response is always closed, also when cancelled mid-body."""
        assert self._transport is not None
        # Straight to the transport: AsyncClient.send adds auth and redirect flows,
        # cookie extraction and response wrapping this code never uses (redirects are
        # followed by hand, cookies are refused), at about a third of the CPU per request.
        request = httpx.Request(
            "GET",
            url,
            headers={**self._headers, **headers},
            extensions={"timeout": self._timeout_ext, **extensions},
        )
        response = await self._transport.handle_async_request(request)
        try:
            progress.reading_body = True
            return await self._read(response, url, cap, algorithms, keep_body)
        finally:
            await response.aclose()  # closes (not pools) a connection left mid-body

    async def _read(
        self,
        response: httpx.Response,
        url: str,
        cap: int,
        algorithms: tuple[str, ...],
        keep_body: bool,
    ) -> _Attempt:
        """Hash (and keep, for documents) the decoded body piece by piece under the cap."""
        status = response.status_code
        evidence = _evidence(response.headers)
        result = _Attempt(url, status=status, headers=evidence)
        problem = _response_problem(response)
        if problem is not None:  # the "auto" transport refuses these itself
            result.error, result.error_kind = f"invalid HTTP response: {problem}", "protocol"
            return result
        if not 200 <= status < 300:
            if status in _REDIRECTS and response.headers.get("location"):
                result.location = response.headers["location"]
            await self._drain(response)
            return result

        try:
            decoder, encoding = _decoder_for(response.headers.get("content-encoding"))
        except _DecodeError as exc:
            result.error, result.error_kind = str(exc), exc.kind
            return result
        result.content_encoding = encoding
        declared = _content_length(response.headers)
        if declared is not None and encoding is None and declared > cap:
            result.error = f"Content-Length {declared} is over the cap of {cap} bytes; not read"
            result.error_kind = "too-large"
            return result

        hashers = [hashlib.new(name) for name in algorithms]
        body = bytearray() if keep_body else None
        raw = 0
        size = 0
        try:
            async with contextlib.aclosing(_raw_chunks(response)) as chunks:
                async for chunk in chunks:
                    raw += len(chunk)
                    self.stats.bytes_read += len(chunk)
                    for piece in decoder.feed(chunk):
                        size += len(piece)
                        if size > cap:
                            return self._too_large(result, cap, raw, encoding)
                        for hasher in hashers:
                            hasher.update(piece)
                        if body is not None:
                            body += piece
            for piece in decoder.flush():
                size += len(piece)
                if size > cap:
                    return self._too_large(result, cap, raw, encoding)
                for hasher in hashers:
                    hasher.update(piece)
                if body is not None:
                    body += piece
        except _DecodeError as exc:
            result.error, result.error_kind = f"{encoding} body: {exc}", "decode"
            return result
        if declared is not None and raw < declared:
            result.error = f"body ended after {raw} of {declared} bytes (Content-Length)"
            result.error_kind = "truncated"
            return result
        if not decoder.complete:
            result.error = f"{encoding} body ended before the end of its compressed stream"
            result.error_kind = "truncated"
            return result
        result.hashes = {name: h.hexdigest() for name, h in zip(algorithms, hashers, strict=True)}
        result.size = size
        result.body = bytes(body) if body is not None else None
        return result

    @staticmethod
    def _too_large(result: _Attempt, cap: int, raw: int, encoding: str | None) -> _Attempt:
        what = f"decoded {encoding} body" if encoding else "body"
        result.error = f"{what} over the cap of {cap} bytes (stopped after {raw} bytes read)"
        result.error_kind = "too-large"
        return result

    async def _drain(self, response: httpx.Response) -> None:
        """Read a small unused body so its kept-alive connection can serve the next GET."""
        declared = _content_length(response.headers)
        if declared is not None and declared > _DRAIN_LIMIT:
            return
        read = 0
        try:
            async with contextlib.aclosing(_raw_chunks(response)) as chunks:
                async for chunk in chunks:
                    read += len(chunk)
                    if read > _DRAIN_LIMIT:
                        return
        except (httpx.HTTPError, _aiohttp_errors().ClientError, OSError):
            return  # the status was observed; the connection is simply not reused
