"""What the controller keeps per ArtifactCheck: :class:`CheckState` (admitted) and
:class:`RefusedCheck` (refused by admission), and the small readings of an object's
metadata and status they are built from."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from artifactcheck.clients.kube_bodies import Pod
from artifactcheck.control.release_pins import StatusPins
from artifactcheck.judge.compare import JudgeCache
from artifactcheck.judge.decide import History
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Instance, Observation, Report
from artifactcheck.release.sources import Expectations
from artifactcheck.tenancy.admission import Admission
from artifactcheck.tenancy.egress import Address, parse_address

__all__ = [
    "CheckState",
    "PodSummary",
    "RefusedCheck",
    "address_of",
    "creation_order",
    "key_of",
    "transitions_of",
]


@dataclass
class CheckState:
    """Everything the leader keeps for one ArtifactCheck."""

    key: str
    namespace: str
    name: str
    spec: CheckSpec
    generation: int
    history: History = field(default_factory=History)
    pods: dict[str, Instance] = field(default_factory=dict)
    #: Per pod, what the actions read before writing (kept from the watch, so acting
    #: needs no GET): see :func:`artifactcheck.discover.kube_pods.actionable_copy`.
    objects: dict[str, Pod] = field(default_factory=dict)
    observations: dict[str, Observation] = field(default_factory=dict)
    #: Each pod's address (parsed once, when the pod comes or moves), and the set of
    #: them the egress policy asks on every connection; None: to be rebuilt (a pod
    #: came, went or moved; rebuilding is a set of the kept addresses, no parsing).
    addresses: dict[str, Address] = field(default_factory=dict)
    hosts: frozenset[Address] | None = None
    #: The last verdict of each pod and its inputs: a cycle judges only what changed.
    judged: JudgeCache = field(default_factory=JudgeCache)
    #: Judging, deciding and acting, one cycle at a time: observing is not in it, so a
    #: new pod is observed (and then judged) while a full cycle still fetches.
    judging: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Set once the first full cycle is done: until then it checks every pod itself.
    started: asyncio.Event = field(default_factory=asyncio.Event)
    ready_since: dict[str, float] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    #: Pods deleted since the last cycle: their policy memory is dropped at its end
    #: (:func:`artifactcheck.control.candidates.forget_gone`).
    gone: set[str] = field(default_factory=set)
    last_status: dict[str, Any] | None = None
    last_report: Report | None = None
    expectations: Expectations | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    synced: bool = False
    admission: Admission | None = None
    throttled: str | None = None  # why the last cycle waited for the request budget
    cycle_ends: list[float] = field(default_factory=list)  # monotonic, last 100 cycles
    #: condition type -> (status, lastTransitionTime) as last written (or as found in
    #: the object at start-up), so a transition time changes only with its status.
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    opened: set[str] = field(default_factory=set)  # gates opened by the last cycle
    #: ``releasePins``: the check's pins, kept in a ConfigMap of the controller's
    #: namespace and mirrored in the status (control/release_pins.py,
    #: control/pins_store.py); None without ``releasePins: true``.
    pins: StatusPins | None = None
    #: (version, sha256) of the release changes a Warning Event was written for (those
    #: already in the status at start-up count as announced: no repeat after a restart).
    announced: set[tuple[str, str]] = field(default_factory=set)
    #: The object as last seen (its annotations, its status at start-up).
    latest: dict[str, Any] | None = None
    #: ``NAMESPACE/NAME`` of the ConfigMap that keeps the pins (control/pins_store.py),
    #: once read; the versions an erasure of it forgot, until its Event is written.
    pins_store: str | None = None
    erased: list[str] | None = None
    #: version -> when this controller first saw a pod report it (epoch seconds): with
    #: the pins, where the release a rollout replaced comes from (control/skew_window.py).
    versions_seen: dict[str, float] = field(default_factory=dict)
    #: The missing previous release files a Warning Event was written for (once each).
    skew_warned: str | None = None

    def quarantined(self) -> int:
        """How many of the check's pods the policy holds in quarantine."""
        return sum(1 for s in self.history.instances.values() if s.quarantined)


@dataclass
class RefusedCheck:
    """An ArtifactCheck admission refused: nothing runs for it, its status says why."""

    key: str
    obj: dict[str, Any]
    generation: int
    admission: Admission


#: A listed pod as a check keeps it: the instance, since when it is ready, the copy
#: its actions start from (:func:`artifactcheck.discover.kube_pods.actionable_copy`).
PodSummary = tuple[Instance, "datetime | None", Pod]


def key_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of a watched object, as events and lists name it."""
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace')}/{meta.get('name')}"


def address_of(instance: Instance) -> Address | None:
    """The IP address a pod is reached at (None: its URL names no IP literal)."""
    return parse_address(urlsplit(instance.base_url).hostname or "")


def creation_order(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """Sort key: oldest ArtifactCheck first (RFC 3339 stamps sort as text), then name."""
    meta = obj.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def transitions_of(obj: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The (status, lastTransitionTime) of each condition already in an object's
    status: a restarted controller keeps the transition times its predecessor wrote."""
    out: dict[str, tuple[str, str]] = {}
    status = obj.get("status") or {}
    for c in status.get("conditions") or [] if isinstance(status, Mapping) else []:
        if isinstance(c, Mapping) and c.get("type") and c.get("lastTransitionTime"):
            out[str(c["type"])] = (str(c.get("status")), str(c["lastTransitionTime"]))
    return out
