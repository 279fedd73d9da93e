"""What every command shares: exit codes, the error line, the console, running a check.

``verify``, ``investigate``, ``fleet`` and the ``manifest`` commands promise the same
exit codes and the same ``artifactcheck: error: ...`` line, so both live here, below
every command module, and no command module needs another.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

import click

from artifactcheck.cli.collector import loaded
from artifactcheck.model.errors import ArtifactCheckError, ConfigError

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3

T = TypeVar("T")


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``artifactcheck: error: MESSAGE`` on standard error and exit with ``code``."""
    click.echo(f"artifactcheck: error: {message}", err=True)
    sys.exit(code)


def console(*, stderr: bool = False) -> Any:
    """A rich Console for tables and progress (rich loads only when something is shown).

    rich answers a closed pipe with ``SystemExit(1)``, which CI reads as "something
    served is wrong"; this one hands the BrokenPipeError to the caller, who knows the
    verdict's exit code (:func:`artifactcheck.cli.main.emit`).
    """
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError("standard output closed")

    return _Console(stderr=stderr, highlight=False, soft_wrap=False)


def run_quietly(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` that hands back the result without the main task holding it.

    Python 3.11's ``asyncio.run`` builds the ``repr()`` of the main task's result
    while restoring the SIGINT handler; for a fleet's Report that is a large share of the
    run's time and memory (docs/benchmarks.md). Keeping the result out of the task avoids it.
    """
    loaded()  # the command's modules are in: the collector back on (cli/collector.py)
    box: list[T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]


def exit_on_error(action: Callable[[], T]) -> T:
    """Run ``action``; a configuration error exits 2, any other failure to judge exits 3.

    A dependency that is down (the API server, the Docker engine) or a release that
    cannot be read means nothing could be judged: inconclusive, never a mismatch. So
    does a bug: an uncaught exception would exit 1, which CI reads as "something served
    is wrong"; it exits 3, with the traceback logged.
    """
    try:
        return action()
    except ConfigError as exc:
        fail(str(exc))
    except ArtifactCheckError as exc:  # DependencyError and the rest
        fail(str(exc), EXIT_INCONCLUSIVE)
    except Exception as exc:  # noqa: BLE001 - a bug is never a verdict
        logging.getLogger("artifactcheck").exception("internal error")
        fail(
            f"internal error, nothing judged: {type(exc).__name__}: {exc} (a bug; "
            "the traceback is above)",
            EXIT_INCONCLUSIVE,
        )


def run_or_exit(coro: Coroutine[Any, Any, T]) -> T:
    """:func:`run_quietly` with :func:`exit_on_error`'s exit codes."""
    return exit_on_error(lambda: run_quietly(coro))


def output_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``-o/--output FORMAT[=FILE]``, repeatable; each command says which formats it has."""
    return click.option(
        "-o",
        "--output",
        "outputs",
        multiple=True,
        metavar="FORMAT[=FILE]",
        help=help_text,
    )


def out_file_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``-o/--output FILE`` (into ``out``): the one file a manifest or envelope command
    writes; each command says what happens without it."""
    return click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help=help_text)


def require_instances(spec: Any) -> None:
    """Refuse a spec that selects no instance at all (``verify`` and ``fleet``)."""
    if not spec.targets and spec.docker is None and spec.kubernetes is None:
        raise ConfigError("nothing to check: give --target, --docker-label, --selector or a config")
