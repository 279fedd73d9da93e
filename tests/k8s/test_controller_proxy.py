"""The controller's proxy: from the admin configuration only, judged by destination.

A real logging proxy on loopback (:mod:`proxy_support`). The admin configuration names
it; the controller's release-source and CDN requests go through it, its pods' requests
do not, and a proxy named in the controller's environment is never used.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from proxy_support import LoggingProxy
from tenant_support import TenantCluster, admin_config, running

from artifactcheck_sim.cluster import wait_for

_net = itertools.count(1)


@pytest.fixture
def tc() -> Iterator[TenantCluster]:
    n = next(_net)
    with TenantCluster(
        first_host=f"127.83.{n}.1",
        cdn_host=f"127.83.{200 + n}.1",
        release_host=f"127.83.{100 + n}.1",
    ) as cluster:
        yield cluster


def test_release_and_cdn_go_through_the_admin_proxy_and_pods_do_not(
    tc: TenantCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    pods = [tc.add_pod() for _ in range(2)]
    tc.add_check(interval=0.3)
    with LoggingProxy("127.83.250.1") as proxy, LoggingProxy("127.83.250.2") as from_env:
        monkeypatch.setenv("HTTP_PROXY", from_env.url)  # the controller never reads it
        admin = admin_config(tc, egress={"proxy": proxy.url})
        with running(tc, admin):
            wait_for(lambda: tc.check_status().get("counts", {}).get("consistent") == 2, timeout=30)
    seen = {urlsplit(line.split(" ")[1]).netloc for line in proxy.requests}
    assert urlsplit(tc.cdn_url).netloc in seen, proxy.requests
    assert urlsplit(tc.release_url).netloc in seen, proxy.requests
    assert not seen & {urlsplit(pod.url).netloc for pod in pods}  # pods: direct
    assert all(tc.web.server(pod.url).received for pod in pods)  # ...and fetched
    # the environment's proxy carried none of the fetches (what the Kubernetes client
    # does with HTTP_PROXY is its own matter, and not the fetcher's)
    fetched = {urlsplit(tc.cdn_url).netloc, urlsplit(tc.release_url).netloc}
    fetched |= {urlsplit(pod.url).netloc for pod in pods}
    assert not fetched & {urlsplit(line.split(" ")[1]).netloc for line in from_env.requests}
