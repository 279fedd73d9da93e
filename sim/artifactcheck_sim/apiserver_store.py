"""The in-memory storage behind the fake API server: etcd plus the generic registry.

:class:`Store` keeps every object in plain dicts (O(1) get, linear filtered
lists), stamps one global, monotonically increasing ``resourceVersion`` on every
write as etcd does, keeps a bounded per-resource history of watch events (the
watch cache), and fans events out to registered :class:`Watcher` s.  It applies
the semantics of ``k8s.io/apiserver``'s generic registry that a client can
observe: system metadata on create, ``generateName``, optimistic concurrency on
``resourceVersion`` and ``uid`` preconditions, status-subresource separation,
``metadata.generation``, no-op writes that change nothing (no new
resourceVersion, no event), finalizers and ``deletionTimestamp``, and the shape of
DELETE answers.

It is thread-safe (one re-entrant lock); stored objects are never mutated after
being stored, so history entries and serialized JSON can be shared.  Nothing in
here knows about HTTP: callers hand in parsed bodies and get dicts or
:class:`ApiError` back.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from artifactcheck.model.selectors import LabelSelector
from artifactcheck_sim.apiserver_errors import ApiError, FieldError
from artifactcheck_sim.apiserver_resources import (
    NAMESPACES,
    Pruner,
    ResourceRegistry,
    ResourceType,
    validate_metadata,
)
from artifactcheck_sim.field_selectors import FieldSelector
from artifactcheck_sim.json_values import json_copy
from artifactcheck_sim.patching import (
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

__all__ = ["ListResult", "PATCH_TYPES", "Store", "Stored", "Watcher", "now_rfc3339"]

JsonObj = dict[str, Any]

#: Content type -> patch kind.
PATCH_TYPES: dict[str, str] = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
_MAX_GENERATED_BASE = 63 - 5


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


_NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)
_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def _name_mismatch(have: Any, want: str) -> ApiError:
    return ApiError.bad_request(
        f"the name of the object ({have or ''}) does not match the name on the URL ({want})"
    )


def _uid_precondition(wanted: Any, have: Any) -> str:
    return f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {have}"


@dataclass(frozen=True)
class Stored:
    """An object and its JSON; neither is ever mutated once built."""

    obj: JsonObj
    raw: str

    @classmethod
    def of(cls, obj: JsonObj) -> Stored:
        return cls(obj, _dumps(obj))


@dataclass
class _Event:
    type: str  # ADDED / MODIFIED / DELETED
    rv: int
    obj: Stored  # storage form; for DELETED the last state, stamped with the deletion's rv
    prev: Stored | None  # storage form before the change
    views: dict[tuple[str, str], Stored | None] = field(default_factory=dict)


@dataclass(frozen=True)
class ListResult:
    items: list[Stored]  # in the resource's own version
    resource_version: int
    continue_token: str | None = None
    remaining: int | None = None


@dataclass(eq=False)
class Watcher:
    """One watch: what it selects and where its event lines go.

    ``deliver`` receives complete lines (JSON + ``\\n``) in resourceVersion order;
    it is called with the store's lock held, so it must not block.
    """

    resource: ResourceType
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    deliver: Callable[[str], None]

    def matches(self, obj: JsonObj) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if not self.labels.matches(meta.get("labels")):
            return False
        if self.fields.empty:
            return True
        getters = self.resource.field_labels
        return self.fields.matches(lambda name: getters[name](obj))


def _line(event_type: str, raw: str) -> str:
    return f'{{"type":"{event_type}","object":{raw}}}\n'


def _meta(obj: JsonObj) -> JsonObj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise ApiError.bad_request("metadata must be an object")
    return meta


def _with_rv(obj: JsonObj, rv: int) -> JsonObj:
    out = dict(obj)
    out["metadata"] = dict(obj.get("metadata") or {})
    out["metadata"]["resourceVersion"] = str(rv)
    return out


def _without_rv(obj: JsonObj) -> JsonObj:
    out = dict(obj)
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    out["metadata"] = meta
    return out


#: Metadata only the server sets: a write's own values for them are ignored.
_SERVER_OWNED_META = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def _status_written(old: JsonObj, obj: JsonObj) -> JsonObj:
    """``old`` as a write to ``/status`` leaves it: only the status is ``obj``'s."""
    new = json_copy(old)
    if "status" in obj:
        new["status"] = obj["status"]
    else:
        new.pop("status", None)
    return new


def _spec_part(obj: JsonObj) -> JsonObj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Store:
    """Objects of every served resource, their history, and their watchers."""

    def __init__(self, registry: ResourceRegistry, *, history: int = 1000) -> None:
        self.registry = registry
        self.history_size = max(0, history)
        self.enforce_namespaces = True
        self._lock = threading.RLock()
        self._rv = 0
        self._compacted_all = 0
        self._data: dict[str, dict[str, dict[str, Stored]]] = {}
        self._history: dict[str, deque[_Event]] = {}
        self._compacted: dict[str, int] = {}
        self._watchers: dict[str, builtins.list[Watcher]] = {}
        #: Called as ``observer(resource, event_type, stored_object)`` after every change,
        #: with the lock held (the server registers CRDs' resources this way).
        self.observers: builtins.list[Callable[[ResourceType, str, JsonObj], None]] = []
        #: Finds the unknown-field pruner of a built-in kind (``resource.prune`` unset).
        self.builtin_pruner: Callable[[ResourceType], Pruner | None] = _no_pruner
        self._pruners: dict[int, Pruner | None] = {}

    # ------------------------------------------------------------------ basics

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def _bucket(self, resource: ResourceType, namespace: str) -> dict[str, Stored]:
        return self._data.setdefault(resource.storage, {}).setdefault(namespace, {})

    def _find(self, resource: ResourceType, namespace: str, name: str) -> Stored | None:
        return self._data.get(resource.storage, {}).get(namespace, {}).get(name)

    def _scope(self, resource: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if resource.namespaced else ""

    def _existing(self, resource: ResourceType, ns: str, name: str) -> Stored:
        """The stored object, or the 404 a real server answers."""
        current = self._find(resource, ns, name)
        if current is None:
            raise self._not_found(resource, name)
        return current

    def _not_found(self, resource: ResourceType, name: str) -> ApiError:
        return ApiError.not_found(resource.plural, resource.group, name)

    def _view(self, resource: ResourceType, stored: Stored) -> Stored:
        if resource.from_storage is None:
            return stored
        return Stored.of(resource.from_storage(stored.obj))

    def _iter(
        self, resource: ResourceType, namespace: str | None
    ) -> Iterator[tuple[str, str, Stored]]:
        buckets = self._data.get(resource.storage, {})
        if namespace is not None and resource.namespaced:
            names = buckets.get(namespace, {})
            for name in sorted(names):
                yield namespace, name, names[name]
            return
        for ns in sorted(buckets):
            names = buckets[ns]
            for name in sorted(names):
                yield ns, name, names[name]

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def compacted_for(self, resource: ResourceType) -> int:
        with self._lock:
            return max(self._compacted_all, self._compacted.get(resource.storage, 0))

    # ------------------------------------------------------------------ events

    def _emit(self, resource: ResourceType, event: _Event) -> None:
        storage = resource.storage
        history = self._history.setdefault(storage, deque())
        if self.history_size == 0:
            self._compacted[storage] = event.rv
        else:
            while len(history) >= self.history_size:
                self._compacted[storage] = history.popleft().rv
            history.append(event)
        for watcher in list(self._watchers.get(storage, ())):
            line = self._event_line(watcher, event)
            if line is not None:
                watcher.deliver(line)
        for observer in list(self.observers):
            observer(resource, event.type, event.obj.obj)

    def _event_view(self, resource: ResourceType, event: _Event, slot: str) -> Stored | None:
        if resource.from_storage is None:
            if slot == "obj":
                return event.obj
            if slot == "prev":
                return event.prev
        key = (resource.key, slot)
        if key not in event.views:
            view: Stored | None
            if slot == "obj":
                view = self._view(resource, event.obj)
            elif slot == "prev":
                view = None if event.prev is None else self._view(resource, event.prev)
            else:  # "prev_at_rv": the old object stamped with this event's rv
                assert event.prev is not None
                view = Stored.of(_with_rv(resource.view(event.prev.obj), event.rv))
            event.views[key] = view
        return event.views[key]

    def _event_line(self, watcher: Watcher, event: _Event) -> str | None:
        resource = watcher.resource
        if event.type == "ADDED":
            new = self._event_view(resource, event, "obj")
            assert new is not None
            return _line("ADDED", new.raw) if watcher.matches(new.obj) else None
        if event.type == "DELETED":
            prev = self._event_view(resource, event, "prev")
            if prev is not None and watcher.matches(prev.obj):
                gone = self._event_view(resource, event, "obj")
                assert gone is not None
                return _line("DELETED", gone.raw)
            return None
        new = self._event_view(resource, event, "obj")
        prev = self._event_view(resource, event, "prev")
        assert new is not None
        now_matches = watcher.matches(new.obj)
        was_matching = prev is not None and watcher.matches(prev.obj)
        if now_matches and was_matching:
            return _line("MODIFIED", new.raw)
        if now_matches:
            return _line("ADDED", new.raw)
        if was_matching:
            # As the watch cache does: the old object, with this event's resourceVersion.
            gone = self._event_view(resource, event, "prev_at_rv")
            assert gone is not None
            return _line("DELETED", gone.raw)
        return None

    # ------------------------------------------------------------------ validation helpers

    def check_fields(self, resource: ResourceType, fields: FieldSelector) -> None:
        for name in sorted(fields.fields):
            if name not in resource.field_labels:
                raise ApiError.bad_request(f"field label not supported: {name}")

    def _decode(self, resource: ResourceType, body: Any) -> JsonObj:
        if not isinstance(body, dict):
            raise ApiError.bad_request(
                f"the object provided is unrecognized (must be of type {resource.kind})"
            )
        obj = json_copy(body)
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if (api_version and api_version != resource.api_version) or (
            kind and kind != resource.kind
        ):
            raise ApiError.bad_request(
                f'{kind or resource.kind} in version "{api_version or resource.api_version}"'
                f" cannot be handled as a {resource.kind}: the object provided is unrecognized"
                f" (must be of type {resource.kind})"
            )
        obj["apiVersion"] = resource.api_version
        obj["kind"] = resource.kind
        meta = obj.setdefault("metadata", {})
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise ApiError.bad_request(
                f'{resource.kind} in version "{resource.api_version}" cannot be handled as a'
                f" {resource.kind}: metadata must be an object"
            )
        return obj

    @staticmethod
    def _set_namespace(resource: ResourceType, meta: JsonObj, namespace: str | None) -> str:
        if not resource.namespaced:
            meta.pop("namespace", None)
            return ""
        have = meta.get("namespace") or ""
        if namespace is None:
            namespace = have or "default"
        elif have and have != namespace:
            raise ApiError.bad_request(_NAMESPACE_MISMATCH)
        meta["namespace"] = namespace
        return namespace

    def _prune(
        self,
        resource: ResourceType,
        obj: JsonObj,
        field_validation: str,
        warnings: builtins.list[str] | None,
    ) -> None:
        """Drop unknown fields; ``fieldValidation=Strict`` refuses them, ``Warn`` says so."""
        pruner = resource.prune
        if pruner is None:
            key = id(resource)
            if key not in self._pruners:
                self._pruners[key] = self.builtin_pruner(resource)
            pruner = self._pruners[key]
        if pruner is None:
            return
        unknown = pruner(obj)
        if not unknown:
            return
        if field_validation == "Strict":
            raise ApiError.bad_request(
                f'{resource.kind} in version "{resource.version}" cannot be handled as a'
                f" {resource.kind}: strict decoding error: "
                + ", ".join(f'unknown field "{path}"' for path in unknown)
            )
        if field_validation == "Warn" and warnings is not None:
            warnings.extend(f'unknown field "{path}"' for path in unknown)

    def _invalid(
        self, resource: ResourceType, name: str, errors: builtins.list[FieldError]
    ) -> ApiError:
        return ApiError.invalid(resource.kind, resource.group, name, errors)

    def _validate(self, resource: ResourceType, obj: JsonObj, old: JsonObj | None) -> None:
        errors = []
        if resource.strategy.validate is not None:
            errors.extend(resource.strategy.validate(obj, old))
        errors.extend(validate_metadata(resource, obj))
        if errors:
            raise self._invalid(resource, str(_meta(obj).get("name") or ""), errors)

    # ------------------------------------------------------------------ reads

    def get(self, resource: ResourceType, namespace: str | None, name: str) -> Stored:
        with self._lock:
            stored = self._find(resource, self._scope(resource, namespace), name)
            if stored is None:
                raise self._not_found(resource, name)
            return self._view(resource, stored)

    def list(
        self,
        resource: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListResult:
        labels = labels or LabelSelector()
        fields = fields or FieldSelector()
        self.check_fields(resource, fields)
        with self._lock:
            start_after: tuple[str, str] | None = None
            list_rv = self._rv
            if continue_token:
                list_rv, start_after = self._parse_continue(resource, continue_token)
            matcher = Watcher(
                resource, namespace if resource.namespaced else None, labels, fields, _no_deliver
            )
            items: builtins.list[Stored] = []
            last_key: tuple[str, str] | None = None
            remaining = 0
            for ns, name, stored in self._iter(resource, namespace):
                if start_after is not None and (ns, name) <= start_after:
                    continue
                view = self._view(resource, stored)
                if not matcher.matches(view.obj):
                    continue
                if limit is not None and limit > 0 and len(items) >= limit:
                    remaining += 1
                    continue
                items.append(view)
                last_key = (ns, name)
            token = None
            if remaining and last_key is not None:
                token = base64.urlsafe_b64encode(
                    _dumps({"v": "meta.k8s.io/v1", "rv": list_rv, "start": list(last_key)}).encode()
                ).decode()
            return ListResult(
                items, self._rv if not continue_token else list_rv, token, remaining or None
            )

    def _parse_continue(self, resource: ResourceType, token: str) -> tuple[int, tuple[str, str]]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv = int(data["rv"])
            ns, name = data["start"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise ApiError.bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion"
            ) from None
        if rv < self.compacted_for(resource):
            raise ApiError.expired(
                "The provided continue parameter is too old to display a consistent list result."
                " You can start a new list without the continue parameter, or use the continue"
                " token in this response to retrieve the remainder of the results."
            )
        return rv, (str(ns), str(name))

    # ------------------------------------------------------------------ create

    def _generate_name(self, resource: ResourceType, namespace: str, base: str) -> str:
        base = base[:_MAX_GENERATED_BASE]
        for _ in range(8):
            name = base + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
            if self._find(resource, namespace, name) is None:
                return name
        return name  # the AlreadyExists below reports it, as a real server would

    def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: builtins.list[str] | None = None,
    ) -> Stored:
        obj = self._decode(resource, body)
        meta = obj["metadata"]
        ns = self._set_namespace(resource, meta, namespace)
        with self._lock:
            self._prune(resource, obj, field_validation, warnings)
            return self._create_locked(resource, ns, obj, dry_run=dry_run)

    def _create_locked(
        self, resource: ResourceType, ns: str, obj: JsonObj, *, dry_run: bool
    ) -> Stored:
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise ApiError.internal("resourceVersion should not be set on objects to be created")
        if (
            not meta.get("name")
            and isinstance(meta.get("generateName"), str)
            and meta["generateName"]
        ):
            meta["name"] = self._generate_name(resource, ns, meta["generateName"])
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        if resource.track_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        strategy = resource.strategy
        if strategy.default is not None:
            strategy.default(obj)
        if strategy.prepare_create is not None:
            strategy.prepare_create(obj)
        self._validate(resource, obj, None)
        name = meta["name"]
        if resource.namespaced and self.enforce_namespaces and resource is not NAMESPACES:
            if self._find(NAMESPACES, "", ns) is None:
                raise ApiError.not_found("namespaces", "", ns)
        if self._find(resource, ns, name) is not None:
            raise ApiError.already_exists(resource.plural, resource.group, name)
        if dry_run:
            return Stored.of(obj)
        return self._commit(resource, ns, resource.unview(obj), "ADDED", None)

    # ------------------------------------------------------------------ update & patch

    def update(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str | None,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: builtins.list[str] | None = None,
    ) -> tuple[Stored, bool]:
        """PUT; returns the object and whether it was created (create-on-update)."""
        obj = self._decode(resource, body)
        meta = obj["metadata"]
        ns = self._set_namespace(resource, meta, namespace)
        if name is None:
            name = str(meta.get("name") or "")
        if meta.get("name") != name:
            raise _name_mismatch(meta.get("name"), name)
        with self._lock:
            self._prune(resource, obj, field_validation, warnings)
            current = self._find(resource, ns, name)
            if current is None:
                if resource.allow_create_on_update and subresource is None:
                    meta.pop("resourceVersion", None)
                    return self._create_locked(resource, ns, obj, dry_run=dry_run), True
                raise self._not_found(resource, name)
            rv = meta.get("resourceVersion")
            if not rv and not resource.allow_unconditional_update:
                raise ApiError.invalid(
                    resource.plural,
                    resource.group,
                    name,
                    [
                        FieldError(
                            "metadata.resourceVersion",
                            "invalid",
                            "must be specified for an update",
                            0,
                            True,
                        )
                    ],
                )
            return self._update_locked(resource, ns, current, obj, subresource, dry_run), False

    def _update_locked(
        self,
        resource: ResourceType,
        ns: str,
        current: Stored,
        obj: JsonObj,
        subresource: str | None,
        dry_run: bool,
    ) -> Stored:
        """Write ``obj`` over ``current`` as a PUT (or an applied PATCH) does."""
        name = str(_meta(current.obj)["name"])
        self._check_preconditions(resource, name, _meta(obj), _meta(current.obj))
        old = resource.view(current.obj)
        if subresource == "status":
            new = _status_written(old, obj)
        else:
            new = self._main_written(resource, name, old, obj)
        if resource.strategy.default is not None:
            resource.strategy.default(new)
        if subresource != "status":
            if resource.track_generation and _spec_part(new) != _spec_part(old):
                _meta(new)["generation"] = int(_meta(old).get("generation") or 0) + 1
        _meta(new)["resourceVersion"] = _meta(current.obj).get("resourceVersion")
        self._validate(resource, new, old)
        stored_new = resource.unview(new)
        if _without_rv(stored_new) == _without_rv(current.obj):
            return self._view(resource, current)  # a no-op write: nothing changes, no event
        new_meta = _meta(stored_new)
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            # The last finalizer is gone: the object is deleted instead of updated.
            if not dry_run:
                self._delete_now(resource, ns, name, current)
            return self._view(resource, current)
        if dry_run:
            return Stored.of(resource.view(stored_new))
        return self._commit(resource, ns, stored_new, "MODIFIED", current)

    @staticmethod
    def _check_preconditions(
        resource: ResourceType, name: str, meta: JsonObj, current_meta: JsonObj
    ) -> None:
        """A write naming a uid or resourceVersion is refused unless they are current."""
        uid = meta.get("uid")
        if uid and uid != current_meta.get("uid"):
            why = _uid_precondition(uid, current_meta.get("uid"))
            raise ApiError.conflict(resource.plural, resource.group, name, why)
        rv = meta.get("resourceVersion")
        if rv and str(rv) != current_meta.get("resourceVersion"):
            raise ApiError.conflict(resource.plural, resource.group, name, _MODIFIED)

    def _main_written(
        self, resource: ResourceType, name: str, old: JsonObj, obj: JsonObj
    ) -> JsonObj:
        """``obj`` as a write to the main resource leaves it: the server-owned metadata
        and (with a status subresource) the status stay as they were."""
        meta, old_meta = _meta(obj), _meta(old)
        for key in _SERVER_OWNED_META:
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if resource.status_subresource:
            if "status" in old:
                obj["status"] = json_copy(old["status"])
            else:
                obj.pop("status", None)
        if old_meta.get("deletionTimestamp"):
            had = old_meta.get("finalizers") or []
            added = [f for f in (meta.get("finalizers") or []) if f not in had]
            if added:
                why = (
                    "no new finalizers can be added if the object is being deleted,"
                    f" found new finalizers {added!r}"
                )
                raise self._invalid(
                    resource, name, [FieldError("metadata.finalizers", "forbidden", why)]
                )
        return obj

    def _commit(
        self,
        resource: ResourceType,
        ns: str,
        stored_obj: JsonObj,
        event_type: str,
        previous: Stored | None,
    ) -> Stored:
        """Store ``stored_obj`` at a new resourceVersion and tell the watches."""
        rv = self._next_rv()
        _meta(stored_obj)["resourceVersion"] = str(rv)
        stored = Stored.of(stored_obj)
        self._bucket(resource, ns)[str(_meta(stored_obj)["name"])] = stored
        self._emit(resource, _Event(event_type, rv, stored, previous))
        return self._view(resource, stored)

    def patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        patch: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: builtins.list[str] | None = None,
    ) -> Stored:
        """PATCH with ``patch_type`` one of ``strategic``, ``merge``, ``json``."""
        ns = self._scope(resource, namespace)
        with self._lock:
            current = self._existing(resource, ns, name)
            old = resource.view(current.obj)
            try:
                if patch_type == "strategic":
                    if not resource.strategic_merge:
                        raise ApiError.unsupported_media_type(
                            "application/strategic-merge-patch+json",
                            [
                                "application/json-patch+json",
                                "application/merge-patch+json",
                                "application/apply-patch+yaml",
                            ],
                        )
                    patched = strategic_merge_patch(old, patch, resource.merge_schema)
                elif patch_type == "merge":
                    if not isinstance(patch, dict):
                        raise PatchError("merge patch must be a JSON object", status=400)
                    patched = json_merge_patch(old, patch)
                elif patch_type == "json":
                    patched = json_patch(old, patch)
                else:
                    raise ApiError.unsupported_media_type(patch_type, sorted(PATCH_TYPES))
            except PatchError as exc:
                if exc.status == 400:
                    raise ApiError.bad_request(exc.message) from None
                raise ApiError.unprocessable(exc.message) from None
            if not isinstance(patched, dict):
                raise ApiError.bad_request(f"the patched object is not a {resource.kind}")
            obj = self._decode(resource, patched)
            meta = obj["metadata"]
            if meta.get("name") != name:
                raise _name_mismatch(meta.get("name"), name)
            if resource.namespaced and meta.get("namespace") != ns:
                raise ApiError.bad_request(_NAMESPACE_MISMATCH)
            if not meta.get("resourceVersion"):
                meta["resourceVersion"] = _meta(current.obj).get("resourceVersion")
            self._prune(resource, obj, field_validation, warnings)
            return self._update_locked(resource, ns, current, obj, subresource, dry_run)

    # ------------------------------------------------------------------ delete

    def _delete_now(self, resource: ResourceType, ns: str, name: str, current: Stored) -> None:
        if resource is NAMESPACES:
            for other in self.registry:
                if other.namespaced and other.from_storage is None:
                    for child_name, child in list(
                        self._data.get(other.storage, {}).get(name, {}).items()
                    ):
                        self._delete_now(other, name, child_name, child)
        rv = self._next_rv()
        del self._bucket(resource, ns)[name]
        gone = Stored.of(_with_rv(current.obj, rv))
        self._emit(resource, _Event("DELETED", rv, gone, current))

    def purge(self, resource: ResourceType) -> None:
        """Delete every object of ``resource`` at once (its CRD is gone), with events."""
        with self._lock:
            for ns, name, stored in list(self._iter(resource, None)):
                self._delete_now(resource, ns, name, stored)

    def delete(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        preconditions: JsonObj | None = None,
        dry_run: bool = False,
    ) -> JsonObj:
        """DELETE; returns the object (pods, namespaces, pending finalizers) or a ``Status``."""
        ns = self._scope(resource, namespace)
        with self._lock:
            current = self._existing(resource, ns, name)
            meta = _meta(current.obj)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise ApiError.conflict(
                    resource.plural,
                    resource.group,
                    name,
                    _uid_precondition(pre["uid"], meta.get("uid")),
                )
            if pre.get("resourceVersion") and str(pre["resourceVersion"]) != meta.get(
                "resourceVersion"
            ):
                raise ApiError.conflict(
                    resource.plural,
                    resource.group,
                    name,
                    "Precondition failed: ResourceVersion in precondition:"
                    f" {pre['resourceVersion']},"
                    f" ResourceVersion in object meta: {meta.get('resourceVersion')}",
                )
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return self._view(resource, current).obj
                pending = json_copy(current.obj)
                pending["metadata"]["deletionTimestamp"] = now_rfc3339()
                pending["metadata"]["deletionGracePeriodSeconds"] = 0
                if dry_run:
                    return resource.view(pending)
                rv = self._next_rv()
                pending["metadata"]["resourceVersion"] = str(rv)
                stored = Stored.of(pending)
                self._bucket(resource, ns)[name] = stored
                self._emit(resource, _Event("MODIFIED", rv, stored, current))
                return self._view(resource, stored).obj
            if not dry_run:
                self._delete_now(resource, ns, name, current)
            if resource.return_deleted_object:
                return self._view(resource, current).obj
            details: JsonObj = {"name": name}
            if resource.group:
                details["group"] = resource.group
            details["kind"] = resource.plural
            details["uid"] = meta.get("uid")
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }

    def delete_collection(
        self,
        resource: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        dry_run: bool = False,
    ) -> builtins.list[JsonObj]:
        with self._lock:
            listed = self.list(resource, namespace, labels, fields)
            out: builtins.list[JsonObj] = []
            for item in listed.items:
                meta = item.obj["metadata"]
                result = self.delete(resource, meta.get("namespace"), meta["name"], dry_run=dry_run)
                out.append(result if result.get("kind") != "Status" else item.obj)
            return out

    # ------------------------------------------------------------------ pods/binding

    def bind(self, resource: ResourceType, namespace: str, name: str, body: Any) -> JsonObj:
        """POST ``pods/<name>/binding``: set ``spec.nodeName`` once, like the scheduler."""
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise ApiError.bad_request(
                "the object provided is unrecognized (must be of type Binding)"
            )
        node = body["target"].get("name")
        if not node:
            raise ApiError.invalid("Binding", "", name, [FieldError("target.name", "required")])
        with self._lock:
            current = self._find(resource, namespace, name)
            if current is None:
                raise self._not_found(resource, name)
            pod = json_copy(current.obj)
            if pod["metadata"].get("deletionTimestamp"):
                raise ApiError.conflict(
                    resource.plural, "", name, "pod is being deleted, cannot be assigned to a host"
                )
            have = (pod.get("spec") or {}).get("nodeName")
            if have:
                raise ApiError.conflict(
                    resource.plural, "", name, f'pod {name} is already assigned to node "{have}"'
                )
            pod.setdefault("spec", {})["nodeName"] = node
            status = pod.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now_rfc3339(),
                }
            )
            status["conditions"] = conditions
            rv = self._next_rv()
            pod["metadata"]["resourceVersion"] = str(rv)
            stored = Stored.of(pod)
            self._bucket(resource, namespace)[name] = stored
            self._emit(resource, _Event("MODIFIED", rv, stored, current))
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            }

    # ------------------------------------------------------------------ watch

    def watch(
        self,
        resource: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str | None,
        deliver: Callable[[str], None],
        *,
        send_initial_events: bool | None = None,
    ) -> tuple[builtins.list[str], Watcher | None]:
        """Register a watch; returns the lines to send first and the watcher.

        The watcher is None when the watch ends right away (its only line is an
        ERROR event, e.g. 410 for a resourceVersion older than the history).
        """
        self.check_fields(resource, fields)
        start: int | None = None
        if resource_version not in (None, "", "0"):
            try:
                start = int(str(resource_version))
                if start < 0:
                    raise ValueError
            except ValueError:
                raise ApiError.bad_request(
                    f'invalid resource version "{resource_version}"'
                ) from None
        initial = start is None if send_initial_events is None else send_initial_events
        watcher = Watcher(
            resource, namespace if resource.namespaced else None, labels, fields, deliver
        )
        with self._lock:
            lines: builtins.list[str] = []
            if initial:
                for _, _, stored in self._iter(resource, watcher.namespace):
                    view = self._view(resource, stored)
                    if watcher.matches(view.obj):
                        lines.append(_line("ADDED", view.raw))
                if send_initial_events:
                    lines.append(self._bookmark_line(resource, initial_events_end=True))
            elif start is not None:
                compacted = self.compacted_for(resource)
                if start < compacted:
                    status = ApiError.expired(
                        f"too old resource version: {start} ({compacted})"
                    ).to_status()
                    return [_line("ERROR", _dumps(status))], None
                for event in self._history.get(resource.storage, ()):
                    if event.rv > start:
                        line = self._event_line(watcher, event)
                        if line is not None:
                            lines.append(line)
            self._watchers.setdefault(resource.storage, []).append(watcher)
            return lines, watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self._lock:
            watchers = self._watchers.get(watcher.resource.storage, [])
            if watcher in watchers:
                watchers.remove(watcher)

    @property
    def watch_count(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._watchers.values())

    def _bookmark_line(self, resource: ResourceType, *, initial_events_end: bool = False) -> str:
        meta: JsonObj = {"resourceVersion": str(self._rv)}
        if initial_events_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return _line(
            "BOOKMARK",
            _dumps({"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}),
        )

    def bookmark(self, watcher: Watcher) -> None:
        """Send ``watcher`` a BOOKMARK at the current resourceVersion, in order with events."""
        with self._lock:
            watcher.deliver(self._bookmark_line(watcher.resource))

    def compact(self) -> None:
        """Forget all event history, as an etcd compaction plus watch-cache restart does."""
        with self._lock:
            self._compacted_all = self._rv
            for history in self._history.values():
                history.clear()


def _no_pruner(resource: ResourceType) -> Pruner | None:
    return None


def _no_deliver(line: str) -> None:  # pragma: no cover - list() never delivers
    raise AssertionError(line)
