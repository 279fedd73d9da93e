"""The ArtifactChecks this replica knows, kept by the ArtifactCheck watch: admitted
ones (a :class:`CheckState` each) and refused ones (a :class:`RefusedCheck` each).

Admission runs before anything else: a refused check gets no fetcher, no pod watch
and no task, so nothing is read or fetched for it. When a namespace has more checks
than allowed, the oldest are admitted and the newest wait; a slot freed admits the
oldest check waiting for one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from artifactcheck.control import accepting
from artifactcheck.control.metrics import Metrics
from artifactcheck.control.state import (
    CheckState,
    RefusedCheck,
    creation_order,
    key_of,
    transitions_of,
)
from artifactcheck.tenancy.admission import AdminConfig, admit

__all__ = ["Registry"]


class Registry:
    """Admits, re-admits and forgets checks; tells the coordinator what changed.

    ``admitted(state)``: a check to run (if leading); ``refused(r)``: a refusal to
    report (if leading); ``dropped(key)``: a check's task to end; ``running(key)``:
    whether a check runs here now; ``changed(state)``: a check's object changed.
    """

    def __init__(
        self,
        *,
        admin: AdminConfig,
        metrics: Metrics,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
        admitted: Callable[[CheckState], None],
        refused: Callable[[RefusedCheck], None],
        dropped: Callable[[str], None],
        running: Callable[[str], bool],
        changed: Callable[[CheckState], None],
    ) -> None:
        self.admin = admin
        self.metrics = metrics
        self.log = logger
        self._admitted = admitted
        self._refused = refused
        self._dropped = dropped
        self._running = running
        self._changed = changed
        self.checks: dict[str, CheckState] = {}
        self.refused: dict[str, RefusedCheck] = {}
        self.synced = False

    def sync(self, items: list[dict[str, Any]]) -> None:
        """The ArtifactCheck list (a first list or a relist) replaces what is known."""
        seen = set()
        # Oldest first: when a namespace has more checks than allowed, the newest wait.
        for obj in sorted(items, key=creation_order):
            seen.add(self.upsert(obj))
        for key in (set(self.checks) | set(self.refused)) - seen:
            self.drop(key)
            self.metrics.forget(key)
        self.synced = True

    def event(self, kind: str, obj: dict[str, Any]) -> None:
        """One ArtifactCheck watch event."""
        key = key_of(obj)
        if kind == "DELETED":
            self.drop(key)
            self.metrics.forget(key)
        elif kind in ("ADDED", "MODIFIED"):
            self.upsert(obj)
            state = self.checks.get(key)
            if state is None:
                return
            state.latest = obj
            if state.pins is not None and not self._running(key):
                # not running here (a standby): the leader's pins, as its status says,
                # are the ones this replica starts from if it takes over
                state.pins, state.announced = accepting.pins_of(state, obj)
            self._changed(state)

    def upsert(self, obj: dict[str, Any], *, force: bool = False) -> str:
        """Admit a new or changed ArtifactCheck and (re)start it, or record the refusal."""
        meta = obj.get("metadata", {})
        ns, name = meta.get("namespace", "default"), meta.get("name", "")
        key = f"{ns}/{name}"
        generation = int(meta.get("generation") or 1)
        existing = self.checks.get(key)
        if not force and existing is not None and existing.generation == generation:
            return key
        old_refusal = self.refused.get(key)
        if not force and old_refusal is not None and old_refusal.generation == generation:
            return key
        others = sum(1 for s in self.checks.values() if s.namespace == ns and s.key != key)
        admission = admit(ns, obj.get("spec") or {}, self.admin, checks_in_namespace=others)
        if admission.spec is None:
            self.log.warning("ArtifactCheck %s refused: %s", key, admission.message)
            if existing is not None:
                self.drop(key, readmit=True)
            self.refused[key] = RefusedCheck(
                key=key,
                obj=obj,
                generation=generation,
                admission=admission,
            )
            self._refused(self.refused[key])
            return key
        self.refused.pop(key, None)
        state = CheckState(
            key=key,
            namespace=ns,
            name=name,
            spec=admission.spec,
            generation=generation,
            admission=admission,
        )
        state.transitions = transitions_of(obj)
        state.latest = obj
        if state.spec.release_pins:
            state.pins, state.announced = accepting.pins_of(state, obj)
        if existing is not None:
            state.history = existing.history
            state.last_status = existing.last_status
            state.transitions = existing.transitions or state.transitions
            if state.pins is not None and existing.pins is not None:
                existing.pins.max_versions = state.spec.cache_versions
                state.pins, state.announced = existing.pins, existing.announced
            self.drop(key)
        self.checks[key] = state
        self._admitted(state)
        return key

    def drop(self, key: str, *, readmit: bool = True) -> None:
        """Forget a check (its task ends); a slot freed admits the oldest one waiting."""
        state = self.checks.pop(key, None)
        self.refused.pop(key, None)
        self._dropped(key)
        if state is not None and readmit:
            # A slot in the namespace is free: the oldest check refused for want of
            # one is admitted again (the others stay refused).
            waiting = sorted(
                (
                    r
                    for r in self.refused.values()
                    if r.obj.get("metadata", {}).get("namespace") == state.namespace
                    and any(x.rule == "TooManyChecks" for x in r.admission.refusals)
                ),
                key=lambda r: creation_order(r.obj),
            )
            for refused in waiting:
                self.upsert(refused.obj, force=True)
                if refused.key in self.checks:
                    break
