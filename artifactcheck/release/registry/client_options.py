"""How registries are reached and what one release image may cost.

One frozen value per reader, read by the client (timeouts, retries, trust, plain HTTP),
the manifest reader (manifest size, layer count) and the layer reader (bytes, members,
names): a registry is an outside service, so every cost it can impose has a cap.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from artifactcheck.manifests.limits import DEFAULT_LIMITS, ManifestLimits
from artifactcheck.model.records import Record, field


class ImageLimits(Record):
    """Caps on what one release image may make this process download and read."""

    max_manifest_bytes: int = 4 * 1024 * 1024  # the distribution spec's suggested minimum
    max_layers: int = 128  # overlay's practical maximum is 127
    max_members: int = 1_000_000  # tar members over all layers
    max_download_bytes: int = 4 * 1024**3  # compressed blob bytes over all layers
    max_unpacked_bytes: int = 16 * 1024**3  # decompressed bytes over all layers
    max_name: int = 4096  # characters in one tar member's path
    deadline: float = 600.0  # seconds for the whole image
    files: ManifestLimits = DEFAULT_LIMITS  # files: max_entries caps the site's files


class RegistryOptions(Record):
    """How to reach registries: credentials, trust, plain HTTP, timeouts, retries."""

    docker_config: str | Path | None = None  # docker config JSON (a mounted Secret)
    ca_bundle: str | Path | None = None  # PEM file; default: the system trust store
    insecure: Collection[str] | bool = ()  # hosts[:port] reached over plain HTTP
    platform: tuple[str, str] = ("linux", "amd64")
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    attempts: int = 3
    backoff: float = 0.5  # the first retry waits up to this, doubling
    max_backoff: float = 8.0
    limits: ImageLimits = field(default_factory=ImageLimits)

    def plain_http(self, registry: str) -> bool:
        """True when this registry is explicitly allowed over plain HTTP."""
        if isinstance(self.insecure, bool):
            return self.insecure
        return registry in self.insecure
