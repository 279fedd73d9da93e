"""Pins in a shared directory, attacked as another user of it would: links planted at
every name the pins code writes, locks or reads, and the victim file they point to left
exactly as it was.

The runs are real ``verify --pins`` runs (in-process through click's runner, and one in
a subprocess for the next PIDs); the instance is a port nothing listens on, so a run that
read its release and wrote its pins ends in exit 3 (unreachable), and a refused pins
file ends in exit 2 before any request.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from release_keys import make_key

from artifactcheck.cli.main import main
from artifactcheck.clients import filesystem
from artifactcheck.manifests import native
from artifactcheck.release.pins import FilePins, PinsError

TARGET = ("--target", "http://127.0.0.1:9/=1.0.0")  # nothing listens: exit 3 once judged
VICTIM_BYTES = b"root:x:0:0:the victim file, never to be written\n"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def release_file(folder: Path, version: str = "1.0.0", body: str = "hi") -> Path:
    dist = folder / f"dist-{version}-{hashlib.sha256(body.encode()).hexdigest()[:6]}"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "index.html").write_text(body)
    path = folder / f"{version}.json"
    path.write_bytes(native.dump(native.build(dist, version=version)))
    return path


def verify_args(shared: Path, *extra: str) -> list[str]:
    release = release_file(shared.parent / "releases")
    return ["verify", *TARGET, "--release-manifest", str(release), "--deadline", "5", *extra]


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A directory others can write in, where the pins are kept."""
    folder = tmp_path / "shared"
    folder.mkdir()
    return folder


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Path]:
    """A file the attacker wants overwritten; checked unchanged after each test."""
    path = tmp_path / "victim"
    path.write_bytes(VICTIM_BYTES)
    before = path.stat()
    yield path
    after = path.stat()
    assert path.read_bytes() == VICTIM_BYTES
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )


def plant(link: Path, target: Path) -> Path:
    link.symlink_to(target)
    return link


def last_pid() -> int:
    return int(Path("/proc/sys/kernel/ns_last_pid").read_text())


def pinned_digest(pins: Path) -> str:
    doc = json.loads(pins.read_text())
    return str(doc["versions"]["1.0.0"]["pinned"]["sha256"])


def assert_regular(path: Path) -> None:
    assert path.is_file() and not path.is_symlink(), path


# -- row: predictable temporary names ---------------------------------------------------


def test_links_at_this_process_s_temporary_names_are_never_followed(
    shared: Path, victim: Path
) -> None:
    """The names ``.pins.json.tmp<pid>`` (the pins file's) and the release copy's, for
    this process: each a link to the victim, each left a link."""
    pins = shared / "pins.json"
    releases = shared / "pins.json.releases"
    releases.mkdir()
    pid = os.getpid()
    links = [plant(shared / f".pins.json.tmp{pid}", victim)]
    args = verify_args(shared, "--pins", str(pins))
    digest = hashlib.sha256(Path(args[args.index("--release-manifest") + 1]).read_bytes())
    links.append(plant(releases / f".{digest.hexdigest()}.tmp{pid}", victim))
    code, out = run(*args)
    assert code == 3, out  # judged (unreachable), pins written
    assert_regular(pins)
    assert pinned_digest(pins) == digest.hexdigest()
    assert_regular(releases / digest.hexdigest())
    assert all(link.is_symlink() and link.readlink() == victim for link in links)


def test_links_for_the_next_pids_are_never_followed_by_a_new_process(
    shared: Path, victim: Path
) -> None:
    """A subprocess, with a link at ``.pins.json.tmp<pid>`` for the next 400 PIDs."""
    pins = shared / "pins.json"
    start = last_pid() + 1
    for pid in range(start, start + 400):
        plant(shared / f".pins.json.tmp{pid}", victim)
    argv = [sys.executable, "-m", "artifactcheck", *verify_args(shared, "--pins", str(pins))]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr[-800:]
    assert_regular(pins)
    assert "1.0.0" in json.loads(pins.read_text())["versions"]


def test_a_guessed_random_name_makes_the_write_take_another(
    shared: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The random temporary names, guessed: the attacker planted links at the first
    three names the run will draw (for the pins file and the release copy alike); each
    create fails (O_EXCL | O_NOFOLLOW), the next name is drawn, the victim is untouched."""
    drawn = iter([f"guess{i}" for i in range(3)] + [f"fresh{i}" for i in range(100)])
    monkeypatch.setattr(filesystem.secrets, "token_hex", lambda _n: next(drawn))
    pins = shared / "pins.json"
    releases = shared / "pins.json.releases"
    releases.mkdir()
    args = verify_args(shared, "--pins", str(pins))
    digest = hashlib.sha256(Path(args[args.index("--release-manifest") + 1]).read_bytes())
    for i in range(3):
        plant(shared / f".pins.json.guess{i}.tmp", victim)
        plant(releases / f".{digest.hexdigest()}.guess{i}.tmp", victim)
    code, out = run(*args)
    assert code == 3, out
    assert_regular(pins)
    assert_regular(releases / digest.hexdigest())
    assert sorted(p.name for p in shared.iterdir() if not p.is_symlink()) == [
        "pins.json",
        "pins.json.lock",
        "pins.json.releases",
    ], "no temporary file left behind"


def test_when_every_name_drawn_is_taken_the_write_fails_and_nothing_is_followed(
    tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filesystem.secrets, "token_hex", lambda _n: "taken")
    plant(tmp_path / ".out.taken.tmp", victim)
    with pytest.raises(FileExistsError):
        filesystem.write_atomically(tmp_path / "out", b"data")
    assert not (tmp_path / "out").exists()


# -- row: the lock file and FILE.releases ------------------------------------------------


def test_a_link_at_the_lock_file_is_exit_2_naming_it(shared: Path, victim: Path) -> None:
    pins = shared / "pins.json"
    plant(shared / "pins.json.lock", victim)
    code, out = run(*verify_args(shared, "--pins", str(pins)))
    assert code == 2, out
    assert f"{shared / 'pins.json.lock'}: is a symbolic link (to {victim})" in out
    assert not pins.exists()


def test_a_dangling_link_at_the_lock_file_creates_nothing(shared: Path, tmp_path: Path) -> None:
    """``O_CREAT`` through a dangling link would create the file it names."""
    wanted = tmp_path / "created-by-the-link"
    plant(shared / "pins.json.lock", wanted)
    store = FilePins(shared / "pins.json")
    with pytest.raises(PinsError, match="pins.json.lock: cannot lock: is a symbolic link"):
        store.accept("1.0.0", "a" * 64)  # past check(): the lock itself refuses
    assert not wanted.exists() and not os.path.lexists(wanted)
    assert not (shared / "pins.json").exists()


def test_a_link_at_the_releases_directory_is_exit_2_and_nothing_lands_there(
    shared: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant(shared / "pins.json.releases", elsewhere)
    code, out = run(*verify_args(shared, "--pins", str(shared / "pins.json")))
    assert code == 2, out
    assert f"{shared / 'pins.json.releases'}: is a symbolic link" in out
    assert list(elsewhere.iterdir()) == []


def test_the_releases_directory_swapped_for_a_link_mid_run_receives_nothing(
    shared: Path, tmp_path: Path
) -> None:
    """Past the check before any request: keeping a manifest's bytes refuses the link."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = FilePins(shared / "pins.json")
    store.check()
    plant(shared / "pins.json.releases", elsewhere)
    data = b"manifest bytes"
    with pytest.raises(PinsError, match="pins.json.releases: cannot write: is a symbolic link"):
        store.observe("1.0.0", hashlib.sha256(data).hexdigest(), "here", data)
    assert list(elsewhere.iterdir()) == []
    assert store.release_bytes(hashlib.sha256(data).hexdigest()) is None


def test_a_link_at_a_kept_release_is_refused_and_never_read_or_written(
    shared: Path, victim: Path
) -> None:
    """``FILE.releases/<sha256>`` a link to the victim: the run cannot keep the copy, so
    that version is inconclusive (exit 3), saying why; the victim is neither written nor
    read as the pinned copy."""
    pins = shared / "pins.json"
    args = verify_args(shared, "--pins", str(pins), "--output", "json")
    digest = hashlib.sha256(Path(args[args.index("--release-manifest") + 1]).read_bytes())
    releases = shared / "pins.json.releases"
    releases.mkdir()
    plant(releases / digest.hexdigest(), victim)
    code, out = run(*args)
    assert code == 3, out
    assert "is a symbolic link" in out and digest.hexdigest() in out
    store = FilePins(pins)
    assert store.release_bytes(digest.hexdigest()) is None
    assert (releases / digest.hexdigest()).is_symlink()


# -- row: the pins file itself a link ------------------------------------------------------


def test_a_pins_file_that_is_a_link_is_exit_2_naming_it_and_both_are_left_alone(
    shared: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache" / "pins.json"
    cache.parent.mkdir()
    run(*verify_args(tmp_path / "cache", "--pins", str(cache)))  # a real pins file there
    cached = cache.read_bytes()
    link = plant(shared / "pins.json", cache)
    for args in (
        verify_args(shared, "--pins", str(link)),
        ["pins", "accept", "1.0.0", "--digest", "b" * 64, "--pins", str(link)],
        ["pins", "show", "--pins", str(link)],
    ):
        code, out = run(*args)
        assert code == 2, (args, out)
        assert f"--pins {link}: is a symbolic link (to {cache})" in out, out
        assert "give the path it points to" in out
    assert link.is_symlink() and cache.read_bytes() == cached
    code, out = run("pins", "show", "--pins", str(cache))  # the path it points to works
    assert code == 0 and "1.0.0" in out, out


def test_a_signature_envelope_is_never_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    pair = make_key("ed25519", tmp_path)
    release = release_file(tmp_path / "rel")
    plant(Path(f"{release}.intoto.jsonl"), victim)
    code, out = run("manifest", "sign", str(release), "--key", str(pair.private_pem))
    assert code == 2, out
    assert "is a symbolic link" in out


def test_a_pins_file_swapped_for_a_link_after_the_check_is_never_read(
    shared: Path, tmp_path: Path
) -> None:
    """The attacker's own pins (their digest pinned), linked in after the check before any
    request: read, they would be believed; the run refuses them instead."""
    theirs = tmp_path / "theirs.json"
    FilePins(theirs).accept("1.0.0", "e" * 64)
    store = FilePins(shared / "pins.json")
    store.check()
    plant(shared / "pins.json", theirs)
    with pytest.raises(PinsError, match="pins.json: cannot read: is a symbolic link"):
        store.read()
    data = b"the real release"
    with pytest.raises(PinsError, match="is a symbolic link"):
        store.observe("1.0.0", hashlib.sha256(data).hexdigest(), "here", data)
    assert pinned_digest(theirs) == "e" * 64
