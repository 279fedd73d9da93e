"""The floor after verify's start-up: what ``verify`` would take if its checks cost nothing.

    python bench/floor_loaded.py URLS --modules FILE --processes N

First every module a ``verify`` run loaded (FILE: their names, one a line, as ``-X
importtime`` listed them), so that the libraries and the package cost here what they
cost there; then the floor's own fetching and hashing (``floor.main``, unchanged), the
hosts shared out between N processes forked after the imports, as ``verify`` forks its
workers after its own. No spec is read, nothing is checked, judged or reported: the
wall time of ``verify`` above this one is the price of its checks, and this one's above
the floor the price of starting the libraries the tool is built on (docs/benchmarks.md,
"The floor after verify's start-up"). Run as a file, like the floor.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from urllib.parse import urlsplit

from floor import main as fetch_and_hash  # this directory: run as a file


def load(names: list[str]) -> None:
    """Import ``names`` as ``verify`` does: with the package among them, its pydantic
    plugin stub first (``artifactcheck.cli.main``).

    A name that does not exist is skipped: ``-X importtime`` lists the attempts that
    failed as well (Debian's ``sitecustomize`` tries ``apport_python_hook``, the
    standard library ``org.python.core``, Jython's). Any
    other failure ends the run: a bound that skipped a module would be too low.
    """
    if any(name.startswith("artifactcheck.") for name in names):
        from artifactcheck.cli.main import _without_pydantic_plugins

        _without_pydantic_plugins()
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
            if missing is None or not (name + ".").startswith(missing + "."):
                raise SystemExit(f"floor_loaded: cannot import {name}: {exc}") from exc


def shared_out(urls: list[str], processes: int) -> list[list[str]]:
    """The URLs of each process: whole hosts, dealt round in the order they first appear."""
    hosts: dict[str, int] = {}
    parts: list[list[str]] = [[] for _ in range(processes)]
    for url in urls:
        index = hosts.setdefault(urlsplit(url).netloc, len(hosts) % processes)
        parts[index].append(url)
    return parts


def run(urls: list[str], processes: int, connections: int = 64) -> str:
    """Fetch and hash ``urls`` from ``processes`` processes (this one and forks of it)."""
    parts = shared_out(urls, processes)
    each = max(1, connections // processes)  # connections at once, per process
    children: list[tuple[int, int]] = []
    for part in parts[1:]:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            lines = asyncio.run(fetch_and_hash(part, each))
            with os.fdopen(write_end, "w", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in lines))
            os._exit(0)
        os.close(write_end)
        children.append((pid, read_end))
    lines = asyncio.run(fetch_and_hash(parts[0], each))
    text = "".join(line + "\n" for line in lines)
    for pid, read_end in children:
        with os.fdopen(read_end, encoding="utf-8") as got:
            text += got.read()
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"floor_loaded: process {pid} failed")
    return text


if __name__ == "__main__":
    argv = sys.argv[1:]
    if len(argv) != 5 or argv[1] != "--modules" or argv[3] != "--processes":
        raise SystemExit("usage: floor_loaded.py URLS --modules FILE --processes N")
    with open(argv[2], encoding="utf-8") as fh:
        load([line.strip() for line in fh if line.strip()])
    with open(argv[0], encoding="utf-8") as fh:
        listed = [line.strip() for line in fh if line.strip()]
    sys.stdout.write(run(listed, int(argv[4])))
