"""Cordoning nodes whose image cache serves stale content: :class:`NodeActor`.

Part of :class:`~artifactcheck.act.kube_actor.KubeActor` (which dispatches ``cordon`` and
``uncordon`` actions to it), apart because nodes share nothing with pods but the
request plumbing (:class:`~artifactcheck.act.kube_writes.KubeWriter`) and the Events.
artifactcheck only ever uncordons what it cordoned: its annotation says which.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from artifactcheck.act.kube_events import EventRecorder, truncate
from artifactcheck.act.kube_writes import KubeWriter
from artifactcheck.clients import kube_bodies as body
from artifactcheck.clients.kube import (
    DEFAULT_TIMEOUT,
    MERGE_PATCH,
    ApiClient,
    CoreV1Api,
    Timeout,
    call_json,
    raw,
)
from artifactcheck.clients.kube_bodies import Node, ObjectReference
from artifactcheck.model.names import ANN_CORDON_REASON, ANN_CORDONED

__all__ = ["NodeActor", "cordoned_by_us", "object_ref"]


def object_ref(kind: str, obj: Mapping[str, object], *, namespaced: bool = True) -> ObjectReference:
    """The ``involvedObject`` of an Event about ``obj``."""
    meta = body.meta(obj)
    return {
        "kind": kind,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace") if namespaced else None,
        "uid": meta.get("uid"),
    }


class NodeActor:
    """Cordons and uncordons nodes, within the policy's cap, through one writer."""

    def __init__(
        self, *, api_client: ApiClient, writer: KubeWriter, events: EventRecorder, component: str
    ) -> None:
        self.api_client = api_client
        self.w = writer
        self.events = events
        self.component = component

    def cordoned_by_us(self) -> set[str]:
        """Names of the nodes carrying artifactcheck's cordon annotation."""
        return cordoned_by_us(self.api_client, request_timeout=self.w.timeout)

    def _get_node(self, node: str) -> Node:
        return body.typed(
            call_json(
                f"get node {node}",
                lambda: self.w.core.read_node(node, **raw(self.w.timeout)),
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
        self.w.write(
            f"patch node {name}",
            lambda: self.w.core.patch_node(
                name, patch, _content_type=MERGE_PATCH, **raw(self.w.timeout)
            ),
        )

    def _on_node(self, what: str, node: str, step: Callable[[Node], bool]) -> bool:
        return self.w.on(what, f"node {node}", lambda: self._get_node(node), step)

    def cordon(self, node: str, *, reason: str) -> bool:
        """Mark a node unschedulable so no new pod lands on its stale image cache.

        Refused (logged, False) when node cordon is off in the policy, when the cap of
        nodes cordoned by artifactcheck is reached, or when someone else already
        cordoned the node: claiming a foreign cordon would let artifactcheck later
        uncordon what it did not cordon.
        """
        what = f"cordon node {node}"
        if self.w.dry(what):
            return False
        if not self.w.policy.cordon_nodes:
            self.w.log.warning("%s refused: node cordon is off (policy.cordon_nodes)", what)
            return False
        ours = self.cordoned_by_us()
        if node not in ours and len(ours) >= self.w.policy.max_cordoned_nodes:
            self.w.log.warning(
                "%s refused: %d node(s) already cordoned by artifactcheck (cap %d): %s",
                what,
                len(ours),
                self.w.policy.max_cordoned_nodes,
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
                self.w.log.warning(
                    "%s refused: already cordoned, not by artifactcheck; leaving it alone", what
                )
                return False
            if cordoned and mine:
                return False
            marks = {ANN_CORDONED: "true", ANN_CORDON_REASON: text}
            self._set_node(node, obj, marks, unschedulable=True)
            if not evented:
                self.events.record(
                    involved=object_ref("Node", obj, namespaced=False),
                    event_type="Warning",
                    reason="NodeCordoned",
                    message=f"cordoned by {self.component}: {text}",
                )
                evented = True
            self.w.log.warning("cordoned node %s: %s", node, text)
            return True

        return self._on_node(what, node, step)

    def uncordon(self, node: str) -> bool:
        """Make a node schedulable again, only if artifactcheck cordoned it.

        A node without the ``artifactcheck.io/cordoned`` annotation is refused (logged,
        False): artifactcheck never uncordons what it did not cordon.
        """
        what = f"uncordon node {node}"
        if self.w.dry(what):
            return False

        def step(obj: Node) -> bool:
            if body.annotations_of(obj).get(ANN_CORDONED) != "true":
                self.w.log.warning(
                    "%s refused: artifactcheck did not cordon it (no %s annotation)",
                    what,
                    ANN_CORDONED,
                )
                return False
            self._set_node(
                node, obj, {ANN_CORDONED: None, ANN_CORDON_REASON: None}, unschedulable=False
            )
            self.events.record(
                involved=object_ref("Node", obj, namespaced=False),
                event_type="Normal",
                reason="NodeUncordoned",
                message=f"uncordoned by {self.component}: its pods are consistent again",
            )
            self.w.log.info("uncordoned node %s", node)
            return True

        return self._on_node(what, node, step)


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
