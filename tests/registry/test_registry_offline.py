"""The registry reader against an in-process registry (httpx.MockTransport): no Docker.

The rules a release image's bytes are held to, each checked where it lives after the
split of :mod:`artifactcheck.release.registry` (names: ``tree`` by the manifests' one
rule; caps: ``layers``; auth: ``session``), quickly and without a private dockerd.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import httpx
import pytest

from artifactcheck.manifests.limits import unusable_name
from artifactcheck.model.errors import ExpectationUnavailable
from artifactcheck.release.registry import (
    OCI_MANIFEST,
    ImageLimits,
    RegistryOptions,
    RegistryReader,
)

IMAGE = "127.0.0.1:5000/web:1.0"
SITE = "/srv/www"
# a C0 control, DEL, a C1 control, and an undecodable byte (a lone surrogate once read)
BAD = ["bad\x01.js", "del\x7f.js", "c1\x85.js", "raw\udcff.js"]


def _layer(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, errors="surrogateescape"
    ) as tar:
        for name in ("srv", "srv/www"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"srv/www/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue())


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Registry:
    """Serves one image; a Bearer challenge first when ``token`` is set."""

    def __init__(self, layer: bytes, *, token: str | None = None) -> None:
        self.layer = layer
        self.token = token
        self.token_asks: list[str] = []
        self.manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": _digest(b"{}"),
                    "size": 2,
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": _digest(layer),
                        "size": len(layer),
                    }
                ],
            }
        ).encode()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/token":
            self.token_asks.append(str(request.url.query, "ascii"))
            return httpx.Response(200, json={"token": self.token})
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return httpx.Response(
                401,
                headers={
                    "WWW-Authenticate": 'Bearer realm="http://127.0.0.1:5000/token",'
                    'service="test-registry",scope="repository:web:pull"'
                },
            )
        if path == "/v2/web/manifests/1.0":
            return httpx.Response(
                200, content=self.manifest, headers={"Content-Type": OCI_MANIFEST}
            )
        if path == f"/v2/web/blobs/{_digest(self.layer)}":
            return httpx.Response(200, content=self.layer)
        return httpx.Response(404)


def _reader(registry: Registry, limits: ImageLimits | None = None) -> RegistryReader:
    options = RegistryOptions(insecure=True, attempts=1, limits=limits or ImageLimits())
    return RegistryReader(options, transport=httpx.MockTransport(registry))


def test_image_files_no_url_can_name_are_rejected_by_the_manifests_rule() -> None:
    files = {"ok.js": b"fine", **{name: b"x" for name in BAD}}
    got = _reader(Registry(_layer(files)))(IMAGE, SITE, "1.0")
    assert sorted(got.files) == ["ok.js"]
    assert [path for path, _ in got.rejected] == sorted(BAD)
    assert all(unusable_name(path) for path in BAD)  # one rule: the same names refused


def test_a_layer_inflating_past_the_cap_refuses_the_image() -> None:
    layer = _layer({"big.js": b"\0" * 200_000})
    assert len(layer) < 10_000  # a small blob...
    with pytest.raises(ExpectationUnavailable, match="over the cap of 100000 decompressed"):
        _reader(Registry(layer), ImageLimits(max_unpacked_bytes=100_000))(IMAGE, SITE, "1.0")


def test_a_bearer_challenge_is_answered_with_a_token_from_its_realm() -> None:
    registry = Registry(_layer({"ok.js": b"fine"}), token="t0k3n")
    got = _reader(registry)(IMAGE, SITE, "1.0")
    assert sorted(got.files) == ["ok.js"]
    assert registry.token_asks == ["service=test-registry&scope=repository%3Aweb%3Apull"]
