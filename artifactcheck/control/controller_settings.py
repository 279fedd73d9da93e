"""How the controller runs: :class:`ControllerSettings`, and the rules on them.

Not what it checks (that is each ArtifactCheck's spec): identity, the Lease, watch
timeouts and backoff, sharding, where this replica's verdict API is advertised.
"""

from __future__ import annotations

from dataclasses import dataclass

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.names import LEASE_NAME
from artifactcheck.tenancy.admission import AdminConfig

__all__ = ["ControllerSettings", "renew_deadline", "renew_period_for"]


@dataclass
class ControllerSettings:
    """How the controller runs (not what it checks: that is each ArtifactCheck's spec)."""

    namespace: str | None = None  # None = all namespaces
    identity: str = "artifactcheck"
    #: None: the namespace the controller runs in (POD_NAMESPACE, else the service
    #: account's namespace file); neither is a configuration error.
    lease_namespace: str | None = None
    lease_name: str = LEASE_NAME
    lease_duration: float = 15.0
    #: How often the Lease is renewed (or, by a standby, tried): client-go's RetryPeriod.
    renew_period: float = 2.0
    #: client-go's renewDeadline: a leader that could not renew for this long stops
    #: acting and gives up leadership, before a standby may take the lease over
    #: (lease_duration). None: two thirds of lease_duration, as client-go's defaults.
    renew_deadline: float | None = None
    watch_timeout: int = 30
    #: How long the fast path waits for more pods before checking the ones pending:
    #: short, as a gated pod's wait includes it (pods that come during a check are
    #: batched into the next one anyway).
    new_pod_debounce: float = 0.05
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    admin_config: str | None = None  # path of the cluster admin's tenancy configuration
    admin: AdminConfig | None = None  # the same, already loaded (wins over the path)
    #: This replica owns the ArtifactChecks of shard ``shard`` of ``total_shards``
    #: (control/shard.py, docs/scaling.md); 0 of 1 owns them all.
    shard: int = 0
    total_shards: int = 1
    #: ``host:port`` where this replica's verdict API answers the other replicas,
    #: published on the Lease while it leads. None: the port of the server that serves
    #: /metrics (the ``artifactcheck-metrics`` Service's) on $POD_IP, else on the
    #: address it binds unless that is a wildcard (then nothing is published).
    advertise_address: str | None = None


def renew_deadline(settings: ControllerSettings) -> float:
    """client-go's renewDeadline: given, or two thirds of the lease duration."""
    deadline = settings.renew_deadline
    if deadline is None:
        deadline = settings.lease_duration * 2 / 3
    if not 0 < deadline < settings.lease_duration:
        raise ConfigError(
            f"renew deadline {deadline:g}s must be shorter than the lease duration "
            f"{settings.lease_duration:g}s: a standby may take over at expiry"
        )
    return deadline


def renew_period_for(lease_duration: float) -> float:
    """client-go's RetryPeriod in its default proportion to the lease duration (2 s of
    15 s), and at least a second: how often a leader renews. A renewal every third of
    the lease left a leader, after one failure, too few tries before its deadline, and
    a few failed writes in a row under a loaded API server cost it the lease."""
    return max(1.0, lease_duration * 2 / 15)
