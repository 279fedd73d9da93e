"""Shared helpers: the machine, measured subprocesses, the fleet server process.

CPU time and peak RSS of a command are taken from ``os.wait4`` on the process we
started, which includes every descendant it waited for (so ``xargs`` + ``sh`` + ``curl``
+ ``sha256sum`` are all counted in the baseline, and the server process never is).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    model = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nginx = "absent"
    if shutil.which("nginx"):
        out = subprocess.run(["nginx", "-v"], capture_output=True, text=True, check=False)
        nginx = (out.stderr or out.stdout).strip().split(":", 1)[-1].strip()
    mem_kb = 0
    with open("/proc/meminfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("MemTotal"):
                mem_kb = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "product_python": interpreter_info(),
        "kernel": platform.release(),
        "nginx": nginx,
        "loadavg_at_start": os.getloadavg(),
    }


@dataclass
class Measured:
    """One measured command: wall time, CPU of it and its descendants, peak RSS."""

    wall: float
    user: float
    sys: float
    max_rss_mb: float
    returncode: int
    loadavg: float = 0.0  # 1-minute load average when it finished (the machine is shared)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return self.user + self.sys

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["cpu"] = self.cpu
        return out


def run_measured(
    argv: Sequence[str] | str,
    *,
    timeout: float,
    stdin: IO[Any] | int | None = subprocess.DEVNULL,
    stdout: IO[Any] | int | None = subprocess.DEVNULL,
    stderr: IO[Any] | int | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> Measured:
    """Run a command to completion (killed after ``timeout`` s) and measure it.

    Peak RSS comes from GNU time, which forks the command itself: ``wait4``'s
    ``ru_maxrss`` of a child of this process starts at this process's own RSS (Linux
    carries the forked copy's high-water mark across ``exec``), so a 1 MB ``true``
    reads as large as the benchmark driver (which holds the reports it has read).
    """
    shell = isinstance(argv, str)
    rss_file = tempfile.NamedTemporaryFile(prefix="acbench-rss-", delete=False)  # noqa: SIM115
    rss_file.close()
    command: list[str] | str = argv
    timer_path = gnu_time()
    if timer_path is not None:
        inner = ["sh", "-c", argv] if shell else list(argv)
        command = [timer_path, "-q", "-f", "%M", "-o", rss_file.name, *inner]
        shell = False
    started = time.perf_counter()
    proc = subprocess.Popen(  # noqa: S603 - benchmark commands are ours
        command,
        shell=shell,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group: killable as a unit, by our PID
    )
    timer = threading.Timer(timeout, _kill_group, args=(proc.pid,))
    timer.start()
    try:
        _pid, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode < 0 and -proc.returncode == signal.SIGKILL:
        raise TimeoutError(f"{argv!r} did not finish within {timeout}s; killed")
    peak = usage.ru_maxrss / 1024  # an upper bound only (see above)
    try:
        text = Path(rss_file.name).read_text().strip().splitlines()
        if timer_path is not None and text:
            peak = int(text[-1]) / 1024
    finally:
        os.unlink(rss_file.name)
    return Measured(
        wall=wall,
        user=usage.ru_utime,
        sys=usage.ru_stime,
        max_rss_mb=peak,
        returncode=proc.returncode,
        loadavg=os.getloadavg()[0],
    )


@functools.cache
def gnu_time() -> str | None:
    """GNU time (Debian's ``time`` package), for the peak RSS of a measured command;
    looked for once, when a command is first measured."""
    path = shutil.which("time") or ("/usr/bin/time" if os.path.exists("/usr/bin/time") else None)
    if path is None:
        return None
    probe = subprocess.run([path, "-f", "%M", "true"], capture_output=True, text=True)  # noqa: S603
    return path if probe.returncode == 0 and probe.stderr.strip().isdigit() else None


def peak_rss_of(hwm: float | None, usage: Any) -> tuple[float, str]:
    """A stopped process's peak RSS in MB and where it came from: its VmHWM read before
    it was stopped (:func:`peak_rss_mb`), else ``wait4``'s figure, an upper bound."""
    if hwm is not None:
        return hwm, "VmHWM"
    return usage.ru_maxrss / 1024, "wait4"


def peak_rss_mb(pid: int) -> float | None:
    """The peak RSS of a running process since it started its program (VmHWM), or None.

    Read before a long-running process (a controller) is stopped: its ``wait4``
    figure would be this process's own RSS when it forked, whatever it used.
    """
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the group of a session we created for this PID
    except ProcessLookupError:
        pass


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_of(pid: int) -> list[int]:
    """Direct children of a process."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def runs_summary(
    runs: Sequence[Mapping[str, Mapping[str, float]]], *, ratios: Sequence[str] = ("wall", "cpu")
) -> dict[str, Any]:
    """Each command's :func:`summary` of wall and CPU over ``runs`` (a dict per round,
    command name -> its measurement); with a ``before`` command in the rounds, the
    median of tool/before taken round by round for each of ``ratios`` (pairing keeps
    the ratio meaningful while the machine's load moves)."""
    out: dict[str, Any] = {
        f"{name}_{what}": summary([r[name][what] for r in runs])
        for name in runs[0]
        for what in ("wall", "cpu")
    }
    if "before" in runs[0]:
        for what in ratios:
            out[f"tool_over_before_{what}"] = statistics.median(
                r["tool"][what] / r["before"][what] for r in runs
            )
    return out


def save(name: str, data: dict[str, Any]) -> Path:
    """Write a benchmark's raw figures to bench/results/NAME.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def artifactcheck_command(overlay: str | Path | None = None) -> list[str]:
    """The console script of the product's environment (:func:`product_python`): what
    users run, as they install it, importing this tree (or ``overlay``, on
    ``PYTHONPATH``, ahead of it). The pyenv shim in PATH, a bash script that forks pyenv
    itself, is never run, so the start-up measured is the program's. For a baseline copy
    of the package from before the console script's entry point was
    ``artifactcheck.cli.entry:run``, the console script that tree installed (a file beside
    no package, so the copy on ``PYTHONPATH`` is the one imported).
    """
    if overlay is not None and not (Path(overlay) / "artifactcheck/cli/entry.py").exists():
        return [product_python(), str(_old_console_script())]
    return [str(Path(product_python()).parent / "artifactcheck")]


def from_baseline(argv: list[str], overlay: str | Path) -> list[str]:
    """``argv`` (an :func:`artifactcheck_command` and its arguments) run from the
    baseline copy ``overlay`` instead, through that tree's own console script."""
    return [*artifactcheck_command(overlay), *argv[len(artifactcheck_command()) :]]


def _old_console_script() -> Path:
    """The console script of a tree whose entry point was ``artifactcheck.cli.main:main``."""
    path = Path(tempfile.gettempdir()) / "acbench-old-console" / "artifactcheck"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "import sys\nfrom artifactcheck.cli.main import main\nif __name__ == '__main__':\n"
        "    sys.exit(main())\n"
    )
    return path


PYCACHE = Path(tempfile.gettempdir()) / "acbench-pycache"
PRODUCT_VENVS = Path(tempfile.gettempdir()) / "acbench-product"


#: The interpreter a user's ``python3`` is on Debian and Ubuntu (the README's machine).
DISTRIBUTION_PYTHON = Path("/usr/bin/python3")


# Python >= 3.11 (pyproject's requires-python) with venv and ensurepip (python3-venv).
_SUPPORTED_AND_VENV = "import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))"


@functools.cache
def product_interpreter() -> str:
    """The interpreter the product's environment is made with: ``ACBENCH_PYTHON`` when
    set, else the distribution's ``python3`` when the package supports its version,
    else the one running the benchmark.

    Users install artifactcheck into the distribution's interpreter, which Debian and
    Ubuntu build with profile-guided optimisation and link-time optimisation. A
    developer's interpreter may be built without them (pyenv's default), and runs the
    same Python code markedly slower (docs/benchmarks.md, "The interpreter"): a start-up
    or a CPU per GET measured on it is not what a user sees. Every command a benchmark
    compares (the tool, its baseline tree, the asyncio floor, the hashlib bound) runs on
    this one interpreter, so a ratio compares programs, not interpreters.
    """
    chosen = os.environ.get("ACBENCH_PYTHON")
    if chosen:
        if shutil.which(chosen) is None:
            raise SystemExit(f"ACBENCH_PYTHON={chosen}: no such interpreter")
        return str(shutil.which(chosen))
    if DISTRIBUTION_PYTHON.exists():
        probe = subprocess.run(  # noqa: S603 - the distribution's interpreter
            [str(DISTRIBUTION_PYTHON), "-c", _SUPPORTED_AND_VENV],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return str(DISTRIBUTION_PYTHON)
    return sys.executable


def interpreter_info() -> dict[str, str]:
    """Which interpreter the product ran on, for a result's ``machine``."""
    python = product_interpreter()
    version = subprocess.run(  # noqa: S603 - the interpreter chosen above
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return {"path": python, "version": version}


def product_python(interpreter: str | None = None) -> str:
    """An interpreter whose environment holds what ``pip install artifactcheck`` gives
    and nothing of the development extras, with this tree's package found the way an
    installed one is: on ``sys.path`` through the site directory (a ``.pth`` file naming
    this tree), not through an editable install's import finder, which runs on every
    import of a run and costs the development environment's ``verify`` about 12 ms of
    its start. The environment's ``bin/artifactcheck`` is the console script pip wrote.

    The development environment also holds the test tools, and one of them changes the
    product's start: the official Kubernetes client imports ``kubernetes_validate``
    whenever it is installed (``kubernetes.dynamic``), and with it jsonschema and a Lark
    grammar built at import, about 1.7 s of a controller's start on a 2-core AMD EPYC.
    Made with ``interpreter`` (by default :func:`product_interpreter`), once per
    ``pyproject.toml``, tree and interpreter (their digest names the directory).
    """
    interpreter = interpreter or product_interpreter()
    key = (ROOT / "pyproject.toml").read_bytes() + str(ROOT).encode() + interpreter.encode()
    venv = PRODUCT_VENVS / hashlib.sha256(key).hexdigest()[:12]
    python = venv / "bin" / "python"
    if not (venv / "tree-on-path").exists():
        log(f"bench: making the product's environment {venv} ({interpreter}, pip install {ROOT})")
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)  # noqa: S603
        pip = [str(python), "-m", "pip", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "install", str(ROOT)], check=True)  # noqa: S603
        script = (venv / "bin" / "artifactcheck").read_bytes()
        subprocess.run([*pip, "uninstall", "-y", "artifactcheck"], check=True)  # noqa: S603
        (venv / "bin" / "artifactcheck").write_bytes(script)
        (venv / "bin" / "artifactcheck").chmod(0o755)
        site = subprocess.run(  # noqa: S603
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        (Path(site) / "artifactcheck-tree.pth").write_text(f"{ROOT}\n", encoding="utf-8")
        (venv / "tree-on-path").write_text("")
    return str(python)


def tool_env(overlay: str | Path | None = None) -> dict[str, str]:
    """The environment of a measured artifactcheck run: byte-code cached, like an install.

    This machine sets PYTHONDONTWRITEBYTECODE=1, so every run would compile the package
    from source; pip compiles byte-code when it installs a wheel, so a measured run
    uses a byte-code cache outside the repo (filled by the warm-up run).
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    if overlay is not None:  # a patched copy of the package (bench/overlay.py)
        env["PYTHONPATH"] = str(overlay)
    return env


class FleetServer:
    """``python -m bench.fleet_server`` as a separate process: start, read info, stop.

    The server process prints one JSON line when it is ready; stopping it is a SIGTERM
    to that PID, after which it stops nginx (its own child) and removes its files.
    """

    def __init__(self, args: Sequence[str], *, ready_timeout: float = 180.0) -> None:
        self.args = list(args)
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.info: dict[str, Any] = {}

    def start(self) -> FleetServer:
        self.proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "bench.fleet_server", *self.args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.ready_timeout
        line = ""
        while not line:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                self.stop()
                raise TimeoutError("fleet server not ready in time")
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"fleet server exited with {self.proc.returncode}")
        sel.close()
        self.info = json.loads(line)
        return self

    def server_cpu(self) -> float:
        """CPU seconds used so far by the serving processes (nginx workers or the loop)."""
        pids = self.info.get("serving_pids") or []
        return sum(proc_cpu(p) for p in pids)

    def nginx_requests(self) -> int | None:
        """nginx's total request counter (stub_status), None for other servers."""
        url = self.info.get("status_url")
        if not url:
            return None
        import urllib.request

        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - loopback
            lines = resp.read().decode().splitlines()
        return int(lines[2].split()[2])  # " accepts handled requests" -> requests

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stdin):
            if stream is not None:
                stream.close()

    def __enter__(self) -> FleetServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextmanager
def fleet_server(args: Sequence[str]) -> Iterator[FleetServer]:
    """A started :class:`FleetServer`, stopped on exit."""
    server = FleetServer(args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def fmt_s(value: float) -> str:
    return f"{value:.2f} s"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
