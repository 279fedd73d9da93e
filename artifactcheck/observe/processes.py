"""``verify --processes``: a large fleet observed on every core, one verdict.

One process observes on one core: each GET costs CPU (reading, hashing, bookkeeping),
so ``verify`` over a large fleet is bound by that core (figures: docs/benchmarks.md).
For such a run the instances are split by host (:func:`split_by_host`) between this
process and the workers of a :class:`~artifactcheck.observe.pool.WorkerPool` for this
run alone; this process observes the first share itself, each worker one other.
Judging, the CDN, deciding and reporting stay here, on all the observations together,
exactly as in one process. The pool keeps the sample, the expected releases and a
dead or silent worker's instances as one process would (see its module); the plan
keeps the limits: a host belongs to one process, so ``max_per_host`` holds as it is,
and ``max_connections`` and the retry budget's minimum are shared out between the
processes (:func:`shares`), so the run never puts more load on the fleet than one
process would.

The workers are forks of this process (:func:`~artifactcheck.observe.pool.start_method`),
started before any thread of its own and before it opened any connection; with a thread
running (:func:`can_fork`) the run observes in one process, as before. A worker that
cannot be started (no memory or process slot) leaves its share to this process. A run
that is cancelled kills its workers and reaps them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from artifactcheck.model.values import Expectation, Instance, Observation
from artifactcheck.observe.instance import Observer
from artifactcheck.observe.pool import FetchSetup, Job, WorkerPool
from artifactcheck.observe.spread import (
    MAX_AUTO,
    MIN_PER_PROCESS,
    Shares,
    can_fork,
    cores,
    processes_for,
    shares,
    split_by_host,
)

log = logging.getLogger("artifactcheck")

__all__ = [  # the plan (how many, what each may use) lives in .spread
    "MAX_AUTO",
    "MIN_PER_PROCESS",
    "Shares",
    "can_fork",
    "cores",
    "observe_in_processes",
    "processes_for",
    "shares",
    "split_by_host",
]


async def observe_in_processes(
    observer: Observer,
    slices: Sequence[Sequence[Instance]],
    *,
    share: Shares,
    into: dict[str, Observation],
    loaded: dict[str, Expectation],
    observe_here: Callable[[Sequence[Instance]], Any],
    on_result: Callable[[Observation], None] | None = None,
    meanwhile: Callable[[Callable[[], bool]], Awaitable[None]] | None = None,
) -> None:
    """Observe ``slices[0]`` here (``observe_here``) and each other slice in a worker.

    Every observation goes ``into`` its instance's name, as :func:`observe_each` does;
    the workers' requests are added to this process's fetcher's counts. ``meanwhile``:
    what this process does once its own share is observed, while a worker still
    observes; it is given a test of whether one still does, and returns soon after
    none does.
    """
    ok, why = can_fork()
    if not ok:  # a thread started since the run was planned: all of it here, as before
        log.info("observing in one process: %s", why)
        await observe_here([i for part in slices for i in part])
        return
    pool = WorkerPool(len(slices) - 1, lasting=False)
    here = list(slices[0])
    started: list[tuple[int, Sequence[Instance]]] = []
    spec = observer.spec.model_copy(update={"http": share.http, "retry": share.retry})
    try:
        # every worker starts before any thread of ours does (the readers of run_job)
        for i, part in enumerate(slices[1:]):
            if not part:
                continue
            try:
                pool.start_worker(i)
            except OSError as exc:  # no memory or process slot for one more: observed here
                log.warning("could not fork an observing process (%s); observing here", exc)
                here += part
            else:
                started.append((i, part))
        jobs: list[asyncio.Task[None]] = []

        def observing() -> bool:
            return not all(job.done() for job in jobs)

        async def mine() -> None:
            await observe_here(here)
            if meanwhile is not None and observing():
                await meanwhile(observing)

        async with asyncio.TaskGroup() as tg:
            tg.create_task(mine())  # first, as before; it starts once every job is listed
            for i, part in started:
                job = Job(
                    spec=spec,
                    seed=observer.seed,
                    instances=list(part),
                    first=False,
                    releases=observer.expectations is not None,
                    fetch=FetchSetup(),
                )
                jobs.append(tg.create_task(pool.run_job(i, job, observer, into, loaded, on_result)))
    finally:
        pool.close()
