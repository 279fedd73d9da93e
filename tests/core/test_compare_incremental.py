"""Judging only what changed (``compare_fleet(..., cache=...)``) gives the results a
fresh comparison gives, through every kind of change a controller cycle brings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from compare_support import A1, CLEAN, E1, IDX1, MIX, OLD, R1, R2, fetched, obs, serving

from artifactcheck.judge.compare import (
    SAMPLED_OUT,
    HashIndex,
    JudgeCache,
    SampledOutRows,
    compare_fleet,
    judge_instance,
)
from artifactcheck.model.records import replace
from artifactcheck.model.values import CertInfo, Expectation, Observation, Verdict

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def fleet() -> list[Observation]:
    out = [obs(f"p{n}", "1.0", serving(CLEAN), image_id="img-a") for n in range(5)]
    out.append(obs("p5", "1.0", serving(MIX), image_id="img-a"))
    out.append(obs("p6", "2.0", serving(OLD), image_id="img-b"))
    return out


def both(
    observations: list[Observation], cache: JudgeCache, **kw: object
) -> tuple[list[object], int]:
    kw.setdefault("expectations", {"1.0": E1, "2.0": Expectation("2.0", R2)})
    kw.setdefault("now", NOW)
    fresh = compare_fleet(observations, **kw)  # type: ignore[arg-type]
    reused = compare_fleet(observations, cache=cache, **kw)  # type: ignore[arg-type]
    assert reused == fresh
    return reused, cache.judged  # type: ignore[return-value]


def test_unchanged_inputs_reuse_every_result() -> None:
    cache = JudgeCache()
    observations = fleet()
    results, judged = both(observations, cache)
    assert judged == len(observations)
    assert [r.verdict for r in results][-2:] == [Verdict.MISMATCH, Verdict.CONSISTENT]  # type: ignore[attr-defined]
    _, judged = both(observations, cache)
    assert judged == 0


def test_each_change_is_judged_again() -> None:
    cache = JudgeCache()
    observations = fleet()
    both(observations, cache)
    # a new pod, and a pod re-observed: only those two
    observations.append(obs("p7", "1.0", serving(MIX), image_id="img-a"))
    observations[0] = obs("p0", "1.0", serving(MIX), image_id="img-a")
    _, judged = both(observations, cache)
    assert judged == 2
    # the pod's metadata refreshed (same evidence, other labels): judged again
    observations[1] = replace(
        observations[1], instance=replace(observations[1].instance, labels={"x": "y"})
    )
    _, judged = both(observations, cache)
    assert judged == 1
    # the same instance refreshed with an equal copy: reused
    observations[1] = replace(observations[1], instance=replace(observations[1].instance))
    _, judged = both(observations, cache)
    assert judged == 0
    # a fleet finding changes for everyone of a version: 9 new pods of 1.0 run another
    # image, now the majority, so the 7 older pods of 1.0 diverge: 9 + 7 judged
    observations.extend(obs(f"q{n}", "1.0", serving(CLEAN), image_id="img-c") for n in range(9))
    _, judged = both(observations, cache)
    assert judged == 9 + 7
    # the expected release changes: everyone (the index of known releases changed too)
    other = {"1.0": Expectation("1.0", R2), "2.0": Expectation("2.0", R2)}
    _, judged = both(observations, cache, expectations=other)
    assert judged == len(observations)
    # the release source goes down: everyone again (1.0 leaves the index)
    down = {"1.0": Expectation("1.0", None, error="down"), "2.0": Expectation("2.0", R2)}
    _, judged = both(observations, cache, expectations=down)
    assert judged == len(observations)
    _, judged = both(observations, cache, expectations=down)
    assert judged == 0


def test_certificate_expiry_follows_the_clock() -> None:
    """``now`` matters only through certificates: crossing the warning threshold is
    judged again even when nothing else changed."""
    cert = CertInfo(
        endpoint="p0:443",
        subject="p0",
        issuer="ca",
        not_after=NOW + timedelta(days=14, hours=1),
    )
    cache = JudgeCache()
    observations = [replace(o, tls=cert) if o.instance.name == "p0" else o for o in fleet()]
    both(observations, cache)
    _, judged = both(observations, cache, now=NOW + timedelta(minutes=1))
    assert judged == 0
    _, judged = both(observations, cache, now=NOW + timedelta(hours=2))
    assert judged == 1


def test_forget_drops_pods_gone() -> None:
    cache = JudgeCache()
    both(fleet(), cache)
    cache.forget(["p0", "p1"])
    assert set(cache.entries) == {"p0", "p1"}


def test_sampled_instances_share_their_coverage_rows_and_keep_every_reason() -> None:
    """Sampled instances that compared the same files share one tuple of "sampled out"
    rows (5,000 pods x ~500 rows each was the largest thing a controller held); an
    instance with a failed fetch keeps that file's own reason, as without sharing."""
    release = replace(
        R1, files={**R1.files, **{f"assets/c{n}.js": R1.files["assets/a.js"] for n in range(40)}}
    )
    expectation = Expectation("1.0", release)
    index = HashIndex({"1.0": release})
    sampled = [
        obs(f"s{n}", "1.0", {"index.html": fetched("index.html", IDX1)}, sampled=True)
        for n in range(3)
    ]
    failing = obs(
        "f",
        "1.0",
        {
            "index.html": fetched("index.html", IDX1),
            "assets/c7.js": fetched("assets/c7.js", error="reset"),
        },
        sampled=True,
    )
    # one more file compared (another sample), and one not sampled at all
    wider = obs(
        "w",
        "1.0",
        {"index.html": fetched("index.html", IDX1), "assets/a.js": fetched("assets/a.js", A1)},
        sampled=True,
    )
    whole = obs("u", "1.0", {"index.html": fetched("index.html", IDX1)})
    sampled += [wider, whole]
    rows = SampledOutRows()
    shared = [
        judge_instance(o, expectation=expectation, index=index, now=NOW, shared_rows=rows)
        for o in [*sampled, failing]
    ]
    alone = [
        judge_instance(o, expectation=expectation, index=index, now=NOW)
        for o in [*sampled, failing]
    ]
    assert shared == alone
    first, second = (r.coverage.not_compared for r in shared[:2])  # type: ignore[union-attr]
    assert first is second and len(first) == len(release.files) - 1
    assert {why for _p, why in first} == {SAMPLED_OUT}
    first_paths = {p for p, _why in first}
    assert dict(shared[3].coverage.not_compared).keys() == first_paths - {"assets/a.js"}  # type: ignore[union-attr]
    assert {why for _p, why in shared[4].coverage.not_compared} == {"not fetched"}  # type: ignore[union-attr]
    reasons = dict(shared[5].coverage.not_compared)  # type: ignore[union-attr]
    assert reasons["assets/c7.js"].startswith("could not be fetched")
    assert reasons["assets/c8.js"] == SAMPLED_OUT
    # through compare_fleet, with or without a cache, the same
    cache = JudgeCache()
    fleet_results, _ = both([*sampled, failing], cache, expectations={"1.0": expectation})
    assert fleet_results == alone
