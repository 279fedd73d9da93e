"""Reading the certificate an endpoint presents, to record and warn on its expiry.

An expired internal certificate started the outage that motivates artifactcheck
(docs/investigate.md), so every endpoint's certificate expiry is recorded. The
certificate is read in binary form and parsed with ``cryptography``, which works
whether or not the handshake verified it: with ``ssl_context=None`` an unverified
context is used, so a certificate that has already expired (or is signed by an
unknown CA) can still be reported instead of only failing. Errors are raised as
typed :class:`~artifactcheck.model.errors.FetchError` subclasses; the caller decides
whether they make an instance inconclusive.

:func:`build_ssl_context` builds the one verifying client context of a run, shared by
every connection of the fetcher and by the probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from artifactcheck.fetch.egress_guard import approved_address
from artifactcheck.fetch.error_kinds import EgressRefused
from artifactcheck.model.errors import (
    ConfigError,
    FetchConnectError,
    FetchError,
    FetchTimeout,
    UnsafeReferenceError,
)
from artifactcheck.model.settings import HttpSettings
from artifactcheck.model.values import CertInfo

if TYPE_CHECKING:
    from artifactcheck.tenancy.egress import Egress

__all__ = ["build_ssl_context", "days_left", "probe_certificate", "unverified_context"]


def build_ssl_context(http: HttpSettings) -> ssl.SSLContext:
    """The one client TLS context of a run: system CAs plus ``http.ca_bundle``.

    Building a context loads and parses every trusted CA, which is slow; httpx
    builds one per client unless given one, so a run builds exactly one and shares it
    with every connection and with :func:`probe_certificate`.

    The system store (or certifi's, in an image without one) is loaded at the first
    handshake, not here: parsing it would weigh on every start-up, and a check of plain
    ``http://`` instances never makes a handshake. ``http.ca_bundle`` is the user's own
    file and is loaded now, so a bad one is a configuration error before any request.
    """
    if not http.verify_tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = _SystemTrustOnFirstUse(ssl.PROTOCOL_TLS_CLIENT)  # verifies names and chains
        if sys.version_info >= (3, 13):  # what create_default_context adds there
            ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
        if http.ca_bundle:
            try:
                ctx.load_verify_locations(cafile=http.ca_bundle)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"http.ca_bundle: cannot load {http.ca_bundle}: {exc}") from exc
    _keylog(ctx)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _keylog(ctx: ssl.SSLContext) -> None:
    """``SSLKEYLOGFILE``, as :func:`ssl.create_default_context` honours it."""
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:
        ctx.keylog_filename = keylog


class _SystemTrustOnFirstUse(ssl.SSLContext):
    """A verifying client context that loads the system's CAs before its first handshake.

    Every TLS connection (asyncio's, httpx's, aiohttp's, :func:`probe_certificate`'s)
    starts in :meth:`wrap_bio` or :meth:`wrap_socket`, so no handshake is ever made
    with the store still empty; until then nothing reads it.
    """

    _system_loaded = False

    def _load_system_trust(self) -> None:
        with _SYSTEM_TRUST_LOCK:
            if self._system_loaded:
                return
            paths = ssl.get_default_verify_paths()
            if any(p and os.path.exists(p) for p in (paths.cafile, paths.capath)):
                self.load_default_certs(ssl.Purpose.SERVER_AUTH)
            else:
                import certifi  # a minimal image without a system store: httpx's default

                self.load_verify_locations(cafile=certifi.where())
            self._system_loaded = True

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        if not self._system_loaded:
            self._load_system_trust()
        return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        if not self._system_loaded:
            self._load_system_trust()
        return super().wrap_socket(
            sock,
            server_side,
            do_handshake_on_connect,
            suppress_ragged_eofs,
            server_hostname,
            session,
        )


_SYSTEM_TRUST_LOCK = threading.Lock()


def unverified_context() -> ssl.SSLContext:
    """A client context that completes any handshake, for reading certificates only."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _parse(der: bytes, endpoint: str) -> CertInfo:
    """CertInfo from a DER certificate; FetchError when it cannot be parsed."""
    from cryptography import x509  # only when a certificate is read: a heavy import

    try:
        cert = x509.load_der_x509_certificate(der)
        subject = cert.subject.rfc4514_string()
        issuer = cert.issuer.rfc4514_string()
        not_after = cert.not_valid_after_utc
    except ValueError as exc:
        raise FetchError(f"{endpoint}: unreadable certificate: {exc}") from exc
    return CertInfo(endpoint=endpoint, subject=subject, issuer=issuer, not_after=not_after)


async def probe_certificate(
    host: str,
    port: int,
    *,
    server_name: str | None,
    ssl_context: ssl.SSLContext | None,
    timeout: float,
    egress: Egress | None = None,
) -> CertInfo:
    """Handshake with ``host:port`` (SNI ``server_name``) and return its certificate.

    ``ssl_context=None`` reads the certificate without verifying it; with a verifying
    context (e.g. the Fetcher's), a certificate that does not verify raises
    :class:`~artifactcheck.model.errors.FetchConnectError`. Timeouts raise
    :class:`~artifactcheck.model.errors.FetchTimeout`. ``egress`` is the policy the Fetcher
    enforces (:attr:`artifactcheck.fetch.Fetcher.egress`): a probe is one more
    connection, so it is asked first, and a refusal raises
    :class:`~artifactcheck.model.errors.UnsafeReferenceError` before anything is sent.
    """
    endpoint = f"{host}:{port}"
    ctx = ssl_context if ssl_context is not None else unverified_context()
    # Without a name, verify against the address itself (no SNI is sent for an IP).
    hostname = server_name or host
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            address = host if egress is None else await approved_address(host, port, egress)
            _, writer = await asyncio.open_connection(
                address, port, ssl=ctx, server_hostname=hostname, ssl_handshake_timeout=timeout
            )
            ssl_object = writer.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    except EgressRefused as exc:
        raise UnsafeReferenceError(str(exc)) from exc
    except TimeoutError as exc:
        raise FetchTimeout(f"{endpoint}: no TLS handshake within {timeout}s") from exc
    except ssl.SSLCertVerificationError as exc:
        raise FetchConnectError(
            f"{endpoint}: certificate verification failed for {hostname}: "
            f"{exc.verify_message or exc}"
        ) from exc
    except ssl.SSLError as exc:
        raise FetchConnectError(f"{endpoint}: TLS handshake failed: {exc.reason or exc}") from exc
    except OSError as exc:
        raise FetchConnectError(f"{endpoint}: cannot connect: {exc.strerror or exc}") from exc
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
                async with asyncio.timeout(1.0):
                    await writer.wait_closed()
    if not der:
        raise FetchError(f"{endpoint}: the server presented no certificate")
    return _parse(der, endpoint)


def days_left(cert: CertInfo, *, now: datetime | None = None) -> float:
    """Days until the certificate expires (negative once it has)."""
    return (cert.not_after - (now or datetime.now(UTC))).total_seconds() / 86400
