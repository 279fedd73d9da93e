"""One name, one meaning: no two modules of the package share a base name, and no public
name is defined at the top of two modules unless it is a protocol every reader implements;
and no measured figure in the code's comments (figures live in docs/benchmarks.md).

A reader of ``from artifactcheck.x.kube import ...`` should not have to ask which of three
``kube`` modules is meant; a grep for ``class Context`` should find one class. The rule is
read from the source tree (AST), so a new module or class that breaks it fails here first.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

import artifactcheck

PACKAGE = Path(artifactcheck.__file__).parent

#: Names every module of one kind defines on purpose: the shape a registry calls.
#: Each entry names the package whose modules implement it, and nothing else may.
PROTOCOL_NAMES = {
    "looks_like": "manifests",  # each manifest reader: does this document look like mine?
    "parse": "manifests",  # each manifest reader: the document -> Manifest
    "main": None,  # ``python -m`` entry points (the CRD and the configuration generators)
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _public_top_level(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if not node.name.startswith("_"):
                names.append(node.name)
    return names


def test_no_two_modules_share_a_base_name() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        if path.name in {"__init__.py", "__main__.py"}:
            continue
        seen[path.stem].append(str(path.relative_to(PACKAGE)))
    shared = {name: where for name, where in seen.items() if len(where) > 1}
    assert shared == {}, f"base names used by several modules: {shared}"


def test_no_package_shares_a_name_with_a_module() -> None:
    packages = {p.parent.name for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}
    modules = {p.stem for p in _modules() if p.name not in {"__init__.py", "__main__.py"}}
    assert packages & modules == set()


def test_no_public_name_means_two_things() -> None:
    defined: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        for name in _public_top_level(path):
            defined[name].append(str(path.relative_to(PACKAGE)))
    twice = {}
    for name, where in defined.items():
        if len(where) < 2:
            continue
        if name in PROTOCOL_NAMES:
            package = PROTOCOL_NAMES[name]
            if package is None or all(w.startswith(f"{package}/") for w in where):
                continue
        twice[name] = where
    assert twice == {}, f"public names defined in several modules: {twice}"


def test_the_rules_catch_what_they_claim(tmp_path: Path) -> None:
    """The checks themselves: a planted duplicate is seen (guards against a rule that
    cannot fail, e.g. an AST walk that finds no definitions)."""
    (tmp_path / "a.py").write_text("class Context:\n    pass\n\ndef _private():\n    pass\n")
    assert _public_top_level(tmp_path / "a.py") == ["Context"]
    assert len(_modules()) > 150
    assert sum(len(_public_top_level(p)) for p in _modules()) > 500


# --------------------------------------------------------------------------- figures

#: A measured figure: a duration in ms/µs, "N x faster", "N% of". Units of settings
#: (``500ms`` in a duration's grammar) are quoted in double backticks and not matched.
MEASURED = re.compile(
    r"(?<![\w.])\d[\d,.]*(?:-\d[\d,.]*)? ?(?:ms|µs)\b"
    r"|\b\d+(?:\.\d+)?x (?:faster|slower)\b"
    r"|\b\d+(?:\.\d+)? ?% of\b"
)


def _prose(path: Path) -> list[tuple[int, str]]:
    """The comments and docstrings of one module, with their line numbers."""
    source = path.read_text(encoding="utf-8")
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None and node.body:
                found.append((node.body[0].lineno, doc))
    return found


def measured_figures(path: Path) -> list[str]:
    out = []
    for line, text in _prose(path):
        unquoted = re.sub(r"``[^`]*``", "", text)
        out += [f"{path.name}:{line}: {m.group(0)}" for m in MEASURED.finditer(unquoted)]
    return out


def test_figures_live_in_the_benchmarks_not_in_the_code() -> None:
    """A figure measured once goes stale in a comment; docs/benchmarks.md keeps each
    with the command that produced it and the commit it was measured on."""
    found = [hit for path in _modules() for hit in measured_figures(path)]
    assert found == []


def test_a_figure_in_a_comment_or_docstring_is_seen(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        '"""Reads the store: 25-70 ms."""\n\n'
        "import x  # 10x faster\n\n"
        "def f():\n"
        '    """A duration: ``500ms``; 8% of the run."""\n'
    )
    assert [hit.split(": ", 1)[1] for hit in measured_figures(planted)] == [
        "10x faster",
        "25-70 ms",
        "8% of",
    ]
