"""``artifactcheck manifest verify``: a user checks downloaded files against a signed
release manifest before installing them. Exit 0 only when the envelope is signed by
the given key for this very manifest and every file is the one the manifest records;
1 when anything is not; 2 when a file, key or manifest cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from release_keys import KeyPair, make_key

from artifactcheck.cli.main import main
from artifactcheck.manifests import native


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture
def release(tmp_path: Path) -> tuple[Path, Path, KeyPair]:
    """A signed release of three files (two of them named alike) and its key."""
    dist = tmp_path / "dist"
    (dist / "sim").mkdir(parents=True)
    (dist / "app-1.0.0.whl").write_bytes(b"the wheel")
    (dist / "app-1.0.0.tar.gz").write_bytes(b"the sdist")
    (dist / "sim" / "app-1.0.0.tar.gz").write_bytes(b"the simulator's sdist")
    manifest = tmp_path / "app-1.0.0.release.json"
    manifest.write_bytes(native.dump(native.build(dist, version="1.0.0")))
    key = make_key("ed25519", tmp_path)
    code, out = run("manifest", "sign", str(manifest), "--key", str(key.private_pem))
    assert code == 0, out
    return dist, manifest, key


def verify(manifest: Path, key: Path, *files: Path) -> tuple[int, str]:
    return run(
        "manifest", "verify", *map(str, files), "--manifest", str(manifest), "--key", str(key)
    )


def test_the_release_files_as_downloaded_verify(
    release: tuple[Path, Path, KeyPair], tmp_path: Path
) -> None:
    dist, manifest, key = release
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    wheel = downloads / "app-1.0.0.whl"  # saved elsewhere, under its own name
    wheel.write_bytes((dist / "app-1.0.0.whl").read_bytes())
    code, out = verify(manifest, key.public_pem, wheel, dist / "sim" / "app-1.0.0.tar.gz")
    assert code == 0, out
    assert "version 1.0.0" in out
    assert out.count("\nok ") == 2, out


def test_a_changed_download_fails_naming_both_hashes(
    release: tuple[Path, Path, KeyPair], tmp_path: Path
) -> None:
    dist, manifest, key = release
    (dist / "app-1.0.0.whl").write_bytes(b"the wheel, rebuilt")
    code, out = verify(manifest, key.public_pem, dist / "app-1.0.0.whl")
    assert code == 1, out
    assert "DIFFERS" in out and "app-1.0.0.whl" in out


def test_a_file_the_release_does_not_have_fails(
    release: tuple[Path, Path, KeyPair], tmp_path: Path
) -> None:
    _, manifest, key = release
    stray = tmp_path / "app-1.0.1.whl"
    stray.write_bytes(b"the wheel")  # the right bytes under a name the release has not
    code, out = verify(manifest, key.public_pem, stray)
    assert code == 1, out
    assert "NOT IN" in out


def test_two_files_of_one_name_are_told_apart_by_their_path(
    release: tuple[Path, Path, KeyPair],
) -> None:
    dist, manifest, key = release
    code, out = verify(
        manifest, key.public_pem, dist / "app-1.0.0.tar.gz", dist / "sim" / "app-1.0.0.tar.gz"
    )
    assert code == 0, out
    # saved elsewhere under the shared name: the release's file of exactly that path
    elsewhere = dist.parent / "app-1.0.0.tar.gz"
    elsewhere.write_bytes(b"the simulator's sdist")
    code, out = verify(manifest, key.public_pem, elsewhere)
    assert code == 1 and "DIFFERS" in out, out


def test_a_shared_name_no_path_tells_apart_exits_2(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    for folder in ("a", "b"):
        (dist / folder).mkdir(parents=True)
        (dist / folder / "x.tar.gz").write_bytes(folder.encode())
    manifest = tmp_path / "r.json"
    manifest.write_bytes(native.dump(native.build(dist, version="1.0.0")))
    key = make_key("ed25519", tmp_path)
    assert run("manifest", "sign", str(manifest), "--key", str(key.private_pem))[0] == 0
    download = tmp_path / "x.tar.gz"
    download.write_bytes(b"a")
    code, out = verify(manifest, key.public_pem, download)
    assert code == 2, out
    assert f"FILE {download}: the release has several files named x.tar.gz" in out


def test_a_manifest_changed_after_signing_fails_before_any_file(
    release: tuple[Path, Path, KeyPair],
) -> None:
    """Whoever swaps a download and rewrites the manifest to match cannot re-sign it."""
    dist, manifest, key = release
    (dist / "app-1.0.0.whl").write_bytes(b"a planted wheel")
    manifest.with_name(manifest.name + ".intoto.jsonl").rename(manifest.parent / "envelope")
    manifest.write_bytes(native.dump(native.build(dist, version="1.0.0")))
    code, out = run(
        "manifest", "verify", str(dist / "app-1.0.0.whl"), "--manifest", str(manifest),
        "--envelope", str(manifest.parent / "envelope"), "--key", str(key.public_pem),
    )  # fmt: skip
    assert code == 1, out
    assert "NOT SIGNED" in out and "signed for other bytes" in out
    assert "ok " not in out


def test_a_release_signed_by_another_key_fails(
    release: tuple[Path, Path, KeyPair], tmp_path: Path
) -> None:
    dist, manifest, _ = release
    (tmp_path / "other").mkdir()
    other = make_key("p256", tmp_path / "other")
    code, out = verify(manifest, other.public_pem, dist / "app-1.0.0.whl")
    assert code == 1, out
    assert "NOT SIGNED" in out


@pytest.mark.parametrize("missing", ["--key", "--manifest", "--envelope", "FILE"])
def test_what_cannot_be_read_exits_2_naming_it(
    missing: str, release: tuple[Path, Path, KeyPair], tmp_path: Path
) -> None:
    dist, manifest, key = release
    nowhere = str(tmp_path / "nowhere")
    paths = {
        "FILE": str(dist / "app-1.0.0.whl"),
        "--manifest": str(manifest),
        "--key": str(key.public_pem),
    }
    extra: list[str] = []
    if missing == "--envelope":
        extra = ["--envelope", nowhere]
    else:
        paths[missing] = nowhere
    code, out = run(
        "manifest", "verify", paths["FILE"], "--manifest", paths["--manifest"],
        "--key", paths["--key"], *extra,
    )  # fmt: skip
    assert code == 2, out
    assert f"{missing} {nowhere}" in out
