"""Lines per test function across tests/: the figure the house style compares with kopf's.

Why a script: "about 30 lines per test" was a reading by eye; this makes it a number a
reviewer can repeat. A test is a ``def test_*`` (sync or async, module level or in a
``Test*`` class); its length runs from its first decorator to its last line, so a
parametrised table counts with the test it feeds. Two figures per directory: the lines of
the test functions per test, and every line of Python there (helpers, support modules and
fixtures included) per test, the reading behind "about 30 lines per test". Run:
``python tests/tools/measure_tests.py [DIR ...]`` (default: every directory under tests/).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def lengths_of_tests(path: Path) -> Iterator[int]:
    """The length in lines of each test function defined in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            yield node.end_lineno - first + 1


def measure(paths: list[Path]) -> tuple[int, int, int]:
    """(test functions, their lines, all lines) over the Python files ``paths``."""
    lengths = [n for path in paths if path.name.startswith("test_") for n in lengths_of_tests(path)]
    code = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in paths)
    return len(lengths), sum(lengths), code


def row(name: str, figures: tuple[int, int, int]) -> str:
    """One line of the report."""
    tests, lines, code = figures
    per = max(tests, 1)
    return f"{name:14} {tests:5} tests {lines / per:5.1f} lines/test {code / per:5.1f} all/test"


def main(argv: list[str]) -> int:
    """Print tests and lines per test for each directory, then for all of them."""
    directories = [Path(a) for a in argv] or sorted(
        p for p in TESTS.iterdir() if p.is_dir() and p.name not in {"fixtures", "__pycache__"}
    )
    groups = {d.name: sorted(d.rglob("*.py")) for d in directories}
    if not argv:
        groups["(top level)"] = sorted(TESTS.glob("*.py"))
    total = [0, 0, 0]
    for name, paths in groups.items():
        figures = measure(paths)
        total = [t + f for t, f in zip(total, figures, strict=True)]
        if figures[0]:
            print(row(name, figures))
    print(row("all", (total[0], total[1], total[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
