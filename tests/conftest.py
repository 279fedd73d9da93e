"""Hermetic test setup shared by every suite.

Proxy and SSL variables from the developer's shell must never reach a test: a proxy
would send loopback traffic elsewhere, and SSL_CERT_FILE would change what verifies.
"""

from __future__ import annotations

import pytest

# One private Docker engine per session, whichever suites need it (tests/docker,
# tests/image, tests/registry): a plugin module, so its session fixtures exist once.
pytest_plugins = ("docker_engine",)

_LEAKY_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "KUBECONFIG",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)
