"""The controller end to end: fake API server over HTTP, pods served by real loopback servers."""

from __future__ import annotations

import gc
import itertools

import pytest
from tenant_support import TenantCluster, admin_config, running, write_admin_config

from artifactcheck.control.young_generation import YOUNG_GENERATION, young_generation
from artifactcheck.model.names import ANN_QUARANTINED
from artifactcheck_sim.cluster import SimCluster, wait_for

_net = itertools.count(1)


@pytest.fixture
def cluster():
    n = next(_net)
    with TenantCluster(
        first_host=f"127.79.{n}.1",
        cdn_host=f"127.79.{200 + n}.1",
        release_host=f"127.79.{100 + n}.1",
    ) as c:
        yield c


def gate(cluster: SimCluster, name: str) -> str | None:
    c = cluster.condition(name)
    return c["status"] if c else None


def test_one_drifted_pod_is_quarantined_then_released(cluster: SimCluster) -> None:
    pods = [cluster.add_pod() for _ in range(9)]
    bad = cluster.add_pod(serves="1.4.1")
    cluster.add_check(interval=0.5, policy={"mode": "quarantine", "confirmations": 2})
    with running(cluster) as ctl:
        wait_for(lambda: gate(cluster, bad.name) == "False", timeout=20)
        cond = cluster.condition(bad.name)
        assert cond["reason"] == "ContentMismatch" or "Mismatch" in cond["reason"]
        for path in bad.planted:
            assert path.rsplit("/", 1)[-1] in cond["message"]
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in pods), timeout=10)
        events = [e for e in cluster.events(bad.name) if e.get("type") == "Warning"]
        assert len(events) == 1, events
        others = [e for p in pods for e in cluster.events(p.name) if e.get("type") == "Warning"]
        assert others == []
        metrics = ctl.controller.metrics.exposition().decode()
        assert 'artifactcheck_instances{check="shop/web",verdict="mismatch"} 1.0' in metrics
        assert "artifactcheck_quarantined" in metrics
        status = wait_for(lambda: cluster.check_status() or None)
        assert status["counts"]["mismatch"] == 1
        cluster.fix_pod(bad.name)
        wait_for(lambda: gate(cluster, bad.name) == "True", timeout=20)
        assert len([e for e in cluster.events(bad.name) if e.get("type") == "Warning"]) == 1


def test_the_young_generation_is_larger_while_the_controller_runs(cluster: SimCluster) -> None:
    """Full collections walk the informer's pods and the last verdicts: rarer while the
    controller runs, and the process's thresholds as they were once it stops."""
    before = gc.get_threshold()
    assert before[0] < YOUNG_GENERATION
    cluster.add_pod()
    cluster.add_check(interval=0.5)
    with running(cluster) as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 1, timeout=20)
        assert gc.get_threshold() == (YOUNG_GENERATION, *before[1:])
    assert gc.get_threshold() == before


def test_controllers_that_stop_out_of_order_leave_the_thresholds_as_they_were() -> None:
    """Two controllers of one process (a test's, a benchmark's): the first to start may
    stop first, and the thresholds from before either are back after the last."""
    before = gc.get_threshold()
    first, second = young_generation(), young_generation()
    first.__enter__()
    second.__enter__()
    assert gc.get_threshold()[0] == YOUNG_GENERATION
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] == YOUNG_GENERATION  # the second still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


def test_majority_drifted_quarantines_nobody(cluster: SimCluster) -> None:
    for _ in range(4):
        cluster.add_pod()
    drifted = [cluster.add_pod(serves="1.4.1") for _ in range(6)]
    cluster.add_check(interval=0.5, policy={"mode": "quarantine"})
    with running(cluster) as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 3, timeout=20)
        assert all(gate(cluster, p.name) != "False" for p in drifted)
        metrics = ctl.controller.metrics.exposition().decode()
        assert 'artifactcheck_suspect_expectation{check="shop/web"} 1.0' in metrics
        status = cluster.check_status()
        assert any(f["kind"] == "suspect-expectation" for f in status["findings"])


def test_cap_limits_quarantine(cluster: SimCluster) -> None:
    for _ in range(7):
        cluster.add_pod()
    drifted = [cluster.add_pod(serves="1.4.1") for _ in range(3)]
    cluster.add_check(interval=0.5, policy={"mode": "quarantine", "maxQuarantineFraction": 0.25})
    with running(cluster) as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 4, timeout=20)
        quarantined = [p for p in drifted if gate(cluster, p.name) == "False"]
        assert len(quarantined) <= 2


def test_release_source_down_never_quarantines(cluster: SimCluster) -> None:
    pods = [cluster.add_pod() for _ in range(3)]
    bad = cluster.add_pod(serves="1.4.1")
    cluster.add_check(
        interval=0.5,
        release={"manifests": [cluster.release_url + "nonexistent/{version}.json"]},
        knownVersions=[],
        policy={"mode": "quarantine"},
    )
    with running(cluster) as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 3, timeout=20)
        assert gate(cluster, bad.name) != "False"
        # gate mode fails open: verification impossible because a dependency is down
        assert all(gate(cluster, p.name) == "True" for p in pods)
        counts = cluster.check_status()["counts"]
        assert counts["inconclusive"] == 3
        # the CDN is still a witness: the drifted pod's bytes differ from the CDN's
        assert counts["cdn-mismatch"] == 1 and counts["mismatch"] == 0


def test_api_server_restart_and_410_recovered(cluster: SimCluster) -> None:
    pods = [cluster.add_pod() for _ in range(3)]
    cluster.add_check(interval=0.5, policy={"mode": "quarantine"})
    with running(cluster) as ctl:
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in pods), timeout=20)
        cluster.api.pause()
        import time

        time.sleep(1.5)
        cluster.api.resume()
        cluster.api.compact()  # the watch resumes from a resourceVersion now too old: 410
        late = cluster.add_pod()
        wait_for(lambda: gate(cluster, late.name) == "True", timeout=20)
        assert ctl.controller.metrics.exposition()
    assert all(gate(cluster, p.name) == "True" for p in pods)


def test_two_replicas_only_leader_acts(cluster: SimCluster) -> None:
    for _ in range(3):
        cluster.add_pod()
    bad = cluster.add_pod(serves="1.4.1")
    cluster.add_check(interval=0.5, policy={"mode": "quarantine", "maxQuarantineFraction": 0.5})
    a = running(cluster, identity="ctl-a").start()
    b = running(cluster, identity="ctl-b").start()
    try:
        wait_for(lambda: a.controller.is_leader or b.controller.is_leader, timeout=10)
        leader, standby = (a, b) if a.controller.is_leader else (b, a)
        assert not standby.controller.is_leader
        wait_for(lambda: gate(cluster, bad.name) == "False", timeout=20)
        assert standby.controller.cycles_completed == 0
        leader.stop()
        wait_for(lambda: standby.controller.is_leader, timeout=30)
        cluster.fix_pod(bad.name)
        wait_for(lambda: gate(cluster, bad.name) == "True", timeout=20)
        wait_for(lambda: standby.controller.cycles_completed > 0, timeout=30)
    finally:
        for r in (a, b):
            if r._thread.is_alive():
                r.stop()


def test_restart_does_not_repeat_actions_or_events(cluster: SimCluster) -> None:
    for _ in range(5):
        cluster.add_pod()
    bad = cluster.add_pod(serves="1.4.1")
    cluster.add_check(interval=0.4, policy={"mode": "quarantine", "maxQuarantineFraction": 0.5})
    with running(cluster) as first:
        wait_for(lambda: gate(cluster, bad.name) == "False", timeout=20)
        # Stop once the quarantining cycle has finished its writes (streaks, flags): a
        # restart in the middle of a cycle may rightly finish what that cycle began.
        settled = first.controller.cycles_completed + 2
        wait_for(lambda: first.controller.cycles_completed >= settled, timeout=20)
    writes_before = len(cluster.events(bad.name))
    cluster.api.reset_requests()
    with running(cluster, identity="ctl-restarted") as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 3, timeout=20)
    assert gate(cluster, bad.name) == "False"
    assert len(cluster.events(bad.name)) == writes_before
    pod_writes = [
        (m, p) for m, p in cluster.api.requests if m in ("PATCH", "PUT", "POST") and "/pods/" in p
    ]
    assert pod_writes == [], pod_writes


def test_a_flag_whose_event_a_stopped_leader_never_wrote_gets_it_once(
    cluster: SimCluster,
) -> None:
    """The leader marks a drifted pod, then its Event POSTs fail until it stops: the pod
    is flagged (``flagged-at``) with no Event. The next leader, knowing only the
    cluster, writes that Event once, and a third writes nothing."""
    for _ in range(5):
        cluster.add_pod()
    bad = cluster.add_pod(serves="1.4.1")
    cluster.add_check(interval=0.4, policy={"mode": "flag"})
    cluster.api.inject("POST", r"/events", 500, times=-1)
    with running(cluster):
        wait_for(
            lambda: "artifactcheck.io/flagged-at" in annotations(cluster, bad.name), timeout=20
        )
    cluster.api.clear_injections()
    assert cluster.events(bad.name) == []
    with running(cluster, identity="ctl-next") as ctl:
        wait_for(lambda: cluster.events(bad.name), timeout=20)
        settled = ctl.controller.cycles_completed + 2
        wait_for(lambda: ctl.controller.cycles_completed >= settled, timeout=20)
    (event,) = cluster.events(bad.name)
    assert (event["type"], event.get("count", 1)) == ("Warning", 1)
    cluster.api.reset_requests()
    with running(cluster, identity="ctl-third") as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 3, timeout=20)
    assert [p for m, p in cluster.api.requests if m != "GET" and "/events" in p] == []
    assert len(cluster.events(bad.name)) == 1


def annotations(cluster: SimCluster, name: str) -> dict[str, str]:
    pod = cluster.api.get("v1", "Pod", cluster.namespace, name) or {}
    return dict((pod.get("metadata") or {}).get("annotations") or {})


def _kubeconfig(cluster: SimCluster, tmp_path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
        f"clusters: [{{name: sim, cluster: {{server: '{cluster.api.url}'}}}}]\n"
        "users: [{name: sim, user: {token: sim-token}}]\n"
        "contexts: [{name: sim, context: {cluster: sim, user: sim}}]\n"
    )
    return str(path)


def test_verify_against_cluster(cluster: SimCluster, tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from artifactcheck.cli.main import main

    for _ in range(3):
        cluster.add_pod(gated=False)
    bad = cluster.add_pod(serves="1.4.1", gated=False)
    cluster.kubelet_sync()
    result = CliRunner().invoke(
        main,
        [
            "verify",
            "--kubeconfig",
            _kubeconfig(cluster, tmp_path),
            "--namespace",
            "shop",
            "--selector",
            "app=web,app.kubernetes.io/version in (1.4.2)",
            "--pod-port",
            str(cluster.port),
            "--release-manifest",
            cluster.release_template,
            "--known-version",
            "1.4.1",
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    verdicts = {r["instance"]: r for r in doc["results"]}
    assert len(verdicts) == 4
    odd = verdicts[f"shop/{bad.name}"]
    # 1.4.1's bytes under 1.4.2's names and manifest: a mix, never named as 1.4.1
    assert odd["verdict"] == "mismatch" and odd["serves_version"] is None
    assert "1.4.1" in odd["reason"]
    assert odd["node"] == "node-a" and odd["owner"] == "web-7f9c"
    # verify never writes to the cluster
    assert not [m for m, _ in cluster.api.requests if m in ("POST", "PUT", "PATCH", "DELETE")][
        4 * 2 :
    ]


def test_verify_cluster_unreachable_exits_3(tmp_path) -> None:
    from click.testing import CliRunner

    from artifactcheck.cli.main import main

    cfg = tmp_path / "kubeconfig"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: x, user: {}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n"
    )
    result = CliRunner().invoke(
        main, ["verify", "--kubeconfig", str(cfg), "-n", "shop", "-l", "app=web"]
    )
    assert result.exit_code == 3
    assert "list pods" in result.stderr


def test_node_cordon_once_and_capped(cluster: SimCluster) -> None:
    stale = "docker.io/library/web@sha256:" + "5" * 64
    for node in ("node-a", "node-b"):
        for _ in range(2):
            cluster.add_pod(node=node)
    on_c = [cluster.add_pod(node="node-c", serves="1.4.1", image_id=stale) for _ in range(1)]
    cluster.add_check(
        interval=0.4,
        policy={
            "mode": "quarantine",
            "cordonNodes": True,
            "maxCordonedNodes": 1,
            "maxQuarantineFraction": 0.5,
        },
    )
    with running(cluster) as ctl:
        wait_for(
            lambda: cluster.api.get("v1", "Node", None, "node-c")["spec"].get("unschedulable"),
            timeout=20,
        )
        node = cluster.api.get("v1", "Node", None, "node-c")
        assert node["metadata"]["annotations"]["artifactcheck.io/cordoned"] == "true"
        # a second stale node: capped at 1, so an alert instead of a cordon
        cluster.add_pod(node="node-d", serves="1.4.1", image_id=stale)
        wait_for(
            lambda: any(
                f["kind"] == "node-suspect" for f in cluster.check_status().get("findings", [])
            ),
            timeout=20,
        )
        assert not cluster.api.get("v1", "Node", None, "node-d")["spec"].get("unschedulable")
        patches = [
            p for m, p in cluster.api.requests if m == "PATCH" and p.startswith("/api/v1/nodes/")
        ]
        assert len(patches) == 1, patches
        assert on_c and ctl.controller.cycles_completed > 0


def test_health_endpoints_and_metrics(cluster: SimCluster) -> None:
    import urllib.request

    cluster.add_pod()
    cluster.add_check(interval=0.5)
    with running(cluster) as ctl:
        server = ctl.controller.serve_health(host="127.0.0.1", port=0)
        try:
            base = f"http://127.0.0.1:{server.port}"
            wait_for(lambda: ctl.controller.cycles_completed >= 1, timeout=20)
            assert urllib.request.urlopen(base + "/healthz").status == 200
            assert urllib.request.urlopen(base + "/readyz").status == 200
            body = urllib.request.urlopen(base + "/metrics").read().decode()
            assert "artifactcheck_leader 1.0" in body
            assert "artifactcheck_cycles_total" in body
        finally:
            server.stop()


def test_steady_state_costs_no_api_calls(cluster: SimCluster) -> None:
    pods = [cluster.add_pod() for _ in range(5)]
    cluster.add_check(interval=0.3)
    with running(cluster, renew_period=0.3) as ctl:
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in pods), timeout=20)
        wait_for(
            lambda: cluster.check_status().get("counts", {}).get("consistent") == 5, timeout=20
        )
        start = ctl.controller.cycles_completed
        cluster.api.reset_requests()
        wait_for(lambda: ctl.controller.cycles_completed >= start + 3, timeout=20)
        calls = list(cluster.api.requests)
    lease = [c for c in calls if "/leases" in c[1]]
    other = [c for c in calls if c not in lease]
    # only lease renewals (and possibly a watch reconnect): no per-pod reads, no writes
    assert all(m == "GET" and "watch" in p for m, p in other), other
    assert not [c for c in other if "/pods/" in c[1]]


def test_investigate_pod_shows_condition_and_events(cluster: SimCluster, tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from artifactcheck.cli.main import main

    for node in ("node-a", "node-b", "node-a"):
        cluster.add_pod(node=node)
    bad = cluster.add_pod(serves="1.4.1", node="node-c")
    cluster.add_check(interval=0.4, policy={"mode": "quarantine", "maxQuarantineFraction": 0.5})
    with running(cluster):
        wait_for(lambda: gate(cluster, bad.name) == "False", timeout=20)
    args = [
        "investigate",
        f"shop/{bad.name}",
        "--kubeconfig",
        _kubeconfig(cluster, tmp_path),
        "-n",
        "shop",
        "-l",
        "app=web",
        "--pod-port",
        str(cluster.port),
        "--release-manifest",
        cluster.release_template,
        "--known-version",
        "1.4.1",
        "--cdn",
        cluster.cdn_url,
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    flat = " ".join(result.stdout.split())
    assert bad.name in flat and "1.4.1" in flat and "node-c" in flat
    doc = json.loads(CliRunner().invoke(main, [*args, "--output", "json"]).stdout)
    text = json.dumps(doc)
    assert "ContentMismatch" in text  # the Warning Event and the condition's reason
    assert "artifactcheck.io/content-verified" in text


def test_controller_command_end_to_end(cluster: SimCluster, tmp_path) -> None:
    """The real `artifactcheck controller` process: probes, JSON logs, acts, stops on SIGTERM."""
    import json
    import signal
    import subprocess
    import sys
    import urllib.request

    from artifactcheck_sim.cluster import free_port

    for _ in range(3):
        cluster.add_pod()
    bad = cluster.add_pod(serves="1.4.1")
    cluster.add_check(interval=0.5, policy={"mode": "quarantine", "maxQuarantineFraction": 0.5})
    port = free_port("127.0.0.1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "artifactcheck",
            "controller",
            "--kubeconfig",
            _kubeconfig(cluster, tmp_path),
            "--namespace-scope",
            "shop",
            "--identity",
            "proc-1",
            "--lease-namespace",
            "shop",
            "--lease-duration",
            "3",
            "--bind",
            "127.0.0.1",
            "--health-port",
            str(port),
            "--metrics-port",
            "0",
            "--json-logs",
            "--admin-config",
            write_admin_config(admin_config(cluster), tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def ready() -> bool:
            try:
                return (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).status
                    == 200
                )
            except OSError:
                return False

        wait_for(ready, timeout=20)
        wait_for(lambda: gate(cluster, bad.name) == "False", timeout=30)
        # The mark is written after the gate's answer came back, so the gate's log line
        # is out before SIGTERM (a stop between the two writes leaves only the gate).
        wait_for(lambda: _quarantine_mark(cluster, bad.name) == "true", timeout=30)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
        assert b"artifactcheck_leader 1.0" in metrics
    except Exception as exc:
        proc.send_signal(signal.SIGTERM)
        raise AssertionError(proc.communicate(timeout=20)[1][-3000:]) from exc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err[-2000:]
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert records, err[-2000:]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert any("quarantined pod" in r["message"] for r in records)
    # the lease was released on shutdown, so a successor need not wait for expiry
    lease = cluster.api.get("coordination.k8s.io/v1", "Lease", "shop", "artifactcheck-leader")
    assert not (lease or {}).get("spec", {}).get("holderIdentity")


def _quarantine_mark(cluster: SimCluster, name: str) -> str | None:
    annotations = cluster.pod(name).get("metadata", {}).get("annotations") or {}
    return annotations.get(ANN_QUARANTINED)


def test_new_pods_fast_path_gives_the_full_paths_verdicts(cluster: SimCluster) -> None:
    """New pods are judged on the fast path (no full cycle: the interval is a minute)
    against the check's current state, reusing every other pod's last verdict; the
    verdicts are those of judging every observation afresh, as a full cycle does."""
    import asyncio

    from artifactcheck.judge.compare import compare_fleet, reported_version

    pods = [cluster.add_pod() for _ in range(6)]
    cluster.add_check(interval=60, policy={"mode": "quarantine"})
    with running(cluster) as ctl:
        # the gates open while the cycle acts; its report is recorded just after
        wait_for(
            lambda: (
                all(gate(cluster, p.name) == "True" for p in pods)
                and "shop/web" in ctl.controller.checks
                and ctl.controller.checks["shop/web"].last_report is not None
            ),
            timeout=20,
        )
        state = ctl.controller.checks["shop/web"]
        first = state.last_report
        assert first is not None
        seen = {n: o.assets for n, o in state.observations.items()}
        good, bad = cluster.add_pod(), cluster.add_pod(serves="1.4.1")
        names = {f"shop/{good.name}", f"shop/{bad.name}"}

        def judged() -> bool:
            report = state.last_report
            return report is not None and names <= {r.instance.name for r in report.results}

        wait_for(judged, timeout=20)
        wait_for(lambda: gate(cluster, good.name) == "True", timeout=20)
        report = state.last_report
        assert report is not None and report.started_at > first.started_at
        # no full cycle came in between: it would have re-observed the old pods
        assert all(state.observations[n].assets is assets for n, assets in seen.items())
        loop = ctl._loop
        expectations = state.expectations
        assert expectations is not None
        observations = [state.observations[r.instance.name] for r in report.results]
        loaded = {}
        for version in {reported_version(o) for o in observations} - {None}:
            got = asyncio.run_coroutine_threadsafe(expectations.get(version), loop)
            loaded[version] = got.result(timeout=10)
        fresh = compare_fleet(
            observations,
            expectations=loaded,
            known_releases=expectations.known(),
            desired_version=state.spec.desired_version,
            now=report.started_at,
            tls_warn_days=state.spec.http.tls_expiry_warning_days,
        )
    fast = {r.instance.name: (r.verdict, r.reason, r.findings) for r in report.results}
    full = {r.instance.name: (r.verdict, r.reason, r.findings) for r in fresh}
    assert fast == full
    assert fast[f"shop/{bad.name}"][0].value == "mismatch"
    assert fast[f"shop/{good.name}"][0].value == "consistent"


def test_a_cycle_that_raises_is_retried_and_the_check_goes_on(
    cluster: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug that makes a cycle raise (here: judging, three times) is that cycle's
    failure: counted, backed off, retried; the pods it took are checked by the next
    cycle, and the check keeps running (it used to end until the controller restarted)."""
    import artifactcheck.control.cycle as cycle_module

    real = cycle_module.judge_step
    calls = {"n": 0, "fail": 3}

    async def flaky(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["fail"] > 0:
            calls["fail"] -= 1
            raise RuntimeError("a bug in judging")
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cycle_module, "judge_step", flaky)
    pods = [cluster.add_pod() for _ in range(3)]
    cluster.add_check(interval=30)  # the first full cycle must be retried, not awaited
    with running(cluster) as ctl:
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in pods), timeout=20)
        metrics = ctl.controller.metrics.exposition().decode()
        assert 'artifactcheck_cycle_failures_total{check="shop/web"} 3.0' in metrics
        # a new pod's fast cycle fails twice: the pod is pending again and checked by
        # the fast path after the backoff, not by the full cycle 30 s later
        calls["fail"] = 2
        late = cluster.add_pod()
        wait_for(lambda: gate(cluster, late.name) == "True", timeout=10)
        assert calls["fail"] == 0 and calls["n"] >= 7


def test_new_pods_do_not_confirm_an_old_mismatch(cluster: SimCluster) -> None:
    """Each new pod's fast cycle judges the whole workload again, on each pod's last
    observation. That is not a second mismatch: a drifted pod observed once is not
    flagged however many pods come, until a cycle observes it again."""
    good = [cluster.add_pod(gated=False) for _ in range(5)]
    bad = cluster.add_pod(serves="1.4.1", gated=False)
    cluster.add_check(interval=60, policy={"mode": "flag", "confirmations": 2})
    with running(cluster) as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 1, timeout=20)
        status = wait_for(lambda: cluster.check_status() or None)
        assert status["counts"]["mismatch"] == 1
        newcomers = [cluster.add_pod() for _ in range(3)]
        for pod in newcomers:  # one fast cycle (at least) per new pod, each re-judging bad
            wait_for(lambda pod=pod: gate(cluster, pod.name) == "True", timeout=20)
        # the gates open just before a cycle records its report: wait for that too
        wait_for(lambda: ctl.controller.cycles_completed >= 2, timeout=20)
        warnings = [e for e in cluster.events(bad.name) if e.get("type") == "Warning"]
        assert warnings == [], warnings
        assert all(not cluster.events(p.name) for p in good)


def test_a_suspect_the_fixed_sample_misses_is_followed_up_until_quarantined(
    cluster: SimCluster,
) -> None:
    """A full cycle samples one pod (a fixed seed: always the newest); a drifted pod
    that came earlier is observed once, by the fast path. The sampled cycles follow
    it up (its streak is open) until it is confirmed and quarantined."""
    for _ in range(4):
        cluster.add_pod()
    cluster.add_check(
        interval=0.3,
        sampling={"instances": 1, "seed": 1},
        policy={"mode": "quarantine", "confirmations": 3},
    )
    with running(cluster) as ctl:
        wait_for(lambda: ctl.controller.cycles_completed >= 1, timeout=20)
        bad = cluster.add_pod(serves="1.4.1")
        old = {"status": {"startTime": "2020-01-01T00:00:00Z"}}  # never the newest
        cluster.api.patch_status("v1", "Pod", cluster.namespace, bad.name, old)
        newest = cluster.add_pod()
        wait_for(lambda: gate(cluster, bad.name) == "False", timeout=20)
        wait_for(lambda: gate(cluster, newest.name) == "True", timeout=20)
