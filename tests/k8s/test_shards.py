"""Sharding the controller by ArtifactCheck (control/shard.py, docs/scaling.md)."""

from __future__ import annotations

import hashlib
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner
from tenant_support import TenantCluster, numbered_cluster, running

from artifactcheck.cli.main import main
from artifactcheck.control.shard import (
    Shard,
    jump_hash,
    key64,
    ordinal,
    parse_shard,
    shard_of,
)
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.names import LEASE_NAME
from artifactcheck_sim.cluster import wait_for

KEYS = [(f"team-{t}", f"web-{w}") for t in range(50) for w in range(200)]  # 10,000 checks


def test_key64_is_sha256_prefix() -> None:
    # Pinned: every replica and every release must agree on ownership (changing the
    # key would move nearly every check to another shard at an upgrade).
    assert key64("shop/web") == int.from_bytes(hashlib.sha256(b"shop/web").digest()[:8], "big")
    assert shard_of("shop", "web", 4) == jump_hash(key64("shop/web"), 4)
    assert [shard_of("shop", f"web-{i}", 4) for i in range(8)] == [1, 0, 1, 3, 2, 2, 0, 1]


def test_jump_hash_matches_the_reference_implementation() -> None:
    # Buckets 1..19 for each key, as the paper's C++ reference code computes them.
    vectors = {
        0: [0] * 19,
        1: [0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17],
        0xDEADBEEF: [0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16],
        0x0DDC0FFEEBADF00D: [0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15],
    }
    for key, buckets in vectors.items():
        assert [jump_hash(key, n + 1) for n in range(len(buckets))] == buckets
    with pytest.raises(ValueError):
        jump_hash(1, 0)


@pytest.mark.parametrize("total", [1, 2, 3, 4, 8, 16])
def test_every_check_lands_in_exactly_one_shard(total: int) -> None:
    shards = [Shard(i, total) for i in range(total)]
    for ns, name in KEYS[:2000]:
        owners = [s.index for s in shards if s.owns(ns, name)]
        assert owners == [shard_of(ns, name, total)]


@pytest.mark.parametrize("total", [2, 4, 8])
def test_the_distribution_is_even(total: int) -> None:
    counts = Counter(shard_of(ns, name, total) for ns, name in KEYS)
    assert set(counts) == set(range(total))
    mean = len(KEYS) / total
    # As even as a fair random split: each shard within 4 binomial standard deviations
    # (sqrt(n p (1-p)): ~1-3% of the mean here), and the spread about one of them.
    sigma = (len(KEYS) * (1 / total) * (1 - 1 / total)) ** 0.5
    assert max(abs(c - mean) for c in counts.values()) < 4 * sigma
    assert statistics.pstdev(counts.values()) < 2 * sigma
    assert 4 * sigma < 0.11 * mean  # i.e. every shard within 11% of its fair share


def test_ownership_is_stable_and_resharding_moves_few_checks() -> None:
    before = {key: shard_of(*key, 4) for key in KEYS}
    assert before == {key: shard_of(*key, 4) for key in KEYS}  # no per-process salt
    after = {key: shard_of(*key, 5) for key in KEYS}
    moved = [key for key in KEYS if before[key] != after[key]]
    # Jump hash: only the ~1/5 that go to the new shard move, never between old shards.
    assert all(after[key] == 4 for key in moved)
    assert 0.15 < len(moved) / len(KEYS) < 0.25


def test_namespace_is_part_of_the_key() -> None:
    totals = {shard_of(f"ns-{i}", "web", 8) for i in range(100)}
    assert len(totals) == 8  # the same name in many namespaces spreads over every shard


def test_unsharded_owns_everything_and_keeps_the_lease_name() -> None:
    s = Shard()
    assert all(s.owns(ns, name) for ns, name in KEYS[:100])
    assert s.lease_name(LEASE_NAME) == LEASE_NAME
    listed = ([{"metadata": {"name": "a"}}], "7")
    assert s.filter_list(listed) is listed


def test_each_shard_has_its_own_lease() -> None:
    names = {Shard(i, 4).lease_name(LEASE_NAME) for i in range(4)}
    assert len(names) == 4
    assert Shard(2, 4).lease_name(LEASE_NAME) == f"{LEASE_NAME}-shard-2-of-4"


def test_filters_keep_owned_objects_and_bookmarks() -> None:
    s = Shard(1, 3)
    objs = [{"metadata": {"namespace": ns, "name": n}} for ns, n in KEYS[:300]]
    items, rv = s.filter_list((objs, "42"))
    assert rv == "42"
    assert items == [
        o for o in objs if shard_of(o["metadata"]["namespace"], o["metadata"]["name"], 3) == 1
    ]
    events = [("ADDED", o) for o in objs] + [("BOOKMARK", {"metadata": {"resourceVersion": "9"}})]
    kept = list(s.filter_watch(events))
    assert [o for _k, o in kept[:-1]] == items
    assert kept[-1][0] == "BOOKMARK"
    # a namespace-less object is filed under "default", as the controller keys it
    assert s.owns_object({"metadata": {"name": "x"}}) == s.owns("default", "x")


@pytest.mark.parametrize(("index", "total"), [(-1, 2), (2, 2), (0, 0)])
def test_out_of_range_shard_is_a_config_error(index: int, total: int) -> None:
    with pytest.raises(ConfigError):
        Shard(index, total)


def test_shard_auto_reads_the_statefulset_ordinal() -> None:
    assert ordinal("artifactcheck-controller-3") == 3
    assert parse_shard("auto", "artifactcheck-12") == 12
    assert parse_shard(" 2 ", "whatever") == 2
    assert parse_shard(5, "whatever") == 5
    with pytest.raises(ConfigError):
        parse_shard("auto", "artifactcheck-controller-7f9c-abcde")
    with pytest.raises(ConfigError):
        parse_shard("two", "x")


def test_controller_command_rejects_a_bad_shard() -> None:
    result = CliRunner().invoke(
        main,
        ["controller", "--shard", "auto", "--identity", "no-ordinal-here", "--total-shards", "2"],
    )
    assert result.exit_code != 0
    assert "ordinal" in result.output


@pytest.fixture
def cluster():
    with numbered_cluster(81) as c:
        yield c


def test_two_shards_split_the_checks_and_lead_separately(cluster: TenantCluster) -> None:
    """Each shard runs only its checks (and watches only their pods), both lead at
    once through their own Leases, and a dead shard's checks stay unchecked."""
    names = [f"web-{i}" for i in range(6)]
    owner = {n: shard_of(cluster.namespace, n, 2) for n in names}
    assert set(owner.values()) == {0, 1}  # both shards get work with these names
    for n in names:
        for _ in range(2):
            cluster.add_pod(replicaset=f"{n}-7f9c", labels={"workload": n})
        cluster.add_check(
            n,
            interval=0.5,
            kubernetes={
                "namespace": cluster.namespace,
                "selector": f"workload={n}",
                "port": cluster.port,
            },
        )
    a = running(cluster, identity="ctl-0", shard=0, total_shards=2).start()
    b = running(cluster, identity="ctl-1", shard=1, total_shards=2).start()
    try:
        wait_for(lambda: a.controller.is_leader and b.controller.is_leader, timeout=10)
        for run, index in ((a, 0), (b, 1)):
            mine = {f"{cluster.namespace}/{n}" for n in names if owner[n] == index}
            wait_for(lambda run=run, mine=mine: set(run.controller.checks) == mine, timeout=10)
        wait_for(lambda: all(cluster.check_status(n) for n in names), timeout=30)
        leases = {
            obj["metadata"]["name"]: obj["spec"]["holderIdentity"]
            for obj in cluster.api.list("coordination.k8s.io/v1", "Lease", cluster.namespace)
        }
        assert leases == {
            f"{LEASE_NAME}-shard-0-of-2": "ctl-0",
            f"{LEASE_NAME}-shard-1-of-2": "ctl-1",
        }
        # shard 1 dies: shard 0 does not take its checks over (docs/scaling.md)
        b.stop()
        a_cycles = a.controller.cycles_completed
        wait_for(lambda: a.controller.cycles_completed > a_cycles + 2, timeout=20)
        assert set(a.controller.checks) == {
            f"{cluster.namespace}/{n}" for n in names if owner[n] == 0
        }
    finally:
        for r in (a, b):
            if r._thread.is_alive():
                r.stop()


K8S = Path(__file__).resolve().parents[2] / "k8s"


def _docs(path: Path) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


@pytest.mark.parametrize("name", ["statefulset.yaml", "service.yaml"])
def test_sharded_manifests_validate_strictly(name: str) -> None:
    for doc in _docs(K8S / "sharded" / name):
        kubernetes_validate.validate(doc, "1.30", strict=True)


def test_statefulset_is_the_deployment_with_shard_flags() -> None:
    """The shards run exactly the Deployment's pod, plus --shard auto and a
    --total-shards equal to the replica count (or some checks would have no owner)."""
    (sts,) = _docs(K8S / "sharded" / "statefulset.yaml")
    (dep,) = _docs(K8S / "deployment.yaml")
    spec: Any = sts["spec"]
    pod = spec["template"]
    command = pod["spec"]["containers"][0]["command"]
    i = command.index("--shard")
    assert command[i : i + 4] == ["--shard", "auto", "--total-shards", str(spec["replicas"])]
    del command[i : i + 4]
    assert pod == dep["spec"]["template"]  # type: ignore[index]
    assert spec["serviceName"] == "artifactcheck-shards"
    (svc,) = _docs(K8S / "sharded" / "service.yaml")
    assert svc["metadata"]["name"] == spec["serviceName"]  # type: ignore[index]
    assert svc["spec"]["clusterIP"] == "None"  # type: ignore[index]
