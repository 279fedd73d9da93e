"""``verify --processes``: a large fleet observed on every core, one verdict.

One process observes on one core: each GET costs CPU (reading, hashing, bookkeeping),
so ``verify`` over a large fleet is bound by that core (figures: docs/benchmarks.md).
For such a run the instances are grouped by host (:func:`host_groups`) and handed out
to this process and the workers of a :class:`~artifactcheck.observe.pool.WorkerPool`
for this run alone, a batch at a time to whichever is free
(:mod:`artifactcheck.observe.claims`), so they end together.
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
cannot be started (no memory or process slot) leaves more for the others. A run
that is cancelled kills its workers and reaps them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from artifactcheck.model.values import Expectation, Instance, Observation
from artifactcheck.observe.claims import Claims, batches
from artifactcheck.observe.instance import Observer
from artifactcheck.observe.pool import FetchSetup, Job, WorkerPool, fail_unobserved, take_each
from artifactcheck.observe.spread import (
    MAX_AUTO,
    MIN_PER_PROCESS,
    Shares,
    can_fork,
    cores,
    host_groups,
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
    "host_groups",
    "observe_in_processes",
    "processes_for",
    "shares",
    "split_by_host",
]


async def observe_in_processes(
    observer: Observer,
    groups: Sequence[Sequence[Instance]],
    *,
    share: Shares,
    into: dict[str, Observation],
    loaded: dict[str, Expectation],
    observe_here: Callable[[Sequence[Instance]], Any],
    on_result: Callable[[Observation], None] | None = None,
    meanwhile: Callable[[Callable[[], bool]], Coroutine[Any, Any, None]] | None = None,
) -> None:
    """Observe the host ``groups`` from ``share.count`` processes, this one included.

    No process has a fixed share: each takes the next batch of groups when it has room
    for one (:mod:`artifactcheck.observe.claims`), this one through ``observe_here``.
    Every observation goes ``into`` its instance's name, as :func:`observe_each` does;
    the workers' requests are added to this process's fetcher's counts; an instance a
    worker took and never reported (it died, or went silent) is a failed check.
    ``meanwhile``: what this process does beside its own observing, while anything is
    still observed; it is given a test of whether anything is, and returns soon after
    nothing is.
    """
    ok, why = can_fork()
    if not ok:  # a thread started since the run was planned: all of it here, as before
        log.info("observing in one process: %s", why)
        await observe_here([i for group in groups for i in group])
        return
    claims = Claims(batches(groups))  # before the fork: every worker inherits it
    pool = WorkerPool(share.count - 1, lasting=False)
    started: list[int] = []
    failures: list[BaseException | None] = []
    spec = observer.spec.model_copy(update={"http": share.http, "retry": share.retry})
    try:
        # every worker starts before any thread of ours does (the readers of run_job)
        for i in range(pool.size):
            try:
                pool.start_worker(i)
            except OSError as exc:  # no memory or process slot: the others take more
                log.warning("could not fork an observing process (%s); observing here", exc)
            else:
                started.append(i)
        jobs: list[asyncio.Task[BaseException | None]] = []

        def observing() -> bool:
            return not all(job.done() for job in jobs)

        async def mine() -> None:
            async with asyncio.TaskGroup() as inner:
                taking = inner.create_task(
                    take_each(claims, share.http.max_connections, observe_here)
                )
                if meanwhile is not None:  # from the start: the workers take more meanwhile
                    inner.create_task(meanwhile(lambda: not taking.done() or observing()))

        async with asyncio.TaskGroup() as tg:
            tg.create_task(mine())  # first, as before; it starts once every job is listed
            for i in started:
                job = Job(
                    spec=spec,
                    seed=observer.seed,
                    instances=[],
                    first=False,
                    releases=observer.expectations is not None,
                    fetch=FetchSetup(),
                    claims=claims,
                )
                jobs.append(tg.create_task(pool.run_job(i, job, observer, into, loaded, on_result)))
        failures = [job.result() for job in jobs]
    finally:
        pool.close()
        claims.close()
    unobserved = [i for group in groups for i in group if i.name not in into]
    if unobserved:  # taken by a worker that failed its job: their checks failed
        failed = next((f for f in failures if f is not None), None)
        fail_unobserved(unobserved, spec, failed, into, on_result)
