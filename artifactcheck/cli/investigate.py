"""``artifactcheck investigate TARGET`` and ``artifactcheck fleet``: the on-call commands.

In the outage behind artifactcheck the truth came from running curl against new
instances by hand, 80 minutes in. These two commands are that curl, done right: the
same check as ``verify`` (same flags, same engine, same exit codes), but over every
file of every instance, and shown as a plain-language summary with every signal side
by side (``investigate``) or as the fleet grouped by what it actually serves
(``fleet``). This module parses their options and presents: what they run (discovery,
the check, certificate probes, the second fetch that ``--diff`` needs) is
:mod:`artifactcheck.investigation`, the rendering
:mod:`artifactcheck.present.views`.

Registered on the main group by :mod:`artifactcheck.cli.main`; what both share (exit
codes, the error line, running a check) is in :mod:`artifactcheck.cli.common`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from artifactcheck.cli.common import (
    EXIT_INCONCLUSIVE,
    fail,
    output_option,
    require_instances,
    run_or_exit,
)
from artifactcheck.cli.options import (
    check_destinations,
    guard_repeats,
    spec_from_options,
    target_options,
)
from artifactcheck.cli.release_trust import trust_from_options, trust_options
from artifactcheck.model.errors import ArtifactCheckError, ConfigError

if TYPE_CHECKING:  # httpx, aiohttp and pydantic load in the commands, not for --help
    from artifactcheck.model.settings import CheckSpec
    from artifactcheck.present.oncall import FleetView, Investigation


# --------------------------------------------------------------------------- options


def parse_outputs(values: Sequence[str], *, html: bool = False) -> list[tuple[str, str | None]]:
    """``table``, ``json`` or ``json=FILE`` (junit has no meaning for one instance), and
    for ``fleet`` (``html=True``) ``html=FILE``."""
    outs: list[tuple[str, str | None]] = []
    kinds = ("table", "json", "html") if html else ("table", "json")
    for item in values or ("table",):
        kind, _, dest = item.partition("=")
        if kind not in kinds or (kind == "table" and dest):
            also = " or html=FILE" if html else ""
            raise ConfigError(f"--output {item!r}: expected table, json or json=FILE{also}")
        if kind == "html" and dest in ("", "-"):
            raise ConfigError(f"--output {item!r}: an HTML report goes to a file: html=FILE")
        outs.append((kind, None if dest in ("", "-") else dest))
    return check_destinations(outs)


def make_console(file: Any = None) -> Any:
    """Colour on a terminal; plain text, wide enough for hashes, when piped."""
    from rich.console import Console

    stream = file if file is not None else sys.stdout
    width = None
    if not (hasattr(stream, "isatty") and stream.isatty()) and "COLUMNS" not in os.environ:
        width = 150
    return Console(file=file, highlight=False, soft_wrap=False, width=width)


def _write(text: str, dest: str | None) -> None:
    """Write a document to stdout or a file, as verify's --output json=FILE does."""
    if dest in (None, "-"):
        click.echo(text, nl=False)
    else:
        Path(dest).write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------- commands


@click.command()
@click.argument("target")
@target_options
@trust_options
@output_option("table (default), json or json=FILE; repeatable.")
@click.option("--diff", is_flag=True, help="Unified diff of mismatching text files (JS/CSS/HTML).")
@click.option(
    "--diff-lines",
    type=click.IntRange(1, 10_000),
    default=40,
    show_default=True,
    help="Diff lines shown per file.",
)
def investigate(target: str, **opts: Any) -> None:
    """Explain one instance: summary first, then every signal side by side.

    TARGET is a URL[=VERSION], a pod name, namespace/pod, or a container name. Its
    siblings (every instance the other flags select) are checked with it, over all
    their files, so the summary can say how many do the same. Exit code: 0 the target
    is consistent, 1 it serves something wrong, 2 usage error, 3 could not judge.
    """
    from artifactcheck.investigation import collect_investigation
    from artifactcheck.present.views import dumps, investigation_json, render_investigation

    try:
        outputs = parse_outputs(opts["outputs"])
        spec = spec_from_options(opts)
        trust = trust_from_options(opts, spec)
    except ConfigError as exc:
        fail(str(exc))
    inv: Investigation = run_or_exit(
        collect_investigation(
            spec,
            target,
            trust=trust,
            diff=opts["diff"],
            diff_lines=opts["diff_lines"],
            kubeconfig=opts["kubeconfig"],
            context=opts["kube_context"],
        )
    )
    for kind, dest in outputs:
        if kind == "table":
            render_investigation(inv, make_console())
        else:
            _write(dumps(investigation_json(inv)), dest)
    sys.exit(inv.exit_code)


@click.command()
@target_options
@output_option(
    "table (default), json or json=FILE, html=FILE (a page for a browser, always to a "
    "file); repeatable."
)
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1),
    is_flag=False,
    flag_value=5.0,
    default=None,
    metavar="[SECONDS]",
    help="Refresh in place every SECONDS (default 5) until Ctrl-C.",
)
@click.option("--iterations", type=click.IntRange(min=1), default=None, hidden=True)
def fleet(**opts: Any) -> None:
    """Group instances by reported version, served content and image digest.

    The largest group comes first and groups that stand out among the instances of
    their version are marked with "!", so "2 of 14 pods of 1.4.2 serve different
    content" is the first thing you read. Exit codes as for verify (0/1/2/3).
    """
    try:
        outputs = parse_outputs(opts["outputs"], html=True)
        spec = spec_from_options(opts)
        require_instances(spec)
    except ConfigError as exc:
        fail(str(exc))
    if opts["watch"] is None:
        from artifactcheck.investigation import collect_fleet

        view: FleetView = run_or_exit(
            collect_fleet(spec, kubeconfig=opts["kubeconfig"], context=opts["kube_context"])
        )
        _emit_fleet(view, outputs)
        sys.exit(view.exit_code)
    code = _watch(spec, outputs, seconds=opts["watch"], iterations=opts["iterations"])
    sys.exit(code)


def _emit_fleet(
    view: FleetView,
    outputs: list[tuple[str, str | None]],
    *,
    compact: bool = False,
    console: Any = None,
) -> None:
    """The fleet view in every requested format."""
    from artifactcheck.present.views import dumps, fleet_json, render_fleet

    for kind, dest in outputs:
        if kind == "table":
            render_fleet(view, console or make_console())
        elif kind == "html":
            from artifactcheck.present.html_report import render_html
            from artifactcheck.present.report import to_json

            if view.report is not None:  # None: a view built by hand, no check behind it
                _write(render_html(to_json(view.report)), dest)
        else:
            _write(dumps(fleet_json(view), compact=compact), dest)


def _watch(
    spec: CheckSpec,
    outputs: list[tuple[str, str | None]],
    *,
    seconds: float,
    iterations: int | None,
    console: Any = None,
    collect: Callable[[CheckSpec], Awaitable[FleetView]] | None = None,
) -> int:
    """Re-check every ``seconds``; redraw in place on a terminal, append when piped.

    A refresh that fails (an API server blip) keeps the last view on screen with a
    note instead of ending the watch: a dependency outage must not blind on-call.
    """
    from rich.live import Live

    from artifactcheck.investigation import collect_fleet
    from artifactcheck.present.view_tables import fleet_renderable

    console = console or make_console()
    tables = any(kind == "table" for kind, _ in outputs)
    json_outputs = [(k, d) for k, d in outputs if k in ("json", "html")]  # rewritten each time
    state: dict[str, Any] = {"view": None}

    async def loop(live: Live | None) -> None:
        """Refresh until the iteration bound (or forever), one check per refresh."""
        n = 0
        while iterations is None or n < iterations:
            if n:
                await asyncio.sleep(seconds)
            n += 1
            try:
                view = await (collect or collect_fleet)(spec)
            except ArtifactCheckError as exc:
                if state["view"] is None:
                    raise
                stamp = datetime.now(UTC).strftime("%H:%M:%S")
                view = state["view"].with_note(f"refresh at {stamp} UTC failed: {exc}")
            state["view"] = view
            if json_outputs:
                _emit_fleet(view, json_outputs, compact=True)
            if tables and live is not None:
                live.update(fleet_renderable(view, console), refresh=True)
            elif tables:
                if n > 1:
                    console.print()
                console.print(fleet_renderable(view, console))

    try:
        if tables and console.is_terminal:
            with Live(console=console, auto_refresh=False, transient=False) as live:
                run_or_exit(loop(live))
        else:
            run_or_exit(loop(None))
    except KeyboardInterrupt:
        pass
    view = state["view"]
    return EXIT_INCONCLUSIVE if view is None else int(view.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def standalone() -> None:
    """investigate and fleet on their own: ``python -m artifactcheck.cli.investigate``.

    For scripts (docs/examples/record.sh) that must run before, or without, the
    registration of both commands on ``artifactcheck``'s main group.
    """


standalone.add_command(investigate)
standalone.add_command(fleet)
guard_repeats(standalone)  # run on its own, its options refuse repeats as artifactcheck's do

if __name__ == "__main__":  # pragma: no cover
    standalone()
