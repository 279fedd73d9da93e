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

from artifactcheck.act.kube_events import Episodes, EventRecorder, truncate
from artifactcheck.act.kube_nodes import NodeActor, cordoned_by_us, object_ref
from artifactcheck.act.kube_writes import KubeWriter, NotLeader
from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    ApiClient,
    Logger,
    Timeout,
    rfc3339,
    utcnow,
)
from artifactcheck.clients.kube_bodies import Pod
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.names import (
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
from artifactcheck.model.verdicts import VERDICTS

__all__ = ["KubeActor", "NotLeader", "cordoned_by_us", "event_reason_for"]

_MAX_FILES_NAMED = 10

#: Event reason per verdict value, from the verdict table.
_EVENT_REASONS: Mapping[str, str] = {v.value: t.event_reason for v, t in VERDICTS.items()}

_LOG = logging.getLogger(__name__)


def event_reason_for(verdict: str | None) -> str:
    """The CamelCase Event/condition reason for a verdict, e.g. ``ContentMismatch``.

    A value the verdict table does not know (an annotation another version wrote) is
    ``Content`` and its words in CamelCase.
    """
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
        self.policy = policy
        self.component = component
        self.controller_name = controller_name or component
        self.log: Logger = logger or _LOG
        self.clock = clock
        #: The requests every action shares (:mod:`artifactcheck.act.kube_writes`).
        self.w = KubeWriter(
            api_client=api_client,
            policy=policy,
            logger=self.log,
            request_timeout=request_timeout,
            clock=lambda: self.clock(),
            may_write=may_write,
            cached_pod=cached_pod,
        )
        self.events = EventRecorder(
            core=self.w.core,
            component=component,
            instance=self.controller_name,
            timeout=request_timeout,
            clock=lambda: self.clock(),
            log=self.log,
            guard=self.w.guard,
        )
        self.nodes = NodeActor(
            api_client=api_client, writer=self.w, events=self.events, component=component
        )
        #: The flag episodes this process recorded an Event for (see :meth:`flag`).
        self._episodes = Episodes()

    # ---- pods

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
        if self.w.dry(what):
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
            marks = {ANN_QUARANTINED: "true", ANN_VERDICT: verdict, ANN_REASON: text}
            where = (pod_ns, pod_name)
            return self.w.gate_then_mark(pod, where, "False", reason, text, marks, "quarantined")

        return self.w.on_pod(what, pod_ns, pod_name, step)

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
        if self.w.dry(what):
            return False
        text = truncate(message)
        ctype = self.policy.condition_type

        def step(pod: Pod) -> bool:
            gated = body.has_gate(pod, ctype) or body.condition(pod, ctype)
            status = "True" if gated else None  # no gate, no condition: only the mark
            marks = {ANN_QUARANTINED: None}
            return self.w.gate_then_mark(
                pod, (pod_ns, pod_name), status, reason, text, marks, "released"
            )

        return self.w.on_pod(what, pod_ns, pod_name, step)

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
        if self.w.dry(what):
            return False
        verdict_value = verdict or "inconsistent"
        event_reason = reason or event_reason_for(verdict)
        text = _with_files(message, files)

        def record(pod: Pod, episode: str, *, maybe_recorded: bool) -> bool:
            wrote = self.events.record(
                involved=object_ref("Pod", pod),
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
                changed = self.w.set_annotations(pod, pod_ns, pod_name, wanted) is not None
                episode = current[ANN_FLAGGED_AT]
                if self._episodes.get((pod_ns, pod_name)) != episode:
                    changed |= record(pod, episode, maybe_recorded=True)
                return changed
            episode = rfc3339(self.clock())
            wanted[ANN_FLAGGED_AT] = episode
            latest = self.w.set_annotations(pod, pod_ns, pod_name, wanted)
            record(latest if latest is not None else pod, episode, maybe_recorded=False)
            self.log.warning("flagged pod %s/%s: %s: %s", pod_ns, pod_name, event_reason, text)
            return True

        return self.w.on_pod(what, pod_ns, pod_name, step)

    def unflag(self, pod_ns: str, pod_name: str) -> bool:
        """Remove the flag annotations of a pod that is consistent again (no Event)."""
        what = f"unflag pod {pod_ns}/{pod_name}"
        if self.w.dry(what):
            return False

        def step(pod: Pod) -> bool:
            changed = self.w.set_annotations(pod, pod_ns, pod_name, dict.fromkeys(FLAG_ANNOTATIONS))
            self._episodes.forget((pod_ns, pod_name))
            if changed is not None:
                self.log.info("unflagged pod %s/%s", pod_ns, pod_name)
            return changed is not None

        return self.w.on_pod(what, pod_ns, pod_name, step)

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
        if self.w.dry(what):
            return False
        return self.w.on_pod(
            what,
            ns,
            name,
            lambda pod: self.w.set_annotations(pod, ns, name, {ANN_STREAK: wanted}) is not None,
        )

    # ---- nodes (:class:`~artifactcheck.act.kube_nodes.NodeActor`)

    def cordoned_by_us(self) -> set[str]:
        """Names of the nodes carrying artifactcheck's cordon annotation."""
        return self.nodes.cordoned_by_us()

    def cordon(self, node: str, *, reason: str) -> bool:
        """See :meth:`NodeActor.cordon <artifactcheck.act.kube_nodes.NodeActor.cordon>`."""
        return self.nodes.cordon(node, reason=reason)

    def uncordon(self, node: str) -> bool:
        """See :meth:`NodeActor.uncordon <artifactcheck.act.kube_nodes.NodeActor.uncordon>`."""
        return self.nodes.uncordon(node)

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
