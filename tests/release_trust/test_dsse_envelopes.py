"""DSSE envelopes of release statements: what vouches, and every way one does not."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from release_keys import KINDS, KeyPair, make_key

from artifactcheck.release import dsse

MANIFEST = b'{"schema": "artifactcheck/release-manifest/v1", "version": "1.4.2", "files": {}}'


def envelope(
    pair: KeyPair, *, data: bytes = MANIFEST, version: str = "1.4.2", **statement: Any
) -> dict[str, Any]:
    body = dsse.statement(name="1.4.2.json", data=data, version=version, build={"commit": "abc"})
    body.update(statement)
    return dsse.sign_envelope(dsse.canonical(body), pair.private)


def public(pair: KeyPair) -> dsse.PublicKey:
    return dsse.load_public_key(pair.public_pem.read_bytes(), str(pair.public_pem))


def line(doc: object) -> bytes:
    return json.dumps(doc).encode() + b"\n"


def test_pae_is_the_dsse_v1_encoding() -> None:
    # the example of the DSSE v1 protocol document
    assert (
        dsse.pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_signed_release_verifies_with_its_key(kind: str, tmp_path: Path) -> None:
    pair = make_key(kind, tmp_path)
    got = dsse.verify_release(
        line(envelope(pair)), keys=[public(pair)], data=MANIFEST, version="1.4.2"
    )
    assert got.keyid == public(pair).keyid
    assert got.predicate == {"version": "1.4.2", "build": {"commit": "abc"}}


def test_any_one_of_two_keys_suffices(tmp_path: Path) -> None:
    old, new = make_key("p256", tmp_path, "old"), make_key("ed25519", tmp_path, "new")
    keys = [public(old), public(new)]
    for pair in (old, new):
        got = dsse.verify_release(line(envelope(pair)), keys=keys, data=MANIFEST, version="1.4.2")
        assert got.keyid == public(pair).keyid


def _tampered_sig(doc: dict[str, Any]) -> dict[str, Any]:
    sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
    sig[-1] ^= 1
    doc["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    return doc


def _payload(doc: dict[str, Any], body: bytes) -> dict[str, Any]:
    doc["payload"] = base64.b64encode(body).decode()
    return doc


Mutate = Callable[[dict[str, Any]], object]

REJECTED: list[tuple[str, Mutate, str]] = [
    ("bad signature", _tampered_sig, "bad signature"),
    ("payload swapped", lambda d: _payload(d, b'{"_type": "x"}'), "bad signature"),
    ("payload type", lambda d: {**d, "payloadType": "text/plain"}, "payloadType"),
    ("no signatures", lambda d: {**d, "signatures": []}, "no signatures"),
    ("signatures not a list", lambda d: {**d, "signatures": "x"}, "no signatures"),
    ("signature not an object", lambda d: {**d, "signatures": [1]}, "not an object"),
    ("sig not base64", lambda d: {**d, "signatures": [{"keyid": "", "sig": "%%"}]}, "base64"),
    ("payload not base64", lambda d: {**d, "payload": 7}, "base64"),
    ("not an object", lambda d: [d], "not a JSON object"),
    ("many signatures", lambda d: {**d, "signatures": d["signatures"] * 17}, "17 signatures"),
]


@pytest.mark.parametrize(("case", "mutate", "reason"), REJECTED, ids=[c[0] for c in REJECTED])
def test_a_malformed_or_altered_envelope_is_rejected(
    case: str, mutate: Mutate, reason: str, tmp_path: Path
) -> None:
    pair = make_key("p256", tmp_path)
    with pytest.raises(dsse.EnvelopeRejected, match=reason):
        dsse.verify_release(
            line(mutate(envelope(pair))), keys=[public(pair)], data=MANIFEST, version="1.4.2"
        )


def test_an_unknown_key_is_named_as_such(tmp_path: Path) -> None:
    mine, theirs = make_key("ed25519", tmp_path, "mine"), make_key("ed25519", tmp_path, "theirs")
    with pytest.raises(dsse.EnvelopeRejected, match="signed by no configured release key"):
        dsse.verify_release(
            line(envelope(theirs)), keys=[public(mine)], data=MANIFEST, version="1.4.2"
        )


@pytest.mark.parametrize(
    ("statement", "data", "version", "reason"),
    [
        ({}, MANIFEST + b" ", "1.4.2", "signed for other bytes"),
        ({}, MANIFEST, "1.4.3", "signed for version '1.4.2', the manifest declares 1.4.3"),
        ({"_type": "https://in-toto.io/Statement/v0.1"}, MANIFEST, "1.4.2", "Statement v1"),
        ({"predicateType": "https://slsa.dev/provenance/v1"}, MANIFEST, "1.4.2", "predicateType"),
        ({"subject": "x"}, MANIFEST, "1.4.2", "subject is not a list"),
        ({"predicate": ["1.4.2"]}, MANIFEST, "1.4.2", "signed for version 'None'"),
    ],
    ids=["digest", "version", "statement-type", "predicate-type", "subject", "predicate"],
)
def test_a_validly_signed_statement_about_something_else_is_rejected(
    statement: dict[str, Any], data: bytes, version: str, reason: str, tmp_path: Path
) -> None:
    pair = make_key("ed25519", tmp_path)
    with pytest.raises(dsse.EnvelopeRejected, match=reason.replace("(", r"\(")):
        dsse.verify_release(
            line(envelope(pair, **statement)), keys=[public(pair)], data=data, version=version
        )


def test_one_good_envelope_among_others_vouches(tmp_path: Path) -> None:
    pair, other = make_key("p256", tmp_path), make_key("p256", tmp_path, "other")
    file = line(envelope(other)) + b"not json\n" + line(envelope(pair))
    got = dsse.verify_release(file, keys=[public(pair)], data=MANIFEST, version="1.4.2")
    assert got.keyid == public(pair).keyid


@pytest.mark.parametrize(
    ("file", "reason"),
    [
        (b"", "empty"),
        (b"\n \n", "empty"),
        (b"{" * 100_000, "not JSON"),
        (b" " * (dsse.MAX_ENVELOPE_BYTES + 1), "bytes"),
        (b"{}\n" * (dsse.MAX_ENVELOPES + 1), "lines"),
    ],
    ids=["empty", "blank", "deep", "huge", "many-lines"],
)
def test_a_hostile_envelope_file_is_rejected(file: bytes, reason: str, tmp_path: Path) -> None:
    pair = make_key("ed25519", tmp_path)
    with pytest.raises(dsse.EnvelopeRejected, match=reason):
        dsse.verify_release(file, keys=[public(pair)], data=MANIFEST, version="1.4.2")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048) | st.text(max_size=512).map(str.encode))
def test_no_input_crashes_the_check(file: bytes) -> None:
    key = dsse.PublicKey(
        key=ec.generate_private_key(ec.SECP256R1()).public_key(), keyid="k", where="k"
    )
    with pytest.raises(dsse.EnvelopeRejected):
        dsse.verify_release(file, keys=[key], data=MANIFEST, version="1.4.2")


def _pem_of(key: Any, private: bool) -> bytes:
    if private:
        return key.private_bytes(  # type: ignore[no-any-return]
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    return key.public_key().public_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@pytest.mark.parametrize(
    ("pem", "reason"),
    [
        (lambda: _pem_of(ec.generate_private_key(ec.SECP256R1()), True), "a private key"),
        (lambda: _pem_of(ec.generate_private_key(ec.SECP384R1()), False), "only P-256"),
        (lambda: _pem_of(rsa.generate_private_key(65537, 2048), False), "supported: ECDSA"),
        (lambda: b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "not a PEM"),
        (lambda: b"hello", "not a PEM"),
    ],
    ids=["private", "p384", "rsa", "garbage-pem", "not-pem"],
)
def test_only_a_supported_public_key_is_a_release_key(
    pem: Callable[[], bytes], reason: str
) -> None:
    with pytest.raises(dsse.KeyFileError, match=reason):
        dsse.load_public_key(pem(), "key.pem")


def test_an_encrypted_private_key_needs_its_passphrase(tmp_path: Path) -> None:
    pair = make_key("p256", tmp_path, passphrase=b"s3cret")
    data = pair.private_pem.read_bytes()
    with pytest.raises(dsse.PassphraseNeeded):
        dsse.load_private_key(data, "k")
    with pytest.raises(dsse.KeyFileError, match="k:"):
        dsse.load_private_key(data, "k", b"wrong")
    assert dsse.load_private_key(data, "k", b"s3cret").public_key() == pair.private.public_key()
