"""Observing a large fleet from several processes: both cores, one verdict.

One process observes on one core: each GET costs CPU (reading, hashing, bookkeeping),
so ``verify`` over a large fleet is bound by that core (figures: docs/benchmarks.md).
For such a run the instances are split by host between
this process and forked copies of it; each copy observes its share with its own
Fetcher and :class:`~artifactcheck.observe.instance.Observer` and sends every
observation back as it completes. Judging, the CDN, deciding and reporting stay here,
on all the observations together, exactly as in one process.

What keeps one verdict, whatever the number of processes:

- **The same sample.** Every process samples with the run's seed, so an instance's
  files are the ones a single process would have fetched.
- **One expected release per version.** A copy never loads a release itself: it asks
  this process, which loads each version once through the run's
  :class:`~artifactcheck.release.sources.Expectations` (its cache, single flight, last
  known good, names-only rule) and sends the same release to every copy.
- **The same limits.** A host belongs to one process, so ``max_per_host`` holds as it
  is; ``max_connections`` and the retry budget's minimum are shared out between the
  processes (:func:`shares`), so the run never puts more load on the fleet than one
  process would.
- **One instance never ends the run.** A copy that dies (a crash, the OOM killer)
  leaves its instances not yet reported ``inconclusive`` (check failed), named, and
  the rest is judged; a run that is cancelled kills its copies and reaps them.

Why ``os.fork`` and not :mod:`multiprocessing` or a subprocess: a fork starts in
microseconds with the interpreter, the imports and the parsed spec already in place,
where a spawned interpreter re-imports the package (a start-up per copy, which a
short run feels). It is only done where it is safe: on POSIX, with no other thread in the process
(a fork copies only the calling thread, and a lock another thread held would stay
locked in the copy forever), before this process opened any connection. Otherwise the
run observes in one process, as before. Observations come back as one stream of
pickles per copy, with one memo: the manifest a thousand siblings share is sent once,
not once per instance. The pickles come from a fork of this
very process; nothing an instance sends is ever unpickled, only values built from it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Expectation, Instance, Observation
from artifactcheck.observe.failures import check_failed, describe
from artifactcheck.observe.instance import Observer
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
    "next_message",
    "observe_in_processes",
    "processes_for",
    "shares",
    "split_by_host",
    "stuck_after",
]

#: Exit status of a copy whose own code failed (not an instance's fault).
_FAILED = 70
#: Seconds past the instance deadline a copy may stay silent before it is ended.
STUCK_AFTER = 30.0


def stuck_after(spec: CheckSpec) -> float:
    """Seconds of silence after which an observing process is stuck: while instances
    remain, one finishes at least every instance deadline (each runs within it once
    started)."""
    return spec.http.instance_deadline + STUCK_AFTER


async def next_message(
    queue: asyncio.Queue[tuple[Any, ...] | None], silence: float
) -> tuple[Any, ...] | None:
    """An observing process's next message as its reader thread queued it (None: its
    stream ended); TimeoutError when it stayed silent ``silence`` seconds (its
    :func:`stuck_after`)."""
    async with asyncio.timeout(silence):
        return await queue.get()


# -- this process's side ---------------------------------------------------------------------


@dataclass(slots=True)
class _Copy:
    """One forked copy: its process, its pipes, and the instances it owes."""

    pid: int
    results: BinaryIO  # copy -> here: pickles ("need", version) | ("obs", o) | ("done", stats)
    replies: BinaryIO  # here -> copy: pickles (version, Expectation | None, error | None)
    owed: dict[str, Instance]
    replier: pickle.Pickler = field(init=False)
    status: int | None = None

    def __post_init__(self) -> None:
        self.replier = pickle.Pickler(self.replies, protocol=pickle.HIGHEST_PROTOCOL)


async def observe_in_processes(
    observer: Observer,
    slices: Sequence[Sequence[Instance]],
    *,
    share: Shares,
    into: dict[str, Observation],
    loaded: dict[str, Expectation],
    observe_here: Callable[[Sequence[Instance]], Any],
    on_result: Callable[[Observation], None] | None = None,
) -> None:
    """Observe ``slices[0]`` here (``observe_here``) and each other slice in a fork.

    Every observation goes ``into`` its instance's name, as :func:`observe_each` does;
    the copies' requests are added to this process's fetcher's counts.
    """
    ok, why = can_fork()
    if not ok:  # a thread started since the run was planned: all of it here, as before
        log.info("observing in one process: %s", why)
        await observe_here([i for part in slices for i in part])
        return
    # every fork before any thread of ours starts (the readers below)
    copies: list[_Copy] = []
    here = list(slices[0])
    try:
        for part in slices[1:]:
            if not part:
                continue
            try:
                copies.append(_fork(observer, part, share, inherited=copies))
            except OSError as exc:  # no memory or process slot for one more: observed here
                log.warning("could not fork an observing process (%s); observing here", exc)
                here += part
        async with asyncio.TaskGroup() as tg:
            tg.create_task(observe_here(here))
            for copy in copies:
                tg.create_task(_collect(copy, observer, into, loaded, on_result))
    finally:
        for copy in copies:
            _reap(copy, kill=True)


def _fork(
    observer: Observer, part: Sequence[Instance], share: Shares, *, inherited: Sequence[_Copy]
) -> _Copy:
    """Fork one copy observing ``part``; ``inherited``: the copies forked before it,
    whose pipe ends this process holds (the new copy closes its copies of them, so a
    copy's pipes end when that copy or this process does)."""
    results_r, results_w = os.pipe()
    replies_r, replies_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (results_r, results_w, replies_r, replies_w):
            os.close(fd)
        raise
    if pid == 0:  # the copy: never returns
        status = _FAILED
        try:
            os.close(results_r)
            os.close(replies_w)
            for earlier in inherited:  # nothing is buffered yet: no reader or reply has run
                earlier.results.close()
                earlier.replies.close()
            status = _run_copy(observer, part, share, results_w, replies_r)
        except BaseException:  # noqa: BLE001 - whatever happens, the copy exits here
            log.exception("observing process %d failed", os.getpid())
        finally:
            os._exit(status)
    os.close(results_w)
    os.close(replies_r)
    return _Copy(
        pid=pid,
        results=os.fdopen(results_r, "rb"),
        replies=os.fdopen(replies_w, "wb"),
        owed={i.name: i for i in part},
    )


async def _collect(
    copy: _Copy,
    observer: Observer,
    into: dict[str, Observation],
    loaded: dict[str, Expectation],
    on_result: Callable[[Observation], None] | None,
) -> None:
    """Take one copy's observations as they come; answer its releases; account for it."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[Any, ...] | None] = asyncio.Queue()

    def read() -> None:  # on a thread: a blocking read of the pipe, one pickle at a time
        reader = pickle.Unpickler(copy.results)
        try:
            while True:
                loop.call_soon_threadsafe(queue.put_nowait, reader.load())
        except EOFError:
            pass
        except Exception as exc:  # noqa: BLE001 - a torn stream: the copy died mid-write
            log.warning("observing process %d: unreadable answer: %s", copy.pid, exc)
        finally:
            copy.results.close()  # the reader owns its end: closed once it is done
            loop.call_soon_threadsafe(queue.put_nowait, None)

    reading = loop.run_in_executor(None, read)
    stats: FetchStats | None = None
    silence = stuck_after(observer.spec)
    while True:
        try:
            message = await next_message(queue, silence)
        except TimeoutError:
            log.warning("observing process %d sent nothing for %.0fs; ended", copy.pid, silence)
            _reap(copy, kill=True)
            message = await queue.get()  # the reader's end, after the kill
            while message is not None:
                message = await queue.get()
            break
        if message is None:
            break
        kind = message[0]
        if kind == "obs":
            obs: Observation = message[1]
            mine = copy.owed.pop(obs.instance.name, None)
            if mine is None:
                continue  # not one of its instances (or twice): ignored
            obs = replace(obs, instance=mine)  # this process's Instance, not a copy's
            into[mine.name] = obs
            if on_result is not None:
                on_result(obs)
        elif kind == "need":
            await _answer(copy, observer, loaded, message[1])
        elif kind == "done":
            stats = message[1]
    await reading
    await asyncio.to_thread(_reap, copy, kill=False)
    if stats is not None:
        observer.fetcher.stats.add(stats)
    if copy.owed:  # it died before reporting them: their checks failed, not the run
        why = RuntimeError(f"the observing process {copy.pid} {_ended(copy.status)}")
        log.warning("%s; %d instance(s) not observed", why, len(copy.owed))
        for instance in copy.owed.values():
            obs = check_failed(instance, observer.spec.manifest_path or "", why)
            into[instance.name] = obs
            if on_result is not None:
                on_result(obs)
        copy.owed.clear()


async def _answer(
    copy: _Copy, observer: Observer, loaded: dict[str, Expectation], version: Any
) -> None:
    """Load a release a copy asks for, once for the run, and send it back; a load that
    raises is sent back as its error (the instances' failed check, as in one process),
    never the run's end."""
    answer: tuple[Any, Expectation | None, str | None]
    try:
        if observer.expectations is None or not isinstance(version, str):
            raise RuntimeError("this run has no release source")
        expectation = await observer.expectations.get(version)
        loaded[expectation.version] = expectation
        answer = (version, expectation, None)
    except Exception as exc:  # noqa: BLE001 - one release never ends the run
        log.warning("loading release %r for process %d failed: %s", version, copy.pid, exc)
        answer = (version, None, describe(exc))

    def send() -> None:
        try:
            copy.replier.dump(answer)
            copy.replies.flush()
        except (BrokenPipeError, OSError):
            pass  # the copy is gone; its instances are accounted for when it is reaped

    await asyncio.to_thread(send)


def _reap(copy: _Copy, *, kill: bool) -> None:
    """Wait for a copy (killing it first if ``kill`` and it still runs); close its pipes."""
    if copy.status is None:
        if kill:
            try:
                os.kill(copy.pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - already reaped elsewhere
                pass
        try:
            _, raw = os.waitpid(copy.pid, 0)
            copy.status = os.waitstatus_to_exitcode(raw)
        except ChildProcessError:  # pragma: no cover - reaped by someone else
            copy.status = -1
    try:
        copy.replies.close()
    except OSError:
        pass


def _ended(status: int | None) -> str:
    if status is None or status == 0:
        return "ended early"
    if status < 0:
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


# -- the copy's side ---------------------------------------------------------------------------


class _AskParent:
    """The copy's release source: asks the parent, once per version (see module doc)."""

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


def _run_copy(
    parent: Observer, part: Sequence[Instance], share: Shares, results_fd: int, replies_fd: int
) -> int:
    """The body of a forked copy: observe ``part``, stream each observation back."""
    # SIGINT (Ctrl-C on the terminal's process group) ends the parent's run, and the
    # parent kills its copies: here it is ignored, not raised in the middle of a write.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(results_fd, "wb")
    sender = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with lock:
            sender.dump(message)
            out.flush()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ask = _AskParent(send) if parent.expectations is not None else None

        def replies() -> None:  # on a thread: the parent's answers, one pickle at a time
            reader = pickle.Unpickler(os.fdopen(replies_fd, "rb"))
            try:
                while True:
                    version, expectation, error = reader.load()
                    if ask is not None:
                        loop.call_soon_threadsafe(ask.answered, version, expectation, error)
            except (EOFError, OSError, pickle.UnpicklingError):
                pass
            finally:
                if ask is not None:
                    loop.call_soon_threadsafe(ask.parent_gone)

        threading.Thread(target=replies, name="observe-replies", daemon=True).start()
        spec = parent.spec.model_copy(update={"http": share.http, "retry": share.retry})
        async with Fetcher(http=share.http, retry=share.retry, logger=log) as fetcher:
            observer = Observer(spec=spec, fetcher=fetcher, expectations=ask, seed=parent.seed)

            async def one(instance: Instance) -> None:
                obs, _ = await observer.observe(instance)
                send(("obs", obs))

            async with asyncio.TaskGroup() as tg:
                for instance in part:
                    tg.create_task(one(instance))
            send(("done", fetcher.stats))

    asyncio.run(main())
    out.close()
    return 0
