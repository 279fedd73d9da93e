"""Soak: the controller for a long run under churn, sampled for leaks.

The set-up of benchmark 3 (``bench.controller``): the fake API server
(``artifactcheck_sim.apiserver.FakeApiServer``) in this process, an nginx fleet on
loopback (``bench.fleet_server``), the controller in a child process talking to the
API server over HTTP. Then, for ``--minutes``:

- churn: every ``--churn-every`` seconds ``--churn`` clean pods are deleted and as many
  created (on the addresses freed), as pods die and are replaced;
- ``--releases`` release changes, evenly spaced over the churn: each is a rollout to a
  new ReplicaSet (a new pod-template hash; the fleet serves one build, so the version
  and the bytes stay) that drains the old ones completely within ``--rollout-minutes``,
  as a Deployment does (every churn tick replaces a share of the old ReplicaSets' pods,
  drifted ones too, each on its own address), and the ArtifactCheck's spec changes
  (its ``interval``), which makes the controller rebuild the check. Several of them
  tell a plateau (each rebuild costs the same, then nothing) from growth (each leaves
  something behind);
- faults: every ``--faults-every`` seconds the API server throttles (429 +
  Retry-After), fails (500), answers slowly, cuts watches and answers resumed watches
  with 410 Gone, for ``--faults-for`` seconds (``apiserver_faults.Faults``).

Sampled every ``--sample-every`` seconds, from outside the child: its RSS (VmRSS), its
threads (``/proc/PID/task``), open file descriptors (``/proc/PID/fd``) and TCP
connections (socket fds found in ``/proc/PID/net/tcp``); from inside it (a file the
child rewrites): its asyncio tasks and Python threads; from the API server: writes
(create/update/patch/delete) and cycles (the controller's metrics).

Verdicts at the end, after the faults and churn stop: every drifted pod is quarantined
(gate ``False``) and no clean pod is.

    python -m bench.soak [--pods 1000] [--minutes 60] [--name soak-1h] [--out FILE]

``python -m bench.soak --summarize FILE`` recomputes the summary of a saved run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .common import ROOT, fleet_server, log, machine, peak_rss_mb, save, tool_env
from .controller import (
    NAMESPACE,
    WRITE_VERBS,
    add_pod,
    cycles,
    free_port,
    gate_status,
    wait_until,
)

CHECK = "web"
OLD_RS = "web-7f9c"
#: The ReplicaSets of the rollouts, in turn (their pod-template hashes).
NEW_RS = ("web-5d2a", "web-3b8e", "web-9c41", "web-6f07", "web-2a9d", "web-8e53")


# -- what is sampled -------------------------------------------------------------------


def _tcp_inodes() -> dict[str, tuple[str, str]]:
    """Socket inode -> (TCP state (hex, ``01`` established), remote ``IP:port`` in the
    table's hex), from this network namespace."""
    out: dict[str, tuple[str, str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9:
                out[cols[9]] = (cols[3], cols[2])
    return out


def _peer(remote: str, api_port: int | None) -> str:
    """Which peer a socket talks to: ``fleet`` (the pods' 127.212.x.y), ``api`` (the API
    server's port), ``listen`` (no peer), else ``other:PORT``."""
    addr, _, port_hex = remote.partition(":")
    port = int(port_hex, 16)
    if port == 0:
        return "listen"
    if api_port is not None and port == api_port:
        return "api"
    if len(addr) == 8:  # IPv4, little-endian hex
        octets = bytes.fromhex(addr)[::-1]
        if octets[:2] == bytes([127, 212]):
            return "fleet"
    return f"other:{port}"


def proc_sample(pid: int, api_port: int | None = None) -> dict[str, Any]:
    """RSS, threads, fds, TCP connections (all, established, and by peer: the fleet,
    the API server, other) of a live process."""
    rss_kb = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
    threads = len(os.listdir(f"/proc/{pid}/task"))
    sockets: list[str] = []
    fds = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        fds += 1
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.append(target[8:-1])
    tcp = _tcp_inodes()
    mine = [tcp[s] for s in sockets if s in tcp]
    by_peer: dict[str, int] = {}
    for _state, remote in mine:
        peer = _peer(remote, api_port)
        by_peer[peer] = by_peer.get(peer, 0) + 1
    return {
        "rss_mb": rss_kb / 1024,
        "threads": threads,
        "fds": fds,
        "sockets": len(sockets),
        "tcp": len(mine),
        "tcp_established": sum(1 for state, _ in mine if state == "01"),
        "tcp_by_peer": by_peer,
    }


def inner_sample(path: Path) -> dict[str, Any]:
    """What the child last wrote about itself (asyncio tasks, Python threads)."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


# -- the child -------------------------------------------------------------------------


def child(api_url: str, health_port: int, stats: str) -> int:
    """The controller process (as ``bench.controller``'s), plus a task that rewrites
    ``stats`` with its own count of asyncio tasks and threads (the controller's
    metrics have no gauge for them)."""
    from kubernetes import client as k8s

    from artifactcheck.clients.libc import limit_malloc_arenas
    from artifactcheck.control.controller import Controller, ControllerSettings

    limit_malloc_arenas()  # as `artifactcheck controller` does, before any thread
    api_client = k8s.ApiClient(k8s.Configuration(host=api_url))
    ctl = Controller(
        api_client=api_client,
        settings=ControllerSettings(
            namespace=NAMESPACE,
            identity="soak",
            lease_namespace="artifactcheck-system",
            admin_config=os.environ.get("ACBENCH_ADMIN_CONFIG"),
        ),
    )
    health = ctl.serve_health(host="127.0.0.1", port=health_port)

    census_every = float(os.environ.get("ACSOAK_CENSUS_EVERY") or 0)
    next_census = time.monotonic() + census_every

    async def report(stop: asyncio.Event) -> None:
        nonlocal next_census
        tmp = stats + ".tmp"
        while not stop.is_set():
            doc = {
                "at": time.time(),
                "asyncio_tasks": len(asyncio.all_tasks()) - 1,  # not this one
                "python_threads": threading.active_count(),
            }
            if census_every and time.monotonic() >= next_census:
                next_census += census_every
                with open(stats + ".census", "a", encoding="utf-8") as out:
                    out.write(json.dumps(census()) + "\n")
            Path(tmp).write_text(json.dumps(doc), encoding="utf-8")
            os.replace(tmp, stats)
            try:
                await asyncio.wait_for(stop.wait(), timeout=2.0)
            except TimeoutError:
                pass

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        reporter = asyncio.create_task(report(stop))
        await ctl.run(stop)
        await reporter

    try:
        asyncio.run(main())
    finally:
        health.stop()
        api_client.close()  # type: ignore[no-untyped-call]
    return 0


def census(top: int = 40) -> dict[str, Any]:
    """Live objects by type (gc), the most numerous ``top``, and the controller's own
    classes (``artifactcheck.*``) all: what a leak is made of (``--census``)."""
    import gc

    counts: dict[str, int] = {}
    for obj in gc.get_objects():
        t = type(obj)
        name = f"{t.__module__}.{t.__qualname__}"
        counts[name] = counts.get(name, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    ours = {k: v for k, v in counts.items() if k.startswith("artifactcheck.")}
    return {
        "at": time.time(),
        "objects": sum(counts.values()),
        "top": dict(ranked[:top]),
        "artifactcheck": ours,
    }


# -- the cluster's side ----------------------------------------------------------------


def fault_plan(seed: int) -> Any:
    """The faults of one window: every kind, at rates a client must survive."""
    from artifactcheck_sim.apiserver_faults import FaultRule, Faults

    return Faults(
        [
            FaultRule("throttle", 0.05, retry_after=1),
            FaultRule("error", 0.05),
            FaultRule("slow", 0.05, delay=1.0),
            FaultRule("cut", 0.3, delay=10.0),
            FaultRule("gone", 0.3),
        ],
        seed=seed,
    )


def pod_owner(api: Any, name: str) -> str:
    pod = api.get("v1", "Pod", NAMESPACE, name) or {}
    refs = (pod.get("metadata") or {}).get("ownerReferences") or [{}]
    return str(refs[0].get("name", ""))


class _InReplicaSet:
    """The API server as :func:`bench.controller.add_pod` sees it, with the pods it
    creates put in another ReplicaSet (a rollout's new pod-template hash)."""

    def __init__(self, api: Any, replicaset: str, uid: str) -> None:
        self.api, self.replicaset, self.uid = api, replicaset, uid
        self.names: dict[str, str] = {}

    def create(self, obj: dict[str, Any]) -> Any:
        meta = obj["metadata"]
        new = self.replicaset + meta["name"].removeprefix(OLD_RS)
        self.names[meta["name"]] = new
        meta["name"] = new
        meta["labels"]["pod-template-hash"] = self.replicaset.rsplit("-", 1)[1]
        meta["ownerReferences"][0].update(name=self.replicaset, uid=self.uid)
        return self.api.create(obj)

    def patch_status(
        self, api_version: str, kind: str, ns: str, name: str, *a: Any, **kw: Any
    ) -> Any:
        return self.api.patch_status(api_version, kind, ns, self.names[name], *a, **kw)


def add_rs_pod(api: Any, host: str, index: int, replicaset: str) -> str:
    """:func:`bench.controller.add_pod`, the pod in ``replicaset``."""
    if replicaset == OLD_RS:
        return add_pod(api, host, index)
    view = _InReplicaSet(api, replicaset, str(uuid.uuid5(uuid.NAMESPACE_DNS, replicaset)))
    return view.names[add_pod(view, host, index)]


def admin_config(release_dir: str) -> Path:
    admin = Path(tempfile.mkdtemp(prefix="acsoak-admin-")) / "admin.yaml"
    admin.write_text(
        json.dumps(  # JSON is YAML: the lab's grants, as a cluster admin writes them
            {
                "egress": {"allow_loopback": True},
                "release_directories": [{"directory": release_dir, "namespaces": [NAMESPACE]}],
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
    return admin


def check_object(info: dict[str, Any], interval: float, sample: int) -> dict[str, Any]:
    return {
        "apiVersion": "artifactcheck.io/v1alpha1",
        "kind": "ArtifactCheck",
        "metadata": {"name": CHECK, "namespace": NAMESPACE},
        "spec": {
            "kubernetes": {"namespace": NAMESPACE, "selector": "app=web", "port": info["port"]},
            "release": {"manifests": [info["release_template"]]},
            "manifestPath": "artifactcheck.json",
            "manifestFormat": "native",
            "interval": interval,
            "sampling": {"instances": sample, "assetsPerInstance": 5, "seed": 1},
            "policy": {"mode": "quarantine"},
        },
    }


def verdicts(api: Any, pods: dict[str, str], drifted: set[str]) -> dict[str, Any]:
    """Gate conditions of every pod now: drifted pods must be ``False``, no clean one."""
    out: dict[str, Any] = {
        "drifted": 0,
        "drifted_quarantined": 0,
        "clean": 0,
        "clean_quarantined": 0,
        "clean_open": 0,
        "clean_without_verdict": 0,
    }
    for name, host in pods.items():
        status = gate_status(api, name)
        if host in drifted:
            out["drifted"] += 1
            out["drifted_quarantined"] += status == "False"
        else:
            out["clean"] += 1
            out["clean_quarantined"] += status == "False"
            out["clean_open"] += status == "True"
            out["clean_without_verdict"] += status is None
    out["right"] = (
        out["drifted_quarantined"] == out["drifted"] > 0 and out["clean_quarantined"] == 0
    )
    return out


# -- the run ---------------------------------------------------------------------------


class Soak:
    """One soak run: the cluster, the child, the schedule, the samples."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.samples: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.writes_total = 0
        self.verbs_total: dict[str, int] = {}
        self.rng = random.Random(args.seed)
        self.released = 0  # release changes so far
        self.rollout_batch = 0  # old pods replaced per churn tick in the rollout

    def note(self, t0: float, what: str, **extra: Any) -> None:
        self.events.append({"t": round(time.monotonic() - t0, 1), "event": what, **extra})
        log(f"  soak t={time.monotonic() - t0:6.0f}s {what} {extra or ''}")

    def take_sample(
        self, t0: float, api: Any, pid: int, metrics_url: str, stats: Path, phase: str
    ) -> None:
        verbs = dict(api.verb_counts)
        api.reset_requests()  # the request log grows with every request otherwise
        for k, v in verbs.items():
            self.verbs_total[k] = self.verbs_total.get(k, 0) + v
        writes = sum(verbs.get(v, 0) for v in WRITE_VERBS)
        self.writes_total += writes
        try:
            n_cycles = cycles(metrics_url)
        except OSError:
            n_cycles = -1
        sample = {
            "t": round(time.monotonic() - t0, 1),
            "phase": phase,
            **proc_sample(pid, urlsplit(api.url).port),
            **inner_sample(stats),
            "cycles": n_cycles,
            "writes": writes,
            "writes_total": self.writes_total,
            "verbs": verbs,
            "loadavg": os.getloadavg()[0],
        }
        sample.pop("at", None)
        self.samples.append(sample)

    def run(self) -> dict[str, Any]:
        from artifactcheck_sim.apiserver import FakeApiServer

        args = self.args
        result: dict[str, Any] = {
            "benchmark": "soak",
            "machine": machine(),
            "args": {k: v for k, v in vars(args).items() if k != "child"},
        }
        spare = args.churn
        server_args = [
            "--instances",
            str(args.pods + spare),
            "--drift",
            str(args.drift),
            "--assets",
            str(args.assets),
            "--first-host",
            "127.212.0.1",
        ]
        with fleet_server(server_args) as fleet:
            info = fleet.info
            hosts: list[str] = info["hosts"]
            drifted = set(info["drifted"])
            api = FakeApiServer(namespaces=("default", NAMESPACE, "artifactcheck-system"))
            api.start()
            proc: subprocess.Popen[bytes] | None = None
            stats = Path(tempfile.mkdtemp(prefix="acsoak-")) / "stats.json"
            try:
                pods: dict[str, str] = {}  # name -> host
                for i in range(args.pods):
                    pods[add_pod(api, hosts[i], i)] = hosts[i]
                free = hosts[args.pods :]
                next_index = args.pods
                api.create(check_object(info, args.interval, args.sample_instances))
                port = free_port()
                metrics_url = f"http://127.0.0.1:{port}/metrics"
                env = tool_env()
                if args.census:
                    env["ACSOAK_CENSUS_EVERY"] = str(args.census)
                env["ACBENCH_ADMIN_CONFIG"] = str(
                    admin_config(str(Path(info["release_template"]).parent))
                )
                api.reset_requests()
                log(f"soak: {args.pods} pods ({len(drifted)} drifted); starting the controller")
                proc = subprocess.Popen(  # noqa: S603
                    [
                        sys.executable,
                        "-m",
                        "bench.soak",
                        "--child",
                        api.url,
                        str(port),
                        str(stats),
                    ],
                    cwd=ROOT,
                    env=env,
                    start_new_session=True,
                )

                def first_cycle() -> bool:
                    try:
                        return cycles(metrics_url) >= 1
                    except OSError:
                        return False

                t_start = time.monotonic()
                wait_until(first_cycle, timeout=args.timeout, interval=1.0)
                result["first_cycle_seconds"] = time.monotonic() - t_start
                t0 = time.monotonic()
                end = t0 + args.minutes * 60
                churn_end = end - args.settle * 60
                warm = t0 + args.warmup * 60
                releases = [
                    t0 + (churn_end - t0) * k / (args.releases + 1)
                    for k in range(1, args.releases + 1)
                ]
                next_sample = t0
                next_churn = t0 + args.churn_every
                next_faults = t0 + args.faults_every / 2
                faults_off_at: float | None = None
                replicaset = OLD_RS
                windows = 0
                while True:
                    now = time.monotonic()
                    if now >= end:
                        break
                    if proc.poll() is not None:
                        raise RuntimeError(f"controller exited with {proc.returncode}")
                    phase = "warm-up" if now < warm else "soak"
                    if now >= next_sample:
                        self.take_sample(t0, api, proc.pid, metrics_url, stats, phase)
                        next_sample += args.sample_every
                    if faults_off_at is not None and now >= faults_off_at:
                        api.faults = None
                        faults_off_at = None
                        self.note(t0, "faults off")
                    if now >= next_faults and now < churn_end:
                        windows += 1
                        api.faults = fault_plan(args.seed + windows)
                        faults_off_at = now + args.faults_for
                        next_faults += args.faults_every
                        self.note(t0, "faults on", window=windows)
                    if releases and now >= releases[0]:
                        releases.pop(0)
                        replicaset = NEW_RS[self.released % len(NEW_RS)]
                        self.released += 1
                        self.change_release(api)
                        old = sum(1 for n in pods if not n.startswith(replicaset + "-"))
                        ticks = max(1.0, args.rollout_minutes * 60 / args.churn_every)
                        self.rollout_batch = -(-old // int(ticks))  # ceil
                        self.note(t0, "release change", replicaset=replicaset, old_pods=old)
                    if now >= next_churn and now < churn_end:
                        next_churn += args.churn_every
                        next_index = self.churn(api, pods, free, drifted, next_index, replicaset)
                    time.sleep(0.2)
                api.faults = None
                self.take_sample(t0, api, proc.pid, metrics_url, stats, "end")
                # verdicts: give the controller cycles to see the last pods (sampled)
                deadline = time.monotonic() + args.verdict_timeout
                final = verdicts(api, pods, drifted)
                while not final["right"] and time.monotonic() < deadline:
                    time.sleep(5)
                    final = verdicts(api, pods, drifted)
                final["seconds_after_end"] = round(time.monotonic() - end, 1)
                result["verdicts"] = final
                result["owners_at_end"] = _count(pod_owner(api, n) for n in pods)
                result["faults_windows"] = windows
            finally:
                if proc is not None:
                    result["controller"] = _stop(proc)
                api.stop()
        census_file = Path(str(stats) + ".census")
        if census_file.exists():
            result["census"] = [
                json.loads(line) for line in census_file.read_text().splitlines() if line
            ]
        result["samples"] = self.samples
        result["events"] = self.events
        result["verbs_total"] = self.verbs_total
        result["summary"] = summarize(self.samples, args)
        return result

    def change_release(self, api: Any) -> None:
        """The check's spec changes with the rollout (its interval, 1.25x and back in
        turn): the controller rebuilds the check."""
        obj = api.get("artifactcheck.io/v1alpha1", "ArtifactCheck", NAMESPACE, CHECK)
        obj["spec"]["interval"] = self.args.interval * (1.25 if self.released % 2 else 1.0)
        api.update(obj)

    def churn(
        self,
        api: Any,
        pods: dict[str, str],
        free: list[str],
        drifted: set[str],
        next_index: int,
        replicaset: str,
    ) -> int:
        """One churn tick: the rollout's share of the old ReplicaSets' pods replaced by
        pods of ``replicaset``, each on its address (drifted ones too: the address
        drifts, so its new pod must be quarantined again); then ``--churn`` clean pods
        deleted and as many created on the addresses freed."""
        old = [n for n in pods if not n.startswith(replicaset + "-")]
        for name in self.rng.sample(old, min(self.rollout_batch, len(old))):
            api.delete("v1", "Pod", NAMESPACE, name)
            host = pods.pop(name)
            pods[add_rs_pod(api, host, next_index, replicaset)] = host
            next_index += 1
        clean = [n for n, h in pods.items() if h not in drifted]
        for name in self.rng.sample(clean, min(self.args.churn, len(clean))):
            api.delete("v1", "Pod", NAMESPACE, name)
            free.append(pods.pop(name))
        for _ in range(self.args.churn):
            host = free.pop(0)
            pods[add_rs_pod(api, host, next_index, replicaset)] = host
            next_index += 1
        return next_index


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _stop(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    """SIGTERM the controller we started; its exit code, peak RSS and CPU."""
    if proc.poll() is not None:
        return {"exit": proc.returncode}
    hwm = peak_rss_mb(proc.pid)
    proc.send_signal(signal.SIGTERM)
    timer = threading.Timer(60, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    _pid, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "peak_rss_mb": hwm,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
    }


# -- the verdict on the run ------------------------------------------------------------


def _series(samples: Sequence[dict[str, Any]], key: str) -> list[float]:
    return [float(s[key]) for s in samples if key in s]


def _max_of(samples: Sequence[dict[str, Any]], key: str) -> float:
    values = _series(samples, key)
    return max(values) if values else float("nan")


def _median_of(samples: Sequence[dict[str, Any]], key: str) -> float:
    values = _series(samples, key)
    return statistics.median(values) if values else float("nan")


def summarize(samples: Sequence[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """RSS after warm-up vs at the end; the most threads/fds/connections/tasks in the
    first and the second half after warm-up (flat: the second no higher than the first
    plus a margin for in-flight work), and the median (a leak raises it);
    writes per cycle in each half (bounded: the same churn, so the same rate)."""
    soak = [s for s in samples if s["phase"] != "warm-up"]
    if len(soak) < 4:
        return {"error": "too few samples after warm-up"}
    half = len(soak) // 2
    first, second = soak[:half], soak[half:]
    # RSS: the median of the first and of the last few samples, not single readings
    k = max(1, min(6, len(soak) // 6))
    rss_warm = sorted(_series(soak[:k], "rss_mb"))[k // 2]
    rss_end = sorted(_series(soak[-k:], "rss_mb"))[k // 2]
    out: dict[str, Any] = {
        "rss_after_warmup_mb": rss_warm,
        "rss_end_mb": rss_end,
        "rss_ratio": rss_end / rss_warm,
        "rss_max_mb": _max_of(soak, "rss_mb"),
    }
    for key in ("threads", "fds", "tcp", "tcp_established", "asyncio_tasks", "python_threads"):
        out[key] = {
            "first_half_max": _max_of(first, key),
            "second_half_max": _max_of(second, key),
            # the level between bursts of work (a median: pools also empty at times)
            "first_half_median": _median_of(first, key),
            "second_half_median": _median_of(second, key),
            "end": float(soak[-1].get(key, float("nan"))),
        }

    def per_cycle(part: Sequence[dict[str, Any]]) -> float:
        cyc = part[-1]["cycles"] - part[0]["cycles"]
        writes = sum(s["writes"] for s in part[1:])
        return writes / cyc if cyc > 0 else float("nan")

    out["writes_per_cycle"] = {"first_half": per_cycle(first), "second_half": per_cycle(second)}
    out["writes_per_minute_max"] = max(s["writes"] * 60 / args.sample_every for s in soak[1:])
    out["cycles"] = soak[-1]["cycles"] - soak[0]["cycles"]
    return out


def describe(r: dict[str, Any]) -> str:
    s = r["summary"]
    v = r.get("verdicts", {})
    a = r["args"]
    flat = ", ".join(
        f"{k} {s[k]['first_half_median']:g}->{s[k]['second_half_median']:g} "
        f"(max {s[k]['first_half_max']:g}->{s[k]['second_half_max']:g})"
        for k in ("threads", "fds", "tcp", "asyncio_tasks")
    )
    w = s["writes_per_cycle"]
    return (
        f"soak, {a['pods']} pods, {a['minutes']} min: RSS {s['rss_after_warmup_mb']:.0f} MB "
        f"after warm-up -> {s['rss_end_mb']:.0f} MB at the end (x{s['rss_ratio']:.3f}); "
        f"level per half {flat}; writes per cycle {w['first_half']:.1f} -> "
        f"{w['second_half']:.1f} over {s['cycles']} cycles; verdicts "
        f"{'right' if v.get('right') else 'WRONG'} ({v.get('drifted_quarantined')}/"
        f"{v.get('drifted')} drifted quarantined, {v.get('clean_quarantined')} clean)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the controller for a long run under churn")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0, help="minutes before RSS counts")
    parser.add_argument("--settle", type=float, default=2.0, help="last minutes without churn")
    parser.add_argument("--interval", type=float, default=20.0, help="ArtifactCheck interval")
    parser.add_argument("--sample-instances", type=int, default=250)
    parser.add_argument("--assets", type=int, default=100, help="generated assets per site")
    parser.add_argument("--drift", type=float, default=0.01)
    parser.add_argument("--churn", type=int, default=10, help="pods replaced per churn")
    parser.add_argument("--churn-every", type=float, default=30.0)
    parser.add_argument("--releases", type=int, default=3, help="release changes (rollouts)")
    parser.add_argument(
        "--rollout-minutes", type=float, default=5.0, help="to drain the old ReplicaSets"
    )
    parser.add_argument("--faults-every", type=float, default=300.0)
    parser.add_argument("--faults-for", type=float, default=60.0)
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument("--verdict-timeout", type=float, default=180.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="to the first cycle")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--census",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="every SECONDS, the child's live objects by type (gc), into the JSON",
    )
    parser.add_argument("--name", default="soak")
    parser.add_argument("--out", type=Path, help="write the JSON here, not bench/results/NAME")
    parser.add_argument("--child", nargs=3, metavar=("API_URL", "HEALTH_PORT", "STATS"))
    parser.add_argument("--summarize", type=Path, metavar="FILE", help="of a saved run")
    args = parser.parse_args(argv)
    if args.summarize is not None:
        saved = json.loads(args.summarize.read_text(encoding="utf-8"))
        saved["summary"] = summarize(saved["samples"], argparse.Namespace(**saved["args"]))
        args.summarize.write_text(json.dumps(saved, indent=2, default=str) + "\n")
        print(describe(saved))
        return 0
    if args.child:
        return child(args.child[0], int(args.child[1]), args.child[2])
    result = Soak(args).run()
    if args.out is not None:
        path = args.out
        path.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    else:
        path = save(args.name, result)
    print(describe(result))
    log(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
