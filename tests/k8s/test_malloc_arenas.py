"""The controller keeps glibc's malloc arenas to two (artifactcheck/clients/libc.py).

Counted by glibc itself (``malloc_stats`` lists every arena) in a fresh interpreter
whose eight threads allocate at once: nine arenas without the cap, two with it, and
an operator's ``MALLOC_ARENA_MAX`` left to rule. ``artifactcheck controller`` sets the
cap before anything else.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main

PROBE = """
import ctypes, sys, threading
if sys.argv[1] == "cap":
    from artifactcheck.clients.libc import limit_malloc_arenas
    print("capped" if limit_malloc_arenas(2) else "left")
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    keep = [bytearray(4096) for _ in range(200)]  # above pymalloc's 512 bytes: malloc
ts = [threading.Thread(target=work) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join()
ctypes.CDLL(None).malloc_stats()
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")


def arenas(mode: str, **env: str) -> tuple[int, str]:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, env=environ, check=True
    )
    count = sum(1 for line in done.stderr.splitlines() if line.startswith("Arena "))
    return count, done.stdout.strip()


def test_eight_allocating_threads_share_two_arenas() -> None:
    uncapped, _ = arenas("none")
    capped, said = arenas("cap")
    assert uncapped > 2, uncapped  # the probe can tell: glibc made one per thread
    assert (capped, said) == (2, "capped")


def test_an_operators_malloc_arena_max_wins() -> None:
    assert arenas("cap", MALLOC_ARENA_MAX="3") == (3, "left")


def test_the_controller_command_caps_the_arenas_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from artifactcheck.clients import kube, libc

    calls: list[str] = []

    class Stop(Exception):
        pass

    def loading(*args: Any) -> None:
        calls.append("api client")
        raise Stop

    monkeypatch.setattr(libc, "limit_malloc_arenas", lambda: calls.append("arenas"))
    monkeypatch.setattr(kube, "load_api_client", loading)
    result = CliRunner().invoke(main, ["controller"])
    assert isinstance(result.exception, Stop), result.output
    assert calls == ["arenas", "api client"]
