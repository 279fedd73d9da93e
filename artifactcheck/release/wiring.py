"""The release source a spec configures, wired to the readers that can load it.

:func:`artifactcheck.release.sources.build_expectations` turns templates, files and
ConfigMaps into one cache of expected releases; the readers it needs from outside
(release images from a registry or the local Docker engine, ConfigMaps from the
cluster) are chosen and connected here, so ``verify``, ``investigate`` and the
controller get the same source from the same spec.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Manifest
from artifactcheck.release import sources
from artifactcheck.release.sources import ConfigMapReader, Expectations, limits_of

if TYPE_CHECKING:  # cryptography loads only when a run asks for release trust
    from artifactcheck.release.guard import ReleaseGuard, ReleaseTrust


def build_expectations(
    spec: CheckSpec,
    fetcher: Fetcher,
    *,
    configmaps: ConfigMapReader | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    trust: ReleaseTrust | None = None,
) -> Expectations | None:
    """The release source configured in the spec, or None for consensus mode.

    A release image is read from its registry over the OCI distribution API when the
    reference names a registry host (or ``release_image_source: registry``), else
    through the local Docker engine. Release-manifest ConfigMaps are read with
    ``configmaps`` when given (the controller passes a watched reader on its own API
    client); otherwise, for one ``verify`` run, each load lists them once in the pods'
    namespace through ``kubeconfig``/``context``, never another namespace.

    ``trust`` (pins, release keys) admits every release manifest loaded
    (:mod:`artifactcheck.release.guard`).
    """
    if spec.release_configmaps is not None and configmaps is None:
        configmaps = _listed_configmaps(spec, kubeconfig, context)
    return sources.build_expectations(
        spec,
        fetcher,
        limits=limits_of(spec),
        read_image=_image_reader(spec),
        configmaps=configmaps,
        guard=_guard(trust, fetcher, spec),
    )


def _guard(trust: ReleaseTrust | None, fetcher: Fetcher, spec: CheckSpec) -> ReleaseGuard | None:
    if trust is None or not trust.active:
        return None
    from artifactcheck.release.guard import ReleaseGuard

    return ReleaseGuard(trust, fetcher=fetcher, limits=limits_of(spec))


def _listed_configmaps(
    spec: CheckSpec, kubeconfig: str | None, context: str | None
) -> ConfigMapReader:
    """Release ConfigMaps listed once per load in the pods' namespace (no watch)."""
    from artifactcheck.clients.kube import load_api_client
    from artifactcheck.release.configmaps import ConfigMapReleases

    assert spec.release_configmaps is not None
    if spec.kubernetes is None:  # also refused by the settings model
        raise ConfigError(
            "release_configmaps reads the pods' namespace: give kubernetes",
            field="release_configmaps",
        )
    return ConfigMapReleases(
        namespace=spec.kubernetes.namespace,
        selector=spec.release_configmaps.selector,
        connect=lambda: load_api_client(kubeconfig, context),
        watch=False,
    )


def _image_reader(spec: CheckSpec) -> Callable[[str, str, str], Manifest]:
    """How a release image is read: from its registry, or through the local engine."""
    source = spec.release_image_source
    if source == "auto" and not spec.release_image:
        return _from_docker_engine  # no release image: the reader is never asked
    # the registry modules load only for a run that names a release image
    from artifactcheck.release.registry import (
        RegistryOptions,
        default_docker_config,
        has_registry_host,
    )

    if source == "auto":
        source = "registry" if has_registry_host(spec.release_image or "") else "docker"
    if source == "registry":
        from artifactcheck.release.registry.reader import RegistryReader  # imports httpx

        return RegistryReader(
            RegistryOptions(
                docker_config=spec.registry_auth or default_docker_config(),
                ca_bundle=spec.registry_ca_bundle or spec.http.ca_bundle,
                insecure=frozenset(spec.registry_insecure),
            )
        )
    return _from_docker_engine


def _from_docker_engine(image: str, site: str, version: str) -> Manifest:
    from artifactcheck.clients.docker import DockerEngine

    with DockerEngine() as engine:
        return engine.manifest_from_image(image, path=site, version=version)
