"""The ConfigMap release source against the fake API server, from the CLI and watched.

Release manifests live in ConfigMaps of the check's namespace, one per release
(``artifactcheck.io/version`` label, ``manifest.json`` key). What must hold: ``verify``
judges pods against them; an edited ConfigMap is seen through the watch (no relist)
and its new manifest used; only the check's own namespace is ever asked; a manifest
declaring another version than its label, or one without hashes, is refused; and an
API server that cannot be asked makes the verdict ``inconclusive``, never ``mismatch``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.discover.kube_pods import discover_pods
from artifactcheck.manifests import native
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ConfigError, DependencyError, ExpectationUnavailable
from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import Verdict
from artifactcheck.pipeline import run_check
from artifactcheck.release.configmaps import ConfigMapReleases
from artifactcheck.release.sources import ConfigMapSource, Expectations
from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.fleet import RELEASES

LABEL = "artifactcheck.io/release-manifests"
SELECTOR = f"{LABEL}=true"
_net = itertools.count(1)


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    n = next(_net)
    with SimCluster(first_host=f"127.81.{n}.1", cdn_host=f"127.81.{200 + n}.1") as c:
        yield c


def manifest_json(build: str, *, declares: str) -> str:
    return native.dump(native.build(RELEASES[build], version=declares)).decode()


def release_cm(
    version: str,
    *,
    namespace: str = "shop",
    name: str | None = None,
    build: str | None = None,
    declares: str | None = None,
    binary: bool = False,
    body: str | None = None,
) -> dict[str, Any]:
    text = (
        body if body is not None else manifest_json(build or version, declares=declares or version)
    )
    cm: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name or f"web-release-{version.replace('.', '-')}",
            "namespace": namespace,
            "labels": {LABEL: "true", "artifactcheck.io/version": version},
        },
    }
    if binary:
        cm["binaryData"] = {"manifest.json": base64.b64encode(text.encode()).decode()}
    else:
        cm["data"] = {"manifest.json": text}
    return cm


def kubeconfig(server: FakeApiServer, tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
        f"clusters: [{{name: sim, cluster: {{server: '{server.url}'}}}}]\n"
        "users: [{name: sim, user: {token: sim-token}}]\n"
        "contexts: [{name: sim, context: {cluster: sim, user: sim}}]\n"
    )
    return str(path)


def verify(cluster: SimCluster, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(
        main,
        [
            "verify",
            "--kubeconfig",
            kubeconfig(cluster.api, tmp_path),
            "--namespace",
            "shop",
            "--selector",
            "app=web",
            "--pod-port",
            str(cluster.port),
            "--release-configmaps",
            SELECTOR,
            "--output",
            "json",
            *extra,
        ],
    )
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, doc, result.output


def configmap_requests(server: FakeApiServer) -> list[str]:
    return [p for _, p in server.requests if "configmaps" in p]


def test_verify_from_the_cli_with_release_manifests_in_configmaps(
    cluster: SimCluster, tmp_path: Path
) -> None:
    for _ in range(3):
        cluster.add_pod(gated=False)
    bad = cluster.add_pod(serves="1.4.1", gated=False)
    cluster.kubelet_sync()
    cluster.api.create(release_cm("1.4.2"))
    cluster.api.create(release_cm("1.4.1", binary=True))  # binaryData works the same
    code, doc, output = verify(cluster, tmp_path, "--known-version", "1.4.1")
    assert code == 1, output
    verdicts = {r["instance"]: r for r in doc["results"]}
    assert len(verdicts) == 4
    odd = verdicts.pop(f"shop/{bad.name}")
    assert odd["verdict"] == "mismatch" and "1.4.1" in odd["reason"]
    assert {r["verdict"] for r in verdicts.values()} == {"consistent"}
    # read-only, in the pods' namespace, by label
    asked = configmap_requests(cluster.api)
    assert asked and all(p.startswith("/api/v1/namespaces/shop/configmaps?") for p in asked)
    assert all("labelSelector=" in p for p in asked)
    assert not [m for m, p in cluster.api.requests if "configmaps" in p and m != "GET"]


def test_another_namespaces_configmap_is_never_read(cluster: SimCluster, tmp_path: Path) -> None:
    cluster.add_pod(gated=False)
    cluster.kubelet_sync()
    cluster.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    cluster.api.create(release_cm("1.4.2", namespace="other"))
    code, doc, output = verify(cluster, tmp_path)
    (result,) = doc["results"]
    assert result["verdict"] == "inconclusive", output
    assert "labelled artifactcheck.io/version=1.4.2" in result["reason"]
    assert "(none found)" in result["reason"]
    asked = configmap_requests(cluster.api)
    assert asked and not [p for p in asked if "/namespaces/shop/" not in p], asked
    assert code != 1


def test_a_configmap_declaring_another_version_is_refused(
    cluster: SimCluster, tmp_path: Path
) -> None:
    cluster.add_pod(gated=False)
    cluster.kubelet_sync()
    # labelled 1.4.2, but the manifest in it is 1.4.1's and says so
    cluster.api.create(release_cm("1.4.2", build="1.4.1", declares="1.4.1"))
    code, doc, output = verify(cluster, tmp_path)
    (result,) = doc["results"]
    assert result["verdict"] == "inconclusive", output
    assert "declares version 1.4.1, not 1.4.2" in result["reason"]
    assert "configmap shop/web-release-1-4-2" in result["reason"]


def test_a_hashless_manifest_is_refused_unless_names_only_is_allowed(
    cluster: SimCluster, tmp_path: Path
) -> None:
    cluster.add_pod(gated=False)
    cluster.kubelet_sync()
    vite = (RELEASES["1.4.2"] / ".vite" / "manifest.json").read_text()
    cluster.api.create(release_cm("1.4.2", body=vite))
    code, doc, output = verify(cluster, tmp_path, "--manifest-format", "vite")
    (result,) = doc["results"]
    assert result["verdict"] == "inconclusive", output
    assert "no content hash" in result["reason"]
    code, doc, output = verify(cluster, tmp_path, "--manifest-format", "vite", "--allow-names-only")
    (result,) = doc["results"]
    # accepted, names compared; the bytes are nobody's word, so never consistent (exit 0)
    assert result["verdict"] == "inconclusive" and "file names only" in result["reason"], output
    assert doc["names_only"] is True and code == 3


T = TypeVar("T")


@contextlib.contextmanager
def event_loop() -> Iterator[Callable[[Awaitable[T]], T]]:
    """An event loop on a thread of its own, as the controller's runs: a reader's watch
    task goes on between the test's steps. Yields ``run(coro)``; every task left is
    cancelled and awaited at the end."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=30)  # type: ignore[arg-type]

    async def drain() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    try:
        yield run
    finally:
        run(drain())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


async def closed(reader: ConfigMapReleases) -> None:
    """``reader.close()`` on its loop (it cancels the watch task)."""
    reader.close(timeout=5)


def _reader(server: FakeApiServer, **kw: Any) -> ConfigMapReleases:
    return ConfigMapReleases(
        namespace="shop", selector=SELECTOR, api_client=server.api_client(), **kw
    )


def test_an_updated_configmap_is_seen_through_the_watch(cluster: SimCluster) -> None:
    cluster.api.create(release_cm("1.4.2"))
    reader = _reader(cluster.api, watch_timeout=1)
    expectations = Expectations(ConfigMapSource(reader, limits=ManifestLimits()))
    with event_loop() as run:
        _seen_through_the_watch(cluster, reader, expectations, run)


def _seen_through_the_watch(
    cluster: SimCluster,
    reader: ConfigMapReleases,
    expectations: Expectations,
    run: Callable[[Awaitable[Any]], Any],
) -> None:
    try:
        first = run(expectations.get("1.4.2"))
        assert first.manifest is not None and first.error is None
        assert reader.lists == 1
        # the release is republished: same version, different bytes
        cm = cluster.api.get("v1", "ConfigMap", "shop", "web-release-1-4-2")
        assert cm is not None
        cm["data"]["manifest.json"] = manifest_json("1.4.1", declares="1.4.2")
        cluster.api.update(cm)
        wait_for(lambda: run(expectations.get("1.4.2")).manifest != first.manifest)
        second = run(expectations.get("1.4.2"))
        assert second.manifest is not None and not second.stale
        assert second.manifest.files != first.manifest.files
        assert reader.lists == 1, "seen by the watch, not by listing again"
        # unchanged since: served from the cache, no new load
        loads = expectations.loads
        run(expectations.get("1.4.2"))
        assert expectations.loads == loads
    finally:
        expectations.close()
        run(closed(reader))


def test_an_expired_watch_relists(cluster: SimCluster) -> None:
    cluster.api.create(release_cm("1.4.2"))
    reader = _reader(cluster.api, watch_timeout=1)
    with event_loop() as run:
        _relists(cluster, reader, run)


def _relists(
    cluster: SimCluster, reader: ConfigMapReleases, run: Callable[[Awaitable[Any]], Any]
) -> None:
    try:
        run(reader.release("1.4.2"))
        assert reader.lists == 1
        # history moves on elsewhere and is forgotten: resuming from what the watch
        # last saw is 410 Gone, and the reader lists again instead of going blind
        cluster.api.create(release_cm("1.4.2", namespace="default"))
        cluster.api.compact()
        wait_for(lambda: reader.lists >= 2, timeout=10)
        cluster.api.create(release_cm("1.4.1"))
        wait_for(lambda: reader.revision("1.4.1"), timeout=5)
        assert run(reader.release("1.4.1"))[0] == "configmap shop/web-release-1-4-1"
    finally:
        run(closed(reader))


def test_api_server_down_is_inconclusive_never_mismatch(cluster: SimCluster, tmp_path) -> None:
    cluster.add_pod(gated=False)
    cluster.add_pod(serves="1.4.1", gated=False)
    cluster.kubelet_sync()
    cluster.api.create(release_cm("1.4.2"))
    spec = load_spec(
        {
            "kubernetes": {"namespace": "shop", "selector": "app=web", "port": cluster.port},
            "release": {"config_maps": {"selector": SELECTOR}},
        }
    )
    assert spec.kubernetes is not None
    api = cluster.api.api_client()
    try:
        instances = discover_pods(spec.kubernetes, api_client=api)
    finally:
        api.close()
    assert len(instances) == 2
    cluster.api.stop()
    report = asyncio.run(
        run_check(spec, instances=instances, kubeconfig=kubeconfig(cluster.api, tmp_path))
    )
    verdicts = [r.verdict for r in report.results]
    assert verdicts == [Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE], report.results
    assert all("ConfigMaps" in (r.reason or "") for r in report.results)


def test_a_watched_reader_whose_api_server_goes_away_asks_again() -> None:
    server = FakeApiServer(host="127.0.0.1", port=0, namespaces=("shop",)).start()
    api = server.api_client()
    reader = ConfigMapReleases(namespace="shop", selector=SELECTOR, api_client=api, watch_timeout=1)
    with event_loop() as run:
        try:
            server.create(release_cm("1.4.2"))
            run(reader.release("1.4.2"))
            server.stop()
            # A watch request the stopping server took but never answered ends by the
            # client's read timeout (watch_timeout + 10 s, its promised bound): wait past it.
            wait_for(lambda: reader.revision("1.4.2") is None, timeout=20)
            with pytest.raises(DependencyError):
                run(reader.release("1.4.2"))
        finally:
            run(closed(reader))
            api.close()


def test_duplicates_and_missing_keys_are_refused(cluster: SimCluster) -> None:
    cluster.api.create(release_cm("1.4.2"))
    cluster.api.create(release_cm("1.4.2", name="again"))
    empty = release_cm("1.4.1")
    empty["data"] = {"other.json": "{}"}
    cluster.api.create(empty)
    reader = _reader(cluster.api, watch=False)
    try:
        with pytest.raises(ExpectationUnavailable, match="again, web-release-1-4-2 .* all"):
            asyncio.run(reader.release("1.4.2"))
        with pytest.raises(ExpectationUnavailable, match="no manifest.json key"):
            asyncio.run(reader.release("1.4.1"))
    finally:
        reader.close()


def test_the_spec_reads_only_its_own_namespace() -> None:
    with pytest.raises(ConfigError, match="give kubernetes"):
        load_spec({"targets": [{"url": "http://a/"}], "release": {"config_maps": {}}})
    with pytest.raises(ConfigError, match="one kind of release source"):
        load_spec(
            {
                "kubernetes": {"namespace": "shop"},
                "release": {"manifests": "r/{version}.json", "config_maps": {}},
            }
        )
    with pytest.raises(ConfigError, match="must not be empty"):
        load_spec(
            {"kubernetes": {"namespace": "shop"}, "release": {"configMaps": {"selector": " "}}}
        )
    spec = load_spec({"kubernetes": {"namespace": "shop"}, "release": {"configMaps": {}}})
    assert spec.release is not None and spec.release.config_maps is not None
    assert spec.release.config_maps.selector == SELECTOR


def test_the_example_check_verifies_the_example_release(
    cluster: SimCluster, tmp_path: Path
) -> None:
    """k8s/example-artifactcheck.yaml against k8s/example-web-deployment.yaml's release
    ConfigMap: pods serving that build are consistent, one serving 1.4.1's bytes is not."""
    import yaml

    k8s_dir = Path(__file__).resolve().parents[2] / "k8s"
    workload = list(yaml.safe_load_all((k8s_dir / "example-web-deployment.yaml").read_text()))
    (release,) = [
        d
        for d in workload
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("web-release-")
    ]
    cluster.api.create(release)
    (check,) = yaml.safe_load_all((k8s_dir / "example-artifactcheck.yaml").read_text())
    spec = check["spec"]
    spec["kubernetes"]["port"] = cluster.port
    config = tmp_path / "check.yaml"
    config.write_text(yaml.safe_dump(spec))
    labels = {"app.kubernetes.io/name": "web"}
    for _ in range(3):
        cluster.add_pod(gated=False, labels=labels)
    bad = cluster.add_pod(serves="1.4.1", gated=False, labels=labels)
    cluster.kubelet_sync()
    result = CliRunner().invoke(
        main,
        [
            "verify",
            "--kubeconfig",
            kubeconfig(cluster.api, tmp_path),
            "-c",
            str(config),
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 1, result.output
    verdicts = {r["instance"]: r["verdict"] for r in json.loads(result.stdout)["results"]}
    assert verdicts.pop(f"shop/{bad.name}") == "mismatch"
    assert sorted(verdicts.values()) == ["consistent"] * 3


def test_the_controller_reads_release_configmaps_of_the_check_s_own_namespace(
    cluster: SimCluster,
) -> None:
    """In the cluster, the controller lists and watches the check's own namespace's
    release ConfigMaps (through its own API client) and quarantines the drifted pod."""
    from artifactcheck_sim.running import RunningController

    for version in ("1.4.1", "1.4.2"):
        cluster.api.create(release_cm(version))
    pods = [cluster.add_pod() for _ in range(3)]
    bad = cluster.add_pod(serves="1.4.1")
    cluster.add_check(
        interval=0.3,
        cdn=None,
        release={"configMaps": {"selector": SELECTOR}},
        policy={"mode": "quarantine", "confirmations": 1, "maxQuarantineFraction": 0.5},
    )
    cluster.api.reset_requests()
    with RunningController(cluster, admin=cluster.lab_admin()):
        wait_for(lambda: (cluster.check_status() or {}).get("quarantined") == 1, timeout=20)
        status = cluster.check_status()
    assert status["counts"]["consistent"] == len(pods) and status["counts"]["mismatch"] == 1
    gate = cluster.condition(bad.name)
    assert gate is not None and gate["status"] == "False"
    asked = [(m, p) for m, p in cluster.api.requests if "configmaps" in p]
    assert asked, "the controller never asked for release ConfigMaps"
    assert all(m == "GET" and "/namespaces/shop/configmaps" in p for m, p in asked), asked
