"""``artifactcheck verify --docker-label`` and release images, on a real Docker engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main

pytestmark = pytest.mark.docker


def verify(docker_host: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> Any:
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    return CliRunner().invoke(main, ["verify", *args], catch_exceptions=False)


def test_tampered_container_is_named_with_its_image(
    docker_host: str,
    monkeypatch: pytest.MonkeyPatch,
    run_id: str,
    site_images: Any,
    containers: Any,
    tmp_path: Any,
) -> None:
    labels = {"case": "verify"}
    clean = [containers.start(site_images.clean, labels=labels) for _ in range(2)]
    bad = containers.start(site_images.tampered, labels=labels)
    release = tmp_path / "release-{version}.json"
    build = CliRunner().invoke(
        main,
        [
            "manifest",
            "build",
            str(site_images.site),
            "--version",
            site_images.version,
            "-o",
            str(tmp_path / f"release-{site_images.version}.json"),
        ],
    )
    assert build.exit_code == 0, build.output
    result = verify(
        docker_host,
        monkeypatch,
        "--docker-label",
        f"artifactcheck.test={run_id}",
        "--docker-label",
        "case=verify",
        "--release-manifest",
        str(release),
        "--output",
        "json",
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    results = {r["instance"]: r for r in doc["results"]}
    assert set(results) == {c.name for c in [*clean, bad]}
    assert results[bad.name]["verdict"] == "mismatch"
    assert results[bad.name]["image_id"] == site_images.tampered_id
    assert any(f["kind"] == "image-diverges" for f in results[bad.name]["findings"])
    assert all(results[c.name]["verdict"] == "consistent" for c in clean)
    table = verify(
        docker_host,
        monkeypatch,
        "--docker-label",
        f"artifactcheck.test={run_id}",
        "--docker-label",
        "case=verify",
        "--release-manifest",
        str(release),
    )
    flat = table.stdout.replace("\n", " ")
    assert (
        bad.name in flat
        and site_images.tampered_id[:19] in flat.replace(" ", "")
        or bad.name in flat
    )


def test_release_image_as_expected_content(
    docker_host: str,
    monkeypatch: pytest.MonkeyPatch,
    run_id: str,
    site_images: Any,
    containers: Any,
) -> None:
    labels = {"case": "from-image"}
    containers.start(site_images.clean, labels=labels)
    bad = containers.start(site_images.tampered, labels=labels)
    result = verify(
        docker_host,
        monkeypatch,
        "--docker-label",
        f"artifactcheck.test={run_id}",
        "--docker-label",
        "case=from-image",
        "--release-image",
        site_images.clean,
        "--release-image-path",
        "/usr/share/nginx/html",
        "--output",
        "json",
    )
    assert result.exit_code == 1, result.output
    verdicts = {r["instance"]: r["verdict"] for r in json.loads(result.stdout)["results"]}
    assert verdicts[bad.name] == "mismatch"
    assert sorted(verdicts.values()) == ["consistent", "mismatch"]


def test_on_mismatch_stop_under_safety_limits(
    docker_host: str,
    monkeypatch: pytest.MonkeyPatch,
    run_id: str,
    site_images: Any,
    containers: Any,
    docker_client: Any,
) -> None:
    labels = {"case": "act"}
    clean = [containers.start(site_images.clean, labels=labels) for _ in range(3)]
    bad = containers.start(site_images.tampered, labels=labels)
    args = [
        "--docker-label",
        f"artifactcheck.test={run_id}",
        "--docker-label",
        "case=act",
        "--release-image",
        site_images.clean,
        "--on-mismatch",
        "stop",
        "--output",
        "json",
    ]
    dry = verify(docker_host, monkeypatch, *args, "--dry-run")
    assert dry.exit_code == 1
    acts = json.loads(dry.stdout)["actions"]
    assert [a["target"] for a in acts if a["kind"] == "quarantine"] == [bad.name]
    assert all(a["dry_run"] for a in acts)
    bad.reload()
    assert bad.status == "running", "dry-run must not stop anything"
    real = verify(docker_host, monkeypatch, *args)
    assert real.exit_code == 1
    bad.reload()
    assert bad.status == "exited"
    for c in clean:
        c.reload()
        assert c.status == "running"


def test_container_stopped_mid_run_is_unreachable_not_mismatch(
    docker_host: str,
    monkeypatch: pytest.MonkeyPatch,
    run_id: str,
    site_images: Any,
    containers: Any,
    tmp_path: Any,
) -> None:
    import asyncio

    from artifactcheck.clients.docker import DockerEngine
    from artifactcheck.model.settings import load_spec
    from artifactcheck.pipeline import run_check

    labels = {"case": "stopped"}
    containers.start(site_images.clean, labels=labels)
    gone = containers.start(site_images.clean, labels=labels)
    spec = load_spec(
        {
            "docker": {"labels": [f"artifactcheck.test={run_id}", "case=stopped"]},
            "http": {"connect_timeout": 1.0, "instance_deadline": 5.0},
            "retry": {"attempts": 1},
        }
    )
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    from artifactcheck.pipeline import discover_all

    instances = asyncio.run(discover_all(spec))
    assert len(instances) == 2
    with DockerEngine(docker_host) as engine:
        engine.stop(gone.name, timeout=1)
    report = asyncio.run(run_check(spec, instances=instances))
    verdicts = {r.instance.name: r.verdict.value for r in report.results}
    assert verdicts[gone.name] == "unreachable"
    assert "mismatch" not in verdicts.values()


def test_verify_forks_its_observers_after_discovering_containers(
    docker_host: str, run_id: str, site_images: Any, containers: Any
) -> None:
    """Discovery's thread ends with it, so a run that discovered containers can still
    observe them from several processes (a thread left running forbids the fork)."""
    import os
    import subprocess
    import sys

    labels = {"case": "processes"}
    started = [containers.start(site_images.clean, labels=labels) for _ in range(2)]
    proc = subprocess.run(
        [sys.executable, "-m", "artifactcheck", "-v", "verify"]
        + ["--docker-label", f"artifactcheck.test={run_id}", "--docker-label", "case=processes"]
        + ["--processes", "2", "--output", "json"],
        env={**os.environ, "DOCKER_HOST": docker_host},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "observing 2 instances from 2 processes" in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    assert {r["instance"] for r in doc["results"]} == {c.name for c in started}
    assert proc.returncode == 0, proc.stderr


def test_daemon_unreachable_exits_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    result = CliRunner().invoke(main, ["verify", "--docker-label", "app=web"])
    assert result.exit_code == 3
    assert "Docker engine unreachable" in result.stderr


def test_manifest_from_image_cli_matches_manifest_build(
    docker_host: str, monkeypatch: pytest.MonkeyPatch, site_images: Any, tmp_path: Any
) -> None:
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    runner = CliRunner()
    from_image, built = tmp_path / "from-image.json", tmp_path / "built.json"
    r1 = runner.invoke(
        main,
        [
            "manifest",
            "from-image",
            site_images.clean,
            "--path",
            "/usr/share/nginx/html",
            "--version",
            site_images.version,
            "-o",
            str(from_image),
        ],
    )
    assert r1.exit_code == 0, r1.output
    r2 = runner.invoke(
        main,
        [
            "manifest",
            "build",
            str(site_images.site),
            "--version",
            site_images.version,
            "-o",
            str(built),
        ],
    )
    assert r2.exit_code == 0, r2.output
    doc = json.loads(from_image.read_text())
    assert doc.pop("image_id") == site_images.clean_id
    # byte for byte once the image ID (recorded only by from-image) is set aside
    rendered = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert rendered.encode() == built.read_bytes()
    missing = runner.invoke(main, ["manifest", "from-image", "no-such-image:1", "--version", "1"])
    assert missing.exit_code == 3 and "no-such-image" in missing.stderr
