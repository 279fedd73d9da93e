"""``artifactcheck investigate TARGET`` and ``artifactcheck fleet``: the on-call commands.

In the outage behind artifactcheck the truth came from running curl against new
instances by hand, 80 minutes in. These two commands are that curl, done right: the
same check as ``verify`` (same flags, same engine, same exit codes), but over every
file of every instance, and shown as a plain-language summary with every signal side
by side (``investigate``) or as the fleet grouped by what it actually serves
(``fleet``). The pure view building lives in :mod:`artifactcheck.present.investigate`, the
rendering in :mod:`artifactcheck.present.views`; this module does the I/O: discovery,
the check, certificate probes and the second fetch that ``--diff`` needs.

Registered on the main group by :mod:`artifactcheck.cli.main`; what both share (exit
codes, the error line, running a check) is in :mod:`artifactcheck.cli.common`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

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
from artifactcheck.model.values import Fetched, Instance, Manifest, Report
from artifactcheck.present.investigate import (
    DiffPlan,
    DiffView,
    FleetView,
    Investigation,
    PodEvent,
    TlsView,
    build_fleet,
    build_investigation,
    diff_plans,
    find_target,
    text_diff,
    tls_view,
    unknown_target,
)

if TYPE_CHECKING:  # httpx, aiohttp and pydantic load in the commands, not for --help
    from artifactcheck.fetch.fetcher import Fetcher
    from artifactcheck.model.settings import CheckSpec
    from artifactcheck.release.guard import ReleaseTrust

#: Largest file fetched again for ``--diff``, bytes: the first lines are what is shown.
DIFF_MAX_BYTES = 2 * 1024 * 1024
EventSource = Callable[[Instance, "CheckSpec"], Sequence[PodEvent]]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- hooks


def events_for(
    instance: Instance,
    spec: CheckSpec | None = None,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> list[PodEvent]:
    """Recent Kubernetes Events of a pod, newest first.

    [] when no cluster is configured or the instance is not a pod; an API error gives
    [] and a logged warning: Events are evidence, never a reason for the
    investigation to fail.
    """
    if instance.kind != "pod" or spec is None or spec.kubernetes is None:
        return []
    from artifactcheck.clients.kube import load_api_client
    from artifactcheck.control.status import list_pod_events

    namespace, _, name = instance.name.rpartition("/")
    try:
        api = load_api_client(kubeconfig, context)
        try:
            raw = list_pod_events(api, namespace=namespace or "default", name=name)
        finally:
            api.close()  # type: ignore[no-untyped-call]
    except ArtifactCheckError as exc:
        log.warning("could not read Events of %s: %s", name, exc)
        return []
    out = []
    for e in raw:
        when = e.get("lastTimestamp") or e.get("eventTime")
        try:
            last = datetime.fromisoformat(str(when).replace("Z", "+00:00")) if when else None
        except ValueError:
            last = None
        out.append(
            PodEvent(
                type=str(e.get("type") or ""),
                reason=str(e.get("reason") or ""),
                message=str(e.get("message") or ""),
                count=int(e.get("count") or 1),
                last_seen=last,
            )
        )
    return out


# --------------------------------------------------------------------------- I/O


def recording_fetcher(spec: CheckSpec) -> tuple[Fetcher, dict[str, Fetched]]:
    """A Fetcher for the check, and the dict where it keeps what the CDN answered.

    A Report carries the CDN's verdicts but not its answers (status, sha256, headers),
    and the per-asset table shows them; recording them as they are fetched costs no
    second request and shows exactly what the judgement was based on.
    """
    from artifactcheck.fetch.fetcher import Fetcher

    cdn_assets: dict[str, Fetched] = {}

    def record(base_url: str, path: str, got: Fetched) -> None:
        if spec.cdn is not None and base_url == spec.cdn:
            cdn_assets[path] = got

    from artifactcheck.fetch.proxy import Proxies

    proxies = Proxies.from_environment()  # release sources and CDNs, as verify does
    fetcher = Fetcher(
        http=spec.http, retry=spec.retry, logger=log, on_asset=record, proxies=proxies
    )
    return fetcher, cdn_assets


def release_source(spec: CheckSpec) -> str | None:
    """A description of where expected releases come from; None in consensus mode."""
    if spec.release_manifest:
        return ", ".join(spec.release_manifest)
    if spec.release_image:
        return f"image {spec.release_image}:{spec.release_image_path}"
    return None


async def _check(
    spec: CheckSpec,
    instances: Sequence[Instance],
    fetcher: Fetcher,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    trust: ReleaseTrust | None = None,
) -> tuple[Report, dict[str, Manifest]]:
    """The same check as ``verify``; also returns the releases it loaded."""
    from artifactcheck.pipeline import check_once
    from artifactcheck.release.wiring import build_expectations

    # the kubeconfig the user named reaches release ConfigMaps too, not only the pods
    expectations = build_expectations(
        spec, fetcher, kubeconfig=kubeconfig, context=context, trust=trust
    )
    report, _decision = await check_once(
        spec,
        instances=instances,
        fetcher=fetcher,
        expectations=expectations,
        known_versions=spec.known_versions,
    )
    return report, (expectations.known() if expectations is not None else {})


async def _probe_tls(url: str, role: str, spec: CheckSpec, now: datetime) -> TlsView:
    """The certificate of an https endpoint, read without verifying so expiry shows."""
    if not url.startswith("https://"):
        return tls_view(role, url, None, now=now)
    from artifactcheck.fetch.tls import probe_certificate

    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        cert = await probe_certificate(
            host,
            parts.port or 443,
            server_name=spec.http.host_header if role == "instance" else None,
            ssl_context=None,
            timeout=spec.http.connect_timeout,
        )
    except ArtifactCheckError as exc:
        return tls_view(role, url, None, error=f"could not check: {exc}", now=now)
    return tls_view(role, url, cert, now=now)


async def _fetch_diffs(
    inv: Investigation,
    report: Report,
    fetcher: Fetcher,
    cdn_assets: Mapping[str, Fetched],
    *,
    host_header: str | None,
    max_lines: int,
) -> list[DiffView]:
    """Fetch served and expected bytes again for each mismatching text file, then diff.

    The check only kept hashes (bodies are hashed while streaming, never held), so the
    bytes are fetched once more: served from the target, expected from a sibling or
    the CDN that served the expected sha256 — verified again before it is used.
    """
    # each instance's release paths are under the prefix they were found at (layouts)
    prefixes = {
        r.instance.base_url: r.observation.layout.prefix for r in report.results if r.observation
    }

    def under(base: str) -> str:
        return base + prefixes.get(base, "")

    return [
        await _diff_one(
            replace(plan, sources=tuple((label, under(b)) for label, b in plan.sources)),
            under(inv.url),
            fetcher,
            host_header=host_header,
            max_lines=max_lines,
        )
        for plan in diff_plans(inv, report, cdn_assets)
    ]


async def _diff_one(
    plan: DiffPlan, url: str, fetcher: Fetcher, *, host_header: str | None, max_lines: int
) -> DiffView:
    """The diff of one file: the target's bytes now against verified expected bytes."""
    served = await fetcher.get_document(
        url, plan.path, max_bytes=DIFF_MAX_BYTES, host_header=host_header
    )
    if not served.ok or served.body is None:
        why = served.error or f"HTTP {served.status}"
        return DiffView(plan.path, None, note=f"could not fetch the served bytes again: {why}")
    changed = ""
    if plan.served_sha256 and served.sha256 != plan.served_sha256:
        changed = "; the instance now serves other bytes than during the check"
    expected, used, tried = await _expected_bytes(plan, fetcher, host_header=host_header)
    if expected is None or used is None:
        where = "; ".join(tried) if tried else "no sibling or CDN serves the expected sha256"
        return DiffView(
            plan.path,
            None,
            note=f"no source has the expected bytes ({plan.expected_sha256[:12]}): "
            f"{where}{changed}",
        )
    view = text_diff(plan.path, expected, served.body, expected_source=used, max_lines=max_lines)
    if changed:
        view = replace(view, note=((view.note or "") + changed).lstrip("; "))
    return view


async def _expected_bytes(
    plan: DiffPlan, fetcher: Fetcher, *, host_header: str | None
) -> tuple[bytes | None, str | None, list[str]]:
    """The expected bytes, the source that served them, and what each source tried gave."""
    tried: list[str] = []
    for label, base in plan.sources:
        host = host_header if not label.startswith("CDN") else ""  # "": the CDN's own
        got = await fetcher.get_document(
            base, plan.path, max_bytes=DIFF_MAX_BYTES, host_header=host
        )
        if got.ok and got.body is not None and got.sha256 == plan.expected_sha256:
            return got.body, label, tried
        tried.append(f"{label}: {got.error or got.sha256 or got.status}")
    return None, None, tried


def _full(spec: CheckSpec, *, assets: bool) -> CheckSpec:
    """The spec without instance sampling (and without asset sampling for investigate)."""
    from artifactcheck.model.settings import SamplingSettings

    sampling = (
        SamplingSettings.model_validate({})
        if assets
        else spec.sampling.model_copy(update={"instances": None})
    )
    return spec.model_copy(update={"sampling": sampling})


async def collect_investigation(
    spec: CheckSpec,
    target: str,
    *,
    instances: Sequence[Instance] | None = None,
    diff: bool = False,
    diff_lines: int = 40,
    events: EventSource | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    kubeconfig: str | None = None,
    context: str | None = None,
    trust: ReleaseTrust | None = None,
) -> Investigation:
    """Discover, check the target with its siblings over every file, and build the view.

    ``target`` is a URL (``URL[=VERSION]``; added as an instance when no discovered one
    has that URL), a name, ``namespace/pod``, a pod or container name. ConfigError when
    it names nothing; DependencyError when discovery's API is down.
    """
    spec = _full(spec, assets=True)
    found = await _instances(spec, instances, kubeconfig=kubeconfig, context=context)
    chosen = _choose(target, found)
    fetcher, cdn_assets = recording_fetcher(spec)
    async with fetcher:
        report, releases = await _check(
            spec, found, fetcher, kubeconfig=kubeconfig, context=context, trust=trust
        )
        stamp = now()
        tls = await _certificates(chosen, spec, stamp)
        pod_events, events_note = _pod_events(
            chosen, spec, events, kubeconfig=kubeconfig, context=context
        )
        inv = build_investigation(
            report,
            chosen.name,
            releases=releases,
            cdn_assets=cdn_assets,
            tls=tls,
            events=pod_events,
            events_note=events_note,
            condition_type=spec.policy.condition_type,
            release_source=release_source(spec),
            now=stamp,
        )
        if diff:
            diffs = await _fetch_diffs(
                inv,
                report,
                fetcher,
                cdn_assets,
                host_header=spec.http.host_header,
                max_lines=diff_lines,
            )
            inv = inv.with_diffs(diffs)
    return inv


async def _instances(
    spec: CheckSpec,
    given: Sequence[Instance] | None,
    *,
    kubeconfig: str | None,
    context: str | None,
) -> list[Instance]:
    """The instances given (tests, the demo), else those the spec discovers."""
    from artifactcheck.pipeline import discover_all

    if given is not None:
        return list(given)
    return await discover_all(spec, kubeconfig=kubeconfig, context=context)


def _choose(target: str, found: list[Instance]) -> Instance:
    """The instance ``target`` names; a URL naming none is added to ``found``."""
    from artifactcheck.discover.static import instances_from_targets, parse_target

    chosen = find_target(target.partition("=")[0] if "://" in target else target, found)
    if chosen is None:
        if "://" not in target:
            raise unknown_target(target, found)
        (chosen,) = instances_from_targets([parse_target(target)])
        found.append(chosen)
    return chosen


async def _certificates(chosen: Instance, spec: CheckSpec, stamp: datetime) -> list[TlsView]:
    """The certificates of the target and of the CDN, when there is one."""
    tls = [await _probe_tls(chosen.base_url, "instance", spec, stamp)]
    if spec.cdn:
        tls.append(await _probe_tls(spec.cdn, "CDN", spec, stamp))
    return tls


def _pod_events(
    chosen: Instance,
    spec: CheckSpec,
    events: EventSource | None,
    *,
    kubeconfig: str | None,
    context: str | None,
) -> tuple[Sequence[PodEvent], str | None]:
    """The target pod's Events, and a note when none could be read for lack of a cluster."""
    if chosen.kind != "pod":
        return (), None
    pod_events = (
        events(chosen, spec)
        if events is not None
        else events_for(chosen, spec, kubeconfig=kubeconfig, context=context)
    )
    if not pod_events and spec.kubernetes is None:
        return pod_events, "no cluster configured: Events not read"
    return pod_events, None


async def collect_fleet(
    spec: CheckSpec,
    *,
    instances: Sequence[Instance] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    kubeconfig: str | None = None,
    context: str | None = None,
) -> FleetView:
    """Discover, check every instance, and group them by what they serve."""
    spec = _full(spec, assets=False)
    found = await _instances(spec, instances, kubeconfig=kubeconfig, context=context)
    fetcher, _cdn_assets = recording_fetcher(spec)
    async with fetcher:
        report, _releases = await _check(
            spec, found, fetcher, kubeconfig=kubeconfig, context=context
        )
    return build_fleet(report, release_source=release_source(spec), now=now())


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

    from artifactcheck.present.views import fleet_renderable

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
