"""The command-line package reads top down: main > investigate > options, common.

A cycle between two command modules, even one hidden in a function-level import, means
neither can be read (or imported) on its own; what they share lives in
``artifactcheck.cli.common``. grimp sees function-level imports too.
"""

from __future__ import annotations

import grimp


def test_no_module_of_the_cli_package_reaches_back_to_itself() -> None:
    graph = grimp.build_graph("artifactcheck")
    modules = sorted(m for m in graph.modules if m.startswith("artifactcheck.cli."))
    assert "artifactcheck.cli.common" in modules
    for module in modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith("artifactcheck.cli."):
                back = graph.find_shortest_chain(importer=imported, imported=module)
                assert back is None, f"{module} -> {imported} -> ... -> {module}: {back}"


#: CLI modules that import nothing of artifactcheck: any CLI module may use them.
LEAVES = frozenset({"artifactcheck.cli.collector"})


def test_common_and_options_import_no_command_module() -> None:
    graph = grimp.build_graph("artifactcheck")
    for module in ("artifactcheck.cli.common", "artifactcheck.cli.options"):
        cli = {
            m
            for m in graph.find_modules_directly_imported_by(module)
            if m.startswith("artifactcheck.cli.")
        }
        assert cli <= LEAVES, (module, cli)
    for leaf in LEAVES:  # a leaf imports nothing of the package, so it is below everything
        ours = {
            m
            for m in graph.find_modules_directly_imported_by(leaf)
            if m.startswith("artifactcheck")
        }
        assert ours == set(), (leaf, ours)


def test_verify_starts_without_the_modules_it_does_not_use() -> None:
    """Start-up is part of every CI run: ``verify --output json`` imports neither rich
    (tables, progress: loaded when shown) nor httpx's own command line (rich and
    pygments: 90-150 ms), nor the investigate views."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import artifactcheck.cli.main, artifactcheck.pipeline, artifactcheck.release.registry\n"
        "import httpx\n"
        "unused = ('rich', 'pygments', 'httpx._main', 'artifactcheck.present.oncall')\n"
        "print(sorted(m for m in unused if sys.modules.get(m) is not None))\n"
        "print(callable(httpx.main))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "True"  # httpx's stub, as without its CLI extra
