"""``artifactcheck demo``: the product working on a simulated fleet, in one command.

It plants the outage that motivates artifactcheck (an instance that reports the
current version but serves the previous release's bytes under the current names) and
a CDN missing one asset, runs the same ``verify`` pipeline a CI job would, prints the
report, and explains it. It returns 0 when the check found exactly what was planted,
so the demo doubles as a smoke test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel

from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import FindingKind, Report, Verdict
from artifactcheck.pipeline import run_check
from artifactcheck.present.report import EXIT_MEANING, render_table
from artifactcheck_sim.fleet import SimFleet

if TYPE_CHECKING:  # the cluster is started lazily: act one does without it
    from artifactcheck_sim.cluster import SimCluster, SimPod


def run_demo(
    *,
    instances: int = 6,
    keep: bool = False,
    console: Console | None = None,
    kubernetes: bool = True,
    wait: Callable[[], Any] | None = None,
) -> int:
    """Run the demo; 0 when the planted drift and CDN gap were both found.

    With ``keep``, everything stays up until ``wait`` returns (by default: until
    Ctrl-C), and act two prints a kubeconfig for the simulated cluster.
    """
    wait = wait or _wait_forever
    console = console or Console()
    instances = max(3, instances)
    with SimFleet(instances=instances, version="1.4.2") as fleet:
        planted = _plant(fleet, instances)
        console.print(
            Panel.fit(
                f"Simulated fleet: {instances} instances of release 1.4.2 (a real Vite build) on "
                f"{fleet.instances[0].host} ... {fleet.instances[-1].host}, "
                f"CDN on {fleet.cdn_host}.\n"
                f"Planted: [bold]{planted.drifted}[/] reports 1.4.2 but serves 1.4.1's bytes for "
                f"{len(planted.swapped)} file(s) under 1.4.2's names; the CDN answers 403 for "
                f"{planted.missing_path}.",
                title="artifactcheck demo",
            )
        )
        spec = load_spec(fleet.spec(), origin="demo")
        started = time.perf_counter()
        report = asyncio.run(run_check(spec))
        elapsed = time.perf_counter() - started
        render_table(report, console)
        ok = _explain(console, report, planted, elapsed)
        if keep:
            console.print("fleet kept running; targets:")
            for t in fleet.targets():
                console.print(f"  --target {t['url']}={t['version']}")
            console.print(f"  --cdn {fleet.cdn_url} --release-manifest '{fleet.release_template}'")
            if not kubernetes:
                wait()
            else:  # act two inside, so the fleet stays up while the cluster is looked at
                ok = (
                    run_kubernetes_act(console=console, pods=instances, keep=True, wait=wait) and ok
                )
    if kubernetes and not keep:
        ok = run_kubernetes_act(console=console, pods=instances) and ok
    if not ok:
        console.print("[red]demo: the planted faults were not all found[/]")
    return 0 if ok else 1


@dataclass(frozen=True, slots=True)
class _Planted:
    drifted: str  # the instance serving 1.4.1's bytes under 1.4.2's names
    swapped: frozenset[str]  # the files it serves so
    missing_path: str  # the file the CDN answers 403 for


def _plant(fleet: SimFleet, instances: int) -> _Planted:
    """The outage: one instance's files swapped for the previous release's; a CDN gap."""
    drifted = fleet.instances[instances // 2]
    swapped = fleet.drift(instances // 2, serves="1.4.1")
    missing = next(p for p in sorted(fleet.releases["1.4.2"].rglob("*.svg")))
    missing_path = missing.relative_to(fleet.releases["1.4.2"]).as_posix()
    fleet.cdn_missing(missing_path, status=403)
    return _Planted(drifted.name, frozenset(swapped), missing_path)


def _explain(console: Console, report: Report, planted: _Planted, elapsed: float) -> bool:
    """Say what the check found; whether it found exactly what was planted."""
    found = {r.instance.name: r for r in report.results}
    hit = found[planted.drifted]
    # found = a mismatch whose content findings name exactly the swapped files (the
    # rest is 1.4.2's, so the instance serves a mix, which the reason names as such)
    flagged = {f.path for f in hit.findings if f.kind is FindingKind.CONTENT_DIFFERS}
    drift_found = hit.verdict is Verdict.MISMATCH and flagged == set(planted.swapped)
    others = [r for r in report.results if r.instance.name != planted.drifted]
    cdn_found = all(
        any(f.path == planted.missing_path and f.kind.value == "cdn-missing" for f in r.findings)
        for r in others
    )
    console.print(
        Panel.fit(
            "\n".join(
                [
                    f"[bold]What happened[/] (checked in {elapsed:.2f}s, exit code "
                    f"{report.exit_code}):",
                    f"- {planted.drifted}: {hit.reason}. Its version signals say 1.4.2; the "
                    "files it changed hold 1.4.1's bytes under 1.4.2's names. This is the "
                    "silent rebuild that dashboards miss: "
                    "in a cluster the controller would quarantine it (readiness gate "
                    "False) after two confirmations.",
                    f"- {sum(r.verdict is Verdict.CDN_MISSING for r in others)} other "
                    f"instance(s): cdn-missing: they serve {planted.missing_path}, but browsers "
                    "loading it from the CDN get 403 (the symptom of the 2021 outage).",
                    f"- the report counted {counted(report)}.",
                    f"- exit code {report.exit_code}: {EXIT_MEANING[report.exit_code]}. "
                    "(The exit code is one for the whole run: "
                    + "; ".join(f"{code} = {what}" for code, what in sorted(EXIT_MEANING.items()))
                    + ".)",
                ]
            ),
            title="explanation",
        )
    )
    return drift_found and cdn_found


def counted(report: Report) -> str:
    """The report's own count of instances per verdict: "6 instance(s): 1 mismatch, ..."."""
    counts = ", ".join(f"{n} {verdict}" for verdict, n in report.counts().items() if n)
    return f"{len(report.results)} instance(s): {counts or 'none'}"


def run_kubernetes_act(
    *,
    console: Console,
    pods: int = 6,
    keep: bool = False,
    wait: Callable[[], Any] | None = None,
) -> bool:
    """Act two: the controller against a simulated cluster quarantines the drifted pod.

    With ``keep``, the cluster (API server, pods, kubelet) and the controller stay up
    until ``wait`` returns, and a kubeconfig is written and printed: the simulated
    cluster is a real HTTP API server, so ``kubectl`` can look at the pods, the
    quarantine condition, the events and the ArtifactCheck's printer columns.
    """
    from artifactcheck_sim.cluster import SimCluster
    from artifactcheck_sim.running import RunningController

    wait = wait or _wait_forever
    console.rule("act two: the in-cluster controller")
    with SimCluster(first_host="127.77.2.1", cdn_host="127.77.3.1") as cluster:
        made = [cluster.add_pod(node=f"node-{'abc'[i % 3]}") for i in range(pods - 1)]
        bad = cluster.add_pod(serves="1.4.1", node="node-b")
        admin = _add_check(cluster)
        console.print(
            f"fake API server {cluster.api.url}, namespace {cluster.namespace}: {pods} pods "
            f"with the readiness gate artifactcheck.io/content-verified; {bad.name} on "
            f"{bad.node} serves 1.4.1's bytes while labelled 1.4.2. Controller started..."
        )
        started = time.perf_counter()
        with RunningController(cluster, identity="demo-controller", admin_config=admin):
            if keep:
                # Printed up front, so a user can watch the quarantine happen.
                _print_kubeconfig(console, cluster.api, cluster.namespace, bad.name)
            if not _quarantined(cluster, made, bad):
                console.print("[red]the controller did not act in time[/]")
                return False
            if keep:
                console.print(
                    "the controller quarantined the pod; cluster and controller kept running"
                    " (Ctrl-C to stop)"
                )
                wait()
        console.print(f"after {time.perf_counter() - started:.1f}s:")
        return _print_outcome(console, cluster, made, bad)


def _add_check(cluster: SimCluster) -> str:
    """The ArtifactCheck of the demo, and the admin configuration allowing it (its path).

    A namespaced check may only fetch over HTTP(S), from hosts the cluster admin
    allows (artifactcheck.tenancy.admission): the release manifests are served as a CI
    would publish them, and the controller's admin configuration allows them.
    """
    import tempfile
    from pathlib import Path

    import yaml

    from artifactcheck_sim.web import Site

    releases = cluster.web.add(Site(root=Path(cluster.release_template).parent), "127.77.4.1")
    cluster.add_check(
        interval=1.0,
        cdn=None,
        release={"manifests": [releases + "{version}.json"]},
        policy={"mode": "quarantine", "confirmations": 2, "maxQuarantineFraction": 0.25},
    )
    admin = Path(tempfile.mkdtemp(prefix="artifactcheck-demo-admin-")) / "admin.yaml"
    admin.write_text(
        yaml.safe_dump(
            {
                "egress": {"allow": [releases], "allow_loopback": True},
                "limits": {"min_interval": 0.5},
            }
        ),
        encoding="utf-8",
    )
    return str(admin)


def _quarantined(cluster: SimCluster, made: list[SimPod], bad: SimPod) -> bool:
    """Wait for the bad pod's gate to close, the others' to open, and the status."""
    from artifactcheck_sim.cluster import wait_for

    try:
        wait_for(lambda: (cluster.condition(bad.name) or {}).get("status") == "False", timeout=30)
        wait_for(
            lambda: all((cluster.condition(p.name) or {}).get("status") == "True" for p in made),
            timeout=30,
        )
        # the status written after the quarantine, not the cycle before it
        wait_for(lambda: cluster.check_status().get("quarantined") == 1, timeout=10)
    except TimeoutError:
        return False
    return True


def _print_outcome(console: Console, cluster: SimCluster, made: list[SimPod], bad: SimPod) -> bool:
    """Each pod's gate, the quarantine's condition and Event, the check's status; whether
    the bad pod is out of traffic with exactly one Warning Event."""
    import json

    cond = cluster.condition(bad.name) or {}
    events = [e for e in cluster.events(bad.name) if e.get("type") == "Warning"]
    status = cluster.check_status()
    for p in [*made, bad]:
        c = cluster.condition(p.name) or {}
        ready = (cluster.condition(p.name, "Ready") or {}).get("status")
        console.print(f"  {p.name} on {p.node}: content-verified={c.get('status')} Ready={ready}")
    console.print(
        f"  {bad.name} condition: reason={cond.get('reason')} "
        f"message={cond.get('message', '')[:160]!r}"
    )
    for e in events:
        console.print(f"  Event {e.get('type')} {e.get('reason')}: {e.get('message', '')[:120]}")
    console.print("ArtifactCheck shop/web status:")
    console.print_json(json.dumps({k: status[k] for k in sorted(status) if k != "findings"}))
    return cond.get("status") == "False" and len(events) == 1


def _print_kubeconfig(console: Console, api: Any, namespace: str, pod: str) -> str:
    """Write a kubeconfig for the simulated cluster where it outlives the demo; print it."""
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="artifactcheck-demo-"))
    path = str(api.write_kubeconfig(str(folder / "kubeconfig")))
    console.print(
        Panel.fit(
            "\n".join(
                [
                    f"kubeconfig: [bold]{path}[/]",
                    f"  export KUBECONFIG={path}",
                    f"  kubectl get pods -n {namespace} -o wide",
                    "  kubectl get ac -A",
                    f"  kubectl describe ac web -n {namespace}",
                    f"  kubectl get pod {pod} -n {namespace} -o jsonpath='{{.status.conditions}}'",
                    f"  kubectl get events -n {namespace}",
                ]
            ),
            title="look at the simulated cluster with kubectl",
        )
    )
    return path


def _wait_forever() -> Any:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return None
