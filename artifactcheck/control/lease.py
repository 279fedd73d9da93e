"""Leader election on a ``coordination.k8s.io/v1`` Lease: :class:`LeaseLock`.

Two controller replicas must never both act. The lock is client-go's ``LeaseLock`` +
``tryAcquireOrRenew``: every write to the Lease carries the ``resourceVersion`` it
read as a precondition, so of two replicas racing, the API server lets exactly one
win. A replica whose lease could not be renewed in time stops writing: the actor
raises :class:`~artifactcheck.act.kube_actor.NotLeader` (defined with the actor, which
raises it; re-exported here).

The leader also publishes where its verdict API answers (``host:port``) in an
annotation of the Lease, written in the same patch as every renewal; a standby keeps
the last record it read (:attr:`LeaseLock.observed`) and forwards verdict requests
there (artifactcheck/control/forward.py, docs/verdict-api.md).
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from artifactcheck.act.kube_actor import NotLeader
from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    MERGE_PATCH,
    ApiClient,
    ApiStatus,
    CoordinationV1Api,
    Logger,
    Timeout,
    aware,
    call_json,
    client_without_retries,
    close_client,
    lease_model,
    micro_time,
    parse_time,
    raw,
    utcnow,
)
from artifactcheck.clients.kube_bodies import Lease, LeaseSpec
from artifactcheck.model.errors import ConfigError, DependencyError
from artifactcheck.model.names import LEASE_NAME

__all__ = ["LEADER_ADDRESS", "LeaseLock", "LeaseNamespaceMissing", "LeaseRecord", "NotLeader"]

_LOG = logging.getLogger(__name__)

#: The Lease annotation where the leader publishes its verdict API's ``host:port``.
LEADER_ADDRESS = "artifactcheck.io/leader-address"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """Who held the Lease when it was last read, until when, and where it answers."""

    holder: str | None
    address: str | None
    renewed: datetime | None
    duration: int

    def valid_at(self, now: datetime) -> bool:
        """Whether a holder's lease is still running at ``now`` (by this replica's clock)."""
        if not self.holder or self.renewed is None:
            return False
        return self.renewed.timestamp() + self.duration > aware(now).timestamp()

    def other_leader(self, identity: str, now: datetime) -> str | None:
        """The address published by a holder other than ``identity`` whose lease runs
        at ``now``; None when nobody else leads or no address was published."""
        if self.holder is None or self.holder == identity or not self.valid_at(now):
            return None
        return self.address


def _record(lease: Lease) -> LeaseRecord:
    spec = body.typed(lease.get("spec"), LeaseSpec)
    annotations = body.meta(lease).get("annotations")
    address = annotations.get(LEADER_ADDRESS) if isinstance(annotations, Mapping) else None
    held_for = spec.get("leaseDurationSeconds")
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or "") or None,
        address=address if isinstance(address, str) and address else None,
        renewed=parse_time(spec.get("renewTime")),
        duration=held_for if isinstance(held_for, int) else 0,
    )


class LeaseNamespaceMissing(ConfigError):
    """The Lease's namespace does not exist: a configuration error, not an outage."""


class LeaseLock:
    """Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go does it.

    :meth:`try_acquire_or_renew` is client-go's ``tryAcquireOrRenew``: read the Lease;
    if another identity holds it and ``renewTime + leaseDurationSeconds`` is still in
    the future, fail; otherwise write ourselves as holder with the ``resourceVersion``
    we read as a precondition, so of two replicas racing, the API server lets exactly
    one win (the other gets 409 and returns False). Time is passed in (``now``) so the
    expiry rule can be tested without sleeping; unlike client-go, expiry is judged from
    ``renewTime`` rather than from the local time the record was last observed, so
    replicas need roughly synchronised clocks (within the lease duration).

    Two deliberate differences in the wire format, both because of how the Python
    client serialises ``datetime`` (``isoformat()`` drops the fraction when the
    microseconds are 0, and a real API server then rejects the ``MicroTime`` with 400):
    the record is written with a JSON merge patch carrying ``metadata.resourceVersion``
    (the same optimistic concurrency as client-go's PUT) whose times are formatted here
    with exactly six fractional digits, and an absent Lease is first created empty.
    """

    def __init__(
        self,
        *,
        api_client: ApiClient,
        namespace: str,
        name: str = LEASE_NAME,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
        logger: Logger | None = None,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.timeout = request_timeout
        self.log: Logger = logger or _LOG
        # Its own connection pool without urllib3's retries: a retried read timeout
        # would spend the renew deadline several times over. Closed with the lock.
        client = client_without_retries(api_client)
        self._closer = weakref.finalize(self, close_client, client)
        self._api = CoordinationV1Api(client)
        self._deadline: float | None = None
        #: The record as last read (None before the first read): a standby forwards
        #: verdict requests to the address it names. Replaced whole, never mutated, so
        #: other threads read it without a lock.
        self.observed: LeaseRecord | None = None

    def close(self) -> None:
        """Close the lock's own connections (also done when it is collected)."""
        self._closer()

    def _timeout(self) -> Timeout:
        """The request timeout, cut to what is left before the current deadline (a
        renewal that cannot finish before the renew deadline is worthless)."""
        if self._deadline is None:
            return self.timeout
        left = self._deadline - time.monotonic()
        if left <= 0.01:
            raise DependencyError(f"lease {self.namespace}/{self.name}: the renew deadline passed")
        connect, read = self.timeout if isinstance(self.timeout, tuple) else (self.timeout,) * 2
        return (min(connect, left), min(read, left))

    def get(self) -> Lease | None:
        """The Lease as JSON, or None when it does not exist yet."""
        try:
            found = call_json(
                f"get lease {self.namespace}/{self.name}",
                lambda: self._api.read_namespaced_lease(
                    self.name, self.namespace, **raw(self._timeout())
                ),
                passthrough=(404,),
            )
        except ApiStatus:
            self.observed = LeaseRecord(holder=None, address=None, renewed=None, duration=0)
            return None
        lease = body.typed(found, Lease)
        self.observed = _record(lease)
        return lease

    def holder(self) -> str | None:
        """The identity currently written in the Lease, if any (expired or not)."""
        lease = self.get()
        spec = lease.get("spec") if lease else None
        return (spec.get("holderIdentity") or None) if isinstance(spec, Mapping) else None

    def _create_empty(self) -> Lease | None:
        """Create the Lease with no holder; None when another candidate created it first."""
        new = lease_model(self.name, self.namespace)
        try:
            created = call_json(
                f"create lease {self.namespace}/{self.name}",
                lambda: self._api.create_namespaced_lease(
                    self.namespace, new, **raw(self._timeout())
                ),
                passthrough=(404, 409),
            )
        except ApiStatus as st:
            if st.status == 404:
                raise LeaseNamespaceMissing(
                    f"cannot create the leader Lease {self.namespace}/{self.name}: "
                    f"namespace {self.namespace!r} does not exist (give --lease-namespace "
                    f"the namespace the controller runs in): {st.message}"
                ) from st
            return None
        return body.typed(created, Lease)

    def _write(self, lease: Lease, spec: LeaseSpec, address: str | None) -> bool:
        """Merge-patch the record, conditional on the resourceVersion read; False on 409.

        ``address`` (None: removed) is the holder's verdict API, in the same write: a
        standby never reads a new holder with the previous holder's address."""
        patch = {
            "metadata": {
                "resourceVersion": body.meta(lease).get("resourceVersion"),
                "annotations": {LEADER_ADDRESS: address},
            },
            "spec": spec,
        }
        try:
            call_json(
                f"patch lease {self.namespace}/{self.name}",
                lambda: self._api.patch_namespaced_lease(
                    self.name,
                    self.namespace,
                    patch,
                    _content_type=MERGE_PATCH,
                    **raw(self._timeout()),
                ),
                passthrough=(404, 409),
            )
        except ApiStatus as st:
            self.log.debug("lease %s: lost the race (%d %s)", self.name, st.status, st.message)
            return False
        return True

    def try_acquire_or_renew(
        self,
        identity: str,
        lease_duration: float,
        now: datetime,
        *,
        deadline: float | None = None,
        address: str | None = None,
    ) -> bool:
        """Become or stay the leader; False when another identity holds a valid lease.

        ``deadline`` (``time.monotonic()``) bounds every request's timeouts: client-go's
        renew deadline. Raises DependencyError when the API server cannot be reached in
        time: the caller must then stop acting by its deadline. ``address`` is where
        this replica's verdict API answers, published on the Lease while it leads.
        """
        self._deadline = deadline
        try:
            return self._try_acquire_or_renew(identity, lease_duration, now, address)
        finally:
            self._deadline = None

    def _try_acquire_or_renew(
        self, identity: str, lease_duration: float, now: datetime, address: str | None
    ) -> bool:
        now = aware(now)
        duration = max(1, math.ceil(lease_duration))
        lease = self.get()
        created = lease is None
        if lease is None:
            lease = self._create_empty()
            if lease is None:
                self.log.debug("lease %s: created by another candidate first", self.name)
                return False
        spec = body.typed(lease.get("spec"), LeaseSpec)
        holder = str(spec.get("holderIdentity") or "")
        renewed = parse_time(spec.get("renewTime"))
        held_for = spec.get("leaseDurationSeconds")
        held_for = held_for if isinstance(held_for, int) else 0
        if holder and holder != identity and renewed is not None:
            if renewed.timestamp() + held_for > now.timestamp():
                return False
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        record: LeaseSpec = {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration,
            "renewTime": micro_time(now),
        }
        if holder == identity and spec.get("acquireTime"):
            record["acquireTime"] = spec["acquireTime"]
        else:
            record["acquireTime"] = micro_time(now)
        if holder != identity:
            # client-go: a new Lease starts at 0, every change of holder counts one.
            record["leaseTransitions"] = 0 if created else transitions + 1
        if not self._write(lease, record, address):
            return False
        if holder != identity:
            self.log.info(
                "lease %s/%s acquired by %s (was %s)",
                self.namespace,
                self.name,
                identity,
                holder or "free",
            )
        return True

    def release(
        self, identity: str, now: datetime | None = None, *, deadline: float | None = None
    ) -> bool:
        """Give the lease up at shutdown, so a standby takes over at once (client-go's
        ``ReleaseOnCancel``); does nothing unless ``identity`` holds it."""
        self._deadline = deadline
        try:
            return self._release(identity, now)
        finally:
            self._deadline = None

    def _release(self, identity: str, now: datetime | None) -> bool:
        moment = micro_time(aware(now) if now is not None else utcnow())
        lease = self.get()
        if lease is None:
            return False
        spec = body.typed(lease.get("spec"), LeaseSpec)
        if spec.get("holderIdentity") != identity:
            return False
        released = self._write(
            lease,
            {
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "acquireTime": moment,
                "renewTime": moment,
            },
            None,
        )
        if released:
            self.log.info("lease %s/%s released by %s", self.namespace, self.name, identity)
        return released
