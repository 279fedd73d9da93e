"""The guard every release source hands its manifests to, with injected stores and readers.

A pins store that fails mid-run and a release source read from ConfigMaps are faults
and sources no loopback server stands in for; they are injected through the same
interfaces the CLI and the controller use (``PinStore``, ``ConfigMapReader``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from artifactcheck.manifests import native, parse_manifest
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ExpectationUnavailable
from artifactcheck.model.values import FindingKind
from artifactcheck.release.guard import ReleaseGuard, ReleaseTrust
from artifactcheck.release.pins import FilePins, Observed, PinsError
from artifactcheck.release.sources import ConfigMapSource, Expectations
from artifactcheck_sim.fleet import RELEASES

LIMITS = ManifestLimits()


def release(version: str, build: str) -> bytes:
    return native.dump(native.build(RELEASES[build], version=version))


class BrokenStore:
    """A pins store whose disk filled up after the run started."""

    description = "pins.json"

    def observe(self, version: str, sha256: str, source: str, data: bytes) -> Observed:
        raise PinsError("pins.json: cannot write: No space left on device")

    def release_bytes(self, sha256: str) -> bytes | None:
        return None


async def test_a_pins_store_failing_mid_run_makes_that_release_inconclusive() -> None:
    guard = ReleaseGuard(ReleaseTrust(pins=BrokenStore()), fetcher=None, limits=LIMITS)
    data = release("1.4.1", "1.4.1")
    manifest = parse_manifest(data, limits=LIMITS, source="r.json")
    with pytest.raises(ExpectationUnavailable, match="pins pins.json: .*No space left"):
        await guard.admit("1.4.1", manifest, data, "r.json")


class Reader:
    """Release ConfigMaps, one per version, whose manifest can be replaced."""

    description = "configmaps app=web"

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def release(self, version: str) -> tuple[str, bytes, str]:
        data = self.data[version]
        return f"configmap shop/web-{version}", data, hashlib.sha256(data).hexdigest()

    def revision(self, version: str) -> str | None:
        return None

    def close(self, timeout: float = 0.0) -> None:
        pass


async def test_configmap_releases_are_pinned_like_files(tmp_path: Path) -> None:
    reader = Reader()
    reader.data["1.4.1"] = first = release("1.4.1", "1.4.1")
    trust = ReleaseTrust(pins=FilePins(tmp_path / "pins.json"))
    guard = ReleaseGuard(trust, fetcher=None, limits=LIMITS)

    def expectations() -> Expectations:
        source = ConfigMapSource(reader, limits=LIMITS, guard=guard)
        return Expectations(source, guard=guard)

    got = await expectations().get("1.4.1")
    assert got.manifest is not None and not expectations().trust_findings()
    reader.data["1.4.1"] = release("1.4.1", "1.4.2")  # the ConfigMap is rebuilt
    later = expectations()
    got = await later.get("1.4.1")
    assert got.manifest is not None
    assert got.manifest.source == "configmap shop/web-1.4.1 (pinned copy)"
    assert got.manifest.files == parse_manifest(first, limits=LIMITS).files
    [finding] = later.trust_findings()
    assert finding.kind is FindingKind.RELEASE_CHANGED
    assert finding.expected == hashlib.sha256(first).hexdigest()
