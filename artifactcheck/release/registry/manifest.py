"""Image manifests and indexes: fetched, digest-checked, resolved to one image.

A reference pinned by digest names content, so the manifest's bytes must hash to it (a
mirror or proxy could serve anything); an index is resolved to the wanted platform, or
to its only image; the layers it lists are checked against the caps before any blob is
asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from artifactcheck.model.errors import ExpectationUnavailable
from artifactcheck.model.records import Record
from artifactcheck.release.registry.client_options import RegistryOptions
from artifactcheck.release.registry.reference import DIGEST, ImageReference
from artifactcheck.release.registry.session import Session, read_capped

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = (
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
)
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
IMAGE_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
LAYER_TYPES = frozenset(
    {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
    }
)


class Descriptor(Record):
    media_type: str
    digest: str
    size: int


def _descriptor(raw: Any, what: str) -> Descriptor:
    if not isinstance(raw, dict):
        raise ExpectationUnavailable(f"{what}: not a descriptor object")
    media, digest, size = raw.get("mediaType"), raw.get("digest"), raw.get("size")
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise ExpectationUnavailable(f"{what}: digest {digest!r} is not sha256:<64 hex>")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ExpectationUnavailable(f"{what}: size {size!r} invalid")
    return Descriptor(media_type=media if isinstance(media, str) else "", digest=digest, size=size)


def _fetch_manifest(
    session: Session, reference: str, pinned: str | None
) -> tuple[str, dict[str, Any], str]:
    """(media type, document, digest) of one manifest; its digest checked when pinned."""
    limits = session.options.limits
    what = f"{session.where}: manifest {session.ref.repository}@{reference}"
    response = session.get(f"manifests/{reference}", accept=ACCEPT)
    try:
        data = read_capped(response, limits.max_manifest_bytes, what)
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        claimed = response.headers.get("Docker-Content-Digest")
    finally:
        response.close()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if pinned is not None and digest != pinned:
        raise ExpectationUnavailable(
            f"{what}: content digest {digest} is not the pinned {pinned} (refused)"
        )
    if claimed and claimed.startswith("sha256:") and claimed != digest:
        raise ExpectationUnavailable(
            f"{what}: the registry says digest {claimed}, the bytes hash to {digest}"
        )
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ExpectationUnavailable(f"{what}: not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ExpectationUnavailable(f"{what}: not a JSON object")
    media = doc.get("mediaType") if isinstance(doc.get("mediaType"), str) else content_type
    if media in DOCKER_SCHEMA1 or doc.get("schemaVersion") == 1:
        raise ExpectationUnavailable(f"{what}: Docker schema 1 manifests are not supported")
    if not media:  # an OCI manifest may omit mediaType: tell by its fields
        media = OCI_INDEX if "manifests" in doc else OCI_MANIFEST
    if media not in INDEX_TYPES and media not in IMAGE_TYPES:
        raise ExpectationUnavailable(f"{what}: unsupported media type {media!r}")
    if doc.get("schemaVersion") != 2:
        raise ExpectationUnavailable(f"{what}: schemaVersion must be 2")
    return media, doc, digest


def _pick_platform(doc: Mapping[str, Any], options: RegistryOptions, what: str) -> Descriptor:
    """The image for the wanted platform in an index; the only image when there is one."""
    raw = doc.get("manifests")
    if not isinstance(raw, list) or not raw:
        raise ExpectationUnavailable(f"{what}: an index with no manifests")
    if len(raw) > options.limits.max_layers:
        raise ExpectationUnavailable(f"{what}: {len(raw)} manifests in the index, over the cap")
    images: list[tuple[Descriptor, tuple[str, str]]] = []
    for i, item in enumerate(raw):
        desc = _descriptor(item, f"{what}: manifests[{i}]")
        platform = item.get("platform") if isinstance(item.get("platform"), dict) else {}
        annotations = item.get("annotations") if isinstance(item.get("annotations"), dict) else {}
        if annotations.get("vnd.docker.reference.type") == "attestation-manifest":
            continue  # BuildKit's provenance: not an image
        images.append((desc, (str(platform.get("os", "")), str(platform.get("architecture", "")))))
    for desc, plat in images:
        if plat == options.platform:
            return desc
    if len(images) == 1:
        return images[0][0]
    found = ", ".join(sorted({"/".join(p) for _, p in images})) or "none"
    raise ExpectationUnavailable(
        f"{what}: no {'/'.join(options.platform)} image in the index (it has: {found})"
    )


def image_layers(session: Session, ref: ImageReference) -> tuple[str, list[Descriptor]]:
    """The image's manifest digest and its layers, checked against the caps."""
    limits = session.options.limits
    media, doc, digest = _fetch_manifest(session, ref.reference, ref.digest)
    if media in INDEX_TYPES:
        chosen = _pick_platform(doc, session.options, f"{session.where}: index {ref}")
        media, doc, _ = _fetch_manifest(session, chosen.digest, chosen.digest)
        if media not in IMAGE_TYPES:
            raise ExpectationUnavailable(
                f"{session.where}: {ref}: the index points at {media}, not an image"
            )
    raw_layers = doc.get("layers")
    if not isinstance(raw_layers, list):
        raise ExpectationUnavailable(f"{session.where}: {ref}: manifest has no layers list")
    if len(raw_layers) > limits.max_layers:
        raise ExpectationUnavailable(
            f"{session.where}: {ref}: {len(raw_layers)} layers, more than the cap of "
            f"{limits.max_layers}"
        )
    layers = [_descriptor(x, f"{ref}: layers[{i}]") for i, x in enumerate(raw_layers)]
    for i, layer in enumerate(layers):
        if layer.media_type and layer.media_type not in LAYER_TYPES:
            raise ExpectationUnavailable(
                f"{ref}: layers[{i}] has media type {layer.media_type!r} (foreign, "
                "non-distributable or not a layer): cannot be read"
            )
    declared = sum(layer.size for layer in layers)
    if declared > limits.max_download_bytes:
        raise ExpectationUnavailable(
            f"{ref}: layers declare {declared} bytes, more than the cap of "
            f"{limits.max_download_bytes}"
        )
    return digest, layers
