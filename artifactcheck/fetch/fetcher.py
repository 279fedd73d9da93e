"""HTTP observation of instances and the CDN: the :class:`Fetcher` and its retry loop.

Everything the network edge must guarantee is kept by this package
(docs/architecture.md, docs/reliability.md); the Fetcher ties it together:

- every GET has connect/read timeouts and a whole-request limit around headers *and*
  body (kept by the connection's one read timer on our own transport, an
  ``asyncio.timeout`` otherwise); the per-instance deadline is the caller's
  ``asyncio.timeout``, and cancellation closes the connection it interrupts;
- bodies are hashed while streaming, under a byte cap enforced on the decoded bytes
  piece by piece (:mod:`artifactcheck.fetch.response`, :mod:`artifactcheck.fetch.decoders`);
- one retry loop (here): connection errors, timeouts, 5xx and 429 only, exponential
  backoff with full jitter, ``Retry-After`` honoured, and a
  :class:`~artifactcheck.fetch.retry.RetryBudget` per run so a failing fleet never
  receives more than a small multiple of its normal load;
- concurrency bounded in total and per host by semaphores we own, over ONE transport
  whose connections are kept alive for the whole run (:mod:`artifactcheck.fetch.http1`);
- only URLs under the given base URL are requested, and redirects are followed by
  hand, only while they stay under that base (no SSRF);
- per-request problems are returned as values (:class:`~artifactcheck.model.values.Fetched`
  with an :class:`~artifactcheck.model.errors.ErrorKind`), never raised: "could not
  observe" must stay apart from "observed something wrong", and a fleet check must not
  die of one bad pod; this holds for any exception inside one fetch, only cancellation
  propagates (:mod:`artifactcheck.fetch.error_kinds` maps the transports' exceptions);
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
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

from artifactcheck.fetch import urls
from artifactcheck.fetch.decoders import ACCEPTED_CODINGS, accepted_encodings
from artifactcheck.fetch.error_kinds import RequestTimeout, classified, classify, unexpected
from artifactcheck.fetch.headers import USER_AGENT, configured_headers, header_problem, server_name
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.fetch.response import Attempt
from artifactcheck.fetch.retry import RetryBudget, backoff_delay, parse_retry_after
from artifactcheck.fetch.routes import BaseRoute, Route
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.fetch.tls import build_ssl_context
from artifactcheck.fetch.tunnel import shown
from artifactcheck.fetch.wire import Call, Progress, Wire
from artifactcheck.judge.codings import stored_coding
from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.errors import ArtifactCheckError, ErrorKind
from artifactcheck.model.records import MutableRecord
from artifactcheck.model.settings import HttpSettings, RetrySettings
from artifactcheck.model.values import Fetched

if TYPE_CHECKING:
    import httpx

    from artifactcheck.tenancy.egress import Egress

__all__ = ["MAX_REDIRECTS", "AssetHook", "Fetcher"]

MAX_REDIRECTS: Final = 5
_MEMO_LIMIT = 65_536  # base URLs / hosts memoised before the memo is reset

#: Called with ``(base_url, path, result)`` after every :meth:`Fetcher.get_asset`.
AssetHook = Callable[[str, str, Fetched], None]


class _Tally(MutableRecord):
    """What one ``get_*`` call did so far, kept for the result of an unexpected error."""

    url: str = ""
    sent: int = 0
    elapsed: float = 0.0


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
    connect (rebinding) cannot redirect it. Only our own transport can enforce a
    policy; combined with an injected transport it is a ValueError, never a policy
    silently ignored.

    ``proxies``, when given, are the HTTP proxies of release sources and CDNs: a call
    for a URL's own host (``host_header=""``, as the CDN and release sources are
    fetched) goes through the proxy :meth:`Proxies.for_url` names, over our own transport;
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
        if egress is not None and transport is not None:
            raise ValueError(
                "an egress policy is enforced only by the 'http1' transport, "
                "not an injected transport"
            )
        self._egress = egress
        self._proxies = proxies if proxies else None
        self._on_asset = on_asset
        self._http = http
        self._retry = retry
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self.budget = budget if budget is not None else RetryBudget.from_settings(retry)
        self.stats = FetchStats()
        self.ssl_context = build_ssl_context(http)
        self._secret_headers = configured_headers(http)  # values never logged or shown
        headers = {
            "user-agent": USER_AGENT,
            "accept": "*/*",
            "accept-encoding": accepted_encodings(http.identity_encoding),
            **self._secret_headers,
        }
        self._wire = Wire(
            http=http,
            ssl_context=self.ssl_context,
            headers=headers,
            stats=self.stats,
            egress=egress,
            transport=transport,
            scoped_headers=scoped_headers,
        )
        self.transport_name = "injected" if transport is not None else http.transport
        self._total = asyncio.Semaphore(http.max_connections)
        self._per_host: dict[str, asyncio.Semaphore] = {}
        self._bases: dict[str, BaseRoute] = {}  # base URL -> parsed once
        self._keys: dict[str, str] = {}  # "scheme://authority" -> host key
        # path asked for -> (normalised, the coding it is stored in): the same few paths
        # are asked of every instance, and both are pure functions of the path
        self._paths: dict[str, tuple[str, str | None]] = {}
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
        self._wire.open()
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
        await self._wire.aclose()

    # ----------------------------------------------------------------- public API

    async def get_document(
        self,
        base_url: str,
        path: str,
        *,
        max_bytes: int | None = None,
        host_header: str | None = None,
        query: str = "",
    ) -> Fetched:
        """GET a small document (manifest, /version), keeping its decoded body.

        The body is capped at ``max_bytes`` (default ``http.max_manifest_bytes``).
        """
        cap = self._http.max_manifest_bytes if max_bytes is None else max_bytes
        return await self._fetch(
            base_url,
            path,
            cap=cap,
            algorithms=("sha256",),
            keep_body=True,
            host=host_header,
            query=query,
        )

    async def get_asset(
        self,
        base_url: str,
        path: str,
        *,
        algorithms: Iterable[str] = ("sha256",),
        host_header: str | None = None,
        accept_encoding: str | None = None,
        query: str = "",
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
            query=query,  # a page's ?v=...: kept in the request (urls.request_query)
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
        query: str = "",
    ) -> Fetched:
        """The one retry loop: validate, send, follow safe redirects, retry, give up."""
        if self._wire.transport is None:
            raise RuntimeError("use the Fetcher as 'async with Fetcher(...) as fetcher'")
        try:
            known = self._paths.get(path) if type(path) is str else None
            if known is None:
                known = self._normalised(path)
            relative, stored = known
            base = self._bases.get(base_url) or self._parse_base(base_url)
            url = base.base.join(relative) + urls.request_query(query)
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

        call = Call(headers, extensions, cap, algorithms, keep_body, proxy, stored=stored)
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
        self, url: str, base_url: BaseRoute, relative: str, call: Call, tally: _Tally
    ) -> Fetched:
        """Send, follow safe redirects, retry, give up; ``tally`` follows the progress."""
        attempts = self._retry.attempts
        base = base_url.base.directory
        route: Route | None = base_url.route_of(url) if self._wire.lean is not None else None
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

    def _normalised(self, path: str) -> tuple[str, str | None]:
        """(normalised path, the coding it is stored in) of ``path``, memoised;
        UnsafeReferenceError as :func:`normalise_path` (never memoised)."""
        # "" is the base URL itself (an entry page); any other path is normalised
        relative = "" if path == "" else normalise_path(path)
        known = (relative, stored_coding(relative))
        if type(path) is str:
            if len(self._paths) > _MEMO_LIMIT:
                self._paths.clear()
            self._paths[path] = known
        return known

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

    async def _exchange(self, url: str, call: Call, route: Route | None) -> Attempt:
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
            progress = Progress()
            started = time.monotonic()
            limit = self._http.request_timeout
            wire = self._wire
            # Direct over our own transport, the connection's one timer keeps the
            # whole-request deadline (no asyncio.timeout, its timer and its cancel, per
            # GET); any other way keeps the asyncio.timeout around the whole request.
            deadline = None if wire.keeps_deadline(call) else asyncio.timeout(limit)
            try:
                if deadline is None:
                    due = asyncio.get_running_loop().time() + limit
                    result = await wire.send(url, call, progress, route, due)
                else:
                    async with deadline:
                        result = await wire.send(url, call, progress, route)
            except RequestTimeout:
                result = Attempt(url).fail(ErrorKind.TIMEOUT, self._timed_out())
            except TimeoutError as exc:
                if deadline is not None and deadline.expired():
                    result = Attempt(url).fail(ErrorKind.TIMEOUT, self._timed_out())
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
                result.error += f" (through the HTTP proxy {shown(call.proxy)})"
            result.elapsed = time.monotonic() - started
            return result

    def _timed_out(self) -> str:
        """What a request whose whole-request deadline passed is told."""
        return f"no complete response within {self._http.request_timeout}s (request_timeout)"

    def _classify(self, exc: BaseException, progress: Progress) -> tuple[ErrorKind, str]:
        return classify(exc, reading_body=progress.reading_body, http=self._http)
