"""The controller's observing processes (control/workers.py): the same observations,
the limits shared out, a dead worker never the cycle's end.

The workers are started by a fork server, so they start cleanly from this test
process although its threads (the servers, the controller) run.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from tenant_support import TenantCluster, running

from artifactcheck.control.workers import FetchSetup, ObservePool
from artifactcheck.discover.static import instances_from_targets
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Expectation, Instance, Observation
from artifactcheck.observe.failures import CHECK_FAILED
from artifactcheck.observe.instance import Observer
from artifactcheck.pipeline import observe_each
from artifactcheck.release.wiring import build_expectations
from artifactcheck.tenancy.egress import AddressRules, EgressPolicy, addresses_of
from artifactcheck_sim.cluster import wait_for
from artifactcheck_sim.fleet import SimFleet
from artifactcheck_sim.web import Delay, WebFleet

_net = itertools.count(1)
DOWN = "http://127.93.61.1:9/"  # nothing listens on port 9 (discard) here


@pytest.fixture(scope="module")
def pool() -> Iterator[ObservePool]:
    workers = ObservePool(2, min_per_process=1).start()
    yield workers
    workers.close()


@pytest.fixture
def fleet() -> Iterator[SimFleet]:
    n = next(_net)
    with WebFleet(name="test-workers") as web:
        made = SimFleet(
            instances=8,
            version="1.4.1",
            first_host=f"127.81.{n}.1",
            cdn_host=f"127.82.{n}.1",
            web=web,
        ).start()
        made.drift(2, serves="1.4.2")
        made.instances[4].version = "1.4.2"  # reports a release it does not serve
        yield made
        made.stop()


def spec_of(fleet: SimFleet, **http: Any) -> CheckSpec:
    raw = fleet.spec()
    raw["targets"].append({"url": DOWN, "version": "1.4.1", "name": "down"})
    raw["sampling"] = {"assets_per_instance": 2, "seed": 7}  # the seed decides the files
    raw["http"] = {**raw["http"], **http}
    return CheckSpec.model_validate(raw)


def host_of(instance: Instance) -> str:
    return urlsplit(instance.base_url).hostname or ""


def setup_for(instances: list[Instance], *, refused: str) -> FetchSetup:
    """Loopback allowed, every instance admitted but ``refused`` (as the controller's
    egress policy admits only the pods it selects)."""
    admitted = addresses_of(host_of(i) for i in instances if i.name != refused)
    policy = EgressPolicy(
        rules=AddressRules(allow_loopback=True), instance_addresses=lambda: admitted
    )
    return FetchSetup(egress=policy, scoped=None, proxies=None)


async def observed_by(
    spec: CheckSpec, instances: list[Instance], setup: FetchSetup, pool: ObservePool | None
) -> tuple[dict[str, Observation], dict[str, Expectation], int, bool]:
    """Every instance observed here (``pool`` None) or by the pool, with the releases
    met, the requests counted, and whether the pool took the cycle."""
    async with Fetcher(http=spec.http, retry=spec.retry, egress=setup.egress) as fetcher:
        observer = Observer(
            spec=spec, fetcher=fetcher, expectations=build_expectations(spec, fetcher)
        )
        into: dict[str, Observation] = {}
        loaded: dict[str, Expectation] = {}
        taken = pool is not None and await pool.observe(
            observer, instances, into=into, loaded=loaded, first=False, fetch=lambda: setup
        )
        if not taken:
            await observe_each(observer, instances, into=into, loaded=loaded)
        return into, loaded, fetcher.stats.requests, taken


def evidence(observations: dict[str, Observation]) -> dict[str, Any]:
    """Per instance, everything a verdict rests on (not timings)."""
    return {
        name: (
            o.error_kind,
            o.error,
            o.endpoint_version,
            o.manifest,
            sorted(
                (p, f.status, f.hashes.get("sha256"), f.error_kind) for p, f in o.assets.items()
            ),
        )
        for name, o in observations.items()
    }


def test_workers_observe_what_the_controller_observes(fleet: SimFleet, pool: ObservePool) -> None:
    spec = spec_of(fleet)
    instances = instances_from_targets(spec.targets)
    setup = setup_for(instances, refused="web-6")
    here, loaded_here, requests_here, _ = asyncio.run(observed_by(spec, instances, setup, None))
    there, loaded_there, requests_there, taken = asyncio.run(
        observed_by(spec, instances, setup, pool)
    )
    assert taken
    assert evidence(there) == evidence(here)
    assert all(there[inst.name].instance is inst for inst in instances)  # ours, not copies
    assert sorted(loaded_there) == sorted(loaded_here) == ["1.4.1", "1.4.2"]
    assert requests_there == requests_here  # the workers' requests are counted here
    assert "egress" in (there["web-6"].error or ""), there["web-6"]  # the egress policy holds
    assert there["down"].error_kind is not None
    fine = [o for o in there.values() if o.error is None and o.assets]
    assert len(fine) >= 6, there


def test_a_small_cycle_is_observed_in_the_controller(fleet: SimFleet) -> None:
    spec = spec_of(fleet)
    instances = instances_from_targets(spec.targets)
    few = ObservePool(2, min_per_process=len(instances))  # never started: never used
    _, _, _, taken = asyncio.run(
        observed_by(spec, instances, setup_for(instances, refused=""), few)
    )
    assert not taken
    assert few.count_for(spec, instances) == 1


def test_each_worker_gets_a_share_of_the_limits(fleet: SimFleet) -> None:
    spec = spec_of(fleet, max_connections=9)
    spec = spec.model_copy(update={"retry": spec.retry.model_copy(update={"budget_min": 10})})
    instances = instances_from_targets(spec.targets)
    pool = ObservePool(2, min_per_process=1)
    jobs: list[Any] = []

    async def record(i: int, job: Any, observer: Any, into: dict, loaded: dict) -> None:
        jobs.append(job)
        for inst in job.instances:
            into[inst.name] = Observation(instance=inst, manifest_path="")

    pool.run_job = record  # type: ignore[method-assign]
    setup = setup_for(instances, refused="web-6")
    asyncio.run(observed_by(spec, instances, setup, pool))
    assert len(jobs) == 2
    assert sum(j.spec.http.max_connections for j in jobs) <= 9
    assert sum(j.spec.retry.budget_min for j in jobs) <= 10
    assert all(j.spec.http.max_per_host == spec.http.max_per_host for j in jobs)
    hosts = [host_of(i) for j in jobs for i in j.instances]
    assert sorted(hosts) == sorted(host_of(i) for i in instances)  # each host in one job
    assert {j.seed for j in jobs} == {7}
    admitted = setup.egress.instance_addresses()  # type: ignore[union-attr]
    for job in jobs:  # the pods' addresses as the cycle starts, in a form that pickles
        assert job.fetch.egress.instance_addresses() == admitted
        assert job.fetch.egress.rules == setup.egress.rules  # type: ignore[union-attr]


def slow_job(fleet: SimFleet) -> tuple[CheckSpec, list[Instance], FetchSetup, ObservePool]:
    """A job still running when the test acts (every index.html answers after 3 s),
    and a started pool of two workers that takes it."""
    spec = spec_of(fleet)
    instances = instances_from_targets(spec.targets)
    for inst in fleet.instances:
        inst.site.overrides["index.html"] = Delay(3.0)
    return (
        spec,
        instances,
        setup_for(instances, refused=""),
        ObservePool(2, min_per_process=1).start(),
    )


def test_a_worker_that_dies_fails_its_pods_only_and_is_replaced(fleet: SimFleet) -> None:
    spec, instances, setup, pool = slow_job(fleet)
    try:
        pids = [w.process.pid for w in pool._workers if w is not None]
        victim = pids[0]

        async def kill_soon() -> None:
            await asyncio.sleep(1.0)
            os.kill(victim, signal.SIGKILL)

        async def both() -> tuple[dict[str, Observation], Any]:
            killer = asyncio.create_task(kill_soon())
            got = await observed_by(spec, instances, setup, pool)
            await killer
            return got[0], got

        observations, _ = asyncio.run(both())
        failed = {n for n, o in observations.items() if o.error_kind is CHECK_FAILED}
        assert failed, "the killed worker's pods are failed checks"
        assert len(failed) < len(instances)  # the other worker's pods were observed
        assert all("ended early" in (observations[n].error or "") for n in failed)
        for inst in fleet.instances:
            inst.site.overrides.pop("index.html", None)
        again, _, _, taken = asyncio.run(observed_by(spec, instances, setup, pool))
        assert taken
        assert not [n for n, o in again.items() if o.error_kind is CHECK_FAILED]
        assert victim not in [w.process.pid for w in pool._workers if w is not None]
    finally:
        pool.close()


def test_controller_with_workers_gives_its_verdicts() -> None:
    n = next(_net)
    with TenantCluster(
        first_host=f"127.83.{n}.1", cdn_host=f"127.84.{n}.1", release_host=f"127.85.{n}.1"
    ) as cluster:
        pods = [cluster.add_pod() for _ in range(7)]
        bad = cluster.add_pod(serves="1.4.1")
        cluster.add_check(interval=0.5, policy={"mode": "quarantine"})
        workers = ObservePool(2, min_per_process=1).start()
        ctl = running(cluster)
        ctl.controller.workers = workers
        try:
            with ctl:
                wait_for(
                    lambda: (cluster.condition(bad.name) or {}).get("status") == "False", timeout=30
                )
                wait_for(
                    lambda: all(
                        (cluster.condition(p.name) or {}).get("status") == "True" for p in pods
                    ),
                    timeout=10,
                )
                deadline = time.monotonic() + 10
                while workers.cycles < 1 and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert workers.cycles >= 1
        finally:
            workers.close()


def test_a_cycle_cancelled_mid_job_replaces_its_workers(fleet: SimFleet) -> None:
    """A worker mid-job is never given another job (its late answers would be taken
    for the next one's): a cancelled cycle (leadership lost) ends it."""
    spec, instances, setup, pool = slow_job(fleet)
    try:
        before = [w for w in pool._workers if w is not None]

        async def cancelled() -> None:
            task = asyncio.create_task(observed_by(spec, instances, setup, pool))
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled())
        assert not any(w.process.is_alive() for w in before)
        assert not [w for w in pool._workers if any(w is old for old in before)]
        for inst in fleet.instances:
            inst.site.overrides.pop("index.html", None)
        again, _, _, taken = asyncio.run(observed_by(spec, instances, setup, pool))
        assert taken
        assert evidence(again) == evidence(
            asyncio.run(observed_by(spec, instances, setup, None))[0]
        )
    finally:
        pool.close()
