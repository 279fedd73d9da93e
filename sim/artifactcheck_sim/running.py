"""Runs a Controller in its own thread and event loop, for the demo, tests and benchmarks."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from artifactcheck.control.controller import Controller, ControllerSettings
from artifactcheck_sim.cluster import SimCluster


class RunningController:
    """A controller with its own event loop thread; stop() ends it cleanly."""

    def __init__(self, cluster: SimCluster, *, identity: str = "ctl-a", **settings: Any) -> None:
        self.api_client = cluster.api.api_client()
        opts = {
            "namespace": cluster.namespace,
            "identity": identity,
            "lease_namespace": cluster.namespace,
            "lease_duration": 2.0,
            "renew_period": 0.3,
            "watch_timeout": 5,
            "backoff_base": 0.05,
            "backoff_max": 0.5,
            **settings,
        }
        self.controller = Controller(
            api_client=self.api_client, settings=ControllerSettings(**opts)
        )
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"controller-{identity}", daemon=True
        )
        self.error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()
            await self.controller.run(self._stop)

        try:
            self._loop.run_until_complete(main())
        except BaseException as exc:  # noqa: BLE001 - surfaced by stop()
            self.error = exc
        finally:
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()

    def start(self) -> RunningController:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=20)
        self.api_client.close()  # type: ignore[no-untyped-call]
        assert not self._thread.is_alive(), "controller did not stop"
        if self.error is not None:
            raise self.error

    def __enter__(self) -> RunningController:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
