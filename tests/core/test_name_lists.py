"""Every list of names that is still written twice is tied to the one it copies.

Some lists cannot be built from their source without breaking the layers or the
start-up time: the configuration's format names live in ``model/`` (below the
readers), the CLI's choices are written out so that ``--help`` loads no model, and the
docs are prose. Each is compared here with what it copies, so a format, a coding or a
flag added to one side and not the other fails one of these tests by name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import click
import pytest

from artifactcheck.cli.main import main
from artifactcheck.cli.options import FLAG_OF_FIELD
from artifactcheck.fetch.decoders import ACCEPTED_CODINGS
from artifactcheck.manifests import FORMAT_INFOS, FORMATS, WELL_KNOWN_PATHS, formats_for_name
from artifactcheck.manifests._format_doc import markdown_formats
from artifactcheck.model.settings import CheckSpec, Coding, ManifestFormatName

ROOT = Path(__file__).resolve().parents[2]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")

#: Pages a user reads for artifactcheck's own command line, and the flags in them that
#: belong to another tool (pytest, kubectl, kubeconform, kustomize, curl). The pages
#: not listed (benchmarks, scaling, http-stacks, releasing, verdict-api) document
#: the bench scripts' and other tools' flags.
USER_PAGES: dict[str, frozenset[str]] = {
    "README.md": frozenset({"--dist"}),
    "docs/architecture.md": frozenset(),
    "docs/ci.md": frozenset(),
    "docs/configuration.md": frozenset(),
    "docs/integrations.md": frozenset(),
    "docs/investigate.md": frozenset({"--schemafile"}),
    "docs/manifest-formats.md": frozenset(),
    "docs/monitoring.md": frozenset(),
    "docs/release-sources.md": frozenset(),
    "docs/release-trust.md": frozenset({"--clusterrole", "--group", "--if-none-match"}),
    "docs/reliability.md": frozenset(),
    "docs/report-json.md": frozenset(),
    "docs/runbook.md": frozenset({"--field-selector", "--previous", "--since"}),
    "docs/security.md": frozenset({"--load-restrictor"}),
}


def cli_options(command: click.Command = main, ctx: click.Context | None = None) -> set[str]:
    """Every option of the command tree, the lazily loaded commands included."""
    ctx = ctx or click.Context(command, info_name="artifactcheck")
    found: set[str] = set()
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            found.update(param.opts, param.secondary_opts)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            found |= cli_options(sub, click.Context(sub, parent=ctx, info_name=name))
    return found


def option_of(command_path: tuple[str, ...], flag: str) -> click.Option:
    """The option ``flag`` of the command at ``command_path`` (e.g. ``("verify",)``)."""
    ctx = click.Context(main, info_name="artifactcheck")
    command: click.Command = main
    for name in command_path:
        assert isinstance(command, click.Group)
        sub = command.get_command(ctx, name)
        assert sub is not None, name
        command, ctx = sub, click.Context(sub, parent=ctx, info_name=name)
    (option,) = [p for p in command.get_params(ctx) if flag in getattr(p, "opts", ())]
    assert isinstance(option, click.Option)
    return option


# ------------------------------------------------------------------ manifest formats


def test_the_configuration_offers_exactly_the_formats_the_readers_read() -> None:
    """``ManifestFormatName`` (model/, below the readers, so written out) is ``auto``
    and the readers' names, in their order: the CRD enum and docs/configuration.md
    are generated from it."""
    assert get_args(ManifestFormatName) == ("auto", *FORMATS)


def test_every_reader_describes_itself_once() -> None:
    infos = list(FORMAT_INFOS.values())
    assert [info.name for info in infos] == list(FORMATS)
    for name, reader in FORMATS.items():
        assert getattr(reader, "FORMAT", name) == name, reader
        assert callable(reader.looks_like) and callable(reader.parse), name
    orders = [info.order for info in infos]
    assert orders == sorted(set(orders)), "two readers share a place in the order"
    ranks = [rank for info in infos for rank in info.probes.values()]
    assert len(set(ranks)) == len(ranks), "two probe paths share a place in the probe order"
    assert len(set(WELL_KNOWN_PATHS)) == len(WELL_KNOWN_PATHS) == len(ranks)


@pytest.mark.parametrize("name", list(FORMAT_INFOS))
def test_each_probe_path_and_file_name_suggests_its_own_format(name: str) -> None:
    info = FORMAT_INFOS[name]
    assert info.file_names or info.name_pattern, f"{name}: no file name to recognise it by"
    for path in info.probes:
        assert path in WELL_KNOWN_PATHS
        assert name in formats_for_name(path), path
    for file_name in info.file_names:
        assert name in formats_for_name(f"https://site/x/{file_name}?v=1"), file_name


def test_the_formats_page_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "manifest-formats.md").read_text(encoding="utf-8")
    assert committed == markdown_formats(), (
        "docs/manifest-formats.md is stale: "
        "python -m artifactcheck.manifests._format_doc > docs/manifest-formats.md"
    )


def test_the_readme_names_every_format() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (formats,) = [p for p in readme.split("\n- ") if p.startswith("served manifests are read")]
    prose = " ".join(formats.split())
    missing = [info.title for info in FORMAT_INFOS.values() if info.title not in prose]
    assert missing == [], f"README's list of served manifest formats lacks {missing}"


# ------------------------------------------------------------------ content codings


def test_the_codings_one_may_compare_in_are_the_ones_decoded() -> None:
    """``http.compare_encodings`` (model/) offers exactly the codings fetch/decoders
    asks for by name, and ``--compare-encoding`` (written out: ``--help`` loads no
    model) offers the same."""
    assert set(get_args(Coding)) == ACCEPTED_CODINGS
    choice = option_of(("verify",), "--compare-encoding").type
    assert isinstance(choice, click.Choice)
    assert set(choice.choices) == ACCEPTED_CODINGS


# ------------------------------------------------------------------ flags


def test_every_flag_an_error_names_is_a_flag_of_a_field_that_exists() -> None:
    """FLAG_OF_FIELD names the flag in configuration errors: each flag exists, and
    each field path is a field of CheckSpec."""
    options = cli_options()
    assert {flag for flag in FLAG_OF_FIELD.values() if flag not in options} == set()
    for path in FLAG_OF_FIELD:
        model: type = CheckSpec
        for part in path.split("."):
            assert part in model.model_fields, path
            model = _model_of(model.model_fields[part].annotation)


def _model_of(annotation: object) -> type:
    """The model a field holds (``X``, ``X | None``), or ``object`` for a plain value."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
            return candidate
    return object


@pytest.mark.parametrize("page", list(USER_PAGES))
def test_every_flag_the_docs_name_is_an_option_of_the_command_line(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    named = set(FLAG.findall(text)) - USER_PAGES[page]
    assert sorted(named - cli_options()) == [], f"{page} names flags no command has"
