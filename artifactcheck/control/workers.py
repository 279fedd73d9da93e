"""The controller's observing processes: a large cycle on every core, one verdict.

A cycle that observes thousands of pods (the first one after a start checks every pod
found) is bound by the CPU of one process: each GET costs reading, hashing and
bookkeeping, and the controller's event loop also judges, acts and renews the lease.
:class:`ObservePool` keeps worker processes for it, started by a fork server (a fresh
interpreter that imported the observing code once, and forks each worker), so a worker
never inherits the controller's threads, locks or connections, whenever it is started.

A cycle large enough (:meth:`ObservePool.observe`) is split by host between the
workers (:func:`~artifactcheck.observe.spread.split_by_host`); each worker observes
its share with its own Fetcher and Observer and sends every observation back as it
completes. Judging, deciding, acting and the status stay in the controller, on all the
observations together, exactly as when the cycle is observed in one process. What
keeps the verdicts the same is what keeps them the same for ``verify --processes``
(:mod:`artifactcheck.observe.processes`):

- **The same sample**: every worker samples with the cycle's seed.
- **One expected release per version**: a worker asks the controller, which loads it
  through the check's :class:`~artifactcheck.release.sources.Expectations` (its
  cache, its pins, its last known good) and sends the same release to every worker.
- **The same limits**: a host belongs to one worker, so ``max_per_host`` holds as it
  is; ``max_connections`` and the retry budget's minimum are shared out
  (:func:`~artifactcheck.observe.spread.shares`); the controller itself does not
  observe while its workers do, so together they never exceed one process's load.
- **The same egress rules and credentials**: each job carries the check's egress
  policy and credential scope with the pods' addresses as they are when it starts.
- **One worker never ends the cycle**: a worker that dies or stays silent past the
  instance deadline leaves its pods not yet reported ``inconclusive`` (check failed),
  named; it is replaced for the next cycle.

A cycle too small to pay for the pipes (the new-pod fast path), or one that finds the
workers busy with another check's cycle, is observed in the controller as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any, BinaryIO

from artifactcheck.fetch import urls
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Expectation, Instance, Observation
from artifactcheck.observe.failures import check_failed, describe
from artifactcheck.observe.instance import Observer
from artifactcheck.observe.processes import _AskParent, next_message, stuck_after
from artifactcheck.observe.spread import (
    MAX_AUTO,
    MIN_PER_PROCESS,
    cores,
    processes_for,
    shares,
    split_by_host,
)
from artifactcheck.tenancy.credentials import CredentialScope
from artifactcheck.tenancy.egress import Address, EgressPolicy

log = logging.getLogger("artifactcheck.control.workers")

__all__ = ["FetchSetup", "ObservePool"]

#: Exit status of a worker whose own code failed (not a pod's fault).
_FAILED = 70


@dataclass(frozen=True, slots=True)
class FetchSetup:
    """What the check's own Fetcher is built with, for the workers' Fetchers."""

    egress: EgressPolicy | None
    scoped: CredentialScope | None
    proxies: Proxies | None


@dataclass(frozen=True, slots=True)
class _Fixed:
    """The pods' addresses as a job starts (a callable that pickles, unlike a closure)."""

    addresses: frozenset[Address]

    def __call__(self) -> frozenset[Address]:
        return self.addresses


@dataclass(frozen=True, slots=True)
class _Job:
    """One worker's share of a cycle: everything its Observer is built from."""

    spec: CheckSpec  # its http and retry are the worker's share
    seed: int
    instances: list[Instance]
    first: bool
    releases: bool  # whether the check has a release source to ask
    fetch: FetchSetup


def _pinned(setup: FetchSetup) -> FetchSetup:
    """``setup`` with the pods' current addresses fixed, so it can be sent."""
    egress, scoped = setup.egress, setup.scoped
    if egress is not None:
        egress = replace(egress, instance_addresses=_Fixed(frozenset(egress.instance_addresses())))
    if scoped is not None:
        scoped = copy.copy(scoped)
        scoped.instance_addresses = _Fixed(frozenset(scoped.instance_addresses()))
    return FetchSetup(egress=egress, scoped=scoped, proxies=setup.proxies)


@dataclass(slots=True)
class _Worker:
    """One worker process and its two pickle streams (each job: one Pickler, one memo)."""

    process: Any  # multiprocessing.Process of the fork server's context
    results: BinaryIO  # worker -> here: ("need", version) | ("obs", o) | ("done", stats)
    requests: BinaryIO  # here -> worker: ("job", _Job) | ("release", version, exp, error)

    def send(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError, ValueError):  # the worker is gone: accounted for
            pickle.dump(message, self.requests, protocol=pickle.HIGHEST_PROTOCOL)
            self.requests.flush()

    def close(self) -> None:
        for stream in (self.results, self.requests):
            with contextlib.suppress(OSError):
                stream.close()


def _stream(conn: Connection, mode: str) -> BinaryIO:
    """A buffered file over a connection's descriptor (its own copy; ``conn`` closed)."""
    stream = os.fdopen(os.dup(conn.fileno()), mode)
    conn.close()
    return stream  # type: ignore[return-value]


class ObservePool:
    """Worker processes that observe a large cycle's pods (see the module doc).

    ``processes``: how many (default: one per core, at most
    :data:`~artifactcheck.observe.spread.MAX_AUTO`). ``min_per_process``: fewer pods
    than this per worker and a cycle is observed in the controller. Call :meth:`start`
    early (it starts the fork server and the workers) and :meth:`close` at the end.
    """

    def __init__(
        self,
        processes: int | None = None,
        *,
        min_per_process: int = MIN_PER_PROCESS,
        method: str = "forkserver",
    ) -> None:
        self.size = max(1, processes if processes is not None else min(cores(), MAX_AUTO))
        self.min_per_process = min_per_process
        self._ctx: Any = multiprocessing.get_context(method)  # its Process and Pipe
        if method == "forkserver":  # the fork server imports the observing code once
            self._ctx.set_forkserver_preload([__name__])
        self._workers: list[_Worker | None] = [None] * self.size
        self._busy = False
        self.cycles = 0  # cycles observed by the workers (for tests and benchmarks)

    def start(self) -> ObservePool:
        for i in range(self.size):
            self._worker(i)
        return self

    def close(self) -> None:
        for i, worker in enumerate(self._workers):
            if worker is not None:
                self._end(i, worker)

    def _worker(self, i: int) -> _Worker:
        worker = self._workers[i]
        if worker is not None and worker.process.is_alive():
            return worker
        if worker is not None:
            self._end(i, worker)
        results_r, results_w = self._ctx.Pipe(duplex=False)
        requests_r, requests_w = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(
            target=_serve,
            args=(results_w, requests_r),
            name=f"artifactcheck-observe-{i}",
            daemon=True,
        )
        process.start()
        # the worker's ends live in the worker only: its death is an EOF here
        results_w.close()
        requests_r.close()
        worker = self._workers[i] = _Worker(
            process=process, results=_stream(results_r, "rb"), requests=_stream(requests_w, "wb")
        )
        return worker

    def _end(self, i: int, worker: _Worker) -> None:
        """Kill a worker (if it still runs) and reap it; the next cycle starts another."""
        with contextlib.suppress(OSError, ValueError):
            worker.process.kill()
        worker.process.join(timeout=5)
        worker.close()
        if self._workers[i] is worker:
            self._workers[i] = None

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
                    job = _Job(
                        spec=spec,
                        seed=observer.seed,
                        instances=list(part),
                        first=first,
                        releases=observer.expectations is not None,
                        fetch=setup,
                    )
                    tg.create_task(self._run(i, job, observer, into, loaded))
            self.cycles += 1
            log.info("observed %d pods in %.1fs", len(instances), time.monotonic() - started)
        finally:
            self._busy = False
        return True

    async def _run(
        self,
        i: int,
        job: _Job,
        observer: Observer,
        into: dict[str, Observation],
        loaded: dict[str, Expectation],
    ) -> None:
        """One worker's job: send it, take its observations, answer its releases."""
        owed = {inst.name: inst for inst in job.instances}
        why: BaseException | None = None
        worker: _Worker | None = None
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()
        reading: asyncio.Future[None] | None = None
        try:
            worker = await asyncio.to_thread(self._worker, i)
            results = worker.results

            def read() -> None:  # on a thread: this job's pickles, one memo, to "done"
                reader = pickle.Unpickler(results)
                try:
                    while True:
                        message = reader.load()
                        loop.call_soon_threadsafe(queue.put_nowait, message)
                        if message[0] == "done":
                            return
                except (EOFError, OSError, ValueError, pickle.UnpicklingError):
                    loop.call_soon_threadsafe(queue.put_nowait, None)

            # sent from a thread: a large job must not block the loop
            await asyncio.to_thread(worker.send, ("job", job))
            reading = loop.run_in_executor(None, read)
            silence = stuck_after(job.spec)
            while True:
                try:
                    message = await next_message(queue, silence)
                except TimeoutError:
                    why = RuntimeError(f"the observing process sent nothing for {silence:.0f}s")
                    break
                if message is None:
                    why = RuntimeError("the observing process ended early")
                    break
                if message[0] == "obs":
                    mine = owed.pop(message[1].instance.name, None)
                    if mine is not None:  # this process's Instance, not the worker's copy
                        into[mine.name] = replace(message[1], instance=mine)
                elif message[0] == "need":
                    answer = await _release(observer, loaded, message[1])
                    await asyncio.to_thread(worker.send, ("release", *answer))
                elif message[0] == "done":  # its counts come last, after its observations
                    observer.fetcher.stats.add(message[1])
                    break
        except (asyncio.CancelledError, Exception) as exc:
            why = exc
            raise
        finally:
            if worker is not None and why is not None:
                self._end(i, worker)  # a worker mid-job is never given another: replaced
            if reading is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(reading)
            if owed:  # not observed: their checks failed, not the cycle
                failure = why if why is not None else RuntimeError("not observed")
                if not isinstance(failure, asyncio.CancelledError):
                    log.warning("%s; %d pod(s) not observed", describe(failure), len(owed))
                for inst in owed.values():
                    into[inst.name] = check_failed(inst, job.spec.manifest_path or "", failure)


async def _release(
    observer: Observer, loaded: dict[str, Expectation], version: Any
) -> tuple[Any, Expectation | None, str | None]:
    """A release a worker asks for, loaded once through the check's source; a load that
    fails is sent back as its error (those pods' failed check, as in one process)."""
    try:
        if observer.expectations is None or not isinstance(version, str):
            raise RuntimeError("this check has no release source")
        expectation = await observer.expectations.get(version)
    except Exception as exc:  # noqa: BLE001 - one release never ends the cycle
        return version, None, describe(exc)
    loaded[expectation.version] = expectation
    return version, expectation, None


# -- the worker's side -------------------------------------------------------------------


class _Answers:
    """The current job's release questions, answered by the reader thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.job: tuple[asyncio.AbstractEventLoop, _AskParent] | None = None

    def deliver(self, version: Any, expectation: Expectation | None, error: str | None) -> None:
        with self.lock:
            if self.job is not None:
                loop, ask = self.job
                loop.call_soon_threadsafe(ask.answered, version, expectation, error)

    def gone(self) -> None:
        with self.lock:
            if self.job is not None:
                loop, ask = self.job
                loop.call_soon_threadsafe(ask.parent_gone)


def _serve(results_conn: Connection, requests_conn: Connection) -> None:
    """A worker's life: one job at a time until the controller closes its end."""
    # SIGINT (Ctrl-C on the controller's terminal) is the controller's to handle: it
    # ends its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    status = 0
    try:
        results = _stream(results_conn, "wb")
        requests = _stream(requests_conn, "rb")
        jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        answers = _Answers()

        def read() -> None:  # the only reader of the controller's stream
            try:
                while True:
                    message = pickle.load(requests)
                    if message[0] == "job":
                        jobs.put(message[1])
                    elif message[0] == "release":
                        answers.deliver(*message[1:])
            except (EOFError, OSError, ValueError, pickle.UnpicklingError):
                pass
            finally:
                answers.gone()
                jobs.put(None)

        threading.Thread(target=read, name="observe-requests", daemon=True).start()
        while (job := jobs.get()) is not None:
            asyncio.run(_observe_job(results, job, answers))
    except BaseException:  # noqa: BLE001 - whatever happens, the worker exits here
        log.exception("observing process %d failed", os.getpid())
        status = _FAILED
    finally:
        os._exit(status)


async def _observe_job(results: BinaryIO, job: _Job, answers: _Answers) -> None:
    """Observe one job's pods; stream each observation back, then the request counts
    (one Pickler for the job: the manifest its pods share is sent once)."""
    sender = pickle.Pickler(results, protocol=pickle.HIGHEST_PROTOCOL)

    def send(message: tuple[Any, ...]) -> None:
        sender.dump(message)
        results.flush()

    ask = _AskParent(send) if job.releases else None
    if ask is not None:
        with answers.lock:
            answers.job = (asyncio.get_running_loop(), ask)
    fetch = job.fetch
    try:
        async with Fetcher(
            http=job.spec.http,
            retry=job.spec.retry,
            logger=logging.getLogger("artifactcheck.check"),
            egress=fetch.egress,
            scoped_headers=fetch.scoped or None,
            proxies=fetch.proxies,
        ) as fetcher:
            observer = Observer(spec=job.spec, fetcher=fetcher, expectations=ask, seed=job.seed)

            async def one(instance: Instance) -> None:
                obs, _ = await observer.observe(instance, first=job.first)
                send(("obs", obs))

            async with asyncio.TaskGroup() as tg:
                for instance in job.instances:
                    tg.create_task(one(instance))
            stats: FetchStats = fetcher.stats
            send(("done", stats))
    finally:
        with answers.lock:
            answers.job = None
