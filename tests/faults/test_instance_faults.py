"""One misbehaving instance in an otherwise healthy fleet, under a policy armed to quarantine.

Every fleet here has four instances of release 1.4.2, one of which really drifted
(it serves 1.4.1's bytes), plus the faulty instance. The policy quarantines on the
first mismatch. Each test proves the same four things: the faulty instance gets the
verdict docs/architecture.md ("Behaving well under failure") promises (a fault is "could not
observe", never "observed
something wrong", unless the bytes every client gets really are wrong), only the
drifted instance is quarantined, the healthy ones stay consistent, and the check ends
with no task, socket or thread left behind and bounded memory.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from faults_support import (
    DRIFTED,
    HEALTHY,
    Recorder,
    check_faulty,
    dropping_namespace,
    fault_spec,
    planted_fleet,
)

from artifactcheck.model.values import FindingKind, Verdict
from artifactcheck_sim.web import (
    Flaky,
    GzipBomb,
    Hang,
    Reset,
    Site,
    Status,
    Trickle,
    Truncated,
    WebFleet,
    WrongLength,
)

BIG = "assets/big-table-D9ljaH91.js"  # 121 KB, the same name in both releases


@dataclass(frozen=True)
class Case:
    """One instance fault: how the site misbehaves and what the verdict must be."""

    key: str
    fault: str
    site: Callable[[Path, bytes], Site]
    verdict: Verdict
    error_kind: str | None
    expected: str
    related: tuple[str, ...] = ()
    quarantine: bool = False  # the bytes every client gets are wrong: a true mismatch
    #: Timeouts of this case: inflating to the cap under tracemalloc on a loaded machine
    #: can outlast the fast ones, and a timeout would hide the cap this case is about.
    http: Mapping[str, float] = field(default_factory=dict)


#: Room enough to inflate 4 MiB however busy the machine; the cap, not the clock, decides.
ROOMY_HTTP = {"read_timeout": 10.0, "request_timeout": 20.0, "instance_deadline": 30.0}


CASES = [
    Case(
        "instance-hang",
        "accepts the connection, never answers",
        lambda root, big: Site(fault=Hang()),
        Verdict.UNREACHABLE,
        "timeout",
        "unreachable (read timeout), retried once",
        (
            "tests/fetch/test_fetch_timeouts.py::test_hang_times_out_on_read",
            "tests/e2e/test_hostile.py::test_tarpit_and_trickle_end_within_deadline",
        ),
    ),
    Case(
        "instance-slowloris",
        "answers one byte every 0.3 s (slowloris)",
        lambda root, big: Site(fault=Trickle(b"x" * 64, interval=0.3)),
        Verdict.UNREACHABLE,
        "timeout",
        "unreachable (whole-request timeout, though bytes keep coming)",
        ("tests/fetch/test_fetch_timeouts.py::test_trickle_hits_the_whole_request_limit",),
    ),
    Case(
        "instance-reset",
        "TCP RST on every request",
        lambda root, big: Site(fault=Reset()),
        Verdict.UNREACHABLE,
        "connect",
        "unreachable (connection reset), retried once",
        ("tests/fetch/test_fetch_retry.py::test_connection_resets_are_retried",),
    ),
    Case(
        "instance-reset-mid-body",
        "TCP RST after 1,000 bytes of a 121 KB asset",
        lambda root, big: Site(root=root, overrides={BIG: Reset(after=1000, body=big)}),
        Verdict.INCONCLUSIVE,
        "truncated",
        "inconclusive (asset truncated), never mismatch",
    ),
    Case(
        "instance-500",
        "HTTP 500 on every path",
        lambda root, big: Site(fault=Status(500)),
        Verdict.INCONCLUSIVE,
        "status",
        "inconclusive (HTTP 500 after 2 attempts)",
        ("tests/fetch/test_fetch_retry.py::test_server_errors_after_the_last_attempt",),
    ),
    Case(
        "instance-503",
        "HTTP 503 with Retry-After: 3600 on every path",
        lambda root, big: Site(fault=Status(503, retry_after="3600")),
        Verdict.INCONCLUSIVE,
        "status",
        "inconclusive; Retry-After capped by retry.max_retry_after (0.2 s here)",
        ("tests/e2e/test_hostile.py::test_failing_fleet_gets_bounded_load",),
    ),
    Case(
        "instance-429",
        "HTTP 429 with Retry-After: 0 on every path",
        lambda root, big: Site(fault=Status(429, retry_after="0")),
        Verdict.INCONCLUSIVE,
        "status",
        "inconclusive (rate limited), never mismatch",
        ("tests/fetch/test_fetch_retry.py::test_retry_after_seconds_is_honoured",),
    ),
    Case(
        "instance-truncated",
        "promises 121 KB, sends 1,000 bytes, closes (FIN)",
        lambda root, big: Site(root=root, overrides={BIG: Truncated(big, sent=1000)}),
        Verdict.INCONCLUSIVE,
        "truncated",
        "inconclusive (body ended early), never a hash mismatch",
        ("tests/fetch/test_fetch_streaming.py::test_truncated_body",),
    ),
    Case(
        "instance-length-long",
        "Content-Length 1,000 bytes longer than the body, then silence",
        lambda root, big: Site(
            root=root, overrides={BIG: WrongLength(big, declared=len(big) + 1000)}
        ),
        Verdict.INCONCLUSIVE,
        "timeout",
        "inconclusive (read timeout on the missing bytes)",
        ("tests/fetch/test_fetch_timeouts.py::test_long_content_length_then_silence_times_out",),
    ),
    Case(
        "instance-length-short",
        "Content-Length 1,000 bytes shorter than the body",
        lambda root, big: Site(
            root=root, overrides={BIG: WrongLength(big, declared=len(big) - 1000)}
        ),
        Verdict.MISMATCH,
        None,
        "mismatch and quarantined: every HTTP client gets the short prefix, a true discrepancy",
        (
            "tests/fetch/test_fetch_streaming.py::test_short_content_length_yields_the_declared_prefix",
        ),
        quarantine=True,
    ),
    Case(
        "instance-gzip-bomb",
        "gzip bomb: 64 MiB of zeros (64 KB on the wire) for an asset, cap 4 MiB",
        lambda root, big: Site(root=root, overrides={BIG: GzipBomb(64 * 2**20)}),
        Verdict.INCONCLUSIVE,
        "too-large",
        "inconclusive (decoded body over the cap; inflation stopped at the cap)",
        (
            "tests/fetch/test_fetch_streaming.py::test_gzip_bomb_stops_at_the_cap_without_inflating_it",
        ),
        http=ROOMY_HTTP,
    ),
    Case(
        "instance-gzip-bomb-manifest",
        "gzip bomb served as the Vite manifest",
        lambda root, big: Site(
            root=root,
            overrides={
                ".vite/manifest.json": GzipBomb(64 * 2**20, content_type="application/json")
            },
        ),
        Verdict.MISMATCH,
        None,
        "mismatch and quarantined: the manifest every client gets is not the release's",
        ("tests/e2e/test_hostile.py::test_huge_manifest_is_refused_with_bounded_memory",),
        quarantine=True,
        http=ROOMY_HTTP,
    ),
]


def assert_fleet_judged(outcome, rec: Recorder, *faulty_quarantined: str) -> None:
    """The drifted instance is caught and quarantined; the healthy ones are left alone."""
    assert outcome.verdict(DRIFTED) is Verdict.MISMATCH
    for name in HEALTHY:
        assert outcome.verdict(name) is Verdict.CONSISTENT, name
    assert rec.quarantined == sorted([DRIFTED, *faulty_quarantined])
    rec.assert_clean()


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_instance_fault(
    case: Case, make_fleet, web: WebFleet, subnet: int, fault: Recorder
) -> None:
    fault.describe(
        case.key,
        group="instance",
        fault=case.fault,
        expected=case.expected,
        related=case.related,
    )
    fleet = planted_fleet(make_fleet)
    root = fleet.releases["1.4.2"]
    url = web.add(case.site(root, (root / BIG).read_bytes()), f"127.97.{subnet}.100")
    outcome, result = check_faulty(
        fault,
        fleet,
        url,
        drifted=[DRIFTED, "faulty"] if case.quarantine else [DRIFTED],
        http={"max_body_bytes": 4 * 2**20, **case.http},
        retry={"max_retry_after": 0.2},
    )
    assert result.verdict is case.verdict, result.reason
    obs = result.observation
    kinds = {obs.error_kind} | {f.error_kind for f in obs.assets.values()}
    if obs.manifest_fetch is not None:
        kinds.add(obs.manifest_fetch.error_kind)
    if case.error_kind is not None:
        assert case.error_kind in kinds, kinds
    assert_fleet_judged(outcome, fault, *(["faulty"] if case.quarantine else []))
    if case.key == "instance-gzip-bomb":
        assert fault.peak_mb is not None and fault.peak_mb < 16
        assert web.server(url).bytes_sent < 2**20  # ~64 KB compressed, read once per try


def test_retry_after_is_waited_for_then_the_instance_is_judged(
    make_fleet, web: WebFleet, subnet: int, fault: Recorder
) -> None:
    """A 429 with Retry-After: 1 is honoured (the client waits), then the check goes on."""
    fault.describe(
        "instance-429-retry-after",
        group="instance",
        fault="first request answered 429 with Retry-After: 1, then normal",
        expected="waits ~1 s as told, retries once, consistent",
        related=("tests/fetch/test_fetch_retry.py::test_retry_after_seconds_is_honoured",),
    )
    fleet = planted_fleet(make_fleet)
    root = fleet.releases["1.4.2"]
    site = Site(root=root, version="1.4.2", fault=Flaky(1, Status(429, retry_after="1")))
    url = web.add(site, f"127.97.{subnet}.100")
    started = time.monotonic()
    outcome, result = check_faulty(fault, fleet, url)
    waited = time.monotonic() - started
    fault.observed = f"{result.verdict.value} after waiting {waited:.1f}s"
    assert result.verdict is Verdict.CONSISTENT, result.reason
    assert waited >= 1.0
    assert outcome.last.retries >= 1
    assert_fleet_judged(outcome, fault)


def test_unreachable_behind_a_dropping_firewall(make_fleet, subnet: int, fault: Recorder) -> None:
    """A SYN that is never answered (network namespace, iptables DROP): connect timeout."""
    fault.describe(
        "instance-netns-drop",
        group="instance",
        fault="address in a network namespace whose iptables DROPs all TCP",
        expected="unreachable (connect timeout), within the instance deadline",
        related=(
            "tests/fetch/test_fetch_timeouts.py::test_connect_timeout_against_a_full_backlog",
        ),
    )
    fleet = planted_fleet(make_fleet)
    with dropping_namespace(subnet) as address:
        outcome, result = check_faulty(fault, fleet, f"http://{address}:8080/")
    assert result.verdict is Verdict.UNREACHABLE, result.reason
    assert result.observation.error_kind == "timeout"
    # the connect timeout ended it, not the instance deadline: no clock needed to tell
    assert "connect" in (result.observation.error or "")
    assert "instance_deadline" not in (result.observation.error or "")
    assert any(f.kind is FindingKind.UNREACHABLE for f in result.findings)
    assert_fleet_judged(outcome, fault)


# --------------------------------------------------------------------------- crashes


@dataclass(frozen=True)
class StackedCodings:
    """``Content-Encoding`` of 1,200 stacked ``gzip`` codings (a decoder-chain bomb)."""

    async def __call__(self, ex) -> None:
        headers = {"Content-Encoding": ", ".join(["gzip"] * 1200)}
        await ex.respond(200, gzip.compress(b"{}"), headers=headers)


def _crash_when(name: str, exc: BaseException) -> Callable[..., object]:
    """A stand-in for a pure step that raises ``exc`` for instance ``name`` only."""

    def wrap(real: Callable[..., object]) -> Callable[..., object]:
        def step(obs, *args, **kwargs):
            if obs.instance.name == name and obs.error is None:
                raise exc
            return real(obs, *args, **kwargs)

        return step

    return wrap


def _own_manifest_site(root: Path) -> Site:
    """The release, its manifest one byte longer: parsed on its own, not from the memo."""
    manifest = (root / ".vite" / "manifest.json").read_bytes() + b"\n"
    return Site(root=root, overrides={".vite/manifest.json": manifest})


def _assert_check_failed(result, text: str) -> None:
    assert result.verdict is Verdict.INCONCLUSIVE, result.reason
    failed = [f for f in result.findings if f.kind is FindingKind.CHECK_FAILED]
    assert failed and text in failed[0].message, result.findings
    assert text in result.reason


def test_hostile_codings_are_one_instances_inconclusive(
    make_fleet, web: WebFleet, subnet: int, fault: Recorder
) -> None:
    fault.describe(
        "instance-stacked-codings",
        group="instance",
        fault="Content-Encoding of 1,200 stacked gzip codings on the manifest and an asset",
        expected="that instance inconclusive; its siblings judged; no ExceptionGroup",
    )
    fleet = planted_fleet(make_fleet)
    root = fleet.releases["1.4.2"]
    site = Site(
        root=root, overrides={".vite/manifest.json": StackedCodings(), BIG: StackedCodings()}
    )
    url = web.add(site, f"127.97.{subnet}.100")
    outcome, result = check_faulty(fault, fleet, url)
    assert result.verdict is Verdict.INCONCLUSIVE, result.reason
    assert_fleet_judged(outcome, fault)


@pytest.mark.parametrize("stage", ["observe", "judge"])
def test_an_exception_in_one_instance_is_its_inconclusive(
    stage: str,
    make_fleet,
    web: WebFleet,
    subnet: int,
    fault: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever one instance's answers make the code raise stays that instance's."""
    fault.describe(
        f"instance-raises-in-{stage}",
        group="instance",
        fault=f"the {stage} step raises RecursionError for one instance",
        expected="that instance inconclusive with a check-failed finding naming the "
        "exception; siblings judged; exit code from the verdicts",
    )
    import artifactcheck.judge.compare as compare
    import artifactcheck.observe.served as observing

    fleet = planted_fleet(make_fleet)
    url = web.add(_own_manifest_site(fleet.releases["1.4.2"]), f"127.97.{subnet}.100")
    boom = RecursionError("maximum recursion depth exceeded in decoder chain")
    if stage == "observe":
        real_parse = observing.parse_manifest

        def parse(body, **kwargs):
            if str(kwargs.get("source", "")).startswith(url):
                raise boom
            return real_parse(body, **kwargs)

        monkeypatch.setattr(observing, "parse_manifest", parse)
    else:
        monkeypatch.setattr(
            compare, "judge_instance", _crash_when("faulty", boom)(compare.judge_instance)
        )
    outcome, result = check_faulty(fault, fleet, url)
    _assert_check_failed(result, "RecursionError: maximum recursion depth exceeded")
    assert_fleet_judged(outcome, fault)
    assert outcome.last.exit_code == 1  # the drifted sibling's mismatch


def test_verify_exit_code_is_the_verdicts_when_one_instance_raises(
    make_fleet, web: WebFleet, subnet: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    import artifactcheck.observe.served as observing
    from artifactcheck.cli.main import main

    fleet = make_fleet(2, version="1.4.2")
    url = web.add(_own_manifest_site(fleet.releases["1.4.2"]), f"127.97.{subnet}.100")
    real_parse = observing.parse_manifest

    def parse(body, **kwargs):
        if str(kwargs.get("source", "")).startswith(url):
            raise ValueError("hostile")
        return real_parse(body, **kwargs)

    monkeypatch.setattr(observing, "parse_manifest", parse)
    args = ["verify", "--release-manifest", fleet.release_template, "-o", "json"]
    for target in (*(i.url for i in fleet.instances), url):
        args += ["--target", f"{target}=1.4.2"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    doc = json.loads(result.stdout)
    assert result.exit_code == 3, result.stdout  # inconclusive: could not judge one
    verdicts = {r["instance"]: r["verdict"] for r in doc["results"]}
    assert verdicts.pop(url) == "inconclusive"
    assert set(verdicts.values()) == {"consistent"}
    fleet.drift(0, serves="1.4.1")
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 1, result.stdout  # a sibling's mismatch still counts


def test_cancellation_is_never_swallowed(make_fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only errors become a verdict: a cancelled check (SIGTERM, deadline) stays cancelled."""
    import asyncio

    from artifactcheck.discover.static import instances_from_targets
    from artifactcheck.fetch.fetcher import Fetcher
    from artifactcheck.observe.instance import Observer

    fleet = make_fleet(1)
    spec = fault_spec(fleet)

    async def cancelled(self, instance):
        raise asyncio.CancelledError

    monkeypatch.setattr(Observer, "_observe", cancelled)

    async def run() -> None:
        async with Fetcher(http=spec.http, retry=spec.retry) as fetcher:
            observer = Observer(spec=spec, fetcher=fetcher, expectations=None)
            await observer.observe(instances_from_targets(spec.targets)[0])

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run())
