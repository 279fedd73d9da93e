"""The lean exception tree (fetch/error_kinds.py) is httpx's, as far as verdicts go: each
lean error is the kind and message its httpx namesake is, in every phase."""

from __future__ import annotations

import httpx
import pytest

from artifactcheck.fetch import error_kinds
from artifactcheck.model.settings import HttpSettings

LEAN = (
    error_kinds.ConnectTimeout,
    error_kinds.ReadTimeout,
    error_kinds.TimeoutException,
    error_kinds.ConnectError,
    error_kinds.ReadError,
    error_kinds.NetworkError,
    error_kinds.RemoteProtocolError,
    error_kinds.LocalProtocolError,
    error_kinds.ProtocolError,
    error_kinds.UnsupportedProtocol,
    error_kinds.TransportError,
)


@pytest.mark.parametrize("lean", LEAN, ids=lambda t: t.__name__)
@pytest.mark.parametrize("reading_body", [False, True])
def test_a_lean_error_is_judged_as_its_httpx_namesake(lean: type, reading_body: bool) -> None:
    twin = getattr(httpx, lean.__name__)
    http = HttpSettings()
    assert error_kinds.classify(lean("boom"), reading_body=reading_body, http=http) == (
        error_kinds.classify(twin("boom"), reading_body=reading_body, http=http)
    )


def test_httpx_only_errors_keep_their_rows() -> None:
    http = HttpSettings()
    kinds = {
        name: error_kinds.classify(getattr(httpx, name)("x"), reading_body=False, http=http)[0]
        for name in ("PoolTimeout", "WriteTimeout", "ProxyError")
    }
    assert kinds == {"PoolTimeout": "timeout", "WriteTimeout": "timeout", "ProxyError": "connect"}
    assert issubclass(httpx.HTTPError, error_kinds.classified())
