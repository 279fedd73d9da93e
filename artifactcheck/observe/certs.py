"""The certificates endpoints present, read once per endpoint and run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from urllib.parse import urlsplit

from artifactcheck.fetch.tls import probe_certificate
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.settings import HttpSettings
from artifactcheck.model.values import CertInfo

log = logging.getLogger("artifactcheck")


class Certificates:
    """Reads and remembers the certificate each https endpoint presents.

    It is read without verification on purpose: an expired or mismatched certificate
    is exactly what must be reported, not hidden behind an error.
    """

    def __init__(
        self, http: HttpSettings, egress: Callable[[str, str, int], str | None] | None
    ) -> None:
        self.http = http
        self.egress = egress
        self._tasks: dict[str, asyncio.Task[CertInfo | None]] = {}

    async def of(self, base_url: str, *, own_name: bool = False) -> CertInfo | None:
        """The certificate an https endpoint presents; None for http or none read.

        Instances are asked under the site's name (``http.host_header``); endpoints
        of their own (``own_name``: the CDN) under the name in their URL.
        """
        if not base_url.startswith("https://"):
            return None
        parts = urlsplit(base_url)
        server_name = None if own_name else self.http.host_header
        key = f"{parts.hostname}:{parts.port or 443}/{server_name or ''}"
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.ensure_future(
                self._probe(parts.hostname or "", parts.port or 443, server_name)
            )
            self._tasks[key] = task
        return await asyncio.shield(task)

    async def _probe(self, host: str, port: int, server_name: str | None) -> CertInfo | None:
        try:
            return await probe_certificate(
                host,
                port,
                server_name=server_name,
                ssl_context=None,
                timeout=self.http.connect_timeout,
                egress=self.egress,  # no handshake with an address the policy refuses
            )
        except ArtifactCheckError as exc:
            log.debug("no certificate from %s:%s: %s", host, port, exc)
            return None
