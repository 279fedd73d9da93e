"""Release keys in the controller: admin credentials, granted per namespace, named by a check.

A check with ``releaseKeys`` trusts only release manifests with a valid DSSE envelope
beside them (the manifest's URL + ``.intoto.jsonl``) signed by one of the keys the
admin configured and granted to its namespace. An unsigned release makes its pods
``inconclusive`` and, as gate mode fails open on inconclusive, the controller opens no
gate on its account. A key name that is unknown or not granted is a refused field
(``Accepted=False``), never a silent default.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from release_keys import make_key
from tenant_support import TenantCluster, admin_config, numbered_cluster, running

from artifactcheck.manifests import native
from artifactcheck.release import dsse
from artifactcheck_sim.cluster import wait_for
from artifactcheck_sim.fleet import RELEASES


@pytest.fixture
def cluster() -> Iterator[TenantCluster]:
    with numbered_cluster(84) as c:
        yield c


def sign(cluster: TenantCluster, version: str, key: Any) -> None:
    """Write ``VERSION.json.intoto.jsonl`` beside the served release manifest."""
    manifest = Path(cluster.release_template).parent / f"{version}.json"
    data = manifest.read_bytes()
    body = dsse.statement(name=manifest.name, data=data, version=version, build={})
    line = dsse.envelope_line(dsse.sign_envelope(dsse.canonical(body), key))
    manifest.with_name(manifest.name + dsse.SUFFIX).write_bytes(line)


def keyed_admin(cluster: TenantCluster, pub: Path, namespaces: list[str]) -> Any:
    return admin_config(
        cluster, release_keys=[{"name": "release", "namespaces": namespaces, "file": str(pub)}]
    )


def gate(cluster: TenantCluster, name: str) -> str | None:
    c = cluster.condition(name)
    return c["status"] if c else None


def test_signed_release_opens_gates_unsigned_is_inconclusive_and_held(
    cluster: TenantCluster, tmp_path: Path
) -> None:
    keys = make_key("ed25519", tmp_path)
    sign(cluster, "1.4.2", keys.private)  # 1.4.1 is not signed
    signed = [cluster.add_pod() for _ in range(2)]
    unsigned = cluster.add_pod(version="1.4.1")
    cluster.add_check(
        interval=0.3,
        cdn=None,
        knownVersions=[],
        releaseKeys=["release"],
        policy={"mode": "quarantine"},
    )
    with running(cluster, keyed_admin(cluster, keys.public_pem, ["shop"])) as ctl:
        wait_for(lambda: all(gate(cluster, p.name) == "True" for p in signed), timeout=20)
        wait_for(lambda: (cluster.check_status().get("counts") or {}).get("inconclusive") == 1)
        start = ctl.controller.cycles_completed
        wait_for(lambda: ctl.controller.cycles_completed >= start + 5, timeout=30)
        assert gate(cluster, unsigned.name) is None, "an unsigned release opens no gate"
        status = cluster.check_status()
        assert status["counts"] == {**status["counts"], "consistent": 2, "inconclusive": 1}
        report = ctl.controller.checks["shop/web"].last_report
        assert report is not None
        (untrusted,) = [f for f in report.findings if f.kind.value == "release-untrusted"]
        assert "release 1.4.1" in untrusted.message and "untrusted" in untrusted.message


def test_a_release_signed_by_another_key_is_not_trusted(
    cluster: TenantCluster, tmp_path: Path
) -> None:
    ours = make_key("p256", tmp_path, "ours")
    theirs = make_key("ed25519", tmp_path, "theirs")
    sign(cluster, "1.4.2", theirs.private)
    pod = cluster.add_pod()
    cluster.add_check(interval=0.3, cdn=None, knownVersions=[], releaseKeys=["release"])
    with running(cluster, keyed_admin(cluster, ours.public_pem, ["shop"])) as ctl:
        wait_for(lambda: (cluster.check_status().get("counts") or {}).get("inconclusive") == 1)
        start = ctl.controller.cycles_completed
        wait_for(lambda: ctl.controller.cycles_completed >= start + 4, timeout=30)
        assert gate(cluster, pod.name) is None


@pytest.mark.parametrize("granted", [["other-*"], None], ids=["ungranted", "unknown"])
def test_an_ungranted_or_unknown_key_name_is_refused(
    cluster: TenantCluster, tmp_path: Path, granted: list[str] | None
) -> None:
    keys = make_key("ed25519", tmp_path)
    sign(cluster, "1.4.2", keys.private)
    pod = cluster.add_pod()
    cluster.add_check(interval=0.3, cdn=None, knownVersions=[], releaseKeys=["release"])
    admin = (
        keyed_admin(cluster, keys.public_pem, granted)
        if granted is not None
        else admin_config(cluster)
    )
    with running(cluster, admin):
        accepted = wait_for(lambda: cluster.condition_of("Accepted"), timeout=15)
    assert accepted["status"] == "False" and accepted["reason"] == "ReleaseKeyNotGranted"
    assert "spec.releaseKeys[0]" in accepted["message"] and "'release'" in accepted["message"]
    assert gate(cluster, pod.name) is None


def test_a_key_file_that_is_not_a_public_key_makes_the_check_inconclusive(
    cluster: TenantCluster, tmp_path: Path
) -> None:
    """The admin's key file is a private key (a common slip): nothing is trusted, every
    verdict is inconclusive with that reason, no gate opens, the controller goes on."""
    keys = make_key("ed25519", tmp_path)
    sign(cluster, "1.4.2", keys.private)
    pod = cluster.add_pod()
    cluster.add_check(interval=0.3, cdn=None, knownVersions=[], releaseKeys=["release"])
    with running(cluster, keyed_admin(cluster, keys.private_pem, ["shop"])) as ctl:
        wait_for(lambda: (cluster.check_status().get("counts") or {}).get("inconclusive") == 1)
        start = ctl.controller.cycles_completed
        wait_for(lambda: ctl.controller.cycles_completed >= start + 3, timeout=30)
        assert gate(cluster, pod.name) is None
        report = ctl.controller.checks["shop/web"].last_report
        assert report is not None
        (result,) = report.results
        assert "a private key" in result.reason and "'release'" in result.reason


def test_a_release_rebuilt_at_its_url_is_caught_by_its_pin(
    cluster: TenantCluster, tmp_path: Path
) -> None:
    """Release manifests over HTTP are read again every interval when pinned, so a
    rebuild at the URL (same version, other bytes) is ReleaseChanged without a restart,
    and the rebuilt pods' gates stay closed."""
    manifest = Path(cluster.release_template).parent / "1.4.2.json"
    cluster.add_pod()
    cluster.add_check(interval=0.3, cdn=None, knownVersions=[], releasePins=True)
    with running(cluster) as ctl:
        wait_for(lambda: (cluster.check_status().get("releasePins") or [None])[0], timeout=20)
        rebuilt = native.dump(native.build(RELEASES["1.4.1"], version="1.4.2"))
        manifest.write_bytes(rebuilt)
        late = cluster.add_pod(serves="1.4.1")
        wait_for(lambda: (cluster.condition_of("ReleaseChanged") or {}).get("status") == "True")
        start = ctl.controller.cycles_completed
        wait_for(lambda: ctl.controller.cycles_completed >= start + 4, timeout=30)
        assert gate(cluster, late.name) is None
        (pin,) = cluster.check_status()["releasePins"]
        assert pin["changed"]["sha256"] == hashlib.sha256(rebuilt).hexdigest()
