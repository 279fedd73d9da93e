"""Benchmark 3: the controller at 5,000 pods.

The fake API server (``artifactcheck_sim.apiserver.FakeApiServer``) runs in this
process; 5,000 pods are created with its in-process API, each pointing at its own
loopback address served by the nginx fleet (``bench.fleet_server``, the same ~500-entry
site as benchmark 1), and one gated ``ArtifactCheck`` selects them. The controller runs
in a separate process (``python -m bench.controller --child``), talking to the API
server over HTTP with the official client, so its peak RSS is its own.

Measured: time to the first verdict on all pods; API requests per cycle in steady
state (verbs from ``FakeApiServer.verb_counts``: no per-pod GETs, no writes when
nothing changed); then 50 new pods, one every ``--new-every`` seconds, each timed from
the moment it is ready (containers ready, IP set) to its verdict (the readiness-gate
condition the controller sets); and the controller's peak RSS (``wait4``).

    python -m bench.controller [--pods 5000] [--new 50]

``--gate-writes N`` measures the Kubernetes half of a first cycle alone: N pods, each
gate opened as the controller opens it (``KubeWriter``, ``ACTING_AT_ONCE`` pods at once,
the informer's copy read instead of a GET) while one watch follows the pods, in a
process of its own; the CPU of its one thread per gate, the watch event that gate
brings back included. The client is the controller's (``control.kube_transport``, on
the lean HTTP/1.1 transport); ``--kube-transport httpx`` puts it on httpx's transport,
as before, for a paired comparison in one tree.

    python -m bench.controller --gate-writes 3000 [--kube-transport httpx]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .common import (
    ROOT,
    children_of,
    fleet_server,
    log,
    machine,
    peak_rss_mb,
    peak_rss_of,
    proc_cpu,
    product_python,
    save,
    tool_env,
)

GATE = "artifactcheck.io/content-verified"
NAMESPACE = "shop"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container(ready: bool) -> dict[str, Any]:
    return {
        "name": "web",
        "ready": ready,
        "image": "web:1.4.2",
        "imageID": "docker.io/library/web@sha256:" + "ab" * 32,
        "restartCount": 0,
        "started": ready,
    }


def _set_status(api: Any, name: str, status: dict[str, Any], **kw: Any) -> None:
    """Write a pod's status, as kubelet does (``pods/status``)."""
    api.patch_status("v1", "Pod", NAMESPACE, name, {"status": status}, **kw)


def make_ready(api: Any, name: str) -> None:
    """Kubelet's second step: the containers of a pod that has its IP become ready."""
    _set_status(
        api,
        name,
        {
            "conditions": [
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": _now()},
            ],
            "containerStatuses": [_container(True)],
        },
        patch_type="strategic",
    )


def add_pod(api: Any, host: str, index: int, *, ready: bool = True) -> str:
    """Create one gated pod serving on ``host`` (the kubelet's part included): ready, or
    (``ready=False``, kubelet's order) with its IP but containers not yet ready."""
    name = f"web-7f9c-{index:05d}-{uuid.uuid4().hex[:4]}"
    api.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": {"app": "web", "app.kubernetes.io/version": "1.4.2"},
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "web-7f9c",
                        "uid": "5f0c1b9e-0000-4000-8000-000000000001",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "nodeName": f"node-{index % 20}",
                "containers": [{"name": "web", "image": "web:1.4.2"}],
                "readinessGates": [{"conditionType": GATE}],
            },
        }
    )
    _set_status(
        api,
        name,
        {
            "phase": "Running",
            "podIP": host,
            "hostIP": "127.0.0.1",
            "startTime": _now(),
            "conditions": [
                {
                    "type": "ContainersReady",
                    "status": "True" if ready else "False",
                    "lastTransitionTime": _now(),
                },
                {"type": "Ready", "status": "False", "lastTransitionTime": _now()},
            ],
            "containerStatuses": [_container(ready)],
        },
    )
    return name


def gate_status(api: Any, name: str) -> str | None:
    pod = api.get("v1", "Pod", NAMESPACE, name) or {}
    for cond in (pod.get("status") or {}).get("conditions", []):
        if cond.get("type") == GATE:
            return str(cond.get("status"))
    return None


def scrape(url: str) -> dict[str, float]:
    """The controller's Prometheus metrics, flattened (name{labels} -> value)."""
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - loopback
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def cycles(metrics_url: str) -> int:
    values = scrape(metrics_url)
    return int(sum(v for k, v in values.items() if k.startswith("artifactcheck_cycles_total{")))


def wait_until(predicate: Any, timeout: float, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached within {timeout}s")
        time.sleep(interval)


def child(api_url: str, health_port: int) -> int:
    """The controller process: run until SIGTERM, then report its own figures.

    It starts as ``artifactcheck controller`` does: the collector held back while the
    modules load and handed back, start-up frozen, before the work (cli/entry.py).
    """
    import asyncio

    from artifactcheck.cli.collector import hold_back, loaded

    hold_back()
    from kubernetes import client as k8s

    from artifactcheck.control.controller import Controller, ControllerSettings

    log_file = os.environ.get("ACBENCH_CONTROLLER_LOG")
    if log_file:  # the controller's own account of its phases, timestamped
        import logging

        logging.basicConfig(
            filename=log_file, level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
        )
    loaded()  # as the CLI's group callback does, before the workers fork
    pool = None
    processes = int(os.environ.get("ACBENCH_OBSERVE_PROCESSES", "0"))
    if processes:  # started first: no thread of this process runs yet
        from artifactcheck.control.workers import ObservePool

        pool = ObservePool(processes).start()
    api_client = k8s.ApiClient(k8s.Configuration(host=api_url))
    ctl = Controller(
        api_client=api_client,
        settings=ControllerSettings(
            namespace=NAMESPACE,
            identity="bench",
            lease_namespace="artifactcheck-system",
            # the parent's lab grants: the local release directory, loopback pods
            admin_config=os.environ.get("ACBENCH_ADMIN_CONFIG"),
        ),
    )
    ctl.workers = pool
    health = ctl.serve_health(host="127.0.0.1", port=health_port)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await ctl.run(stop)

    trace = os.environ.get("ACBENCH_TRACEMALLOC")
    if trace:
        import tracemalloc

        tracemalloc.start(int(os.environ.get("ACBENCH_TRACEMALLOC_FRAMES", "1")))
    try:
        asyncio.run(main())
    finally:
        health.stop()
        if pool is not None:
            pool.close()
        api_client.close()  # type: ignore[no-untyped-call]
        if trace:
            snapshot = tracemalloc.take_snapshot()
            current, peak = tracemalloc.get_traced_memory()
            top = snapshot.statistics("traceback" if "," in trace else "lineno")[:40]
            with open(trace, "w", encoding="utf-8") as fh:
                fh.write(f"current {current / 1e6:.1f} MB, peak {peak / 1e6:.1f} MB\n")
                for stat in top:
                    fh.write(f"{stat.size / 1e6:8.1f} MB {stat.count:9d} ")
                    fh.write(" <- ".join(str(f) for f in stat.traceback) + "\n")
    return 0


def gate_writes_child(api_url: str, pods: int, transport: str = "lean") -> int:
    """The gate-writes process: open every pod's gate, as the controller's actions do,
    while a watch follows the pods; print the CPU of this (the one) thread per gate.

    The first ``WARM_UP`` gates warm the connections and are not counted.
    """
    import asyncio

    from artifactcheck.act.kube_writes import KubeWriter
    from artifactcheck.clients.kube import ApiClient, configuration_for
    from artifactcheck.clients.kube_http import KubeHttp
    from artifactcheck.control.actions import ACTING_AT_ONCE
    from artifactcheck.control.kube_transport import kube_client
    from artifactcheck.model.settings import PolicySettings

    warm_up = min(200, pods // 10)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"

    async def main() -> dict[str, Any]:
        configuration = configuration_for(api_url)
        kube = (
            KubeHttp(configuration, timeout=(5.0, 60.0))
            if transport == "httpx"
            else kube_client(ApiClient(configuration), timeout=(5.0, 60.0))
        )
        listed = await kube.list("pods", path)
        names = [p["metadata"]["name"] for p in listed["items"]]
        copies = {(NAMESPACE, p["metadata"]["name"]): p for p in listed["items"]}
        writer = KubeWriter(
            kube=kube,
            policy=PolicySettings(condition_type=GATE),
            logger=None,
            request_timeout=(5.0, 60.0),
            clock=lambda: datetime.now(UTC),
            may_write=lambda: True,
            cached_pod=lambda ns, name: copies.get((ns, name)),
        )
        events = 0

        async def follow() -> None:
            nonlocal events
            rv = listed["metadata"]["resourceVersion"]
            async for _kind, _pod in kube.watch(
                "pods", path, resource_version=rv, timeout_seconds=600
            ):
                events += 1

        slots = asyncio.Semaphore(ACTING_AT_ONCE)

        async def open_gate(name: str) -> None:
            async def step(pod: Any) -> bool:
                done = await writer.gate_then_mark(
                    pod, (NAMESPACE, name), "True", "ContentVerified", "verified", {}, "released"
                )
                return done

            async with slots:
                await writer.on_pod("release", NAMESPACE, name, step)

        async def until_events(count: int) -> None:
            while events < count:
                await asyncio.sleep(0.001)

        watcher = asyncio.create_task(follow())
        await asyncio.gather(*(open_gate(n) for n in names[:warm_up]))
        await until_events(warm_up)
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        await asyncio.gather(*(open_gate(n) for n in names[warm_up:]))
        await until_events(len(names))
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
        watcher.cancel()
        await kube.aclose()
        counted = len(names) - warm_up
        return {
            "gates": counted,
            "cpu_us_per_gate": 1e6 * cpu / counted,
            "wall_us_per_gate": 1e6 * wall / counted,
        }

    print(json.dumps(asyncio.run(main())))
    return 0


def gate_writes(args: argparse.Namespace) -> dict[str, Any]:
    """``--gate-writes``: the API server here, the writes in a process of their own."""
    from artifactcheck_sim.apiserver import FakeApiServer

    python = sys.executable if args.dev_environment else product_python()
    api = FakeApiServer(namespaces=("default", NAMESPACE))
    api.start()
    try:
        for i in range(args.gate_writes):
            add_pod(api, f"127.0.{i // 250}.{i % 250 + 1}", i)
        out = subprocess.run(  # noqa: S603 - the benchmark's own child
            [
                python,
                "-m",
                "bench.controller",
                "--gate-writes-child",
                api.url,
                str(args.gate_writes),
                "--kube-transport",
                args.kube_transport,
            ],
            check=True,
            capture_output=True,
            cwd=ROOT,
            env=tool_env(),
            timeout=args.timeout,
        ).stdout
    finally:
        api.stop()
    return {
        "benchmark": "controller-gate-writes",
        "machine": machine(),
        "environment": "development" if args.dev_environment else "product",
        "pods": args.gate_writes,
        "kube_transport": args.kube_transport,
        **json.loads(out.splitlines()[-1]),
    }


def tree_cpu(pid: int) -> float:
    """CPU seconds of a live process and its live descendants (the controller and its
    observing processes)."""
    return proc_cpu(pid) + sum(tree_cpu(c) for c in children_of(pid))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spy(pid: int, out: str, *, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy on the controller we started and its worker processes: every thread,
    idle ones too (a thread waiting on the API server is where the time goes)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(  # noqa: S603 - py-spy on the controller we started
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--subprocesses",
            "--idle",
            "--threads",
            "-f",
            "raw",
            "-r",
            "100",
            "-o",
            out,
            "-d",
            str(int(seconds)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def bench(args: argparse.Namespace) -> dict[str, Any]:
    from artifactcheck_sim.apiserver import FakeApiServer

    result: dict[str, Any] = {
        "benchmark": "controller",
        "machine": machine(),
        "pods": args.pods,
        "new_pods": args.new,
        "interval": args.interval,
        "ip_first": args.ip_first,
        "sampling": {"instances": args.sample_instances, "assets_per_instance": 5},
    }
    # made before anything is timed (the first time, a pip install)
    python = sys.executable if args.dev_environment else product_python()
    result["environment"] = "development" if args.dev_environment else "product"
    total = args.pods + args.new
    server_args = ["--instances", str(total), "--drift", "0", "--first-host", "127.210.0.1"]
    with fleet_server(server_args) as fleet:
        info = fleet.info
        hosts = info["hosts"]
        api = FakeApiServer(namespaces=("default", NAMESPACE, "artifactcheck-system"))
        api.start()
        proc: subprocess.Popen[bytes] | None = None
        try:
            t0 = time.perf_counter()
            names = [add_pod(api, hosts[i], i) for i in range(args.pods)]
            result["create_pods_seconds"] = time.perf_counter() - t0
            api.create(
                {
                    "apiVersion": "artifactcheck.io/v1alpha1",
                    "kind": "ArtifactCheck",
                    "metadata": {"name": "web", "namespace": NAMESPACE},
                    "spec": {
                        "kubernetes": {
                            "namespace": NAMESPACE,
                            "selector": "app=web",
                            "port": info["port"],
                        },
                        "release": {"manifests": [info["release_template"]]},
                        "manifestPath": "artifactcheck.json",
                        "manifestFormat": "native",
                        "interval": args.interval,
                        "sampling": {
                            "instances": args.sample_instances,
                            "assetsPerInstance": 5,
                            "seed": 1,
                        },
                        "policy": {"mode": "quarantine"},
                    },
                }
            )
            port = free_port()
            metrics_url = f"http://127.0.0.1:{port}/metrics"
            api.reset_requests()
            log(f"controller: {args.pods} pods created; starting the controller process")
            started = time.perf_counter()
            cpu0, fleet_cpu0 = time.process_time(), fleet.server_cpu()
            env = tool_env()
            admin = Path(tempfile.mkdtemp(prefix="acbench-admin-")) / "admin.yaml"
            admin.write_text(
                json.dumps(  # JSON is YAML: the lab's grants, as a cluster admin writes them
                    {
                        "egress": {"allow_loopback": True},
                        "release_directories": [
                            {
                                "directory": str(Path(info["release_template"]).parent),
                                "namespaces": [NAMESPACE],
                            }
                        ],
                        "limits": {
                            "min_interval": 0.1,
                            "max_instances": 100_000,
                            "requests_per_minute": 1e9,
                            "concurrent_cycles_per_namespace": 8,
                        },
                    }
                ),
                encoding="utf-8",
            )
            env["ACBENCH_ADMIN_CONFIG"] = str(admin)
            result["observe_processes"] = args.observe_processes
            env["ACBENCH_OBSERVE_PROCESSES"] = str(args.observe_processes)
            if args.controller_log:
                env["ACBENCH_CONTROLLER_LOG"] = args.controller_log
            if args.trace_memory:
                env["ACBENCH_TRACEMALLOC"] = args.trace_memory
            proc = subprocess.Popen(  # noqa: S603
                [python, "-m", "bench.controller", "--child", api.url, str(port)],
                cwd=ROOT,
                env=env,
                start_new_session=True,
            )

            startup_spy = None
            if args.profile_startup:
                startup_spy = _spy(proc.pid, args.profile_startup, seconds=args.timeout)

            def first_cycle_done() -> bool:
                try:
                    return cycles(metrics_url) >= 1
                except OSError:
                    return False

            wait_until(first_cycle_done, timeout=args.timeout, interval=0.5)
            cycle_done = [time.perf_counter()]
            result["cpu_at_first_cycle"] = {
                "controller": tree_cpu(proc.pid),
                "bench_and_api_server": time.process_time() - cpu0,
                "fleet": fleet.server_cpu() - fleet_cpu0,
            }

            def all_verdicts() -> bool:
                """Every pod has its gate condition (a pod the first cycle could not
                reach has none: then end 10 s after the first cycle, without it).
                Polled only once the first cycle is done: reading every pod in this
                process starves the API server the controller talks to."""
                gated = sum(1 for n in names if gate_status(api, n) is not None)
                if gated == len(names):
                    result["all_verdicts_seconds"] = time.perf_counter() - started
                    result["cpu_at_all_verdicts"] = {
                        "controller": tree_cpu(proc.pid),
                        "bench_and_api_server": time.process_time() - cpu0,
                        "fleet": fleet.server_cpu() - fleet_cpu0,
                    }
                    result["startup_verbs_at_all_verdicts"] = dict(api.verb_counts)
                    return True
                return time.perf_counter() > cycle_done[0] + 10

            wait_until(all_verdicts, timeout=args.timeout, interval=0.5)
            if startup_spy is not None:  # py-spy writes its profile when interrupted
                startup_spy.send_signal(signal.SIGINT)
                startup_spy.wait(timeout=120)
            result["first_cycle_seconds"] = cycle_done[0] - started
            gated = sum(1 for n in names if gate_status(api, n) is not None)
            result["pods_with_verdict_after_first_cycle"] = gated
            result["startup_verbs"] = dict(api.verb_counts)
            result["startup_pod_gets"] = sum(
                1 for m, p in api.requests if m == "GET" and "/pods/" in p
            )
            log(
                f"  first cycle done in {result['first_cycle_seconds']:.1f}s: "
                f"{gated}/{args.pods} pods have the gate condition; "
                f"API verbs {dict(api.verb_counts)}"
            )

            # steady state: full cycles over an unchanged cluster
            c0 = cycles(metrics_url)
            api.reset_requests()
            s0 = time.perf_counter()
            wait_until(
                lambda: cycles(metrics_url) >= c0 + args.steady_cycles,
                timeout=args.timeout,
                interval=0.5,
            )
            steady = time.perf_counter() - s0
            n_cycles = cycles(metrics_url) - c0
            verbs = dict(api.verb_counts)
            writes = sum(verbs.get(v, 0) for v in WRITE_VERBS)
            result["steady"] = {
                "cycles": n_cycles,
                "seconds": steady,
                "verbs": verbs,
                "requests": sum(api.request_counts.values()),
                "per_cycle": {k: v / n_cycles for k, v in verbs.items()},
                "writes": writes,
                "gets": verbs.get("get", 0),
                "sample_paths": [p for _m, p in api.requests[:20]],
            }
            log(f"  steady: {n_cycles} cycles in {steady:.1f}s, verbs {verbs}")

            # new pods, one at a time
            api.reset_requests()
            latencies: list[float] = []
            pending: dict[str, float] = {}
            lock = threading.Lock()
            done = threading.Event()

            def poll() -> None:
                while not done.is_set() or pending:
                    with lock:
                        items = list(pending.items())
                    for name, ready_at in items:
                        if gate_status(api, name) is not None:
                            with lock:
                                pending.pop(name, None)
                                latencies.append(time.perf_counter() - ready_at)
                    if done.is_set() and time.perf_counter() > deadline:
                        break
                    time.sleep(0.005)

            deadline = time.perf_counter() + args.timeout
            poller = threading.Thread(target=poll, name="verdict-poller", daemon=True)
            poller.start()
            spy = None
            if args.profile:
                spy = _spy(proc.pid, args.profile, seconds=args.new * args.new_every + 5)
            timers: list[threading.Timer] = []

            def ready_now(name: str) -> None:
                # timed from the ContainersReady transition: the moment the wait begins
                with lock:
                    pending[name] = time.perf_counter()
                make_ready(api, name)

            for i in range(args.new):
                if args.ip_first is None:
                    name = add_pod(api, hosts[args.pods + i], args.pods + i)
                    with lock:
                        pending[name] = time.perf_counter()
                else:  # kubelet's order: the IP now, containers ready ip_first s later
                    name = add_pod(api, hosts[args.pods + i], args.pods + i, ready=False)
                    timer = threading.Timer(args.ip_first, ready_now, args=(name,))
                    timer.start()
                    timers.append(timer)
                time.sleep(args.new_every)
            for timer in timers:
                timer.join()
            done.set()
            deadline = time.perf_counter() + 30
            poller.join(timeout=60)
            if spy is not None:
                spy.wait(timeout=120)
            result["new_pod_verbs"] = dict(api.verb_counts)
            result["new_pods_without_verdict"] = len(pending)
            lat = sorted(latencies)
            if lat:
                result["verdict_latency"] = {
                    "n": len(lat),
                    "p50": statistics.median(lat),
                    "p99": lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))],
                    "max": lat[-1],
                    "all": lat,
                }
            metrics = scrape(metrics_url)
            result["controller_histogram"] = {
                k: v for k, v in metrics.items() if k.startswith("artifactcheck_new_pod_verdict")
            }
            got = result.get("verdict_latency", {"p50": float("nan"), "p99": float("nan")})
            log(
                f"  new pods: p50 {got['p50']:.3f}s p99 {got['p99']:.3f}s over {len(lat)} "
                f"pods; {len(pending)} without verdict"
            )
        finally:
            if proc is not None:
                if proc.poll() is None:
                    hwm = peak_rss_mb(proc.pid)  # not wait4's: see common.run_measured
                    proc.send_signal(signal.SIGTERM)  # the controller process we started
                    timer = threading.Timer(60, lambda: os.killpg(proc.pid, signal.SIGKILL))
                    timer.start()
                    _pid, status, usage = os.wait4(proc.pid, 0)
                    timer.cancel()
                    result["controller_exit"] = os.waitstatus_to_exitcode(status)
                    peak, source = peak_rss_of(hwm, usage)
                    result["controller_peak_rss_mb"] = peak
                    result["controller_peak_rss_source"] = source
                    result["controller_cpu_seconds"] = usage.ru_utime + usage.ru_stime
                else:
                    result["controller_exit"] = proc.returncode
            api.stop()
    return result


def describe(r: dict[str, Any]) -> str:
    s = r["steady"]
    per = ", ".join(f"{k} {v:g}" for k, v in sorted(s["per_cycle"].items()))
    lat = r.get("verdict_latency", {})
    return (
        f"controller, {r['pods']} pods: first verdicts on all in "
        f"{r.get('all_verdicts_seconds', float('nan')):.1f} s (first cycle "
        f"{r['first_cycle_seconds']:.1f} s); start-up verbs {r['startup_verbs']} "
        f"({r.get('startup_pod_gets', 0)} pod GETs); "
        f"steady state per cycle: {per or 'no API requests'} ({s['gets']} GETs, "
        f"{s['writes']} writes in {s['cycles']} cycles); new pods readiness->verdict "
        f"p50 {lat.get('p50', float('nan')):.2f} s p99 {lat.get('p99', float('nan')):.2f} s "
        f"(target < 2 s); peak RSS {r.get('controller_peak_rss_mb', float('nan')):.0f} MB "
        f"(target < 250 MB)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="controller at fleet scale")
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--new", type=int, default=50)
    parser.add_argument("--new-every", type=float, default=0.5, help="seconds between new pods")
    parser.add_argument("--interval", type=float, default=20.0, help="ArtifactCheck interval")
    parser.add_argument("--sample-instances", type=int, default=500)
    parser.add_argument("--steady-cycles", type=int, default=2)
    parser.add_argument(
        "--ip-first",
        type=float,
        metavar="SECONDS",
        help="kubelet's order for new pods: the IP first, containers ready SECONDS later "
        "(latency timed from containers ready)",
    )
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--name", default="controller")
    parser.add_argument("--child", nargs=2, metavar=("API_URL", "HEALTH_PORT"))
    parser.add_argument("--trace-memory", metavar="FILE", help="tracemalloc top lines")
    parser.add_argument("--profile", metavar="FILE", help="py-spy the new-pod phase")
    parser.add_argument(
        "--observe-processes",
        type=int,
        default=0,
        metavar="N",
        help="the controller observes large cycles from N worker processes (0: in itself)",
    )
    parser.add_argument("--controller-log", metavar="FILE", help="the controller's INFO log")
    parser.add_argument(
        "--dev-environment",
        action="store_true",
        help="run the controller in this interpreter's environment (test tools included), "
        "not in one holding only the product's dependencies (bench.common.product_python)",
    )
    parser.add_argument(
        "--profile-startup", metavar="FILE", help="py-spy the start-up, to all verdicts"
    )
    parser.add_argument(
        "--gate-writes",
        type=int,
        metavar="N",
        help="only the gate writes: N pods' gates opened while a watch follows them",
    )
    parser.add_argument("--gate-writes-child", nargs=2, metavar=("API_URL", "PODS"))
    parser.add_argument(
        "--kube-transport",
        choices=("lean", "httpx"),
        default="lean",
        help="--gate-writes: the controller's client (lean) or one on httpx's transport",
    )
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child[0], int(args.child[1]))
    if args.gate_writes_child:
        api_url, pods = args.gate_writes_child
        return gate_writes_child(api_url, int(pods), args.kube_transport)
    if args.gate_writes:
        result = gate_writes(args)
        path = save(args.name, result)
        print(
            f"gate writes, {result['gates']} gates (each with its watch event): "
            f"{result['cpu_us_per_gate']:.0f} us of CPU each, "
            f"{result['wall_us_per_gate']:.0f} us of wall time ({result['environment']}, "
            f"{result['kube_transport']} transport)"
        )
        log(f"raw figures: {path}")
        return 0
    result = bench(args)
    path = save(args.name, result)
    print(describe(result))
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
