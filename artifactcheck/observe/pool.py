"""One pool of observing processes, for ``verify --processes`` and the controller.

Observing a large fleet is bound by the CPU of one process: each GET costs reading,
hashing and bookkeeping. A :class:`WorkerPool` keeps worker processes; each is given
jobs (:class:`Job`: the instances of a share of the hosts, or the run's hand-out to take
them from as it has room (:mod:`artifactcheck.observe.claims`); the spec with its share
of the limits, the run's seed, how to build its Fetcher), observes them with its own
Fetcher and :class:`~artifactcheck.observe.instance.Observer`, and sends every
observation back as it completes. Judging, deciding and acting stay in the process
that owns the pool, on all the observations together, exactly as in one process. Who
splits what between the workers is the caller's: ``verify``'s in
:mod:`artifactcheck.observe.processes`, the controller's in
:mod:`artifactcheck.control.workers`. What keeps one verdict is the pool's:

- **The same sample.** Every job carries the seed of the run it belongs to.
- **One expected release per version.** A worker never loads a release itself: it asks
  the owner, which loads each version once through the run's
  :class:`~artifactcheck.release.sources.Expectations` (its cache, single flight, pins,
  last known good) and sends the same release to every worker.
- **One instance never ends the run.** A worker that dies (a crash, the OOM killer) or
  stays silent past the instance deadline (:func:`stuck_after`) is ended; the instances
  it had taken and not reported are ``inconclusive`` (check failed), named with its PID
  and how it ended, and the rest is judged. A worker mid-job is never given another job (its
  late answers would be taken for the next one's): a cancelled job ends its worker.

How the workers start is chosen once, by :func:`start_method`. Observations come back
as one stream of pickles per job, with one memo: the manifest a thousand siblings share
is sent once, not once per instance. The pickles come from a worker started by this
process from its own code; nothing an instance sends is ever unpickled, only values
built from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, BinaryIO, Self

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.model.records import MutableRecord, Record, replace
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Expectation, Instance, Observation
from artifactcheck.observe.claims import Claims
from artifactcheck.observe.failures import check_failed, describe
from artifactcheck.observe.instance import Observer
from artifactcheck.observe.spread import can_fork
from artifactcheck.tenancy.egress import EgressPolicy

if TYPE_CHECKING:  # the controller's tenancy models (pydantic, built at import): not verify's
    from artifactcheck.tenancy.credentials import CredentialScope

log = logging.getLogger("artifactcheck")

__all__ = [
    "STUCK_AFTER",
    "FetchSetup",
    "Job",
    "WorkerPool",
    "next_message",
    "start_method",
    "stuck_after",
]

#: Exit status of a worker whose own code failed (not an instance's fault).
_FAILED = 70
#: Seconds past the instance deadline a worker may stay silent before it is ended.
STUCK_AFTER = 30.0


def start_method(*, lasting: bool) -> str:
    """How a pool's workers start: ``forkserver`` for a pool that lasts, ``fork`` for
    one that serves a single run.

    A fork copies only the calling thread: a lock another thread held stays locked in
    the copy forever. A fork server (a fresh interpreter that imported this module
    once, and forks each worker) never hands a worker a thread, a lock or a connection
    of its owner, whenever the worker starts: it is the safe method when threads
    exist, and a lasting pool (the controller's) replaces a dead worker while its
    threads run. A pool for one run (``verify``) starts all its workers at once,
    before any thread of its own (:func:`~artifactcheck.observe.spread.can_fork`,
    checked again at each start), and never replaces one: there a fork is as safe,
    and it starts much faster than the fork server, whose own interpreter start and
    imports a short run would feel (docs/benchmarks.md, "Observing processes").
    """
    return "forkserver" if lasting else "fork"


def stuck_after(spec: CheckSpec) -> float:
    """Seconds of silence after which an observing process is stuck: while instances
    remain, one finishes at least every instance deadline (each runs within it once
    started)."""
    return spec.http.instance_deadline + STUCK_AFTER


async def next_message(
    messages: asyncio.Queue[tuple[Any, ...] | None], silence: float
) -> tuple[Any, ...] | None:
    """An observing process's next message as its reader thread queued it (None: its
    stream ended); TimeoutError when it stayed silent ``silence`` seconds (its
    :func:`stuck_after`)."""
    async with asyncio.timeout(silence):
        return await messages.get()


class FetchSetup(Record):
    """What a worker's Fetcher is built with besides the limits: the run's egress
    policy, credential scope and proxies (each must pickle for a fork server)."""

    egress: EgressPolicy | None = None
    scoped: CredentialScope | None = None
    proxies: Proxies | None = None


class Job(Record):
    """One worker's share of a run: everything its Observer is built from."""

    spec: CheckSpec  # its http and retry are the worker's share
    seed: int
    instances: list[Instance]
    first: bool
    releases: bool  # whether the run has a release source to ask
    fetch: FetchSetup
    # or no fixed share: the run's hand-out, each batch taken by whichever process is
    # free (a pool of forks only: the pipe is inherited, artifactcheck.observe.claims)
    claims: Claims[Instance] | None = None


class _Worker(MutableRecord):
    """One worker process and its two pickle streams (each job: one Pickler, one memo)."""

    process: Any  # multiprocessing.Process of the pool's context
    results: BinaryIO  # worker -> here: ("need", version) | ("obs", o) | ("done", stats)
    requests: BinaryIO  # here -> worker: ("job", Job) | ("release", version, exp, error)

    def send(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError, ValueError):  # the worker is gone: accounted for
            pickle.dump(message, self.requests, protocol=pickle.HIGHEST_PROTOCOL)
            self.requests.flush()

    def close_requests(self) -> None:
        """Tell the worker no job follows: its stream ends, and so does it."""
        with contextlib.suppress(OSError):
            self.requests.close()

    def close(self) -> None:
        for stream in (self.results, self.requests):
            with contextlib.suppress(OSError):
                stream.close()


def _stream(conn: Connection, mode: str) -> BinaryIO:
    """A buffered file over a connection's descriptor (its own copy; ``conn`` closed)."""
    stream = os.fdopen(os.dup(conn.fileno()), mode)
    conn.close()
    return stream  # type: ignore[return-value]


class WorkerPool:
    """``size`` observing processes, each taking one :class:`Job` at a time.

    ``lasting``: the pool outlives one run and replaces a worker that died (the
    controller's); otherwise its workers are started once by :meth:`start` and never
    replaced (a ``verify`` run's). The start method follows (:func:`start_method`).
    Call :meth:`close` at the end: it ends and reaps every worker.
    """

    def __init__(self, size: int, *, lasting: bool) -> None:
        self.size = size
        self.lasting = lasting
        self.method = start_method(lasting=lasting)
        self._ctx: Any = multiprocessing.get_context(self.method)  # its Process and Pipe
        if self.method == "forkserver":  # the fork server imports the observing code once
            self._ctx.set_forkserver_preload([__name__])
        self._workers: list[_Worker | None] = [None] * size

    def start(self) -> Self:
        """Start every worker (OSError: no memory or process slot for one more)."""
        for i in range(self.size):
            self.start_worker(i)
        return self

    def start_worker(self, i: int) -> None:
        """Start worker ``i`` unless it runs (OSError: no memory or process slot)."""
        self._worker(i)

    def close(self) -> None:
        """End every worker: each is told its stream ended, then killed if still there."""
        for worker in self._workers:
            if worker is not None:
                worker.close_requests()
        for i, worker in enumerate(self._workers):
            if worker is not None:
                worker.process.join(timeout=1)
                self._end(i, worker)

    def _worker(self, i: int) -> _Worker:
        worker = self._workers[i]
        if worker is not None and worker.process.is_alive():
            return worker
        if worker is not None:
            self._end(i, worker)
        if self.method == "fork":
            ok, why = can_fork()
            if not ok:
                raise RuntimeError(f"cannot fork an observing process: {why}")
        results_r, results_w = self._ctx.Pipe(duplex=False)
        requests_r, requests_w = self._ctx.Pipe(duplex=False)
        # a forked worker holds copies of every descriptor here: it closes those that
        # are not its own, so a pipe ends when its worker or this process does
        inherited: tuple[int, ...] = ()
        if self.method == "fork":
            inherited = (results_r.fileno(), requests_w.fileno()) + tuple(
                s.fileno() for w in self._workers if w is not None for s in (w.results, w.requests)
            )
        process = self._ctx.Process(
            target=_serve,
            args=(results_w, requests_r, inherited),
            name=f"artifactcheck-observe-{i}",
            daemon=True,
        )
        try:
            process.start()
        finally:  # the worker's ends live in the worker only: its death is an EOF here
            results_w.close()
            requests_r.close()
            if process.pid is None:  # not started: this side's ends go too
                results_r.close()
                requests_w.close()
        worker = self._workers[i] = _Worker(
            process=process, results=_stream(results_r, "rb"), requests=_stream(requests_w, "wb")
        )
        return worker

    def _end(self, i: int, worker: _Worker) -> int | None:
        """Kill a worker (if it still runs) and reap it; its exit status (negative: the
        signal that ended it). A lasting pool starts another when it is next needed; a
        single run's is gone for good."""
        if worker.process.exitcode is None:
            with contextlib.suppress(OSError, ValueError):
                worker.process.kill()
        worker.process.join(timeout=5)
        worker.close()
        if self._workers[i] is worker:
            self._workers[i] = None
        status: int | None = worker.process.exitcode
        return status

    async def _take(self, i: int) -> _Worker:
        """Worker ``i`` for a job: a lasting pool starts it off the loop if it is gone
        (a fork server's answer may take a while); a single run's was started before."""
        if self.lasting:
            return await asyncio.to_thread(self._worker, i)
        worker = self._workers[i]
        if worker is None:
            raise RuntimeError(f"observing process {i} is not running")
        return worker

    async def run_job(
        self,
        i: int,
        job: Job,
        observer: Observer,
        into: dict[str, Observation],
        loaded: dict[str, Expectation],
        on_result: Callable[[Observation], None] | None = None,
    ) -> BaseException | None:
        """Worker ``i`` observes ``job``: each observation goes ``into`` its instance's
        name (and to ``on_result``), each release it asks for is loaded through
        ``observer``'s source into ``loaded``, and its requests are added to
        ``observer.fetcher``'s counts. An instance of its fixed share it never reports
        is a failed check; with ``job.claims``, the caller fails what nobody observed
        (which batches a worker took is known only to it), with the error returned
        here: why this worker failed the job, None when it finished it."""
        owed = {inst.name: inst for inst in job.instances}
        if job.claims is not None:  # whatever it took of the hand-out, each once
            takers = {inst.name: inst for batch in job.claims.batches for inst in batch}
        else:
            takers = owed
        why: BaseException | None = None
        lost: str | None = None  # how the worker failed the job, its PID and end to follow
        worker: _Worker | None = None
        loop = asyncio.get_running_loop()
        messages: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()
        reading: asyncio.Future[None] | None = None
        try:
            worker = await self._take(i)
            pid, results = worker.process.pid, worker.results

            def read() -> None:  # on a thread: this job's pickles, one memo, to "done"
                reader = pickle.Unpickler(results)
                try:
                    while True:
                        message = reader.load()
                        loop.call_soon_threadsafe(messages.put_nowait, message)
                        if message[0] == "done":
                            return
                except EOFError:
                    pass
                except Exception as exc:  # noqa: BLE001 - a torn stream: it died mid-write
                    log.warning("observing process %d: unreadable answer: %s", pid, exc)
                loop.call_soon_threadsafe(messages.put_nowait, None)

            # sent from a thread: a large job must not block the loop
            await asyncio.to_thread(worker.send, ("job", job))
            reading = loop.run_in_executor(None, read)
            silence = stuck_after(job.spec)
            while True:
                try:
                    message = await next_message(messages, silence)
                except TimeoutError:
                    log.warning("observing process %d sent nothing for %.0fs; ended", pid, silence)
                    lost = f"the observing process sent nothing for {silence:.0f}s"
                    break
                if message is None:
                    lost = "the observing process ended early"
                    break
                if message[0] == "obs":
                    mine = takers.pop(message[1].instance.name, None)
                    if mine is not None:  # this process's Instance, not the worker's copy
                        obs = into[mine.name] = replace(message[1], instance=mine)
                        if on_result is not None:
                            on_result(obs)
                elif message[0] == "need":
                    answer = await _release(observer, loaded, message[1], pid)
                    await asyncio.to_thread(worker.send, ("release", *answer))
                elif message[0] == "done":  # its counts come last, after its observations
                    observer.fetcher.stats.add(message[1])
                    if not self.lasting:  # no other job: it exits while the run goes on
                        worker.close_requests()
                    break
        except (asyncio.CancelledError, Exception) as exc:
            why = exc
            raise
        finally:
            if worker is not None and (why is not None or lost is not None):
                status = self._end(i, worker)  # a worker mid-job is never given another
                if lost is not None:
                    why = RuntimeError(f"{lost}: process {worker.process.pid} {_how(status)}")
            if reading is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(reading)
            if owed:  # not observed: their checks failed, not the run
                fail_unobserved(owed.values(), job.spec, why, into, on_result)
        return why


def fail_unobserved(
    owed: Iterable[Instance],
    spec: CheckSpec,
    why: BaseException | None,
    into: dict[str, Observation],
    on_result: Callable[[Observation], None] | None,
) -> None:
    """The instances a job never reported: each a failed check naming ``why``."""
    failure = why if why is not None else RuntimeError("not observed")
    instances = list(owed)
    if not isinstance(failure, asyncio.CancelledError):
        log.warning("%s; %d instance(s) not observed", describe(failure), len(instances))
    for inst in instances:
        obs = into[inst.name] = check_failed(inst, spec.manifest_path or "", failure)
        if on_result is not None:
            on_result(obs)


def _how(status: int | None) -> str:
    if status is None:
        return "did not end"
    if status < 0:
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


async def _release(
    observer: Observer, loaded: dict[str, Expectation], version: Any, pid: int
) -> tuple[Any, Expectation | None, str | None]:
    """A release a worker asks for, loaded once through the run's source; a load that
    fails is sent back as its error (those instances' failed check, as in one process),
    never the run's end."""
    try:
        if observer.expectations is None or not isinstance(version, str):
            raise RuntimeError("this run has no release source")
        expectation = await observer.expectations.get(version)
    except Exception as exc:  # noqa: BLE001 - one release never ends the run
        log.warning("loading release %r for process %d failed: %s", version, pid, exc)
        return version, None, describe(exc)
    loaded[expectation.version] = expectation
    return version, expectation, None


async def take_each(
    claims: Claims[Instance],
    at_once: int,
    observe: Callable[[Sequence[Instance]], Awaitable[object]],
) -> None:
    """Take batches of the hand-out until none is left and ``observe`` each, ``at_once``
    batches in flight (a process's share of the connections: a batch is about one
    host's instances). Every process of the run does this."""

    async def taker() -> None:
        while (batch := claims.take()) is not None:
            await observe(batch)

    async with asyncio.TaskGroup() as tg:
        for _ in range(max(1, at_once)):
            tg.create_task(taker())


# -- the worker's side -------------------------------------------------------------------


class _AskParent:
    """A worker's release source: asks the pool's owner, once per version."""

    def __init__(self, send: Callable[[tuple[Any, ...]], None]) -> None:
        self._send = send
        self._waiting: dict[str, asyncio.Future[Expectation]] = {}

    async def get(self, version: str) -> Expectation:
        future = self._waiting.get(version)
        if future is None:
            future = self._waiting[version] = asyncio.get_running_loop().create_future()
            self._send(("need", version))
        return await asyncio.shield(future)

    def answered(self, version: str, expectation: Expectation | None, error: str | None) -> None:
        future = self._waiting.get(version)
        if future is None or future.done():
            return
        if expectation is None:
            future.set_exception(RuntimeError(f"loading release {version} failed: {error}"))
        else:
            future.set_result(expectation)

    def parent_gone(self) -> None:
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(RuntimeError("the parent process stopped answering"))


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


def _serve(results_conn: Connection, requests_conn: Connection, inherited: Sequence[int]) -> None:
    """A worker's life: one job at a time until the owner closes its end."""
    # SIGINT (Ctrl-C on the terminal's process group) is the owner's to handle: it
    # ends its workers itself; here it is ignored, not raised in the middle of a write.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    status = 0
    try:
        for fd in inherited:  # a fork's copies of the owner's other pipe ends
            os.close(fd)
        results = _stream(results_conn, "wb")
        requests = _stream(requests_conn, "rb")
        jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        answers = _Answers()

        def read() -> None:  # the only reader of the owner's stream
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


async def _observe_job(results: BinaryIO, job: Job, answers: _Answers) -> None:
    """Observe one job's instances; stream each observation back, then the request
    counts (one Pickler for the job: the manifest its instances share is sent once)."""
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

            async def each(instances: Sequence[Instance]) -> None:
                async with asyncio.TaskGroup() as tg:
                    for instance in instances:
                        tg.create_task(one(instance))

            await each(job.instances)
            if job.claims is not None:
                await take_each(job.claims, job.spec.http.max_connections, each)
            stats: FetchStats = fetcher.stats
            send(("done", stats))
    finally:
        with answers.lock:
            answers.job = None
