"""The demo's explanation says what the exit code means and counts what the report counted.

"exit code 1 = a mismatch was found (0 consistent, 3 inconclusive)" read as counts of
instances; the explanation now names the one exit code of the run with its meaning, and
the per-verdict count is the report's own.
"""

from __future__ import annotations

import re

from rich.console import Console

from artifactcheck_sim.demo import run_demo


def test_the_explanation_means_what_it_says() -> None:
    console = Console(width=400, record=True, force_terminal=False)
    assert run_demo(instances=4, kubernetes=False, console=console) == 0
    text = " ".join(console.export_text().split())
    assert "(0 consistent, 3 inconclusive)" not in text
    assert "exit code 1: something served is wrong." in text
    assert "0 = every checked instance is consistent" in text
    assert "3 = inconclusive: an instance could not be judged" in text
    said = re.search(r"the report counted (\d+) instance\(s\): ([^.]+)\.", text)
    assert said is not None, text
    assert said.group(1) == "4" and said.group(2) == "3 cdn-missing, 1 mismatch"
    # the table's own summary line counts the same
    assert "4 instance(s): 3 cdn-missing, 1 mismatch;" in text
