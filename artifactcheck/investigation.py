"""What ``investigate`` and ``fleet`` run: discover, check, fetch what else they show,
and build their views.

The same check as ``verify`` (same engine, same exit codes) over every file of every
instance, then what a report does not hold: the CDN's answers, the certificates, the
target pod's Events and, for ``--diff``, each mismatching file fetched again. The
fetching is :mod:`artifactcheck.observe.evidence`'s and the pure view building
:mod:`artifactcheck.present.oncall`'s; this module puts the pipeline, both and
the Kubernetes Events together, which only a layer above all of them may do. The
commands (:mod:`artifactcheck.cli.investigate`) parse options and present.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.values import Fetched, Instance, Manifest, Report
from artifactcheck.present.oncall import (
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

if TYPE_CHECKING:  # httpx, aiohttp and pydantic load when a command runs, not on import
    from artifactcheck.fetch.fetcher import Fetcher
    from artifactcheck.model.settings import CheckSpec
    from artifactcheck.release.guard import ReleaseTrust

__all__ = [
    "EventSource",
    "collect_fleet",
    "collect_investigation",
    "events_for",
    "release_source",
]

EventSource = Callable[[Instance, "CheckSpec"], Sequence[PodEvent]]

log = logging.getLogger("artifactcheck.cli.investigate")


# --------------------------------------------------------------------------- Events


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
    from artifactcheck.discover.kube_pods import list_pod_events

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


# --------------------------------------------------------------------------- the run


def release_source(spec: CheckSpec) -> str | None:
    """A description of where expected releases come from; None in consensus mode."""
    return spec.release.describe() if spec.release is not None else None


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
    """The certificate row of an endpoint (read without verifying, so expiry shows)."""
    from artifactcheck.observe.evidence import endpoint_certificate

    cert, error = await endpoint_certificate(url, spec, instance=role == "instance")
    return tls_view(role, url, cert, error=error, now=now)


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
    from artifactcheck.observe.evidence import expected_bytes, served_again

    served = await served_again(fetcher, url, plan.path, host_header=host_header)
    if not served.ok or served.body is None:
        why = served.error or f"HTTP {served.status}"
        return DiffView(plan.path, None, note=f"could not fetch the served bytes again: {why}")
    changed = ""
    if plan.served_sha256 and served.sha256 != plan.served_sha256:
        changed = "; the instance now serves other bytes than during the check"
    expected, used, tried = await expected_bytes(
        fetcher, plan.sources, plan.path, plan.expected_sha256, host_header=host_header
    )
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
    from artifactcheck.observe.evidence import recording_fetcher

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
    from artifactcheck.observe.evidence import recording_fetcher

    fetcher, _cdn_assets = recording_fetcher(spec)
    async with fetcher:
        report, _releases = await _check(
            spec, found, fetcher, kubeconfig=kubeconfig, context=context
        )
    return build_fleet(report, release_source=release_source(spec), now=now())
