"""The only way to the instances and CDNs being checked.

One module a job, read in this order:

- :mod:`~artifactcheck.fetch.fetcher`: :class:`Fetcher`, GETs under a base URL with its
  one retry loop, the only entry point the other packages need;
- :mod:`~artifactcheck.fetch.retry`: the per-run :class:`RetryBudget` and the backoff;
- :mod:`~artifactcheck.fetch.stats`: :class:`FetchStats`, the load a run put on the fleet;
- :mod:`~artifactcheck.fetch.response`: one response read, its body hashed under a cap;
- :mod:`~artifactcheck.fetch.decoders`: content codings undone in bounded pieces;
- :mod:`~artifactcheck.fetch.headers`: headers we send (validated), headers we keep;
- :mod:`~artifactcheck.fetch.error_kinds`: the one table from transport exceptions to an
  :class:`~artifactcheck.model.errors.ErrorKind`;
- :mod:`~artifactcheck.fetch.proxy`: which requests go through which proxy (``NO_PROXY``);
- :mod:`~artifactcheck.fetch.http1`, :mod:`~artifactcheck.fetch.connection`: our own
  HTTP/1.1 transport on asyncio, and the connection under it;
- :mod:`~artifactcheck.fetch.egress_guard`: every new connection held to the egress policy;
- :mod:`~artifactcheck.fetch.tls`: the run's TLS context, and certificates read for expiry;
- :mod:`~artifactcheck.fetch.urls`: URL safety (only under the base URL, no SSRF);
- :mod:`~artifactcheck.fetch.routes`: where a URL's request goes, read as httpx reads it;
- :mod:`~artifactcheck.fetch.tunnel`: an HTTP proxy as our transport uses it (absolute
  form, CONNECT tunnels, the proxy's credentials).

A run over our own transport never imports httpx, also through a proxy (its import is
most of what a small check's start-up would spend here): only httpx's API on our
transport and URLs too unusual for :mod:`~artifactcheck.fetch.routes` import it.
"""

import sys

# httpx imports its own command line (``httpx._main``: rich, pygments, click) when it is
# imported (on the runs that import httpx at all), for a client never run here. A
# ``None`` in sys.modules makes that import fail as if the extra were not
# installed, and httpx then defines its stub ``main`` (httpx/__init__.py); nothing else
# changes.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from artifactcheck.fetch.decoders import MAX_CONTENT_CODINGS  # noqa: E402
from artifactcheck.fetch.fetcher import Fetcher  # noqa: E402
from artifactcheck.fetch.headers import EVIDENCE_HEADERS  # noqa: E402
from artifactcheck.fetch.retry import RetryBudget, backoff_delay, parse_retry_after  # noqa: E402
from artifactcheck.fetch.stats import FetchStats, HostStats  # noqa: E402
from artifactcheck.fetch.tls import build_ssl_context, probe_certificate  # noqa: E402

__all__ = [
    "EVIDENCE_HEADERS",
    "MAX_CONTENT_CODINGS",
    "FetchStats",
    "Fetcher",
    "HostStats",
    "RetryBudget",
    "backoff_delay",
    "build_ssl_context",
    "parse_retry_after",
    "probe_certificate",
]
