"""Bad input to the release-trust flags and commands: exit 2, naming the flag or file,
before any request is sent; and the build metadata ``manifest sign`` records."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from release_keys import make_key

from artifactcheck.cli.main import main
from artifactcheck.cli.release_trust import build_metadata
from artifactcheck.manifests import native

# nothing listens here: a run that got as far as a request would be exit 3, not 2
TARGET = ("--target", "http://127.0.0.1:9/=1.0.0")


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env=env)
    return result.exit_code, result.output


def release_file(tmp_path: Path, version: str = "1.0.0") -> Path:
    dist = tmp_path / "dist"
    dist.mkdir(exist_ok=True)
    (dist / "index.html").write_text("hi")
    path = tmp_path / f"{version}.json"
    path.write_bytes(native.dump(native.build(dist, version=version)))
    return path


def verify(tmp_path: Path, *extra: str) -> tuple[int, str]:
    return run("verify", *TARGET, "--release-manifest", str(release_file(tmp_path)), *extra)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not a JSON pins file"),
        (b'{"schema": "artifactcheck/pins", "format": 9, "versions": {}}', "newer artifactcheck"),
    ],
    ids=["not-json", "newer-format"],
)
def test_an_unusable_pins_file_exits_2_naming_it_and_is_left_alone(
    content: bytes, reason: str, tmp_path: Path
) -> None:
    pins = tmp_path / "pins.json"
    pins.write_bytes(content)
    code, out = verify(tmp_path, "--pins", str(pins))
    assert code == 2, out
    assert f"--pins {pins}" in out and reason in out
    assert pins.read_bytes() == content


def test_a_pins_file_in_a_missing_directory_exits_2(tmp_path: Path) -> None:
    code, out = verify(tmp_path, "--pins", str(tmp_path / "nowhere" / "pins.json"))
    assert code == 2 and "does not exist" in out, out


def test_a_release_key_that_is_not_a_public_key_exits_2_naming_the_flag(tmp_path: Path) -> None:
    pair = make_key("p256", tmp_path)
    code, out = verify(tmp_path, "--release-key", str(pair.private_pem))
    assert code == 2, out
    assert f"--release-key {pair.private_pem}: a private key" in out
    code, out = verify(tmp_path, "--release-key", str(tmp_path / "missing.pub"))
    assert code == 2 and "--release-key" in out and "cannot read" in out, out


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--release-signature", "x.jsonl"), "--release-signature: needs --release-key"),
        (
            ("--release-signature", "https://{version}.example/s.jsonl", "--release-key", "K"),
            "'{version}' may be in the path, not in the host",
        ),
    ],
    ids=["no-key", "version-in-host"],
)
def test_a_signature_location_without_a_key_exits_2(
    args: tuple[str, ...], reason: str, tmp_path: Path
) -> None:
    key = str(make_key("ed25519", tmp_path).public_pem)
    code, out = verify(tmp_path, *(key if a == "K" else a for a in args))
    assert code == 2 and reason in out, out


def test_keys_for_configmap_releases_need_the_envelopes_location(tmp_path: Path) -> None:
    pair = make_key("ed25519", tmp_path)
    args = ("verify", "--namespace", "shop", "--selector", "app=web")
    args += ("--release-configmaps", "app=web", "--release-key", str(pair.public_pem))
    code, out = run(*args)
    assert code == 2 and "--release-key: a ConfigMap has no location" in out, out


def test_pins_need_a_release_manifest_source(tmp_path: Path) -> None:
    code, out = run("verify", *TARGET, "--pins", str(tmp_path / "pins.json"))
    assert code == 2 and "--pins: applies to release manifests" in out, out


def test_pins_accept_refuses_what_it_cannot_adopt(tmp_path: Path) -> None:
    pins = str(tmp_path / "pins.json")
    code, out = run("pins", "accept", "1.0.0", "--pins", pins)
    assert code == 2 and "no changed release was seen; give --digest" in out, out
    code, out = run("pins", "accept", "1.0.0", "--digest", "abc", "--pins", pins)
    assert code == 2 and "--digest 'abc'" in out, out
    code, out = run("pins", "accept", "../1.0", "--digest", "a" * 64, "--pins", pins)
    assert code == 2 and "VERSION" in out, out
    assert not Path(pins).exists()
    code, out = run("pins", "accept", "1.0.0", "--digest", "A" * 64, "--pins", pins)
    assert code == 0, out
    doc = json.loads(Path(pins).read_text())
    assert doc["versions"]["1.0.0"]["pinned"]["sha256"] == "a" * 64
    code, out = run("pins", "show", "--pins", pins)
    assert code == 0 and "1.0.0  " + "a" * 64 in out, out


def test_sign_reads_an_encrypted_key_s_passphrase_from_the_environment(tmp_path: Path) -> None:
    pair = make_key("ed25519", tmp_path, passphrase=b"s3cret")
    release = release_file(tmp_path)
    args = ("manifest", "sign", str(release), "--key", str(pair.private_pem))
    code, out = run(*args)
    assert code == 2 and "$ARTIFACTCHECK_KEY_PASSPHRASE" in out, out
    assert not Path(f"{release}.intoto.jsonl").exists()
    code, out = run(*args, env={"ARTIFACTCHECK_KEY_PASSPHRASE": "wrong"})
    assert code == 2 and "--key" in out, out
    code, out = run(*args, env={"ARTIFACTCHECK_KEY_PASSPHRASE": "s3cret"})
    assert code == 0, out
    assert Path(f"{release}.intoto.jsonl").is_file()


def test_sign_refuses_a_manifest_that_names_no_version(tmp_path: Path) -> None:
    pair = make_key("ed25519", tmp_path)
    vite = tmp_path / "manifest.json"
    vite.write_text('{"index.html": {"file": "assets/index.js"}}')
    code, out = run("manifest", "sign", str(vite), "--key", str(pair.private_pem))
    assert code == 2 and "not a native release manifest" in out, out
    code, out = run("manifest", "sign", str(release_file(tmp_path)), "--key", str(vite))
    assert code == 2 and "--key" in out, out


@pytest.mark.parametrize(
    ("env", "given", "expected"),
    [
        (
            {
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_REPOSITORY": "acme/shop",
                "GITHUB_SHA": "f00",
                "GITHUB_RUN_ID": "42",
                "RUNNER_NAME": "r1",
            },
            {},
            {
                "repository": "https://github.com/acme/shop",
                "commit": "f00",
                "builder": "https://github.com/acme/shop/actions/runs/42",
                "runner": "r1",
            },
        ),
        (
            {
                "CI_PROJECT_URL": "https://gitlab.example/acme/shop",
                "CI_COMMIT_SHA": "b4r",
                "CI_JOB_URL": "https://gitlab.example/acme/shop/-/jobs/7",
            },
            {"commit": "override"},
            {
                "repository": "https://gitlab.example/acme/shop",
                "commit": "override",
                "builder": "https://gitlab.example/acme/shop/-/jobs/7",
            },
        ),
        ({}, {"repository": "git@x:y", "commit": None}, {"repository": "git@x:y"}),
        ({"PATH": "/bin"}, {}, {}),
    ],
    ids=["github", "gitlab-with-option", "options-only", "nothing-guessed"],
)
def test_build_metadata_comes_from_options_then_ci_variables(
    env: dict[str, str], given: dict[str, str | None], expected: dict[str, str]
) -> None:
    assert build_metadata(env, given) == expected


def test_pins_accept_without_a_digest_adopts_only_a_single_recorded_change(
    tmp_path: Path,
) -> None:
    """Runs record B, then C, for 1.0.0 (pinned A); a person reviewed B. Accepting
    without --digest is exit 2 listing both, the pins unchanged; naming B adopts B."""
    pins = tmp_path / "pins.json"
    digests = []
    for body in ("build A", "build B", "build C"):
        dist = tmp_path / "dist"
        (dist / "index.html").parent.mkdir(exist_ok=True)
        (dist / "index.html").write_text(body)
        release = tmp_path / "1.0.0.json"
        release.write_bytes(native.dump(native.build(dist, version="1.0.0")))
        digests.append(hashlib.sha256(release.read_bytes()).hexdigest())
        code, out = run("verify", *TARGET, "--release-manifest", str(release), "--pins", str(pins))
        assert code in (1, 3), out  # unreachable; changed from the second run on
        if body == "build B":
            code, out = run("pins", "show", "--pins", str(pins))
            assert out.count("changed:") == 1 and digests[1] in out, out
    a, b, c = digests
    code, out = run("pins", "show", "--pins", str(pins))
    assert code == 0 and out.count("changed:") == 2 and b in out and c in out, out
    before = pins.read_bytes()
    code, out = run("pins", "accept", "1.0.0", "--pins", str(pins))
    assert code == 2, out
    assert "2 different changed releases" in out and b in out and c in out, out
    assert pins.read_bytes() == before
    code, out = run("pins", "accept", "1.0.0", "--digest", b, "--pins", str(pins))
    assert code == 0 and f"pinned 1.0.0 to sha256 {b}" in out, out
    entry = json.loads(pins.read_text())["versions"]["1.0.0"]
    assert set(entry) == {"pinned"} and entry["pinned"]["sha256"] == b  # no change left
    assert a not in pins.read_text()


def test_pins_accept_without_a_digest_prints_the_one_change_it_adopts(tmp_path: Path) -> None:
    from artifactcheck.release.pins import FilePins

    pins = tmp_path / "pins.json"
    store = FilePins(pins)
    for data in (b"A", b"B"):
        store.observe("1.0.0", hashlib.sha256(data).hexdigest(), f"https://r/{data.decode()}", data)
    code, out = run("pins", "accept", "1.0.0", "--pins", str(pins))
    b = hashlib.sha256(b"B").hexdigest()
    assert code == 0 and f"pinned 1.0.0 to sha256 {b} (https://r/B)" in out, out
