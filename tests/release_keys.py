"""Key pairs for the release-trust tests, made with ``cryptography`` and written as PEM
the way ``openssl``/``cosign`` export them (PKCS#8 private, SubjectPublicKeyInfo public)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

KINDS = ("ed25519", "p256")


@dataclass(frozen=True)
class KeyPair:
    """A private key and the PEM files of both halves."""

    private: ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey
    private_pem: Path
    public_pem: Path


def make_key(
    kind: str, folder: Path, name: str = "release", passphrase: bytes | None = None
) -> KeyPair:
    """A new key pair of ``kind`` written into ``folder``."""
    private = (
        ed25519.Ed25519PrivateKey.generate()
        if kind == "ed25519"
        else ec.generate_private_key(ec.SECP256R1())
    )
    encryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    private_pem = folder / f"{name}.key"
    private_pem.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
    )
    public_pem = folder / f"{name}.pub"
    public_pem.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return KeyPair(private=private, private_pem=private_pem, public_pem=public_pem)
