"""The benchmark's floor after verify's start-up (bench/floor_loaded.py) measures what it
says: the floor's own fetching, unchanged, from N processes, after every listed module.

Run as the benchmark runs it (a file, its own interpreter) against real loopback
servers, and its digests compared with the floor's and with hashlib's.
"""

from __future__ import annotations

import hashlib
import http.server
import importlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
FLOOR, LOADED = BENCH / "floor.py", BENCH / "floor_loaded.py"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, Content-Length: the floor's one connection

    def do_GET(self) -> None:
        body = (f"{self.server.server_address[1]} {self.path} ".encode()) * 300
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[list[str]]:
    """Five loopback servers (five hosts), each answering its port and path."""
    running = []
    for _ in range(5):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        running.append(server)
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in running]
    for server in running:
        server.shutdown()
        server.server_close()


@pytest.fixture
def floor_loaded(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The module, imported as the file imports its floor: from its own directory."""
    monkeypatch.syspath_prepend(str(BENCH))
    yield importlib.import_module("floor_loaded")
    for name in ("floor_loaded", "floor"):
        sys.modules.pop(name, None)


def _urls(bases: list[str], tmp_path: Path) -> Path:
    urls = [f"{base}/asset-{i}.js" for base in bases for i in range(4)]
    path = tmp_path / "urls.txt"
    path.write_text("\n".join(urls) + "\n")
    return path


def _expected(urls: Path) -> list[str]:
    out = []
    for url in urls.read_text().split():
        port, path = url.split(":")[2].split("/", 1)
        out.append(f"{hashlib.sha256(f'{port} /{path} '.encode() * 300).hexdigest()}  {url}")
    return sorted(out)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_every_url_hashed_once_as_the_floor_hashes_it(
    servers: list[str], tmp_path: Path, processes: int
) -> None:
    urls = _urls(servers, tmp_path)
    modules = tmp_path / "modules.txt"
    modules.write_text("json\nartifactcheck.model.settings\n")
    floor = _run(str(FLOOR), str(urls))
    loaded = _run(str(LOADED), str(urls), "--modules", str(modules), "--processes", str(processes))
    assert floor.returncode == 0, floor.stderr
    assert loaded.returncode == 0, loaded.stderr
    assert sorted(loaded.stdout.splitlines()) == _expected(urls)
    assert sorted(floor.stdout.splitlines()) == _expected(urls)


def test_the_processes_fetch_in_parallel_and_the_modules_are_loaded_first(
    tmp_path: Path,
) -> None:
    """Each process reports its pid and what is loaded when it fetches: N pids, the
    listed modules in every one of them (the forks inherit them)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "import floor_loaded\n"
        "async def fake(urls, connections):\n"
        "    loaded = 'artifactcheck.model.settings' in sys.modules\n"
        "    return [f'{os.getpid()} {loaded} {len(urls)}']\n"
        "floor_loaded.fetch_and_hash = fake\n"
        "floor_loaded.load(['artifactcheck.model.settings'])\n"
        "urls = [f'http://h{i % 5}:80/{i}' for i in range(20)]\n"
        "print(floor_loaded.run(urls, 3), end='')\n"
    )
    done = _run(str(probe))
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert len({pid for pid, _, _ in lines}) == 3
    assert all(loaded == "True" for _, loaded, _ in lines)
    assert sorted(int(n) for _, _, n in lines) == [4, 8, 8]  # hosts 2, 2 and 1


def test_hosts_are_shared_out_whole(floor_loaded: ModuleType) -> None:
    shared_out = floor_loaded.shared_out
    urls = [f"http://h{i % 5}:80/{i}" for i in range(20)]
    parts = shared_out(urls, 2)
    assert sorted(parts[0] + parts[1]) == sorted(urls)
    hosts = [{url.split("/")[2] for url in part} for part in parts]
    assert hosts == [{"h0:80", "h2:80", "h4:80"}, {"h1:80", "h3:80"}]
    assert shared_out(urls, 1) == [urls]


def test_a_module_that_does_not_exist_is_skipped_one_that_breaks_ends_the_run(
    servers: list[str], tmp_path: Path
) -> None:
    """``-X importtime`` lists failed attempts too (a missing module, a missing parent):
    skipped. A module that exists and fails would make the bound too low: refused."""
    urls = _urls(servers, tmp_path)
    modules = tmp_path / "modules.txt"
    modules.write_text("no_such_module_here\norg.python.core\njson\n")
    skipped = _run(str(LOADED), str(urls), "--modules", str(modules), "--processes", "2")
    assert skipped.returncode == 0, skipped.stderr
    assert sorted(skipped.stdout.splitlines()) == _expected(urls)

    (tmp_path / "broken_here.py").write_text("import no_such_dependency\n")
    modules.write_text("json\nbroken_here\n")
    broken = subprocess.run(
        [sys.executable, str(LOADED), str(urls), "--modules", str(modules), "--processes", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])
            ),
        },
    )
    assert broken.returncode != 0
    assert "cannot import broken_here" in broken.stderr
    assert broken.stdout == ""


def test_usage_is_refused_plainly(tmp_path: Path) -> None:
    done = _run(str(LOADED), str(tmp_path / "urls.txt"))
    assert done.returncode != 0
    assert "usage: floor_loaded.py URLS --modules FILE --processes N" in done.stderr


@pytest.mark.parametrize(
    ("names", "package", "metadata"),
    [
        (["json"], False, False),  # the libraries only: no module of the package
        (["json", "artifactcheck.model.settings"], True, False),  # the stub, as in verify
    ],
)
def test_the_package_loads_as_verify_loads_it(
    floor_loaded: ModuleType, tmp_path: Path, names: list[str], package: bool, metadata: bool
) -> None:
    """With the package listed, pydantic's plugin loader is verify's stub (no
    ``importlib.metadata``, whose import would make the bound too high); without it,
    nothing of the package is imported."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "import floor_loaded\n"
        f"floor_loaded.load({names!r})\n"
        "print(any(n.split('.')[0] == 'artifactcheck' for n in sys.modules),"
        " 'importlib.metadata' in sys.modules)\n"
    )
    done = _run(str(probe))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(package), str(metadata)]
