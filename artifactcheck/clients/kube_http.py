"""The asynchronous Kubernetes API client: plain HTTP requests over httpx.

Why not the official client: it is synchronous, so every request and every open watch
holds a thread, and a 429 answered to a request whose caller was cancelled lands on a
thread nobody awaits any more. Here a request is a coroutine and a watch an async
iterator on the caller's task: cancelling the task cancels the request, and whatever
the answer was (a 429's ``Retry-After`` included) is seen by the task that asked.

What the official client does well is kept: :class:`KubeHttp` is built from its
``Configuration`` (filled by :func:`artifactcheck.clients.kube.load_api_client` from a
kubeconfig or the in-cluster service account), which gives the server's URL, the TLS
settings (CA, client certificate, verification, server name) and the authorization
header, refreshed by the configuration's own hook when an exec credential plugin's or a
projected service-account token expires. The JSON goes and comes as the API sends it,
as with the synchronous client's raw requests (:func:`artifactcheck.clients.kube.raw`).
Answers and watch events are decoded by pydantic-core's JSON parser (pydantic is a
dependency already), which reads a pod faster than the standard library's ``json``; the
controller decodes two pods per gate it opens (the PATCH's answer and the watch event
it brings).

Errors are translated as the synchronous client's are
(:func:`artifactcheck.clients.kube.translate_status`): a caller of either sees the same
:class:`~artifactcheck.model.errors.ConfigError`, ``DependencyError``, ``Throttled``,
``WatchExpired`` or :class:`~artifactcheck.clients.kube.ApiStatus`.

This is the one module of the Kubernetes adapter that imports httpx (the import-linter
contract names it).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar

import httpx
from pydantic_core import from_json

from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    MERGE_PATCH,
    ApiClient,
    ApiStatus,
    Configuration,
    Logger,
    Timeout,
    WatchExpired,
    refresh_may_block,
    retry_after_seconds,
    status_message,
    translate_status,
)
from artifactcheck.clients.kube_bodies import JsonObj, StatusBody, WatchEvent, obj, typed
from artifactcheck.model.errors import DependencyError

__all__ = ["KubeHttp", "Params", "mutate", "ssl_context_for"]

T = TypeVar("T")

#: Query parameters of one request, as the API names them (``labelSelector`` ...).
Params = Mapping[str, str | int | bool]

#: The most of a watch stream kept while waiting for the end of its line: an event
#: larger than this is not a Kubernetes object (the API server caps them at ~3 MiB).
_MAX_LINE = 16 * 1024 * 1024


def _timeout(value: Timeout) -> httpx.Timeout:
    """``(connect, read)`` seconds, or one for both, as httpx wants it."""
    connect, read = value if isinstance(value, tuple) else (value, value)
    return httpx.Timeout(read, connect=connect)


def ssl_context_for(configuration: Configuration) -> ssl.SSLContext:
    """The TLS context the official client would use for ``configuration``: its CA (or
    the system's), its client certificate, and no verification only when it says so."""
    ctx = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        ctx.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    if not configuration.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        ctx.check_hostname = False
    return ctx


def _auth_headers(configuration: Configuration) -> dict[str, str]:
    """The authorization headers of ``configuration``, read at each request: its
    ``get_api_key_with_prefix`` runs the refresh hook the kubeconfig loader installs
    (exec plugins, expiring tokens) before it answers."""
    headers: dict[str, str] = {}
    for setting in configuration.auth_settings().values():
        if isinstance(setting, Mapping) and setting.get("in") == "header" and setting.get("value"):
            headers[str(setting["key"])] = str(setting["value"])
    return headers


class KubeHttp:
    """One connection pool to one API server; close it with :meth:`aclose`.

    ``transport`` replaces the network (a test's, or a proxy's); otherwise the
    configuration's proxy is the only one used: never one from the environment, as the
    official client never reads it either.
    """

    def __init__(
        self,
        configuration: Configuration,
        *,
        timeout: Timeout = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
        headers: Mapping[str, str] | None = None,
        failures: tuple[type[Exception], ...] = (),
        timeouts: tuple[type[Exception], ...] = (),
    ) -> None:
        self.configuration = configuration
        # What a failed exchange raises: httpx's errors, and those of a ``transport``
        # that is not httpx's (``failures``; its ``timeouts`` among them), each a
        # dependency failure naming the request.
        self._failures: tuple[type[Exception], ...] = (httpx.HTTPError, OSError, *failures)
        self._timeouts: tuple[type[Exception], ...] = (httpx.TimeoutException, *timeouts)
        self.timeout = timeout
        https = str(configuration.host).startswith("https:")
        self._refresh_blocks = refresh_may_block(configuration)
        # The transport is kept at hand: a request is sent on it directly, past the
        # client's layers (auth, redirects, cookies, event hooks) that an API request
        # never uses and that cost as much as the transport itself per request; the
        # client builds the requests and streams the watches.
        self._transport = transport or httpx.AsyncHTTPTransport(
            verify=ssl_context_for(configuration) if https else False,
            trust_env=False,
            proxy=configuration.proxy or None,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=20),
        )
        self._client = httpx.AsyncClient(
            base_url=str(configuration.host).rstrip("/"),
            timeout=_timeout(timeout),
            trust_env=False,
            transport=self._transport,
            headers={
                "User-Agent": "artifactcheck",
                **(headers or {}),
                "Accept": "application/json",
            },
        )
        # What the client's ``build_request`` would merge into every request, merged
        # once: it parses the URL three times per call (:meth:`_build`). A request
        # copies the extensions it is given, so one dict serves them all.
        self._base = str(self._client.base_url).rstrip("/") + "/"
        self._extensions = {"timeout": self._client.timeout.as_dict()}

    @classmethod
    def like(cls, api_client: ApiClient, **options: Any) -> KubeHttp:
        """A client to the server of ``api_client``, with its configuration and the
        headers its owner set on it (``Impersonate-User`` ...)."""
        return cls(api_client.configuration, headers=dict(api_client.default_headers), **options)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> KubeHttp:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ requests

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        # A refresh hook may run an exec credential plugin (a subprocess): off the loop.
        # The in-cluster token's hook runs here (``refresh_may_block``).
        if self._refresh_blocks:
            headers = await asyncio.to_thread(_auth_headers, self.configuration)
        else:
            headers = _auth_headers(self.configuration)
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    def _build(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        *,
        params: Params | None = None,
        body: object = None,
        timeout: Timeout | None = None,
    ) -> httpx.Request:
        """The request the client's ``build_request`` makes (its base URL, headers and
        timeout; a test holds the two equal), from the parts merged once in
        ``__init__``: the URL is parsed once, not three times."""
        query = {
            k: (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in (params or {}).items()
        }
        merged = httpx.Headers(self._client.headers)
        merged.update(headers)
        return httpx.Request(
            method,
            self._base + path.lstrip("/"),
            params=query or None,
            content=None if body is None else json.dumps(body).encode(),
            headers=merged,
            extensions=self._extensions
            if timeout is None
            else {"timeout": _timeout(timeout).as_dict()},
        )

    async def request(
        self,
        what: str,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: object = None,
        content_type: str | None = None,
        passthrough: Collection[int] = (),
        timeout: Timeout | None = None,
    ) -> object:
        """One request; its decoded JSON answer. ``what`` names it in errors;
        ``passthrough`` statuses are raised as :class:`ApiStatus` (404, 409);
        ``timeout`` replaces the client's for this request (a deadline cut short)."""
        headers = await self._headers(content_type if body is not None else None)
        request = self._build(method, path, headers, params=params, body=body, timeout=timeout)
        try:
            response = await self._transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except self._timeouts as exc:
            raise DependencyError(
                f"{what}: API server unreachable, too slow or overloaded: {exc!r}"
            ) from exc
        except self._failures as exc:
            raise DependencyError(f"{what}: API server unreachable: {exc!r}") from exc
        _raise_for_status(what, response, passthrough)
        try:
            parsed: object = from_json(response.content)
        except ValueError as exc:
            raise DependencyError(f"{what}: the API server answered invalid JSON: {exc}") from exc
        return parsed

    async def get(
        self,
        what: str,
        path: str,
        *,
        passthrough: Collection[int] = (),
        timeout: Timeout | None = None,
    ) -> JsonObj:
        return obj(await self.request(what, "GET", path, passthrough=passthrough, timeout=timeout))

    async def list(
        self,
        what: str,
        path: str,
        params: Params | None = None,
        *,
        passthrough: Collection[int] = (),
        timeout: Timeout | None = None,
    ) -> JsonObj:
        """A list (``items`` and ``metadata.resourceVersion``, where a watch resumes)."""
        return obj(
            await self.request(
                what, "GET", path, params=params, passthrough=passthrough, timeout=timeout
            )
        )

    async def create(
        self,
        what: str,
        path: str,
        body: object,
        *,
        passthrough: Collection[int] = (),
        timeout: Timeout | None = None,
    ) -> JsonObj:
        return obj(
            await self.request(
                what,
                "POST",
                path,
                body=body,
                content_type="application/json",
                passthrough=passthrough,
                timeout=timeout,
            )
        )

    async def replace(
        self,
        what: str,
        path: str,
        body: object,
        *,
        passthrough: Collection[int] = (),
        timeout: Timeout | None = None,
    ) -> JsonObj:
        """PUT ``body``; with its ``metadata.resourceVersion`` a stale write is a 409."""
        return obj(
            await self.request(
                what,
                "PUT",
                path,
                body=body,
                content_type="application/json",
                passthrough=passthrough,
                timeout=timeout,
            )
        )

    async def patch(
        self,
        what: str,
        path: str,
        body: object,
        *,
        content_type: str = MERGE_PATCH,
        passthrough: Collection[int] = (),
        timeout: Timeout | None = None,
    ) -> JsonObj:
        """PATCH ``body`` (merge patch unless ``content_type`` says strategic merge)."""
        return obj(
            await self.request(
                what,
                "PATCH",
                path,
                body=body,
                content_type=content_type,
                passthrough=passthrough,
                timeout=timeout,
            )
        )

    # ------------------------------------------------------------------ watch

    async def watch(
        self,
        what: str,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        params: Params | None = None,
        bookmarks: bool = False,
    ) -> AsyncIterator[tuple[str, JsonObj]]:
        """Stream ``(type, object)`` watch events from ``resource_version`` until the
        server ends the watch (its ``timeoutSeconds``) or the caller stops iterating.

        410 Gone (as a status or as an in-stream ``ERROR``) raises
        :class:`WatchExpired`: relist. A broken stream is a ``DependencyError``.
        The read timeout is a little longer than ``timeout_seconds``, so an idle watch
        ends by the server's timeout, not by a read timeout. Closing the iterator (or
        cancelling its task) closes the stream at once: there is no thread to abort.
        """
        query: dict[str, str | int | bool] = dict(params or {})
        query.update(watch=True, timeoutSeconds=timeout_seconds)
        if resource_version:
            query["resourceVersion"] = resource_version
        if bookmarks:
            query["allowWatchBookmarks"] = True
        connect = self.timeout[0] if isinstance(self.timeout, tuple) else self.timeout
        headers = await self._headers(None)
        request = self._build(
            "GET", path, headers, params=query, timeout=(connect, timeout_seconds + 10.0)
        )
        try:
            response = await self._client.send(request, stream=True)
        except self._failures as exc:
            raise DependencyError(f"{what}: API server unreachable: {exc!r}") from exc
        try:
            if response.status_code >= 400:
                try:
                    await response.aread()
                except self._failures as exc:
                    raise DependencyError(f"{what}: API server unreachable: {exc!r}") from exc
                try:
                    _raise_for_status(what, response, (410,))
                except ApiStatus as st:
                    raise WatchExpired(f"{what}: {st.message}") from st
            pending = b""
            try:
                async for chunk in response.aiter_bytes():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    if len(pending) > _MAX_LINE:
                        raise DependencyError(f"{what}: a watch event larger than 16 MiB")
                    for line in lines:
                        if line.strip():
                            yield _event_of(what, line)
            except self._failures as exc:
                raise DependencyError(f"{what}: the watch connection broke: {exc!r}") from exc
            # a line the server never finished (the stream was cut) is not an event
        finally:
            await response.aclose()


async def mutate(what: str, attempt: Callable[[], Awaitable[T]], *, logger: Logger) -> T:
    """Run a read-modify-write; on 409 Conflict re-read and retry once, then give up.

    ``attempt`` must re-read the object itself, so the retry computes its patch from
    the state that won the race rather than from the stale one.
    """
    try:
        return await attempt()
    except ApiStatus as first:
        if first.status != 409:
            raise
        logger.info("%s: conflict (%s); re-reading and retrying once", what, first.message)
    try:
        return await attempt()
    except ApiStatus as second:
        if second.status != 409:
            raise
        raise DependencyError(
            f"{what}: still conflicting after re-reading: {second.message}"
        ) from second


def _raise_for_status(what: str, response: httpx.Response, passthrough: Collection[int]) -> None:
    status = response.status_code
    if status < 400:
        return
    message = status_message(response.text, response.reason_phrase or None)
    if status in passthrough:
        raise ApiStatus(status, message)
    retry_after = retry_after_seconds(response.headers.get("Retry-After", ""))
    raise translate_status(what, status, message, retry_after)


def _event_of(what: str, line: bytes) -> tuple[str, JsonObj]:
    """One watch line as ``(type, object)``; an ``ERROR`` event raises."""
    try:
        event = typed(from_json(line), WatchEvent[object])
    except ValueError as exc:
        raise DependencyError(f"{what}: the API server sent an invalid event: {exc}") from exc
    kind, body = str(event.get("type")), obj(event.get("object"))
    if kind == "ERROR":
        status = typed(body, StatusBody)
        message = status.get("message") or status.get("reason") or "watch error"
        if status.get("code") == 410:
            raise WatchExpired(f"{what}: {message}")
        raise DependencyError(f"{what}: the watch failed ({status.get('code')}): {message}")
    return kind, body
