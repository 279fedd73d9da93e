"""A finished command's exit: the same as the interpreter's, without its teardown.

Each case runs a small program in a fresh interpreter, once ending with
:func:`artifactcheck.cli.quick_exit.leave` and once with ``sys.exit`` alone, and
compares what the outside world sees: the exit status, every byte written to standard
output and error, and the work of the functions registered with :mod:`atexit`. Only an
object's finalizer at teardown tells the two apart, where the quick exit is possible.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROGRAM = """
import atexit, sys, threading, time
from artifactcheck.cli.quick_exit import leave

class Torn:
    def __del__(self):
        sys.stderr.write("torn down\\n")

KEPT = Torn()
atexit.register(lambda: sys.stderr.write("exit function\\n"))
{body}
try:
    sys.exit({code})
except SystemExit as done:
    if {quick}:
        leave(done.code)
    raise
"""


def _run(
    body: str, code: str, *, quick: bool, tmp_path: Path
) -> subprocess.CompletedProcess[bytes]:
    source = PROGRAM.format(body=textwrap.dedent(body), code=code, quick=quick)
    script = tmp_path / ("quick.py" if quick else "plain.py")
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as run
    return subprocess.run(  # noqa: S603 - this interpreter on a script of ours
        [sys.executable, str(script)], capture_output=True, timeout=60, check=False, env=env
    )


@pytest.mark.parametrize("code", ["None", "0", "1", "3", "256", "-1", "True"])
def test_the_status_output_and_exit_functions_are_the_interpreters(
    code: str, tmp_path: Path
) -> None:
    body = """
    sys.stdout.write("x" * 100_000)  # still in the buffer at exit
    sys.stdout.write("report end")
    """
    quick = _run(body, code, quick=True, tmp_path=tmp_path)
    plain = _run(body, code, quick=False, tmp_path=tmp_path)
    assert quick.returncode == plain.returncode
    assert quick.stdout == plain.stdout == b"x" * 100_000 + b"report end"
    assert quick.stderr == b"exit function\n"  # and no teardown: the object is never freed
    assert plain.stderr == b"exit function\ntorn down\n"


@pytest.mark.parametrize("code", ["2**31", "-(2**31) - 1", "2**70"])
def test_a_status_beyond_a_c_int_exits_as_the_interpreter_does(code: str, tmp_path: Path) -> None:
    quick = _run("", code, quick=True, tmp_path=tmp_path)
    plain = _run("", code, quick=False, tmp_path=tmp_path)
    assert (quick.returncode, quick.stderr) == (plain.returncode, plain.stderr)
    assert b"torn down" in quick.stderr


def test_a_running_thread_is_waited_for_as_the_interpreter_does(tmp_path: Path) -> None:
    body = """
    def late():
        time.sleep(0.5)
        sys.stdout.write("the thread's last words")
    threading.Thread(target=late).start()
    """
    quick = _run(body, "1", quick=True, tmp_path=tmp_path)
    assert quick.returncode == 1
    assert quick.stdout == b"the thread's last words"
    assert b"torn down" in quick.stderr  # the interpreter's own exit


@pytest.mark.parametrize("tool", ["cProfile", "trace"])
def test_a_profiler_or_tracer_writes_its_results(tool: str, tmp_path: Path) -> None:
    """``python -m cProfile`` and ``python -m trace`` write what they saw once the
    program has returned: with one watching, the exit is the interpreter's."""
    ends = []
    for quick in (True, False):
        script = tmp_path / f"{quick}.py"
        script.write_text(PROGRAM.format(body="", code="3", quick=quick))
        out = tmp_path / f"results-{quick}"
        args = ["-o", str(out)] if tool == "cProfile" else ["--count", "-C", str(out)]
        done = subprocess.run(  # noqa: S603 - this interpreter on a script of ours
            [sys.executable, "-m", tool, *args, str(script)],
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert out.exists() and (out.is_file() or any(out.iterdir())), done.stderr
        ends.append((done.returncode, done.stdout, done.stderr))
    assert ends[0] == ends[1]


def test_a_daemon_thread_does_not_hold_the_exit(tmp_path: Path) -> None:
    body = """
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    """
    quick = _run(body, "3", quick=True, tmp_path=tmp_path)
    assert quick.returncode == 3
    assert quick.stderr == b"exit function\n"


def test_a_message_for_a_status_exits_as_the_interpreter_does(tmp_path: Path) -> None:
    quick = _run("", "'artifactcheck: no'", quick=True, tmp_path=tmp_path)
    plain = _run("", "'artifactcheck: no'", quick=False, tmp_path=tmp_path)
    assert quick.returncode == plain.returncode == 1
    assert quick.stderr == plain.stderr
    assert quick.stderr.startswith(b"artifactcheck: no\n")


def test_a_reader_gone_is_reported_as_the_interpreter_does(tmp_path: Path) -> None:
    body = """
    import io, os
    read_end, write_end = os.pipe()
    os.close(read_end)
    os.dup2(write_end, 1)  # standard output: a pipe nobody reads
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)))
    sys.stdout.write("lost")  # buffered: the exit's flush finds the reader gone
    """
    quick = _run(body, "0", quick=True, tmp_path=tmp_path)
    plain = _run(body, "0", quick=False, tmp_path=tmp_path)
    assert quick.returncode == plain.returncode == 120
    assert b"BrokenPipeError" in quick.stderr
    assert b"exit function" in quick.stderr
