"""The registry reader: one image's site directory, as a native manifest.

It ties the parts together in the order the rules need: reference checked, manifest
resolved and capped, each layer streamed, verified and applied in turn, then the site
path checked to be a directory and its files built into the manifest, naming the image
by its digest.
"""

from __future__ import annotations

import logging
import posixpath
import random
import time
from collections.abc import Callable

import httpx

from artifactcheck.manifests import native
from artifactcheck.model.errors import ConfigError, ManifestError
from artifactcheck.model.records import replace
from artifactcheck.model.values import Manifest
from artifactcheck.release.registry.client_options import RegistryOptions
from artifactcheck.release.registry.docker_config import default_docker_config
from artifactcheck.release.registry.layers import BlobReader, Budget, decompressed
from artifactcheck.release.registry.manifest import image_layers
from artifactcheck.release.registry.reference import ImageReference, parse_reference
from artifactcheck.release.registry.session import Session
from artifactcheck.release.registry.tree import Tree, apply_layer

logger = logging.getLogger("artifactcheck.release.registry")


class RegistryReader:
    """``read_image(image, site, version) -> Manifest`` over the distribution API.

    Plugs into :func:`artifactcheck.release.sources.build_expectations` as ``read_image``; one
    instance may be shared by threads (each call has its own HTTP client).
    """

    def __init__(
        self,
        options: RegistryOptions | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.options = options or RegistryOptions()
        self.transport = transport
        self.sleep = sleep
        self.rng = rng or random.Random()

    def __call__(self, image: str, site: str, version: str) -> Manifest:
        return self.read(image, site=site, version=version)

    def read(self, image: str, *, site: str, version: str) -> Manifest:
        """Hash every regular file under ``site`` in a registry image into a manifest."""
        ref = parse_reference(image)
        if not site.startswith("/"):
            raise ConfigError(f"path: must be absolute inside the image, got {site!r}")
        site_dir = posixpath.normpath(site).strip("/")
        if ".." in site_dir.split("/"):
            raise ConfigError(f"path: must not contain '..', got {site!r}")
        session = Session(
            ref, self.options, transport=self.transport, sleep=self.sleep, rng=self.rng
        )
        try:
            return self._read(session, ref, site_dir, site, version)
        finally:
            session.close()

    def _read(
        self, session: Session, ref: ImageReference, site_dir: str, site: str, version: str
    ) -> Manifest:
        top, layers = image_layers(session, ref)
        budget = Budget(session)
        tree = Tree(site=site_dir)
        for i, layer in enumerate(layers):
            where = f"{ref}: layer {i + 1}/{len(layers)} {layer.digest[:19]}"
            response = session.get(f"blobs/{layer.digest}")
            try:
                blob = BlobReader(response, layer, budget)
                apply_layer(tree, decompressed(blob, layer.media_type, budget), blob, budget, where)
            finally:
                response.close()
        _check_site(tree, ref, site)
        return _manifest_of(tree, ref, site, version, top)


def _check_site(tree: Tree, ref: ImageReference, site: str) -> None:
    """The site path is a directory in the image, and so is every ancestor of it."""
    kind = tree.kinds.get(tree.site)
    for ancestor, what in sorted(tree.kinds.items()):
        if ancestor != tree.site and what != "dir":
            raise ManifestError(f"{ref}:{site}: /{ancestor} is a {what} in the image")
    if kind is None and not tree.files:
        raise ManifestError(f"{ref}:{site}: no such directory in the image")
    if kind not in (None, "dir"):
        raise ManifestError(
            f"{ref}:{site}: a {kind} in the image, not a directory (give the directory "
            "itself as the path)"
        )


def _manifest_of(tree: Tree, ref: ImageReference, site: str, version: str, top: str) -> Manifest:
    """The native manifest of the site's files, naming the image by its digest."""
    if tree.symlinks:
        logger.info(
            "%s:%s: %d symlinks skipped (as manifest build skips them)",
            ref,
            site,
            tree.symlinks,
        )
    builder = native.Builder(version=version, image_id=top)
    for entry in tree.files.values():
        builder.add(entry.path, entry.hashes["sha256"], entry.size or 0)
    manifest = builder.manifest(source=f"{ref.registry}/{ref.repository}@{top}:{site}")
    if tree.rejected:
        cut = len(tree.site) + 1
        rejected = tuple(sorted((k[cut:], why) for k, why in tree.rejected.items()))
        manifest = replace(manifest, rejected=rejected)
    return manifest


def _default_options() -> RegistryOptions:
    return RegistryOptions(docker_config=default_docker_config())


def read_image(image: str, site: str, version: str) -> Manifest:
    """The Docker engine's ``read_image`` signature, over the registry, default options.

    Credentials come from ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``
    when one exists; TLS is verified against the system trust store.
    """
    return RegistryReader(_default_options())(image, site, version)
