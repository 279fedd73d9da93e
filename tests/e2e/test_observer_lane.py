"""Pods waiting out of traffic go first: ``Observer.observe(first=True)``.

A controller's full cycle queues hundreds of sampled pods behind
``http.max_connections`` observation slots; a pod that just became ready must not
wait behind them for its verdict. The observation itself is replaced by a timed
stand-in here, so what is tested is only the order the observer lets them run in.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import Instance, Observation
from artifactcheck.observe.instance import _FIRST, Observer


def spec(max_connections: int) -> Any:
    return load_spec(
        {
            "targets": [{"url": "http://127.0.0.1:9/", "version": "1.0"}],
            "manifest_path": "artifactcheck.json",
            "http": {"max_connections": max_connections, "max_per_host": 4},
        }
    )


def test_a_first_pod_starts_at_once_and_holds_back_queued_instances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[tuple[str, str]] = []
    widths: dict[str, bool] = {}

    async def stand_in(self: Observer, instance: Instance) -> tuple[Observation, None]:
        events.append(("start", instance.name))
        widths[instance.name] = _FIRST.get()
        await asyncio.sleep(0.2 if instance.name == "new" else 0.05)
        events.append(("end", instance.name))
        return Observation(instance=instance, manifest_path="artifactcheck.json"), None

    monkeypatch.setattr(Observer, "_observe_within_deadline", stand_in)

    async def run() -> None:
        check = spec(max_connections=2)
        async with Fetcher(http=check.http, retry=check.retry) as fetcher:
            observer = Observer(spec=check, fetcher=fetcher, expectations=None)
            sample = [
                Instance(name=f"s{n}", base_url=f"http://127.0.0.1:{n + 10}/") for n in range(6)
            ]
            full = [asyncio.create_task(observer.observe(i)) for i in sample]
            await asyncio.sleep(0.01)  # s0 and s1 hold both slots, s2..s5 queue
            new = Instance(name="new", base_url="http://127.0.0.1:99/")
            await observer.observe(new, first=True)
            await asyncio.gather(*full)

    asyncio.run(run())
    order = [f"{kind} {name}" for kind, name in events]
    # the new pod started while both slots were taken, before any queued instance
    assert order.index("start new") < order.index("start s2")
    # and no queued instance started until it was done (those under way finished)
    started_while_new = order[order.index("start new") : order.index("end new")]
    assert not [e for e in started_while_new if e.startswith("start s")]
    assert {"end s0", "end s1"} <= set(started_while_new)
    assert widths == {**{f"s{n}": False for n in range(6)}, "new": True}
    # everyone was observed
    assert {name for kind, name in events if kind == "end"} == {*(f"s{n}" for n in range(6)), "new"}
