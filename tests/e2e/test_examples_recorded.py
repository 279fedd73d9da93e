"""docs/examples are what the code prints now: recorded afresh, compared with the page.

``docs/examples/record.sh`` records ``investigate`` and ``fleet`` over a simulated
fleet; an example recorded by an older build (a ``cdn-differs`` the code no longer
reports) misleads more than no example. Ports, timings, mtime-based ETags and column
widths change between runs; nothing else may.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"

_VOLATILE = [
    (re.compile(r"(127\.\d+\.\d+\.\d+):\d+"), r"\1:PORT"),  # random ports
    (re.compile(r"\b\d+\.\d+s\b"), "N.NNs"),  # elapsed seconds
    (re.compile(r"\bat \d\d:\d\d:\d\d UTC"), "at HH:MM:SS UTC"),  # wall clock
    (re.compile(r'"[0-9a-f]{8}-[0-9a-f]+"'), '"MTIME-SIZE"'),  # ETags from file mtimes
    (re.compile(r"-{3,}"), "---"),  # table rules: as wide as the columns
]


def normalised(text: str) -> list[str]:
    """Lines with run-to-run noise replaced and runs of spaces collapsed; a table row's
    last column (milliseconds in the files table) is dropped."""
    out = []
    for line in text.splitlines():
        for pattern, repl in _VOLATILE:
            line = pattern.sub(repl, line)
        line = " ".join(line.split())
        line = re.sub(r"^((?:\S+ ){5,}.*?) \d+$", r"\1 MS", line)  # the "ms" column
        if line:
            out.append(line)
    return out


@pytest.mark.parametrize("name", ["investigate", "fleet"])
def test_normalising_keeps_what_matters(name: str) -> None:
    text = (EXAMPLES / f"{name}.txt").read_text(encoding="utf-8")
    assert normalised(text) != normalised(text.replace("mismatch", "consistent"))


def test_the_examples_are_recorded_from_the_code_as_it_is(tmp_path: Path) -> None:
    env = {**os.environ, "ARTIFACTCHECK_EXAMPLES_DIR": str(tmp_path)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    run = subprocess.run(
        ["sh", str(EXAMPLES / "record.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    for name in ("investigate", "fleet"):
        committed = normalised((EXAMPLES / f"{name}.txt").read_text(encoding="utf-8"))
        fresh = normalised((tmp_path / f"{name}.txt").read_text(encoding="utf-8"))
        diff = "\n".join(difflib.unified_diff(committed, fresh, "committed", "fresh", lineterm=""))
        assert committed == fresh, (
            f"docs/examples/{name}.txt is not what the code prints now; re-record it with "
            f"`sh docs/examples/record.sh`:\n{diff}"
        )
