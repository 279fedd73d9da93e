"""Docker containers as instances: ``docker inspect`` output -> :class:`Instance`.

Compose stacks and CI jobs run the same web front ends as a cluster does. The engine
itself is spoken to through :class:`artifactcheck.clients.docker.DockerEngine`; this
module only decides which containers are instances and how each is addressed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from artifactcheck.clients.docker import DockerEngine, find_network
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import DockerSource
from artifactcheck.model.values import Instance, VersionSignal

__all__ = ["COMPOSE_PROJECT", "COMPOSE_SERVICE", "discover_containers"]

COMPOSE_SERVICE = "com.docker.compose.service"
COMPOSE_PROJECT = "com.docker.compose.project"

_FRACTION = re.compile(r"(\.\d{6})\d+")
_LOG = logging.getLogger(__name__)

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]


class _Unaddressable(Exception):
    """A running container that cannot be reached the way the source asks."""


def discover_containers(
    engine: DockerEngine, source: DockerSource, *, logger: Logger | None = None
) -> list[Instance]:
    """Running containers matching every label filter, as instances sorted by name.

    Paused, restarting and stopped containers are left out: they serve nothing.
    A running container that cannot be addressed as asked (not on
    ``source.network``, port not published) is left out with a warning. Blocking:
    call it from ``asyncio.to_thread``.
    """
    log = logger or _LOG
    containers = engine.running_containers(_label_filters(source.labels))
    digests: dict[str, tuple[str, ...]] = {}
    out: list[Instance] = []
    for attrs in containers:
        state = attrs.get("State") or {}
        if not state.get("Running") or state.get("Paused") or state.get("Restarting"):
            continue
        image_id = attrs.get("Image") or ""
        if image_id and image_id not in digests:
            digests[image_id] = engine.repo_digests(image_id)
        try:
            out.append(_instance_from_attrs(attrs, source, repo_digests=digests.get(image_id, ())))
        except _Unaddressable as exc:
            log.warning("container %s skipped: %s", str(attrs.get("Name", "?")).lstrip("/"), exc)
    return sorted(out, key=lambda i: i.name)


def _instance_from_attrs(
    attrs: Mapping[str, Any],
    source: DockerSource,
    *,
    repo_digests: Sequence[str] = (),
) -> Instance:
    """Build an instance from ``docker inspect`` output (raises _Unaddressable).

    ``image`` is the reference the container was created from, pinned with the
    matching registry digest when the image has one (``shop/web:1.0@sha256:...``);
    ``image_id`` is the local image ID, which is what tells two builds apart. A
    container whose healthcheck says ``starting`` or ``unhealthy`` is not ``ready``.
    """
    config = attrs.get("Config") or {}
    labels = {str(k): str(v) for k, v in (config.get("Labels") or {}).items()}
    signals = tuple(
        VersionSignal(source=f"label:{key}", value=labels[key])
        for key in source.version_labels
        if labels.get(key)
    )
    state = attrs.get("State") or {}
    health = (state.get("Health") or {}).get("Status")
    ref = config.get("Image") or None
    return Instance(
        name=str(attrs.get("Name") or attrs.get("Id") or "?").lstrip("/"),
        base_url=f"http://{_address(attrs, source)}/",
        kind="container",
        signals=signals,
        namespace=labels.get(COMPOSE_PROJECT),
        owner=labels.get(COMPOSE_SERVICE),
        image=_pinned(ref, repo_digests) if ref else None,
        image_id=attrs.get("Image") or None,
        started_at=_parse_time(state.get("StartedAt")),
        uid=attrs.get("Id"),
        labels=labels,
        ready=health not in ("starting", "unhealthy"),  # no healthcheck: serving
    )


def _address(attrs: Mapping[str, Any], source: DockerSource) -> str:
    """``host:port`` where the container's site answers, as the source asks."""
    settings = attrs.get("NetworkSettings") or {}
    if source.use_published_port:
        bindings = [b for b in (settings.get("Ports") or {}).get(f"{source.port}/tcp") or () if b]
        bindings = [b for b in bindings if b.get("HostPort")]
        if not bindings:
            raise _Unaddressable(f"container port {source.port}/tcp is not published")
        binding = min(bindings, key=lambda b: ":" in (b.get("HostIp") or ""))  # IPv4 first
        host = binding.get("HostIp") or ""
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        return _hostport(host, int(binding["HostPort"]))
    networks: Mapping[str, Any] = settings.get("Networks") or {}
    if source.network:
        found = find_network(networks, source.network)
        if found is None:
            raise _Unaddressable(f"not attached to network {source.network!r}")
        ip = _ip(networks[found])
        if not ip:
            raise _Unaddressable(f"no IP address on network {source.network!r}")
        return _hostport(ip, source.port)
    if (attrs.get("HostConfig") or {}).get("NetworkMode") == "host":
        return _hostport("127.0.0.1", source.port)
    for name in sorted(networks):
        ip = _ip(networks[name])
        if ip:
            return _hostport(ip, source.port)
    ip = settings.get("IPAddress") or ""
    if ip:
        return _hostport(ip, source.port)
    raise _Unaddressable("no IP address on any network")


def _ip(network: Mapping[str, Any] | None) -> str:
    net = network or {}
    return str(net.get("IPAddress") or net.get("GlobalIPv6Address") or "")


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _pinned(ref: str, repo_digests: Sequence[str]) -> str:
    """``ref@sha256:...`` when one of the image's repo digests is for ref's repository."""
    if "@" in ref or ref.startswith("sha256:"):
        return ref
    repo = ref
    head, sep, tail = ref.rpartition(":")
    if sep and "/" not in tail:
        repo = head
    for digest in repo_digests:
        name, at, value = digest.partition("@")
        if at and name == repo:
            return f"{ref}@{value}"
    return ref


def _parse_time(value: Any) -> datetime | None:
    """Docker's RFC 3339 nanosecond timestamps; the zero time means never started."""
    if not isinstance(value, str) or not value or value.startswith("0001-01-01"):
        return None
    text = _FRACTION.sub(r"\1", value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _label_filters(labels: Sequence[str]) -> list[str]:
    """Validate ``KEY=VALUE`` / ``KEY`` filters; the engine ANDs them."""
    out = []
    for raw in labels:
        label = raw.strip()
        if not label or label.startswith("=") or any(c.isspace() for c in label.split("=")[0]):
            raise ConfigError(f"docker.labels: invalid label filter {raw!r} (KEY=VALUE or KEY)")
        out.append(label)
    return out
