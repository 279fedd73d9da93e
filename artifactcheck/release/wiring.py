"""The release source a spec configures, wired to the readers that can load it.

``release`` holds one kind of source (:class:`artifactcheck.model.settings.ReleaseSource`);
:func:`build_expectations` is the one place that turns each kind into a cache of expected
releases, connecting the readers it needs from outside (release images from a registry or
the local Docker engine, ConfigMaps from the cluster), so ``verify``, ``investigate`` and
the controller get the same source from the same spec. A new kind of source is a model
in ``model/settings.py`` and a case here with its reader; the controller refuses it
until :data:`artifactcheck.tenancy.admission.CONTROLLER_RELEASE_KINDS` admits it
(CONTRIBUTING.md, "A new kind of release source").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, assert_never

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import (
    CheckSpec,
    ReleaseConfigMaps,
    ReleaseImage,
    ReleaseManifests,
)
from artifactcheck.model.values import Manifest
from artifactcheck.release import sources
from artifactcheck.release.sources import ConfigMapReader, Expectations, limits_of

if TYPE_CHECKING:  # cryptography loads only when a run asks for release trust
    from artifactcheck.release.guard import ReleaseGuard, ReleaseTrust

#: Why a guarded run refuses a source that pins and keys do not apply to.
_UNSIGNED = (
    "pins and release keys apply to release manifests (release.manifests, "
    "release.config_maps), not to release images or consensus"
)


def build_expectations(
    spec: CheckSpec,
    fetcher: Fetcher,
    *,
    configmaps: ConfigMapReader | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    trust: ReleaseTrust | None = None,
    read_image: Callable[[str, str, str], Manifest] | None = None,
) -> Expectations | None:
    """The release source configured in the spec, or None for consensus mode.

    A release image is read from its registry over the OCI distribution API when the
    reference names a registry host (or ``source: registry``), else through the local
    Docker engine (``read_image`` replaces both). Release-manifest ConfigMaps are read
    with ``configmaps`` when given (the controller passes a watched reader on its own API
    client); otherwise, for one ``verify`` run, each load lists them once in the pods'
    namespace through ``kubeconfig``/``context``, never another namespace.

    ``trust`` (pins, release keys) admits every release manifest loaded
    (:mod:`artifactcheck.release.guard`); a source it does not apply to is a ConfigError.
    """
    guard = _guard(trust, fetcher, spec)
    if spec.release is None or (guard is not None and not spec.release.signed):
        if guard is not None:
            raise ConfigError(_UNSIGNED, field="release")
        return None
    limits = limits_of(spec)
    kind = spec.release.kind
    if isinstance(kind, ReleaseManifests):
        return sources.manifest_expectations(spec, fetcher, limits=limits, guard=guard)
    if isinstance(kind, ReleaseConfigMaps):
        reader = configmaps or _listed_configmaps(spec, kind, kubeconfig, context)
        return sources.configmap_expectations(spec, reader, limits=limits, guard=guard)
    if isinstance(kind, ReleaseImage):
        return sources.image_expectations(
            kind, read_image or _image_reader(spec, kind), max_versions=spec.cache_versions
        )
    assert_never(kind)


def _guard(trust: ReleaseTrust | None, fetcher: Fetcher, spec: CheckSpec) -> ReleaseGuard | None:
    if trust is None or not trust.active:
        return None
    from artifactcheck.release.guard import ReleaseGuard

    return ReleaseGuard(trust, fetcher=fetcher, limits=limits_of(spec))


def _listed_configmaps(
    spec: CheckSpec, kind: ReleaseConfigMaps, kubeconfig: str | None, context: str | None
) -> ConfigMapReader:
    """Release ConfigMaps listed once per load in the pods' namespace (no watch)."""
    from artifactcheck.clients.kube import load_api_client
    from artifactcheck.release.configmaps import ConfigMapReleases

    if spec.kubernetes is None:  # also refused by the settings model
        raise ConfigError(
            "release.config_maps reads the pods' namespace: give kubernetes",
            field="release.config_maps",
        )
    return ConfigMapReleases(
        namespace=spec.kubernetes.namespace,
        selector=kind.selector,
        connect=lambda: load_api_client(kubeconfig, context),
        watch=False,
    )


def _image_reader(spec: CheckSpec, image: ReleaseImage) -> Callable[[str, str, str], Manifest]:
    """How a release image is read: from its registry, or through the local engine."""
    # the registry modules load only for a run that names a release image
    from artifactcheck.release.registry import (
        RegistryOptions,
        default_docker_config,
        has_registry_host,
    )

    source = image.source
    if source == "auto":
        source = "registry" if has_registry_host(image.reference) else "docker"
    if source == "registry":
        from artifactcheck.release.registry.reader import RegistryReader  # imports httpx

        registry = image.registry
        return RegistryReader(
            RegistryOptions(
                docker_config=registry.auth or default_docker_config(),
                ca_bundle=registry.ca_bundle or spec.http.ca_bundle,
                insecure=frozenset(registry.insecure),
            )
        )
    return _from_docker_engine


def _from_docker_engine(image: str, site: str, version: str) -> Manifest:
    from artifactcheck.clients.docker import DockerEngine

    with DockerEngine() as engine:
        return engine.manifest_from_image(image, path=site, version=version)
