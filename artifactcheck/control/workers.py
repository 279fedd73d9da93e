"""Which of the controller's cycles its observing processes take, and how they split.

A cycle that observes thousands of pods (the first one after a start checks every pod
found) is bound by the CPU of one process, and the controller's event loop also judges,
acts and renews the lease. :class:`ObservePool` is the controller's
:class:`~artifactcheck.observe.pool.WorkerPool` (a lasting one: started by a fork
server, a dead worker replaced for the next cycle; the pool keeps one verdict whatever
the split, see its module) with the controller's rules on top:

- **Only a large cycle, one at a time.** A cycle too small to pay for the pipes (the
  new-pod fast path), or one that finds the workers busy with another check's cycle,
  is observed in the controller as before.
- **The same limits.** The cycle is split by host between the workers
  (:func:`~artifactcheck.observe.spread.split_by_host`), so ``max_per_host`` holds as
  it is; ``max_connections`` and the retry budget's minimum are shared out
  (:func:`~artifactcheck.observe.spread.shares`); the controller itself does not
  observe while its workers do, so together they never exceed one process's load.
- **The same egress rules and credentials.** Each job carries the check's egress
  policy and credential scope with the pods' addresses as they are when it starts.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from artifactcheck.fetch import urls
from artifactcheck.model.records import replace
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Expectation, Instance, Observation
from artifactcheck.observe.instance import Observer
from artifactcheck.observe.pool import FetchSetup, Job, WorkerPool
from artifactcheck.observe.spread import (
    MAX_AUTO,
    MIN_PER_PROCESS,
    cores,
    processes_for,
    shares,
    split_by_host,
)
from artifactcheck.tenancy.egress import Address

log = logging.getLogger("artifactcheck.control.workers")

__all__ = ["FetchSetup", "ObservePool"]


@dataclass(frozen=True, slots=True)
class _Fixed:
    """The pods' addresses as a job starts (a callable that pickles, unlike a closure)."""

    addresses: frozenset[Address]

    def __call__(self) -> frozenset[Address]:
        return self.addresses


def _pinned(setup: FetchSetup) -> FetchSetup:
    """``setup`` with the pods' current addresses fixed, so it can be sent."""
    egress, scoped = setup.egress, setup.scoped
    if egress is not None:
        egress = replace(egress, instance_addresses=_Fixed(frozenset(egress.instance_addresses())))
    if scoped is not None:
        scoped = copy.copy(scoped)
        scoped.instance_addresses = _Fixed(frozenset(scoped.instance_addresses()))
    return FetchSetup(egress=egress, scoped=scoped, proxies=setup.proxies)


class ObservePool(WorkerPool):
    """Worker processes that observe a large cycle's pods (see the module doc).

    ``processes``: how many (default: one per core, at most
    :data:`~artifactcheck.observe.spread.MAX_AUTO`). ``min_per_process``: fewer pods
    than this per worker and a cycle is observed in the controller. Call :meth:`start`
    early (it starts the fork server and the workers) and :meth:`close` at the end.
    """

    def __init__(
        self, processes: int | None = None, *, min_per_process: int = MIN_PER_PROCESS
    ) -> None:
        size = max(1, processes if processes is not None else min(cores(), MAX_AUTO))
        super().__init__(size, lasting=True)
        self.min_per_process = min_per_process
        self._busy = False
        self.cycles = 0  # cycles observed by the workers (for tests and benchmarks)

    def count_for(self, spec: CheckSpec, instances: Sequence[Instance]) -> int:
        """How many workers would observe ``instances`` (below 2: the controller does)."""
        if self._busy:
            return 0
        hosts = len({urls.host_key(i.base_url) for i in instances})
        wanted = min(self.size, len(instances) // max(1, self.min_per_process))
        return min(processes_for(len(instances), hosts, asked=wanted), spec.http.max_connections)

    async def observe(
        self,
        observer: Observer,
        instances: Sequence[Instance],
        *,
        into: dict[str, Observation],
        loaded: dict[str, Expectation],
        first: bool,
        fetch: Callable[[], FetchSetup],
    ) -> bool:
        """Observe ``instances`` in the workers, each observation ``into`` its pod's name
        and each release met into ``loaded``, as ``pipeline.observe_each`` does; the
        workers' requests are added to ``observer.fetcher``'s counts. False when the
        cycle is not taken (too small, or the workers are busy): nothing was observed.
        """
        count = self.count_for(observer.spec, instances)
        if count < 2:
            return False
        self._busy = True
        started = time.monotonic()
        log.info("observing %d pods from %d processes", len(instances), count)
        try:
            share = shares(observer.spec, count)
            spec = observer.spec.model_copy(update={"http": share.http, "retry": share.retry})
            setup = _pinned(fetch())
            async with asyncio.TaskGroup() as tg:
                for i, part in enumerate(split_by_host(instances, count)):
                    job = Job(
                        spec=spec,
                        seed=observer.seed,
                        instances=list(part),
                        first=first,
                        releases=observer.expectations is not None,
                        fetch=setup,
                    )
                    tg.create_task(self.run_job(i, job, observer, into, loaded))
            self.cycles += 1
            log.info("observed %d pods in %.1fs", len(instances), time.monotonic() - started)
        finally:
            self._busy = False
        return True
