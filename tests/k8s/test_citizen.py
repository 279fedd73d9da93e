"""The controller as a good citizen of the cluster, against the fake API server.

Shutdown hands the Lease over at once; a leader that cannot renew stops acting by its
renew deadline; a pod is checked when its containers become ready; a misconfigured
Lease namespace is loud; condition transition times mean what they say; pods held
out of traffic show in the status; probes and metrics are on their own ports.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from launch import controller_process
from tenant_support import TenantCluster, numbered_cluster, running

from artifactcheck.model.errors import ConfigError
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.cluster import GATE, SimCluster, free_port, wait_for
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.web import Site

LEASE = ("coordination.k8s.io/v1", "Lease")


@pytest.fixture
def cluster():
    with numbered_cluster(83) as c:
        yield c


@pytest.fixture
def quiet_cluster():
    """A cluster whose API server sends watch bookmarks once a minute, as a real one
    does, so a watch thread blocked in a read gets no event to notice a stop flag by."""
    api = FakeApiServer(namespaces=("default", "shop"), bookmark_interval=60.0).start()
    try:
        with numbered_cluster(83, api=api) as c:
            yield c
    finally:
        api.stop()


def gate(cluster: SimCluster, name: str) -> str | None:
    c = cluster.condition(name)
    return c["status"] if c else None


def holder(cluster: SimCluster, namespace: str = "shop") -> str | None:
    lease = cluster.api.get(*LEASE, namespace, "artifactcheck-leader") or {}
    return (lease.get("spec") or {}).get("holderIdentity") or None


def _kubeconfig(cluster: SimCluster, tmp_path: Path) -> str:
    return cluster.api.write_kubeconfig(str(tmp_path / "kubeconfig"))


LONG_LEASE = 600.0  # seconds: no test waits for it to expire


def lease_tries(replica: Any) -> list[bool]:
    """The outcomes of ``replica``'s tries to take or renew the Lease, from now on (a
    later event to wait for instead of sleeping, then asserting that nothing happened)."""
    tries: list[bool] = []
    lock = replica.controller.lock
    real = lock.try_acquire_or_renew

    def counted(*args: Any, **kw: Any) -> bool:
        held = bool(real(*args, **kw))
        tries.append(held)
        return held

    lock.try_acquire_or_renew = counted
    return tries


def lease_requests(cluster: TenantCluster) -> int:
    """Requests for the leader Lease the API server has received so far."""
    return sum(1 for _, path in list(cluster.api.requests) if "/leases/" in path)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# ------------------------------------------------------------------ SIGTERM, ports, logs


def test_sigterm_hands_the_lease_over_at_once_and_exits(
    quiet_cluster: TenantCluster, tmp_path: Path
) -> None:
    """The real `artifactcheck controller` process: SIGTERM releases the Lease (a
    standby takes over at once instead of after the lease: with a 600 s lease, only a
    release lets it lead within the wait) and the process exits before its watches,
    which ask the server for 30 s ones, would end. Probes and metrics are on separate
    ports, each serving only its own; plain log lines carry an ISO 8601 UTC timestamp.
    No speed is asserted: the hand-over is proved by the lease it did not wait for."""
    cluster = quiet_cluster
    for _ in range(3):
        cluster.add_pod()
    cluster.add_check(interval=0.5)
    health, metrics = free_port("127.0.0.1"), free_port("127.0.0.1")
    proc = controller_process(
        cluster,
        tmp_path,
        health_port=health,
        metrics_port=metrics,
        extra=["--lease-duration", str(LONG_LEASE)],
    )
    standby = None
    try:
        wait_for(lambda: holder(cluster) == "proc-1", timeout=20)
        wait_for(lambda: _get(f"http://127.0.0.1:{health}/readyz")[0] == 200, timeout=20)
        wait_for(lambda: all(gate(cluster, p) == "True" for p in cluster.pods), timeout=30)
        # each port serves only its own endpoints
        assert _get(f"http://127.0.0.1:{health}/healthz")[0] == 200
        assert _get(f"http://127.0.0.1:{health}/metrics")[0] == 404
        assert _get(f"http://127.0.0.1:{metrics}/healthz")[0] == 404
        assert _get(f"http://127.0.0.1:{metrics}/readyz")[0] == 404
        status, body = _get(f"http://127.0.0.1:{metrics}/metrics")
        assert status == 200 and "artifactcheck_leader 1.0" in body
        standby = running(cluster, identity="standby", lease_duration=15.0, renew_period=0.2)
        tries = lease_tries(standby)
        standby.start()
        wait_for(lambda: len(tries) >= 3, timeout=30)
        assert not any(tries) and not standby.controller.is_leader  # proc-1's lease is valid
        assert holder(cluster) == "proc-1"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        # well inside the 600 s lease: a hand-over, never an expiry
        wait_for(lambda: holder(cluster) != "proc-1", timeout=60, interval=0.01)
        wait_for(lambda: standby.controller.is_leader, timeout=60, interval=0.01)
        taken_over = time.monotonic() - sent
        proc.wait(timeout=25)  # TimeoutExpired had it waited for its 30 s watches
        exited = time.monotonic() - sent
    finally:
        if proc.returncode is None:
            proc.kill()
        _, err = proc.communicate(timeout=20)
        if standby is not None:
            standby.stop()
    print(f"SIGTERM -> exit {exited:.3f}s, -> standby leading {taken_over:.3f}s")
    assert proc.returncode == 0, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR) ")
    assert lines and all(stamp.match(line) for line in lines), lines[:5]
    assert any("lease shop/artifactcheck-leader released by proc-1" in ln for ln in lines)


def test_health_port_serves_metrics_when_the_ports_are_the_same(cluster: TenantCluster) -> None:
    """One server for everything only when asked (metrics port 0 or equal)."""
    cluster.add_pod()
    cluster.add_check(interval=0.5)
    with running(cluster) as ctl:
        both = ctl.controller.serve_health(host="127.0.0.1", port=0)
        probes = ctl.controller.serve_health(host="127.0.0.1", port=0, metrics=False)
        try:
            wait_for(lambda: ctl.controller.synced, timeout=20)
            assert _get(f"http://127.0.0.1:{both.port}/metrics")[0] == 200
            assert _get(f"http://127.0.0.1:{both.port}/readyz")[0] == 200
            assert _get(f"http://127.0.0.1:{probes.port}/metrics")[0] == 404
        finally:
            both.stop()
            probes.stop()


# ------------------------------------------------------------------ renew deadline


def test_leader_that_cannot_renew_stops_acting_by_its_deadline(cluster: TenantCluster) -> None:
    """Lease requests hang (each delayed 4 s): the leader stops acting at its renew
    deadline (2 s of a 3 s lease), before a standby may take the lease over, so a pod
    created after the deadline is written by nobody; the stalled replica then dies
    (it never released the lease), and the standby takes over when the lease expires
    and acts. At no sampled moment may both replicas act."""
    pods = [cluster.add_pod() for _ in range(3)]
    cluster.add_check(interval=60)
    a = running(cluster, identity="ctl-a", lease_duration=3.0, renew_period=0.3).start()
    b = running(cluster, identity="ctl-b", lease_duration=3.0, renew_period=0.3)
    both: list[float] = []
    a_stopped: list[float] = []  # when a was first seen not acting
    a_until = [0.0]  # the latest deadline a was seen acting under
    done = threading.Event()

    def watch_both() -> None:
        while not done.wait(0.005):
            until = a.controller.leadership.acting_until
            a_acts = a.controller.may_act()
            if a_acts:
                a_until[0] = max(a_until[0], until)
            if a_acts and b.controller.may_act():
                both.append(time.monotonic())
            if not a_acts and not a_stopped:
                a_stopped.append(time.monotonic())

    sampler = threading.Thread(target=watch_both, daemon=True)
    try:
        wait_for(lambda: a.controller.is_leader, timeout=10)
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in pods), timeout=20)
        b_tries = lease_tries(b)
        b.start()
        sampler.start()
        wait_for(lambda: len(b_tries) >= 2, timeout=30)  # b tried, and was refused
        assert not any(b_tries)
        assert not b.controller.is_leader and a.controller.may_act() and not a_stopped
        cluster.api.inject("*", r"/leases", 0, times=-1, delay=4.0)
        stalled = time.monotonic()
        wait_for(lambda: bool(a_stopped), timeout=30)  # a's deadline passed
        # by its deadline: the last renewal to succeed started before the stall, and
        # that deadline (2 s) comes before the lease (3 s) lets a standby in
        assert 0 < a_until[0] <= stalled + a.controller.renew_deadline, (a_until, stalled)
        assert a.controller.renew_deadline < 3.0
        late = cluster.add_pod()
        time.sleep(1.5)  # a leader still acting would have opened its gate by now
        assert gate(cluster, late.name) is None, "written after the renew deadline"
        assert not a.controller.is_leader and not b.controller.is_leader
        lost = a_stopped[0] - stalled  # printed, not asserted: a sampled wall-clock time
        a_metrics = a.controller.metrics.exposition().decode()
        a.stop()  # the stalled replica is gone, its lease never released
        cluster.api.clear_injections()
        wait_for(lambda: b.controller.is_leader, timeout=10)
        wait_for(lambda: gate(cluster, late.name) == "True", timeout=10)
        assert holder(cluster) == "ctl-b"
        assert "artifactcheck_leader 0.0" in a_metrics
    finally:
        done.set()
        cluster.api.clear_injections()
        for r in (a, b):
            if r._thread.is_alive():
                r.stop()
    print(f"renewals stalled -> leader stopped acting after {lost:.3f}s (deadline 2 s)")
    assert both == []


def test_renewal_requests_are_bounded_by_the_deadline(cluster: TenantCluster) -> None:
    """A renewal's requests time out by the deadline, not after 30 s."""
    from artifactcheck.control.lease import LeaseLock
    from artifactcheck.model.errors import DependencyError

    api = cluster.api.api_client()
    lock = LeaseLock(api_client=api, namespace="shop")
    cluster.api.inject("*", r"/leases", 0, times=-1, delay=5.0)
    before = lease_requests(cluster)
    t0 = time.monotonic()
    try:
        with pytest.raises(DependencyError):
            lock.try_acquire_or_renew("x", 15.0, datetime.now(UTC), deadline=time.monotonic() + 0.5)
        elapsed = time.monotonic() - t0
    finally:
        cluster.api.clear_injections()
        lock.close()
        api.close()  # type: ignore[no-untyped-call]
    print(f"renewal with 0.5 s left gave up after {elapsed:.3f}s")
    # one request, never retried (urllib3 retries 3 times), given up before the
    # server's 5 s answer (8x the deadline: no race with a loaded machine)
    assert lease_requests(cluster) - before == 1
    assert elapsed < 4.0, elapsed


# ------------------------------------------------------------------ containers ready


def _unready_pod(cluster: SimCluster) -> tuple[str, str]:
    """A pod with an IP whose containers are not ready and whose server does not
    listen yet, the way kubelet reports a pod that is still starting."""
    host = next(cluster._hosts)
    name = f"web-7f9c-{uuid.uuid4().hex[:5]}"
    cluster.api.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": cluster.namespace,
                "labels": {"app": "web", "app.kubernetes.io/version": "1.4.2"},
            },
            "spec": {
                "nodeName": "node-a",
                "containers": [{"name": "web", "image": "web:1.4.2"}],
                "readinessGates": [{"conditionType": GATE}],
            },
        }
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.api.patch_status(
        "v1",
        "Pod",
        cluster.namespace,
        name,
        {
            "status": {
                "phase": "Running",
                "podIP": host,
                "startTime": stamp,
                "conditions": [
                    {"type": "ContainersReady", "status": "False", "lastTransitionTime": stamp},
                    {"type": "Ready", "status": "False", "lastTransitionTime": stamp},
                ],
                "containerStatuses": [
                    {"name": "web", "ready": False, "image": "web:1.4.2", "restartCount": 0}
                ],
            },
        },
    )
    return name, host


def test_pod_is_checked_when_its_containers_become_ready(cluster: TenantCluster) -> None:
    """IP first, containers ready 2 s later: checked at once when ready (within the
    20 s wait, with a 60 s interval no full cycle helps), never while it refused
    connections, and the verdict latency is measured from the ContainersReady
    transition, not from when the controller heard of it (the transition is dated
    back to the pod's creation, 2 s and more before it is reported: the histogram
    shows those seconds, whatever the machine's speed)."""
    pods = [cluster.add_pod() for _ in range(3)]
    cluster.add_check(interval=60)
    with running(cluster) as ctl:
        metrics = ctl.controller.metrics
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in pods), timeout=20)
        # the gates open before the cycle records its report: wait for that as well
        wait_for(lambda: ctl.controller.cycles_completed >= 1, timeout=20)
        registry = metrics.registry
        count0 = registry.get_sample_value("artifactcheck_new_pod_verdict_seconds_count") or 0
        sum0 = registry.get_sample_value("artifactcheck_new_pod_verdict_seconds_sum") or 0
        cycles0 = ctl.controller.cycles_completed
        created = datetime.now(UTC)
        name, host = _unready_pod(cluster)
        time.sleep(2.0)
        assert gate(cluster, name) is None
        assert ctl.controller.cycles_completed == cycles0, "checked while not ready"
        cluster.web.add(Site(root=RELEASES["1.4.2"], version="1.4.2"), host, port=cluster.port)
        # kubelet reports the transition after it happened: the wait began at
        # lastTransitionTime, dated back to the pod's creation (a check ignores
        # transitions from before it started watching)
        became = created
        backdated = (datetime.now(UTC) - became).total_seconds()
        t_ready = time.monotonic()
        cluster.api.patch_status(
            "v1",
            "Pod",
            cluster.namespace,
            name,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "ContainersReady",
                            "status": "True",
                            "lastTransitionTime": became.isoformat().replace("+00:00", "Z"),
                        }
                    ],
                    "containerStatuses": [
                        {"name": "web", "ready": True, "image": "web:1.4.2", "restartCount": 0}
                    ],
                }
            },
            patch_type="strategic",
        )
        wait_for(lambda: gate(cluster, name) == "True", timeout=20, interval=0.01)
        latency = time.monotonic() - t_ready
        wait_for(
            lambda: (
                (registry.get_sample_value("artifactcheck_new_pod_verdict_seconds_count") or 0)
                > count0
            ),
            timeout=5,
        )
        count = registry.get_sample_value("artifactcheck_new_pod_verdict_seconds_count") or 0
        observed = (registry.get_sample_value("artifactcheck_new_pod_verdict_seconds_sum") or 0) - (
            sum0
        )
    print(
        f"containers ready reported -> verdict {latency:.3f}s; histogram observed "
        f"{observed:.3f}s (from the transition, {backdated:.3f} s before it was reported)"
    )
    assert count - count0 == 1  # one verdict: none while it refused connections
    # from the transition: at least the seconds before it was reported, at most those
    # and the wait the test saw (and a second of timestamp rounding); from the report,
    # it would be about the wait alone
    assert backdated <= observed <= backdated + latency + 1.5, (observed, backdated, latency)


# ------------------------------------------------------------------ lease namespace


def test_lease_namespace_defaults_to_the_pods_own(
    cluster: TenantCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from artifactcheck.control.controller import Controller, ControllerSettings
    from artifactcheck.discover.kube_pods import default_namespace

    sa = tmp_path / "namespace"
    sa.write_text("from-sa\n")
    assert default_namespace({"POD_NAMESPACE": "from-env"}, str(sa)) == "from-env"
    assert default_namespace({}, str(sa)) == "from-sa"
    with pytest.raises(ConfigError, match="lease-namespace"):
        default_namespace({}, str(tmp_path / "absent"))
    monkeypatch.setenv("POD_NAMESPACE", "shop")
    api = cluster.api.api_client()
    try:
        ctl = Controller(api_client=api, settings=ControllerSettings(admin=cluster.lab_admin()))
        assert ctl.lock.namespace == "shop"
        monkeypatch.delenv("POD_NAMESPACE")
        with pytest.raises(ConfigError):
            Controller(api_client=api, settings=ControllerSettings(admin=cluster.lab_admin()))
    finally:
        api.close()  # type: ignore[no-untyped-call]


def test_cli_without_a_lease_namespace_exits_2(
    cluster: TenantCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from artifactcheck.cli.main import main

    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    result = CliRunner().invoke(
        main, ["controller", "--kubeconfig", _kubeconfig(cluster, tmp_path), "--health-port", "0"]
    )
    assert result.exit_code == 2, result.output
    assert "POD_NAMESPACE" in result.output


def test_missing_lease_namespace_is_loud(
    cluster: TenantCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """404 creating the Lease: /readyz 503 with the reason, an ERROR, a metric; and it
    recovers once the namespace exists."""
    cluster.add_pod()
    cluster.add_check(interval=0.5)
    caplog.set_level(logging.INFO, logger="artifactcheck")
    with running(cluster, lease_namespace="ops") as ctl:
        server = ctl.controller.serve_health(host="127.0.0.1", port=0)
        try:
            base = f"http://127.0.0.1:{server.port}"
            controller = ctl.controller
            wait_for(lambda: controller.synced and controller.leadership.config_error, timeout=10)
            status, text = _get(base + "/readyz")
            assert status == 503
            assert "namespace 'ops' does not exist" in text
            metrics = _get(base + "/metrics")[1]
            assert 'artifactcheck_config_error{reason="lease-namespace"} 1.0' in metrics
            errors = [r for r in caplog.records if r.levelno == logging.ERROR]
            assert any("namespace 'ops' does not exist" in r.getMessage() for r in errors)
            assert len(errors) == 1  # said once, loudly; not once per renew period
            cluster.api.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}
            )
            wait_for(lambda: ctl.controller.is_leader, timeout=10)
            assert _get(base + "/readyz")[0] == 200
            assert "artifactcheck_config_error{" not in _get(base + "/metrics")[1]
        finally:
            server.stop()


# ------------------------------------------------------------------ conditions


def test_transition_time_changes_only_with_the_status(cluster: TenantCluster) -> None:
    """A status write with the same outcome keeps lastTransitionTime; a change of the
    condition's status gives it a new one."""
    cluster.add_pod()
    cluster.add_pod()
    cluster.add_check(interval=0.3, policy={"mode": "report"})

    def cond(ctype: str) -> dict[str, Any]:
        return cluster.condition_of(ctype) or {}

    with running(cluster) as ctl:
        wait_for(
            lambda: cluster.check_status().get("counts", {}).get("consistent") == 2, timeout=20
        )
        first = cond("Consistent")
        suspect = cond("ExpectationSuspect")
        assert first["status"] == "True"
        time.sleep(1.2)  # stamps have one-second precision
        cluster.add_pod()  # same outcome (all consistent), another status write
        wait_for(
            lambda: cluster.check_status().get("counts", {}).get("consistent") == 3, timeout=20
        )
        second = cond("Consistent")
        assert second["status"] == "True"
        assert second["lastTransitionTime"] == first["lastTransitionTime"]
        time.sleep(1.2)
        cluster.add_pod(serves="1.4.1")  # the outcome changes: not consistent
        wait_for(lambda: cond("Consistent").get("status") == "False", timeout=20)
        third = cond("Consistent")
        assert third["lastTransitionTime"] > first["lastTransitionTime"]
        assert cond("ExpectationSuspect")["lastTransitionTime"] == suspect["lastTransitionTime"]
        assert ctl.controller.cycles_completed >= 3


# ------------------------------------------------------------------ held out of traffic


@pytest.mark.parametrize("fail_open", [False, True])
def test_suspect_expectation_holds_or_fails_open(cluster: TenantCluster, fail_open: bool) -> None:
    """Most of the workload disagrees: nobody is quarantined, and the never-verified
    pods are either held out of traffic (and counted so in the status) or, by
    policy.gate_fail_open, let in as unverifiable."""
    good = [cluster.add_pod() for _ in range(4)]
    drifted = [cluster.add_pod(serves="1.4.1") for _ in range(6)]
    cluster.add_check(interval=0.5, policy={"mode": "quarantine", "gateFailOpen": fail_open})
    with running(cluster) as ctl:
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in good), timeout=20)
        wait_for(lambda: ctl.controller.cycles_completed >= 3, timeout=20)
        if fail_open:
            wait_for(lambda: all(gate(cluster, p.name) == "True" for p in drifted), timeout=10)
            cond = cluster.condition(drifted[0].name) or {}
            assert cond.get("reason") == "VerificationUnavailable"
            wait_for(lambda: cluster.check_status().get("heldOutOfTraffic") == 0, timeout=10)
        else:
            wait_for(lambda: cluster.check_status().get("heldOutOfTraffic") == 6, timeout=10)
            assert all(gate(cluster, p.name) != "True" for p in drifted)
            assert all(cluster.condition(p.name, "Ready")["status"] == "False" for p in drifted)
        status = cluster.check_status()
        assert status["quarantined"] == 0
        assert any(f["kind"] == "suspect-expectation" for f in status["findings"])


def test_no_write_is_sent_past_the_deadline(cluster: TenantCluster) -> None:
    """may_act is judged by the clock, not by the lease loop having noticed; and the
    actor asks it before every request that writes, so nothing is sent."""
    from artifactcheck.act.kube_actor import KubeActor, NotLeader
    from artifactcheck.control.controller import Controller, ControllerSettings
    from artifactcheck.model.settings import PolicySettings

    pod = cluster.add_pod()
    api = cluster.api.api_client()
    try:
        settings = ControllerSettings(lease_namespace="shop", admin=cluster.lab_admin())
        ctl = Controller(api_client=api, settings=settings)
        ctl.leadership.is_leader = True
        ctl.leadership.acting_until = time.monotonic() + 5
        assert ctl.may_act()
        ctl.leadership.acting_until = time.monotonic() - 0.001  # the lease loop has not woken yet
        assert not ctl.may_act()
        actor = KubeActor(api_client=api, policy=PolicySettings(), may_write=ctl.may_act)
        cluster.api.reset_requests()
        with pytest.raises(NotLeader):
            actor.quarantine("shop", pod.name, message="differs")
        assert [m for m, _ in cluster.api.requests if m != "GET"] == []
        ctl.lock.close()
    finally:
        api.close()  # type: ignore[no-untyped-call]
