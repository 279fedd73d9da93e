"""The repository speaks of the product: versions, commits and behaviour, never of how
the work on it was organised.

Why: a reader adopting the tool meets a batch number, an internal tracker number or a
batch suffix in a comment, a
benchmark name or a results file and can do nothing with it: no tracker, no batch of
that name is theirs to look up. What changed between versions is CHANGELOG.md; what it
was before and why is the git history. So every tracked file, its path and its text, is
read for those words, and each is reported as ``file:line: text``.

What is not ours is not read: the build outputs of third-party tools committed as test
fixtures (`tests/fixtures/frameworks/NAME/vN/`, `.../rails/rN/`, `tests/fixtures/builds/`)
and any `node_modules/`. This file is read too: its examples spell the words apart
(``STOP``, ``ISSUE``, ``SUFFIX``), so it holds none of them.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from ci_support import unmet

ROOT = Path(__file__).resolve().parents[2]
#: The words the rules look for, spelt apart so that this file, read like every other,
#: does not hold them itself.
STOP, ISSUE, SUFFIX = "st" + "op", "iss" + "ue", "-" + "s"

#: Words about how the work was organised, each a rule below:
#: - a batch by number, with or without a space, one or several (not a duration: "... 10 s
#:   after");
#: - a batch as a results-file suffix (a dash or underscore, "s" and two digits);
#: - the internal tracker's numbers;
#: - a batch by name ("this ...", "the previous ...'s end", "... by ...", "follow" + "ups")
#:   (not "the stop signal", "a stop flag"). Examples: the tests below.
BATCH_WORDS = re.compile(
    r"\bstops? ?\d+\b(?! ?(?:ms|s|sec|seconds?|min|minutes?|h|hours?)\b)"
    r"|[-_]s\d{2}[a-z]?\b"
    r"|\bissues? \d+"
    r"|\b(?:this|previous|next|each|every|per) stop\b(?! ?(?:\(|flag|signal|event))"
    r"|\bstop by stop\b"
    r"|\bstop's (?:end|table|tree|figures|changes|machine)\b"
    r"|\bfollow(?:ups)\b",
    re.IGNORECASE,
)

#: Committed outputs of third-party build tools (Django's admin, Next.js chunks, ...):
#: their words are not ours.
THIRD_PARTY = re.compile(
    r"^tests/fixtures/frameworks/[^/]+/[vr]\d+/"
    r"|^tests/fixtures/builds/"
    r"|(?:^|/)node_modules/"
)

#: Files whose comments or names still carry such words, to be reworded by whoever edits
#: them next. This list only shrinks: an entry whose file is clean fails the test too, so
#: that it is taken out. When it is empty, every tracked file is held to the rule.
REMAINING: frozenset[str] = frozenset()


def tracked_files() -> list[str]:
    """The repository's tracked files, as `git ls-files` names them."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        unmet(f"the tracked files cannot be listed (git ls-files: {error})")
    return [name for name in listed.decode("utf-8").split("\0") if name]


def hits(name: str, text: str) -> Iterator[str]:
    """`file:line: text` for the file's name and each of its lines that carries a word."""
    if BATCH_WORDS.search(name):
        yield f"{name}: (its name)"
    for number, line in enumerate(text.splitlines(), start=1):
        if BATCH_WORDS.search(line):
            yield f"{name}:{number}: {line.strip()[:160]}"


def read_text(path: Path) -> str:
    """The file's text, or "" for a binary file (bytes that are not UTF-8 text)."""
    data = path.read_bytes()
    if b"\0" in data:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def repository_hits() -> dict[str, list[str]]:
    """Every hit in the tracked files that are ours, by file."""
    found: dict[str, list[str]] = {}
    for name in tracked_files():
        path = ROOT / name
        if THIRD_PARTY.search(name) or not path.is_file():
            continue  # third-party, these examples, or deleted and not yet committed
        lines = list(hits(name, read_text(path)))
        if lines:
            found[name] = lines
    return found


def test_no_file_speaks_of_how_the_work_was_organised() -> None:
    found = repository_hits()
    wrong = [line for name in sorted(found) if name not in REMAINING for line in found[name]]
    assert not wrong, "words about how the work was organised:\n" + "\n".join(wrong)


def test_the_list_of_remaining_files_only_shrinks() -> None:
    found = repository_hits()
    clean = sorted(REMAINING - set(found))
    assert not clean, "clean now, take them out of REMAINING: " + ", ".join(clean)


@pytest.mark.parametrize(
    "line",
    [
        f"measured at {STOP} 27 on the EPYC",
        f"{STOP.title()} 32 (5 December)",
        f"`bench/results/*-{STOP}27.json`",
        f"{STOP}s 27 to 31",
        f"python -m bench.sampled --name sampled-200x8{SUFFIX}32",
        f"throughput{SUFFIX}31a.json",
        "startup_" + "s31.json",
        f"the soak ({ISSUE} 25)",
        f"{ISSUE.title()}s 22, 24 and 25 in progress",
        f"what this {STOP} took off the path",
        f"the previous {STOP}'s end, `149b9c6`",
        f"CHANGELOG.md     what changed, {STOP} by {STOP}",
        f"On this {STOP}'s Xeon",
        "soak-3m-follow" + "ups.json",
    ],
)
def test_a_batch_word_is_found(line: str) -> None:
    assert list(hits("docs/page.md", line)) == [f"docs/page.md:1: {line}"]


@pytest.mark.parametrize(
    "line",
    [
        "then stop 10 s after the first cycle",
        "stop 5 seconds later",
        "the pod is followed up until confirmed",
        "a sampled cycle's follow-ups",
        "the stop signal; stop() the loop",
        "a watch thread gets no event to notice a stop flag by",
        "every stop (of the loop) and every stop flag",
        "-s 32 bytes; sha256-s; tests/e2e/",
        "sampled-1000x8.json at `a24848a` on 0.1.0",
    ],
)
def test_a_product_word_is_not_found(line: str) -> None:
    assert list(hits("docs/page.md", line)) == []


def test_a_file_name_with_a_batch_word_is_found() -> None:
    name = f"bench/results/startup{SUFFIX}32.json"
    assert list(hits(name, "{}")) == [f"{name}: (its name)"]


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("tests/fixtures/frameworks/django/v1/admin/css/base.css", False),
        ("tests/fixtures/frameworks/rails/r2/application.css", False),
        ("tests/fixtures/builds/vite-r1/assets/index.js", False),
        ("tests/fixtures/frameworks/src/vue/node_modules/vue/index.js", False),
        ("tests/fixtures/frameworks/README.md", True),
        ("tests/fixtures/frameworks/build.sh", True),
        ("tests/fixtures/frameworks/src/vue/src/App.vue", True),
        ("tests/fixtures/patches/vite-r2.patch", True),
        ("docs/benchmarks.md", True),
    ],
)
def test_only_third_party_build_outputs_are_left_unread(name: str, ours: bool) -> None:
    assert (THIRD_PARTY.search(name) is None) is ours
