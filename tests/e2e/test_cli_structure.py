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


def test_common_and_options_import_no_command_module() -> None:
    graph = grimp.build_graph("artifactcheck")
    for module in ("artifactcheck.cli.common", "artifactcheck.cli.options"):
        cli = {
            m
            for m in graph.find_modules_directly_imported_by(module)
            if m.startswith("artifactcheck.cli.")
        }
        assert cli == set(), (module, cli)
