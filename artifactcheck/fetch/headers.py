"""The headers of a request we send, and the headers of a response we keep.

Every header we send is checked where it is written (an RFC 9110 token for a name, no
control character in a value), so no configuration can put a second header line on
the wire; secret values (``http.header_env``, ``http.header_files``) are never quoted
in an error. Of a response, only the :data:`EVIDENCE_HEADERS` are kept.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final, Protocol

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.header_rules import is_field_name, is_field_value
from artifactcheck.model.settings import HttpSettings

__all__ = [
    "EVIDENCE_HEADERS",
    "Headers",
    "MAX_DIGITS",
    "configured_headers",
    "content_length",
    "evidence",
    "kept_once",
    "header_problem",
    "server_name",
]

USER_AGENT: Final = "artifactcheck"

#: Response headers kept as evidence in :attr:`Fetched.headers` (lowercase names).
EVIDENCE_HEADERS: Final = (
    "etag",
    "age",
    "cache-control",
    "cache-status",
    "x-cache",
    "x-cache-status",
    "cf-cache-status",
    "x-served-by",
    "server",
    "content-length",
    "content-type",
    "content-encoding",
    "last-modified",
    "date",
    "via",
    "retry-after",
)
_EVIDENCE = frozenset(EVIDENCE_HEADERS)

#: A Content-Length longer than this is no real length (and int() refuses 4,300 digits).
MAX_DIGITS: Final = 18


class Headers(Protocol):
    """What is read of a response's headers: ``httpx.Headers``, or the lean
    :class:`~artifactcheck.fetch.http1.RawHeaders` of the "http1" transport."""

    def get(self, key: str, default: Any = None) -> Any: ...
    def get_list(self, key: str, split_commas: bool = False) -> list[str]: ...
    def multi_items(self) -> list[tuple[str, str]]: ...
    def __getitem__(self, key: str) -> str: ...


def header_problem(name: str, value: str) -> str | None:
    """Why a request header must not be sent (None when it may); never quotes the value,
    which may be a secret."""
    if not is_field_name(name):
        return f"request header name {name[:60]!r} is not an RFC 9110 token"
    if not is_field_value(value):
        return f"value of request header {name!r} contains CR, LF, NUL or another control"
    return None


def configured_headers(http: HttpSettings) -> dict[str, str]:
    """Extra request headers with their secret values resolved; ConfigError names the field."""
    headers = dict(http.headers)
    for name, var in http.header_env.items():
        value = os.environ.get(var)
        if value is None:
            raise ConfigError(f"http.header_env.{name}: environment variable {var} is not set")
        headers[name] = value.strip()
    for name, path in http.header_files.items():
        try:
            headers[name] = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(f"http.header_files.{name}: cannot read {path}: {reason}") from exc
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0"):  # never echo the value: it is a secret
            raise ConfigError(f"http headers: value of {name!r} contains a line break")
        problem = header_problem(name, value)
        if problem is not None:
            raise ConfigError(f"http headers: {problem}")
    if http.host_header is not None:
        problem = header_problem("host", http.host_header)
        if problem is not None:
            raise ConfigError(f"http.host_header: {problem}")
    return headers


def server_name(host_header: str) -> str:
    """The TLS server name for a Host header value: the host without its port."""
    host = host_header.strip()
    if host.startswith("["):  # [v6]:port
        return host[1 : host.index("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def evidence(headers: Headers) -> dict[str, str]:
    """The evidence headers present in a response, lowercase names, values joined.

    Names are the constants above and values are kept once (:func:`kept_once`):
    what stays in memory is what the evidence says, not one copy per response.
    """
    out: dict[str, str] = {}
    for name, value in headers.multi_items():  # one pass: Headers lookups are linear
        key = _CANONICAL.get(name) or _CANONICAL.get(name.lower())
        if key is not None:
            out[key] = kept_once(f"{out[key]}, {value}" if key in out else value)
    return out


def kept_once(value: str) -> str:
    """``value``, or an equal string already kept: one copy of each.

    Siblings send the same ETag, Server, Content-Type, Last-Modified and digests for
    the same file, and a controller holds every pod's latest observation: one copy per
    pod and response of equal strings adds up with the fleet. ``sys.intern`` would do it
    for names a program chooses; these come from the network, so the table is
    bounded and a server sending unique values only makes it start over.
    """
    kept = _KEPT.get(value)
    if kept is None:
        if len(_KEPT) >= _KEPT_LIMIT:
            _KEPT.clear()
        kept = _KEPT[value] = value
    return kept


_CANONICAL: Final = {name: name for name in EVIDENCE_HEADERS}
_KEPT: dict[str, str] = {}
_KEPT_LIMIT: Final = 16_384


def content_length(headers: Headers) -> int | None:
    """Content-Length as an int, None when absent or unusable."""
    raw = headers.get("content-length")
    if raw is None:
        return None
    text = raw.split(",")[0].strip()
    if not text.isdigit() or len(text) > MAX_DIGITS:  # int() of 4,300+ digits raises
        return None
    return int(text)
