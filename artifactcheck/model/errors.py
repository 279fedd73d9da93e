"""The whole error taxonomy of artifactcheck: the kinds of a failed observation, and
the exceptions raised when something asked of it cannot be done.

Errors here mean "could not do what was asked" (bad input, a dependency that was
unavailable), never "observed something wrong": a served file that differs from the
release is a :class:`~artifactcheck.model.values.Finding`, a value, not an exception.

One failed HTTP observation is not raised either: a fleet check must not die of one
bad pod, so the fetcher returns it as a value, a
:class:`~artifactcheck.model.values.Fetched` whose ``error_kind`` is an
:class:`ErrorKind`. The exceptions below are raised where a caller cannot go on.

Library errors (httpx, kubernetes, docker) are translated into this tree at the edge,
in the one module that talks to that library, always with ``raise ... from exc``::

    ArtifactCheckError
    ├── ConfigError                 bad configuration or CLI input (exit code 2)
    ├── ManifestError               a manifest could not be read
    │   ├── ManifestFormatError     not valid for the format it claims / was asked as
    │   └── ManifestLimitError      too large, too many entries, too deep, too long
    ├── UnsafeReferenceError        a path or URL outside the allowed base URLs (SSRF),
    │                               or an address the egress policy refuses
    ├── FetchError                  a certificate could not be read (no certificate,
    │   │                           an unreadable one)
    │   ├── FetchTimeout            no TLS handshake in time
    │   └── FetchConnectError       refused, reset, DNS, TLS handshake or verification
    ├── ExpectationUnavailable      no expected release could be obtained
    └── DependencyError             kubernetes API / Docker engine unavailable
"""

from __future__ import annotations

import enum


class ErrorKind(enum.StrEnum):
    """Why one observation could not be made (``Fetched.error_kind``,
    ``Observation.error_kind``).

    A StrEnum, so a kind compares equal to its string (``ErrorKind.TLS == "tls"``) and
    is written as that string in JSON reports and logs.
    """

    TIMEOUT = "timeout"  # connect, read, whole-request or per-instance deadline
    CONNECT = "connect"  # refused, reset, DNS, closed without a response
    TLS = "tls"  # TLS handshake or certificate verification failed
    STATUS = "status"  # an unusable HTTP status (after retries), too many redirects
    TOO_LARGE = "too-large"  # the body is over its cap
    UNSAFE = "unsafe"  # a path that would leave the base URL: refused unsent
    REDIRECT_OFF_BASE = "redirect-off-base"  # a redirect leaving the base: not followed
    BUDGET = "budget"  # a retry was due, but the run's retry budget is spent
    DECODE = "decode"  # a content coding that cannot be undone
    TRUNCATED = "truncated"  # the body ended early
    PROTOCOL = "protocol"  # a response no correct server sends, or an unexpected error
    EGRESS = "egress"  # the egress policy refused the address
    CONFIG = "config"  # a request header the configuration asked for cannot be sent
    CHECK_FAILED = "check-failed"  # an instance's check raised unexpectedly

    @property
    def unreachable(self) -> bool:
        """Nothing answered (connect, timeout, TLS): the instance is unreachable."""
        return self in _UNREACHABLE

    @property
    def retried(self) -> bool:
        """A transient failure worth another try (timeout, connect, truncated body)."""
        return self in _RETRIED

    @property
    def inconclusive(self) -> bool:
        """Something answered, but it could not be judged (status, check failed)."""
        return self in _INCONCLUSIVE


_UNREACHABLE = frozenset({ErrorKind.CONNECT, ErrorKind.TIMEOUT, ErrorKind.TLS})
_RETRIED = frozenset({ErrorKind.TIMEOUT, ErrorKind.CONNECT, ErrorKind.TRUNCATED})
_INCONCLUSIVE = frozenset({ErrorKind.STATUS, ErrorKind.CHECK_FAILED})


class ArtifactCheckError(Exception):
    """Base of every error raised on purpose by artifactcheck."""


class ConfigError(ArtifactCheckError):
    """Bad configuration or command-line input; the message names the field.

    ``field`` is the CheckSpec field path the problem is about (``release.manifests``,
    ``http.max_connections``), kept apart from ``detail`` so the command line can name
    the flag that set the value instead of a model field the user never typed.
    """

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {detail}" if field else detail)
        self.detail = detail
        self.field = field


class ManifestError(ArtifactCheckError):
    """A manifest could not be read."""


class ManifestFormatError(ManifestError):
    """The document is not a valid manifest of the requested or detected format."""


class ManifestLimitError(ManifestError):
    """The manifest exceeds a configured cap (bytes, entries, depth, string length)."""


class UnsafeReferenceError(ArtifactCheckError):
    """A path or URL would leave the instance's or the CDN's own base URL, or a
    connection would go to an address the egress policy refuses."""


class FetchError(ArtifactCheckError):
    """A certificate could not be read from an endpoint (the HTTP fetcher returns its
    failures as values: :class:`ErrorKind`)."""


class FetchTimeout(FetchError):
    """No connection or TLS handshake within the timeout."""


class FetchConnectError(FetchError):
    """The connection failed: refused, reset, name resolution, TLS handshake or
    certificate verification."""


class ExpectationUnavailable(ArtifactCheckError):
    """No expected release manifest could be obtained (not even a cached copy)."""


class DependencyError(ArtifactCheckError):
    """A dependency needed to judge (API server, Docker engine) was unavailable."""
