"""Native entries hold their sha256 as 32 bytes (``Sha256Hashes``) to keep the release
manifest cache small; the mapping must read exactly as the ``{"sha256": hex}`` dict
it replaces, and the native reader must accept and refuse exactly the same digests."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle

import pytest

from artifactcheck.manifests import native
from artifactcheck.manifests.integrity import is_hex
from artifactcheck.manifests.limits import DEFAULT_LIMITS
from artifactcheck.model.errors import ManifestFormatError
from artifactcheck.model.values import ManifestEntry, Sha256Hashes

HEX = hashlib.sha256(b"bundle").hexdigest()


def test_reads_as_the_dict_it_replaces() -> None:
    compact = Sha256Hashes(bytes.fromhex(HEX))
    plain = {"sha256": HEX}
    assert compact == plain and plain == compact and not compact != plain  # noqa: SIM201
    assert compact != {"sha256": HEX, "md5": "x"} and compact != {"sha384": HEX}
    assert compact != {"sha256": HEX.upper()}  # hex is lowercase, as the dict held it
    assert dict(compact) == plain and list(compact.items()) == list(plain.items())
    assert repr(compact) == repr(plain) and len(compact) == 1 and bool(compact)
    assert compact["sha256"] == compact.get("sha256") == HEX
    assert compact.get("md5") is None and compact.get("md5", "d") == "d"
    assert "sha256" in compact and "md5" not in compact
    with pytest.raises(KeyError):
        compact["md5"]
    with pytest.raises(AttributeError):
        compact.digest = b"\0" * 32  # type: ignore[misc]
    with pytest.raises(ValueError):
        Sha256Hashes(b"short")
    entry = ManifestEntry(path="a.js", hashes=compact, size=3)
    assert entry == ManifestEntry(path="a.js", hashes=plain, size=3)
    assert pickle.loads(pickle.dumps(entry)) == entry and copy.deepcopy(entry) == entry
    assert json.dumps(dict(entry.hashes)) == json.dumps(plain)


def test_from_hex_keeps_anything_but_lowercase_hex_as_given() -> None:
    assert type(Sha256Hashes.from_hex(HEX)) is Sha256Hashes
    for odd in (HEX.upper(), HEX[:-1], HEX + "0", " " + HEX[1:], "z" * 64, ""):
        kept = Sha256Hashes.from_hex(odd)
        assert type(kept) is dict and kept == {"sha256": odd}


@pytest.mark.parametrize(
    "value",
    [
        HEX,
        HEX.upper(),
        HEX[:63],
        HEX + "a",
        " " + HEX[1:],
        HEX[:62] + " a",
        HEX[:63] + "g",
        "\u0660" * 64,  # Arabic-Indic zeros: digits, not hex digits
        HEX[:63] + "\u00e9",
        None,
        64,
        ["a"],
    ],
)
def test_the_native_reader_accepts_exactly_what_is_hex_accepts(value: object) -> None:
    doc = {"schema": native.SCHEMA, "files": {"a.js": {"sha256": value, "size": 1}}}
    if is_hex(value, 64):
        got = native.parse(doc, limits=DEFAULT_LIMITS).files["a.js"]
        assert got.hashes == {"sha256": value.lower()}  # type: ignore[union-attr]
        assert type(got.hashes) is Sha256Hashes
    else:
        with pytest.raises(ManifestFormatError, match=r"sha256 invalid"):
            native.parse(doc, limits=DEFAULT_LIMITS)


def test_entry_points_are_flagged_as_before() -> None:
    files = {p: {"sha256": HEX, "size": 1} for p in ("index.html", "a/index.html", "b.js", "c.js")}
    doc = {"schema": native.SCHEMA, "files": files, "entrypoints": ["b.js", "gone.js", 3]}
    got = native.parse(doc, limits=DEFAULT_LIMITS).files
    assert {p for p, e in got.items() if e.entry} == {"index.html", "a/index.html", "b.js"}


def test_a_built_manifest_writes_what_it_was_given() -> None:
    builder = native.Builder(version="1.0.0")
    builder.add("x/index.html", HEX, 10)
    builder.add("y.js", HEX.upper(), 11)  # not lowercase hex: kept as given, as before
    built = builder.manifest()
    assert type(built.files["x/index.html"].hashes) is Sha256Hashes
    assert built.files["y.js"].hashes == {"sha256": HEX.upper()}
    doc = json.loads(native.dump(built))
    assert doc["files"] == {
        "x/index.html": {"sha256": HEX, "size": 10},
        "y.js": {"sha256": HEX.upper(), "size": 11},
    }
    again = native.parse(doc, limits=DEFAULT_LIMITS)
    assert again.files["x/index.html"] == built.files["x/index.html"]
