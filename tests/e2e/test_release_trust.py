"""The silent rebuild, caught: real loopback instances and a release source over HTTP.

A release manifest is served by a loopback server; the instances serve build A of
1.4.1. Then the release source and every instance are rebuilt (build B, still
1.4.1): they agree with each other, so without pins ``verify`` says ``consistent``.
With ``--pins`` the run exits 1 with ``release-changed``; after ``pins accept`` it
exits 0. With ``--release-key``, a manifest re-signed by an unknown key is exit 3.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner
from release_keys import make_key

from artifactcheck.cli.main import main
from artifactcheck.manifests import native
from artifactcheck_sim.fleet import RELEASES
from artifactcheck_sim.web import Site

BUILD_A, BUILD_B = RELEASES["1.4.1"], RELEASES["1.4.2"]  # two real builds of one app


def run(*args: str) -> tuple[int, dict[str, Any] | None, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    try:
        doc = json.loads(result.stdout)
    except ValueError:
        doc = None
    return result.exit_code, doc, result.stdout + result.stderr


class Release:
    """A release bucket on loopback: a directory of manifests served over HTTP."""

    def __init__(self, web: Any, folder: Path, host: str) -> None:
        self.folder = folder
        self.url = web.add(Site(root=folder), host)

    def publish(self, version: str, build: Path) -> bytes:
        data = native.dump(native.build(build, version=version))
        (self.folder / f"{version}.json").write_bytes(data)
        return data

    def template(self) -> str:
        return self.url + "{version}.json"


def rebuild(fleet: Any, build: Path) -> None:
    """Every instance serves ``build`` now, still reporting its version."""
    for inst in fleet.instances:
        inst.site.root = build
        inst.site._files.clear()  # the sim's stat cache: another build's files now


def verify_args(fleet: Any, release: Release, *extra: str) -> list[str]:
    args = ["verify", "--output", "json", "--deadline", "10"]
    for inst in fleet.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    return [*args, "--release-manifest", release.template(), *extra]


def kinds(doc: dict[str, Any]) -> list[str]:
    return [f["kind"] for f in doc["findings"]]


@pytest.fixture
def bucket(web: Any, tmp_path: Path) -> Release:
    folder = tmp_path / "bucket"
    folder.mkdir()
    return Release(web, folder, "127.91.0.1")


def test_pins_catch_the_silent_rebuild_until_it_is_accepted(
    make_fleet: Any, bucket: Release, tmp_path: Path
) -> None:
    fleet = make_fleet(3, version="1.4.1")
    first = bucket.publish("1.4.1", BUILD_A)
    pins_file = tmp_path / "pins.json"
    code, doc, out = run(*verify_args(fleet, bucket, "--pins", str(pins_file)))
    assert code == 0, out[-600:]
    pinned = json.loads(pins_file.read_text())["versions"]["1.4.1"]["pinned"]
    assert pinned["sha256"] == hashlib.sha256(first).hexdigest()
    assert pinned["source"] == bucket.url + "1.4.1.json"

    second = bucket.publish("1.4.1", BUILD_B)  # the rebuild reaches the release source...
    rebuild(fleet, BUILD_B)  # ...and every instance
    code, doc, out = run(*verify_args(fleet, bucket))
    assert code == 0, "without pins the rebuilt fleet agrees with the rebuilt release"

    junit = tmp_path / "junit.xml"
    code, doc, out = run(
        *verify_args(fleet, bucket, "--pins", str(pins_file), "--output", f"junit={junit}")
    )
    assert code == 1, out[-600:]
    fleet_case = ET.parse(junit).getroot().find("testcase[@name='release-changed']")
    assert fleet_case is not None and fleet_case.find("failure") is not None
    assert doc is not None
    [changed] = [f for f in doc["findings"] if f["kind"] == "release-changed"]
    new_digest = hashlib.sha256(second).hexdigest()
    assert "1.4.1" in changed["message"] and bucket.url + "1.4.1.json" in changed["message"]
    assert (changed["expected"], changed["actual"]) == (pinned["sha256"], new_digest)
    # judged against the pinned build A, which they no longer serve
    assert {r["verdict"] for r in doc["results"]} == {"mismatch"}

    code, _, out = run("pins", "accept", "1.4.1", "--pins", str(pins_file))
    assert code == 0, out[-600:]
    assert new_digest in out
    code, doc, out = run(*verify_args(fleet, bucket, "--pins", str(pins_file)))
    assert code == 0, out[-600:]
    assert doc is not None and "release-changed" not in kinds(doc)


def test_a_changed_release_without_its_pinned_copy_is_inconclusive_and_exits_1(
    make_fleet: Any, bucket: Release, tmp_path: Path
) -> None:
    fleet = make_fleet(2, version="1.4.1")
    bucket.publish("1.4.1", BUILD_A)
    pins_file = tmp_path / "pins.json"
    assert run(*verify_args(fleet, bucket, "--pins", str(pins_file)))[0] == 0
    shutil.rmtree(tmp_path / "pins.json.releases")  # the kept copy is gone
    bucket.publish("1.4.1", BUILD_B)
    rebuild(fleet, BUILD_B)
    code, doc, out = run(*verify_args(fleet, bucket, "--pins", str(pins_file)))
    assert code == 1, out[-600:]
    assert doc is not None
    assert {r["verdict"] for r in doc["results"]} == {"inconclusive"}
    assert "release-changed" in kinds(doc)
    assert "not at hand" in json.dumps(doc["findings"])


def test_the_pinned_release_still_judges_instances_left_on_build_a(
    make_fleet: Any, bucket: Release, tmp_path: Path
) -> None:
    fleet = make_fleet(2, version="1.4.1")
    bucket.publish("1.4.1", BUILD_A)
    pins_file = tmp_path / "pins.json"
    assert run(*verify_args(fleet, bucket, "--pins", str(pins_file)))[0] == 0
    bucket.publish("1.4.1", BUILD_B)  # only the release source was rebuilt
    code, doc, out = run(*verify_args(fleet, bucket, "--pins", str(pins_file)))
    assert code == 1, out  # the release changed: never 0...
    assert doc is not None
    assert {r["verdict"] for r in doc["results"]} == {"consistent"}  # ...though they agree


def sign(release_file: Path, key: Path) -> None:
    code, _, out = run("manifest", "sign", str(release_file), "--key", str(key))
    assert code == 0, out[-600:]


def test_only_a_release_signed_by_a_known_key_is_trusted(
    make_fleet: Any, bucket: Release, tmp_path: Path
) -> None:
    fleet = make_fleet(2, version="1.4.1")
    ours, theirs = make_key("p256", tmp_path, "ours"), make_key("ed25519", tmp_path, "theirs")
    bucket.publish("1.4.1", BUILD_A)
    manifest = bucket.folder / "1.4.1.json"
    sign(manifest, ours.private_pem)
    trusted = ("--release-key", str(ours.public_pem))
    code, doc, out = run(*verify_args(fleet, bucket, *trusted))
    assert code == 0, out[-600:]

    bucket.publish("1.4.1", BUILD_B)  # rebuilt and re-signed by someone else's key
    rebuild(fleet, BUILD_B)
    sign(manifest, theirs.private_pem)
    junit = tmp_path / "junit.xml"
    code, doc, out = run(*verify_args(fleet, bucket, *trusted, "--output", f"junit={junit}"))
    assert code == 3, out[-600:]
    fleet_case = ET.parse(junit).getroot().find("testcase[@name='release-untrusted']")
    assert fleet_case is not None and fleet_case.find("error") is not None  # not a failure
    assert doc is not None
    assert {r["verdict"] for r in doc["results"]} == {"inconclusive"}
    [untrusted] = [f for f in doc["findings"] if f["kind"] == "release-untrusted"]
    assert "signed by no configured release key" in untrusted["message"]
    assert bucket.url + "1.4.1.json.intoto.jsonl" in untrusted["message"]


@pytest.mark.parametrize(
    ("plant", "reason"),
    [
        (lambda m, env: env.unlink(), "HTTP 404"),
        (lambda m, env: env.write_bytes(b"{" * 50_000), "malformed"),
        (
            lambda m, env: m.write_bytes(m.read_bytes().replace(b'"files"', b'"files" ')),
            "other bytes",
        ),
    ],
    ids=["no-envelope", "hostile-envelope", "manifest-edited-after-signing"],
)
def test_one_bad_envelope_is_that_release_s_problem_only(
    plant: Any, reason: str, make_fleet: Any, bucket: Release, tmp_path: Path
) -> None:
    old, new = make_fleet(2, version="1.4.1"), make_fleet(2, version="1.4.2")
    key = make_key("ed25519", tmp_path)
    for version, build in (("1.4.1", BUILD_A), ("1.4.2", BUILD_B)):
        bucket.publish(version, build)
        sign(bucket.folder / f"{version}.json", key.private_pem)
    manifest = bucket.folder / "1.4.2.json"
    plant(manifest, Path(f"{manifest}.intoto.jsonl"))
    args = verify_args(old, bucket, "--release-key", str(key.public_pem))
    for inst in new.instances:
        args += ["--target", f"{inst.url}={inst.version}"]
    code, doc, out = run(*args)
    assert code == 3, out[-600:]
    assert doc is not None
    verdicts = {r["instance"]: r["verdict"] for r in doc["results"]}
    assert [verdicts[i.url] for i in old.instances] == ["consistent"] * 2
    assert [verdicts[i.url] for i in new.instances] == ["inconclusive"] * 2
    [untrusted] = [f for f in doc["findings"] if f["kind"] == "release-untrusted"]
    assert "release 1.4.2" in untrusted["message"] and reason in untrusted["message"]


def test_a_signature_elsewhere_is_found_by_its_template(
    make_fleet: Any, bucket: Release, tmp_path: Path
) -> None:
    fleet = make_fleet(1, version="1.4.1")
    key = make_key("ed25519", tmp_path)
    bucket.publish("1.4.1", BUILD_A)
    signatures = tmp_path / "signatures"
    signatures.mkdir()
    manifest = bucket.folder / "1.4.1.json"
    code, _, out = run(
        "manifest", "sign", str(manifest), "--key", str(key.private_pem),
        "-o", str(signatures / "1.4.1.jsonl"),
    )  # fmt: skip
    assert code == 0, out[-600:]
    where = ("--release-signature", str(signatures / "{version}.jsonl"))
    code, _, out = run(*verify_args(fleet, bucket, "--release-key", str(key.public_pem), *where))
    assert code == 0, out[-600:]
    code, _, out = run(*verify_args(fleet, bucket, "--release-key", str(key.public_pem)))
    assert code == 3, "the default location (beside the manifest) holds no envelope"


def test_a_local_release_file_is_checked_too(make_fleet: Any, tmp_path: Path) -> None:
    fleet = make_fleet(1, version="1.4.1")
    key = make_key("p256", tmp_path)
    manifest = tmp_path / "release-1.4.1.json"
    manifest.write_bytes(native.dump(native.build(BUILD_A, version="1.4.1")))
    args = ["verify", "--output", "json", "--target", f"{fleet.instances[0].url}=1.4.1"]
    args += ["--release-manifest", str(manifest), "--release-key", str(key.public_pem)]
    code, doc, out = run(*args)
    assert code == 3, out  # no envelope beside it: untrusted, even read before the run
    assert doc is not None and "release-untrusted" in kinds(doc)
    sign(manifest, key.private_pem)
    code, doc, out = run(*args)
    assert code == 0, out[-600:]


def test_investigate_says_the_instance_s_release_changed(
    make_fleet: Any, bucket: Release, tmp_path: Path
) -> None:
    fleet = make_fleet(2, version="1.4.1")
    bucket.publish("1.4.1", BUILD_A)
    pins_file = tmp_path / "pins.json"
    assert run(*verify_args(fleet, bucket, "--pins", str(pins_file)))[0] == 0
    bucket.publish("1.4.1", BUILD_B)
    rebuild(fleet, BUILD_B)
    args = verify_args(fleet, bucket, "--pins", str(pins_file))[1:]
    code, doc, out = run("investigate", fleet.instances[0].url, *args)
    assert code == 1, out[-600:]  # judged against the pinned build A: a mismatch
    assert doc is not None
    [note] = [n for n in doc["notes"] if n.startswith("the release itself changed")]
    assert "release 1.4.1 changed" in note and "pins accept 1.4.1" in note
