"""A ``--release-key`` file holding a key rotation: every key in it is used, or the file
is refused (exit 2) naming it; never the first key read and the rest ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from release_keys import KeyPair, make_key

from artifactcheck.cli.main import main
from artifactcheck.manifests import native
from artifactcheck.release import dsse

TARGET = ("--target", "http://127.0.0.1:9/=1.0.0")  # nothing listens: exit 3 once judged
GARBAGE_BLOCK = b"-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----\n"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def rotation(tmp_path: Path) -> tuple[KeyPair, KeyPair, Path]:
    """The old key (P-256) and the new one (Ed25519) in one PEM file, old first."""
    old, new = make_key("p256", tmp_path, "old"), make_key("ed25519", tmp_path, "new")
    both = tmp_path / "release-keys.pub"
    both.write_bytes(old.public_pem.read_bytes() + new.public_pem.read_bytes())
    return old, new, both


def signed_release(tmp_path: Path, key: KeyPair) -> Path:
    dist = tmp_path / "dist"
    dist.mkdir(exist_ok=True)
    (dist / "index.html").write_text("hi")
    release = tmp_path / "1.0.0.json"
    release.write_bytes(native.dump(native.build(dist, version="1.0.0")))
    code, out = run("manifest", "sign", str(release), "--key", str(key.private_pem))
    assert code == 0, out
    return release


def untrusted(out: str) -> list[str]:
    doc = json.loads(out[out.index("{") :])
    return [f["message"] for f in doc["findings"] if f["kind"] == "release-untrusted"]


def test_every_key_of_a_rotation_file_is_read(tmp_path: Path) -> None:
    old, new, both = rotation(tmp_path)
    keys = dsse.load_public_keys(b"# rotated 2026-12\n" + both.read_bytes(), "both.pub")
    assert [k.keyid for k in keys] == [
        dsse.keyid_of(old.private.public_key()),
        dsse.keyid_of(new.private.public_key()),
    ]
    once = dsse.load_public_keys(both.read_bytes() + old.public_pem.read_bytes(), "k")
    assert len(once) == 2  # the same key twice is one key


def test_an_envelope_signed_by_the_second_key_verifies(tmp_path: Path) -> None:
    _, new, both = rotation(tmp_path)
    data = b'{"schema": "artifactcheck/release-manifest/v1", "version": "1.0.0", "files": {}}'
    body = dsse.statement(name="1.0.0.json", data=data, version="1.0.0", build={})
    envelope = dsse.sign_envelope(dsse.canonical(body), new.private)
    keys = dsse.load_public_keys(both.read_bytes(), str(both))
    got = dsse.verify_release(dsse.envelope_line(envelope), keys=keys, data=data, version="1.0.0")
    assert got.keyid == dsse.keyid_of(new.private.public_key())


@pytest.mark.parametrize("signer", ["old", "new"])
def test_verify_trusts_a_release_signed_by_either_key_of_the_file(
    signer: str, tmp_path: Path
) -> None:
    old, new, both = rotation(tmp_path)
    release = signed_release(tmp_path, old if signer == "old" else new)
    args = ("verify", *TARGET, "--release-manifest", str(release), "--output", "json")
    code, out = run(*args, "--release-key", str(both))
    assert code == 3, out  # judged: the instance is unreachable, the release trusted
    assert untrusted(out) == []
    stranger = make_key("ed25519", tmp_path, "stranger")
    code, out = run(*args, "--release-key", str(stranger.public_pem))
    assert code == 3 and "signed by no configured release key" in " ".join(untrusted(out)), out


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (GARBAGE_BLOCK, "key 2 of 2: not a PEM public key"),
        (b"-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n", "without its matching END line"),
        (b"-----END PUBLIC KEY-----\n", "without its matching END line"),
    ],
    ids=["garbage-block", "begin-without-end", "stray-end"],
)
def test_a_file_with_one_valid_and_one_bad_block_is_exit_2_naming_it(
    tail: bytes, reason: str, tmp_path: Path
) -> None:
    old, _, _ = rotation(tmp_path)
    mixed = tmp_path / "mixed.pub"
    mixed.write_bytes(old.public_pem.read_bytes() + tail)
    release = signed_release(tmp_path, old)
    code, out = run(
        "verify", *TARGET, "--release-manifest", str(release), "--release-key", str(mixed)
    )
    assert code == 2, out
    assert f"--release-key {mixed}" in out and reason in out, out


def test_one_key_expected_and_several_found_is_refused(tmp_path: Path) -> None:
    """``load_public_key`` (one key, for callers holding one) never keeps the first."""
    _, _, both = rotation(tmp_path)
    with pytest.raises(dsse.KeyFileError, match="holds 2 keys where one is expected"):
        dsse.load_public_key(both.read_bytes(), "both.pub")
