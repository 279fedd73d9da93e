"""The ArtifactChecks this replica knows, kept by the ArtifactCheck watch: admitted
ones (a :class:`CheckState` each) and refused ones (a :class:`RefusedCheck` each).

Admission runs before anything else: a refused check gets no fetcher, no pod watch
and no task, so nothing is read or fetched for it. When a namespace has more checks
than allowed, the oldest are admitted and the newest wait; a slot freed admits the
oldest check waiting for one.
"""

from __future__ import annotations

from typing import Any, Protocol

from artifactcheck.control import accepting
from artifactcheck.control.context import Context
from artifactcheck.control.state import (
    CheckState,
    RefusedCheck,
    creation_order,
    key_of,
    transitions_of,
)
from artifactcheck.tenancy.admission import admit

__all__ = ["Registry", "Runs"]


class Runs(Protocol):
    """What the registry tells the coordinator, which runs the checks' tasks."""

    def on_admitted(self, state: CheckState) -> None:
        """A check to run (if leading)."""

    def on_refused(self, refused: RefusedCheck) -> None:
        """A refusal to report (if leading)."""

    def on_dropped(self, key: str) -> None:
        """A check whose task is to end."""

    def is_running(self, key: str) -> bool:
        """Whether the check runs here now."""

    def on_changed(self, state: CheckState) -> None:
        """The check's object changed (an annotation to act on)."""


class Registry:
    """Admits, re-admits and forgets checks; tells ``runs`` what changed."""

    def __init__(self, ctx: Context, runs: Runs) -> None:
        self.admin = ctx.admin
        self.metrics = ctx.metrics
        self.log = ctx.log
        self._runs = runs
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
            if state.pins is not None and not self._runs.is_running(key):
                # not running here (a standby): the leader's pins, as its status says,
                # are the ones this replica starts from if it takes over
                state.pins, state.announced = accepting.pins_of(state, obj)
            self._runs.on_changed(state)

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
            self._runs.on_refused(self.refused[key])
            return key
        self.refused.pop(key, None)
        spec = admission.spec
        state = CheckState(key, ns, name, spec, generation, admission=admission, latest=obj)
        state.transitions = transitions_of(obj)
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
        self._runs.on_admitted(state)
        return key

    def drop(self, key: str, *, readmit: bool = True) -> None:
        """Forget a check (its task ends); a slot freed admits the oldest one waiting."""
        state = self.checks.pop(key, None)
        self.refused.pop(key, None)
        self._runs.on_dropped(key)
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
