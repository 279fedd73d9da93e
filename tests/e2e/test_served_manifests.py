"""The served-manifest step (``observe.served``): siblings try the name found first, and
each distinct manifest body is parsed once per run."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from artifactcheck.manifests.limits import DEFAULT_LIMITS
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Fetched, Instance, Observation
from artifactcheck.observe import served as served_module
from artifactcheck.observe.served import Served, ServedManifests

BODY = json.dumps({"files": {"main.js": "main.1a2b3c4d.js"}}).encode()


class Fetcher:
    """Answers the CRA manifest name with BODY and 404 for any other name."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def get_document(self, base: str, path: str, **_: Any) -> Fetched:
        self.asked.append(path)
        if path != "asset-manifest.json":
            return Fetched(url=base + path, path=path, status=404)
        sha = hashlib.sha256(BODY).hexdigest()
        return Fetched(
            url=base + path,
            path=path,
            status=200,
            hashes={"sha256": sha},
            body=bytes(bytearray(BODY)),
        )


async def unreachable(instance: Instance, path: str, got: Fetched) -> Observation:
    raise AssertionError("every instance answers")


def test_siblings_ask_for_the_name_found_first_and_share_one_parse(monkeypatch) -> None:
    parsed: list[str] = []
    real = served_module.parse_manifest

    def counting(body: bytes, **kwargs: Any) -> Any:
        parsed.append(kwargs["source"])
        return real(body, **kwargs)

    monkeypatch.setattr(served_module, "parse_manifest", counting)
    spec = CheckSpec.model_validate({"targets": [{"url": "http://web-1/"}]})
    fetcher = Fetcher()
    manifests = ServedManifests(
        spec=spec, fetcher=fetcher, limits=DEFAULT_LIMITS, unreachable=unreachable
    )

    async def observe(name: str) -> Served | Observation:
        return await manifests.served(
            Instance(name=name, base_url=f"http://{name}/"), "", answered=False
        )

    first = asyncio.run(observe("web-1"))
    assert isinstance(first, Served) and first.path == "asset-manifest.json"
    assert fetcher.asked[:3] == ["artifactcheck.json", ".vite/manifest.json", "asset-manifest.json"]
    fetcher.asked.clear()
    second = asyncio.run(observe("web-2"))
    assert isinstance(second, Served) and second.manifest is not None
    assert fetcher.asked == ["asset-manifest.json"]  # the name the fleet serves, first
    assert parsed == ["http://web-1/asset-manifest.json"]  # the same body: parsed once
    assert second.manifest.source == "http://web-2/asset-manifest.json"
    assert second.fetch is not None and second.fetch.body is first.fetch.body  # one copy
