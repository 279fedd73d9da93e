"""A check's pods as its pod watch reports them: which are candidates, which are new.

A pod is a candidate once it has an IP *and* its containers are ready: kubelet gives
the IP first, and a pod checked before its server listens is only "unreachable" (then
waits a full interval). Becoming ready makes it new, and new pods are checked at once
(the gate-mode fast path, control/checking.py).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from artifactcheck.clients.kube_bodies import Pod
from artifactcheck.control.state import CheckState, PodSummary, address_of, key_of
from artifactcheck.discover.kube_pods import actionable_copy, containers_ready, pod_to_instance
from artifactcheck.discover.sample import draw_seed, sample_instances
from artifactcheck.model.records import replace
from artifactcheck.model.values import Instance, Observation
from artifactcheck.observe.instance import Observer

__all__ = [
    "candidate",
    "followed_up",
    "forget_gone",
    "pod_changed",
    "pods_listed",
    "refreshed",
    "summary",
    "targets",
]


def candidate(state: CheckState, obj: dict[str, Any]) -> tuple[Instance | None, datetime | None]:
    """The pod as an instance once its containers are ready, and since when."""
    src = state.spec.kubernetes
    assert src is not None
    ready, since = containers_ready(obj)
    if not ready:
        return None, None
    condition = state.spec.policy.condition_type
    return pod_to_instance(obj, source=src, condition_type=condition), since


def summary(state: CheckState, obj: dict[str, Any]) -> PodSummary | None:
    """What the check keeps of a listed pod: None for one that is not a candidate."""
    inst, ready_at = candidate(state, obj)
    if inst is None:
        return None
    return inst, ready_at, actionable_copy(obj, state.spec.policy.condition_type)


def pods_listed(state: CheckState, watching_since: float, items: list[PodSummary | None]) -> None:
    """The pod list (a first list or a relist after 410) replaces what the check kept."""
    pods = {}
    objects: dict[str, Pod] = {}
    since: dict[str, datetime | None] = {}
    for item in items:
        if item is not None:
            inst, ready_at, copy = item
            pods[inst.name] = inst
            objects[inst.name] = copy
            since[inst.name] = ready_at
    for name in pods.keys() - state.pods.keys():
        _mark_new(state, name, since[name], watching_since)
    state.pods = pods
    state.addresses = {n: a for n, i in pods.items() if (a := address_of(i)) is not None}
    state.hosts = None
    state.objects = objects
    state.synced = True
    state.wake.set()


def pod_changed(state: CheckState, watching_since: float, kind: str, obj: dict[str, Any]) -> None:
    """One pod watch event: a pod comes, moves, changes or goes."""
    name = key_of(obj)
    inst, ready_at = (None, None) if kind == "DELETED" else candidate(state, obj)
    if inst is None:
        if state.pods.pop(name, None) is not None:
            state.addresses.pop(name, None)
            state.hosts = None
        state.objects.pop(name, None)
        state.observations.pop(name, None)
        state.ready_since.pop(name, None)
        if kind == "DELETED":
            state.gone.add(name)  # its policy memory is dropped after the next cycle
        return
    state.gone.discard(name)  # the same name again (a StatefulSet's pod): kept
    if name not in state.pods:
        _mark_new(state, name, ready_at, watching_since)
    old = state.pods.get(name)
    if old is None or old.base_url != inst.base_url:
        address = address_of(inst)
        if address is None:
            state.addresses.pop(name, None)
        else:
            state.addresses[name] = address
        state.hosts = None
    # an unchanged pod keeps its Instance (so its verdict is reused, not rejudged)
    state.pods[name] = old if old == inst else inst
    state.objects[name] = actionable_copy(obj, state.spec.policy.condition_type)


def _mark_new(
    state: CheckState, name: str, ready_at: datetime | None, watching_since: float
) -> None:
    """Check a pod that just became a candidate at the next (debounced) wake-up.

    Its verdict latency is measured from when its containers became ready (the
    ContainersReady condition's lastTransitionTime, the moment the wait begins),
    or from now without one. Pods already ready before this check started
    watching are not new pods: their latency is not recorded.
    """
    state.pending.add(name)
    wall, mono = time.time(), time.monotonic()
    if ready_at is None:
        state.ready_since.setdefault(name, mono)
    elif ready_at.timestamp() >= watching_since - 1.0:  # stamps have 1s precision
        state.ready_since.setdefault(name, mono - max(0.0, wall - ready_at.timestamp()))
    state.wake.set()


def forget_gone(state: CheckState) -> None:
    """Drop the policy memory (``history.instances``) of pods that went away.

    The policy carries every instance it ever judged into the next History, so under
    churn (a replaced pod comes back under a new name) that memory grew by every pod
    ever seen, never dropped (the soak benchmark: +20 entries a minute at 1,000 pods).
    Forgotten here: a pod deleted since the last call, and a pod that is no candidate
    now (gone, or not ready) whose memory holds nothing (no streak, flag or quarantine;
    its last verdict only), which also covers pods deleted while the watch was down
    (a relist names only candidates). A pod that returns with nothing remembered is
    recovered from its annotations and conditions as after a restart, as before.

    Called at the end of a cycle, under ``state.judging``: a cycle's decision starts
    from the History before it, so a pod forgotten while it ran would come back.
    """
    history, present = state.history, state.pods
    keep = {
        name: st
        for name, st in history.instances.items()
        if name in present or (name not in state.gone and st.held_against)
    }
    state.gone.clear()
    if len(keep) != len(history.instances):
        state.history = replace(history, instances=keep)


def refreshed(state: CheckState) -> list[Observation]:
    """Every pod's latest observation, with the pod as the watch last saw it
    (labels, conditions); kept refreshed, so an unchanged pod stays the same
    object and its verdict is reused."""
    observations = []
    for name, obs in state.observations.items():
        inst = state.pods.get(name)
        if inst is None:
            continue
        if obs.instance is not inst:
            obs = replace(obs, instance=inst)
            state.observations[name] = obs
        observations.append(obs)
    return observations


def followed_up(state: CheckState, sampled: set[str]) -> list[Instance]:
    """The pods a sampled full cycle observes besides its sample: those whose last
    verdicts are bad (a streak, quarantined or flagged), at most as many as the sample.

    A confirmation streak counts observations, so a suspect left to the sample waits
    for the draw to fall on it again (never, with a fixed seed and a fleet that stopped
    changing: the suspect stays half-confirmed, its drift unacted on), and a
    quarantined pod that recovered waits as long to be released. Longest streaks
    first, so a mass of suspects cannot starve the ones nearly confirmed.
    """
    suspects = [
        (st.streak, name)
        for name, st in state.history.instances.items()
        if st.held_against and name in state.pods and name not in sampled
    ]
    suspects.sort(key=lambda s: (-s[0], s[1]))
    limit = state.spec.sampling.instances or 0
    return [state.pods[name] for _, name in suspects[:limit]]


def targets(state: CheckState, observer: Observer, *, full: bool) -> list[Instance]:
    """The pods to observe this cycle: a full one's (fresh) sample and the suspects
    it follows up (:func:`followed_up`), the new ones.

    New pods are the fast path's, except before the first full cycle, which checks
    every pod found at start-up itself.
    """
    spec = state.spec
    take_new = not full or not state.started.is_set()
    found = list(state.pods.values()) if full else []
    if full and spec.sampling.seed is None:
        # a fresh sample each full cycle (recorded in the report), so re-sampling
        # reaches every pod and file over time instead of the same ones forever
        observer.seed = draw_seed()
    if full and spec.sampling.instances:
        sampled = sample_instances(found, spec.sampling.instances, seed=observer.seed)
        found = sampled + followed_up(state, {i.name for i in sampled})
    if take_new:
        found += [state.pods[n] for n in state.pending if n in state.pods]
        state.pending.clear()
    return list({i.name: i for i in found}.values())
