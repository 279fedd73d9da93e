"""The whole error tree of artifactcheck.

Errors here mean "could not do what was asked" (bad input, a dependency that was
unavailable), never "observed something wrong": a served file that differs from the
release is a :class:`~artifactcheck.model.values.Finding`, a value, not an exception.

Library errors (httpx, kubernetes, docker) are translated into this tree at the edge,
in the one module that talks to that library, always with ``raise ... from exc``::

    ArtifactCheckError
    ├── ConfigError                 bad configuration or CLI input (exit code 2)
    ├── ManifestError               a manifest could not be read
    │   ├── ManifestFormatError     not valid for the format it claims / was asked as
    │   └── ManifestLimitError      too large, too many entries, too deep, too long
    ├── UnsafeReferenceError        a path or URL outside the allowed base URLs (SSRF)
    ├── FetchError                  could not observe over HTTP
    │   ├── FetchTimeout            connect/read/total/deadline timeout
    │   ├── FetchConnectError       refused, reset, DNS, TLS handshake
    │   ├── FetchStatusError        an unexpected HTTP status (after retries)
    │   ├── BodyTooLarge            body over the configured cap
    │   └── RetryBudgetExhausted    the per-run retry budget is spent
    ├── ExpectationUnavailable      no expected release could be obtained
    └── DependencyError             kubernetes API / Docker engine unavailable
"""

from __future__ import annotations


class ArtifactCheckError(Exception):
    """Base of every error raised on purpose by artifactcheck."""


class ConfigError(ArtifactCheckError):
    """Bad configuration or command-line input; the message names the field.

    ``field`` is the CheckSpec field path the problem is about (``release_manifest``,
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
    """A path or URL would leave the instance's or the CDN's own base URL."""


class FetchError(ArtifactCheckError):
    """An HTTP observation could not be made."""


class FetchTimeout(FetchError):
    """A connect, read, whole-request or per-instance timeout expired."""


class FetchConnectError(FetchError):
    """The connection failed: refused, reset, name resolution or TLS handshake."""


class FetchStatusError(FetchError):
    """The server kept answering with a status that cannot be used."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class BodyTooLarge(FetchError):
    """The response body exceeded the configured size cap."""


class RetryBudgetExhausted(FetchError):
    """The retry budget of this run is spent; no more retries are made."""


class ExpectationUnavailable(ArtifactCheckError):
    """No expected release manifest could be obtained (not even a cached copy)."""


class DependencyError(ArtifactCheckError):
    """A dependency needed to judge (API server, Docker engine) was unavailable."""
