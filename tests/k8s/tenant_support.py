"""A simulated cluster as a multi-tenant controller sees it.

A namespaced check may fetch only http(s) URLs on the admin's allow-list, so the
release manifests that :class:`SimCluster` writes to a directory are also served over
HTTP here, on their own loopback address; :func:`admin_config` allows that server and
the CDN (and loopback, since every simulated pod lives on 127.x), and
:func:`running` starts the real controller with that configuration as a file, the way
``--admin-config`` gives it.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import yaml

from artifactcheck.control.crd import CRD_NAME, crd_manifest
from artifactcheck.tenancy.admission import AdminConfig
from artifactcheck_sim.cluster import SimCluster
from artifactcheck_sim.running import RunningController
from artifactcheck_sim.web import Site

_CRD_API = "apiextensions.k8s.io/v1"


def permissive_crd() -> dict[str, Any]:
    """The ArtifactCheck CRD with a ``spec`` that keeps whatever it is given, as on a
    cluster still running an older CRD (or one edited by hand): the API server then
    neither refuses nor prunes the CLI-only fields, and only the controller's own
    admission stands between them and the controller."""
    manifest = crd_manifest()
    version = manifest["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    return manifest


class TenantCluster(SimCluster):
    """SimCluster + an HTTP release source; checks default to it, not to a local path.

    ``crd="project"`` serves ArtifactChecks with the project's CRD (k8s/crd.yaml), whose
    schema leaves the CLI-only fields out; ``crd="permissive"`` with
    :func:`permissive_crd`, to show what the controller refuses on its own.
    """

    def __init__(self, *, release_host: str, crd: str = "project", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if crd != "keep":  # "keep": a second namespace on a shared API server
            wanted = permissive_crd() if crd == "permissive" else crd_manifest()
            if self.api.get(_CRD_API, "CustomResourceDefinition", None, CRD_NAME) is not None:
                self.api.delete(_CRD_API, "CustomResourceDefinition", None, CRD_NAME)
            self.api.create(wanted)
        self.release_host = release_host
        self.release_url = ""
        self.release_template_url = ""
        self.standin_url = ""  # a recording server the admin configuration does not allow

    def start(self) -> TenantCluster:
        super().start()
        if self.release_host:
            folder = Path(self.release_template).parent
            self.release_url = self.web.add(Site(root=folder), self.release_host)
            self.release_template_url = self.release_url + "{version}.json"
        return self

    def __enter__(self) -> TenantCluster:
        return self.start()

    def add_check(self, name: str = "web", **spec: Any) -> dict[str, Any]:
        spec.setdefault("release", {"manifests": [self.release_template_url]})
        return super().add_check(name, **spec)

    def check(self, name: str = "web", namespace: str | None = None) -> dict[str, Any]:
        """The ArtifactCheck object as the API server has it now."""
        obj = self.api.get(
            "artifactcheck.io/v1alpha1", "ArtifactCheck", namespace or self.namespace, name
        )
        return dict(obj or {})

    def condition_of(
        self, ctype: str, name: str = "web", namespace: str | None = None
    ) -> dict[str, Any] | None:
        """One status condition of an ArtifactCheck, or None."""
        status = self.check(name, namespace).get("status") or {}
        for c in status.get("conditions") or []:
            if c.get("type") == ctype:
                return dict(c)
        return None

    def check_events(self, name: str = "web") -> list[dict[str, Any]]:
        """Events about an ArtifactCheck."""
        return [
            e
            for e in self.api.list("v1", "Event", self.namespace)
            if e.get("involvedObject", {}).get("kind") == "ArtifactCheck"
            and e.get("involvedObject", {}).get("name") == name
        ]


def admin_config(cluster: TenantCluster, **sections: Any) -> AdminConfig:
    """The admin configuration the tests start from: the cluster's CDN and release
    server allowed, loopback allowed (simulated pods are on 127.x), short intervals."""
    base: dict[str, Any] = {
        "egress": {
            "allow": [cluster.cdn_url, cluster.release_url],
            "allow_loopback": True,
        },
        "limits": {"min_interval": 0.1, "allow_cordon_namespaces": [cluster.namespace]},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return AdminConfig.model_validate(base)


def write_admin_config(config: AdminConfig, folder: str | Path | None = None) -> str:
    """The configuration as a YAML file, as the ConfigMap mounts it."""
    where = Path(folder or tempfile.mkdtemp(prefix="artifactcheck-admin-"))
    path = where / "admin-config.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")), encoding="utf-8")
    return str(path)


def running(
    cluster: TenantCluster, admin: AdminConfig | None = None, **settings: Any
) -> RunningController:
    """The real controller over HTTP against the cluster, reading ``admin`` from a file."""
    config = admin if admin is not None else admin_config(cluster)
    return RunningController(cluster, admin_config=write_admin_config(config), **settings)


_numbers: dict[int, itertools.count[int]] = {}


def numbered_cluster(octet: int, **kw: Any) -> TenantCluster:
    """A cluster on loopback addresses no other test module uses: pods from
    127.OCTET.N.1, the release server at 127.OCTET.(100+N).1, the CDN at
    127.OCTET.(200+N).1, N counted per ``octet`` (one octet per test module)."""
    n = next(_numbers.setdefault(octet, itertools.count(1)))
    return TenantCluster(
        first_host=f"127.{octet}.{n}.1",
        cdn_host=f"127.{octet}.{200 + n}.1",
        release_host=f"127.{octet}.{100 + n}.1",
        **kw,
    )
