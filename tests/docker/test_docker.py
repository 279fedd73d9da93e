"""Docker discovery, manifests from images and container actions, on a real engine.

Each test starts the containers it needs (removed when it ends); the two images are
made once per session. Content is fetched from the host over HTTP like curl would,
because that is how the product will see these containers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from artifactcheck.clients.docker import PURPOSE_LABEL, DockerEngine
from artifactcheck.discover.docker_containers import (
    COMPOSE_PROJECT,
    COMPOSE_SERVICE,
    discover_containers,
)
from artifactcheck.manifests import native
from artifactcheck.model.errors import ConfigError, DependencyError, ManifestError
from artifactcheck.model.records import replace
from artifactcheck.model.settings import DockerSource
from artifactcheck.model.values import Instance

pytestmark = pytest.mark.docker


def http_get(url: str, *, timeout: float = 5.0) -> bytes:
    """One GET from the host, no proxies; raises OSError when nothing answers."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as resp:
        body: bytes = resp.read()
        assert resp.status == 200
        return body


def by_name(instances: list[Instance]) -> dict[str, Instance]:
    return {i.name: i for i in instances}


def test_discovers_fleet_and_tells_the_tampered_image_apart(
    select: Any,
    test_labels: dict[str, str],
    docker_engine: DockerEngine,
    site_images: Any,
    containers: Any,
) -> None:
    compose = {COMPOSE_PROJECT: "shop", COMPOSE_SERVICE: "web", "case": "fleet"}
    clean = [containers.start(site_images.clean, labels=compose) for _ in range(2)]
    bad = containers.start(site_images.tampered, labels=compose)
    containers.start(site_images.clean, labels={"case": "other"})  # not selected

    found = by_name(discover_containers(docker_engine, select("case=fleet")))

    assert sorted(found) == sorted(c.name for c in [*clean, bad])
    for container in [*clean, bad]:
        inst = found[container.name]
        assert inst.kind == "container"
        assert inst.reported_version == site_images.version
        assert inst.signals[0].source == f"label:{site_images.version_label}"
        assert inst.owner == "web" and inst.namespace == "shop"
        assert inst.uid == container.id
        assert inst.labels.items() >= test_labels.items()
        assert inst.started_at is not None
        assert abs(time.time() - inst.started_at.timestamp()) < 300
        ip = container.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
        assert inst.base_url == f"http://{ip}:80/"
        index = http_get(inst.base_url + "index.html")
        assert index == (site_images.site / "index.html").read_bytes()
    assert {found[c.name].image_id for c in clean} == {site_images.clean_id}
    assert found[bad.name].image_id == site_images.tampered_id != site_images.clean_id
    assert found[bad.name].image == site_images.tampered  # imported: no repo digest
    expected = (site_images.site / site_images.tampered_path).read_bytes()
    for container in clean:
        assert http_get(found[container.name].base_url + site_images.tampered_path) == expected
    served = http_get(found[bad.name].base_url + site_images.tampered_path)
    assert served != expected


def test_version_labels_in_order_and_missing_ones_skipped(
    select: Any, docker_engine: DockerEngine, site_images: Any, containers: Any
) -> None:
    c = containers.start(
        site_images.clean, labels={"app.kubernetes.io/version": "1.1", "case": "signals"}
    )
    (inst,) = discover_containers(docker_engine, select("case=signals"))
    assert inst.name == c.name
    assert [(s.source, s.value) for s in inst.signals] == [
        (f"label:{site_images.version_label}", "1.0"),
        ("label:app.kubernetes.io/version", "1.1"),
    ]
    (inst,) = discover_containers(docker_engine, select("case=signals", version_labels=["absent"]))
    assert inst.signals == () and inst.reported_version is None


def test_published_port(
    select: Any, docker_engine: DockerEngine, site_images: Any, containers: Any
) -> None:
    published = containers.start(site_images.clean, labels={"case": "ports"}, publish=True)
    unpublished = containers.start(site_images.clean, labels={"case": "ports"})

    found = discover_containers(docker_engine, select("case=ports", use_published_port=True))

    assert [i.name for i in found] == [published.name]  # the other one is skipped
    host_port = published.attrs["NetworkSettings"]["Ports"]["80/tcp"][0]["HostPort"]
    assert found[0].base_url == f"http://127.0.0.1:{host_port}/"
    assert http_get(found[0].base_url + "index.html").startswith(b"<")
    assert unpublished.name not in {i.name for i in found}


def test_network_selects_the_address_and_filters(
    select: Any,
    docker_engine: DockerEngine,
    site_images: Any,
    containers: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    net = containers.network("front")
    on_net = containers.start(site_images.clean, labels={"case": "net"}, networks=(net.name,))
    off_net = containers.start(site_images.clean, labels={"case": "net"})

    with caplog.at_level(logging.WARNING, logger="artifactcheck.discover.docker_containers"):
        found = discover_containers(docker_engine, select("case=net", network=net.name))

    assert [i.name for i in found] == [on_net.name]
    on_net.reload()
    ip = on_net.attrs["NetworkSettings"]["Networks"][net.name]["IPAddress"]
    assert found[0].base_url == f"http://{ip}:80/"
    assert http_get(found[0].base_url + "index.html")
    assert f"container {off_net.name} skipped: not attached to network" in caplog.text
    by_id = discover_containers(docker_engine, select("case=net", network=net.id))
    assert [i.name for i in by_id] == [on_net.name]


def test_only_running_containers_are_discovered(
    select: Any, docker_engine: DockerEngine, site_images: Any, containers: Any
) -> None:
    running = containers.start(site_images.clean, labels={"case": "state"})
    stopped = containers.start(site_images.clean, labels={"case": "state"})
    stopped.stop(timeout=1)
    containers.create(site_images.clean, labels={"case": "state"})

    assert [i.name for i in discover_containers(docker_engine, select("case=state"))] == [
        running.name
    ]


def test_container_stopped_after_discovery_is_unreachable(
    select: Any, docker_engine: DockerEngine, site_images: Any, containers: Any
) -> None:
    container = containers.start(site_images.clean, labels={"case": "stop"})
    (inst,) = discover_containers(docker_engine, select("case=stop"))
    assert http_get(inst.base_url + "index.html")

    docker_engine.stop(container.name, timeout=1)
    docker_engine.stop(container.name, timeout=1)  # already stopped: no-op

    container.reload()
    assert container.status == "exited"
    with pytest.raises(OSError):
        http_get(inst.base_url + "index.html", timeout=2)
    assert discover_containers(docker_engine, select("case=stop")) == []


def test_pause_and_unpause(
    select: Any, docker_engine: DockerEngine, site_images: Any, containers: Any
) -> None:
    container = containers.start(site_images.clean, labels={"case": "pause"})
    (inst,) = discover_containers(docker_engine, select("case=pause"))

    docker_engine.pause(container.name)
    docker_engine.pause(container.name)  # already paused: no-op

    container.reload()
    assert container.attrs["State"]["Paused"] is True
    assert (
        discover_containers(docker_engine, select("case=pause")) == []
    )  # a paused one serves nothing
    with pytest.raises(OSError):  # the kernel accepts, nobody answers
        http_get(inst.base_url + "index.html", timeout=1)

    docker_engine.unpause(container.name)
    docker_engine.unpause(container.name)  # not paused: no-op
    assert http_get(inst.base_url + "index.html")


def test_disconnect_takes_a_container_out_of_a_network(
    select: Any, docker_engine: DockerEngine, site_images: Any, containers: Any
) -> None:
    net = containers.network("traffic")
    container = containers.start(site_images.clean, labels={"case": "disc"}, networks=(net.name,))
    (inst,) = discover_containers(docker_engine, select("case=disc", network=net.name))

    docker_engine.disconnect(container.name, net.name)
    docker_engine.disconnect(container.name, net.name)  # not attached: no-op

    container.reload()
    assert container.status == "running"
    assert net.name not in container.attrs["NetworkSettings"]["Networks"]
    assert discover_containers(docker_engine, select("case=disc", network=net.name)) == []
    with pytest.raises(OSError):
        http_get(inst.base_url + "index.html", timeout=2)
    (still,) = discover_containers(
        docker_engine, select("case=disc")
    )  # still on the default bridge
    assert http_get(still.base_url + "index.html")


@pytest.mark.parametrize("action", ["stop", "pause", "unpause"])
def test_actions_on_a_missing_container(
    docker_engine: DockerEngine, run_id: str, action: str
) -> None:
    with pytest.raises(DependencyError, match="no such container"):
        getattr(docker_engine, action)(f"ac-{run_id}-absent")


def test_disconnect_missing_container(docker_engine: DockerEngine, run_id: str) -> None:
    with pytest.raises(DependencyError, match="no such container"):
        docker_engine.disconnect(f"ac-{run_id}-absent", "bridge")


def _purpose_containers(client: Any) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": PURPOSE_LABEL}))


def test_manifest_from_image_equals_manifest_build(
    docker_engine: DockerEngine, docker_client: Any, site_images: Any
) -> None:
    before = _purpose_containers(docker_client)
    from_image = docker_engine.manifest_from_image(
        site_images.clean, path=site_images.html_root, version=site_images.version
    )
    built = native.build(site_images.site, version=site_images.version)

    assert from_image.image_id == site_images.clean_id
    assert native.dump(replace(from_image, image_id=None)) == native.dump(built)
    doc = json.loads(native.dump(from_image))
    assert doc.pop("image_id") == site_images.clean_id
    assert doc == json.loads(native.dump(built))
    assert from_image.source == f"{site_images.clean}:{site_images.html_root}"
    assert _purpose_containers(docker_client) == before  # the helper container is gone

    by_id = docker_engine.manifest_from_image(
        site_images.clean_id, path=site_images.html_root + "/", version=site_images.version
    )
    assert native.dump(by_id) == native.dump(from_image)


def test_manifest_from_tampered_image_differs_in_one_file(
    docker_engine: DockerEngine, site_images: Any
) -> None:
    clean = docker_engine.manifest_from_image(
        site_images.clean, path=site_images.html_root, version=site_images.version
    )
    bad = docker_engine.manifest_from_image(
        site_images.tampered, path=site_images.html_root, version=site_images.version
    )

    assert bad.image_id == site_images.tampered_id
    assert clean.files.keys() == bad.files.keys()
    differing = [p for p in clean.files if clean.files[p] != bad.files[p]]
    assert differing == [site_images.tampered_path]
    served = (site_images.site / site_images.tampered_path).read_bytes()
    assert clean.files[differing[0]].hashes["sha256"] == hashlib.sha256(served).hexdigest()


@pytest.mark.parametrize(
    ("image", "path", "error", "words"),
    [
        ("artifactcheck-test/absent:{run}", "{html}", DependencyError, "never pulls"),
        ("{clean}", "/srv/absent", ManifestError, "no such directory"),
        ("{clean}", "{html}/index.html", ManifestError, "not a directory"),
        ("{clean}", "usr/share/nginx/html", ConfigError, "must be absolute"),
        ("Not A Reference", "{html}", ConfigError, "invalid reference format"),
    ],
)
def test_manifest_from_image_errors(
    docker_engine: DockerEngine,
    run_id: str,
    docker_client: Any,
    site_images: Any,
    image: str,
    path: str,
    error: type[Exception],
    words: str,
) -> None:
    ref = image.format(run=run_id, clean=site_images.clean)
    path = path.format(html=site_images.html_root)
    before = _purpose_containers(docker_client)
    with pytest.raises(error) as info:
        docker_engine.manifest_from_image(ref, path=path, version=site_images.version)
    assert words in str(info.value)
    assert ref in str(info.value) or path in str(info.value)
    assert _purpose_containers(docker_client) == before


def test_symlinks_skipped_and_hardlinks_hashed_like_build(
    docker_engine: DockerEngine,
    run_id: str,
    test_labels: dict[str, str],
    docker_client: Any,
    tmp_path: Path,
    site_images: Any,
) -> None:
    """Same rule as ``manifest build``: a symlink is no file, a hard link is one."""
    import io
    import tarfile

    site = tmp_path / "site"
    (site / "assets").mkdir(parents=True)
    (site / "index.html").write_bytes(b"<html>hi</html>\n")
    (site / "assets" / "app.js").write_bytes(b"console.log(1)\n")
    (site / "assets" / "copy.js").hardlink_to(site / "assets" / "app.js")
    (site / "latest.js").symlink_to("assets/app.js")
    (site / "old").symlink_to("assets")

    tar_path = tmp_path / "links.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(site, arcname="srv/site")  # tarfile stores the second link as LNKTYPE
        info = tarfile.TarInfo("bin")
        info.type = tarfile.DIRTYPE
        tar.addfile(info, io.BytesIO())
    ref = f"artifactcheck-test/links:{run_id}"
    docker_client.api.import_image(
        src=str(tar_path),
        repository=ref.split(":")[0],
        tag=ref.split(":")[1],
        changes=[f"LABEL {k}={v}" for k, v in test_labels.items()] + ['CMD ["/none"]'],
    )
    try:
        got = docker_engine.manifest_from_image(ref, path="/srv/site", version="2")
    finally:
        docker_client.images.remove(ref, force=True)
    want = native.build(site, version="2")
    assert sorted(got.files) == ["assets/app.js", "assets/copy.js", "index.html"]
    assert native.dump(replace(got, image_id=None)) == native.dump(want)


def test_manifest_from_image_through_a_symlinked_directory(
    docker_engine: DockerEngine,
    docker_client: Any,
    tmp_path: Path,
    site_images: Any,
    run_id: str,
    test_labels: dict[str, str],
) -> None:
    import tarfile

    tar_path = tmp_path / "symroot.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(site_images.site, arcname="opt/release")
        link = tarfile.TarInfo("www")
        link.type = tarfile.SYMTYPE
        link.linkname = "/opt/release"
        tar.addfile(link)
    ref = f"artifactcheck-test/symroot:{run_id}"
    docker_client.api.import_image(
        src=str(tar_path),
        repository=ref.split(":")[0],
        tag=ref.split(":")[1],
        changes=[f"LABEL {k}={v}" for k, v in test_labels.items()],
    )
    try:
        got = docker_engine.manifest_from_image(ref, path="/www", version=site_images.version)
    finally:
        docker_client.images.remove(ref, force=True)
    want = native.build(site_images.site, version=site_images.version)
    assert native.dump(replace(got, image_id=None)) == native.dump(want)


def test_engine_from_docker_host_env(
    docker_host: str, monkeypatch: pytest.MonkeyPatch, site_images: Any
) -> None:
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    with DockerEngine() as engine:
        assert engine.base_url == docker_host
        engine.ping()
        assert engine.manifest_from_image(
            site_images.clean, path=site_images.html_root, version="1"
        ).files


def test_daemon_unreachable(tmp_path: Path, docker_daemon: Any) -> None:
    """Also run with the engine up: an unreachable one must not be confused with it."""
    url = f"unix://{tmp_path}/absent/docker.sock"
    with DockerEngine(url) as engine:
        with pytest.raises(DependencyError) as info:
            discover_containers(engine, DockerSource(labels=["app=web"]))
    assert str(info.value) == (
        f"Docker engine unreachable at {url}: no such socket (is dockerd running?)"
    )
