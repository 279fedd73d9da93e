"""Every file and module the READMEs and the docs name exists.

Docs describe the present. A page that still names `fetch.py` after it became `fetch/`
sends a newcomer looking for something that is not there, and nothing else notices: the
code moved, the prose did not. History lives in CHANGELOG.md, whose earlier versions may
name what was removed, so only its current section (Unreleased, or else the newest
version) is read here.

What counts as naming something (each a rule below, each with a test that breaks it):

- a repository path: `artifactcheck/...`, `tests/...`, `bench/...`, `k8s/...`, `docs/...`,
  `scripts/...`, `.ci/...` (globs and `{a,b}` match at least one file; `file.py::test_x`
  also needs `test_x` defined in the file);
- a path inside the package as the docs write it, `judge/compare.py`;
- a bare Python file name, `fetch.py`: some file in the repository has that name;
- a dotted name, `artifactcheck.x.y` or `bench.x`: the longest importable prefix is a
  module and the rest are attributes of it;
- a relative Markdown link, `[runbook](runbook.md#anchor)`: the file exists, and so does
  a heading of that page with that anchor.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "artifactcheck"

# Wrong names in pages another change owns (named in its report), tolerated until it lands.
KNOWN_ELSEWHERE: frozenset[tuple[str, str]] = frozenset()

_START = r"(?<![\w./@:-])"
REPO_PATH = re.compile(
    _START + r"((?:artifactcheck|tests|bench|k8s|docs|scripts|\.ci)/[\w./*{},:\[\]-]*)"
)
BARE_PY = re.compile(_START + r"(\w+\.py)\b")
DOTTED = re.compile(_START + r"((?:artifactcheck|bench)(?:\.\w+)+)(?![\w/-])")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A dotted name ending so is a file or a domain (artifactcheck.json, artifactcheck.io/...).
NOT_MODULE_SUFFIXES = frozenset(
    {"io", "json", "yaml", "yml", "xml", "md", "py", "txt", "toml", "html", "conf", "sh", "rules"}
)


def documents() -> Iterator[tuple[str, str]]:
    """(name, text) of each present-tense page: READMEs, docs/, k8s/, CHANGELOG's current part."""
    yield "README.md", (ROOT / "README.md").read_text(encoding="utf-8")
    changelog = ROOT / "CHANGELOG.md"
    if changelog.exists():
        yield "CHANGELOG.md", current(changelog.read_text(encoding="utf-8"))
    pages = [*(ROOT / "docs").rglob("*.md"), *(ROOT / "k8s").rglob("*.md")]
    pages += [p for p in (ROOT / "tests").rglob("README.md") if "node_modules" not in p.parts]
    for page in sorted(pages):
        yield page.relative_to(ROOT).as_posix(), page.read_text(encoding="utf-8")


def current(text: str) -> str:
    """The section true of the code now: Unreleased, or else the newest version (the first).

    Earlier versions are history and may name what has since gone.
    """
    match = re.search(r"^## \[?Unreleased\]?.*?$(.*?)(?=^## |\Z)", text, re.M | re.S | re.I)
    if match:
        return match.group(1)
    match = re.search(r"^## .*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    return match.group(1) if match else ""


@functools.cache
def schema_names() -> frozenset[str]:
    """Names such as `artifactcheck/report/v1` that the package writes: schemas, not paths."""
    found: set[str] = set()
    for source in PACKAGE.rglob("*.py"):
        found.update(
            re.findall(r"[\"'](artifactcheck/[\w/-]+)[\"']", source.read_text(encoding="utf-8"))
        )
    return frozenset(found)


@functools.cache
def repository_files() -> frozenset[str]:
    """Basenames of the repository's files (the virtualenv and caches aside)."""
    skip = {".git", ".venv", "node_modules", "__pycache__", ".hypothesis"}
    found: set[str] = set()
    for _top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        found.update(files)
    return frozenset(found)


def trimmed(reference: str) -> str:
    """The reference without the sentence around it: trailing punctuation, an unopened `]`."""
    reference = reference.rstrip(".,:;")
    while reference.endswith("]") and reference.count("[") < reference.count("]"):
        reference = reference[:-1].rstrip(".,:;")
    return reference


def expand_braces(pattern: str) -> list[str]:
    """`a/{b,c}/d` as `a/b/d` and `a/c/d`, as the shell reads it."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [p for part in match.group(1).split(",") for p in expand_braces(head + part + tail)]


def path_problem(reference: str, base: Path = ROOT) -> str | None:
    """Why a path reference names nothing, or None when it does."""
    path, _, node = reference.partition("::")
    for candidate in expand_braces(path):
        matches = list(base.glob(candidate)) if "*" in candidate else [base / candidate]
        if not any(m.exists() for m in matches):
            return "no such file or directory"
    if node:
        source = (base / path).read_text(encoding="utf-8") if (base / path).is_file() else ""
        for name in re.sub(r"\[.*\]$", "", node).split("::"):
            if not re.search(
                rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", source, re.M
            ):
                return f"{path} defines no {name}"
    return None


def dotted_problem(reference: str) -> str | None:
    """Why `pkg.module.attr` names nothing: no importable prefix, or a missing attribute."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            if importlib.util.find_spec(module_name) is None:
                continue
        except ImportError:
            continue
        target: object = importlib.import_module(module_name)
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return f"{module_name} has no {'.'.join(parts[cut:])}"
            target = getattr(target, attribute)
        return None
    return "no such module"


def problems_in(name: str, text: str) -> Iterator[tuple[str, str]]:
    """(reference, why) for each thing `text` names that does not exist."""
    schemas = schema_names()
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    in_package = re.compile(_START + rf"((?:{'|'.join(sorted(packages))})/[\w/.-]*\.py)\b")
    basenames = repository_files()
    for match in REPO_PATH.finditer(text):
        reference = trimmed(match.group(1))
        if reference not in schemas and (why := path_problem(reference)):
            yield reference, why
    for match in in_package.finditer(text):
        if why := path_problem(match.group(1), PACKAGE):
            yield match.group(1), f"not in artifactcheck/: {why}"
    for match in BARE_PY.finditer(text):
        if match.group(1) not in basenames:
            yield match.group(1), "no file of that name in the repository"
    for match in DOTTED.finditer(text):
        reference = match.group(1)
        if reference.rsplit(".", 1)[-1] not in NOT_MODULE_SUFFIXES and (
            why := dotted_problem(reference)
        ):
            yield reference, why
    page = ROOT / name
    for match in LINK.finditer(text):
        target, _, anchor = match.group(1).partition("#")
        if re.match(r"^[a-z][\w+.-]*:", target):
            continue  # https:, mailto:: not the repository's
        linked = page.parent / target if target else page
        if not linked.exists():
            yield (
                match.group(1),
                f"link target missing (relative to {page.parent.relative_to(ROOT)}/)",
            )
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
            yield match.group(1), f"{linked.relative_to(ROOT)} has no heading #{anchor}"


def heading_anchors(page: Path) -> frozenset[str]:
    """The anchors GitHub gives a page's headings: lowercase, punctuation dropped, - for spaces."""
    found = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", page.read_text(encoding="utf-8"), re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return frozenset(found)


def test_every_name_in_the_docs_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # bench is a package at the top, not installed
    wrong = [
        f"{name}: `{reference}`: {why}"
        for name, text in documents()
        for reference, why in problems_in(name, text)
        if (name, reference) not in KNOWN_ELSEWHERE
    ]
    assert not wrong, "the docs name what does not exist:\n" + "\n".join(sorted(set(wrong)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see `artifactcheck/fetch.py`", "artifactcheck/fetch.py"),
        ("run tests/core/test_nothing_here.py", "tests/core/test_nothing_here.py"),
        (
            "`tests/core/test_docs.py::test_no_such_test`",
            "tests/core/test_docs.py::test_no_such_test",
        ),
        ("`bench/results/nothing-*.json`", "bench/results/nothing-*.json"),
        ("`docs/{scaling,nothing}.md`", "docs/{scaling,nothing}.md"),
        ("(k8s/nothing.yaml).", "k8s/nothing.yaml"),
        ("the rule in `judge/nothing.py`", "judge/nothing.py"),
        ("the old `cli_options.py` helpers", "cli_options.py"),
        ("`artifactcheck.nothing`", "artifactcheck.nothing"),
        (
            "`artifactcheck.judge.compare.no_such_function`",
            "artifactcheck.judge.compare.no_such_function",
        ),
        ("`bench.sampled.no_such_function`", "bench.sampled.no_such_function"),
        ("[the runbook](nothing.md#alerts)", "nothing.md#alerts"),
        ("[an alert](runbook.md#artifactchecknosuchalert)", "runbook.md#artifactchecknosuchalert"),
    ],
)
def test_a_name_that_does_not_exist_is_reported(
    text: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    assert [reference for reference, _ in problems_in("docs/page.md", text)] == [expected]


@pytest.mark.parametrize(
    "text",
    [
        "`artifactcheck/judge/compare.py`, `tests/core/test_docs.py::test_readme_commands_exist`",
        "`tests/core/test_docs.py::test_readme_commands_exist[case-1]`, `tests/k8s/`",
        "`bench/results/*.json`, `docs/{scaling,security}.md`, [k8s/rbac.yaml](../k8s/rbac.yaml)",
        "the schema `artifactcheck/report/v3`; label `artifactcheck.io/version`",
        "`artifactcheck.json` and `artifactcheck.xml` are files",
        "`judge/compare.py`, `compare.py`, `artifactcheck.release.sources._parse_release`",
        "`python -m bench.sampled`; https://example.com/artifactcheck/nothing.py; /etc/k8s/x.yaml",
        "[runbook](runbook.md#artifactcheckstale), [site](https://example.com/x.md)",
    ],
)
def test_a_name_that_exists_is_not_reported(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    assert list(problems_in("docs/page.md", text)) == []


def test_only_the_unreleased_part_of_the_changelog_is_read() -> None:
    text = "# Changelog\n\n## [Unreleased]\n\n- `now.py`\n\n## [0.1.0] - 2026-12-05\n\n- `old.py`\n"
    assert "now.py" in current(text) and "old.py" not in current(text)


def test_without_unreleased_only_the_newest_version_is_read() -> None:
    text = "# Changelog\n\n## [0.2.0] - 2026-12-06\n\n- `now.py`\n\n## [0.1.0] - 2026-12-05\n"
    text += "\n- `old.py`\n"
    assert "now.py" in current(text) and "old.py" not in current(text)


def test_the_pages_read_are_the_present_tense_ones() -> None:
    names = [name for name, _ in documents()]
    assert "README.md" in names and "docs/architecture.md" in names
    assert "docs/benchmarks.md" in names and "k8s/README.md" in names
    assert "tests/fixtures/README.md" in names
