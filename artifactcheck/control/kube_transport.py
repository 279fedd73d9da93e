"""The controller's Kubernetes client on the lean HTTP/1.1 transport: :func:`kube_client`.

Why: the controller sends one PATCH per gate it opens (one per pod at the start of a
fleet) and reads every pod event of its watches, on one core. Under httpx's own
transport (httpcore, h11, anyio) most of a gate's CPU, its watch event included, was
that transport's per-request machinery (its locks and cancel scopes, its connection
expiry check, two socket writes); on artifactcheck's own HTTP/1.1 transport
(:class:`~artifactcheck.fetch.http1.Http1Transport`, the one every fetch uses) the same
gate costs about a third of it (docs/benchmarks.md, "The gate writes' CPU").
The requests are the same ``httpx.Request`` :class:`KubeHttp` builds, written as
httpx writes them (a test compares the bytes on the wire), and the answers are read
through the same ``httpx.Response``: only what carries them changes.

What httpx's transport was given is kept: its pool keeps at most 20 idle connections,
each for 5 s (httpx's ``max_keepalive_connections`` and keep-alive expiry), the
configuration's TLS context verifies the server, and nothing retries a request. A
configuration with a proxy keeps httpx's transport, which speaks to proxies as the
official client does. No egress policy applies: the API server is the controller's
own dependency, not a target a check named.
"""

from __future__ import annotations

import ssl
from typing import Any, Final

from artifactcheck.clients.kube import ApiClient
from artifactcheck.clients.kube_http import KubeHttp, ssl_context_for
from artifactcheck.fetch.error_kinds import TimeoutException, TransportError
from artifactcheck.fetch.http1 import Http1Transport

__all__ = ["IDLE_CONNECTIONS", "IDLE_SECONDS", "kube_client"]

#: Idle connections kept to the API server, and for how long (httpx's defaults).
IDLE_CONNECTIONS: Final = 20
IDLE_SECONDS: Final = 5.0


def kube_client(api_client: ApiClient, **options: Any) -> KubeHttp:
    """A :class:`KubeHttp` to the server of ``api_client`` (its configuration and
    headers, as :meth:`KubeHttp.like`), on the lean transport unless the configuration
    names a proxy; ``options`` as :class:`KubeHttp` takes them."""
    configuration = api_client.configuration
    if configuration.proxy:
        return KubeHttp.like(api_client, **options)
    https = str(configuration.host).startswith("https:")
    transport = Http1Transport(
        # An http:// server is never spoken TLS to; the transport wants a context anyway,
        # and one that trusts no CA is made at once (the system's loads every CA first).
        ssl_context=ssl_context_for(configuration)
        if https
        else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT),
        keepalive=IDLE_SECONDS,
        max_idle=IDLE_CONNECTIONS,
    )
    return KubeHttp.like(
        api_client,
        transport=transport,
        failures=(TransportError,),
        timeouts=(TimeoutException,),
        **options,
    )
