"""A simulated fleet: real builds served on loopback instances, a CDN, release manifests.

The same fleet powers ``artifactcheck demo``, the end-to-end tests and the
benchmarks: N instances of one release of a real Vite build, each on its own
127.x.y.z address, a CDN site, and release manifests written with the very code CI
uses (``manifest build``). Faults are planted on purpose:

- ``drift(i, serves=...)``: instance *i* keeps the release's file names, manifest and
  version, but serves another release's bytes under them (the rebuilt-artifact
  outage of docs/architecture.md ("Why this exists"));
- ``cdn_missing(path, status=...)``: the CDN answers 404/403 for one asset.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from artifactcheck.manifests import native
from artifactcheck_sim.web import Site, Status, WebFleet, loopback_hosts

BUILDS = Path(__file__).parent / "builds"

#: The embedded releases: two real Vite builds of one app (see tests/fixtures/README.md).
RELEASES: dict[str, Path] = {"1.4.1": BUILDS / "vite-r1", "1.4.2": BUILDS / "vite-r2"}


def logical_map(build: Path) -> dict[str, str]:
    """Vite source name -> emitted file, from the build's own manifest."""
    doc = json.loads((build / ".vite" / "manifest.json").read_text())
    out: dict[str, str] = {}
    for key, chunk in doc.items():
        out[key] = chunk["file"]
        for i, css in enumerate(chunk.get("css", [])):
            out[f"{key}#css{i}"] = css
    return out


def foreign_bytes(build: Path, other: Path) -> dict[str, bytes]:
    """``other``'s bytes keyed by ``build``'s file names, for files that differ."""
    mine, theirs = logical_map(build), logical_map(other)
    out: dict[str, bytes] = {}
    for key, path in mine.items():
        their_path = theirs.get(key)
        if their_path is None:
            continue
        data = (other / their_path).read_bytes()
        if data != (build / path).read_bytes():
            out[path] = data
    return out


def write_releases(releases: Mapping[str, Path], folder: Path) -> str:
    """Write each release's native manifest into ``folder``; returns the ``{version}``
    template of their paths, as a check's ``release.manifests`` takes it."""
    for version, build in releases.items():
        data = native.dump(native.build(build, version=version))
        (folder / f"{version}.json").write_bytes(data)
    return str(folder / "{version}.json")


class Lifecycle:
    """Something to start and stop: ``start()``/``stop()``, or a ``with`` block."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@dataclass
class SimInstance:
    """One simulated instance: its site, address and what was planted on it."""

    name: str
    host: str
    site: Site
    version: str
    url: str = ""
    planted: list[str] = field(default_factory=list)


class SimFleet(Lifecycle):
    """Instances + CDN + release manifests on loopback; a context manager."""

    def __init__(
        self,
        *,
        instances: int = 6,
        version: str = "1.4.2",
        first_host: str = "127.77.0.1",
        cdn_host: str = "127.77.1.1",
        releases: Mapping[str, Path] | None = None,
        web: WebFleet | None = None,
    ) -> None:
        self.releases = dict(releases or RELEASES)
        if version not in self.releases:
            raise ValueError(f"unknown release {version}; known: {sorted(self.releases)}")
        self.version = version
        self._own_web = web is None
        self.web = web or WebFleet(name="artifactcheck-simfleet")
        self._tmp = tempfile.TemporaryDirectory(prefix="artifactcheck-sim-")
        self.release_dir = Path(self._tmp.name)
        build = self.releases[version]
        hosts = loopback_hosts(instances, first=first_host)
        self.instances = [
            SimInstance(
                name=f"web-{i + 1}", host=h, site=Site(root=build, version=version), version=version
            )
            for i, h in enumerate(hosts)
        ]
        self.cdn_site = Site(root=build, server_header="AmazonS3")
        self.cdn_host = cdn_host
        self.cdn_url = ""
        self.cdn_planted: list[str] = []

    # -- planting faults -------------------------------------------------------------

    def drift(self, index: int, *, serves: str) -> list[str]:
        """Make instance ``index`` serve release ``serves``'s bytes under its own names."""
        inst = self.instances[index]
        swapped = foreign_bytes(self.releases[inst.version], self.releases[serves])
        inst.site.overrides.update(swapped)
        inst.planted += sorted(swapped)
        return sorted(swapped)

    def cdn_missing(self, path: str, *, status: int = 404) -> None:
        """Make the CDN answer ``status`` (404, or 403 like S3) for one asset."""
        self.cdn_site.overrides[path] = Status(status)
        self.cdn_planted.append(path)

    # -- lifecycle -------------------------------------------------------------------

    def write_releases(self) -> str:
        """Write each release's native manifest; returns the ``{version}`` template."""
        return write_releases(self.releases, self.release_dir)

    def start(self) -> Self:
        """Serve every instance and the CDN."""
        self.web.start()
        urls = self.web.add_many([(i.site, i.host) for i in self.instances])
        for inst, url in zip(self.instances, urls, strict=True):
            inst.url = url
        self.cdn_url = self.web.add(self.cdn_site, self.cdn_host)
        self.release_template = self.write_releases()
        return self

    def stop(self) -> None:
        """Stop the servers (if this fleet started them) and remove the temp files."""
        if self._own_web:
            self.web.stop()
        self._tmp.cleanup()

    # -- convenience -----------------------------------------------------------------

    def targets(self) -> list[dict[str, str]]:
        """CheckSpec ``targets`` for every instance, with the version each reports."""
        return [{"url": i.url, "version": i.version, "name": i.name} for i in self.instances]

    def spec(self, **overrides: Any) -> dict[str, Any]:
        """A CheckSpec mapping checking this fleet against its releases and CDN."""
        spec: dict[str, Any] = {
            "targets": self.targets(),
            "release": {"manifests": [self.release_template]},
            "cdn": self.cdn_url,
            "known_versions": sorted(set(self.releases) - {self.version}),
            "http": {"instance_deadline": 10.0, "request_timeout": 5.0},
            "retry": {"base_delay": 0.05, "max_delay": 0.5},
        }
        spec.update(overrides)
        return spec
