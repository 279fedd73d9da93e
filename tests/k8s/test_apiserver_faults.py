"""The fake API server's seeded fault mode (sim/artifactcheck_sim/apiserver_faults.py), as
the official client sees it over HTTP."""

from __future__ import annotations

import copy

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from artifactcheck.clients.kube import Throttled, call
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.apiserver_faults import FaultRule, Faults


def client_without_retries(api: k8s.ApiClient) -> k8s.ApiClient:
    """A client with ``api``'s configuration and no urllib3 retries."""
    config = copy.copy(api.configuration)
    config.retries = 0
    return k8s.ApiClient(config)


def pods(api: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api)


def test_off_by_default(server: FakeApiServer, api: k8s.ApiClient) -> None:
    assert server.faults is None
    for _ in range(20):
        pods(api).list_namespaced_pod("default")


def test_throttle_answers_429_with_its_retry_after(server: FakeApiServer) -> None:
    server.faults = Faults([FaultRule("throttle", 1.0, frozenset({"list"}), retry_after=7)])
    with client_without_retries(server.api_client()) as api:
        with pytest.raises(ApiException) as err:
            pods(api).list_namespaced_pod("default")
        assert err.value.status == 429 and err.value.headers["Retry-After"] == "7"
        with pytest.raises(Throttled) as throttled:  # what the controller sees of it
            call("list pods", lambda: pods(api).list_namespaced_pod("default"))
        assert throttled.value.retry_after == 7.0
        pods(api).read_namespace("default")  # a get: not a listed verb
        assert server.faults.injected == {("throttle", "list", "pods"): 2}
        server.faults = None
        pods(api).list_namespaced_pod("default")


def test_the_default_client_waits_out_retry_after_on_reads(
    server: FakeApiServer, api: k8s.ApiClient
) -> None:
    """urllib3 (under the official client) retries a GET answered 429 with a
    Retry-After, three times, sleeping what it asks, then gives up: the log shows
    the gaps. Writes (POST, PATCH) it does not retry."""
    server.faults = Faults([FaultRule("throttle", 1.0, retry_after=1)])
    with pytest.raises(ApiException) as err:
        pods(api).list_namespaced_pod("default")
    assert err.value.status == 429
    times = [s.at for s in server.faults.seen(verb="list")]
    assert len(times) == 4
    assert all(b - a >= 1.0 for a, b in zip(times, times[1:], strict=False))
    with pytest.raises(ApiException):
        pods(api).create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    assert len(server.faults.seen(verb="create")) == 1


def test_rules_by_verb_and_resource(server: FakeApiServer, api: k8s.ApiClient) -> None:
    server.faults = Faults(
        [FaultRule("error", 1.0, frozenset({"create"}), frozenset({"configmaps"}))]
    )
    pods(api).list_namespaced_config_map("default")
    body = {"metadata": {"name": "a"}, "data": {}}
    with pytest.raises(ApiException) as err:
        pods(api).create_namespaced_config_map("default", body)
    assert err.value.status == 500
    [seen] = server.faults.seen(verb="create")
    assert (seen.resource, seen.fault) == ("configmaps", "error")
    assert [s.fault for s in server.faults.seen(verb="list")] == [None]


def test_the_same_seed_gives_the_same_faults(server: FakeApiServer, api: k8s.ApiClient) -> None:
    def run(seed: int) -> list[bool]:
        server.faults = Faults([FaultRule("error", 0.5)], seed=seed)
        out = []
        for _ in range(40):
            try:
                pods(api).list_namespaced_pod("default")
                out.append(True)
            except ApiException:
                out.append(False)
        return out

    first, again, other = run(3), run(3), run(4)
    assert first == again and first != other
    assert 5 < first.count(False) < 35


def test_gone_only_when_a_watch_resumes(server: FakeApiServer, api: k8s.ApiClient) -> None:
    server.faults = Faults([FaultRule("gone", 1.0)])
    listed = pods(api).list_namespaced_pod("default", _preload_content=False)
    listed.release_conn()
    fresh = pods(api).list_namespaced_pod(
        "default", watch=True, timeout_seconds=1, _preload_content=False
    )
    assert b"ERROR" not in fresh.read()  # no resourceVersion: no resume, no 410
    resumed = pods(api).list_namespaced_pod(
        "default",
        watch=True,
        resource_version=server.resource_version,
        timeout_seconds=5,
        _preload_content=False,
    )
    line = resumed.read()
    assert b'"type":"ERROR"' in line and b'"code":410' in line
    assert server.faults.injected == {("gone", "watch", "pods"): 1}


def test_a_cut_watch_breaks_mid_stream(server: FakeApiServer, api: k8s.ApiClient) -> None:
    server.faults = Faults([FaultRule("cut", 1.0, delay=0.3)])
    resp = pods(api).list_namespaced_pod(
        "default",
        watch=True,
        resource_version=server.resource_version,
        timeout_seconds=30,
        _preload_content=False,
    )
    with pytest.raises(Exception) as err:  # urllib3's ProtocolError: the chunk never ended
        resp.read()
    assert "ProtocolError" in type(err.value).__name__ or "IncompleteRead" in str(err.value)


def test_slow_answers_still_answer(server: FakeApiServer, api: k8s.ApiClient) -> None:
    server.faults = Faults([FaultRule("slow", 1.0, delay=0.2)], seed=1)
    pods(api).list_namespaced_pod("default")
    assert server.faults.injected == {("slow", "list", "pods"): 1}


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "flood", "rate": 0.5},
        {"kind": "error", "rate": 1.5},
        {"kind": "error", "rate": 0.5, "verbs": frozenset({"lsit"})},
        {"kind": "slow", "rate": 0.5, "delay": -1},
    ],
)
def test_bad_rules_are_refused(rule: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        FaultRule(**rule)  # type: ignore[arg-type]
