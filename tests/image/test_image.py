"""The controller image, built from the Dockerfile and run the in-cluster way.

The containerised controller finds its cluster exactly as in a pod: from
``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT`` and the service-account files
(``token``, ``ca.crt``, ``namespace``) mounted at
``/var/run/secrets/kubernetes.io/serviceaccount``; the fake API server serves HTTPS with
a certificate from that CA (trustme) and answers 401 to any request without the
mounted token. The simulated cluster is the demo's (pods on loopback addresses serving
a real build, one of them 1.4.1's bytes under 1.4.2's names), reached through host
networking. The container runs as the image's user (uid 65532) with a read-only root
file system (a tmpfs /tmp, as the Deployment's emptyDir), no capabilities, no new
privileges: as ``k8s/deployment.yaml`` runs it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiohttp import web

from artifactcheck_sim.apiserver import FakeApiServer
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.web import Site

from .conftest import RUN_ID, SUITE_ENV, TEST_LABEL, Built, baseimage, pyproject_version

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def start_early(config: pytest.Config, env: dict[str, str] | None = None) -> None:
    """Make the base images' root file systems as soon as the run has collected these
    tests (tests/conftest.py calls this): mmdebstrap's minute and more of downloads
    then overlaps the rest of the suite, and the ``base_images`` fixture waits for it.
    Only where the fixture would make them (root, mmdebstrap, Docker not skipped)."""
    del env  # mmdebstrap needs nothing of the tests' environment
    needs = ("mmdebstrap", "docker")
    if os.geteuid() != 0 or not all(map(shutil.which, needs)) or config.stash.get(_EARLY, False):
        return
    config.stash[_EARLY] = True
    baseimage.start_making_tars(os.environ.get(SUITE_ENV, baseimage.DEFAULT_SUITE))


_EARLY = pytest.StashKey[bool]()

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
ADMIN_DIR = "/etc/artifactcheck"  # the admin configuration, as its ConfigMap is mounted
APP_NAMESPACE = "shop"
CONTROLLER_NAMESPACE = "artifactcheck-system"
QUARANTINE_TIMEOUT = 90.0
RELEASE_HOST = "127.79.15.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 3.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


class TokenCheckingApiServer(FakeApiServer):
    """The fake API server, answering 401 unless the bearer token is the mounted one."""

    def __init__(self, token: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.token = token
        self.authorized: list[str] = []  # path of every request with the right token
        self.unauthorized: list[str] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or credentials != self.token:  # schemes: any case
            self.unauthorized.append(request.path_qs)
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            }
            return web.json_response(body, status=401)
        self.authorized.append(request.path_qs)
        return await super()._handle(request)


@pytest.fixture
def in_cluster(tmp_path: Path) -> Iterator[tuple[Any, ...]]:
    """A TLS fake API server + the demo's simulated cluster + the service-account files."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost", "kubernetes.default.svc")
    ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ssl_context)
    token = secrets.token_urlsafe(32)
    api = TokenCheckingApiServer(
        token,
        host="127.0.0.1",
        ssl_context=ssl_context,
        namespaces=("default", APP_NAMESPACE, CONTROLLER_NAMESPACE),
    )
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(token)
    ca.cert_pem.write_to_path(str(sa / "ca.crt"))
    (sa / "namespace").write_text(CONTROLLER_NAMESPACE)
    for path in (sa, *sa.iterdir()):  # readable by uid 65532, as a projected volume is
        path.chmod(0o755 if path.is_dir() else 0o644)
    api.start()
    cluster = SimCluster(
        namespace=APP_NAMESPACE, first_host="127.79.13.1", cdn_host="127.79.14.1", api=api
    )
    try:
        cluster.start()
        # A namespaced check fetches only allowed http(s) URLs: the release manifests
        # SimCluster writes are served on their own loopback address, and the admin's
        # configuration (a ConfigMap in a cluster) allows it, the CDN and loopback pods.
        releases = cluster.web.add(Site(root=Path(cluster.release_template).parent), RELEASE_HOST)
        admin = tmp_path / "admin"
        admin.mkdir()
        config = {
            "egress": {"allow": [cluster.cdn_url, releases], "allow_loopback": True},
            "limits": {"min_interval": 0.1},
        }
        (admin / "admin-config.yaml").write_text(yaml.safe_dump(config))
        for path in (admin, *admin.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield cluster, api, sa, admin, releases + "{version}.json"
    finally:
        cluster.stop()
        api.stop()


def _run_controller(
    image: Built,
    docker_client: Any,
    sa: Path,
    admin: Path,
    api_port: int,
    health: int,
    metrics: int,
) -> Any:
    return docker_client.containers.run(
        image.tag,
        command=[
            "--namespace-scope",
            "cluster",
            "--health-port",
            str(health),
            "--metrics-port",
            str(metrics),
            "--bind",
            "127.0.0.1",
            "--json-logs",
        ],  # fmt: skip
        name=f"ac-{RUN_ID}-controller",
        labels={TEST_LABEL: RUN_ID},
        detach=True,
        network_mode="host",
        read_only=True,
        tmpfs={"/tmp": "rw,noexec,nosuid,size=64m"},
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        environment={
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(api_port),
            "POD_NAME": "artifactcheck-controller-0",
            "POD_NAMESPACE": CONTROLLER_NAMESPACE,
            "ARTIFACTCHECK_ADMIN_CONFIG": f"{ADMIN_DIR}/admin-config.yaml",
        },
        volumes={
            str(sa): {"bind": SA_DIR, "mode": "ro"},
            str(admin): {"bind": ADMIN_DIR, "mode": "ro"},
        },
    )


def test_image_metadata(controller_image: Built, docker_client: Any) -> None:
    """Non-root, exec-form entrypoint, OCI labels; no pip, no compiler in the image."""
    attrs = docker_client.api.inspect_image(controller_image.tag)
    config = attrs["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/opt/artifactcheck/bin/artifactcheck", "controller"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == pyproject_version()
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert labels["org.opencontainers.image.title"] == "artifactcheck"
    assert labels["org.opencontainers.image.base.name"] == controller_image.base.runtime
    probe = (
        "import importlib.util as u, shutil, sys, os;"
        "tools = [t for t in ('pip', 'pip3', 'gcc', 'cc', 'c++', 'make') if shutil.which(t)];"
        "mods = [m for m in ('pip', 'setuptools', 'ensurepip') if u.find_spec(m)];"
        "print(tools, mods, os.getuid(), os.getgid())"
    )
    out = docker_client.containers.run(
        controller_image.tag,
        entrypoint=["/opt/artifactcheck/bin/python", "-c", probe],
        network_mode="none",
        read_only=True,
        remove=True,
        labels={TEST_LABEL: RUN_ID},
    ).decode()
    # ensurepip's module is part of Debian's libpython; without python3-venv it has no
    # wheels to install, which is what matters here.
    assert out.strip() in ("[] [] 65532 65532", "[] ['ensurepip'] 65532 65532"), out
    # k8s/deployment.yaml replaces the entrypoint with `command: [artifactcheck,
    # controller, ...]`: the name must resolve through the image's PATH, without a shell.
    usage = docker_client.containers.run(
        controller_image.tag,
        entrypoint=["artifactcheck"],
        command=["controller", "--help"],
        network_mode="none",
        read_only=True,
        remove=True,
        labels={TEST_LABEL: RUN_ID},
    ).decode()
    assert "Run the in-cluster controller" in usage


def test_container_quarantines_drifted_pod_in_cluster(
    controller_image: Built, docker_client: Any, in_cluster: Any
) -> None:
    cluster, api, sa, admin, release_manifest = in_cluster
    good = [cluster.add_pod(node=f"node-{'abc'[i % 3]}") for i in range(3)]
    bad = cluster.add_pod(serves="1.4.1", node="node-b")
    cluster.add_check(
        interval=1.0,
        cdn=None,
        release={"manifests": [release_manifest]},
        policy={"mode": "quarantine", "confirmations": 2, "maxQuarantineFraction": 0.25},
    )
    health, metrics = _free_port(), _free_port()
    t0 = time.monotonic()
    container = _run_controller(
        controller_image, docker_client, sa, admin, api.port, health, metrics
    )
    quarantined_after = stopped_in = None
    try:
        try:
            wait_for(
                lambda: (cluster.condition(bad.name) or {}).get("status") == "False",
                timeout=QUARANTINE_TIMEOUT,
                interval=0.2,
            )
            quarantined_after = time.monotonic() - t0
            wait_for(
                lambda: all(
                    (cluster.condition(p.name) or {}).get("status") == "True" for p in good
                ),
                timeout=30,
                interval=0.2,
            )
        except TimeoutError:
            container.reload()
            logs = container.logs().decode(errors="replace")[-6000:]
            pytest.fail(
                f"no quarantine within {QUARANTINE_TIMEOUT:g}s; container "
                f"{container.status}; unauthorized={api.unauthorized[:3]}; logs:\n{logs}"
            )
        # A hostile tenant against the real image: a CDN the admin never allowed (a
        # recording stand-in on another loopback address), the API server itself as a
        # release source, and the controller's own token as a header file (which the
        # CRD schema prunes, as a real cluster does). Refused with Accepted=False; the
        # stand-in and the API server (outside its API) see nothing.
        lure = cluster.web.add(Site(root=Path(cluster.release_template).parent), "127.79.15.1")
        cluster.add_check(
            "hostile",
            pruned_ok=True,
            cdn=lure,
            release={"manifests": [api.url + "/{version}.json"]},
            http={"headerFiles": {"X-Leak": "/var/run/secrets/kubernetes.io/serviceaccount/token"}},
        )

        def refusal() -> dict[str, Any] | None:
            conditions = cluster.check_status("hostile").get("conditions") or []
            return next((c for c in conditions if c.get("type") == "Accepted"), None)

        accepted = wait_for(refusal, timeout=30, interval=0.2)
        assert accepted["status"] == "False", accepted
        assert "spec.cdn" in accepted["message"] and "spec.release.manifests" in accepted["message"]
        stored = api.get("artifactcheck.io/v1alpha1", "ArtifactCheck", APP_NAMESPACE, "hostile")
        assert "headerFiles" not in ((stored or {}).get("spec") or {}).get("http", {})
        assert cluster.web.server(lure).request_count == 0
        assert not [p for _, p in api.requests if not p.startswith(("/api", "/apis"))]

        condition = cluster.condition(bad.name) or {}
        assert condition["status"] == "False"
        assert (cluster.condition(bad.name, "Ready") or {}).get("status") == "False"
        assert [e for e in cluster.events(bad.name) if e.get("type") == "Warning"]

        status, body = _get(f"http://127.0.0.1:{metrics}/metrics")
        assert status == 200
        assert "artifactcheck_" in body
        samples = [ln for ln in body.splitlines() if ln.startswith("artifactcheck_")]
        assert samples, body[:500]
        status, _ = _get(f"http://127.0.0.1:{health}/healthz")
        assert status == 200

        # The in-cluster path: HTTPS to KUBERNETES_SERVICE_HOST:PORT verified with the
        # mounted ca.crt (the server has no other certificate), the mounted token on
        # every request (401 otherwise), the Lease in POD_NAMESPACE.
        assert api.url.startswith("https://")
        assert api.authorized and not api.unauthorized, api.unauthorized[:5]
        leases = api.list("coordination.k8s.io/v1", "Lease", CONTROLLER_NAMESPACE)
        assert [ls["spec"].get("holderIdentity") for ls in leases] == ["artifactcheck-controller-0"]
        container.reload()
        assert container.status == "running"
        logs = container.logs().decode(errors="replace").splitlines()
        assert logs and all(json.loads(line) for line in logs if line.startswith("{"))
    finally:
        t1 = time.monotonic()
        container.stop(timeout=30)
        stopped_in = time.monotonic() - t1
        container.reload()
        exit_code = container.attrs["State"]["ExitCode"]
        container.remove(force=True)
        print(
            f"\nimage test: quarantined after {quarantined_after}s from container start; "
            f"SIGTERM to exit {stopped_in:.1f}s (exit code {exit_code}); "
            f"image built in {controller_image.build_seconds:.1f}s"
        )
    assert exit_code in (0, 143), exit_code
