"""The version an instance reports on its version endpoint (``version_endpoint``)."""

from __future__ import annotations

import json

from artifactcheck.model.values import Fetched


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


def read_version(got: Fetched, path: str, pointer: str) -> tuple[str | None, str | None]:
    """The version from a /version document, or why it could not be read.

    The reason names the endpoint and what was wrong with its answer (a status, no
    such JSON member, not JSON at all), so "reports no version" can be acted on.
    """
    if got.error is not None:
        return None, f"version endpoint {path}: {got.error}"
    if not got.ok or got.body is None:
        return None, f"version endpoint {path} answers HTTP {got.status}"
    text = got.body.decode("utf-8", errors="replace").strip()
    if not pointer:
        if not text:
            return None, f"version endpoint {path} answers an empty body"
        return text[:200], None
    try:
        doc = json.loads(text)
    except ValueError:
        return None, f"version endpoint {path} is not JSON (JSON pointer {pointer!r} given)"
    try:
        value = json_pointer(doc, pointer)
    except (ValueError, KeyError, IndexError, TypeError):
        return None, f"version endpoint {path} has no JSON member at pointer {pointer!r}"
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        kind = "null" if value is None else type(value).__name__
        return None, f"version endpoint {path}: the value at {pointer!r} is {kind}, not a string"
    return str(value), None
