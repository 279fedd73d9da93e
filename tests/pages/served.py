"""A document as a Fetcher would return it: its body and digest, read at ``url``."""

from __future__ import annotations

import hashlib

from artifactcheck.model.values import Fetched


def served(body: bytes, url: str, path: str = "") -> Fetched:
    """``body`` answered 200 at ``url`` (``path``: as the Fetcher names it)."""
    return Fetched(
        url=url,
        path=path,
        status=200,
        hashes={"sha256": hashlib.sha256(body).hexdigest()},
        size=len(body),
        body=body,
    )
