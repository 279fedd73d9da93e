"""SRI decoding and the pure check of served digests against declared hashes."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from artifactcheck.manifests import (
    DEFAULT_LIMITS,
    MD5_PREFIX,
    algorithms_needed,
    parse_sri,
    verify_integrity,
)
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ManifestLimitError
from artifactcheck.model.values import Manifest, ManifestEntry

BODY = b"console.log('artifactcheck');\n"
SHA256 = hashlib.sha256(BODY)
SHA384 = hashlib.sha384(BODY)
SHA512 = hashlib.sha512(BODY)


def sri(h: Any, *, alphabet: str = "std", pad: bool = True) -> str:
    raw = h.digest()
    text = base64.urlsafe_b64encode(raw) if alphabet == "url" else base64.b64encode(raw)
    value = text.decode()
    return f"{h.name}-{value if pad else value.rstrip('=')}"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (sri(SHA256), {"sha256": SHA256.hexdigest()}),
        (
            f"{sri(SHA256)} {sri(SHA384)}",
            {"sha256": SHA256.hexdigest(), "sha384": SHA384.hexdigest()},
        ),
        (
            f"  {sri(SHA512)}\n\t{sri(SHA384)}  ",
            {"sha512": SHA512.hexdigest(), "sha384": SHA384.hexdigest()},
        ),
        (sri(SHA384, alphabet="url"), {"sha384": SHA384.hexdigest()}),
        (sri(SHA256, pad=False), {"sha256": SHA256.hexdigest()}),
        (sri(SHA256) + "?ct=application/javascript", {"sha256": SHA256.hexdigest()}),
        (sri(SHA256).replace("sha256", "SHA256"), {"sha256": SHA256.hexdigest()}),
        ("", {}),
        (None, {}),
        (42, {}),
        (["sha256-x"], {}),
        ("sha1-" + base64.b64encode(hashlib.sha1(BODY).digest()).decode(), {}),
        ("md5-" + base64.b64encode(hashlib.md5(BODY).digest()).decode(), {}),
        ("sha256-" + base64.b64encode(SHA384.digest()).decode(), {}),  # wrong length
        ("sha256-!!!notbase64!!!", {}),
        ("sha256-", {}),
        ("sha256", {}),
        ("sha256-A=B=", {}),
        (f"{sri(SHA256)} sha256-{base64.b64encode(bytes(32)).decode()}", {}),  # either: unknowable
        (f"{sri(SHA256)} {sri(SHA256)}", {"sha256": SHA256.hexdigest()}),
        (f"{sri(SHA384)} garbage sha999-AAAA", {"sha384": SHA384.hexdigest()}),
    ],
)
def test_parse_sri(value: object, expected: dict[str, str]) -> None:
    assert parse_sri(value, DEFAULT_LIMITS) == expected


def test_parse_sri_has_a_length_cap() -> None:
    with pytest.raises(ManifestLimitError):
        parse_sri(sri(SHA256) * 10, ManifestLimits(max_string=100))


def entry(**hashes: str) -> ManifestEntry:
    return ManifestEntry(path="a.js", hashes=hashes)


COMPUTED = {
    "sha256": SHA256.hexdigest(),
    "sha384": SHA384.hexdigest(),
    "sha1": hashlib.sha1(BODY).hexdigest(),
    "md5": hashlib.md5(BODY).hexdigest(),
}


@pytest.mark.parametrize(
    ("declared", "computed", "bad"),
    [
        ({"sha256": SHA256.hexdigest()}, COMPUTED, []),
        ({"sha256": SHA256.hexdigest().upper()}, COMPUTED, []),
        ({"sha256": "0" * 64}, COMPUTED, ["sha256"]),
        ({"sha256": SHA256.hexdigest(), "sha384": "0" * 96}, COMPUTED, ["sha384"]),
        ({"sha256": "0" * 64, "sha384": "0" * 96}, COMPUTED, ["sha256", "sha384"]),
        ({"sha512": "0" * 128}, COMPUTED, []),  # not computed: not judged
        ({"sha256": "0" * 64}, {}, []),
        ({"sha1": COMPUTED["sha1"]}, COMPUTED, []),
        ({MD5_PREFIX: COMPUTED["md5"][:12]}, COMPUTED, []),
        ({MD5_PREFIX: "0" * 12}, COMPUTED, [MD5_PREFIX]),
        ({MD5_PREFIX: "0" * 12}, {"sha256": SHA256.hexdigest()}, []),
        ({"whirlpool": "00"}, {"whirlpool": "11"}, []),
        ({}, COMPUTED, []),
    ],
)
def test_verify_integrity(
    declared: dict[str, str], computed: dict[str, str], bad: list[str]
) -> None:
    assert verify_integrity(entry(**declared), computed) == bad


def test_algorithms_needed_names_hashlib_algorithms() -> None:
    manifest = Manifest(
        format="x",
        files={
            "a": ManifestEntry(path="a", hashes={"sha256": "0", "sha384": "1"}),
            "b": ManifestEntry(path="b", hashes={"sha1": "2"}),
            "c": ManifestEntry(path="c", hashes={MD5_PREFIX: "3", "whirlpool": "4"}),
            "d": ManifestEntry(path="d"),
        },
    )
    needed = algorithms_needed(manifest)
    assert needed == {"sha256", "sha384", "sha1", "md5"}
    for algo in needed:
        hashlib.new(algo)
    assert algorithms_needed(Manifest(format="x", files={})) == set()
