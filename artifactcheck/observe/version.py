"""The version an instance reports on its version endpoint (``version_endpoint``).

A version endpoint answers either a bare version (``1.0.0``) or a JSON document
(``{"version": "1.0.0", "commit": "..."}``). With a JSON pointer the document is read
at that pointer. Without one, a JSON object is read at its ``version`` member when it
has one, and the reading says so (the user may not know the body was JSON), so the
whole document is never taken as the version (``{"version":"1.0.0"}`` is not the
version ``1.0.0``: taken whole it conflicted with every other signal, a false exit 1
on a correct fleet). Anything else is a reason, never a version: an error page, the
SPA's fallback page, a JSON document without a ``version`` member, a value outside the
version grammar. A reason is shown to the user and judged ``inconclusive`` (no version
to judge by), never a version that conflicts with the others.
"""

from __future__ import annotations

import json

from artifactcheck.model.records import Record
from artifactcheck.model.values import Fetched
from artifactcheck.model.versions import version_problem

#: The member read from a JSON object when no pointer is given.
DEFAULT_MEMBER = "version"


class VersionReading(Record):
    """What a version endpoint said: a version, or why none could be read.

    ``note`` says how a version was found when the user did not say where to look
    (its ``version`` member of a JSON body read without a pointer).
    """

    version: str | None = None
    error: str | None = None
    note: str | None = None


def json_pointer(doc: object, pointer: str) -> object:
    """Resolve an RFC 6901 JSON pointer, raising KeyError when it does not resolve."""
    if not pointer:
        return doc
    node = doc
    for raw in pointer.lstrip("/").split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node[token]
        elif isinstance(node, list):
            node = node[int(token)]
        else:
            raise KeyError(token)
    return node


def _scalar(value: object) -> str | None:
    """A string or a number as text; None for anything else (null, bool, object, list)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _checked(path: str, value: str, where: str, note: str | None = None) -> VersionReading:
    """The value as a version, or a reason when it is not one (the version grammar)."""
    problem = version_problem(value)
    if problem is not None:
        return VersionReading(
            error=f"version endpoint {path}: the {where} {problem[:200]}; no version is read"
        )
    return VersionReading(version=value, note=note)


def read_version(got: Fetched, path: str, pointer: str) -> VersionReading:
    """The version from a /version document, or why it could not be read.

    The reason names the endpoint and what was wrong with its answer (a status, no
    such JSON member, not JSON at all, not a version), so "reports no version" can be
    acted on.
    """
    if got.error is not None:
        return VersionReading(error=f"version endpoint {path}: {got.error}")
    if not got.ok or got.body is None:
        return VersionReading(error=f"version endpoint {path} answers HTTP {got.status}")
    text = got.body.decode("utf-8", errors="replace").strip()
    if not pointer:
        return _without_pointer(path, text)
    try:
        doc = json.loads(text)
    except ValueError:
        return VersionReading(
            error=f"version endpoint {path} is not JSON (JSON pointer {pointer!r} given)"
        )
    try:
        value = json_pointer(doc, pointer)
    except (ValueError, KeyError, IndexError, TypeError):
        return VersionReading(
            error=f"version endpoint {path} has no JSON member at pointer {pointer!r}"
        )
    found = _scalar(value)
    if found is None:
        return VersionReading(
            error=f"version endpoint {path}: the value at {pointer!r} is {_kind(value)}, "
            "not a string"
        )
    return _checked(path, found, f"value at {pointer!r}")


def _without_pointer(path: str, text: str) -> VersionReading:
    """A bare version; or a JSON body's ``version`` member; or why neither is there."""
    if not text:
        return VersionReading(error=f"version endpoint {path} answers an empty body")
    if text.startswith("<"):
        return VersionReading(
            error=f"version endpoint {path} answers an HTML page (an error page or the "
            "site's fallback page?), not a version"
        )
    if not text.startswith(("{", "[", '"')):
        return _checked(path, text[:200], "body")
    try:
        doc = json.loads(text)
    except ValueError:
        return _checked(path, text[:200], "body")
    hint = (
        "give a JSON pointer to the member that holds it, e.g. "
        f"--version-endpoint '{path}#/{DEFAULT_MEMBER}'"
    )
    if isinstance(doc, str):
        return _checked(path, doc, "JSON string")
    if not isinstance(doc, dict):
        return VersionReading(
            error=f"version endpoint {path} answers a JSON {_kind(doc)} and no JSON pointer "
            f"was given; give a JSON pointer, e.g. --version-endpoint '{path}#/0'"
        )
    if DEFAULT_MEMBER not in doc:
        members = ", ".join(repr(k) for k in sorted(doc)[:8]) or "none"
        return VersionReading(
            error=f"version endpoint {path} answers a JSON object with no "
            f"{DEFAULT_MEMBER!r} member (members: {members}) and no JSON pointer was given; "
            f"{hint}"
        )
    value = _scalar(doc[DEFAULT_MEMBER])
    if value is None:
        return VersionReading(
            error=f"version endpoint {path}: its JSON {DEFAULT_MEMBER!r} member is "
            f"{_kind(doc[DEFAULT_MEMBER])}, not a string; {hint}"
        )
    note = (
        f"version endpoint {path} answers JSON and no JSON pointer was given: its "
        f"{DEFAULT_MEMBER!r} member was read (--version-endpoint "
        f"'{path}#/{DEFAULT_MEMBER}' says so explicitly)"
    )
    return _checked(path, value, f"JSON {DEFAULT_MEMBER!r} member", note)
