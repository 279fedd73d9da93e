"""What a real ``verify`` run imports: only what that run uses.

Start-up is most of a small CI check's wall time (one instance: imports and set-up
before the first request), so a plain-URL, plain-HTTP run with a JSON report must not
load what only other runs need: rich (tables and progress on a terminal), httpx's own
command line, ``cryptography.x509`` (certificates of https targets), the investigate
views, the Kubernetes and Docker SDKs, aiohttp (its transport is not the default), the
controller or the simulator. This pins *what* is imported, never a timing; each probe
is a real ``python -m artifactcheck verify`` against a real loopback fleet, and a
control run that does use rich shows the probe can see an import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Runs at interpreter exit, after ``sys.exit`` in the command: which modules were
#: loaded, and whether pydantic looked for plugins (its cache is filled when it did).
PROBE = """
import asyncio, atexit, gc, json, runpy, sys

DUMP = sys.argv[1]
GC = {"collections_before_run": 0, "gc_at_run": None}

def _collected(phase, info):
    if phase == "start" and GC["gc_at_run"] is None:
        GC["collections_before_run"] += 1

gc.callbacks.append(_collected)
_asyncio_run = asyncio.run

def _run(*args, **kwargs):
    if GC["gc_at_run"] is None:
        GC["gc_at_run"] = gc.isenabled()
        GC["young_at_run"] = gc.get_threshold()[0]
    return _asyncio_run(*args, **kwargs)

asyncio.run = _run

def _dump():
    modules = sorted(m for m, v in sys.modules.items() if v is not None)
    loader = sys.modules.get("pydantic.plugin._loader")
    with open(DUMP, "w") as fh:
        json.dump({
            "modules": modules,
            "plugins_scanned": getattr(loader, "_plugins", None) is not None,
            "gc_at_exit": gc.isenabled(),
            "frozen": gc.get_freeze_count(),
            **GC,
        }, fh)

atexit.register(_dump)
sys.argv = ["artifactcheck", *sys.argv[2:]]
runpy.run_module("artifactcheck", run_name="__main__")
"""

#: Never on a plain-URL, plain-HTTP run whose report is JSON.
UNUSED = (
    "rich",
    "pygments",
    "httpx._main",
    "cryptography.x509",
    "aiohttp",
    "httpx_aiohttp",
    "kubernetes",
    "docker",
    "artifactcheck.present.oncall",
    "artifactcheck.present.views",
    "artifactcheck.clients.kube",
    "artifactcheck.clients.docker",
    "artifactcheck.discover.kube_pods",
    "artifactcheck.discover.docker_containers",
    "artifactcheck.control",
    "artifactcheck.tenancy.admission",  # the admin configuration's models (controller)
    "artifactcheck_sim",
    "importlib.metadata",  # pydantic's plugin loader's, for entry points
    "xml.etree",  # a JUnit report's
    "artifactcheck.release.registry",  # only when a release image is named
    "artifactcheck.observe.processes",  # only when the run forks (pickle, the copies)
    "artifactcheck.observe.pool",  # the same: its workers and their streams
    "artifactcheck.investigation",  # investigate and fleet only
    "artifactcheck.observe.evidence",  # the same
    "artifactcheck.tenancy",  # a tenant's egress policy and credentials (controller)
    "email",  # the HTTP-date parser, only for a Retry-After date
)


def _run(tmp_path: Path, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    dump = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(dump), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    seen: dict[str, Any] = json.loads(dump.read_text())
    seen["stdout"] = proc.stdout
    return seen


def _python(probe: str) -> str:
    """What ``python -c probe`` prints (it must exit 0)."""
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout


def _verify_args(fleet: Any) -> list[str]:
    inst = fleet.instances[0]
    return [
        "verify",
        "--target",
        f"{inst.url}={inst.version}",
        "--release-manifest",
        fleet.release_template,
        "--deadline",
        "20",
    ]


def _loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_a_plain_verify_imports_only_what_it_uses(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    assert fleet.instances[0].url.startswith("http://")
    seen = _run(tmp_path, [*_verify_args(fleet), "--output", "json"])
    report = json.loads(seen["stdout"])
    assert report["counts"]["consistent"] == 1  # a real check ran: every file fetched
    assert len(report["results"][0]["assets"]) >= 6
    loaded = [name for name in UNUSED if _loaded(seen["modules"], name)]
    assert loaded == []
    assert seen["plugins_scanned"] is False


def test_the_collector_is_held_back_while_loading_and_on_for_the_run(
    make_fleet, tmp_path: Path
) -> None:
    """No collection while the command's modules load (cli/collector.py); before the check
    runs they are frozen out of later collections and the collector is back on, so a
    long run (or a controller) collects as usual."""
    fleet = make_fleet(1)
    seen = _run(tmp_path, [*_verify_args(fleet), "--output", "json"])
    assert json.loads(seen["stdout"])["counts"]["consistent"] == 1
    assert seen["collections_before_run"] == 0
    assert seen["gc_at_run"] is True
    assert seen["young_at_run"] == 10_000  # as the controller's (cli/collector.py)
    assert seen["frozen"] > 10_000  # the modules, classes and validators loaded
    assert seen["gc_at_exit"] is True


def test_a_command_that_loads_before_its_work_collects_during_it(tmp_path: Path) -> None:
    """Commands other than verify and investigate (the controller among them, whose
    worker processes fork from it) have the collector back once the group has run."""
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<!doctype html>")
    out = tmp_path / "release.json"
    seen = _run(tmp_path, ["manifest", "build", str(dist), "--version", "1.0.0", "-o", str(out)])
    assert json.loads(out.read_text())["version"] == "1.0.0"
    assert seen["gc_at_exit"] is True and seen["frozen"] > 0


def test_the_collector_is_left_alone_when_the_cli_is_called_from_another_program() -> None:
    """Only the console script's own hold is lifted: a program that turned its
    collector off and calls the CLI's code keeps it off."""
    probe = (
        "import gc\n"
        "from artifactcheck.cli.collector import loaded\n"
        "gc.disable()\n"
        "loaded()\n"
        "print(gc.isenabled(), gc.get_freeze_count())\n"
    )
    assert _python(probe).split() == ["False", "0"]


def test_a_table_report_loads_rich_and_the_probe_sees_it(make_fleet, tmp_path: Path) -> None:
    """The control: the same probe, a run that does show a table (to a file)."""
    fleet = make_fleet(1)
    table = tmp_path / "report.txt"
    seen = _run(tmp_path, [*_verify_args(fleet), "--output", f"table={table}"])
    assert "consistent" in table.read_text()
    assert _loaded(seen["modules"], "rich")
    assert not _loaded(seen["modules"], "cryptography.x509")


def test_pydantic_plugins_load_when_the_environment_asks(make_fleet, tmp_path: Path) -> None:
    """An explicit ``PYDANTIC_DISABLE_PLUGINS`` is the user's: ``""`` turns plugins on."""
    fleet = make_fleet(1)
    seen = _run(
        tmp_path,
        [*_verify_args(fleet), "--output", "json"],
        env={"PYDANTIC_DISABLE_PLUGINS": ""},
    )
    assert json.loads(seen["stdout"])["counts"]["consistent"] == 1
    assert seen["plugins_scanned"] is True
    assert _loaded(seen["modules"], "importlib.metadata")


def test_the_plugin_loader_stub_hands_other_names_to_the_real_loader() -> None:
    """A pydantic that asks its loader for more than ``get_plugins`` gets the real one."""
    probe = (
        "import os, sys\n"
        "os.environ.pop('PYDANTIC_DISABLE_PLUGINS', None)\n"
        "from artifactcheck.cli.main import _without_pydantic_plugins\n"
        "_without_pydantic_plugins()\n"
        "stub = sys.modules['pydantic.plugin._loader']\n"
        "print(stub.get_plugins(), 'importlib.metadata' in sys.modules)\n"
        "from pydantic.plugin._loader import PYDANTIC_ENTRY_POINT_GROUP\n"
        "print(PYDANTIC_ENTRY_POINT_GROUP, sys.modules['pydantic.plugin._loader'] is stub)\n"
        "from pydantic import BaseModel\n"
        "class M(BaseModel):\n"
        "    x: int\n"
        "print(M(x=1).x)\n"
    )
    assert _python(probe).split("\n")[:3] == ["() False", "pydantic False", "1"]


#: httpx's stack: our own transport runs without any of it (fetch/routes.py,
#: fetch/error_kinds.py's lean tree), also through a proxy.
HTTPX_STACK = ("httpx", "httpcore", "h11", "anyio", "idna", "certifi", "sniffio")
#: ... nor the standard library's HTTP client (fetch/proxy.py reads the variables).
STDLIB_CLIENT = ("urllib.request", "http.client")

FETCH_PROBE = """
import asyncio, json, sys
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.model.settings import HttpSettings, RetrySettings

async def main(base):
    proxies = Proxies.from_environment()  # as the CLI reads them
    async with Fetcher(http=HttpSettings(), retry=RetrySettings(), proxies=proxies) as fetcher:
        page = await fetcher.get_document(base, "index.html")
        gone = await fetcher.get_asset(base, "no-such-file.js")
        again = await fetcher.get_document(base, "index.html")
    return [page.status, gone.status, again.status, page.error, gone.error]

got = asyncio.run(main(sys.argv[1]))
loaded = sorted(m for m, v in sys.modules.items() if v is not None)
print(json.dumps({"got": got, "modules": loaded}))
"""


def test_fetching_over_our_own_transport_never_imports_httpx(make_fleet) -> None:
    fleet = make_fleet(1)
    proc = subprocess.run(
        [sys.executable, "-c", FETCH_PROBE, fleet.instances[0].url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(proc.stdout)
    assert seen["got"] == [200, 404, 200, None, None]  # real requests, a kept connection
    unused = (*HTTPX_STACK, *STDLIB_CLIENT)
    assert [name for name in unused if _loaded(seen["modules"], name)] == []


def test_a_plain_verify_imports_no_httpx(make_fleet, tmp_path: Path) -> None:
    fleet = make_fleet(1)
    seen = _run(tmp_path, [*_verify_args(fleet), "--output", "json"])
    assert json.loads(seen["stdout"])["counts"]["consistent"] == 1
    assert [name for name in HTTPX_STACK if _loaded(seen["modules"], name)] == []


def test_a_verify_from_a_spec_file_builds_no_admin_models(make_fleet, tmp_path: Path) -> None:
    """A ``--config`` file's keys (camelCase here) become field names by reading the
    settings models alone (model/spelling.py), never the admin configuration's."""
    fleet = make_fleet(1)
    inst = fleet.instances[0]
    spec = tmp_path / "spec.json"  # JSON is YAML: the same reader
    spec.write_text(
        json.dumps(
            {
                "targets": [{"url": inst.url, "version": inst.version}],
                "release": {"manifests": [fleet.release_template]},
                "http": {"instanceDeadline": 20},
            }
        )
    )
    seen = _run(tmp_path, ["verify", "--config", str(spec), "--output", "json"])
    assert json.loads(seen["stdout"])["counts"]["consistent"] == 1
    loaded = [name for name in UNUSED if _loaded(seen["modules"], name)]
    assert loaded == []
