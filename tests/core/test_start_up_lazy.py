"""What only some runs use is made when first used, not by every ``verify`` at start-up.

A one-instance ``verify`` is mostly start-up (docs/benchmarks.md, "verify's start-up"),
and a regular expression compiled at import is paid by every run. The patterns of the
Markdown and JUnit reports, of the readers whose digests are hex or base64 (and of
SRI values) and of stylesheets are compiled on first use; ``getpass`` is imported only
to ask for a key's passphrase. Each probe is a fresh interpreter that imports what
``verify`` imports with ``re.compile`` watched, so this pins *what* is made at import,
never a timing; then it uses each pattern once, which shows the probe sees a compile
and that the pattern still answers as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

#: Modules that compile nothing at import: each pattern of theirs waits for its use.
LAZY = (
    "artifactcheck.present.report",
    "artifactcheck.manifests.integrity",
    "artifactcheck.manifests.webpack_manifest",
    "artifactcheck.manifests.django",
    "artifactcheck.manifests.stylesheet",
)

PROBE = """
import json, re, sys

compiled = []
_compile = re.compile

def watched(pattern, flags=0):
    compiled.append(sys._getframe(1).f_globals.get("__name__"))
    return _compile(pattern, flags)

re.compile = watched

import artifactcheck.cli.main, artifactcheck.cli.options, artifactcheck.discover.static
import artifactcheck.release.wiring, artifactcheck.pipeline, artifactcheck.present.report

at_import = list(compiled)
modules = sorted(m for m, v in sys.modules.items() if v is not None)

from artifactcheck.manifests import DEFAULT_LIMITS, django, integrity, stylesheet
from artifactcheck.manifests import webpack_manifest
from artifactcheck.present import report

answers = {
    "md_cell": report.md_cell("a|b\\nc"),
    "classname": report._classname("artifactcheck", "1.4.2"),
    "is_hex": [integrity.is_hex("0a" * 16, 32), integrity.is_hex("0g" * 16, 32)],
    "sri": integrity.parse_sri("sha256-" + "A" * 43 + "=", DEFAULT_LIMITS),
    "entry_key": [webpack_manifest.is_entry_key("main.js"), webpack_manifest.is_entry_key("a.png")],
    "django": sorted(django.parse(
        {"paths": {"app.css": "app.0123456789ab.css"}, "version": "1.1"},
        limits=DEFAULT_LIMITS,
    ).files),
    "nesting": stylesheet.parse_stylesheet(b"a{b{c{}}}", "https://x/s.css").problem,
}
print(json.dumps({
    "at_import": at_import,
    "later": compiled[len(at_import):],
    "modules": modules,
    "answers": answers,
}))
"""


def _probe() -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    seen: dict[str, Any] = json.loads(out)
    return seen


def test_verify_imports_compile_none_of_the_patterns_of_other_runs() -> None:
    seen = _probe()
    assert seen["at_import"], "the probe watched re.compile while verify's modules loaded"
    assert [name for name in seen["at_import"] if name in LAZY] == []
    assert "getpass" not in seen["modules"]


def test_each_pattern_is_compiled_at_its_first_use_and_answers_as_before() -> None:
    seen = _probe()
    assert sorted(set(seen["later"]) & set(LAZY)) == sorted(LAZY)
    answers = seen["answers"]
    assert answers["md_cell"] == "a\\|b c"
    assert answers["classname"] == "artifactcheck.1_4_2"
    assert answers["is_hex"] == [True, False]
    assert answers["sri"] == {"sha256": "0" * 64}
    assert answers["entry_key"] == [True, False]
    assert answers["django"] == ["app.0123456789ab.css"]
    assert answers["nesting"] is None  # three levels: under the cap, read as usual


CONTROLLER_PROBE = """
import json, sys
import artifactcheck.control.controller
before = sorted(m for m in sys.modules if m.startswith("kubernetes.client.api."))
from artifactcheck.clients import kube
from artifactcheck.clients.kube import CustomObjectsApi
print(json.dumps([before, kube.CoreV1Api.__name__, CustomObjectsApi.__name__]))
"""


def test_the_controllers_start_imports_no_api_class_of_the_official_client() -> None:
    """The controller makes every request with ``clients.kube_http``; the official
    client's API classes (the core API's module alone, with the models it names, is
    most of that library's import) are imported when a command first asks for one."""
    out = subprocess.run(
        [sys.executable, "-c", CONTROLLER_PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    before, core, custom = json.loads(out)
    assert before == []
    assert (core, custom) == ("CoreV1Api", "CustomObjectsApi")
