"""Acting on Docker containers: a decided quarantine as the configured Docker action.

Containers have no readiness gate: ``docker.on_mismatch`` (``stop``, ``pause`` or
``disconnect=NETWORK``) is how a container leaves traffic, so it plays the gate's role.
"""

from __future__ import annotations

import asyncio

from artifactcheck.clients.docker import DockerEngine
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.records import replace
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import (
    Action,
    ActionKind,
    Finding,
    FindingKind,
    Report,
    Severity,
)


async def act_on_containers(spec: CheckSpec, report: Report) -> Report:
    """Perform decided quarantines as the configured Docker action (never in dry-run)."""
    assert spec.docker is not None and spec.docker.on_mismatch is not None
    on_mismatch = spec.docker.on_mismatch
    done: list[Action] = []
    held: list[Finding] = []
    with DockerEngine() as engine:
        for action in report.actions:
            if action.kind is not ActionKind.QUARANTINE:
                done.append(action)
                continue
            described = replace(action, reason=f"docker {on_mismatch}: {action.reason}")
            if action.dry_run:
                done.append(described)
                continue
            try:
                await _take_out(engine, on_mismatch, action.target)
                done.append(described)
            except ArtifactCheckError as exc:
                held.append(_held(on_mismatch, action.target, exc))
    return replace(report, actions=tuple(done), findings=report.findings + tuple(held))


async def _take_out(engine: DockerEngine, on_mismatch: str, container: str) -> None:
    """Stop, pause or disconnect one container (blocking SDK calls, in a thread)."""
    kind, _, network = on_mismatch.partition("=")
    if kind == "stop":
        await asyncio.to_thread(engine.stop, container)
    elif kind == "pause":
        await asyncio.to_thread(engine.pause, container)
    else:
        await asyncio.to_thread(engine.disconnect, container, network)


def _held(on_mismatch: str, container: str, exc: ArtifactCheckError) -> Finding:
    kind = on_mismatch.partition("=")[0]
    return Finding(
        FindingKind.ACTION_HELD,
        f"docker {kind} of {container} failed: {exc}",
        instance=container,
        severity=Severity.WARNING,
    )
