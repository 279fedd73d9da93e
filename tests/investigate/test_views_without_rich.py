"""``investigate``/``fleet --output json`` never load rich: only drawing a table does.

rich is the largest import of the on-call views and a JSON document has no use for it
(the verify report keeps the same rule, tests/e2e/test_verify_start_up.py). Pinned by
what a fresh interpreter has imported, never by a timing; the control half draws a
table and shows the probe can see the import.
"""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from datetime import UTC, datetime
from artifactcheck.present.oncall import FleetView
from artifactcheck.present.views import dumps, fleet_json, render_fleet

view = FleetView(noun="instances", total=0, groups=(), headlines=(), counts={}, notes=(),
                 generated_at=datetime(2024, 5, 1, tzinfo=UTC), elapsed=0.0, requests=0,
                 exit_code=0, desired_version=None, cdn=None, release_source=None)
dumps(fleet_json(view))
print("rich" in sys.modules, "artifactcheck.present.view_tables" in sys.modules)
if sys.argv[1:] == ["table"]:
    from rich.console import Console
    render_fleet(view, Console(file=open("/dev/null", "w")))
    print("artifactcheck.present.view_tables" in sys.modules)
"""


def probe(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_a_json_document_does_not_load_rich() -> None:
    assert probe() == ["False", "False"]


def test_drawing_a_table_loads_the_table_module() -> None:
    assert probe("table") == ["False", "False", "True"]
