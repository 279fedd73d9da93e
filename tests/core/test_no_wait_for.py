"""No ``asyncio.wait_for`` in the package: on Python 3.11 it returns the result of a wait
that finished in the loop turn before a cancellation and drops the cancellation, which
kept a rebuilt check alive beside its successor (the soak benchmark, control/checking.py).
``asyncio.timeout`` never loses one."""

from __future__ import annotations

import ast
from pathlib import Path

import artifactcheck

PACKAGE = Path(artifactcheck.__file__).parent


def test_the_package_never_calls_asyncio_wait_for() -> None:
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "wait_for"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "asyncio"
            ):
                calls.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert calls == []
