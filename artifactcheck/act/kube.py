"""The actions artifactcheck takes in a Kubernetes cluster: :class:`KubeActor`.

It quarantines (readiness-gate condition ``False``), releases, flags (annotations + one
deduplicated Warning Event, see :mod:`artifactcheck.act.kube_events`), cordons nodes,
and dispatches the :class:`~artifactcheck.model.values.Action` values decided by
:mod:`artifactcheck.judge.decide`. Every action reads the object first (or takes the
copy a watching caller already holds) and writes only what differs, so repeating it
(a retry, a restarted controller) writes nothing. A pod
or node that vanished between discovery and action is not an error: the action logs it
and returns ``False``. Requests and error translation are
:mod:`artifactcheck.clients.kube`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from artifactcheck.act.kube_events import Episodes, EventRecorder, truncate
from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiClient,
    ApiStatus,
    CoreV1Api,
    Logger,
    Send,
    Timeout,
    call_json,
    mutate,
    raw,
    rfc3339,
    utcnow,
)
from artifactcheck.clients.kube_bodies import JsonObj, Node, ObjectReference, Pod
from artifactcheck.discover.kube import actionable_copy
from artifactcheck.model.errors import ConfigError, DependencyError
from artifactcheck.model.names import (
    ANN_CHECKED_AT,
    ANN_CORDON_REASON,
    ANN_CORDONED,
    ANN_FLAGGED_AT,
    ANN_QUARANTINED,
    ANN_REASON,
    ANN_STREAK,
    ANN_VERDICT,
    COMPONENT,
    FLAG_ANNOTATIONS,
)
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    UNKNOWN_VERDICTS,
    Action,
    ActionKind,
    Instance,
    InstanceResult,
)

__all__ = ["KubeActor", "NotLeader", "cordoned_by_us", "event_reason_for"]

_MAX_FILES_NAMED = 10

#: Event reason per verdict (CamelCase, as Kubernetes reasons are).
_EVENT_REASONS: Mapping[str, str] = {
    "mismatch": "ContentMismatch",
    "drift": "ContentDrift",
    "cdn-missing": "CdnMissing",
    "cdn-mismatch": "CdnMismatch",
    "signal-conflict": "SignalConflict",
}

_LOG = logging.getLogger(__name__)
Obj = TypeVar("Obj", Pod, Node)


class NotLeader(DependencyError):
    """A write refused locally: this replica may no longer act (its lease lapsed)."""


def event_reason_for(verdict: str | None) -> str:
    """The CamelCase Event/condition reason for a verdict, e.g. ``ContentMismatch``."""
    if verdict is None:
        return "ContentInconsistent"
    if verdict in _EVENT_REASONS:
        return _EVENT_REASONS[verdict]
    return "Content" + "".join(part.capitalize() for part in verdict.split("-"))


def _with_files(message: str, files: Sequence[str]) -> str:
    """The message followed by the files it is about, a bounded number of them named."""
    if not files or all(f in message for f in files):
        return truncate(message)  # the message names them already
    named = ", ".join(files[:_MAX_FILES_NAMED])
    more = len(files) - _MAX_FILES_NAMED
    suffix = f"files: {named}" + (f" (+{more} more)" if more > 0 else "")
    return truncate(f"{message}; {suffix}" if message else suffix)


def _ref(kind: str, obj: Mapping[str, object], *, namespaced: bool = True) -> ObjectReference:
    """The ``involvedObject`` of an Event about ``obj``."""
    meta = body.meta(obj)
    return {
        "kind": kind,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace") if namespaced else None,
        "uid": meta.get("uid"),
    }


class KubeActor:
    """Performs the actions policy decided, idempotently and within what policy allows.

    Each method reads the object, computes the smallest change, and writes only when
    something differs, so repeating an action (a retry, a restarted controller, two
    cycles deciding the same thing) writes nothing. Read-modify-writes carry the
    ``resourceVersion`` they read as a precondition; a 409 re-reads and retries once.
    Methods return True when they changed the cluster. Under ``policy.dry_run`` (or for
    an Action with ``dry_run``) nothing at all is sent to the API server.
    """

    def __init__(
        self,
        *,
        api_client: ApiClient,
        policy: PolicySettings,
        component: str = COMPONENT,
        controller_name: str | None = None,
        logger: Logger | None = None,
        request_timeout: Timeout = DEFAULT_TIMEOUT,
        clock: Callable[[], datetime] = utcnow,
        may_write: Callable[[], bool] | None = None,
        cached_pod: Callable[[str, str], Pod | None] | None = None,
    ) -> None:
        self.api_client = api_client
        #: The informer's copy of a pod (namespace, name), read instead of a GET before
        #: the first write: a controller watching its pods already holds it. A stale
        #: copy is safe: every write carries its resourceVersion, and a 409 re-reads
        #: from the API server (the retry never uses the copy).
        self.cached_pod = cached_pod
        #: Pods as this actor's own last write returned them: a second action on the
        #: same pod starts from there, not from the (now stale) cached copy.
        self._written: dict[tuple[str, str], Pod] = {}
        self.policy = policy
        #: Asked right before every write: a leader whose lease could not be renewed
        #: in time must not write, even in the middle of an action it began.
        self.may_write = may_write
        self.component = component
        self.controller_name = controller_name or component
        self.log: Logger = logger or _LOG
        self.timeout = request_timeout
        self.clock = clock
        self._core = CoreV1Api(api_client)
        self.events = EventRecorder(
            core=self._core,
            component=component,
            instance=self.controller_name,
            timeout=request_timeout,
            clock=lambda: self.clock(),
            log=self.log,
            guard=self._guard,
        )
        #: The flag episodes this process recorded an Event for (see :meth:`flag`).
        self._episodes = Episodes()

    # ---- plumbing

    def _guard(self, what: str) -> None:
        if self.may_write is not None and not self.may_write():
            raise NotLeader(f"{what}: not sent, this replica is no longer the leader")

    def _dry(self, what: str) -> bool:
        if self.policy.dry_run:
            self.log.info("dry-run: would %s", what)
            return True
        return False

    def _write(self, what: str, send: Send) -> JsonObj:
        """One guarded write; 404 and 409 are left to :meth:`_on`."""
        self._guard(what)
        return body.obj(call_json(what, send, passthrough=(404, 409)))

    def _on(
        self, what: str, label: str, read: Callable[[], Obj], step: Callable[[Obj], bool]
    ) -> bool:
        """Read the object and run ``step`` on it, with one retry on conflict; an object
        that is gone is logged and reported as "nothing changed", not as an error."""
        try:
            return mutate(what, lambda: step(read()), logger=self.log)
        except ApiStatus as st:
            if st.status == 404:
                self.log.warning("%s: %s is gone; nothing to do", what, label)
                return False
            raise DependencyError(f"{what}: unexpected status {st.status}: {st.message}") from st

    # ---- pods

    def _get_pod(self, ns: str, name: str) -> Pod:
        return body.typed(
            call_json(
                f"get pod {ns}/{name}",
                lambda: self._core.read_namespaced_pod(name, ns, **raw(self.timeout)),
                passthrough=(404,),
            ),
            Pod,
        )

    def _on_pod(self, what: str, ns: str, name: str, step: Callable[[Pod], bool]) -> bool:
        attempts = 0

        def read() -> Pod:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                cached = self._written.get((ns, name))
                if cached is None and self.cached_pod is not None:
                    cached = self.cached_pod(ns, name)
                if cached is not None:
                    return cached
            return self._get_pod(ns, name)

        return self._on(what, f"pod {ns}/{name}", read, step)

    def _patch_pod(self, ns: str, name: str, patch: JsonObj, *, status: bool) -> Pod:
        """Merge-patch the pod, or strategic-merge ``pods/status`` (where conditions are
        merged by ``type``, so kubelet's are kept)."""
        if status:
            what = f"patch pods/status {ns}/{name}"
            method, kind = self._core.patch_namespaced_pod_status, STRATEGIC_MERGE_PATCH
        else:
            what = f"patch pod {ns}/{name}"
            method, kind = self._core.patch_namespaced_pod, MERGE_PATCH
        sent = body.typed(
            self._write(
                what, lambda: method(name, ns, patch, _content_type=kind, **raw(self.timeout))
            ),
            Pod,
        )
        if self.cached_pod is not None:
            self._written[(ns, name)] = actionable_copy(sent, self.policy.condition_type)
        return sent

    def _set_condition(
        self, pod: Pod, ns: str, name: str, *, status: str, reason: str, message: str
    ) -> Pod | None:
        """Strategic-merge the gate condition (merged by ``type``, others untouched)."""
        ctype = self.policy.condition_type
        current = body.condition(pod, ctype)
        if current and (current.get("status"), current.get("reason"), current.get("message")) == (
            status,
            reason,
            message,
        ):
            return None
        transition = (
            current.get("lastTransitionTime")
            if current and current.get("status") == status and current.get("lastTransitionTime")
            else rfc3339(self.clock())
        )
        cond = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": transition,
        }
        patch: JsonObj = {
            "metadata": {"resourceVersion": body.meta(pod).get("resourceVersion")},
            "status": {"conditions": [cond]},
        }
        return self._patch_pod(ns, name, patch, status=True)

    def _set_annotations(
        self, obj: Pod, ns: str, name: str, changes: Mapping[str, str | None]
    ) -> Pod | None:
        """Merge-patch only the annotations that differ (None removes one)."""
        current = body.annotations_of(obj)
        diff = {k: v for k, v in changes.items() if current.get(k) != v}
        if not diff:
            return None
        meta = {"resourceVersion": body.meta(obj).get("resourceVersion"), "annotations": diff}
        return self._patch_pod(ns, name, {"metadata": meta}, status=False)

    def quarantine(
        self,
        pod_ns: str,
        pod_name: str,
        *,
        reason: str = "ContentMismatch",
        message: str,
        files: Sequence[str] = (),
        verdict: str = "mismatch",
    ) -> bool:
        """Take a pod out of its Services' endpoints without killing it.

        Sets the readiness-gate condition to False (through ``pods/status``, merged by
        type so kubelet's conditions are kept), then marks the pod with
        ``artifactcheck.io/quarantined`` so a restarted controller knows it did this. A
        pod whose spec lacks the gate is refused (logged, False): the condition would
        not remove it from traffic, so only a flag can be applied.
        """
        what = f"quarantine pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False
        text = _with_files(message, files)

        def step(pod: Pod) -> bool:
            if not body.has_gate(pod, self.policy.condition_type):
                self.log.warning(
                    "%s refused: the pod has no readiness gate %s; it can only be flagged",
                    what,
                    self.policy.condition_type,
                )
                return False
            after = self._set_condition(
                pod, pod_ns, pod_name, status="False", reason=reason, message=text
            )
            latest = after if after is not None else pod
            wanted: dict[str, str | None] = {
                ANN_QUARANTINED: "true",
                ANN_VERDICT: verdict,
                ANN_REASON: text,
            }
            current = body.annotations_of(latest)
            if any(current.get(k) != v for k, v in wanted.items()):
                wanted[ANN_CHECKED_AT] = rfc3339(self.clock())
                self._set_annotations(latest, pod_ns, pod_name, wanted)
                changed = True
            else:
                changed = after is not None
            if changed:
                self.log.warning("quarantined pod %s/%s: %s: %s", pod_ns, pod_name, reason, text)
            return changed

        return self._on_pod(what, pod_ns, pod_name, step)

    def release(
        self,
        pod_ns: str,
        pod_name: str,
        *,
        reason: str = "ContentVerified",
        message: str = "content matches the expected release",
    ) -> bool:
        """Open the readiness gate (condition True) and drop the quarantine mark.

        Used to undo a quarantine, to let a newly verified pod become Ready in gate mode,
        and to fail open (``reason="VerificationUnavailable"``) when a dependency needed
        to verify is down.
        """
        what = f"release pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False
        text = truncate(message)
        ctype = self.policy.condition_type

        def step(pod: Pod) -> bool:
            after = None
            if body.has_gate(pod, ctype) or body.condition(pod, ctype):
                after = self._set_condition(
                    pod, pod_ns, pod_name, status="True", reason=reason, message=text
                )
            latest = after if after is not None else pod
            marked = ANN_QUARANTINED in body.annotations_of(latest)
            if marked:
                self._set_annotations(
                    latest,
                    pod_ns,
                    pod_name,
                    {ANN_QUARANTINED: None, ANN_CHECKED_AT: rfc3339(self.clock())},
                )
            if after is not None or marked:
                self.log.info("released pod %s/%s: %s: %s", pod_ns, pod_name, reason, text)
                return True
            return False

        return self._on_pod(what, pod_ns, pod_name, step)

    def flag(
        self,
        pod_ns: str,
        pod_name: str,
        *,
        verdict: str | None,
        message: str,
        reason: str | None = None,
        files: Sequence[str] = (),
        streak: int | None = None,
    ) -> bool:
        """Mark a pod with ``artifactcheck.io/*`` annotations and one Warning Event.

        The Event is emitted once per episode: a pod already flagged with this verdict
        gets its reason/streak annotations refreshed, if they changed, and no new Event.
        After :meth:`unflag`, a new episode aggregates into the same Event (count + 1).
        The pod is marked first (its ``flagged-at`` names the episode), then the Event
        counts that episode: a replica killed in between leaves a flagged pod whose
        Event its successor records once, on first sight (one read of the Event per
        flagged pod and process), never twice (:mod:`artifactcheck.act.kube_events`).
        """
        what = f"flag pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False
        verdict_value = verdict or "inconsistent"
        event_reason = reason or event_reason_for(verdict)
        text = _with_files(message, files)

        def record(pod: Pod, episode: str, *, maybe_recorded: bool) -> bool:
            wrote = self.events.record(
                involved=_ref("Pod", pod),
                event_type="Warning",
                reason=event_reason,
                message=text,
                episode=episode,
                maybe_recorded=maybe_recorded,
            )
            self._episodes.remember((pod_ns, pod_name), episode)
            return wrote

        def step(pod: Pod) -> bool:
            current = body.annotations_of(pod)
            same_episode = current.get(ANN_VERDICT) == verdict_value and ANN_FLAGGED_AT in current
            wanted: dict[str, str | None] = {ANN_VERDICT: verdict_value, ANN_REASON: text}
            if streak is not None:
                wanted[ANN_STREAK] = str(streak)
            if same_episode:
                changed = self._set_annotations(pod, pod_ns, pod_name, wanted) is not None
                episode = current[ANN_FLAGGED_AT]
                if self._episodes.get((pod_ns, pod_name)) != episode:
                    changed |= record(pod, episode, maybe_recorded=True)
                return changed
            episode = rfc3339(self.clock())
            wanted[ANN_FLAGGED_AT] = episode
            latest = self._set_annotations(pod, pod_ns, pod_name, wanted)
            record(latest if latest is not None else pod, episode, maybe_recorded=False)
            self.log.warning("flagged pod %s/%s: %s: %s", pod_ns, pod_name, event_reason, text)
            return True

        return self._on_pod(what, pod_ns, pod_name, step)

    def unflag(self, pod_ns: str, pod_name: str) -> bool:
        """Remove the flag annotations of a pod that is consistent again (no Event)."""
        what = f"unflag pod {pod_ns}/{pod_name}"
        if self._dry(what):
            return False

        def step(pod: Pod) -> bool:
            changed = self._set_annotations(pod, pod_ns, pod_name, dict.fromkeys(FLAG_ANNOTATIONS))
            self._episodes.forget((pod_ns, pod_name))
            if changed is not None:
                self.log.info("unflagged pod %s/%s", pod_ns, pod_name)
            return changed is not None

        return self._on_pod(what, pod_ns, pod_name, step)

    def record_streak(self, instance: Instance, streak: int) -> bool:
        """Persist a pod's confirmation streak, so a restarted controller recovers it.

        Writes only when the value differs from the pod's annotations as last seen
        (``instance.annotations``, from discovery or a watch event): an unchanged
        streak costs no request at all. The value is capped at ``policy.confirmations``:
        a longer streak changes no decision, and writing it every cycle would patch a
        persistently bad pod forever. A streak of 0 removes the annotation.
        """
        kept = min(streak, self.policy.confirmations)
        wanted = str(kept) if kept > 0 else None
        if instance.annotations.get(ANN_STREAK) == wanted:
            return False
        ns, name = _pod_target(instance.name, instance)
        what = f"record streak {streak} on pod {ns}/{name}"
        if self._dry(what):
            return False
        return self._on_pod(
            what,
            ns,
            name,
            lambda pod: self._set_annotations(pod, ns, name, {ANN_STREAK: wanted}) is not None,
        )

    # ---- nodes

    def cordoned_by_us(self) -> set[str]:
        """Names of the nodes carrying artifactcheck's cordon annotation."""
        return cordoned_by_us(self.api_client, request_timeout=self.timeout)

    def _get_node(self, node: str) -> Node:
        return body.typed(
            call_json(
                f"get node {node}",
                lambda: self._core.read_node(node, **raw(self.timeout)),
                passthrough=(404,),
            ),
            Node,
        )

    def _set_node(
        self, name: str, obj: Node, annotations: Mapping[str, str | None], *, unschedulable: bool
    ) -> None:
        """Merge-patch the node's cordon and its annotations, conditional on the
        resourceVersion read."""
        meta = {
            "resourceVersion": body.meta(obj).get("resourceVersion"),
            "annotations": annotations,
        }
        patch = {"metadata": meta, "spec": {"unschedulable": unschedulable}}
        self._write(
            f"patch node {name}",
            lambda: self._core.patch_node(
                name, patch, _content_type=MERGE_PATCH, **raw(self.timeout)
            ),
        )

    def _on_node(self, what: str, node: str, step: Callable[[Node], bool]) -> bool:
        return self._on(what, f"node {node}", lambda: self._get_node(node), step)

    def cordon(self, node: str, *, reason: str) -> bool:
        """Mark a node unschedulable so no new pod lands on its stale image cache.

        Refused (logged, False) when node cordon is off in the policy, when the cap of
        nodes cordoned by artifactcheck is reached, or when someone else already
        cordoned the node: claiming a foreign cordon would let artifactcheck later
        uncordon what it did not cordon.
        """
        what = f"cordon node {node}"
        if self._dry(what):
            return False
        if not self.policy.cordon_nodes:
            self.log.warning("%s refused: node cordon is off (policy.cordon_nodes)", what)
            return False
        ours = self.cordoned_by_us()
        if node not in ours and len(ours) >= self.policy.max_cordoned_nodes:
            self.log.warning(
                "%s refused: %d node(s) already cordoned by artifactcheck (cap %d): %s",
                what,
                len(ours),
                self.policy.max_cordoned_nodes,
                ", ".join(sorted(ours)),
            )
            return False
        text = truncate(reason)
        evented = False

        def step(obj: Node) -> bool:
            nonlocal evented
            spec = obj.get("spec")
            cordoned = isinstance(spec, Mapping) and bool(spec.get("unschedulable"))
            mine = body.annotations_of(obj).get(ANN_CORDONED) == "true"
            if cordoned and not mine:
                self.log.warning(
                    "%s refused: already cordoned, not by artifactcheck; leaving it alone", what
                )
                return False
            if cordoned and mine:
                return False
            marks = {ANN_CORDONED: "true", ANN_CORDON_REASON: text}
            self._set_node(node, obj, marks, unschedulable=True)
            if not evented:
                self.events.record(
                    involved=_ref("Node", obj, namespaced=False),
                    event_type="Warning",
                    reason="NodeCordoned",
                    message=f"cordoned by {self.component}: {text}",
                )
                evented = True
            self.log.warning("cordoned node %s: %s", node, text)
            return True

        return self._on_node(what, node, step)

    def uncordon(self, node: str) -> bool:
        """Make a node schedulable again, only if artifactcheck cordoned it.

        A node without the ``artifactcheck.io/cordoned`` annotation is refused (logged,
        False): artifactcheck never uncordons what it did not cordon.
        """
        what = f"uncordon node {node}"
        if self._dry(what):
            return False

        def step(obj: Node) -> bool:
            if body.annotations_of(obj).get(ANN_CORDONED) != "true":
                self.log.warning(
                    "%s refused: artifactcheck did not cordon it (no %s annotation)",
                    what,
                    ANN_CORDONED,
                )
                return False
            self._set_node(
                node, obj, {ANN_CORDONED: None, ANN_CORDON_REASON: None}, unschedulable=False
            )
            self.events.record(
                involved=_ref("Node", obj, namespaced=False),
                event_type="Normal",
                reason="NodeUncordoned",
                message=f"uncordoned by {self.component}: its pods are consistent again",
            )
            self.log.info("uncordoned node %s", node)
            return True

        return self._on_node(what, node, step)

    # ---- dispatch

    def apply(
        self,
        action: Action,
        instance: Instance | None = None,
        result: InstanceResult | None = None,
        *,
        verdict: str | None = None,
        streak: int | None = None,
    ) -> bool:
        """Perform one decided Action; dry-run actions are logged and never sent.

        ``Action`` carries no verdict: pass the ``result`` it was decided from (or
        ``verdict``) so the Event reason and the verdict annotation name it; without
        either, flags say ``inconsistent`` and quarantines ``mismatch`` (the only
        verdict policy quarantines). A release says ``VerificationUnavailable`` rather
        than ``ContentVerified`` when it fails open (``action.fail_open``) or the
        verdict could not be established. Returns True when the cluster was changed.
        """
        if verdict is None and result is not None:
            verdict = result.verdict.value
        if instance is None and result is not None:
            instance = result.instance
        if action.kind is ActionKind.NONE:
            return False
        if action.dry_run or self.policy.dry_run:
            self.log.info(
                "dry-run: would %s %s: %s", action.kind.value, action.target, action.reason
            )
            return False
        if action.kind is ActionKind.CORDON:
            return self.cordon(action.target, reason=action.reason)
        if action.kind is ActionKind.UNCORDON:
            return self.uncordon(action.target)
        ns, name = _pod_target(action.target, instance)
        if action.kind is ActionKind.QUARANTINE:
            v = verdict or "mismatch"
            return self.quarantine(
                ns,
                name,
                reason=event_reason_for(v),
                message=action.reason,
                files=action.files,
                verdict=v,
            )
        if action.kind is ActionKind.RELEASE:
            failing_open = action.fail_open or verdict in UNKNOWN_VERDICTS
            return self.release(
                ns,
                name,
                reason="VerificationUnavailable" if failing_open else "ContentVerified",
                message=action.reason,
            )
        if action.kind is ActionKind.FLAG:
            return self.flag(
                ns,
                name,
                verdict=verdict,
                message=action.reason,
                files=action.files,
                streak=streak,
            )
        if action.kind is ActionKind.UNFLAG:
            return self.unflag(ns, name)
        raise ConfigError(f"unknown action kind {action.kind!r}")


def _pod_target(target: str, instance: Instance | None) -> tuple[str, str]:
    """(namespace, pod name) of a pod action, from the Instance or ``ns/name``."""
    if instance is not None and instance.namespace:
        name = instance.name.split("/", 1)[-1]
        return instance.namespace, name
    ns, slash, name = target.partition("/")
    if not slash or not ns or not name:
        raise ConfigError(f"pod action target must be 'namespace/name', got {target!r}")
    return ns, name


def cordoned_by_us(
    api_client: ApiClient, *, request_timeout: Timeout = DEFAULT_TIMEOUT
) -> set[str]:
    """Nodes carrying ``artifactcheck.io/cordoned: "true"``, to recover after a restart."""
    core = CoreV1Api(api_client)
    doc = call_json("list nodes", lambda: core.list_node(**raw(request_timeout)))
    nodes, _ = body.items(doc, Node)
    return {
        str(body.meta(n).get("name"))
        for n in nodes
        if body.annotations_of(n).get(ANN_CORDONED) == "true"
    }
