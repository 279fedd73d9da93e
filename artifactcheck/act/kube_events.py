"""Events about the objects artifactcheck acts on, aggregated like client-go's.

One Event object per (object, reason, component): its name is derived from them, so a
repeat (a new episode, another replica, a restarted controller) finds the existing
Event through 409 AlreadyExists and PATCHes its ``count`` and ``lastTimestamp``
instead of creating another one: no event storm. Used by
:class:`~artifactcheck.act.kube_actor.KubeActor` (pods, nodes) and by
:func:`artifactcheck.control.status.record_check_event` (ArtifactChecks).

An Event may name the *episode* it counts (``episode=``, kept in its
``artifactcheck.io/episode`` annotation): recording the same episode again counts
nothing. A replica killed after an Event but before the pod's annotation said so is
succeeded by one that records the episode again; the annotation makes that second
recording a no-op, where the count alone would have counted the episode twice.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    MERGE_PATCH,
    ApiStatus,
    CoreV1Api,
    Logger,
    NewEvent,
    Timeout,
    call_json,
    event_model,
    mutate,
    raw,
    rfc3339,
)
from artifactcheck.clients.kube_bodies import Event, ObjectReference
from artifactcheck.model.errors import DependencyError
from artifactcheck.model.names import GROUP

__all__ = ["ANN_EPISODE", "MAX_TEXT", "Episodes", "EventRecorder", "truncate"]

MAX_TEXT = 1024  # annotation reason, condition and event messages, characters
#: Where kubectl records the Events of cluster-scoped objects (Nodes).
EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS = "default"
#: On an Event: the last episode it counted (see the module's docstring).
ANN_EPISODE = f"{GROUP}/episode"


def truncate(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class _Target:
    """Where one aggregated Event lives, and how the log names what it is about."""

    namespace: str
    name: str
    about: str  # e.g. "Pod default/web-1"


@dataclass
class EventRecorder:
    """Records aggregated Events through one CoreV1Api.

    ``guard(what)`` is called right before every write and may raise (the actor's
    "am I still the leader" check); ``clock`` gives the Event's timestamps.
    """

    core: CoreV1Api
    component: str
    instance: str
    timeout: Timeout
    clock: Callable[[], datetime]
    log: Logger = logging.getLogger(__name__)
    guard: Callable[[str], None] = lambda what: None

    def record(
        self,
        *,
        involved: ObjectReference,
        event_type: str,
        reason: str,
        message: str,
        episode: str | None = None,
        maybe_recorded: bool = False,
    ) -> bool:
        """Record one Event per (object, reason), or count a repeat into it; True when
        an Event was written.

        ``episode``: what this recording counts; an Event that already counted it is
        left alone. ``maybe_recorded``: the episode may be counted already (a replica
        before this one may have recorded it), so the Event is read before anything is
        created; one without an episode mark counted it (Events from before the mark).
        """
        target = self._target(involved, reason)
        now = self.clock().replace(microsecond=0)
        text = truncate(message)
        new = event_model(
            name=target.name,
            namespace=target.namespace,
            involved=involved,
            event_type=event_type,
            reason=reason,
            message=text,
            now=now,
            component=self.component,
            instance=self.instance,
        )
        if episode is not None:
            new.metadata.annotations = {ANN_EPISODE: episode}
        summary = f"{event_type} {reason} on {target.about}"
        if not maybe_recorded and self._create(target, new, summary, text):
            return True
        what = f"patch event {target.namespace}/{target.name}"
        try:
            return mutate(
                what,
                lambda: self._bump(target, now, text, summary, episode, maybe_recorded),
                logger=self.log,
            )
        except ApiStatus as st:
            if st.status != 404:
                raise DependencyError(
                    f"event {target.namespace}/{target.name}: {st.message}"
                ) from st
            # not there: never recorded, or expired (event TTL) meanwhile: anew
            return self._create(target, new, summary, text)

    def _target(self, involved: ObjectReference, reason: str) -> _Target:
        """The Event's namespace and its name: the object's, and a digest of the
        object, the reason and our component."""
        namespace = involved.get("namespace") or EVENT_NAMESPACE_FOR_CLUSTER_OBJECTS
        fields = (involved.get(k) for k in ("kind", "namespace", "name", "uid"))
        key = "/".join(str(v or "") for v in fields)
        digest = hashlib.sha256(f"{key}/{reason}/{self.component}".encode()).hexdigest()[:16]
        where = "/".join(str(p) for p in (involved.get("namespace"), involved.get("name")) if p)
        name = f"{str(involved.get('name'))[:200].rstrip('-.')}.{digest}"
        return _Target(namespace, name, f"{involved.get('kind')} {where}")

    def _create(self, target: _Target, new: NewEvent, summary: str, text: str) -> bool:
        """POST the Event; False when it already exists (AlreadyExists)."""
        what = f"create event {target.namespace}/{target.name}"
        self.guard(what)
        try:
            call_json(
                what,
                lambda: self.core.create_namespaced_event(
                    target.namespace, new, **raw(self.timeout)
                ),
                passthrough=(409,),
            )
        except ApiStatus:
            return False
        self.log.info("event %s: %s", summary, text)
        return True

    def _bump(
        self,
        target: _Target,
        now: datetime,
        text: str,
        summary: str,
        episode: str | None,
        unmarked_counted: bool,
    ) -> bool:
        """Aggregate into the existing Event (count + 1, conditional on the
        resourceVersion read), unless it counted ``episode`` already; 404 when it is
        not there (expired meanwhile, or never recorded)."""
        existing = body.typed(
            call_json(
                f"get event {target.namespace}/{target.name}",
                lambda: self.core.read_namespaced_event(
                    target.name, target.namespace, **raw(self.timeout)
                ),
                passthrough=(404,),
            ),
            Event,
        )
        meta = body.meta(existing)
        if episode is not None:
            mark = body.annotations_of(existing).get(ANN_EPISODE)
            if mark == episode or (mark is None and unmarked_counted):
                return False  # counted by a replica before this one
        seen = existing.get("count")
        count = seen if isinstance(seen, int) else 1
        patch_meta: dict[str, object] = {"resourceVersion": meta.get("resourceVersion")}
        if episode is not None:
            patch_meta["annotations"] = {ANN_EPISODE: episode}
        patch = {
            "metadata": patch_meta,
            "count": count + 1,
            "lastTimestamp": rfc3339(now),
            "message": text,
        }
        what = f"patch event {target.namespace}/{target.name}"
        self.guard(what)
        call_json(
            what,
            lambda: self.core.patch_namespaced_event(
                target.name,
                target.namespace,
                patch,
                _content_type=MERGE_PATCH,
                **raw(self.timeout),
            ),
            passthrough=(404, 409),
        )
        self.log.info("event %s repeated (count %d)", summary, count + 1)
        return True


@dataclass
class Episodes:
    """The episode each pod's Event was last recorded for by this process, at most
    ``limit`` pods (the least recently recorded forgotten first): forgetting costs
    one read of an Event, while pods that come and go must not grow it for ever."""

    limit: int = 4096
    _seen: OrderedDict[tuple[str, str], str] = field(default_factory=OrderedDict)

    def get(self, key: tuple[str, str]) -> str | None:
        return self._seen.get(key)

    def remember(self, key: tuple[str, str], episode: str) -> None:
        self._seen[key] = episode
        self._seen.move_to_end(key)
        while len(self._seen) > self.limit:
            self._seen.popitem(last=False)

    def forget(self, key: tuple[str, str]) -> None:
        self._seen.pop(key, None)

    def __len__(self) -> int:
        return len(self._seen)
