"""``meta.k8s.io/v1`` Table responses, as ``kubectl get`` asks for them.

Why: ``kubectl get`` sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and prints the columns the *server* chooses: a CRD's ``additionalPrinterColumns``
(evaluated server-side, ``date`` columns turned into ages), ``NAME READY STATUS
RESTARTS AGE`` for pods.  A server that answers with a plain list makes kubectl
fall back to ``NAME AGE``, so printer columns would never be seen.

Each row carries the object as ``PartialObjectMetadata`` (``includeObject=Partial``,
the default; ``Object`` and ``None`` are honoured too), which kubectl reads for the
``NAMESPACE`` column of ``-A``.  Built-in kinds get the columns of the real
printers for pods, namespaces, nodes, config maps, services, deployments, leases,
events and service accounts (the columns the fake can fill); other kinds get the
generic ``Name``/``Created At``.
Column JSONPaths support the simple form CRDs allow (``.status.counts.ok``,
``.spec.items[0].name``, ``.metadata.labels['a.b/c']``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from artifactcheck_sim.apiserver_resources import ResourceType, dig

__all__ = ["human_duration", "wants_table", "to_table"]

JsonObj = dict[str, Any]
Row = Callable[[JsonObj], list[Any]]

_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although"
    " some resources may allow a client to request the generation of an appropriate name"
    " automatically. Name is primarily intended for creation idempotence and configuration"
    " definition. Cannot be updated."
)
_AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def wants_table(accept: str) -> bool:
    """True when the first acceptable media type the server can produce is a v1 Table."""
    for part in accept.split(","):
        params = {}
        pieces = [p.strip() for p in part.split(";")]
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip()] = value.strip()
        if params.get("as") == "Table":
            if params.get("v") == "v1" and params.get("g") == "meta.k8s.io":
                return True
            continue  # v1beta1 Tables are not served; try the next type
        if pieces[0] in ("application/json", "*/*", "application/*") and "as" not in params:
            return False
    return False


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years = hours // (24 * 365)
    if years < 8:
        days = (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{years}y"


def _age(value: Any) -> str:
    when = _parse_time(value)
    if when is None:
        return "<unknown>"
    return human_duration((datetime.now(UTC) - when).total_seconds())


def _meta(obj: JsonObj) -> JsonObj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _column(name: str, kind: str, description: str, *, fmt: str = "", priority: int = 0) -> JsonObj:
    return {
        "name": name,
        "type": kind,
        "format": fmt,
        "description": description,
        "priority": priority,
    }


_NAME = _column("Name", "string", _NAME_DOC, fmt="name")
_AGE = _column("Age", "string", _AGE_DOC)


# --------------------------------------------------------------------------- JSONPath


_STEP_RE = re.compile(r"\.([A-Za-z0-9_\-$]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


def json_path(obj: Any, path: str) -> Any:
    """Evaluate a CRD printer column's simple JSONPath; None when nothing is there."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    pos = 0
    node = obj
    while pos < len(path):
        match = _STEP_RE.match(path, pos)
        if match is None:
            return None
        key, index, quoted, dquoted = match.groups()
        if index is not None:
            if not isinstance(node, list) or int(index) >= len(node):
                return None
            node = node[int(index)]
        else:
            name = key if key is not None else (quoted if quoted is not None else dquoted)
            if not isinstance(node, dict) or name not in node:
                return None
            node = node[name]
        pos = match.end()
    return node


def _go_string(value: Any) -> str:
    """How ``JSONPath.PrintResults`` writes a value in a string column."""
    import json

    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _cell(kind: str, value: Any) -> Any:
    """``cellForJSONValue`` of the CRD table convertor."""
    if value is None:
        return None
    if kind == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return int(value)
        return None
    if kind == "number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "string":
        return _go_string(value)
    if kind == "date":
        if isinstance(value, str):
            return _age(value) if _parse_time(value) else "<invalid>"
        return None
    return None


def _custom_columns(resource: ResourceType) -> tuple[list[JsonObj], Row]:
    columns = [_NAME]
    specs = list(resource.printer_columns)
    for spec in specs:
        columns.append(
            _column(
                str(spec.get("name")),
                str(spec.get("type")),
                str(spec.get("description") or ""),
                fmt=str(spec.get("format") or ""),
                priority=int(spec.get("priority") or 0),
            )
        )

    def row(obj: JsonObj) -> list[Any]:
        cells: list[Any] = [_meta(obj).get("name")]
        for spec in specs:
            cells.append(_cell(str(spec.get("type")), json_path(obj, str(spec.get("jsonPath")))))
        return cells

    return columns, row


# --------------------------------------------------------------------------- built-in printers


def _pod_row(pod: JsonObj) -> list[Any]:
    """``printPod`` of ``pkg/printers/internalversion``, for the parts the fake has."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    containers = spec.get("containers") or []
    ready = sum(1 for c in statuses if isinstance(c, dict) and c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses if isinstance(c, dict))
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in statuses:
        state = c.get("state") or {} if isinstance(c, dict) else {}
        waiting = state.get("waiting") or {}
        terminated = state.get("terminated") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated.get("reason"):
            reason = terminated["reason"]
    if _meta(pod).get("deletionTimestamp"):
        reason = "Terminating"
    gates = spec.get("readinessGates") or []
    conditions = {
        c.get("type"): c.get("status")
        for c in status.get("conditions") or ()
        if isinstance(c, dict)
    }
    gate_cell = "<none>"
    if gates:
        true = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gate_cell = f"{true}/{len(gates)}"
    return [
        _meta(pod).get("name"),
        f"{ready}/{len(containers)}",
        reason,
        str(restarts),
        _age(_meta(pod).get("creationTimestamp")),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gate_cell,
    ]


_POD_COLUMNS = [
    _NAME,
    _column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "string", "The aggregate status of the containers in this pod."),
    _column(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last"
        " container in this pod has restarted.",
    ),
    _AGE,
    _column("IP", "string", "IP address allocated to the pod.", priority=1),
    _column("Node", "string", "Name of the node where the pod is running.", priority=1),
    _column("Nominated Node", "string", "Name of the node the pod is nominated to.", priority=1),
    _column("Readiness Gates", "string", "The readiness gates of the pod.", priority=1),
]


def _simple(*columns: tuple[str, Callable[[JsonObj], Any], int]) -> tuple[list[JsonObj], Row]:
    defs = [_NAME]
    for name, _, priority in columns:
        defs.append(_column(name, "string", name, priority=priority))
    defs.append(_AGE)

    def row(obj: JsonObj) -> list[Any]:
        return [
            _meta(obj).get("name"),
            *[get(obj) for _, get, _ in columns],
            _age(_meta(obj).get("creationTimestamp")),
        ]

    return defs, row


def _get(*keys: str, default: Any = "<none>") -> Callable[[JsonObj], Any]:
    def get(obj: JsonObj) -> Any:
        node = dig(obj, keys)
        return default if node in (None, "") else node

    return get


def _node_status(node: JsonObj) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    out = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if (node.get("spec") or {}).get("unschedulable"):
        out += ",SchedulingDisabled"
    return out


def _ports(service: JsonObj) -> str:
    ports = (service.get("spec") or {}).get("ports") or []
    parts = [
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/"
        f"{p.get('protocol') or 'TCP'}"
        for p in ports
        if isinstance(p, dict)
    ]
    return ",".join(parts) or "<none>"


def _deployment_ready(deployment: JsonObj) -> str:
    status = deployment.get("status") or {}
    replicas = (deployment.get("spec") or {}).get("replicas", 1)
    return f"{status.get('readyReplicas') or 0}/{replicas}"


def _event_columns() -> tuple[list[JsonObj], Row]:
    """``printEvent``: LAST SEEN TYPE REASON OBJECT MESSAGE (the name only with -o wide)."""
    columns = [
        _column("Last Seen", "string", "Time when this Event was last seen."),
        _column("Type", "string", "Type of this event (Normal, Warning)."),
        _column("Reason", "string", "Why the action was taken."),
        _column("Object", "string", "The object that this event is about."),
        _column("Subobject", "string", "The subobject that this event is about.", priority=1),
        _column("Source", "string", "The component reporting this event.", priority=1),
        _column("Message", "string", "A human-readable description of the status."),
        _column("First Seen", "string", "The first time this event was seen.", priority=1),
        _column("Count", "string", "The number of times this event has occurred.", priority=1),
        _column("Name", "string", _NAME_DOC, fmt="name", priority=1),
    ]

    def row(event: JsonObj) -> list[Any]:
        about = event.get("involvedObject") or event.get("regarding") or {}
        source = event.get("source") or event.get("deprecatedSource") or {}
        last = (
            event.get("lastTimestamp")
            or event.get("deprecatedLastTimestamp")
            or event.get("eventTime")
            or _meta(event).get("creationTimestamp")
        )
        first = event.get("firstTimestamp") or event.get("deprecatedFirstTimestamp") or last
        return [
            _age(last),
            event.get("type") or "",
            event.get("reason") or "",
            f"{str(about.get('kind') or '').lower()}/{about.get('name') or ''}",
            about.get("fieldPath") or "",
            source.get("component") or event.get("reportingComponent") or "",
            (event.get("message") or event.get("note") or "").strip(),
            _age(first),
            str(event.get("count") or event.get("deprecatedCount") or 1),
            _meta(event).get("name"),
        ]

    return columns, row


_BUILTIN: dict[tuple[str, str], Callable[[], tuple[list[JsonObj], Row]]] = {
    ("", "Event"): _event_columns,
    ("events.k8s.io", "Event"): _event_columns,
    ("", "Pod"): lambda: (_POD_COLUMNS, _pod_row),
    ("", "Namespace"): lambda: _simple(("Status", _get("status", "phase"), 0)),
    ("", "Node"): lambda: _simple(
        ("Status", _node_status, 0),
        ("Roles", lambda n: "<none>", 0),
        ("Version", _get("status", "nodeInfo", "kubeletVersion", default=""), 0),
    ),
    ("", "ConfigMap"): lambda: _simple(
        ("Data", lambda c: len(c.get("data") or {}) + len(c.get("binaryData") or {}), 0)
    ),
    ("", "Service"): lambda: _simple(
        ("Type", _get("spec", "type"), 0),
        ("Cluster-IP", _get("spec", "clusterIP"), 0),
        ("External-IP", lambda s: "<none>", 0),
        ("Port(s)", _ports, 0),
    ),
    ("", "ServiceAccount"): lambda: _simple(("Secrets", lambda s: len(s.get("secrets") or []), 0)),
    ("apps", "Deployment"): lambda: _simple(
        ("Ready", _deployment_ready, 0),
        ("Up-to-date", lambda d: (d.get("status") or {}).get("updatedReplicas") or 0, 0),
        ("Available", lambda d: (d.get("status") or {}).get("availableReplicas") or 0, 0),
    ),
    ("coordination.k8s.io", "Lease"): lambda: _simple(
        ("Holder", _get("spec", "holderIdentity", default=""), 0)
    ),
}


def _default_columns() -> tuple[list[JsonObj], Row]:
    """``rest.DefaultTableConvertor``: the name and the creation time."""
    columns = [_NAME, _column("Created At", "date", _AGE_DOC)]

    def row(obj: JsonObj) -> list[Any]:
        return [_meta(obj).get("name"), _meta(obj).get("creationTimestamp")]

    return columns, row


def _columns(resource: ResourceType) -> tuple[list[JsonObj], Row]:
    if resource.crd_name:
        return _custom_columns(resource)
    maker = _BUILTIN.get((resource.group, resource.kind))
    return maker() if maker is not None else _default_columns()


def _row_object(obj: JsonObj, include: str) -> JsonObj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": _meta(obj),
    }


def to_table(
    resource: ResourceType,
    objects: Iterable[JsonObj],
    list_meta: JsonObj,
    *,
    include_object: str = "Partial",
    no_headers: bool = False,
) -> JsonObj:
    """A ``Table`` of ``objects`` with the columns a real server gives ``resource``."""
    columns, row = _columns(resource)
    rows = []
    for obj in objects:
        entry: JsonObj = {"cells": row(obj)}
        attached = _row_object(obj, include_object)
        if attached is not None:
            entry["object"] = attached
        rows.append(entry)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [] if no_headers else columns,
        "rows": rows,
    }
