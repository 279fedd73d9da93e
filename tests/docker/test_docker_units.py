"""The Docker module's pure parts and error translation, without an engine.

These run everywhere (no Docker needed): address selection from ``docker inspect``
output, streamed archive hashing with a memory bound, and the words of the errors a
user sees when the engine is missing.
"""

from __future__ import annotations

import hashlib
import io
import socket
import tarfile
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests

from artifactcheck.clients.docker import DockerEngine, _read_tar
from artifactcheck.discover.docker_containers import (
    _instance_from_attrs,
    _label_filters,
    _parse_time,
    _Unaddressable,
    discover_containers,
)
from artifactcheck.manifests import native
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import (
    ConfigError,
    DependencyError,
    ManifestError,
    ManifestLimitError,
)
from artifactcheck.model.settings import DockerSource

IMAGE_ID = "sha256:" + "ab" * 32


def attrs(**over: Any) -> dict[str, Any]:
    """A trimmed ``docker inspect`` of a running compose container."""
    base: dict[str, Any] = {
        "Id": "c0ffee" * 10 + "abcd",
        "Name": "/shop-web-1",
        "Image": IMAGE_ID,
        "State": {"Running": True, "StartedAt": "2026-11-29T19:38:33.373034225Z"},
        "Config": {
            "Image": "registry.example:5000/shop/web:1.4.2",
            "Labels": {
                "org.opencontainers.image.version": "1.4.2",
                "com.docker.compose.service": "web",
                "com.docker.compose.project": "shop",
            },
        },
        "HostConfig": {"NetworkMode": "shop_default"},
        "NetworkSettings": {
            "IPAddress": "",
            "Ports": {
                "80/tcp": [
                    {"HostIp": "0.0.0.0", "HostPort": "32768"},
                    {"HostIp": "::", "HostPort": "32768"},
                ]
            },
            "Networks": {
                "shop_default": {"NetworkID": "f" * 64, "IPAddress": "172.18.0.5"},
                "shop_back": {"NetworkID": "e" * 64, "IPAddress": "172.19.0.5"},
            },
        },
    }
    base.update(over)
    return base


def test_instance_fields_from_inspect() -> None:
    inst = _instance_from_attrs(
        attrs(),
        DockerSource(),
        repo_digests=[
            "other/repo@sha256:" + "1" * 64,
            "registry.example:5000/shop/web@sha256:" + "2" * 64,
        ],
    )
    assert inst.name == "shop-web-1"
    assert inst.kind == "container"
    assert inst.base_url == "http://172.19.0.5:80/"  # first network by name: shop_back
    assert inst.reported_version == "1.4.2"
    assert inst.signals[0].source == "label:org.opencontainers.image.version"
    assert inst.owner == "web" and inst.namespace == "shop"
    assert inst.image == "registry.example:5000/shop/web:1.4.2@sha256:" + "2" * 64
    assert inst.image_id == IMAGE_ID
    assert inst.uid == attrs()["Id"]
    assert inst.started_at == datetime(2026, 11, 29, 19, 38, 33, 373034, tzinfo=UTC)
    assert inst.labels["com.docker.compose.service"] == "web"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (DockerSource(network="shop_default"), "http://172.18.0.5:80/"),
        (DockerSource(network="f" * 12, port=8080), "http://172.18.0.5:8080/"),
        (DockerSource(use_published_port=True), "http://127.0.0.1:32768/"),
    ],
)
def test_address_selection(source: DockerSource, expected: str) -> None:
    assert _instance_from_attrs(attrs(), source).base_url == expected


def test_published_port_on_a_specific_or_ipv6_address() -> None:
    one = attrs()
    one["NetworkSettings"]["Ports"]["80/tcp"] = [{"HostIp": "127.0.0.9", "HostPort": "8001"}]
    assert _instance_from_attrs(one, DockerSource(use_published_port=True)).base_url == (
        "http://127.0.0.9:8001/"
    )
    six = attrs()
    six["NetworkSettings"]["Ports"]["80/tcp"] = [{"HostIp": "::", "HostPort": "8002"}]
    assert _instance_from_attrs(six, DockerSource(use_published_port=True)).base_url == (
        "http://[::1]:8002/"
    )


def test_host_network_and_default_bridge() -> None:
    host = attrs(HostConfig={"NetworkMode": "host"})
    host["NetworkSettings"]["Networks"] = {"host": {"IPAddress": ""}}
    assert _instance_from_attrs(host, DockerSource()).base_url == "http://127.0.0.1:80/"
    legacy = attrs()
    legacy["NetworkSettings"] = {"IPAddress": "172.17.0.3", "Networks": {}}
    assert _instance_from_attrs(legacy, DockerSource()).base_url == "http://172.17.0.3:80/"


@pytest.mark.parametrize(
    ("settings", "source", "words"),
    [
        (None, DockerSource(network="absent"), "not attached to network 'absent'"),
        ({"Networks": {"x": {"IPAddress": ""}}}, DockerSource(), "no IP address"),
        ({"Ports": {}}, DockerSource(use_published_port=True), "80/tcp is not published"),
        ({"Ports": {"80/tcp": None}}, DockerSource(use_published_port=True), "not published"),
    ],
)
def test_unaddressable(settings: dict[str, Any] | None, source: DockerSource, words: str) -> None:
    a = attrs()
    if settings is not None:
        a["NetworkSettings"] = settings
    with pytest.raises(_Unaddressable, match=words):
        _instance_from_attrs(a, source)


@pytest.mark.parametrize(
    ("health", "ready"),
    [(None, True), ("healthy", True), ("starting", False), ("unhealthy", False)],
)
def test_ready_follows_the_healthcheck(health: str | None, ready: bool) -> None:
    a = attrs()
    if health:
        a["State"]["Health"] = {"Status": health}
    assert _instance_from_attrs(a, DockerSource()).ready is ready


def test_network_by_unique_id_prefix_only() -> None:
    a = attrs()
    assert _instance_from_attrs(a, DockerSource(network="ff")).base_url == "http://172.18.0.5:80/"
    a["NetworkSettings"]["Networks"]["shop_back"]["NetworkID"] = "f" * 63 + "0"
    with pytest.raises(_Unaddressable):
        _instance_from_attrs(a, DockerSource(network="ff"))  # ambiguous


def test_version_labels_order_and_blank_values() -> None:
    a = attrs()
    a["Config"]["Labels"] = {
        "app.kubernetes.io/version": "2",
        "org.opencontainers.image.version": "",
    }
    inst = _instance_from_attrs(a, DockerSource())
    assert [(s.source, s.value) for s in inst.signals] == [("label:app.kubernetes.io/version", "2")]
    a["Config"]["Labels"] = {}
    assert _instance_from_attrs(a, DockerSource()).signals == ()


def test_image_reference_kept_without_a_matching_digest() -> None:
    a = attrs()
    a["Config"]["Image"] = "web"
    assert _instance_from_attrs(
        a, DockerSource(), repo_digests=["web@sha256:" + "3" * 64]
    ).image == ("web@sha256:" + "3" * 64)
    assert _instance_from_attrs(a, DockerSource(), repo_digests=["x@sha256:1"]).image == "web"
    a["Config"]["Image"] = "web@sha256:" + "4" * 64
    assert _instance_from_attrs(a, DockerSource(), repo_digests=["web@sha256:5"]).image == (
        "web@sha256:" + "4" * 64
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0001-01-01T00:00:00Z", None),
        ("", None),
        (None, None),
        ("garbage", None),
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02T03:04:05.123456789+00:00", datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
    ],
)
def test_parse_time(raw: Any, expected: datetime | None) -> None:
    assert _parse_time(raw) == expected


def test_label_filters() -> None:
    assert _label_filters(["app=web", " tier ", "a.b/c=x=y"]) == ["app=web", "tier", "a.b/c=x=y"]
    for bad in ["", "  ", "=web", "my app=web"]:
        with pytest.raises(ConfigError, match="docker.labels: invalid label filter"):
            _label_filters([bad])


# -- streamed archive ------------------------------------------------------------------


def _header(name: str, kind: bytes, size: int = 0, link: str = "") -> bytes:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    return info.tobuf(tarfile.PAX_FORMAT)


def _lazy_tar(members: list[tuple[str, bytes, int, bytes, str]]) -> Iterator[bytes]:
    """A tar produced chunk by chunk, like the engine's stream: (name, type, size, fill, link)."""
    for name, kind, size, fill, link in members:
        yield _header(name, kind, size, link)
        left = size
        block = fill * (1024 * 1024 // max(len(fill), 1)) if fill else b""
        while left > 0:
            piece = block if left >= len(block) else block[:left]
            left -= len(piece)
            yield piece
        yield b"\0" * ((-size) % 512)
    yield b"\0" * 1024


def test_read_tar_streams_a_large_file_in_bounded_memory() -> None:
    big = 64 * 1024 * 1024
    members = [
        ("html", tarfile.DIRTYPE, 0, b"", ""),
        ("html/assets", tarfile.DIRTYPE, 0, b"", ""),
        ("html/assets/big.bin", tarfile.REGTYPE, big, b"a", ""),
        ("html/assets/same.bin", tarfile.LNKTYPE, 0, b"", "html/assets/big.bin"),
        ("html/latest", tarfile.SYMTYPE, 0, b"", "assets/big.bin"),
        ("html/index.html", tarfile.REGTYPE, 5, b"hello", ""),
    ]
    builder = native.Builder(version="9")
    tracemalloc.start()
    try:
        _read_tar(_lazy_tar(members), builder, "img:/html", ManifestLimits())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 * 1024 * 1024, f"peak {peak} bytes for a {big}-byte file"
    digest = hashlib.sha256(b"a" * big).hexdigest()
    got = builder.manifest()
    assert sorted(got.files) == ["assets/big.bin", "assets/same.bin", "index.html"]
    assert got.files["assets/big.bin"].hashes == {"sha256": digest}
    assert got.files["assets/same.bin"].hashes == {"sha256": digest}
    assert got.files["assets/big.bin"].size == big
    assert got.files["index.html"].size == 5
    assert got.files["index.html"].entry


def test_read_tar_of_the_root_directory() -> None:
    members = [
        ("", tarfile.DIRTYPE, 0, b"", ""),
        ("/srv", tarfile.DIRTYPE, 0, b"", ""),
        ("/srv/a.txt", tarfile.REGTYPE, 1, b"x", ""),
    ]
    builder = native.Builder(version="1")
    _read_tar(_lazy_tar(members), builder, "img:/", ManifestLimits())
    assert list(builder.files) == ["srv/a.txt"]


@pytest.mark.parametrize(
    ("members", "error", "words"),
    [
        ([("html/a.js", tarfile.REGTYPE, 1, b"x", "")], ManifestError, "not a directory"),
        (
            [("html", tarfile.DIRTYPE, 0, b"", ""), ("other/a.js", tarfile.REGTYPE, 1, b"x", "")],
            ManifestError,
            "outside it",
        ),
        (
            [("html", tarfile.DIRTYPE, 0, b"", ""), ("html/../x.js", tarfile.REGTYPE, 1, b"x", "")],
            ManifestError,
            "unsafe archive member",
        ),
        (
            [("html", tarfile.DIRTYPE, 0, b"", ""), ("html/b", tarfile.LNKTYPE, 0, b"", "html/a")],
            ManifestError,
            "not seen before it",
        ),
        (
            [("html", tarfile.DIRTYPE, 0, b"", "")]
            + [(f"html/{i}.js", tarfile.REGTYPE, 1, b"x", "") for i in range(4)],
            ManifestLimitError,
            "more than the cap of 3",
        ),
    ],
)
def test_read_tar_refuses(members: list[Any], error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        _read_tar(
            _lazy_tar(members),
            native.Builder(version="1"),
            "img:/html",
            ManifestLimits(max_entries=3),
        )


def test_read_tar_truncated_stream_is_a_dependency_error() -> None:
    def cut() -> Iterator[bytes]:
        yield _header("html", tarfile.DIRTYPE)
        yield _header("html/a.js", tarfile.REGTYPE, 4096)
        yield b"x" * 100

    with pytest.raises(DependencyError, match="unreadable archive"):
        _read_tar(cut(), native.Builder(version="1"), "img:/html", ManifestLimits())
    with pytest.raises(DependencyError, match="empty archive"):
        _read_tar(iter([b"\0" * 1024]), native.Builder(version="1"), "img:/html", ManifestLimits())


# -- errors the user sees -----------------------------------------------------------------


def test_constructing_an_engine_does_no_io() -> None:
    engine = DockerEngine("unix:///nonexistent/docker.sock")
    assert engine.base_url == "unix:///nonexistent/docker.sock"
    engine.close()


def test_missing_socket(tmp_path: Path) -> None:
    url = f"unix://{tmp_path}/docker.sock"
    with DockerEngine(url) as engine, pytest.raises(DependencyError) as info:
        engine.ping()
    assert (
        str(info.value)
        == f"Docker engine unreachable at {url}: no such socket (is dockerd running?)"
    )


def test_socket_nobody_listens_on(tmp_path: Path) -> None:
    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # bound, never listening: connect is refused
        with DockerEngine(f"unix://{path}") as engine, pytest.raises(DependencyError) as info:
            engine.manifest_from_image("web:1", path="/usr/share/nginx/html", version="1")
    assert str(info.value).endswith(": connection refused")


def test_tcp_port_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    with DockerEngine(url, timeout=2) as engine, pytest.raises(DependencyError) as info:
        discover_containers(engine, DockerSource(labels=["app=web"]))
    assert str(info.value) == f"Docker engine unreachable at {url}: connection refused"


def test_bad_docker_host_is_a_config_error() -> None:
    with DockerEngine("ftp://example") as engine, pytest.raises(ConfigError, match="ftp://example"):
        engine.ping()


def test_docker_host_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///elsewhere/docker.sock")
    assert DockerEngine().base_url == "unix:///elsewhere/docker.sock"
    monkeypatch.delenv("DOCKER_HOST")
    assert DockerEngine().base_url == "unix:///var/run/docker.sock"


class _Raising:
    """Stands in for the SDK client: every call raises the given error."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.containers = self
        self.api = self

    def list(self, **_: Any) -> Any:
        raise self.exc

    def stop(self, *_: Any, **__: Any) -> Any:
        raise self.exc

    def close(self) -> None:
        pass


def _api_error(status: int, message: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    response._content = message.encode()
    return docker.errors.APIError(message, response=response, explanation=message)


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (_api_error(500, "boom"), "listing containers failed: 500 boom"),
        (requests.exceptions.ReadTimeout("slow"), "did not answer within 30s while listing"),
        (
            requests.exceptions.ConnectionError(
                ConnectionResetError(104, "Connection reset by peer")
            ),
            "unreachable at tcp://d:2375: connection reset by peer",
        ),
    ],
)
def test_sdk_errors_are_translated(exc: Exception, words: str) -> None:
    engine = DockerEngine("tcp://d:2375", client=_Raising(exc))
    with pytest.raises(DependencyError, match=words) as info:
        discover_containers(engine, DockerSource())
    assert info.value.__cause__ is exc


def test_action_on_a_vanished_container() -> None:
    engine = DockerEngine(
        "tcp://d:2375",
        client=_Raising(docker.errors.NotFound("gone", explanation="No such container: web-1")),
    )
    with pytest.raises(DependencyError, match="stopping container web-1 failed: no such container"):
        engine.stop("web-1")


def test_chunk_reader_adapts_an_iterator() -> None:
    from artifactcheck.clients.docker import _ChunkReader

    reader = io.BufferedReader(_ChunkReader(iter([b"ab", b"", b"cde"])))
    assert reader.read() == b"abcde"
