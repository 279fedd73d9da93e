"""One check's fetcher and release source, wired by what admission granted it.

Its fetcher connects only to its own pods and the sources admitted (the egress
policy), sends each granted credential only where the admin allows, and its releases
must satisfy the pins and release keys the check asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from artifactcheck.control.state import CheckState
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.headers import configured_headers
from artifactcheck.model.errors import ConfigError, ExpectationUnavailable
from artifactcheck.model.settings import CheckSpec, HttpSettings
from artifactcheck.model.values import Manifest
from artifactcheck.release.sources import CallableSource, Expectations
from artifactcheck.release.wiring import build_expectations
from artifactcheck.tenancy.admission import source_hosts
from artifactcheck.tenancy.credentials import CredentialScope
from artifactcheck.tenancy.egress import Address, AddressRules, EgressPolicy

if TYPE_CHECKING:  # cryptography loads only when a check asks for release trust
    from artifactcheck.release.guard import ReleaseTrust

__all__ = [
    "credential_scope",
    "egress_for",
    "expectations_or_unavailable",
    "instance_addresses",
    "trust_of",
]


def instance_addresses(state: CheckState) -> Callable[[], frozenset[Address]]:
    """The addresses of the check's pods now, for the egress policy and the
    credential scope."""

    def addresses() -> frozenset[Address]:
        # asked on every new connection: a set, so a lookup is O(1) (a pass over
        # every pod per connection made a start-up quadratic in the pods), rebuilt
        # from the kept addresses only when the pods changed (re-parsing every
        # address per new pod dominated the event loop while pods came one by one)
        if state.hosts is None:
            state.hosts = frozenset(state.addresses.values())
        return state.hosts

    return addresses


def egress_for(state: CheckState, rules: AddressRules) -> EgressPolicy:
    """Where the check's fetcher may connect: its pods, and the sources admitted."""
    assert state.admission is not None
    return EgressPolicy(
        rules=rules,
        sources=source_hosts(state.admission),
        instance_addresses=instance_addresses(state),
    )


def credential_scope(state: CheckState) -> CredentialScope:
    """The granted credentials' headers, read now (files, environment), each sent
    only where the admin's ``hosts`` and ``send_to_pods`` say; ConfigError names the
    credential whose file or variable is missing."""
    assert state.admission is not None
    resolved = []
    for cred in state.admission.credentials:
        try:
            values = configured_headers(
                HttpSettings(header_files=cred.header_files, header_env=cred.header_env)
            )
        except ConfigError as exc:
            raise ConfigError(f"admin credential {cred.name!r}: {exc}") from exc
        resolved.append((cred, values))
    return CredentialScope(resolved, instance_addresses(state))


def expectations_or_unavailable(
    spec: CheckSpec,
    fetcher: Fetcher,
    log_: logging.LoggerAdapter[logging.Logger],
    *,
    api_client: Any = None,
    namespace: str | None = None,
    trust: Callable[[], ReleaseTrust | None] = lambda: None,
) -> Expectations | None:
    """The check's release source; one that cannot be used (a granted release file
    missing, two files declaring one version) makes every verdict ``inconclusive`` with
    that reason, so the check keeps reporting instead of its task dying.

    Release ConfigMaps are listed and watched in the check's own ``namespace`` only,
    through the controller's API client (borrowed, never closed here).
    """
    try:
        configmaps = None
        kind = spec.release.config_maps if spec.release is not None else None
        if kind is not None and api_client is not None and namespace:
            from artifactcheck.release.configmaps import ConfigMapReleases

            configmaps = ConfigMapReleases(
                namespace=namespace,
                selector=kind.selector,
                api_client=api_client,
                watch=True,
            )
        return build_expectations(spec, fetcher, configmaps=configmaps, trust=trust())
    except ConfigError as exc:
        log_.error("release source unusable: %s", exc)
        reason = str(exc)

        async def unavailable(version: str) -> Manifest:
            raise ExpectationUnavailable(reason)

        source = CallableSource(unavailable, description="unusable release source")
        return Expectations(source, max_versions=spec.cache_versions)


def trust_of(state: CheckState) -> ReleaseTrust | None:
    """What the check's releases must satisfy: pins in its status, signatures by the
    admin's release keys it was granted (ConfigError naming a key that cannot be read:
    then every verdict is inconclusive with that reason, never an unsigned release
    trusted)."""
    keys = state.admission.release_keys if state.admission is not None else ()
    if state.pins is None and not keys:
        return None
    from artifactcheck.release import dsse
    from artifactcheck.release.guard import ReleaseTrust

    loaded: list[dsse.PublicKey] = []
    for key in keys:
        try:
            data, where = key.read()
            loaded.extend(dsse.load_public_keys(data, where))
        except OSError as exc:
            raise ConfigError(f"admin release key {key.name!r}: {exc.strerror or exc}") from exc
        except dsse.KeyFileError as exc:
            raise ConfigError(str(exc)) from exc
    return ReleaseTrust(pins=state.pins, keys=tuple(loaded))


def watched_release(spec: CheckSpec) -> bool:
    """Whether the check's releases are watched (ConfigMaps: an edit is seen when made)
    rather than read again every interval (a URL's manifest, whose rebuild only a new
    read can catch)."""
    return spec.release is not None and spec.release.config_maps is not None
