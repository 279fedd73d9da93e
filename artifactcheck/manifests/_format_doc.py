"""The manifest formats page (docs/manifest-formats.md), generated from the readers.

Generated rather than written so it lists exactly the formats the package reads, as
their readers describe them; a test compares the committed file with this output::

    python -m artifactcheck.manifests._format_doc > docs/manifest-formats.md
"""

from __future__ import annotations


def markdown_formats() -> str:
    """The page: one row per format in detection order, then the probe order.

    The registry is imported here, not at the top, so that this module can be run
    with ``-m`` (the package is initialised first, and it must not hold this module).
    """
    from artifactcheck.manifests import FORMAT_INFOS, WELL_KNOWN_PATHS

    lines = [
        "# Manifest formats",
        "",
        "Generated from the readers in `artifactcheck/manifests/` by `python -m "
        "artifactcheck.manifests._format_doc > docs/manifest-formats.md`: each reader "
        "module describes its format in `FORMAT_INFO`. `--manifest-format` (and "
        "`manifestFormat`) takes a name below, or `auto`: detected by shape, then by "
        "file name to break a tie.",
        "",
        "| name | written by | file names | paths are relative to | version |",
        "|---|---|---|---|---|",
    ]
    for info in FORMAT_INFOS.values():
        names = [f"`{name}`" for name in info.file_names]
        if info.name_pattern is not None:
            names.append(f"matching `{info.name_pattern}`".replace("|", "\\|"))
        lines.append(
            f"| `{info.name}` | {info.title} | {', '.join(names)} | {_md(info.root)} "
            f"| {_md(info.version) or 'none declared'} |"
        )
    lines += [
        "",
        "With no `--manifest-path`, an instance is asked for these paths under the "
        "prefix, in this order, until one answers a manifest:",
        "",
    ]
    lines += [f"{n}. `{path}`" for n, path in enumerate(WELL_KNOWN_PATHS, start=1)]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """reStructuredText literals (as the docstrings write them) as Markdown ones."""
    return text.replace("``", "`")


if __name__ == "__main__":  # pragma: no cover - exercised by the docs test's command
    print(markdown_formats(), end="")
