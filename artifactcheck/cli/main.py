"""The command line: parse, build a CheckSpec, ``asyncio.run``, print, exit code.

This is the edge. Heavy libraries (httpx, aiohttp, kubernetes, docker) are imported
inside the commands that need them, so ``artifactcheck --help`` and ``manifest build``
start fast. Exit codes: 0 consistent, 1 mismatch found, 2 usage or configuration
error, 3 inconclusive.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import logging
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

import click

from artifactcheck.cli.collector import loaded
from artifactcheck.cli.common import (
    EXIT_INCONCLUSIVE,
    console,
    exit_on_error,
    fail,
    out_file_option,
    output_option,
    require_instances,
    run_quietly,
)
from artifactcheck.cli.options import (
    check_destinations,
    guard_repeats,
    previous_options,
    spec_from_options,
    target_options,
)
from artifactcheck.cli.release_trust import (
    manifest_sign,
    manifest_verify,
    pins,
    trust_from_options,
    trust_options,
)
from artifactcheck.model.errors import (
    ArtifactCheckError,
    ConfigError,
    DependencyError,
    ManifestError,
)
from artifactcheck.present.logs import JsonFormatter, PlainFormatter


def _setup_logging(verbose: int, json_logs: bool = False) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler(sys.stderr)
    # timestamped plain lines, like the controller's, unless JSON is asked for
    handler.setFormatter(JsonFormatter() if json_logs else PlainFormatter())
    root = logging.getLogger("artifactcheck")
    root.handlers[:] = [handler]
    root.setLevel(level)


class _LazyGroup(click.Group):
    """The CLI's group, with ``investigate`` and ``fleet`` imported only when asked for.

    Their view models (``artifactcheck.present.oncall``) are a quarter of the imports
    of every start-up, and ``verify`` (run by CI, gates and cron jobs) never needs them.
    Loaded, they get the same :func:`guard_repeats` as every other command.
    """

    LAZY = ("fleet", "investigate")  # commands of artifactcheck.cli.investigate

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            from artifactcheck.cli import investigate as module

            for name in self.LAZY:
                command = getattr(module, name)
                guard_repeats(command)
                self.add_command(command, name)
        return super().get_command(ctx, cmd_name)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: _print_version(ctx) if value else None,
    help="Show the version (and the commit it was built from) and exit.",
)
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
def main(verbose: int) -> None:
    """Verify that deployed instances serve the content their version says they do."""
    _setup_logging(verbose)
    _without_pydantic_plugins()
    if click.get_current_context().invoked_subcommand not in LOADS_ON_THE_WAY:
        loaded()


def _print_version(ctx: click.Context) -> None:
    """``--version``: the distribution's version and, when recorded, its commit."""
    from artifactcheck import version_line

    click.echo(version_line())
    ctx.exit()


def _without_pydantic_plugins() -> None:
    """No pydantic plugins for the CLI's own models, unless the environment asks for them.

    The first model pydantic builds imports its plugin loader, which imports
    ``importlib.metadata`` and reads the entry points of every installed distribution
    (the more packages an image holds, the longer; docs/benchmarks.md, `bench.startup`), for
    observability hooks no artifactcheck command uses.
    Unless ``PYDANTIC_DISABLE_PLUGINS`` is set (``""`` turns every plugin back on), it
    is set, and the loader is a stub that finds none; any other name asked of the stub
    loads the real loader (a pydantic that needs more than ``get_plugins``).
    """
    if os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__") != "__all__":
        return
    name = "pydantic.plugin._loader"
    if name in sys.modules:
        return
    stub = types.ModuleType(name, "No pydantic plugins (artifactcheck.cli.main).")

    def real(attr: str) -> Any:
        if attr.startswith("__"):  # the import system's own questions (__path__, ...)
            raise AttributeError(attr)
        sys.modules.pop(name, None)
        return getattr(importlib.import_module(name), attr)

    stub.get_plugins = tuple  # type: ignore[attr-defined]  # () : no plugins
    stub.__getattr__ = real  # type: ignore[method-assign]
    sys.modules[name] = stub


#: Commands that load most of their modules after parsing and say when they are
#: loaded (``run_quietly``); every other command's are in once its group has run.
LOADS_ON_THE_WAY = frozenset({"verify", "investigate"})

OUTPUT_KINDS = ("table", "json", "junit", "markdown", "html")


def _outputs(values: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """Parse ``--output`` values and check them before anything runs.

    Two formats on standard output would interleave into something no tool can read,
    and a file that cannot be written would only fail after the whole run; both are
    usage errors now, before any request.
    """
    outs: list[tuple[str, str | None]] = []
    for item in values or ("table",):
        kind, sep, dest = item.partition("=")
        if kind not in OUTPUT_KINDS:
            raise ConfigError(
                f"--output {item!r}: expected table, json, junit or markdown, each optionally "
                "=FILE, or html=FILE"
            )
        if kind == "html" and dest in ("", "-"):
            # a page of markup on a terminal helps nobody; a browser opens a file
            raise ConfigError(f"--output {item!r}: an HTML report goes to a file: html=FILE")
        if sep and not dest:
            raise ConfigError(f"--output {item!r}: give a file name after '=' (or '-')")
        outs.append((kind, None if dest in ("", "-") else dest))
    return check_destinations(outs)


def emit(report: Any, outputs: list[tuple[str, str | None]], *, verbose: bool = False) -> None:
    """Write the report in every requested format.

    When nothing goes to standard output (every format written to a file), a one-line
    summary goes to standard error, so a CI log still says what happened. A reader that
    went away (``verify ... | head``) changes nothing about the fleet, so it must not
    change the exit code either: click would turn the EPIPE into exit 1, which CI reads
    as "something served is wrong". The summary goes to standard error instead.
    """
    try:
        _emit(report, outputs, verbose=verbose)
    except BrokenPipeError:
        _drop_stdout()
        click.echo(f"artifactcheck: standard output closed; {summary_line(report)}", err=True)


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's last flush cannot fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def _emit(report: Any, outputs: list[tuple[str, str | None]], *, verbose: bool) -> None:
    # rich only for a table: a JSON, JUnit or Markdown report never loads it.
    from artifactcheck.present.report import (
        render_json,
        render_junit,
        render_markdown,
        render_table,
    )

    for kind, dest in outputs:
        if kind == "table" and dest is None:
            render_table(report, console(), verbose=verbose)
            continue
        if kind == "table":
            from rich.console import Console

            buffer = Console(
                file=io.StringIO(), width=200, color_system=None, highlight=False, soft_wrap=False
            )
            render_table(report, buffer, verbose=verbose)
            text = buffer.file.getvalue()  # type: ignore[attr-defined]
        elif kind == "json":
            pretty = dest is None and sys.stdout.isatty()
            text = render_json(report, pretty=pretty)
        elif kind == "markdown":
            text = render_markdown(report, verbose=verbose)
        elif kind == "html":
            from artifactcheck.present.html_report import render_html
            from artifactcheck.present.report import to_json

            text = render_html(to_json(report))
        else:
            text = render_junit(report)
        if dest is None:
            click.echo(text, nl=False)
            continue
        try:
            Path(dest).write_text(text, encoding="utf-8")
        except OSError as exc:
            fail(f"--output {dest}: cannot write: {exc.strerror or exc}")
    if all(dest is not None for _, dest in outputs):
        click.echo(f"artifactcheck: {summary_line(report)}", err=True)


def summary_line(report: Any) -> str:
    """``3 instances: 2 consistent, 1 mismatch; exit 1`` (verdicts present only)."""
    counts = {k: n for k, n in report.counts().items() if n}
    parts = ", ".join(f"{n} {k}" for k, n in counts.items()) or "nothing checked"
    total = len(report.results)
    return f"{total} instance{'s' if total != 1 else ''}: {parts}; exit {report.exit_code}"


@main.command()
@target_options
@previous_options
@trust_options
@click.option(
    "--sample-instances", type=int, metavar="N", help="Check N instances, not all of them."
)
@click.option(
    "--sample-assets", type=int, metavar="K", help="Fetch K assets per instance (entry pages too)."
)
@click.option("--seed", type=int, metavar="N", help="Random seed, to repeat a sample.")
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    metavar="N",
    help="Processes that observe the instances (default: one per core, up to 4, for 100 "
    "instances or more each; 1: this one only). Verdicts are the same.",
)
@click.option(
    "--on-mismatch",
    metavar="stop|pause|disconnect=NET",
    help="Containers: take a confirmed mismatch out of traffic (off by default).",
)
@click.option(
    "--confirmations",
    type=int,
    metavar="N",
    help="Consecutive mismatches before acting (default 2).",
)
@click.option(
    "--max-fraction",
    type=float,
    metavar="F",
    help="Largest fraction of a workload acted on (default 0.25).",
)
@click.option("--dry-run", is_flag=True, help="Decide and report actions, never perform them.")
@output_option(
    "table (default), json, junit or markdown, each to standard output or =FILE, and "
    "html=FILE (a page for a browser, always to a file); repeatable, at most one to "
    "standard output."
)
@click.option("--verbose-report", is_flag=True, help="Show every finding, info included.")
def verify(**opts: Any) -> None:
    """Check instances against the expected release, the CDN and each other.

    \b
    Exit codes:
      0  every checked instance is consistent
      1  something served is wrong: a mismatch, drift, signal-conflict, cdn-missing or
         cdn-mismatch verdict, most of the fleet disagrees with the expectation, a
         pinned release changed (--pins: release-changed), or a previous release's file
         is gone or different (--previous-version: skew-missing, skew-differs)
      2  usage or configuration error, found before any request is sent
      3  inconclusive: an instance could not be judged (unreachable, no expected
         release, invalid version, a release not signed by a --release-key) and
         nothing was wrong
    """
    try:
        outputs = _outputs(opts["outputs"])
        spec = spec_from_options(
            opts,
            {
                "sampling.instances": opts["sample_instances"],
                "sampling.assets_per_instance": opts["sample_assets"],
                "sampling.seed": opts["seed"],
                "policy.confirmations": opts["confirmations"],
                "policy.max_quarantine_fraction": opts["max_fraction"],
                "policy.dry_run": True if opts["dry_run"] else None,
                "previous_versions": list(opts["previous_versions"]) or None,
                "previous_on_instances": True if opts["previous_on_instances"] else None,
            },
        )
        require_instances(spec)
        trust = trust_from_options(opts, spec)
    except ConfigError as exc:
        fail(str(exc))
    report = _run_with_progress(
        spec,
        kubeconfig=opts["kubeconfig"],
        context=opts["kube_context"],
        processes=opts["processes"],
        trust=trust,
    )
    emit(report, outputs, verbose=opts["verbose_report"])
    sys.exit(report.exit_code)


def _run_with_progress(spec: Any, **kw: Any) -> Any:
    """The check, with a progress bar on a terminal; errors exit as :func:`exit_on_error`."""
    return exit_on_error(lambda: _run_check(spec, **kw))


def _run_check(spec: Any, **kw: Any) -> Any:
    from artifactcheck.pipeline import run_check

    if not sys.stderr.isatty():
        return run_quietly(run_check(spec, **kw))
    from rich.progress import Progress

    # Refreshed from the results themselves, at most ten times a second, not by rich's
    # refresh thread: a process with a thread running never forks observers
    # (artifactcheck.observe.processes), and a terminal must not make the check slower.
    shown = [0.0]

    def advance(_obs: Any) -> None:
        progress.advance(task)
        now = time.monotonic()
        if now - shown[0] >= 0.1:
            shown[0] = now
            progress.refresh()

    with Progress(console=console(stderr=True), transient=True, auto_refresh=False) as progress:
        task = progress.add_task("checking", total=None)
        return run_quietly(
            run_check(
                spec,
                on_discovered=lambda n: progress.update(task, total=n, refresh=True),
                on_result=advance,
                **kw,
            )
        )


@main.group()
def manifest() -> None:
    """Build, read and extract release manifests."""


@manifest.command("build")
@click.argument("dist", type=click.Path(file_okay=False))
@click.option("--version", "version", required=True, help="Release version to record.")
@out_file_option("Write here instead of standard output.")
def manifest_build(dist: str, version: str, out: str | None) -> None:
    """Hash every file of a build directory into a native release manifest.

    A precompressed sibling (x.css.gz, .br, .zst beside x.css, as Rails'
    assets:precompile writes them) is recorded as an encoding of its file.
    """
    from artifactcheck.manifests import native

    try:
        data = native.dump(native.build(dist, version=version))
    except ManifestError as exc:
        fail(str(exc))
    _write_bytes(data, out)


def _write_bytes(data: bytes, out: str | None) -> None:
    if out is None or out == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    target = Path(out)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        tmp.replace(target)  # atomic: a failed write never leaves a half manifest
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail(f"{out}: cannot write: {exc.strerror or exc}")


manifest.add_command(manifest_sign)
manifest.add_command(manifest_verify)


@manifest.command("show")
@click.argument("source")
@click.option("--format", "fmt", default="auto", show_default=True, help="Manifest format.")
@click.option("--json", "as_json", is_flag=True, help="Print the normalised manifest as JSON.")
def manifest_show(source: str, fmt: str, as_json: bool) -> None:
    """Print any manifest (file or URL) normalised: path, hashes, size, entry."""
    from artifactcheck.manifests import parse_manifest

    try:
        data, where = _read_source(source)
        m = parse_manifest(data, format=fmt, path_hint=where, source=where)
    except (ManifestError, ArtifactCheckError) as exc:
        fail(f"{source}: {exc}")
    if as_json:
        doc = {
            "format": m.format,
            "version": m.version,
            "source": m.source,
            "files": {
                p: {
                    "hashes": dict(e.hashes),
                    "size": e.size,
                    "entry": e.entry,
                    "logical": e.logical,
                }
                for p, e in m.files.items()
            },
            "rejected": [{"path": p, "reason": r} for p, r in m.rejected],
        }
        click.echo(json.dumps(doc, indent=2))
        return
    from rich.table import Table

    table = Table(
        title=f"{m.format} manifest, {len(m.files)} files"
        + (f", version {m.version}" if m.version else ""),
        title_justify="left",
    )
    table.add_column("path", overflow="fold")
    table.add_column("entry")
    table.add_column("size", justify="right")
    table.add_column("hashes", overflow="fold")
    for path, e in m.files.items():
        hashes = " ".join(f"{a}:{h[:16]}" for a, h in sorted(e.hashes.items()))
        table.add_row(
            path, "yes" if e.entry else "", "" if e.size is None else str(e.size), hashes or "-"
        )
    out = console()
    out.print(table)
    for path, reason in m.rejected:
        out.print(f"rejected {path!r}: {reason}")


def _read_source(source: str) -> tuple[bytes, str]:
    if source.startswith(("http://", "https://")):
        from artifactcheck.fetch.fetcher import Fetcher
        from artifactcheck.fetch.proxy import Proxies
        from artifactcheck.model.settings import HttpSettings, RetrySettings

        base, _, name = source.rpartition("/")

        async def get() -> Any:
            proxies = Proxies.from_environment()  # a release source: through the proxy
            async with Fetcher(http=HttpSettings(), retry=RetrySettings(), proxies=proxies) as f:
                return await f.get_document(base + "/", name, host_header="")

        got = asyncio.run(get())
        if got.error or not got.ok or got.body is None:
            raise ArtifactCheckError(got.error or f"HTTP {got.status}")
        return got.body, source
    try:
        return Path(source).read_bytes(), source
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}") from exc


@manifest.command("from-image")
@click.argument("image")
@click.option(
    "--path",
    "path",
    default="/usr/share/nginx/html",
    show_default=True,
    help="Site directory inside the image.",
)
@click.option("--version", "version", required=True, help="Release version to record.")
@out_file_option("Output file.")
def manifest_from_image(image: str, path: str, version: str, out: str | None) -> None:
    """Hash the files inside a container image into a native release manifest."""
    from artifactcheck.clients.docker import DockerEngine
    from artifactcheck.manifests import native

    try:
        engine = DockerEngine()
        try:
            m = engine.manifest_from_image(image, path=path, version=version)
        finally:
            engine.close()
        data = native.dump(m) if m.files else b""
    except ConfigError as exc:
        fail(str(exc))
    except (DependencyError, ManifestError) as exc:
        fail(str(exc), EXIT_INCONCLUSIVE)
    if not data:  # a wrong --path, almost always; an empty manifest vouches for nothing
        fail(f"{image}: no files under --path {path}; give the site directory in the image")
    _write_bytes(data, out)


@main.command()
@click.option(
    "--namespace-scope",
    default="cluster",
    show_default=True,
    metavar="NS|cluster",
    help="Watch ArtifactChecks in one namespace, or in all ('cluster').",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Kubeconfig (default: in-cluster, then ~/.kube/config).",
)
@click.option("--context", help="Kubeconfig context.")
@click.option("--identity", envvar="POD_NAME", help="Leader-election identity [env POD_NAME].")
@click.option(
    "--lease-namespace",
    envvar="POD_NAMESPACE",
    default=None,
    help="Namespace of the leader Lease [env POD_NAMESPACE; default: the service "
    "account's namespace].",
)
@click.option(
    "--lease-duration",
    type=float,
    default=15.0,
    show_default=True,
    help="Leader lease duration, seconds. The leader renews it every 2/15 of that (client-go's "
    "2 s of 15 s) and stops acting when it could not for 2/3.",
)
@click.option(
    "--metrics-port",
    type=int,
    default=8080,
    show_default=True,
    help="Port for /metrics only (0 = the health port, which then serves both).",
)
@click.option(
    "--health-port",
    type=int,
    default=8081,
    show_default=True,
    help="Port for /healthz and /readyz (and /metrics when --metrics-port is 0 or the same).",
)
@click.option("--bind", default="0.0.0.0", show_default=True, help="Address of the probe server.")
@click.option("--json-logs", is_flag=True, help="One JSON object per log line.")
@click.option(
    "--admin-config",
    type=click.Path(dir_okay=False),
    envvar="ARTIFACTCHECK_ADMIN_CONFIG",
    help="Cluster admin's YAML: named credentials and the namespaces granted each, the "
    "egress allow-list, per-namespace limits (see docs/security.md) "
    "[env ARTIFACTCHECK_ADMIN_CONFIG].",
)
@click.option(
    "--shard",
    envvar="ARTIFACTCHECK_SHARD",
    default="0",
    show_default=True,
    help="This replica's shard: a number, or 'auto' for the StatefulSet ordinal of "
    "--identity (docs/scaling.md) [env ARTIFACTCHECK_SHARD].",
)
@click.option(
    "--total-shards",
    type=int,
    envvar="ARTIFACTCHECK_TOTAL_SHARDS",
    default=1,
    show_default=True,
    help="How many shards split the ArtifactChecks; each has its own Lease "
    "[env ARTIFACTCHECK_TOTAL_SHARDS].",
)
@click.option(
    "--observe-processes",
    type=click.IntRange(min=0),
    envvar="ARTIFACTCHECK_OBSERVE_PROCESSES",
    default=0,
    show_default=True,
    help="Worker processes that observe a large cycle's pods (0: the controller "
    "observes them itself). Pays only where cores are free (docs/scaling.md) "
    "[env ARTIFACTCHECK_OBSERVE_PROCESSES].",
)
def controller(**opts: Any) -> None:
    """Run the in-cluster controller: watch ArtifactChecks, check pods, act safely."""
    import signal
    import socket

    from artifactcheck.clients import libc
    from artifactcheck.clients.kube import load_api_client
    from artifactcheck.control.controller import Controller, ControllerSettings
    from artifactcheck.control.controller_settings import renew_period_for
    from artifactcheck.control.shard import parse_shard

    # before any thread or worker: a long-running process's memory stays in few arenas
    libc.limit_malloc_arenas()
    pool = None
    if opts["observe_processes"] > 1:  # one worker is the controller itself, with pickling
        from artifactcheck.control.workers import ObservePool

        # started before any thread: the fork server's children inherit no held lock
        pool = ObservePool(opts["observe_processes"]).start()
    _setup_logging(1, json_logs=opts["json_logs"])
    scope = opts["namespace_scope"]
    identity = opts["identity"] or socket.gethostname()
    try:
        shard = parse_shard(opts["shard"], identity)
    except ConfigError as exc:
        fail(str(exc))
    settings = ControllerSettings(
        namespace=None if scope in ("cluster", "all", "") else scope,
        identity=identity,
        lease_namespace=opts["lease_namespace"],
        lease_duration=opts["lease_duration"],
        renew_period=renew_period_for(opts["lease_duration"]),
        admin_config=opts["admin_config"],
        shard=shard,
        total_shards=opts["total_shards"],
    )
    try:
        api = load_api_client(opts["kubeconfig"], opts["context"])
    except ConfigError as exc:
        fail(str(exc))
    except DependencyError as exc:
        fail(str(exc), EXIT_INCONCLUSIVE)
    try:
        ctl = Controller(api_client=api, settings=settings)
    except ConfigError as exc:  # an invalid --admin-config names its file and field
        fail(str(exc))
    ctl.workers = pool
    # Probes and metrics on separate ports, each serving only its own endpoints (the
    # metrics port is often reachable from further away than kubelet's probes).
    separate = opts["metrics_port"] and opts["metrics_port"] != opts["health_port"]
    servers = [ctl.serve_health(host=opts["bind"], port=opts["health_port"], metrics=not separate)]
    if separate:
        servers.append(ctl.serve_health(host=opts["bind"], port=opts["metrics_port"], probes=False))

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await ctl.run(stop)

    try:
        asyncio.run(run())
    finally:
        for server in servers:
            server.stop()
        if pool is not None:
            pool.close()


@main.command()
@click.option("--instances", default=6, show_default=True, help="Simulated instances.")
@click.option("--keep", is_flag=True, help="Keep the fleet running until Ctrl-C.")
@click.option(
    "--kubernetes/--no-kubernetes",
    default=True,
    show_default=True,
    help="Also run the controller against a simulated cluster.",
)
def demo(instances: int, keep: bool, kubernetes: bool) -> None:
    """Start a simulated fleet on loopback, check it, and explain what was found."""
    from artifactcheck.cli.simulator import run_demo

    sys.exit(run_demo(instances=instances, keep=keep, console=console(), kubernetes=kubernetes))


main.add_command(pins)
guard_repeats(main)  # no single-value option anywhere keeps only its last value

if __name__ == "__main__":  # pragma: no cover
    main()
