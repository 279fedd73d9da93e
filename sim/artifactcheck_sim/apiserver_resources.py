"""The resource types the fake API server serves, and their per-kind rules.

A :class:`ResourceType` says where a resource lives in the URL space, how it is
scoped, and how its writes behave on a real server: whether it has a status
subresource, whether strategic merge patches apply (built-in types) or not
(custom resources), which lists such a patch merges by key, which field
selectors it supports, whether ``metadata.generation`` is tracked, whether a
PUT may create it or may skip ``resourceVersion``, and what a DELETE answers.
The per-kind hooks add the bits of defaulting, admission and validation that a
client observes (pod defaults and status reset on create, pod spec
immutability, the ``kubernetes.io/metadata.name`` namespace label, the
``events.k8s.io/v1`` <-> ``v1`` event conversion...).  They are deliberately a
small subset of the real validation: enough to make wrong requests fail the way
they fail on a cluster, not a reimplementation of ``pkg/apis/core/validation``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from artifactcheck.model.selectors import label_key_error, label_value_error
from artifactcheck_sim.apiserver_errors import FieldError
from artifactcheck_sim.json_values import json_copy
from artifactcheck_sim.patching import ListStrategy, MergeSchema

__all__ = [
    "ARTIFACTCHECKS",
    "BUILTIN_RESOURCES",
    "CLUSTERROLEBINDINGS",
    "CLUSTERROLES",
    "CONFIGMAPS",
    "DEPLOYMENTS",
    "EVENTS",
    "EVENTS_V1",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODDISRUPTIONBUDGETS",
    "NETWORKPOLICIES",
    "PODS",
    "ROLEBINDINGS",
    "ROLES",
    "SERVICEACCOUNTS",
    "SERVICES",
    "ResourceRegistry",
    "ResourceType",
    "validate_metadata",
]

JsonObj = dict[str, Any]
FieldGetter = Callable[[JsonObj], str]
Hook = Callable[[JsonObj], None]
Validator = Callable[[JsonObj, "JsonObj | None"], list[FieldError]]
Converter = Callable[[JsonObj], JsonObj]
Pruner = Callable[[JsonObj], list[str]]

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def dig(obj: JsonObj, keys: Iterable[str]) -> Any:
    """``obj[keys[0]][keys[1]]...``, or None where the path leaves the nested objects."""
    node: Any = obj
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def field_path(*keys: str, default: str = "") -> FieldGetter:
    """A field-selector getter reading ``obj[keys[0]][keys[1]]...``."""

    def get(obj: JsonObj) -> str:
        node = dig(obj, keys)
        return default if node is None else _format(node)

    return get


class Strategy(NamedTuple):
    """A kind's write hooks, as its registry strategy has them in Kubernetes."""

    #: Defaulting, run on every write body (like decoding does on a real server).
    default: Hook | None = None
    #: Create-only preparation (``PrepareForCreate`` + mutating admission).
    prepare_create: Hook | None = None
    #: Validation of a new object (``old`` is None) or an update.
    validate: Validator | None = None


_META_FIELDS: Mapping[str, FieldGetter] = {
    "metadata.name": field_path("metadata", "name"),
    "metadata.namespace": field_path("metadata", "namespace"),
}
_CLUSTER_META_FIELDS: Mapping[str, FieldGetter] = {"metadata.name": field_path("metadata", "name")}

_META_SCHEMA: MergeSchema = {
    "ownerReferences": ListStrategy("uid"),
    "finalizers": ListStrategy(None),
}


@dataclass(frozen=True, eq=False)
class ResourceType:
    """One resource (``group``/``version``/``plural``) and how a real server treats it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    #: ``<plural>/status`` exists; writes to the main resource keep the old status,
    #: writes to ``/status`` change nothing but the status.
    status_subresource: bool = False
    #: Built-in types take ``application/strategic-merge-patch+json``; custom resources
    #: answer 415 to it.
    strategic_merge: bool = True
    #: DELETE answers with the deleted object (pods) rather than a ``Status``.
    return_deleted_object: bool = False
    #: PUT of a missing object creates it (leases, events).
    allow_create_on_update: bool = False
    #: PUT without ``metadata.resourceVersion`` is allowed (not for custom resources/leases).
    allow_unconditional_update: bool = True
    #: ``metadata.generation`` starts at 1 and grows when anything but metadata/status changes.
    track_generation: bool = False
    field_labels: Mapping[str, FieldGetter] = field(default_factory=lambda: dict(_META_FIELDS))
    merge_schema: MergeSchema = field(default_factory=lambda: {"metadata": _META_SCHEMA})
    #: Resources with the same storage key share their objects (``v1`` and
    #: ``events.k8s.io/v1`` events); defaults to ``group/plural``.
    storage_key: str = ""
    to_storage: Converter | None = None
    from_storage: Converter | None = None
    strategy: Strategy = Strategy()
    #: Extra subresources beyond ``status`` (e.g. ``binding`` for pods).
    subresources: tuple[str, ...] = ()
    #: The DNS label rule (namespaces) instead of the DNS subdomain rule for names.
    name_is_dns_label: bool = False
    #: Discovery categories (``kubectl get all`` reads ``all``).
    categories: tuple[str, ...] = ()
    #: Removes the fields the type does not declare, in place, and returns their paths
    #: (custom resources: their schema; built-in kinds: see ``apiserver_openapi``).
    prune: Pruner | None = None
    #: Served from a CustomResourceDefinition (its name), not built in.
    crd_name: str = ""
    #: The CRD version's ``openAPIV3Schema`` and ``additionalPrinterColumns``.
    openapi_schema: JsonObj | None = None
    printer_columns: tuple[JsonObj, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def storage(self) -> str:
        return self.storage_key or f"{self.group}/{self.plural}"

    @property
    def key(self) -> str:
        return f"{self.api_version}/{self.plural}"

    def view(self, stored: JsonObj) -> JsonObj:
        """The stored form converted to this resource's own version (a new dict if converted)."""
        return self.from_storage(stored) if self.from_storage is not None else stored

    def unview(self, obj: JsonObj) -> JsonObj:
        return self.to_storage(obj) if self.to_storage is not None else obj


class ResourceRegistry:
    """The resource types served, findable by URL parts or by apiVersion/kind."""

    def __init__(self, resources: Iterable[ResourceType] = ()) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        #: Grows on every (un)registration, so derived documents (OpenAPI) know to rebuild.
        self.generation = 0
        for resource in resources:
            self.register(resource)

    def register(self, resource: ResourceType) -> None:
        self._by_path[(resource.group, resource.version, resource.plural)] = resource
        self._by_kind[(resource.api_version, resource.kind)] = resource
        self.generation += 1

    def unregister(self, resource: ResourceType) -> None:
        """Stop serving ``resource`` (its objects are the caller's business)."""
        key = (resource.group, resource.version, resource.plural)
        if self._by_path.get(key) is resource:
            del self._by_path[key]
        if self._by_kind.get((resource.api_version, resource.kind)) is resource:
            del self._by_kind[(resource.api_version, resource.kind)]
        self.generation += 1

    def by_path(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_path.values()))

    def group_versions(self) -> dict[str, list[str]]:
        """Group name -> versions, in registration order (``""`` is the core group)."""
        out: dict[str, list[str]] = {}
        for resource in list(self._by_path.values()):
            versions = out.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        resources = list(self._by_path.values())
        return [r for r in resources if r.group == group and r.version == version]


def scope_fields(cluster_scoped: bool) -> dict[str, FieldGetter]:
    """The field selectors every object of a scope supports (``metadata.name``, and
    ``metadata.namespace`` for namespaced ones)."""
    return dict(_CLUSTER_META_FIELDS if cluster_scoped else _META_FIELDS)


def builtin(
    api_version: str,
    kind: str,
    *short_names: str,
    cluster_scoped: bool = False,
    fields: Mapping[str, FieldGetter] | None = None,
    merge: MergeSchema | None = None,
    strategy: Strategy | None = None,
    **rules: Any,
) -> ResourceType:
    """A resource named the way Kubernetes names its own kinds.

    The plural and singular are the lowercased kind (plus ``s``), the field selectors
    are the scope's ``metadata.*`` ones plus ``fields``, ``merge`` is the strategic
    merge schema below ``metadata``, ``strategy`` the kind's hooks; ``rules`` are the
    remaining :class:`ResourceType` fields, so each definition states only how that
    kind differs.
    """
    group, _, version = api_version.rpartition("/")
    singular = kind.lower()
    return ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=singular + "s",
        singular=singular,
        short_names=short_names,
        namespaced=not cluster_scoped,
        field_labels={**scope_fields(cluster_scoped), **(fields or {})},
        merge_schema={"metadata": _META_SCHEMA, **(merge or {})},
        strategy=strategy or Strategy(),
        **rules,
    )


# --------------------------------------------------------------------------- metadata

_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


_RFC1123_TAIL = "and must start and end with an alphanumeric character"


def _rfc1123_error(value: str, limit: int, pattern: re.Pattern[str], rule: str) -> str | None:
    if len(value) > limit:
        return f"must be no more than {limit} characters"
    if not pattern.match(value):
        return f"a lowercase RFC 1123 {rule}, {_RFC1123_TAIL}"
    return None


def dns_label_error(value: str) -> str | None:
    rule = "label must consist of lower case alphanumeric characters or '-'"
    return _rfc1123_error(value, 63, _DNS_LABEL_RE, rule)


def dns_subdomain_error(value: str) -> str | None:
    rule = "subdomain must consist of lower case alphanumeric characters, '-' or '.'"
    return _rfc1123_error(value, 253, _DNS_SUBDOMAIN_RE, rule)


def validate_metadata(resource: ResourceType, obj: JsonObj) -> list[FieldError]:
    """The ``ValidateObjectMeta`` checks every kind gets."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [FieldError("metadata", "required")]
    errors = _name_errors(resource, meta.get("name"))
    errors += _string_map_errors(meta, "labels", label_value_error)
    errors += _string_map_errors(meta, "annotations", None)
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        errors.append(
            FieldError("metadata.finalizers", "invalid", "must be a list of strings", finalizers)
        )
    return errors


def _name_errors(resource: ResourceType, name: Any) -> list[FieldError]:
    if not name:
        return [FieldError("metadata.name", "required", "name or generateName is required")]
    if not isinstance(name, str):
        return [FieldError("metadata.name", "invalid", "must be a string", name)]
    why = dns_label_error(name) if resource.name_is_dns_label else dns_subdomain_error(name)
    return [FieldError("metadata.name", "invalid", why, name)] if why else []


def _string_map_errors(
    meta: JsonObj, key: str, value_rule: Callable[[str], str | None] | None
) -> list[FieldError]:
    """``metadata.labels`` / ``metadata.annotations``: qualified-name keys, string values
    (and, for labels, values that are label values)."""
    where = f"metadata.{key}"
    values = meta.get(key)
    if values is None:
        return []
    if not isinstance(values, dict):
        return [FieldError(where, "invalid", "must be a map", values)]
    errors: list[FieldError] = []
    for name, value in values.items():
        key_error = label_key_error(name)
        if key_error:
            errors.append(FieldError(where, "invalid", key_error, name))
        if not isinstance(value, str):
            errors.append(FieldError(f"{where}[{name}]", "invalid", "must be a string", value))
            continue
        value_error = value_rule(value) if value_rule is not None else None
        if value_error:
            errors.append(FieldError(where, "invalid", value_error, value))
    return errors


# --------------------------------------------------------------------------- pods

_QUANTITY_RE = re.compile(r"^([+-]?[0-9]*\.?[0-9]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
#: Quantity suffixes: the SI fractions, then the decimal (``k``...) and binary (``Ki``...)
#: multiples, each a thousand (or 1024) times the one before.
_SUFFIXES: Mapping[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    **{suffix: Decimal(10) ** (3 * i) for i, suffix in enumerate("kMGTPE", 1)},
    **{f"{suffix}i": Decimal(2) ** (10 * i) for i, suffix in enumerate("KMGTPE", 1)},
}


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource quantity (``"500m"``, ``"1Gi"``, ``2``) as a number, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY_RE.match(value.strip())
    if not match:
        return None
    number, suffix = match.groups()
    try:
        if suffix[:1] in ("e", "E") and suffix[1:].lstrip("+-").isdigit():
            return Decimal(number + suffix)
        if suffix not in _SUFFIXES:
            return None
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation:
        return None


def _containers(
    spec: JsonObj, keys: tuple[str, ...] = ("initContainers", "containers")
) -> list[JsonObj]:
    out: list[JsonObj] = []
    for key in keys:
        items = spec.get(key)
        if isinstance(items, list):
            out.extend(c for c in items if isinstance(c, dict))
    return out


def pod_qos_class(pod: JsonObj) -> str:
    """``status.qosClass`` as ``GetPodQOS`` computes it (cpu and memory only)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in _containers(spec):
        resources = (
            container.get("resources") if isinstance(container.get("resources"), dict) else {}
        )
        assert isinstance(resources, dict)
        found_limits: set[str] = set()
        for bucket, total in (("requests", requests), ("limits", limits)):
            values = resources.get(bucket)
            if not isinstance(values, dict):
                continue
            for name in ("cpu", "memory"):
                quantity = parse_quantity(values.get(name))
                if quantity is None or quantity == 0:
                    continue
                total[name] = total.get(name, Decimal(0)) + quantity
                if bucket == "limits":
                    found_limits.add(name)
        if found_limits != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if (
        guaranteed
        and requests.keys() == limits.keys()
        and all(requests[k] == limits[k] for k in requests)
    ):
        return "Guaranteed"
    return "Burstable"


def _image_pull_policy(image: Any) -> str:
    if not isinstance(image, str) or "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _spec_with_defaults(obj: JsonObj, defaults: Mapping[str, Any]) -> JsonObj | None:
    """``obj["spec"]`` with ``defaults`` set where absent (a copy each), or None if no spec."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    _set_defaults(spec, defaults)
    return spec


def _set_defaults(node: JsonObj, defaults: Mapping[str, Any]) -> None:
    for key, value in defaults.items():
        node.setdefault(key, json_copy(value))


_POD_SPEC_DEFAULTS: Mapping[str, Any] = {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {},
    "enableServiceLinks": True,
}
_CONTAINER_DEFAULTS: Mapping[str, Any] = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
}


def _default_pod(pod: JsonObj) -> None:
    spec = _spec_with_defaults(pod, _POD_SPEC_DEFAULTS)
    if spec is None:
        return
    for container in _containers(spec, ("initContainers", "containers", "ephemeralContainers")):
        container.setdefault("imagePullPolicy", _image_pull_policy(container.get("image")))
        _set_defaults(container, _CONTAINER_DEFAULTS)
        resources = container.setdefault("resources", {})
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, quantity in resources["limits"].items():
                    requests.setdefault(name, quantity)
        ports = container.get("ports")
        if isinstance(ports, list):
            for port in ports:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")


def _prepare_pod_create(pod: JsonObj) -> None:
    spec = pod.get("spec")
    if isinstance(spec, dict):
        # ServiceAccount, Priority and DefaultTolerationSeconds admission.
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        tolerations = spec.setdefault("tolerations", [])
        if isinstance(tolerations, list):
            for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
                if not any(isinstance(t, dict) and t.get("key") == taint for t in tolerations):
                    tolerations.append(
                        {
                            "key": taint,
                            "operator": "Exists",
                            "effect": "NoExecute",
                            "tolerationSeconds": 300,
                        }
                    )
    # podStrategy.PrepareForCreate: whatever status the client sent is replaced.
    pod["status"] = {"phase": "Pending", "qosClass": pod_qos_class(pod)}


_POD_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


def _pod_spec_without_mutable(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = json_copy(spec)
    for key in _POD_MUTABLE_SPEC:
        out.pop(key, None)
    for container in _containers(out):
        container.pop("image", None)
    return out


_RESTART_POLICIES = ("Always", "OnFailure", "Never")


def _validate_pod(pod: JsonObj, old: JsonObj | None) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("spec.containers", "required")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        errors.append(FieldError("spec.containers", "required"))
    seen: set[str] = set()
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            errors.append(FieldError(f"spec.{key}", "invalid", "must be a list", items))
            continue
        for i, container in enumerate(items):
            where = f"spec.{key}[{i}]"
            if not isinstance(container, dict):
                errors.append(FieldError(where, "invalid", "must be an object", container))
                continue
            name = container.get("name")
            if not name or not isinstance(name, str):
                errors.append(FieldError(f"{where}.name", "required"))
            else:
                why = dns_label_error(name)
                if why:
                    errors.append(FieldError(f"{where}.name", "invalid", why, name))
                elif name in seen:
                    errors.append(FieldError(f"{where}.name", "duplicate", "", name))
                seen.add(name)
            image = container.get("image")
            if not image or not isinstance(image, str) or image != image.strip():
                errors.append(FieldError(f"{where}.image", "required"))
    restart = spec.get("restartPolicy")
    if restart is not None and restart not in _RESTART_POLICIES:
        errors.append(FieldError.not_supported("spec.restartPolicy", restart, _RESTART_POLICIES))
    if old is not None and not errors:
        if _pod_spec_without_mutable(spec) != _pod_spec_without_mutable(old.get("spec")):
            errors.append(
                FieldError(
                    "spec",
                    "forbidden",
                    "pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                    "`spec.tolerations` (only additions to existing tolerations),"
                    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was"
                    " previously negative)",
                )
            )
    return errors


_CONTAINER_SCHEMA: MergeSchema = {
    "ports": ListStrategy("containerPort"),
    "env": ListStrategy("name"),
    "volumeMounts": ListStrategy("mountPath"),
    "volumeDevices": ListStrategy("devicePath"),
}

#: ``patchStrategy=merge`` lists of core/v1 Pod, from the Go struct tags.  Note that
#: ``status.containerStatuses`` is NOT among them (it is ``listType=atomic``): a strategic
#: merge patch replaces it whole on a real server, and does here.
_POD_SPEC_FIELDS = ("nodeName", "restartPolicy", "schedulerName", "serviceAccountName")
_POD_STATUS_FIELDS = ("phase", "podIP", "nominatedNodeName")

POD_MERGE_SCHEMA: MergeSchema = {
    "metadata": _META_SCHEMA,
    "spec": {
        "containers": ListStrategy("name", _CONTAINER_SCHEMA),
        "initContainers": ListStrategy("name", _CONTAINER_SCHEMA),
        "ephemeralContainers": ListStrategy("name", _CONTAINER_SCHEMA),
        "volumes": ListStrategy("name"),
        "imagePullSecrets": ListStrategy("name"),
        "hostAliases": ListStrategy("ip"),
        "topologySpreadConstraints": ListStrategy("topologyKey"),
        "schedulingGates": ListStrategy("name"),
        "resourceClaims": ListStrategy("name"),
    },
    "status": {
        "conditions": ListStrategy("type"),
        "podIPs": ListStrategy("ip"),
        "hostIPs": ListStrategy("ip"),
    },
}

_POD_FIELDS: Mapping[str, FieldGetter] = {
    **{f"spec.{name}": field_path("spec", name) for name in _POD_SPEC_FIELDS},
    "spec.hostNetwork": field_path("spec", "hostNetwork", default="false"),
    **{f"status.{name}": field_path("status", name) for name in _POD_STATUS_FIELDS},
}

PODS = builtin(
    "v1",
    "Pod",
    "po",
    categories=("all",),
    status_subresource=True,
    return_deleted_object=True,
    track_generation=True,
    fields=_POD_FIELDS,
    merge=POD_MERGE_SCHEMA,
    strategy=Strategy(_default_pod, _prepare_pod_create, _validate_pod),
    subresources=("binding",),
)

# --------------------------------------------------------------------------- nodes

_CONDITIONS: MergeSchema = {"conditions": ListStrategy("type")}
_NODE_MERGE: MergeSchema = {
    "spec": {"podCIDRs": ListStrategy(None)},
    "status": {**_CONDITIONS, "addresses": ListStrategy("type")},
}
_UNSCHEDULABLE = {"spec.unschedulable": field_path("spec", "unschedulable", default="false")}

NODES = builtin(
    "v1",
    "Node",
    "no",
    cluster_scoped=True,
    status_subresource=True,
    fields=_UNSCHEDULABLE,
    merge=_NODE_MERGE,
)

# --------------------------------------------------------------------------- namespaces


def _default_namespace(ns: JsonObj) -> None:
    meta = ns.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("name"), str) and meta["name"]:
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels["kubernetes.io/metadata.name"] = meta["name"]


def _prepare_namespace_create(ns: JsonObj) -> None:
    spec = ns.get("spec")
    if not isinstance(spec, dict):
        spec = ns["spec"] = {}
    spec["finalizers"] = ["kubernetes"]
    ns["status"] = {"phase": "Active"}


NAMESPACES = builtin(
    "v1",
    "Namespace",
    "ns",
    cluster_scoped=True,
    status_subresource=True,
    return_deleted_object=True,
    fields={"status.phase": field_path("status", "phase")},
    merge={"status": _CONDITIONS},
    strategy=Strategy(_default_namespace, _prepare_namespace_create),
    name_is_dns_label=True,
)

# --------------------------------------------------------------------------- configmaps

_CONFIG_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")


def _validate_configmap(cm: JsonObj, old: JsonObj | None) -> list[FieldError]:
    errors: list[FieldError] = []
    for bucket in ("data", "binaryData"):
        values = cm.get(bucket)
        if values is None:
            continue
        if not isinstance(values, dict):
            errors.append(FieldError(bucket, "invalid", "must be a map of strings", values))
            continue
        for key, value in values.items():
            if not _CONFIG_KEY_RE.match(key) or len(key) > 253:
                errors.append(
                    FieldError(
                        bucket,
                        "invalid",
                        "a valid config key must consist of alphanumeric characters,"
                        " '-', '_' or '.'",
                        key,
                    )
                )
            if not isinstance(value, str):
                errors.append(FieldError(f"{bucket}[{key}]", "invalid", "must be a string", value))
    if old is not None and old.get("immutable") is True:
        for key in ("data", "binaryData"):
            if cm.get(key) != old.get(key):
                errors.append(
                    FieldError(key, "forbidden", "field is immutable when `immutable` is set")
                )
        if cm.get("immutable") is not True:
            errors.append(
                FieldError("immutable", "forbidden", "field is immutable when `immutable` is set")
            )
    return errors


CONFIGMAPS = builtin("v1", "ConfigMap", "cm", strategy=Strategy(validate=_validate_configmap))

# --------------------------------------------------------------------------- events

#: core/v1 Event field -> events.k8s.io/v1 Event field (the rest are named alike).
_EVENT_RENAMES: Mapping[str, str] = {
    "involvedObject": "regarding",
    "message": "note",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "reportingComponent": "reportingController",
}
_EVENT_RENAMES_BACK: Mapping[str, str] = {v: k for k, v in _EVENT_RENAMES.items()}


def _event_as(api_version: str, event: JsonObj, renames: Mapping[str, str]) -> JsonObj:
    """``event`` as an Event of ``api_version``, its fields renamed by ``renames``."""
    out: JsonObj = {"apiVersion": api_version, "kind": "Event"}
    for key, value in event.items():
        if key not in ("apiVersion", "kind"):
            out[renames.get(key, key)] = value
    return out


def _event_to_v1(core: JsonObj) -> JsonObj:
    return _event_as("events.k8s.io/v1", core, _EVENT_RENAMES)


def _event_from_v1(event: JsonObj) -> JsonObj:
    return _event_as("v1", event, _EVENT_RENAMES_BACK)


def _validate_event_v1(event: JsonObj, old: JsonObj | None) -> list[FieldError]:
    """The extra rules ``events.k8s.io/v1`` puts on new events."""
    if old is not None:
        return []
    errors: list[FieldError] = []
    if not event.get("eventTime"):
        errors.append(FieldError("eventTime", "required"))
    if event.get("type") not in ("Normal", "Warning"):
        errors.append(FieldError.not_supported("type", event.get("type"), ("Normal", "Warning")))
    for name in ("reportingController", "reportingInstance", "action", "reason"):
        if not event.get(name):
            errors.append(FieldError(name, "required"))
    note = event.get("note")
    if isinstance(note, str) and len(note.encode()) > 1024:
        errors.append(FieldError("note", "too_long", "may not be more than 1024 bytes"))
    return errors


_REFERENCE_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion")


def _event_fields(reference: str, *names: str) -> dict[str, FieldGetter]:
    """Event field selectors: the involved object's (under ``reference``), then ``names``."""
    keys = (*_REFERENCE_FIELDS, "fieldPath")
    out = {f"{reference}.{key}": field_path(reference, key) for key in keys}
    out.update({name: field_path(name) for name in names})
    return out


_EVENT_FIELDS_CORE = {
    **_event_fields("involvedObject", "reason", "reportingComponent"),
    "source": field_path("source", "component"),
    "type": field_path("type"),
}
_EVENT_FIELDS_V1 = _event_fields("regarding", "reason", "reportingController", "type")

#: Both event APIs share one storage (``storage_key``) and accept PUT-to-create.
_EVENT_RULES: Mapping[str, Any] = {"allow_create_on_update": True, "storage_key": "events"}

EVENTS = builtin("v1", "Event", "ev", fields=_EVENT_FIELDS_CORE, **_EVENT_RULES)

EVENTS_V1 = builtin(
    "events.k8s.io/v1",
    "Event",
    "ev",
    fields=_EVENT_FIELDS_V1,
    to_storage=_event_from_v1,
    from_storage=_event_to_v1,
    strategy=Strategy(validate=_validate_event_v1),
    **_EVENT_RULES,
)

# --------------------------------------------------------------------------- leases

LEASES = builtin(
    "coordination.k8s.io/v1", "Lease", allow_create_on_update=True, allow_unconditional_update=False
)

# --------------------------------------------------------------------------- the CRD


def _drop_status(obj: JsonObj) -> None:
    obj.pop("status", None)


ARTIFACTCHECKS = builtin(
    "artifactcheck.io/v1alpha1",
    "ArtifactCheck",
    status_subresource=True,
    strategic_merge=False,
    allow_unconditional_update=False,
    track_generation=True,
    strategy=Strategy(prepare_create=_drop_status),
)

# --------------------------------------------------------------------------- stored kinds
#
# Kinds that ``kubectl apply -k k8s/`` creates: stored with the generic registry's
# semantics (and a few defaults a client sees), but nothing acts on them: no
# Deployment controller makes ReplicaSets, no RBAC is enforced.

_TEMPLATE_SCHEMA: MergeSchema = {"metadata": _META_SCHEMA, "spec": POD_MERGE_SCHEMA["spec"]}


_DEPLOYMENT_SPEC_DEFAULTS: Mapping[str, Any] = {
    "replicas": 1,
    "revisionHistoryLimit": 10,
    "progressDeadlineSeconds": 600,
}


def _default_deployment(deployment: JsonObj) -> None:
    spec = _spec_with_defaults(deployment, _DEPLOYMENT_SPEC_DEFAULTS)
    if spec is None:
        return
    strategy = spec.setdefault("strategy", {"type": "RollingUpdate"})
    if isinstance(strategy, dict) and strategy.get("type", "RollingUpdate") == "RollingUpdate":
        strategy.setdefault("type", "RollingUpdate")
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
    template = spec.get("template")
    if isinstance(template, dict):
        _default_pod(template)


def _validate_deployment(deployment: JsonObj, old: JsonObj | None) -> list[FieldError]:
    spec = deployment.get("spec")
    if not isinstance(spec, dict):
        return [FieldError("spec.selector", "required")]
    errors: list[FieldError] = []
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        errors.append(FieldError("spec.selector", "required"))
    template = spec.get("template")
    if not isinstance(template, dict):
        errors.append(FieldError("spec.template", "required"))
    else:
        labels = (template.get("metadata") or {}).get("labels") or {}
        wanted = (selector or {}).get("matchLabels") if isinstance(selector, dict) else None
        if isinstance(wanted, dict) and any(labels.get(k) != v for k, v in wanted.items()):
            errors.append(
                FieldError(
                    "spec.template.metadata.labels",
                    "invalid",
                    "`selector` does not match template `labels`",
                    labels,
                )
            )
        for error in _validate_pod(template, None):
            errors.append(
                FieldError(f"spec.template.{error.field}", error.type, error.detail, error.value)
            )
    if old is not None and (old.get("spec") or {}).get("selector") != selector:
        errors.append(FieldError("spec.selector", "invalid", "field is immutable", selector))
    return errors


DEPLOYMENTS = builtin(
    "apps/v1",
    "Deployment",
    "deploy",
    categories=("all",),
    status_subresource=True,
    track_generation=True,
    merge={"spec": {"template": _TEMPLATE_SCHEMA}, "status": _CONDITIONS},
    strategy=Strategy(_default_deployment, validate=_validate_deployment),
)


def _service_ip(namespace: str, name: str) -> str:
    """A stable ClusterIP in 10.96.0.0/16 for a Service (no allocator to race with)."""
    digest = sum((i + 1) * b for i, b in enumerate(f"{namespace}/{name}".encode()))
    return f"10.96.{(digest >> 8) % 255}.{digest % 254 + 1}"


def _default_service(service: JsonObj) -> None:
    spec = _spec_with_defaults(service, {"type": "ClusterIP", "sessionAffinity": "None"})
    if spec is None:
        return
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    ports = spec.get("ports")
    if isinstance(ports, list):
        for port in ports:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])


def _prepare_service_create(service: JsonObj) -> None:
    spec = service.get("spec")
    meta = service.get("metadata") or {}
    if isinstance(spec, dict) and spec.get("type") != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = _service_ip(str(meta.get("namespace")), str(meta.get("name")))
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        if spec["clusterIP"] != "None":
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
    service["status"] = {"loadBalancer": {}}


def _validate_service(service: JsonObj, old: JsonObj | None) -> list[FieldError]:
    spec = service.get("spec")
    errors: list[FieldError] = []
    if not isinstance(spec, dict):
        return [FieldError("spec.ports", "required")]
    kind = spec.get("type")
    supported = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
    if kind not in supported:
        errors.append(FieldError.not_supported("spec.type", kind, supported))
    ports = spec.get("ports")
    if kind != "ExternalName" and spec.get("clusterIP") != "None" and not ports:
        errors.append(FieldError("spec.ports", "required"))
    if old is not None:
        had = (old.get("spec") or {}).get("clusterIP")
        if had and spec.get("clusterIP") not in (None, "", had):
            errors.append(
                FieldError("spec.clusterIP", "invalid", "field is immutable", spec.get("clusterIP"))
            )
    return errors


SERVICES = builtin(
    "v1",
    "Service",
    "svc",
    categories=("all",),
    status_subresource=True,
    merge={"spec": {"ports": ListStrategy("port")}},
    strategy=Strategy(_default_service, _prepare_service_create, _validate_service),
)

SERVICEACCOUNTS = builtin("v1", "ServiceAccount", "sa", merge={"secrets": ListStrategy("name")})


def _rbac(kind: str, *, cluster_scoped: bool) -> ResourceType:
    validate = _validate_binding if kind.endswith("Binding") else None
    return builtin(
        "rbac.authorization.k8s.io/v1",
        kind,
        cluster_scoped=cluster_scoped,
        strategy=Strategy(validate=validate),
    )


def _validate_binding(binding: JsonObj, old: JsonObj | None) -> list[FieldError]:
    ref = binding.get("roleRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        return [FieldError("roleRef.name", "required")]
    if old is not None and old.get("roleRef") != ref:
        return [FieldError("roleRef", "invalid", "cannot change roleRef", ref)]
    return []


CLUSTERROLES = _rbac("ClusterRole", cluster_scoped=True)
CLUSTERROLEBINDINGS = _rbac("ClusterRoleBinding", cluster_scoped=True)
ROLES = _rbac("Role", cluster_scoped=False)
ROLEBINDINGS = _rbac("RoleBinding", cluster_scoped=False)

PODDISRUPTIONBUDGETS = builtin(
    "policy/v1",
    "PodDisruptionBudget",
    "pdb",
    status_subresource=True,
    track_generation=True,
    merge={"status": _CONDITIONS},
)

NETWORKPOLICIES = dataclasses.replace(
    builtin("networking.k8s.io/v1", "NetworkPolicy", "netpol", track_generation=True),
    plural="networkpolicies",
)

BUILTIN_RESOURCES: tuple[ResourceType, ...] = (
    PODS,
    NODES,
    NAMESPACES,
    CONFIGMAPS,
    EVENTS,
    EVENTS_V1,
    LEASES,
    ARTIFACTCHECKS,
    SERVICES,
    SERVICEACCOUNTS,
    DEPLOYMENTS,
    CLUSTERROLES,
    CLUSTERROLEBINDINGS,
    ROLES,
    ROLEBINDINGS,
    PODDISRUPTIONBUDGETS,
    NETWORKPOLICIES,
)
