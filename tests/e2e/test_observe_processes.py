"""``verify --processes N``: a large fleet observed from several processes, one verdict.

The servers run in this test process (a thread), so ``verify`` runs as a subprocess: a
process with a thread running never forks (``can_fork``), exactly the rule under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Instance
from artifactcheck.observe import processes
from artifactcheck.observe.pool import WorkerPool
from artifactcheck.observe.processes import can_fork, processes_for, shares, split_by_host
from artifactcheck.present.report import assets
from artifactcheck_sim.web import Delay

DOWN = "http://127.93.60.1:9/"  # nothing listens on port 9 (discard) here

#: ``artifactcheck`` with every release load recorded (pid, version) in a file.
COUNT_LOADS = """
import os
from artifactcheck.release import sources
real = sources.Expectations._load
async def counted(self, version):
    with open(LOADS, "a") as f:
        f.write(f"{os.getpid()} {version}\\n")
    return await real(self, version)
sources.Expectations._load = counted
"""


def spec_file(tmp_path: Path, fleet: Any, **http: Any) -> Path:
    spec = fleet.spec()
    spec["targets"].append({"url": DOWN, "version": "1.4.1", "name": "down"})
    spec["sampling"] = {"assets_per_instance": 2}  # a sample: the seed decides which files
    spec["http"] = {**spec["http"], **http}
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def verify(*args: str, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "artifactcheck", "-v", "verify", "--output", "json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, doc, proc.stderr


#: The command line, run after a test's patch (a module-level string of Python).
RUN_CLI = """
import runpy as _runpy, sys as _sys
_sys.argv = ["artifactcheck", *_sys.argv[1:]]
_runpy.run_module("artifactcheck", run_name="__main__")
"""


def patched(tmp_path: Path, patch: str) -> list[str]:
    """The argv prefix of ``artifactcheck -v`` with ``patch`` applied first."""
    script = tmp_path / "patched_cli.py"
    script.write_text(patch + RUN_CLI, encoding="utf-8")
    return [sys.executable, str(script), "-v"]


def run_patched(tmp_path: Path, patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*patched(tmp_path, patch), *args], capture_output=True, text=True, timeout=120
    )


def judged(doc: dict[str, Any]) -> dict[str, Any]:
    """Per instance, everything a verdict rests on (not timings or request counts)."""
    return {
        r["instance"]: (
            r["verdict"],
            r["reason"],
            r.get("serves_version"),
            sorted((a["path"], a["sha256"], a["status"]) for a in assets(doc, r)),
        )
        for r in doc["results"]
    }


def test_three_processes_give_the_verdicts_and_sample_of_one(make_fleet, tmp_path) -> None:
    fleet = make_fleet(9, version="1.4.1")
    fleet.drift(2, serves="1.4.2")  # serves a mix
    fleet.instances[4].version = "1.4.2"  # reports a release it does not serve
    fleet.cdn_missing("assets/logo-m9-UFto3.svg")
    spec = spec_file(tmp_path, fleet)

    code, spread, err = verify("--config", str(spec), "--processes", "3")
    assert "from 3 processes" in err, err
    seed = spread["sample"]["seed"]
    code_one, one, err_one = verify("--config", str(spec), "--processes", "1", "--seed", str(seed))
    assert "processes" not in err_one

    assert code == code_one == 1
    assert judged(spread) == judged(one)
    assert spread["counts"] == one["counts"]
    verdicts = {r["instance"]: r["verdict"] for r in spread["results"]}
    assert verdicts["web-3"] == verdicts["web-5"] == "mismatch"
    assert verdicts["down"] == "unreachable"
    # the others serve their release; the CDN lacks the logo, which is flagged when the
    # run's random seed sampled it (the same either way in both runs, compared above)
    others = {v for name, v in verdicts.items() if name not in ("web-3", "web-5", "down")}
    assert len(others) == 1 and others <= {"consistent", "cdn-missing"}, verdicts


def test_each_release_is_loaded_once_whatever_the_number_of_processes(make_fleet, tmp_path) -> None:
    """Copies ask the parent for a release: one load per version for the whole run, so
    every process compares against the very same expected release."""
    fleet = make_fleet(6, version="1.4.1")
    fleet.instances[1].version = "1.4.2"
    spec = spec_file(tmp_path, fleet)
    loads = tmp_path / "loads.txt"
    patch = COUNT_LOADS.replace("LOADS", repr(str(loads)))
    proc = run_patched(tmp_path, patch, "verify", "--config", str(spec), "--processes", "3")
    assert "from 3 processes" in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr
    lines = loads.read_text().split()
    pids, versions = set(lines[0::2]), lines[1::2]
    assert sorted(versions) == ["1.4.1", "1.4.2"]  # each once, though 3 processes met both
    assert len(pids) == 1  # and only in the parent


#: ``artifactcheck`` whose release source raises (a bug, not a source that is down).
BROKEN_RELEASE = """
from artifactcheck.release import sources
async def broken(self, version):
    raise RuntimeError("a bug in the release source")
sources.Expectations.get = broken
"""


def test_a_release_that_raises_fails_its_instances_not_the_run(make_fleet, tmp_path) -> None:
    fleet = make_fleet(6, version="1.4.1")
    spec = spec_file(tmp_path, fleet)
    runs = {}
    for count in ("1", "3"):
        proc = run_patched(
            tmp_path,
            BROKEN_RELEASE,
            "verify",
            "--config",
            str(spec),
            "--processes",
            count,
            "--output",
            "json",
        )
        assert proc.returncode == 3, proc.stderr
        runs[count] = {r["instance"]: r["verdict"] for r in json.loads(proc.stdout)["results"]}
        assert all(
            "a bug in the release source" in r["reason"] or r["instance"] == "down"
            for r in json.loads(proc.stdout)["results"]
        ), proc.stdout
    assert runs["1"] == runs["3"]
    assert set(runs["3"].values()) == {"inconclusive", "unreachable"}


#: ``artifactcheck`` on a machine out of processes: the second fork fails.
NO_MORE_FORKS = """
import os
real, forks = os.fork, []
def fork():
    forks.append(1)
    if len(forks) > 1:
        raise BlockingIOError(11, "Resource temporarily unavailable")
    return real()
os.fork = fork
"""


def test_a_fork_that_fails_is_observed_here(make_fleet, tmp_path) -> None:
    fleet = make_fleet(6, version="1.4.1")
    spec = spec_file(tmp_path, fleet)
    proc = run_patched(
        tmp_path,
        NO_MORE_FORKS,
        "verify",
        "--config",
        str(spec),
        "--processes",
        "3",
        "--output",
        "json",
    )
    assert "could not fork an observing process" in proc.stderr, proc.stderr
    verdicts = {r["instance"]: r["verdict"] for r in json.loads(proc.stdout)["results"]}
    assert len(verdicts) == 7 and verdicts.pop("down") == "unreachable"
    assert set(verdicts.values()) == {"consistent"}
    assert proc.returncode == 3  # the unreachable one


def test_a_copy_that_dies_leaves_its_instances_inconclusive(make_fleet, tmp_path) -> None:
    """The OOM killer takes one observing process: the instances it took are
    ``inconclusive`` and named, the others are judged (what it never took, this process
    takes), the run ends with a full report (exit 3)."""
    fleet = make_fleet(6, version="1.4.1")
    for inst in fleet.instances:  # slow answers: time to find and kill the copy
        inst.site.overrides["index.html"] = Delay(3.0)
    # two connections each: each process takes two instances at a time, so the copy
    # holds some when it is killed and this process has more left to take
    spec = spec_file(tmp_path, fleet, max_connections=4)
    argv = [sys.executable, "-m", "artifactcheck", "-v", "verify", "--config", str(spec)]
    code, out, err, copy, _ = _signal_a_copy(
        [*argv, "--processes", "2", "--output", "json"], signal.SIGKILL
    )
    assert code == 3, err
    doc = json.loads(out)
    results = {r["instance"]: r for r in doc["results"]}
    assert len(results) == 7  # every instance reported
    lost = [r for r in results.values() if "observing process" in r["reason"]]
    assert lost and all(r["verdict"] == "inconclusive" for r in lost)
    assert all(f"{copy} was killed by signal 9" in r["reason"] for r in lost)
    assert len(lost) <= 2  # what it held (two at a time), not a share fixed in advance
    judged_here = [r for r in results.values() if r not in lost and r["instance"] != "down"]
    assert len(judged_here) >= 4 and all(r["verdict"] == "consistent" for r in judged_here)
    assert "not observed" in err


def test_a_copy_that_stops_answering_is_ended(make_fleet, tmp_path) -> None:
    """A copy gone silent (stopped, deadlocked) past the instance deadline is killed:
    its instances are inconclusive and the run still ends."""
    fleet = make_fleet(6, version="1.4.1")
    for inst in fleet.instances:
        inst.site.overrides["index.html"] = Delay(1.0)
    spec = spec_file(tmp_path, fleet, instance_deadline=2.0, max_connections=4)
    impatient = "from artifactcheck.observe import pool\npool.STUCK_AFTER = 0.5\n"
    argv = [*patched(tmp_path, impatient), "verify", "--config", str(spec)]
    code, out, err, copy, took = _signal_a_copy(
        [*argv, "--processes", "2", "--output", "json"], signal.SIGSTOP
    )
    assert code == 3, err
    assert "sent nothing for" in err
    assert took < 20
    lost = [r for r in json.loads(out)["results"] if "observing process" in r["reason"]]
    assert lost and all(f"{copy} was killed by signal 9" in r["reason"] for r in lost)


def test_ctrl_c_ends_the_run_and_its_copies(make_fleet, tmp_path) -> None:
    """SIGINT to the run (Ctrl-C): it stops, and no copy is left observing."""
    fleet = make_fleet(6, version="1.4.1")
    for inst in fleet.instances:
        inst.site.overrides["index.html"] = Delay(5.0)
    spec = spec_file(tmp_path, fleet)
    argv = [sys.executable, "-m", "artifactcheck", "verify", "--config", str(spec)]
    proc = subprocess.Popen(
        [*argv, "--processes", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        copy = _child_of(proc.pid, timeout=120)
        os.kill(proc.pid, signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        _end(proc)
    assert proc.returncode != 0
    # reaped by the run itself before it exited (a copy left behind would still observe)
    assert not Path(f"/proc/{copy}").exists(), f"copy {copy} still there: {_state(copy)}"


def test_copies_of_a_run_killed_end_by_themselves(make_fleet, tmp_path) -> None:
    """The run is killed (SIGKILL: nothing of it runs to end its copies): each copy sees
    its pipes end, since no other process holds them, and exits instead of waiting for
    a job forever; a copy forked later holds none of an earlier one's pipes."""
    fleet = make_fleet(6, version="1.4.1")
    for inst in fleet.instances:
        inst.site.overrides["index.html"] = Delay(2.0)
    spec = spec_file(tmp_path, fleet)
    argv = [sys.executable, "-m", "artifactcheck", "verify", "--config", str(spec)]
    proc = subprocess.Popen(
        [*argv, "--processes", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    copies: list[int] = []
    try:
        copies = _children_of(proc.pid, count=2, timeout=120)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(_ended(c) for c in copies):
            time.sleep(0.1)
        assert all(_ended(c) for c in copies), {c: _state(c) for c in copies}
    finally:
        for copy in copies:
            if not _ended(copy):
                os.kill(copy, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _ended(pid: int) -> bool:
    """Gone, or a zombie its new parent has not reaped yet: it runs no more."""
    return _state(pid) == "gone" or "zombie" in _state(pid)


def _children_of(pid: int, *, count: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = []
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                children += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
        if len(children) >= count:
            return children
        time.sleep(0.02)
    raise TimeoutError(f"process {pid} forked no {count} observers within {timeout}s")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return "gone"


def _signal_a_copy(argv: list[str], signum: int) -> tuple[int, str, str, int, float]:
    """Run ``argv`` (a ``verify`` forking one copy), send the copy ``signum`` once it
    exists; the exit code, output, errors, the copy's PID, seconds from the signal."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        copy = _child_of(proc.pid, timeout=120)
        _connected(copy, timeout=60)  # it took instances: they are its to lose
        os.kill(copy, signum)
        started = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        _end(proc)
    return proc.returncode, out, err, copy, took


def _end(proc: subprocess.Popen[str]) -> None:
    """Kill a ``verify`` still running, and any copy of it still there (a stopped one);
    its pipes are closed either way, so a failed test leaks no file into the next."""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None and proc.poll() is not None:
            pipe.close()
    if proc.poll() is not None:
        return
    for task in Path(f"/proc/{proc.pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            os.kill(int(child), signal.SIGKILL)
    proc.kill()
    proc.communicate()


def _connected(pid: int, *, timeout: float) -> None:
    """Wait until process ``pid`` (an observing copy) has a connection of its own open:
    beyond the two sockets of its parent's event loop it inherited, and the two of its
    own loop, a fifth socket is a connection to an instance it took."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sockets = 0
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            with contextlib.suppress(OSError):
                sockets += os.readlink(fd).startswith("socket:")
        if sockets >= 5:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} opened no connection in {timeout}s")


def _child_of(pid: int, *, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            if children:
                return int(children[0])
        time.sleep(0.02)
    raise TimeoutError(f"process {pid} forked no observer within {timeout}s")


def test_the_processes_together_stay_within_max_connections(make_fleet, tmp_path) -> None:
    fleet = make_fleet(8, version="1.4.1")
    build = fleet.releases["1.4.1"]
    files = [p.relative_to(build).as_posix() for p in build.rglob("*") if p.is_file()]
    for inst in fleet.instances:  # every answer slow: each process keeps its limit full
        for path in files:
            inst.site.overrides[path] = Delay(0.2)
    fleet.web.reset_stats()
    # 2 per host, 4 hosts each: one process alone would have 8 in flight
    spec = spec_file(tmp_path, fleet, max_connections=4, max_per_host=2)
    code, doc, err = verify("--config", str(spec), "--processes", "2")
    assert "from 2 processes" in err, err
    assert doc["results"]
    assert fleet.web.peak_in_flight == 4  # the limit, used, and never more


def test_a_terminal_progress_bar_does_not_keep_the_run_in_one_process(make_fleet, tmp_path) -> None:
    """On a terminal, ``verify`` shows a progress bar; it is refreshed without a thread
    of its own, so the run still forks its observers."""
    fleet = make_fleet(4, version="1.4.1")
    spec = spec_file(tmp_path, fleet)
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "artifactcheck", "-v", "verify", "--config", str(spec)]
            + ["--processes", "2", "--output", "json"],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while select.select([leader], [], [], 0.5)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert b"from 2 processes" in shown, shown[-2000:]
    assert len(json.loads(proc.stdout)["results"]) == 5


def test_processes_must_be_a_positive_number() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "artifactcheck", "verify", "-t", DOWN, "--processes", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--processes" in proc.stderr


# -- the plan ----------------------------------------------------------------------------


def test_how_many_processes() -> None:
    assert processes_for(50, 50, asked=None) == 1  # too few instances to pay
    assert processes_for(1000, 1000, asked=None) == min(processes.cores(), 4, 10)
    assert processes_for(1000, 1, asked=3) == 1  # one host: one process
    assert processes_for(10, 10, asked=3) == 3  # asked for: given, within the hosts
    assert processes_for(10, 10, asked=1) == 1


def test_limits_are_shared_out() -> None:
    spec = CheckSpec.model_validate(
        {"targets": [{"url": "http://127.0.0.1/"}], "http": {"max_connections": 64}}
    )
    share = shares(spec, 3)
    assert share.http.max_connections == 21
    assert share.retry.budget_min == spec.retry.budget_min // 3
    assert share.http.max_per_host == spec.http.max_per_host  # a host is one process's


def test_a_host_is_observed_by_one_process() -> None:
    def inst(name: str, url: str) -> Instance:
        return Instance(name=name, base_url=url)

    # one host however its URL is written: the fetcher's per-host key (default port)
    instances = [
        inst(f"a{i}", "http://10.0.0.1/" if i % 2 else "HTTP://10.0.0.1:80/") for i in range(5)
    ]
    instances += [inst(f"b{i}", f"http://10.0.0.{i + 2}/") for i in range(5)]
    slices = split_by_host(instances, 2)
    a_slices = {i for i, part in enumerate(slices) for x in part if x.name.startswith("a")}
    assert len(a_slices) == 1
    assert sorted(len(part) for part in slices) == [5, 5]
    assert sorted(x.name for part in slices for x in part) == sorted(x.name for x in instances)


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        ok, why = can_fork()
        assert not ok and "other thread" in why
    finally:
        stop.set()
        thread.join()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_can_fork_when_alone() -> None:
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if others:
        pytest.skip(f"threads of other fixtures run: {others}")
    assert can_fork() == (True, "")


def test_a_pool_for_one_run_never_forks_beside_a_thread() -> None:
    """A fork copies only the calling thread: with another one running, a pool that
    forks refuses to start a worker (the run then observes its share here)."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    workers = WorkerPool(1, lasting=False)
    try:
        with pytest.raises(RuntimeError, match="other thread"):
            workers.start()
        assert workers.method == "fork"
    finally:
        workers.close()
        stop.set()
        thread.join()
