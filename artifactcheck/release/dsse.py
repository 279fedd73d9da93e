"""Signed releases: DSSE envelopes of in-toto Statements, written and checked over bytes.

Whoever can write to the release bucket decides what "expected" means, unless the
release manifest is signed by a key its reader knows. A signature here is the format
the supply-chain tools already speak: a DSSE v1 envelope (pre-authentication encoding,
``payloadType`` ``application/vnd.in-toto+json``) of an in-toto Statement v1 whose
subject is the manifest's bytes (sha256) and whose predicate
(``https://artifactcheck.io/release/v1``) names the version and how it was built.

Everything here is a pure function over bytes and keys (``cryptography`` does the
crypto): no file, no network, so ``verify``, ``manifest sign`` and the controller share
one rule. Envelopes are hostile input: size-capped, every field checked for its type,
and a failure is an :class:`EnvelopeRejected` naming what was wrong, never a crash.
The keyid is a hint only (the sha256 of the key's SubjectPublicKeyInfo); a signature
is accepted when one of the configured keys verifies it, whatever keyid it claims.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from artifactcheck.model.records import Record

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://artifactcheck.io/release/v1"
SUFFIX = ".intoto.jsonl"

#: An envelope of one release is a few kilobytes; anything far bigger is not one.
MAX_ENVELOPE_BYTES = 1 << 20
MAX_ENVELOPES = 8  # lines of one .intoto.jsonl file
MAX_SIGNATURES = 16  # per envelope

PublicKeyType = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey
PrivateKeyType = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey


class KeyFileError(ValueError):
    """A key file that is not a usable key of a supported kind."""


class PassphraseNeeded(KeyFileError):
    """An encrypted private key read without its passphrase."""


class EnvelopeRejected(ValueError):
    """An envelope that does not vouch for the release it was found beside."""


class PublicKey(Record):
    """A release key: the key, its keyid, and where it was read from (for messages)."""

    key: PublicKeyType
    keyid: str
    where: str = ""


class Verified(Record):
    """What a valid envelope vouched for: the key that signed it and its predicate."""

    keyid: str
    where: str
    predicate: Mapping[str, Any]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is actually signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def keyid_of(key: PublicKeyType) -> str:
    """The keyid artifactcheck writes: hex sha256 of the DER SubjectPublicKeyInfo."""
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def _supported(key: object, where: str) -> None:
    if isinstance(key, ed25519.Ed25519PublicKey | ed25519.Ed25519PrivateKey):
        return
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        if isinstance(key.curve, ec.SECP256R1):
            return
        raise KeyFileError(f"{where}: an ECDSA key on {key.curve.name}; only P-256 is supported")
    raise KeyFileError(f"{where}: a {type(key).__name__}; supported: ECDSA P-256 and Ed25519")


#: One PEM object: its label, and the text between its BEGIN and END lines.
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", flags=re.DOTALL)
_PEM_MARKER = re.compile(rb"-----(BEGIN|END) ")
MAX_KEYS = 32  # per key file


def load_public_keys(data: bytes, where: str) -> tuple[PublicKey, ...]:
    """Every PEM SubjectPublicKeyInfo key in ``data`` (what ``cosign generate-key-pair``
    writes as cosign.pub; a key rotation ships the old and the new key in one file).

    Every key is used, or KeyFileError names the file and the block: a file whose
    second key were ignored would reject every release signed by it with no word why.
    ``cryptography`` reads one PEM object per call, so the blocks are found here (one
    regular expression: every BEGIN line must meet its END line, or the file is refused).
    """
    if len(data) > 64 * 1024:
        raise KeyFileError(f"{where}: {len(data)} bytes is not a public key file")
    if b"PRIVATE KEY" in data:
        raise KeyFileError(f"{where}: a private key; give the public key (PEM 'PUBLIC KEY')")
    blocks = [m.group(0) for m in _PEM_BLOCK.finditer(data)]
    markers = len(_PEM_MARKER.findall(data))
    if not blocks or markers != 2 * len(blocks):
        why = "no PEM block" if not blocks else "a PEM block without its matching END line"
        raise KeyFileError(f"{where}: not a PEM public key (SubjectPublicKeyInfo): {why}")
    if len(blocks) > MAX_KEYS:
        raise KeyFileError(f"{where}: {len(blocks)} keys; at most {MAX_KEYS} in one file")
    keys: dict[str, PublicKey] = {}
    for n, block in enumerate(blocks, 1):
        which = where if len(blocks) == 1 else f"{where}: key {n} of {len(blocks)}"
        try:
            key = serialization.load_pem_public_key(block)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise KeyFileError(
                f"{which}: not a PEM public key (SubjectPublicKeyInfo): {exc}"
            ) from exc
        _supported(key, which)
        assert isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey)
        keyid = keyid_of(key)
        keys.setdefault(keyid, PublicKey(key=key, keyid=keyid, where=where))
    return tuple(keys.values())


def load_public_key(data: bytes, where: str) -> PublicKey:
    """The one public key in ``data`` (:func:`load_public_keys`); KeyFileError when the
    file holds several, so a caller expecting one never drops the others unsaid."""
    keys = load_public_keys(data, where)
    if len(keys) > 1:
        raise KeyFileError(f"{where}: holds {len(keys)} keys where one is expected")
    return keys[0]


def load_private_key(data: bytes, where: str, passphrase: bytes | None = None) -> PrivateKeyType:
    """A PEM PKCS#8 private key, decrypted with ``passphrase`` when it is encrypted."""
    if b"SIGSTORE PRIVATE KEY" in data:
        raise KeyFileError(
            f"{where}: a cosign-encrypted key; export it as PKCS#8 PEM "
            "(or sign with a PKCS#8 key whose public key you give to verify)"
        )
    try:
        key = serialization.load_pem_private_key(data, password=passphrase)
    except TypeError as exc:
        if passphrase is None:
            raise PassphraseNeeded(f"{where}: the private key is encrypted") from exc
        raise KeyFileError(f"{where}: {exc}") from exc
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise KeyFileError(f"{where}: not a usable PEM private key: {exc}") from exc
    _supported(key, where)
    assert isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey)
    return key


def statement(*, name: str, data: bytes, version: str, build: Mapping[str, str]) -> dict[str, Any]:
    """The in-toto Statement v1 of a release manifest: its bytes, version and build."""
    predicate: dict[str, Any] = {"version": version}
    if build:
        predicate["build"] = dict(build)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": hashlib.sha256(data).hexdigest()}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def canonical(body: Mapping[str, Any]) -> bytes:
    """A statement's bytes as signed: compact, sorted JSON."""
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def _sign(key: PrivateKeyType, message: bytes) -> bytes:
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(message)
    return key.sign(message, ec.ECDSA(hashes.SHA256()))  # DER, as cosign and sslib write it


def sign_envelope(payload: bytes, key: PrivateKeyType) -> dict[str, Any]:
    """A DSSE envelope of ``payload`` (an in-toto Statement) signed by ``key``."""
    signature = _sign(key, pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {
                "keyid": keyid_of(key.public_key()),
                "sig": base64.b64encode(signature).decode("ascii"),
            }
        ],
    }


def envelope_line(envelope: Mapping[str, Any]) -> bytes:
    """One line of a ``.intoto.jsonl`` file."""
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode() + b"\n"


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise EnvelopeRejected(f"malformed envelope: {what} is not a base64 string")
    standard = value.replace("-", "+").replace("_", "/")  # DSSE allows URL-safe base64 too
    try:
        return base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeRejected(f"malformed envelope: {what} is not base64") from exc


def _verifies(key: PublicKeyType, signature: bytes, message: bytes) -> bool:
    try:
        if isinstance(key, ed25519.Ed25519PublicKey):
            key.verify(signature, message)
        else:
            key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def _signer(doc: Mapping[str, Any], keys: Sequence[PublicKey]) -> PublicKey:
    """The configured key that signed the envelope, or why none did."""
    if doc.get("payloadType") != PAYLOAD_TYPE:
        raise EnvelopeRejected(
            f"payloadType is {str(doc.get('payloadType'))[:80]!r}, not {PAYLOAD_TYPE}"
        )
    payload = _b64(doc.get("payload"), "payload")
    signatures = doc.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise EnvelopeRejected("malformed envelope: no signatures")
    if len(signatures) > MAX_SIGNATURES:
        raise EnvelopeRejected(f"malformed envelope: {len(signatures)} signatures")
    message = pae(PAYLOAD_TYPE, payload)
    claimed: list[str] = []
    for entry in signatures:
        if not isinstance(entry, dict):
            raise EnvelopeRejected("malformed envelope: a signature is not an object")
        keyid = entry.get("keyid", "")
        claimed.append(keyid if isinstance(keyid, str) else "?")
        signature = _b64(entry.get("sig"), "sig")
        for key in keys:
            if _verifies(key.key, signature, message):
                return key
    known = {k.keyid for k in keys}
    if any(c in known for c in claimed):
        raise EnvelopeRejected("bad signature: it does not verify with the key its keyid names")
    shown = ", ".join(c[:16] or "(none)" for c in claimed)
    raise EnvelopeRejected(f"signed by no configured release key (keyid {shown})")


def _statement_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    try:
        body = json.loads(_b64(doc.get("payload"), "payload"))
    except (ValueError, RecursionError) as exc:
        raise EnvelopeRejected("malformed statement: the payload is not JSON") from exc
    if not isinstance(body, dict):
        raise EnvelopeRejected("malformed statement: the payload is not a JSON object")
    if body.get("_type") != STATEMENT_TYPE:
        raise EnvelopeRejected(f"the payload is not an in-toto Statement v1 ({STATEMENT_TYPE})")
    if body.get("predicateType") != PREDICATE_TYPE:
        raise EnvelopeRejected(
            f"predicateType is {str(body.get('predicateType'))[:80]!r}, not {PREDICATE_TYPE}"
        )
    return body


def _subject_digests(body: Mapping[str, Any]) -> list[str]:
    subjects = body.get("subject")
    if not isinstance(subjects, list):
        raise EnvelopeRejected("malformed statement: subject is not a list")
    out = []
    for subject in subjects[:64]:
        digest = subject.get("digest") if isinstance(subject, dict) else None
        value = digest.get("sha256") if isinstance(digest, dict) else None
        if isinstance(value, str):
            out.append(value.lower())
    return out


def check_envelope(
    doc: object, *, keys: Sequence[PublicKey], data: bytes, version: str
) -> Verified:
    """One parsed envelope vouching for ``data`` as release ``version``, or why not.

    The signature is checked first (nothing unauthenticated is believed), then that the
    statement's subject is these very bytes and its predicate this version.
    """
    if not isinstance(doc, dict):
        raise EnvelopeRejected("malformed envelope: not a JSON object")
    key = _signer(doc, keys)
    body = _statement_of(doc)
    digest = hashlib.sha256(data).hexdigest()
    digests = _subject_digests(body)
    if digest not in digests:
        shown = ", ".join(d[:16] for d in digests) or "none"
        raise EnvelopeRejected(
            f"signed for other bytes: subject sha256 {shown}, the manifest loaded is {digest[:16]}"
        )
    predicate = body.get("predicate")
    signed = predicate.get("version") if isinstance(predicate, dict) else None
    if signed != version:
        raise EnvelopeRejected(
            f"signed for version {str(signed)[:64]!r}, the manifest declares {version}"
        )
    assert isinstance(predicate, dict)
    return Verified(keyid=key.keyid, where=key.where, predicate=predicate)


def verify_release(
    envelopes: bytes, *, keys: Sequence[PublicKey], data: bytes, version: str
) -> Verified:
    """A ``.intoto.jsonl`` file vouching for ``data`` as release ``version``, or why not.

    Any one of its envelopes (at most :data:`MAX_ENVELOPES`) may vouch; when none does,
    the reason given is the first envelope's.
    """
    if len(envelopes) > MAX_ENVELOPE_BYTES:
        raise EnvelopeRejected(
            f"envelope file of {len(envelopes)} bytes (at most {MAX_ENVELOPE_BYTES})"
        )
    lines = [line for line in envelopes.splitlines() if line.strip()]
    if not lines:
        raise EnvelopeRejected("malformed envelope: the file is empty")
    if len(lines) > MAX_ENVELOPES:
        raise EnvelopeRejected(f"malformed envelope file: {len(lines)} lines")
    first: EnvelopeRejected | None = None
    for line in lines:
        try:
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise EnvelopeRejected("malformed envelope: not JSON") from exc
            return check_envelope(doc, keys=keys, data=data, version=version)
        except EnvelopeRejected as exc:
            first = first or exc
    assert first is not None
    raise first
