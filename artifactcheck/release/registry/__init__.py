"""Release images read from an OCI registry over the distribution API, with no Docker.

``release.image`` through a local Docker engine cannot work in a cluster (no socket,
and no business pulling images into a node). This module reads the image the way a
registry client does: ``GET /v2/<repo>/manifests/<ref>`` (an image index or Docker
manifest list is resolved to linux/amd64, or to its only image), then every layer
blob in order, each streamed through its digest check, decompressed and walked as a
tar in stream mode. Whiteouts (``.wh.<name>``, ``.wh..wh..opq``) are applied across
layers exactly as the overlay would see them, and every regular file under the site
directory is hashed while it streams. Nothing is held whole in memory: not a layer,
not a file; what is kept is the path, sha256 and size of each site file.

Why each rule:

* digests pinned: a reference ``repo@sha256:...`` names content, so the manifest's
  bytes must hash to it (a mirror or proxy could serve anything); every blob must hash
  to the digest and size its manifest declares, and a layer's files only count once
  its whole blob verified;
* hostile input: a registry is an outside service, so the manifest size, the number of
  layers and tar members, the bytes downloaded and decompressed, and the time taken
  are capped; a tar member that climbs out with ``..`` refuses the whole image;
* the same paths as ``manifest build`` and ``DockerEngine.manifest_from_image``:
  relative to the site directory, symlinks skipped (a served symlink is the file it
  points to, which is hashed where it lives, or not part of the site), hard links
  recorded with their target's digest;
* credentials from a docker config JSON (a mounted ``kubernetes.io/dockerconfigjson``
  Secret in a cluster), read on every call so a rotated Secret is picked up, sent
  only to the registry they are for (and its token realm), never over plain HTTP to
  another origin after a redirect;
* TLS verified by default (a CA bundle may be given); plain HTTP only for registries
  explicitly named in ``insecure`` (the tests' loopback registry);
* retries with full-jitter backoff on 429, 5xx and connection errors, a few attempts:
  a registry blip should not make a check inconclusive, a dead one must not hang it.

Errors: :class:`~artifactcheck.model.errors.ConfigError` for a reference or a credentials
file that cannot be right; :class:`~artifactcheck.model.errors.ExpectationUnavailable` for
everything the registry or the image content did wrong, with the reason.

The rules live one seam a module: :mod:`.reference` (references), :mod:`.options`
(caps and connection options), :mod:`.credentials` (the docker config),
:mod:`.session` (HTTP: retries, auth challenges, redirects, TLS), :mod:`.manifest`
(manifests and indexes), :mod:`.layers` (blob streams, decompression, the budget),
:mod:`.tree` (tar members, whiteouts, site files) and :mod:`.reader` (the whole read).
httpx is imported in this package only (and in fetch), and only when a registry is read:
the names of the modules that import it are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from artifactcheck.release.registry.client_options import ImageLimits, RegistryOptions
from artifactcheck.release.registry.docker_config import (
    Credentials,
    default_docker_config,
    load_credentials,
)
from artifactcheck.release.registry.reference import (
    ImageReference,
    has_registry_host,
    parse_reference,
)

#: The names whose modules import httpx, by module, loaded on first use (PEP 562):
#: every run wires a release source, few read an image from a registry, and httpx's
#: stack is a large part of a small check's start-up (docs/benchmarks.md).
_LAZY_MODULES = {
    "layers": ("CHUNK",),
    "manifest": (
        "ACCEPT",
        "DOCKER_LIST",
        "DOCKER_MANIFEST",
        "DOCKER_SCHEMA1",
        "IMAGE_TYPES",
        "INDEX_TYPES",
        "LAYER_TYPES",
        "OCI_INDEX",
        "OCI_MANIFEST",
        "Descriptor",
    ),
    "reader": ("RegistryReader", "logger", "read_image"),
    "session": ("RETRY_STATUSES",),
    "tree": ("OPAQUE", "WHITEOUT"),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Credentials",
    "ImageLimits",
    "ImageReference",
    "RegistryOptions",
    "default_docker_config",
    "has_registry_host",
    "load_credentials",
    "parse_reference",
    *_LAZY,
]
