"""One request on the wire, under the :class:`~artifactcheck.fetch.fetcher.Fetcher`.

The Fetcher decides *what* to request (the URL under its base, the retries, the
redirects, the slots each request holds); :class:`Wire` owns *how* one request goes
out and comes back: the run's transport (our own HTTP/1.1 one, or one injected for a
test), our own transport through each HTTP proxy (absolute form for http,
CONNECT tunnels for https: :mod:`artifactcheck.fetch.tunnel`), the request head (the Fetcher's
headers and the secret ones, checked where written), and the body read under the
call's cap with its hashes. Over our own transport no ``httpx.Request`` or
``httpx.Response`` is built, and httpx is not imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NamedTuple

from artifactcheck.fetch import response as reading
from artifactcheck.fetch.copies import KnownBodies
from artifactcheck.fetch.egress_guard import approved_address
from artifactcheck.fetch.error_kinds import UnsupportedProtocol
from artifactcheck.fetch.http1 import KEEPALIVE, Http1Transport, header_block
from artifactcheck.fetch.response import Attempt
from artifactcheck.fetch.routes import Route
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.fetch.tunnel import ProxyEndpoint, shown
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.settings import HttpSettings

if TYPE_CHECKING:
    import ssl

    import httpx

    from artifactcheck.tenancy.egress import Egress

__all__ = ["Call", "Progress", "Wire"]

_MEMO_LIMIT = 65_536  # request heads memoised before the memo is reset


class Call(NamedTuple):
    """What one ``get_*`` call asks of every request it sends (retries, redirect hops).

    A named tuple, not a frozen dataclass: one is made per GET, and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, which
    costs more than the tuple (docs/benchmarks.md, "The cost per GET").
    """

    headers: Mapping[str, str]  # on top of the Fetcher's own
    extensions: Mapping[str, Any]
    cap: int
    algorithms: tuple[str, ...]
    keep_body: bool
    proxy: str | None = None  # the proxy every request of the call goes through
    stored: str | None = None  # the coding the file asked for is stored in (``.gz``)


class Progress:
    """Which phase a request reached, so an exception can be told apart."""

    __slots__ = ("reading_body",)

    def __init__(self) -> None:
        self.reading_body = False


def refused_by_proxy(result: Attempt, proxy: str) -> None:
    """Fail ``result`` when its status may be the proxy's own refusal, not an answer.

    Over https the proxy only tunnels (a refused CONNECT is an error already) and TLS
    proves who answered. Over plain http a 403 is what a proxy's policy answers too, in
    the same form as the destination's; a 407 is always the proxy's. Judged, either
    would call every file missing (cdn-missing, exit 1): a fetch error instead.
    """
    if result.error is not None or result.status not in (403, 407):
        return
    if result.status == 407:
        message = f"the HTTP proxy {shown(proxy)} asks for credentials (407)"
    elif result.url.startswith("http:"):
        message = (
            f"HTTP 403 through the HTTP proxy {shown(proxy)}: over plain http the proxy's refusal "
            "cannot be told from the server's answer; not judged"
        )
    else:
        return
    result.hashes, result.size = {}, None
    result.fail(ErrorKind.CONNECT, message)


class Wire:
    """The transports of one Fetcher, and one request sent and read over them."""

    def __init__(
        self,
        *,
        http: HttpSettings,
        ssl_context: ssl.SSLContext,
        headers: Mapping[str, str],
        stats: FetchStats,
        egress: Egress | None,
        transport: httpx.AsyncBaseTransport | None,
        scoped_headers: Callable[[str], Mapping[str, str]] | None,
    ) -> None:
        self._http = http
        self._ssl = ssl_context
        self._headers = dict(headers)
        self._stats = stats
        self._egress = egress
        self._injected = transport
        # Headers only some URLs get (admin credentials scoped to hosts), asked for each
        # request, redirect hops included (artifactcheck/tenancy/credentials.py).
        self._scoped = scoped_headers
        # Per request, as httpx's transports read it; the pool wait is bounded by the
        # Fetcher's own semaphores already, so it may take the whole request's time.
        self._timeout_ext = {
            "connect": http.connect_timeout,
            "read": http.read_timeout,
            "write": http.read_timeout,
            "pool": http.request_timeout,
        }
        self.transport: httpx.AsyncBaseTransport | None = None
        self.lean: Http1Transport | None = None  # the lean path, for our own transport
        self._proxied: dict[str, Http1Transport] = {}  # proxy URL -> its pool
        self._heads: dict[tuple[tuple[str, str], ...], tuple[bytes, bool]] = {}
        self._hashing: ThreadPoolExecutor | None = None  # large bodies' hashes, while open
        self._known = KnownBodies()  # small bodies' digests, for their copies

    def open(self) -> None:
        """Make the run's transport (RuntimeError when open already)."""
        if self.transport is not None:
            raise RuntimeError("this Fetcher is already open")
        http = self._http
        if self._injected is not None:
            self.transport = self._injected
        else:  # ours: httpx is not even imported
            self.transport = Http1Transport(
                ssl_context=self._ssl,
                keepalive=KEEPALIVE,
                max_idle=max(http.max_connections * 2, 64),
                egress=self._egress,
            )
        # Our own transport is called without httpx.Request/Response objects (their URL
        # and header normalisation were a quarter of the CPU of a small GET); any other
        # transport, and a subclass that may override handle_async_request, gets them.
        if type(self.transport) is Http1Transport:
            self.lean = self.transport
        # One thread (started on the first large body): hashes of bodies past
        # response.OFFLOAD_AFTER use the second core while the loop reads on.
        self._hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fetch-hash")

    async def aclose(self) -> None:
        """Close the transport and every pooled connection."""
        transport, self.transport = self.transport, None
        self.lean = None
        proxied, self._proxied = list(self._proxied.values()), {}
        for pool in proxied:
            await pool.aclose()
        hashing, self._hashing = self._hashing, None
        if hashing is not None:
            hashing.shutdown(wait=True)  # at most a backlog of a cancelled body is left
        if transport is not None:
            await transport.aclose()

    async def send(
        self,
        url: str,
        call: Call,
        progress: Progress,
        route: Route | None,
        deadline: float | None = None,
    ) -> Attempt:
        """One request and its response read: through the call's proxy, over our own
        transport (``route`` is the URL's, None for a redirect target), or over another.

        ``deadline`` (on the loop's clock): the whole request's, kept by our own
        transport's connection (RequestTimeout), for a direct request over it only
        (:attr:`keeps_deadline`); any other request is bounded by the caller.
        """
        if call.proxy is not None:
            if self._egress is not None:  # the destination, not the proxy
                target = Route.of(url)
                await approved_address(target.host, target.port, self._egress)
            result = await self._send_lean(self._via(call.proxy), url, call, progress, route)
            refused_by_proxy(result, call.proxy)
            return result
        if self.lean is not None:
            return await self._send_lean(self.lean, url, call, progress, route, deadline)
        return await self._send(url, call, progress)

    def keeps_deadline(self, call: Call) -> bool:
        """True when a request of ``call`` goes direct over our own transport, whose
        connection keeps the request's deadline (:meth:`send`'s ``deadline``).

        Through a proxy, an egress check of the destination and the proxy's own pool
        come before the connection, and an injected transport keeps no deadline: those
        stay under the caller's ``asyncio.timeout``.
        """
        return call.proxy is None and self.lean is not None

    def _via(self, proxy: str) -> Http1Transport:
        """Our own transport through ``proxy``, one per proxy URL, made on first use
        (no egress policy: :meth:`send` judges the destination, never the proxy)."""
        pool = self._proxied.get(proxy)
        if pool is None:
            pool = self._proxied[proxy] = Http1Transport(
                ssl_context=self._ssl,
                keepalive=KEEPALIVE,
                max_idle=max(self._http.max_connections * 2, 64),
                proxy=ProxyEndpoint.parse(proxy),
            )
        return pool

    async def _send(
        self,
        url: str,
        call: Call,
        progress: Progress,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> Attempt:
        """Send and read; the response is always closed, also when cancelled mid-body."""
        transport = transport or self.transport
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
        call: Call,
        progress: Progress,
        route: Route | None,
        deadline: float | None = None,
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
        target, proxy = route.target, transport.proxy
        if proxy is not None and route.scheme == "http":  # https: inside the tunnel
            target = proxy.forwarded_target(route.scheme, route.netloc, target)
            block += proxy.authorization
        payload = b"GET " + target + b" HTTP/1.1\r\n" + host_line + block + b"\r\n"
        key = (route.scheme, route.host, route.port, call.extensions.get("sni_hostname"))
        http = self._http
        response = await transport.exchange(
            key,
            payload,
            connect_timeout=http.connect_timeout,
            read_timeout=http.read_timeout,
            deadline=deadline,
        )
        return await self._read(response, url, call, progress, deadline)

    async def _read(
        self,
        response: reading.Response,
        url: str,
        call: Call,
        progress: Progress,
        deadline: float | None = None,
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
                stats=self._stats,
                hashing=self._hashing,
                stored=call.stored,
                deadline=deadline,
                known=self._known,
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
