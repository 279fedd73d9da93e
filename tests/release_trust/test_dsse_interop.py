"""Interop both ways with an independent DSSE implementation (securesystemslib, PyPI).

What ``manifest sign`` writes must verify in the tools that consume in-toto
attestations, and what they write must verify in ``verify --release-key``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from release_keys import KINDS, make_key
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

from artifactcheck.cli.main import main
from artifactcheck.manifests import native
from artifactcheck.release import dsse


def _release(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<script src=app.js></script>")
    (dist / "app.js").write_text("console.log(1)")
    release = tmp_path / "1.4.2.json"
    release.write_bytes(native.dump(native.build(dist, version="1.4.2")))
    return release


@pytest.mark.parametrize("kind", KINDS)
def test_manifest_sign_verifies_with_securesystemslib(kind: str, tmp_path: Path) -> None:
    pair = make_key(kind, tmp_path)
    release = _release(tmp_path)
    result = CliRunner().invoke(
        main, ["manifest", "sign", str(release), "--key", str(pair.private_pem)]
    )
    assert result.exit_code == 0, result.output
    lines = Path(f"{release}.intoto.jsonl").read_bytes().splitlines()
    assert len(lines) == 1
    envelope = Envelope.from_dict(json.loads(lines[0]))
    ours = dsse.load_public_key(pair.public_pem.read_bytes(), "pub")
    key = SSlibKey.from_crypto(pair.private.public_key(), keyid=ours.keyid)
    assert set(envelope.verify([key], 1)) == {ours.keyid}
    assert envelope.payload_type == "application/vnd.in-toto+json"
    statement = json.loads(envelope.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://artifactcheck.io/release/v1"
    assert statement["predicate"]["version"] == "1.4.2"
    assert statement["subject"][0]["name"] == "1.4.2.json"
    assert statement["subject"][0]["digest"] == {
        "sha256": hashlib.sha256(release.read_bytes()).hexdigest()
    }


@pytest.mark.parametrize("kind", KINDS)
def test_a_securesystemslib_envelope_verifies_in_artifactcheck(kind: str, tmp_path: Path) -> None:
    pair = make_key(kind, tmp_path)
    release = _release(tmp_path)
    data = release.read_bytes()
    body = dsse.statement(name=release.name, data=data, version="1.4.2", build={})
    envelope = Envelope(json.dumps(body).encode(), "application/vnd.in-toto+json", {})
    envelope.sign(CryptoSigner(pair.private))  # its own keyid, its own encoding
    file = json.dumps(envelope.to_dict()).encode() + b"\n"
    key = dsse.load_public_key(pair.public_pem.read_bytes(), "pub")
    got = dsse.verify_release(file, keys=[key], data=data, version="1.4.2")
    assert got.keyid == key.keyid
    # and the same envelope, one bit of its manifest changed, vouches for nothing
    with pytest.raises(dsse.EnvelopeRejected, match="other bytes"):
        dsse.verify_release(
            file, keys=[key], data=data.replace(b"1.4.2", b"1.4.3"), version="1.4.2"
        )
