"""Pins: the first manifest per version is kept; a change is recorded, never adopted."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from artifactcheck.release import pins
from artifactcheck.release.pins import FilePins, PinsDoc, PinsError, Seen

A, B, C = (hashlib.sha256(x).hexdigest() for x in (b"a", b"b", b"c"))


def seen(digest: str, source: str = "https://r/1.json", at: str = "t1") -> Seen:
    return Seen(sha256=digest, source=source, at=at)


def test_the_first_manifest_is_pinned_and_a_different_one_is_a_change() -> None:
    doc, first = pins.observe(PinsDoc(), "1.0.0", seen(A))
    assert first.new and not first.changed and doc.versions["1.0.0"].pinned.sha256 == A
    again_doc, again = pins.observe(doc, "1.0.0", seen(A, at="t2"))
    assert again_doc == doc and not again.changed and not again.new
    changed_doc, changed = pins.observe(doc, "1.0.0", seen(B, at="t3"))
    assert changed.changed and not changed.new
    assert changed_doc.versions["1.0.0"].pinned.sha256 == A  # never adopted
    assert changed_doc.versions["1.0.0"].changed == seen(B, at="t3")
    # the pinned one seen again does not forget the change: only accept does
    later_doc, later = pins.observe(changed_doc, "1.0.0", seen(A, at="t4"))
    assert not later.changed and later_doc.versions["1.0.0"].changed is not None


def test_accept_adopts_the_change_seen_or_the_digest_given() -> None:
    doc, _ = pins.observe(PinsDoc(), "1.0.0", seen(A))
    with pytest.raises(PinsError, match="no changed release was seen"):
        pins.accept(doc, "1.0.0", None, at="t9")
    doc, _ = pins.observe(doc, "1.0.0", seen(B, source="https://r/new.json"))
    adopted, chosen = pins.accept(doc, "1.0.0", None, at="t9")
    assert chosen == seen(B, source="https://r/new.json", at="t9")
    assert adopted.versions["1.0.0"].pinned == chosen and adopted.versions["1.0.0"].changed is None
    by_hand, chosen = pins.accept(doc, "1.0.0", C, at="t9")
    assert by_hand.versions["1.0.0"].pinned.sha256 == C and chosen.source == "accepted by hand"
    new_version, _ = pins.accept(PinsDoc(), "2.0.0", C, at="t9")
    assert new_version.versions["2.0.0"].pinned.sha256 == C


def test_the_document_round_trips() -> None:
    doc, _ = pins.observe(PinsDoc(), "1.0.0", seen(A))
    doc, _ = pins.observe(doc, "1.0.0", seen(B))
    doc, _ = pins.observe(doc, "2.0.0", seen(C))
    data = pins.dump_pins(doc)
    assert json.loads(data)["format"] == pins.FORMAT
    assert pins.parse_pins(data, "p.json") == doc


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{not json", "p.json: not a JSON pins file"),
        (b"[]", "p.json: not an artifactcheck pins file"),
        (b'{"schema": "artifactcheck/pins", "format": 2, "versions": {}}', "newer artifactcheck"),
        (b'{"schema": "artifactcheck/pins", "format": "1"}', "format must be"),
        (b'{"schema": "artifactcheck/pins", "format": 1, "versions": []}', "versions must"),
        (
            b'{"schema": "artifactcheck/pins", "format": 1, "versions": {"1": '
            b'{"pinned": {"sha256": "zz", "source": "s", "at": "t"}}}}',
            "versions.1.pinned.sha256",
        ),
    ],
    ids=["not-json", "not-pins", "newer", "format-type", "versions-type", "bad-digest"],
)
def test_a_bad_pins_file_is_refused_naming_it(data: bytes, reason: str) -> None:
    with pytest.raises(PinsError, match=reason):
        pins.parse_pins(data, "p.json")


def test_the_file_keeps_the_pinned_bytes_beside_it(tmp_path: Path) -> None:
    store = FilePins(tmp_path / "pins.json")
    observed = store.observe("1.0.0", A, "https://r/1.json", b"a")
    assert observed.new
    assert store.release_bytes(A) == b"a"
    assert store.read().versions["1.0.0"].pinned.sha256 == A
    (tmp_path / "pins.json.releases" / A).write_bytes(b"altered")
    assert store.release_bytes(A) is None  # content-addressed: an altered copy is not used
    with pytest.raises(ValueError):
        store.observe("1.0.0", A, "https://r/1.json", b"not a")


def test_a_failed_write_never_truncates_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FilePins(tmp_path / "pins.json")
    store.observe("1.0.0", A, "s", b"a")
    store.keep_bytes(B, b"b")  # kept already: the write that fails is the pins file's
    before = (tmp_path / "pins.json").read_bytes()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(PinsError, match="No space left"):
        store.observe("2.0.0", B, "s", b"b")
    assert (tmp_path / "pins.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "pins.json",
        "pins.json.lock",
        "pins.json.releases",
    ]


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda d: d / "missing" / "pins.json", "does not exist"),
        (lambda d: d, "is a directory"),
    ],
    ids=["no-directory", "a-directory"],
)
def test_a_pins_path_that_cannot_be_written_is_refused(make, reason: str, tmp_path: Path) -> None:
    with pytest.raises(PinsError, match=reason):
        FilePins(make(tmp_path)).check()


def _pin_many(path: str, prefix: str, count: int) -> None:
    store = FilePins(path)
    for i in range(count):
        data = f"{prefix}{i}".encode()
        store.observe(f"{prefix}.{i}", hashlib.sha256(data).hexdigest(), "s", data)


def test_two_runs_at_once_lose_no_pin(tmp_path: Path) -> None:
    path = str(tmp_path / "pins.json")
    ctx = multiprocessing.get_context("spawn")
    runs = [ctx.Process(target=_pin_many, args=(path, p, 40)) for p in ("1", "2")]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
        assert run.exitcode == 0
    doc = FilePins(path).read()
    assert sorted(doc.versions) == sorted(f"{p}.{i}" for p in ("1", "2") for i in range(40))


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=512)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=70),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=12,
    ).map(
        lambda doc: json.dumps(
            {"schema": "artifactcheck/pins", "format": 1, "versions": doc}
        ).encode()
    )
)
def test_no_pins_file_crashes_the_reader(data: bytes) -> None:
    try:
        pins.parse_pins(data, "p.json")
    except PinsError as exc:
        assert str(exc).startswith("p.json: ")


D = hashlib.sha256(b"d").hexdigest()


def recorded(*digests: str) -> PinsDoc:
    """The document after loading each digest in turn for 1.0.0 (the first is pinned)."""
    doc = PinsDoc()
    for i, digest in enumerate(digests):
        doc, _ = pins.observe(doc, "1.0.0", seen(digest, source=f"run{i}", at=f"t{i}"))
    return doc


@pytest.mark.parametrize(
    ("loads", "adopted", "choices"),
    [
        ((A, B), B, None),
        ((A, B, B), B, None),  # the same change seen again is still one change
        ((A, B, A), B, None),  # the pinned one again forgets nothing
        ((A, B, C), None, (B, C)),  # reviewed B, then a run recorded C
        ((A, B, C, B), None, (C, B)),
        ((A, B, C, A, D), None, (B, C, D)),
    ],
    ids=["one", "one-twice", "one-then-pinned", "two", "two-revisited", "three"],
)
def test_accept_without_a_digest_needs_exactly_one_recorded_change(
    loads: tuple[str, ...], adopted: str | None, choices: tuple[str, ...] | None
) -> None:
    doc = recorded(*loads)
    if choices is None:
        after, chosen = pins.accept(doc, "1.0.0", None, at="t9")
        assert chosen.sha256 == adopted and after.versions["1.0.0"].pinned == chosen
        assert after.versions["1.0.0"].changes == ()
        return
    with pytest.raises(pins.AmbiguousAccept) as caught:
        pins.accept(doc, "1.0.0", None, at="t9")
    assert caught.value.digests == choices
    assert isinstance(caught.value, pins.ConfigError)  # exit 2 wherever it is raised
    assert all(d in str(caught.value) for d in choices) and "--digest" in str(caught.value)
    for digest in choices:  # each may be named, and keeps where it was seen
        after, chosen = pins.accept(doc, "1.0.0", digest, at="t9")
        assert after.versions["1.0.0"].pinned.sha256 == digest
        last_seen = len(loads) - 1 - loads[::-1].index(digest)
        assert chosen.source == f"run{last_seen}"


def test_every_change_recorded_round_trips_and_stays_bounded() -> None:
    doc = recorded(A, B, C, D)
    assert [c.sha256 for c in doc.versions["1.0.0"].changes] == [B, C, D]
    assert pins.parse_pins(pins.dump_pins(doc), "p.json") == doc
    many = recorded(A, *(hashlib.sha256(str(i).encode()).hexdigest() for i in range(40)))
    changes = many.versions["1.0.0"].changes
    assert len(changes) == pins.MAX_CHANGES
    assert changes[-1].sha256 == hashlib.sha256(b"39").hexdigest()  # the latest kept


def test_earlier_changes_without_a_latest_one_are_refused() -> None:
    entry = {"sha256": A, "source": "s", "at": "t"}
    data = json.dumps(
        {
            "schema": pins.SCHEMA,
            "format": 1,
            "versions": {"1": {"pinned": entry, "earlier": [entry]}},
        }
    ).encode()
    with pytest.raises(PinsError, match="versions.1.earlier"):
        pins.parse_pins(data, "p.json")
