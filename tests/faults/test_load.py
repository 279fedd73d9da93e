"""Load without storms: a fully failing fleet, measured at the servers.

The outage in docs/architecture.md ("Why this exists") got worse because clients retried
linearly and forever:
the recovering back end saw 28x its normal requests and 3200x its normal new
connections. Here every instance of a fleet fails at once (503, TCP resets, accepted
and never answered) and the servers themselves count what one ``verify`` run sent:
requests, new connections, connections open at once in total and per server. The
bounds are the configured ones: requests within first attempts plus the retry budget
(hence within (1 + budget_ratio) x normal + budget_min), connections within
``http.max_connections`` and ``http.max_per_host``. The backoff delays of the one
retry loop are checked statistically for full jitter and exponential ceilings.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import defaultdict
from dataclasses import dataclass

import pytest
from faults_support import Recorder, run_async

from artifactcheck.fetch import Fetcher, RetryBudget
from artifactcheck.fetch.retry import backoff_delays
from artifactcheck.model.settings import HttpSettings, RetrySettings, load_spec
from artifactcheck.model.values import Verdict
from artifactcheck.pipeline import run_check
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.web import Handler, Hang, Reset, Site, Status, WebFleet

INSTANCES = 24
MAX_CONNECTIONS = 8
MAX_PER_HOST = 2
RETRY = {"attempts": 4, "base_delay": 0.01, "max_delay": 0.05, "budget_ratio": 0.2, "budget_min": 2}
HTTP = {
    "connect_timeout": 0.5,
    "read_timeout": 0.4,
    "request_timeout": 1.0,
    "instance_deadline": 5.0,
    "max_connections": MAX_CONNECTIONS,
    "max_per_host": MAX_PER_HOST,
}
FAULTS: dict[str, Handler] = {"503": Status(503), "reset": Reset(), "hang": Hang()}


def measure(web: WebFleet, urls: list[str], transport: str) -> dict[str, float]:
    """One verify run over ``urls``; what the servers saw, and what the client counted."""
    spec = load_spec(
        {
            "targets": [{"url": u, "version": "1.4.2"} for u in urls],
            "http": {**HTTP, "transport": transport},
            "retry": RETRY,
        }
    )
    web.reset_stats()
    report, leaked = run_async(run_check(spec))
    servers = [web.server(u) for u in urls]
    return {
        "requests": web.total_requests,
        "client_requests": report.requests,
        "retries": report.retries,
        "connections_opened": sum(s.connections_total for s in servers),
        "peak_connections": web.peak_connections,
        "peak_per_host": max(s.connections_peak for s in servers),
        "peak_in_flight": web.peak_in_flight,
        "peak_in_flight_per_host": max(s.peak_in_flight for s in servers),
        "leaked_tasks": leaked,
        "verdicts": sorted({r.verdict.value for r in report.results}),
    }


@pytest.fixture
def healthy(web: WebFleet, subnet: int) -> list[str]:
    """INSTANCES real Vite builds of 1.4.2 on 127.97.N.1..24."""
    build = RELEASES["1.4.2"]
    return web.add_many(
        [(Site(root=build, version="1.4.2"), f"127.97.{subnet}.{i + 1}") for i in range(INSTANCES)]
    )


@pytest.mark.parametrize("transport", ["auto"])
@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_fully_failing_fleet(
    kind: str, transport: str, web: WebFleet, healthy: list[str], fault: Recorder
) -> None:
    fault.describe(
        f"load-{kind}-{transport}",
        group="load",
        fault=f"all {INSTANCES} instances fail ({kind}); transport {transport}",
        expected=f"requests <= first attempts + {RETRY['budget_min']} + "
        f"{RETRY['budget_ratio']} x first attempts; in flight <= {MAX_CONNECTIONS} in "
        f"total, <= {MAX_PER_HOST} per host; open connections <= {MAX_PER_HOST} per host; "
        "nobody judged mismatch",
        related=(
            "tests/e2e/test_hostile.py::test_failing_fleet_gets_bounded_load",
            "tests/fetch/test_fetch_retry.py::test_retry_budget_caps_the_load_on_a_failing_fleet",
            "tests/fetch/test_fetch_limits.py::test_per_host_cap",
        ),
    )
    with fault.probe(memory="none"):
        normal = measure(web, healthy, transport)
        for url in healthy:
            web.server(url).site.fault = FAULTS[kind]
        failing = measure(web, healthy, transport)
    fault.leaked_tasks = int(normal["leaked_tasks"] + failing["leaked_tasks"])
    first_attempts = failing["client_requests"] - failing["retries"]
    allowance = RETRY["budget_min"] + RETRY["budget_ratio"] * first_attempts
    ratio = failing["requests"] / normal["requests"]
    fault.figures.update(
        {
            "normal": {k: v for k, v in normal.items() if k != "leaked_tasks"},
            "failing": {k: v for k, v in failing.items() if k != "leaked_tasks"},
            "first_attempts": first_attempts,
            "bound": first_attempts + allowance,
            "load_ratio": round(ratio, 2),
            "budget_bound_ratio": 1 + RETRY["budget_ratio"],
            "no_budget_worst_case": first_attempts * RETRY["attempts"],
        }
    )
    fault.verdicts = {"all": ", ".join(failing["verdicts"])}
    fault.false_quarantines = 0  # a verify run has no readiness gates to act on
    fault.observed = (
        f"{failing['requests']} requests (normal {normal['requests']}), "
        f"{failing['connections_opened']} new connections, peak {failing['peak_in_flight']} in "
        f"flight, {failing['peak_connections']} open ({failing['peak_per_host']} per host)"
    )
    # counted at the servers: exactly what the client believes it sent
    assert failing["requests"] == failing["client_requests"]
    assert normal["requests"] == normal["client_requests"]
    assert failing["requests"] <= first_attempts + allowance
    assert (
        failing["requests"]
        <= (1 + RETRY["budget_ratio"]) * normal["requests"] + RETRY["budget_min"]
    )
    for run in (normal, failing):
        # what the settings promise: requests in flight, in total and per host
        assert run["peak_in_flight"] <= MAX_CONNECTIONS, run
        assert run["peak_in_flight_per_host"] <= MAX_PER_HOST, run
        # connections open at once per server, idle kept-alive ones included
        assert run["peak_per_host"] <= MAX_PER_HOST, run
    # keep-alive: a healthy run opens no more connections than its concurrency needs
    assert normal["connections_opened"] <= INSTANCES * MAX_PER_HOST, normal
    assert failing["verdicts"] and "mismatch" not in failing["verdicts"]
    assert set(failing["verdicts"]) <= {Verdict.INCONCLUSIVE.value, Verdict.UNREACHABLE.value}
    fault.assert_clean()


def test_backoff_has_full_jitter_and_exponential_ceilings(
    web: WebFleet, subnet: int, fault: Recorder
) -> None:
    """Delays drawn by the retry loop are U(0, min(max, base * 2**(k-1))) per attempt k.

    Collected from the real loop (real 503s, a seeded rng, a sleep that records and
    never waits): each attempt's delays divided by their ceiling must pass a
    Kolmogorov-Smirnov test against U(0, 1), and the ceilings must double until capped.
    """
    fault.describe(
        "backoff-jitter",
        group="load",
        fault="1,000 requests x 9 retries against 503s, seeded rng, recording sleep",
        expected="per attempt: delays ~ U(0, ceiling) (KS p > 1e-4); means double to the cap",
        related=(
            "tests/fetch/test_fetch_retry.py::test_full_jitter_draws_from_zero_to_the_ceiling",
            "tests/fetch/test_fetch_retry.py::test_backoff_grows_exponentially_up_to_max_delay",
        ),
    )
    base = web.add(Site(fault=Status(503)), f"127.97.{subnet}.1")
    retry = RetrySettings(attempts=10, base_delay=0.1, max_delay=3.0, budget_min=100_000)
    by_task: dict[asyncio.Task[object] | None, list[float]] = defaultdict(list)

    async def recording_sleep(delay: float) -> None:
        by_task[asyncio.current_task()].append(delay)
        await asyncio.sleep(0)

    async def collect() -> None:
        http = HttpSettings(max_connections=64, max_per_host=64)
        fetcher = Fetcher(http=http, retry=retry, sleep=recording_sleep, rng=random.Random(2024))
        async with fetcher:
            async with asyncio.TaskGroup() as tg:
                for i in range(1000):
                    tg.create_task(fetcher.get_asset(base, f"a{i}.js"))

    with fault.probe(memory="none"):
        _, fault.leaked_tasks = run_async(collect())
    per_attempt: dict[int, list[float]] = defaultdict(list)
    for delays in by_task.values():
        for k, delay in enumerate(delays, start=1):
            per_attempt[k].append(delay)
    assert sorted(per_attempt) == list(range(1, 10))
    rows = []
    for k, delays in sorted(per_attempt.items()):
        ceiling = min(retry.max_delay, retry.base_delay * 2 ** (k - 1))
        scaled = [d / ceiling for d in delays]
        assert all(0 <= x <= 1 for x in scaled)
        result = kstest_uniform(scaled)
        rows.append(
            {
                "attempt": k,
                "ceiling": ceiling,
                "n": len(delays),
                "min": round(min(delays), 4),
                "mean": round(sum(delays) / len(delays), 4),
                "max": round(max(delays), 4),
                "ks_d": round(result.statistic, 4),
                "ks_p": round(result.pvalue, 3),
            }
        )
        # Which draw serves which attempt depends on scheduling, so the sample (though
        # uniform) varies run to run: 1e-4 per attempt keeps false alarms near 1 in 1,000
        # runs, while equal jitter or none would give p ~ 0.
        assert result.pvalue > 1e-4, rows[-1]
        assert min(scaled) < 0.01 and max(scaled) > 0.99  # full range: not "equal jitter"
    means = [r["mean"] for r in rows]
    for earlier, later, row in zip(means, means[1:], rows[1:], strict=False):
        if row["ceiling"] < retry.max_delay:
            assert 1.7 < later / earlier < 2.3, rows  # ceilings double: exponential
    assert rows[-1]["ceiling"] == retry.max_delay  # and stop at the cap, never grow forever
    fault.figures["jitter"] = rows
    fault.figures["requests"] = web.server(base).request_count
    worst = min(r["ks_p"] for r in rows)
    fault.observed = f"{sum(r['n'] for r in rows)} delays; lowest KS p over 9 attempts {worst}"
    fault.false_quarantines = 0
    fault.assert_clean()


def test_watch_reconnect_backoff_has_full_jitter(fault: Recorder) -> None:
    """The controller's reconnect delays (a pure generator) pass the same test."""
    fault.describe(
        "watch-reconnect-jitter",
        group="load",
        fault="controller watch reconnects: 2,000 sequences of 8 delays, seeded",
        expected="per attempt: delays ~ U(0, min(30, 0.5 x 2^k)) (KS p > 0.01)",
    )
    rng = random.Random(99)
    per_attempt: dict[int, list[float]] = defaultdict(list)
    for _ in range(2000):
        gen = backoff_delays(0.5, 30.0, rng)
        for k in range(8):
            per_attempt[k].append(next(gen))
    rows = []
    for k, delays in per_attempt.items():
        ceiling = min(30.0, 0.5 * 2**k)
        result = kstest_uniform([d / ceiling for d in delays])
        rows.append(
            {
                "attempt": k + 1,
                "ceiling": ceiling,
                "ks_d": round(result.statistic, 4),
                "ks_p": round(result.pvalue, 3),
            }
        )
        assert result.pvalue > 0.01, rows[-1]
    fault.figures["jitter"] = rows
    fault.observed = "every attempt KS p > 0.01"
    fault.leaked_tasks = fault.leaked_fds = fault.false_quarantines = 0


@dataclass(frozen=True)
class KsResult:
    statistic: float
    pvalue: float


def kstest_uniform(sample: list[float]) -> KsResult:
    """Kolmogorov-Smirnov test of a sample against U(0, 1), by hand (no scipy needed).

    D is exact; the p-value is the asymptotic Kolmogorov distribution
    ``2 sum (-1)^(k-1) exp(-2 k^2 lambda^2)`` with Stephens' small-sample correction of
    lambda. When scipy is installed, both are checked against ``scipy.stats.kstest``.
    """
    xs = sorted(sample)
    n = len(xs)
    d = max(max((i + 1) / n - x, x - i / n) for i, x in enumerate(xs))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    p = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    result = KsResult(d, min(1.0, max(0.0, p)))
    try:
        from scipy import stats
    except ImportError:
        return result
    reference = stats.kstest(xs, "uniform")
    assert math.isclose(d, reference.statistic, rel_tol=1e-9)
    assert abs(result.pvalue - reference.pvalue) < 0.01 + 0.1 * reference.pvalue
    return result


def test_budget_is_per_run_not_per_request() -> None:
    """Sanity for the bound used above: one budget per Fetcher, shared by every request."""
    budget = RetryBudget.from_settings(RetrySettings(**RETRY))
    for _ in range(INSTANCES):
        budget.record_first_attempt()
    assert budget.allowance == RETRY["budget_min"] + RETRY["budget_ratio"] * INSTANCES
