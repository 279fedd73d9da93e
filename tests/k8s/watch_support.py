"""Checks of a watch that every client of the controller must pass, whatever carries it."""

from __future__ import annotations

import asyncio

import pytest

from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck_sim.apiserver import FakeApiServer


async def _until_watching(server: FakeApiServer, watching: bool) -> None:
    for _ in range(100):
        if bool(server.watch_count) == watching:
            return
        await asyncio.sleep(0.02)


async def cancelling_a_watch_closes_its_stream(
    kube: KubeHttp, server: FakeApiServer, path: str
) -> None:
    """A watch of the pods at ``path`` (a pod made by the caller) is followed, then its
    task is cancelled: the server must see the stream end, not keep it for its 60 s."""
    rv = (await kube.list("pods", path))["metadata"]["resourceVersion"]

    async def follow() -> None:
        async for _ in kube.watch("pods", path, resource_version=rv, timeout_seconds=60):
            pass

    task = asyncio.create_task(follow())
    await _until_watching(server, True)
    assert server.watch_count == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _until_watching(server, False)
    assert server.watch_count == 0
