"""What ``investigate`` and ``fleet`` fetch besides the check itself.

The on-call commands run the same check as ``verify`` and then show more than a report
holds: what the CDN answered for each asset, the certificates the target and the CDN
present, and for ``--diff`` the bytes of a mismatching file, served and expected. This
module fetches those; building the views from them is
:mod:`artifactcheck.present.oncall`'s (pure), and running the check and putting
both together is :mod:`artifactcheck.investigation`'s, the layer that may call
the pipeline and the views alike.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.fetch.tls import probe_certificate
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import CertInfo, Fetched

__all__ = [
    "DIFF_MAX_BYTES",
    "endpoint_certificate",
    "expected_bytes",
    "recording_fetcher",
    "served_again",
]

#: Largest file fetched again for ``--diff``, bytes: the first lines are what is shown.
DIFF_MAX_BYTES = 2 * 1024 * 1024

log = logging.getLogger("artifactcheck")


def recording_fetcher(spec: CheckSpec) -> tuple[Fetcher, dict[str, Fetched]]:
    """A Fetcher for the check, and the dict where it keeps what the CDN answered.

    A Report carries the CDN's verdicts but not its answers (status, sha256, headers),
    and the per-asset table shows them; recording them as they are fetched costs no
    second request and shows exactly what the judgement was based on.
    """
    cdn_assets: dict[str, Fetched] = {}

    def record(base_url: str, path: str, got: Fetched) -> None:
        if spec.cdn is not None and base_url == spec.cdn:
            cdn_assets[path] = got

    proxies = Proxies.from_environment()  # release sources and CDNs, as verify does
    fetcher = Fetcher(
        http=spec.http, retry=spec.retry, logger=log, on_asset=record, proxies=proxies
    )
    return fetcher, cdn_assets


async def endpoint_certificate(
    url: str, spec: CheckSpec, *, instance: bool
) -> tuple[CertInfo | None, str | None]:
    """The certificate an https endpoint presents, read without verifying so that an
    expired one shows; (None, None) for plain http, (None, why) when it could not be
    read. ``instance``: the target (its SNI is the check's Host header), not the CDN."""
    if not url.startswith("https://"):
        return None, None
    parts = urlsplit(url)
    try:
        cert = await probe_certificate(
            parts.hostname or "",
            parts.port or 443,
            server_name=spec.http.host_header if instance else None,
            ssl_context=None,
            timeout=spec.http.connect_timeout,
        )
    except ArtifactCheckError as exc:
        return None, f"could not check: {exc}"
    return cert, None


async def served_again(
    fetcher: Fetcher, url: str, path: str, *, host_header: str | None
) -> Fetched:
    """A file's bytes as the instance at ``url`` serves them now (the check kept only
    hashes: bodies are hashed while streaming, never held)."""
    return await fetcher.get_document(url, path, max_bytes=DIFF_MAX_BYTES, host_header=host_header)


async def expected_bytes(
    fetcher: Fetcher,
    sources: Sequence[tuple[str, str]],
    path: str,
    sha256: str,
    *,
    host_header: str | None,
) -> tuple[bytes | None, str | None, list[str]]:
    """The expected bytes of ``path`` from the first of ``sources`` (label, base URL:
    siblings, then the CDN) whose answer has the expected ``sha256``, verified before it
    is used; the label of that source, and what each source tried before gave."""
    tried: list[str] = []
    for label, base in sources:
        host = host_header if not label.startswith("CDN") else ""  # "": the CDN's own
        got = await fetcher.get_document(base, path, max_bytes=DIFF_MAX_BYTES, host_header=host)
        if got.ok and got.body is not None and got.sha256 == sha256:
            return got.body, label, tried
        tried.append(f"{label}: {got.error or got.sha256 or got.status}")
    return None, None, tried
