"""HTTP observation of instances and the CDN: the :class:`Fetcher` and its retry loop.

Everything the network edge must guarantee is kept by this package
(docs/architecture.md, docs/reliability.md); the Fetcher ties it together:

- every GET has connect/read timeouts and a whole-request limit (``asyncio.timeout``
  around headers *and* body); the per-instance deadline is the caller's
  ``asyncio.timeout``, and cancellation closes the connection it interrupts;
- bodies are hashed while streaming, under a byte cap enforced on the decoded bytes
  piece by piece (:mod:`artifactcheck.fetch.response`, :mod:`artifactcheck.fetch.decoders`);
- one retry loop (here): connection errors, timeouts, 5xx and 429 only, exponential
  backoff with full jitter, ``Retry-After`` honoured, and a
  :class:`~artifactcheck.fetch.retry.RetryBudget` per run so a failing fleet never
  receives more than a small multiple of its normal load;
- concurrency bounded in total and per host by semaphores we own, over ONE transport
  whose connections are kept alive for the whole run (:mod:`artifactcheck.fetch.transports`);
- only URLs under the given base URL are requested, and redirects are followed by
  hand, only while they stay under that base (no SSRF);
- per-request problems are returned as values (:class:`~artifactcheck.model.values.Fetched`
  with an :class:`~artifactcheck.model.errors.ErrorKind`), never raised: "could not
  observe" must stay apart from "observed something wrong", and a fleet check must not
  die of one bad pod; this holds for any exception inside one fetch, only cancellation
  propagates (:mod:`artifactcheck.fetch.errors` maps the transports' exceptions);
- every header we send is checked where it is written (:mod:`artifactcheck.fetch.headers`).

Requests go straight to the transport, without an ``httpx.AsyncClient``: redirects
are followed by hand, cookies are never sent, and timeouts and headers are set on each
request here, so a client's flows would only cost CPU (about a third per request).
The ``sni_hostname`` extension carries the TLS server name for a Host header; both
transports honour it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

from artifactcheck.fetch import response as reading
from artifactcheck.fetch import urls
from artifactcheck.fetch.decoders import ACCEPTED_CODINGS, accepted_encodings
from artifactcheck.fetch.egress import approved_address
from artifactcheck.fetch.errors import UnsupportedProtocol, classified, classify, unexpected
from artifactcheck.fetch.headers import USER_AGENT, configured_headers, header_problem, server_name
from artifactcheck.fetch.http1 import KEEPALIVE, Http1Transport, header_block
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.fetch.response import Attempt
from artifactcheck.fetch.retry import RetryBudget, backoff_delay, parse_retry_after
from artifactcheck.fetch.routes import BaseRoute, Route
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.fetch.tls import build_ssl_context
from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.errors import ArtifactCheckError, ErrorKind
from artifactcheck.model.settings import HttpSettings, RetrySettings
from artifactcheck.model.values import Fetched
from artifactcheck.tenancy.egress import Egress

if TYPE_CHECKING:
    import httpx

__all__ = ["MAX_REDIRECTS", "AssetHook", "Fetcher"]

MAX_REDIRECTS: Final = 5
_MEMO_LIMIT = 65_536  # base URLs / hosts memoised before the memo is reset

#: Called with ``(base_url, path, result)`` after every :meth:`Fetcher.get_asset`.
AssetHook = Callable[[str, str, Fetched], None]


@dataclass(frozen=True, slots=True)
class _Call:
    """What one ``get_*`` call asks of every request it sends (retries, redirect hops)."""

    headers: Mapping[str, str]  # on top of the Fetcher's own
    extensions: Mapping[str, Any]
    cap: int
    algorithms: tuple[str, ...]
    keep_body: bool
    proxy: str | None = None  # the proxy every request of the call goes through


@dataclass(slots=True)
class _Tally:
    """What one ``get_*`` call did so far, kept for the result of an unexpected error."""

    url: str = ""
    sent: int = 0
    elapsed: float = 0.0


def _refused_by_proxy(result: Attempt, proxy: str) -> None:
    """Fail ``result`` when its status may be the proxy's own refusal, not an answer.

    Over https the proxy only tunnels (a refused CONNECT is an error already) and TLS
    proves who answered. Over plain http a 403 is what a proxy's policy answers too, in
    the same form as the destination's; a 407 is always the proxy's. Judged, either
    would call every file missing (cdn-missing, exit 1): a fetch error instead.
    """
    if result.error is not None or result.status not in (403, 407):
        return
    if result.status == 407:
        message = f"the HTTP proxy {proxy} asks for credentials (407)"
    elif result.url.startswith("http:"):
        message = (
            f"HTTP 403 through the HTTP proxy {proxy}: over plain http the proxy's refusal "
            "cannot be told from the server's answer; not judged"
        )
    else:
        return
    result.hashes, result.size = {}, None
    result.fail(ErrorKind.CONNECT, message)


class _Progress:
    """Which phase a request reached, so an exception can be told apart."""

    __slots__ = ("reading_body",)

    def __init__(self) -> None:
        self.reading_body = False


class Fetcher:
    """GETs under base URLs with limits, timeouts, retries and streaming hashes.

    Use as ``async with Fetcher(http=..., retry=...) as fetcher:``; one Fetcher (one
    transport, one TLS context, one pool of kept-alive connections) serves a whole run.
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
    connect (rebinding) cannot redirect it. Only the default transport (``"http1"``)
    can enforce a policy; combined with ``"httpx"`` or an injected
    transport it is a ValueError, never a policy silently ignored.

    ``proxies``, when given, are the HTTP proxies of release sources and CDNs: a call
    for a URL's own host (``host_header=""``, as the CDN and release sources are
    fetched) goes through the proxy :meth:`Proxies.for_url` names, over httpx's pool;
    an instance's call goes direct unless ``http.proxy_instances``. The CLI passes
    :meth:`Proxies.from_environment`; nothing is read from the environment here (the
    controller passes the admin configuration's). With an egress policy, a request
    through the proxy is judged by its destination, not by the proxy: the destination
    is resolved here and every request refused that the policy would refuse directly.

    ``on_asset``, when given, is called with ``(base_url, path, result)`` after every
    :meth:`get_asset` (e.g. to keep the CDN's answers as evidence without a second
    request).
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
        egress: Egress | None = None,
        on_asset: AssetHook | None = None,
        scoped_headers: Callable[[str], Mapping[str, str]] | None = None,
        proxies: Proxies | None = None,
    ) -> None:
        if egress is not None and (transport is not None or http.transport != "http1"):
            chosen = "an injected transport" if transport is not None else repr(http.transport)
            raise ValueError(
                f"an egress policy is enforced only by the 'http1' transport, not {chosen}"
            )
        self._egress = egress
        self._proxies = proxies if proxies else None
        self._proxied: dict[str, httpx.AsyncBaseTransport] = {}  # proxy URL -> its pool
        self._on_asset = on_asset
        # Headers only some URLs get (admin credentials scoped to hosts), asked for each
        # request, redirect hops included (artifactcheck/tenancy/credentials.py).
        self._scoped = scoped_headers
        self._http = http
        self._retry = retry
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self.budget = budget if budget is not None else RetryBudget.from_settings(retry)
        self.stats = FetchStats()
        self.ssl_context = build_ssl_context(http)
        self._secret_headers = configured_headers(http)  # values never logged or shown
        self._headers = {
            "user-agent": USER_AGENT,
            "accept": "*/*",
            "accept-encoding": accepted_encodings(http.identity_encoding),
            **self._secret_headers,
        }
        self._injected = transport
        self.transport_name = "injected" if transport is not None else http.transport
        # Per request, as httpx's transports read it; the pool wait is bounded by our
        # own semaphores already, so it may take the whole request's time.
        self._timeout_ext = {
            "connect": http.connect_timeout,
            "read": http.read_timeout,
            "write": http.read_timeout,
            "pool": http.request_timeout,
        }
        self._total = asyncio.Semaphore(http.max_connections)
        self._per_host: dict[str, asyncio.Semaphore] = {}
        self._transport: httpx.AsyncBaseTransport | None = None
        self._bases: dict[str, BaseRoute] = {}  # base URL -> parsed once
        self._heads: dict[tuple[tuple[str, str], ...], tuple[bytes, bool]] = {}
        self._lean: Http1Transport | None = None  # the lean path, for our own transport
        self._hashing: ThreadPoolExecutor | None = None  # large bodies' hashes, while open
        self._keys: dict[str, str] = {}  # "scheme://authority" -> host key
        self._budget_warned = False

    @property
    def egress(self) -> Egress | None:
        """The egress policy this Fetcher enforces, for other connections of the same
        run (e.g. :func:`artifactcheck.fetch.tls.probe_certificate`)."""
        return self._egress

    def __repr__(self) -> str:
        headers = {name: "***" for name in self._secret_headers}
        return f"<Fetcher transport={self.transport_name} extra_headers={headers}>"

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        if self._transport is not None:
            raise RuntimeError("this Fetcher is already open")
        if self._injected is not None:
            self._transport = self._injected
        elif self._http.transport == "http1":  # ours: httpx is not even imported
            self._transport = Http1Transport(
                ssl_context=self.ssl_context,
                keepalive=KEEPALIVE,
                max_idle=max(self._http.max_connections * 2, 64),
                egress=self._egress,
            )
        else:
            from artifactcheck.fetch.transports import make_transport

            self._transport = make_transport(self._http, self.ssl_context, self._egress)
        # Our own transport is called without httpx.Request/Response objects (their URL
        # and header normalisation were a quarter of the CPU of a small GET); any other
        # transport, and a subclass that may override handle_async_request, gets them.
        if type(self._transport) is Http1Transport:
            self._lean = self._transport
        # One thread (started on the first large body): hashes of bodies past
        # response.OFFLOAD_AFTER use the second core while the loop reads on.
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fetch-hash")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the transport and every pooled connection."""
        transport, self._transport = self._transport, None
        self._lean = None
        proxied, self._proxied = list(self._proxied.values()), {}
        for pool in proxied:
            await pool.aclose()
        hashing, self._hashing = self._hashing, None
        if hashing is not None:
            hashing.shutdown(wait=True)  # at most a backlog of a cancelled body is left
        if transport is not None:
            await transport.aclose()

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
        got = await self._fetch(
            base_url,
            path,
            cap=self._http.max_body_bytes,
            algorithms=tuple(names),
            keep_body=False,
            host=host_header,
            accept_encoding=accept_encoding,
        )
        if self._on_asset is not None:
            self._on_asset(base_url, path, got)
        return got

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
        if self._transport is None:
            raise RuntimeError("use the Fetcher as 'async with Fetcher(...) as fetcher'")
        try:
            relative = normalise_path(path)
            base = self._bases.get(base_url) or self._parse_base(base_url)
            url = base.base.join(relative)
        except (ArtifactCheckError, ValueError) as exc:
            self.stats.errors[ErrorKind.UNSAFE] += 1
            return Fetched(
                url=path if isinstance(path, str) else "",
                path=str(path),
                error=f"refused without a request: {exc}",
                error_kind=ErrorKind.UNSAFE,
                attempts=0,
            )
        proxy = self._proxy_for(url, instance=host != "")
        host = self._http.host_header if host is None else (host or None)
        problem = header_problem("host", host) if host else None
        if problem is not None:
            self.stats.errors[ErrorKind.CONFIG] += 1
            return Fetched(
                url=url,
                path=relative,
                error=f"refused without a request: {problem}",
                error_kind=ErrorKind.CONFIG,
                attempts=0,
            )
        headers = {"host": host} if host else {}
        if accept_encoding is not None:
            if accept_encoding not in ACCEPTED_CODINGS:
                raise ValueError(f"unknown content coding {accept_encoding!r}")
            headers["accept-encoding"] = accept_encoding
        extensions: dict[str, Any] = {}
        if host and url.startswith("https:"):
            extensions["sni_hostname"] = server_name(host)

        call = _Call(headers, extensions, cap, algorithms, keep_body, proxy)
        self.budget.record_first_attempt()
        self.stats.first_attempts += 1
        tally = _Tally()
        try:
            return await self._attempts(url, base, relative, call, tally)
        except Exception as exc:  # noqa: BLE001 - one fetch's failure is its result
            self._log.debug("GET %s failed unexpectedly", url, exc_info=True)
            result = Attempt(tally.url or url).fail(*unexpected(exc))
            return self._finish(result, relative, tally.sent, tally.elapsed)

    async def _attempts(
        self, url: str, base_url: BaseRoute, relative: str, call: _Call, tally: _Tally
    ) -> Fetched:
        """Send, follow safe redirects, retry, give up; ``tally`` follows the progress."""
        attempts = self._retry.attempts
        base = base_url.base.directory
        route: Route | None = base_url.route_of(url) if self._lean is not None else None
        tries = 0  # tries of the current URL
        hops = 0
        while True:
            tries += 1
            tally.url = url
            result = await self._exchange(url, call, route)
            tally.sent += 1
            tally.elapsed += result.elapsed
            sent, elapsed = tally.sent, tally.elapsed

            if result.location is not None:
                try:
                    target = urls.resolve_redirect(url, result.location)
                except ValueError as exc:
                    message = f"HTTP {result.status} redirect to an unusable Location: {exc}"
                    result.fail(ErrorKind.PROTOCOL, message)
                    return self._finish(result, relative, sent, elapsed)
                if not urls.is_under(base, target):
                    message = (
                        f"HTTP {result.status} redirect to {target} leaves {base}; not followed"
                    )
                    result.fail(ErrorKind.REDIRECT_OFF_BASE, message)
                elif hops >= MAX_REDIRECTS:
                    message = f"more than {MAX_REDIRECTS} redirects; last to {target}"
                    result.fail(ErrorKind.STATUS, message)
                else:
                    hops += 1
                    self.stats.redirects += 1
                    url, tries, route = target, 0, None
                    continue

            reason = result.retry_reason
            if reason is None:
                return self._finish(result, relative, sent, elapsed)
            if tries >= attempts:
                if result.error is None:
                    result.fail(ErrorKind.STATUS, f"HTTP {result.status} after {tries} attempt(s)")
                return self._finish(result, relative, sent, elapsed)
            if not self.budget.try_spend():
                self.stats.budget_denied += 1
                self._budget_spent(url, tries, attempts, reason)
                message = f"{reason}; not retried: the retry budget of this run is spent"
                result.fail(ErrorKind.BUDGET, message)
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
            self.stats.host(self._host_key(url)).retries += 1
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

    def _finish(self, result: Attempt, path: str, sent: int, elapsed: float) -> Fetched:
        """The frozen observation handed to the caller, counted in the stats."""
        if result.error_kind is not None:
            self.stats.errors[result.error_kind] += 1
            self.stats.host(self._host_key(result.url)).errors += 1
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

    def _parse_base(self, base_url: str) -> BaseRoute:
        """:class:`BaseRoute` of a base URL, memoised; ValueError for an unusable one."""
        if len(self._bases) > _MEMO_LIMIT:
            self._bases.clear()
        base = urls.parse_base(base_url)
        parsed = self._bases[base_url] = BaseRoute(base, Route.of(base.directory))
        return parsed

    def _proxy_for(self, url: str, *, instance: bool) -> str | None:
        """The proxy a call for ``url`` goes through: none for an instance unless
        ``http.proxy_instances``; otherwise what ``NO_PROXY`` and the scheme say."""
        if self._proxies is None or (instance and not self._http.proxy_instances):
            return None
        return self._proxies.for_url(url)

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

    # ----------------------------------------------------------------- one request

    async def _exchange(self, url: str, call: _Call, route: Route | None) -> Attempt:
        """One request under the concurrency slots and the whole-request timeout."""
        key = self._host_key(url)
        per_host = self._per_host.get(key)
        if per_host is None:
            per_host = self._per_host[key] = asyncio.Semaphore(self._http.max_per_host)
        host_stats = self.stats.host(key)
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
                    if call.proxy is not None:
                        if self._egress is not None:  # the destination, not the proxy
                            target = Route.of(url)
                            await approved_address(target.host, target.port, self._egress)
                        result = await self._send(url, call, progress, self._via(call.proxy))
                        _refused_by_proxy(result, call.proxy)
                    elif self._lean is not None:
                        result = await self._send_lean(self._lean, url, call, progress, route)
                    else:
                        result = await self._send(url, call, progress)
            except TimeoutError as exc:
                if deadline.expired():
                    message = (
                        f"no complete response within {self._http.request_timeout}s"
                        " (request_timeout)"
                    )
                    result = Attempt(url).fail(ErrorKind.TIMEOUT, message)
                else:
                    result = Attempt(url).fail(*self._classify(exc, progress))
            except classified() as exc:
                result = Attempt(url).fail(*self._classify(exc, progress))
            except Exception as exc:  # noqa: BLE001 - anything else: this request's error
                self._log.debug("GET %s failed unexpectedly", url, exc_info=True)
                result = Attempt(url).fail(*unexpected(exc))
            finally:
                stats.in_flight -= 1
                host_stats.in_flight -= 1
            if call.proxy is not None and result.error is not None and "proxy" not in result.error:
                # "cannot connect: Connection refused" would send the user to the CDN
                result.error += f" (through the HTTP proxy {call.proxy})"
            result.elapsed = time.monotonic() - started
            return result

    def _via(self, proxy: str) -> httpx.AsyncBaseTransport:
        """httpx's pool through ``proxy``, one per proxy URL, made on first use."""
        pool = self._proxied.get(proxy)
        if pool is None:
            from artifactcheck.fetch.transports import proxy_transport

            pool = self._proxied[proxy] = proxy_transport(self._http, self.ssl_context, proxy)
        return pool

    async def _send(
        self,
        url: str,
        call: _Call,
        progress: _Progress,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> Attempt:
        """Send and read; the response is always closed, also when cancelled mid-body."""
        transport = transport or self._transport
        assert transport is not None
        # Straight to the transport (no AsyncClient): its auth and redirect flows, cookie
        # jar and response wrapping would cost about a third of the CPU per request, for
        # nothing: redirects are followed by hand and no cookie is ever sent.
        import httpx  # any transport but ours takes httpx's requests

        request = httpx.Request(
            "GET",
            url,
            headers={**self._headers, **self._scoped_for(url), **call.headers},
            extensions={"timeout": self._timeout_ext, **call.extensions},
        )
        response = await transport.handle_async_request(request)
        return await self._read(response, url, call, progress)

    async def _send_lean(
        self,
        transport: Http1Transport,
        url: str,
        call: _Call,
        progress: _Progress,
        route: Route | None,
    ) -> Attempt:
        """:meth:`_send` over our own transport, sending the same bytes without building
        an ``httpx.Request`` or ``httpx.Response``; the response is always closed."""
        if route is None:  # a redirect target: parsed as httpx.Request would
            route = Route.of(url)
        if route.scheme not in ("http", "https"):
            raise UnsupportedProtocol(f"unsupported URL scheme {route.scheme!r}")
        scoped = self._scoped_for(url)
        block, has_host = self._head({**scoped, **call.headers} if scoped else call.headers)
        host_line = b"Host: " + route.netloc + b"\r\n" if not has_host and route.netloc else b""
        payload = b"GET " + route.target + b" HTTP/1.1\r\n" + host_line + block + b"\r\n"
        key = (route.scheme, route.host, route.port, call.extensions.get("sni_hostname"))
        http = self._http
        response = await transport.exchange(
            key, payload, connect_timeout=http.connect_timeout, read_timeout=http.read_timeout
        )
        return await self._read(response, url, call, progress)

    async def _read(
        self, response: reading.Response, url: str, call: _Call, progress: _Progress
    ) -> Attempt:
        """Read the body under the call's cap; the response is always closed."""
        try:
            progress.reading_body = True
            return await reading.read(
                response,
                url,
                cap=call.cap,
                algorithms=call.algorithms,
                keep_body=call.keep_body,
                stats=self.stats,
                hashing=self._hashing,
            )
        finally:
            await response.aclose()  # closes (not pools) a connection left mid-body

    def _scoped_for(self, url: str) -> Mapping[str, str]:
        return self._scoped(url) if self._scoped is not None else {}

    def _head(self, extra: Mapping[str, str]) -> tuple[bytes, bool]:
        """The header lines of a request with ``extra`` on top of the Fetcher's own, as
        httpx.Request would write them, checked by :func:`header_block`; memoised."""
        memo = tuple(extra.items())
        head = self._heads.get(memo)
        if head is None:
            merged = {**self._headers, **extra}
            raw = [(name.encode("ascii"), value.encode("ascii")) for name, value in merged.items()]
            has_host = any(name.lower() == "host" for name in merged)
            head = (header_block(raw), has_host)
            if len(self._heads) > _MEMO_LIMIT:
                self._heads.clear()
            self._heads[memo] = head
        return head

    def _classify(self, exc: BaseException, progress: _Progress) -> tuple[ErrorKind, str]:
        return classify(exc, reading_body=progress.reading_body, http=self._http)
