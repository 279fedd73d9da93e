"""Release images read from a real registry (Debian's docker-registry) on loopback.

Each rule of :mod:`artifactcheck.release.registry` has a test here that fails when the rule is
broken: the pinned manifest digest, the blob digest, whiteouts and opaque directories,
path safety, the caps, credentials (Basic and the Bearer token flow), TLS, retries.
"""

from __future__ import annotations

import asyncio
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from artifactcheck.manifests import native
from artifactcheck.model.errors import ConfigError, ExpectationUnavailable, ManifestError
from artifactcheck.model.settings import CheckSpec
from artifactcheck.release.registry import ImageLimits, RegistryOptions, RegistryReader
from artifactcheck.release.wiring import build_expectations

from .conftest import (
    LAYER_TAR,
    PASSWORD,
    USER,
    Pushed,
    Pusher,
    Registry,
    digest_of,
    docker_config,
    gz,
    layer_tar,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SITE = "/usr/share/nginx/html"
H = "usr/share/nginx/html"


def reader(*insecure: str, sleeps: list[float] | None = None, **kwargs: Any) -> RegistryReader:
    """A reader allowed plain HTTP to the given hosts; records its backoff sleeps."""
    options = RegistryOptions(insecure=frozenset(insecure), backoff=0.05, **kwargs)
    record = sleeps if sleeps is not None else []
    return RegistryReader(options, sleep=record.append)


def files(manifest: Any) -> dict[str, tuple[str, int]]:
    return {p: (e.hashes["sha256"], e.size) for p, e in manifest.files.items()}


def _sha(data: bytes) -> str:
    return digest_of(data).split(":", 1)[1]


# -- the same manifest as the Docker engine and `manifest build` ------------------------


def test_registry_manifest_equals_docker_and_manifest_build(
    pushed: Pushed, registry: Registry, docker_engine: Any
) -> None:
    t0 = time.monotonic()
    got = reader(registry.host)(pushed.single, SITE, "1.0.0")
    took = time.monotonic() - t0
    from_docker = docker_engine.manifest_from_image(pushed.single, path=SITE, version="1.0.0")
    built = native.build(pushed.site, version="1.0.0")
    assert files(got) == files(from_docker) == files(built)
    assert got.format == "native" and got.version == "1.0.0"
    assert got.image_id == pushed.single_digest
    assert {p for p, e in got.files.items() if e.entry} == {"index.html"}
    # what `manifest build` writes, byte for byte, apart from the image id
    assert native.dump(got).replace(f'  "image_id": "{got.image_id}",\n'.encode(), b"") == (
        native.dump(built)
    )
    assert took < 10, f"reading a small image took {took:.1f}s"


def test_pinned_by_digest_reads_the_same(pushed: Pushed, registry: Registry) -> None:
    by_tag = reader(registry.host)(pushed.single, SITE, "1.0.0")
    pinned = f"{pushed.single}@{pushed.single_digest}"
    by_digest = reader(registry.host)(pinned, SITE, "1.0.0")
    assert files(by_digest) == files(by_tag)
    assert by_digest.image_id == pushed.single_digest


def test_layered_docker_build_whiteout_applied(
    pushed: Pushed, registry: Registry, docker_engine: Any
) -> None:
    with httpx.Client() as c:
        doc = c.get(
            f"{registry.url}/v2/web/manifests/1.1.0",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
        ).json()
    assert len(doc["layers"]) >= 3, "FROM + COPY + COPY + RUN rm makes several layers"
    got = reader(registry.host)(pushed.layered, SITE, "1.1.0")
    from_docker = docker_engine.manifest_from_image(pushed.layered, path=SITE, version="1.1.0")
    assert files(got) == files(from_docker)
    assert pushed.removed not in got.files  # the whiteout of `RUN rm`
    assert got.files[pushed.added].hashes["sha256"] == _sha(b"added in 1.1.0\n")
    index = (pushed.site / "index.html").read_bytes() + b"<!-- 1.1 -->\n"
    assert got.files[pushed.changed].hashes["sha256"] == _sha(index)


# -- whiteouts, opaque directories, links: hand-made layers ----------------------------


def test_whiteouts_opaque_dirs_and_links(pusher: Pusher, registry: Registry) -> None:
    lower = layer_tar(
        [
            (f"{H}", "dir"),
            (f"{H}/a.txt", "file", "a"),
            (f"{H}/b.txt", "file", "b"),
            (f"{H}/gone", "dir"),
            (f"{H}/gone/x.js", "file", "x"),
            (f"{H}/opq", "dir"),
            (f"{H}/opq/old.js", "file", "old"),
            (f"{H}/opq/sub/deep.js", "file", "deep"),
            (f"{H}/becomes-dir", "file", "file first"),
            (f"{H}/replaced.css", "file", "v1"),
            (f"{H}/to-symlink.js", "file", "was a file"),
            (f"{H}/dir-to-file", "dir"),
            (f"{H}/dir-to-file/under.js", "file", "goes with its directory"),
            ("etc/outside.txt", "file", "not in the site"),
        ]
    )
    upper = layer_tar(
        [
            (f"{H}/.wh.a.txt", "file", ""),  # a file whiteout
            (f"{H}/.wh.gone", "file", ""),  # a directory whiteout: the subtree goes
            (f"{H}/opq", "dir"),
            (f"{H}/opq/.wh..wh..opq", "file", ""),  # lower content of opq hidden...
            (f"{H}/opq/new.js", "file", "new"),  # ...this layer's own kept
            (f"{H}/becomes-dir", "dir"),
            (f"{H}/becomes-dir/inner.txt", "file", "inner"),
            (f"{H}/replaced.css", "file", "v2"),
            (f"{H}/to-symlink.js", "symlink", "b.txt"),  # replaces, and is skipped
            (f"{H}/dir-to-file", "file", "now a file"),  # replaces the directory's subtree
            (f"{H}/link.txt", "hardlink", f"{H}/b.txt"),  # recorded with b.txt's digest
            (f"/{H}/abs.txt", "file", "absolute"),  # normalised to the image root
            (f"./{H}/dot.txt", "file", "dot"),
            (f"{H}/bad\x01name.js", "file", "no URL names this"),
        ]
    )
    digest, _ = pusher.image("whiteouts", "1", [gz(lower), upper], media_type=LAYER_TAR)
    got = reader(registry.host)(f"{registry.host}/whiteouts:1", SITE, "1")
    assert files(got) == {
        "b.txt": (_sha(b"b"), 1),
        "link.txt": (_sha(b"b"), 1),
        "opq/new.js": (_sha(b"new"), 3),
        "becomes-dir/inner.txt": (_sha(b"inner"), 5),
        "replaced.css": (_sha(b"v2"), 2),
        "abs.txt": (_sha(b"absolute"), 8),
        "dot.txt": (_sha(b"dot"), 3),
        "dir-to-file": (_sha(b"now a file"), 10),
    }
    assert got.image_id == digest
    assert [p for p, _ in got.rejected] == ["bad\x01name.js"]


def test_whiteout_of_an_ancestor_removes_the_site(pusher: Pusher, registry: Registry) -> None:
    lower = layer_tar([(f"{H}/index.html", "file", "x")])
    upper = layer_tar([("usr/share/.wh.nginx", "file", "")])
    pusher.image("ancestor", "1", [gz(lower), gz(upper)])
    with pytest.raises(ManifestError, match="no such directory"):
        reader(registry.host)(f"{registry.host}/ancestor:1", SITE, "1")


def test_site_directory_a_symlink_is_refused(pusher: Pusher, registry: Registry) -> None:
    layer = layer_tar(
        [("app/dist/index.html", "file", "x"), ("usr/share/nginx/html", "symlink", "/app/dist")]
    )
    pusher.image("symsite", "1", [gz(layer)])
    with pytest.raises(ManifestError, match="symlink to /app/dist"):
        reader(registry.host)(f"{registry.host}/symsite:1", SITE, "1")


def test_site_ancestor_a_symlink_is_refused(pusher: Pusher, registry: Registry) -> None:
    layer = layer_tar(
        [("srv/nginx/html/index.html", "file", "x"), ("usr/share/nginx", "symlink", "/srv/nginx")]
    )
    pusher.image("symancestor", "1", [gz(layer)])
    with pytest.raises(ManifestError, match="/usr/share/nginx is a symlink to /srv/nginx"):
        reader(registry.host)(f"{registry.host}/symancestor:1", SITE, "1")


def test_index_resolves_linux_amd64(pusher: Pusher, registry: Registry) -> None:
    amd = pusher.image("multi", "amd64", [gz(layer_tar([(f"{H}/arch", "file", "amd64")]))])
    arm = pusher.image("multi", "arm64", [gz(layer_tar([(f"{H}/arch", "file", "arm64")]))])
    index = pusher.index(
        "multi",
        "1",
        [
            (arm[0], arm[1], {"os": "linux", "architecture": "arm64"}),
            (amd[0], amd[1], {"os": "linux", "architecture": "amd64"}),
        ],
    )
    got = reader(registry.host)(f"{registry.host}/multi:1", SITE, "1")
    assert files(got) == {"arch": (_sha(b"amd64"), 5)}
    assert got.image_id == index  # the digest the reference resolves to


# -- digests pinned ---------------------------------------------------------------------


def test_pinned_digest_mismatch_refused(pushed: Pushed, registry: Registry, proxy_for: Any) -> None:
    """A mirror serving other bytes for a pinned digest is refused, never believed."""

    def reformat(path: str, body: bytes) -> bytes:
        if "/manifests/" in path:
            return json.dumps(json.loads(body), indent=1).encode()  # same JSON, other bytes
        return body

    mirror = proxy_for(registry.url, mutate=reformat, drop_headers=("Docker-Content-Digest",))
    pinned = f"{mirror.host}/web:1.0.0@{pushed.single_digest}"
    with pytest.raises(ExpectationUnavailable, match="is not the pinned"):
        reader(mirror.host)(pinned, SITE, "1.0.0")
    # a well-formed digest that is simply not this content: the same refusal
    honest = proxy_for(registry.url)
    wrong = "sha256:" + "0" * 64
    with pytest.raises(ExpectationUnavailable, match="404|not found"):
        reader(honest.host)(f"{honest.host}/web:1.0.0@{wrong}", SITE, "1.0.0")


def test_registry_digest_header_contradicting_the_bytes_refused(
    pushed: Pushed, registry: Registry, proxy_for: Any
) -> None:
    def reformat(path: str, body: bytes) -> bytes:
        return json.dumps(json.loads(body)).encode() if "/manifests/" in path else body

    mirror = proxy_for(registry.url, mutate=reformat)
    with pytest.raises(ExpectationUnavailable, match="the bytes hash to"):
        reader(mirror.host)(f"{mirror.host}/web:1.0.0", SITE, "1.0.0")


def test_tampered_blob_refused(pusher: Pusher, registry: Registry, proxy_for: Any) -> None:
    """Same length, one byte changed, still a valid tar: only the blob digest catches it."""
    layer = layer_tar([(f"{H}/app.js", "file", "console.log('good')")])
    pusher.image("tamper", "1", [layer], media_type=LAYER_TAR)
    mirror = proxy_for(
        registry.url,
        mutate=lambda path, body: body.replace(b"'good'", b"'evil'") if "/blobs/" in path else body,
    )
    with pytest.raises(ExpectationUnavailable, match="content hashes to"):
        reader(mirror.host)(f"{mirror.host}/tamper:1", SITE, "1")
    # without the mirror the same image reads
    assert reader(registry.host)(f"{registry.host}/tamper:1", SITE, "1").files


def test_blob_longer_than_declared_refused(pusher: Pusher, registry: Registry) -> None:
    layer = gz(layer_tar([(f"{H}/a", "file", "a" * 5000)]))
    pusher.image("short", "1", [layer], sizes=[len(layer) - 10])
    with pytest.raises(ExpectationUnavailable, match="more than the .* bytes its descriptor"):
        reader(registry.host)(f"{registry.host}/short:1", SITE, "1")


# -- hostile blobs ---------------------------------------------------------------------


def test_parent_paths_refuse_the_image(pusher: Pusher, registry: Registry) -> None:
    layer = layer_tar(
        [(f"{H}/index.html", "file", "x"), (f"{H}/../../../../etc/passwd", "file", "r")]
    )
    pusher.image("climb", "1", [gz(layer)])
    with pytest.raises(ExpectationUnavailable, match=r"unsafe member name .*\.\."):
        reader(registry.host)(f"{registry.host}/climb:1", SITE, "1")


def test_huge_declared_member_size_is_a_truncated_tar(pusher: Pusher, registry: Registry) -> None:
    info = tarfile.TarInfo(f"{H}/huge.bin")
    info.size = 1 << 40  # a terabyte, per the header; a few bytes follow
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    blob = gz(header + b"x" * 1024)
    pusher.image("huge", "1", [blob])
    t0 = time.monotonic()
    with pytest.raises(ExpectationUnavailable, match="tar|decompress"):
        reader(registry.host)(f"{registry.host}/huge:1", SITE, "1")
    assert time.monotonic() - t0 < 10


def test_streamed_never_held_whole(pusher: Pusher, registry: Registry) -> None:
    """A 48 MiB file in a 48 MiB layer blob is hashed with a few MiB of memory."""
    import tracemalloc

    big = 48 << 20
    info = tarfile.TarInfo(f"{H}/big.bin")
    info.size = big
    raw = info.tobuf(format=tarfile.PAX_FORMAT) + b"\0" * big + b"\0" * 1024
    pusher.image("big", "1", [raw], media_type=LAYER_TAR)  # uncompressed: 48 MiB on the wire
    del raw
    tracemalloc.start()
    try:
        got = reader(registry.host)(f"{registry.host}/big:1", SITE, "1")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got.files["big.bin"].size == big
    assert got.files["big.bin"].hashes["sha256"] == _sha(b"\0" * big)
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB while reading a 48 MiB layer"


def test_caps_layers_bytes_and_declared_sizes(pusher: Pusher, registry: Registry) -> None:
    one = gz(layer_tar([(f"{H}/a", "file", "a")]))
    pusher.image("many", "1", [one] * 5)
    with pytest.raises(ExpectationUnavailable, match="5 layers, more than the cap of 4"):
        reader(registry.host, limits=ImageLimits(max_layers=4))(
            f"{registry.host}/many:1", SITE, "1"
        )
    pusher.image("liar", "1", [one], sizes=[1 << 50])
    with pytest.raises(ExpectationUnavailable, match="layers declare .* more than the cap"):
        reader(registry.host)(f"{registry.host}/liar:1", SITE, "1")
    bomb = gz(layer_tar([(f"{H}/zeros", "file", b"\0" * (4 << 20))]))  # 4 MiB -> ~4 KiB
    pusher.image("bomb", "1", [bomb])
    with pytest.raises(ExpectationUnavailable, match="decompressed bytes"):
        reader(registry.host, limits=ImageLimits(max_unpacked_bytes=1 << 20))(
            f"{registry.host}/bomb:1", SITE, "1"
        )
    with pytest.raises(ExpectationUnavailable, match="more than the cap of 100 bytes"):
        reader(registry.host, limits=ImageLimits(max_manifest_bytes=100))(
            f"{registry.host}/bomb:1", SITE, "1"
        )


def test_not_a_tar_and_zstd(pusher: Pusher, registry: Registry) -> None:
    pusher.image("garbage", "1", [gz(b"this is not a tar archive" * 100)])
    with pytest.raises(ExpectationUnavailable, match="tar"):
        reader(registry.host)(f"{registry.host}/garbage:1", SITE, "1")
    zstd_frame = bytes.fromhex("28b52ffd") + b"\0" * 16
    pusher.image(
        "zstd", "1", [zstd_frame], media_type="application/vnd.oci.image.layer.v1.tar+zstd"
    )
    try:
        import zstandard  # noqa: F401
    except ImportError:
        with pytest.raises(ExpectationUnavailable, match="zstd-compressed .* zstandard"):
            reader(registry.host)(f"{registry.host}/zstd:1", SITE, "1")


# -- credentials -------------------------------------------------------------------------


def test_basic_auth_with_a_docker_config(auth_registry: Registry, tmp_path: Path) -> None:
    pusher = Pusher(auth_registry.url, auth=(USER, PASSWORD))
    pusher.image("private/web", "2.0.0", [gz(layer_tar([(f"{H}/index.html", "file", "p")]))])
    ref = f"{auth_registry.host}/private/web:2.0.0"
    config = docker_config(tmp_path / "config.json", auth_registry.host)
    got = reader(auth_registry.host, docker_config=config)(ref, SITE, "2.0.0")
    assert files(got) == {"index.html": (_sha(b"p"), 1)}
    with pytest.raises(ExpectationUnavailable, match="needs credentials"):
        reader(auth_registry.host)(ref, SITE, "2.0.0")
    wrong = docker_config(tmp_path / "wrong.json", auth_registry.host, password="nope")
    with pytest.raises(ExpectationUnavailable, match="credentials refused"):
        reader(auth_registry.host, docker_config=wrong)(ref, SITE, "2.0.0")
    other = docker_config(tmp_path / "other.json", "registry.example.com")
    with pytest.raises(ExpectationUnavailable, match="has none for"):
        reader(auth_registry.host, docker_config=other)(ref, SITE, "2.0.0")


def test_docker_push_with_credentials_then_read(
    auth_registry: Registry, docker_client: Any, pushed: Pushed, tmp_path: Path
) -> None:
    """What a CI job does: docker push with a login; the checker reads with the Secret."""
    ref = f"{auth_registry.host}/web:1.0.0"
    docker_client.api.tag(pushed.single, f"{auth_registry.host}/web", "1.0.0")
    try:
        creds = {"username": USER, "password": PASSWORD}
        out = list(
            docker_client.api.push(
                f"{auth_registry.host}/web",
                tag="1.0.0",
                stream=True,
                decode=True,
                auth_config=creds,
            )
        )
        assert not [x for x in out if "error" in x], out
    finally:
        docker_client.api.remove_image(ref)
    secret = tmp_path / ".dockerconfigjson"  # how a kubernetes.io/dockerconfigjson mounts
    docker_config(secret, auth_registry.host)
    got = reader(auth_registry.host, docker_config=secret)(ref, SITE, "1.0.0")
    assert files(got) == files(native.build(pushed.site, version="1.0.0"))


def test_bearer_token_flow(
    pusher: Pusher, registry: Registry, proxy_for: Any, tmp_path: Path
) -> None:
    pusher.image("tok/web", "1", [gz(layer_tar([(f"{H}/t.txt", "file", "token")]))])
    front = proxy_for(registry.url, bearer=(USER, PASSWORD))
    ref = f"{front.host}/tok/web:1"
    config = docker_config(tmp_path / "config.json", front.host)
    got = reader(front.host, docker_config=config)(ref, SITE, "1")
    assert files(got) == {"t.txt": (_sha(b"token"), 5)}
    assert len(front.token_requests) == 1, "one token for the manifest and the blobs"
    asked = front.token_requests[0]
    assert asked["service"] == "test-registry"
    assert asked["scope"] == "repository:tok/web:pull"
    assert asked["account"] == USER
    with pytest.raises(ExpectationUnavailable, match="token endpoint .* 401 .*credentials refused"):
        reader(front.host)(ref, SITE, "1")


def test_redirected_blobs_get_no_credentials(
    pusher: Pusher, registry: Registry, proxy_for: Any, tmp_path: Path
) -> None:
    """Blobs redirected to storage elsewhere (S3-style): the token stays with the registry."""
    pusher.image("redir/web", "1", [gz(layer_tar([(f"{H}/r.txt", "file", "redirected")]))])
    storage = proxy_for(registry.url)
    front = proxy_for(registry.url, bearer=(USER, PASSWORD), redirect_blobs=storage.url)
    ref = f"{front.host}/redir/web:1"
    config = docker_config(tmp_path / "config.json", front.host)
    got = reader(front.host, storage.host, docker_config=config)(ref, SITE, "1")
    assert files(got) == {"r.txt": (_sha(b"redirected"), 10)}
    assert any("/blobs/" in p for p in storage.requests)
    assert storage.authorizations and not any(storage.authorizations)
    with pytest.raises(ExpectationUnavailable, match="redirect to plain-HTTP .* refused"):
        reader(front.host, docker_config=config)(ref, SITE, "1")  # storage not allowed http


def test_tls_verified_and_custom_ca(tls_registry: Registry, tls_ca: Any, tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    tls_ca.cert_pem.write_to_path(str(ca))
    Pusher(tls_registry.url, verify=str(ca)).image(
        "web", "1", [gz(layer_tar([(f"{H}/s.txt", "file", "tls")]))]
    )
    ref = f"{tls_registry.host}/web:1"
    with pytest.raises(ExpectationUnavailable, match="certificate"):
        reader()(ref, SITE, "1")  # the system trust store does not know the test CA
    got = reader(ca_bundle=ca)(ref, SITE, "1")
    assert files(got) == {"s.txt": (_sha(b"tls"), 3)}
    with pytest.raises(ExpectationUnavailable):  # https is not silently downgraded
        reader(ca_bundle=ca)(ref.replace(tls_registry.host, "127.0.0.1:1"), SITE, "1")


def test_plain_http_only_when_allowed(pusher: Pusher, registry: Registry) -> None:
    pusher.image("plain", "1", [gz(layer_tar([(f"{H}/a", "file", "a")]))])
    with pytest.raises(ExpectationUnavailable, match="GET https://"):
        reader()(f"{registry.host}/plain:1", SITE, "1")


# -- failures are inconclusive, never a crash ------------------------------------------------


def test_registry_down_is_expectation_unavailable(tmp_path: Path) -> None:
    sleeps: list[float] = []
    down = f"127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(ExpectationUnavailable, match="cannot connect.*after 3 attempts"):
        reader(down, sleeps=sleeps)(f"{down}/web:1.0.0", SITE, "1.0.0")
    assert len(sleeps) == 2 and all(0 <= s <= 0.1 for s in sleeps)  # full jitter, capped
    assert time.monotonic() - t0 < 10


def test_registry_down_through_build_expectations(tmp_path: Path) -> None:
    """Wired as expect's read_image, a dead registry is an unavailable expectation."""
    down = f"127.0.0.1:{_closed_port()}"
    spec = CheckSpec(
        targets=[{"url": "http://127.0.0.1:1/", "version": "1.0.0"}],
        release={"image": {"reference": f"{down}/web:{{version}}"}},
    )
    expectations = build_expectations(
        spec,
        None,  # type: ignore[arg-type]
        read_image=reader(down),
    )
    assert expectations is not None
    got = asyncio.run(expectations.get("1.0.0"))
    assert got.manifest is None and "cannot connect" in (got.error or "")


def test_unknown_tag_and_repository(registry: Registry) -> None:
    with pytest.raises(ExpectationUnavailable, match="404 not found"):
        reader(registry.host)(f"{registry.host}/nothing-here:9", SITE, "9")


def test_5xx_and_429_retried_with_backoff(
    pushed: Pushed, registry: Registry, proxy_for: Any
) -> None:
    flaky = proxy_for(registry.url, fail=[503, 429])
    sleeps: list[float] = []
    got = reader(flaky.host, sleeps=sleeps)(f"{flaky.host}/web:1.0.0", SITE, "1.0.0")
    assert got.files and len(sleeps) == 2
    dead = proxy_for(registry.url, fail=[502, 502, 502])
    with pytest.raises(ExpectationUnavailable, match="HTTP 502"):
        reader(dead.host)(f"{dead.host}/web:1.0.0", SITE, "1.0.0")


def test_bad_reference_is_a_config_error(registry: Registry) -> None:
    with pytest.raises(ConfigError):
        reader(registry.host)("web:1.0.0", SITE, "1.0.0")  # no registry host
    with pytest.raises(ConfigError):
        reader(registry.host)(f"{registry.host}/Web:1.0.0", SITE, "1.0.0")


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
