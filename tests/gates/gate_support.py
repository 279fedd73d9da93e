"""The real controller on the simulated cluster, with its HTTP server on a random port.

Fixtures in conftest.py; the helpers here (imported by name from the tests).

Each test gets its own loopback addresses, the project's CRD on a fake API server, a
release source served over HTTP on its own address (so a test can take it down: a
real outage, connection refused), and a CDN that holds both embedded releases' files
(the stable and the canary version), as a CDN holding every deployed version does.
"""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema

from artifactcheck.control.health import HealthServer
from artifactcheck.tenancy.admission import AdminConfig
from artifactcheck_sim.cluster import SimCluster, wait_for
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.running import RunningController
from artifactcheck_sim.web import Site

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "verdict-api.schema.json").read_text())
jsonschema.Draft202012Validator.check_schema(SCHEMA)
STABLE, CANARY = "1.4.1", "1.4.2"


class GateCluster(SimCluster):
    """SimCluster + an HTTP release source + a CDN with both releases."""

    def __init__(self, *, release_host: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.release_host = release_host
        self.release_url = ""
        root = RELEASES[STABLE]
        for path in (root / "assets").iterdir():
            self.cdn_site.overrides[f"assets/{path.name}"] = path.read_bytes()

    def start(self) -> GateCluster:
        super().start()
        folder = Path(self.release_template).parent
        self.release_url = self.web.add(Site(root=folder), self.release_host)
        return self

    def release_source_down(self) -> None:
        """Stop the release server: connections to it are refused from now on."""
        self.web.remove(self.release_url)

    def add_check(self, name: str = "web", *, pruned_ok: bool = False, **spec: Any) -> Any:
        spec.setdefault("release", {"manifests": [self.release_url + "{version}.json"]})
        spec.setdefault("interval", 30)  # the gates ask for fresh checks themselves
        return super().add_check(name, pruned_ok=pruned_ok, **spec)

    def add_stable(self, n: int = 3) -> list[str]:
        return [
            self.add_pod(
                version=STABLE,
                replicaset="web-6c9d",
                labels={"rollouts-pod-template-hash": "6c9d"},
            ).name
            for _ in range(n)
        ]

    def add_canary(self, n: int = 2, *, serves: str | None = None) -> list[str]:
        return [
            self.add_pod(
                version=CANARY,
                replicaset="web-7f4b",
                labels={"rollouts-pod-template-hash": "7f4b"},
                serves=serves,
            ).name
            for _ in range(n)
        ]

    def admin(self, **limits: Any) -> AdminConfig:
        return AdminConfig.model_validate(
            {
                "egress": {"allow": [self.cdn_url, self.release_url], "allow_loopback": True},
                "limits": {"min_interval": 0.1, **limits},
            }
        )


class Gate:
    """The running controller and its HTTP server (health port: probes, API)."""

    def __init__(self, controller: RunningController, server: HealthServer) -> None:
        self.running = controller
        self.server = server
        self.base = f"http://127.0.0.1:{server.port}"

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        return request("GET", self.base + path)

    def post(self, path: str, doc: Any) -> tuple[int, dict[str, Any]]:
        return request("POST", self.base + path, json.dumps(doc).encode())

    def settled(self, path: str, timeout: float = 30.0) -> dict[str, Any]:
        """The answer once the check has results (503 NotYetChecked before)."""

        def ok() -> dict[str, Any] | None:
            status, doc = self.get(path)
            return doc if status == 200 else None

        result: dict[str, Any] = wait_for(ok, timeout=timeout, interval=0.2)
        return result


@contextlib.contextmanager
def started(
    cluster: GateCluster, *, identity: str = "ctl-a", lead: bool = True, **limits: Any
) -> Iterator[Gate]:
    """The real controller on ``cluster`` and its HTTP server on a random port."""
    ctl = RunningController(cluster, identity=identity, admin=cluster.admin(**limits)).start()
    server = ctl.controller.serve_health(host="127.0.0.1", port=0)
    try:
        if lead:
            wait_for(lambda: ctl.controller.is_leader, timeout=10)
        yield Gate(ctl, server)
    finally:
        server.stop()
        ctl.stop()


def request(method: str, url: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
    """One HTTP request; (status, JSON body) whatever the status."""
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=70) as resp:  # noqa: S310 - loopback
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def raw(port: int, data: bytes, *, timeout: float = 15.0) -> str:
    """Send raw bytes to the server on loopback and read its whole answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may answer and close before reading everything
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def valid(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``, once validated against docs/verdict-api.schema.json."""
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)
    return doc
