"""The registry reader wired into the pipeline.

``release.wiring.build_expectations`` owns the choice of image reader; the settings it
reads (``release.image.source``, ``release.image.registry``) are described in
docs/release-sources.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from artifactcheck.manifests import native
from artifactcheck.model.settings import CheckSpec
from artifactcheck.release import wiring

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_pipeline_reads_release_image_from_registry(pushed: Any, registry: Any) -> None:
    spec = CheckSpec(
        targets=[{"url": "http://127.0.0.1:1/", "version": "1.0.0"}],
        release={
            "image": {
                "reference": f"{registry.host}/web:{{version}}",
                "registry": {"insecure": [registry.host]},
            }
        },
    )
    expectations = wiring.build_expectations(spec, None)  # type: ignore[arg-type]
    assert expectations is not None
    got = asyncio.run(expectations.get("1.0.0"))
    assert got.error is None and got.manifest is not None, got.error
    built = native.build(pushed.site, version="1.0.0")
    assert {p: e.hashes for p, e in got.manifest.files.items()} == {
        p: e.hashes for p, e in built.files.items()
    }
    missing = asyncio.run(expectations.get("9.9.9"))
    assert missing.manifest is None and "404" in (missing.error or "")
    # not listed as insecure: https only, so unavailable (inconclusive), never a crash
    strict = CheckSpec(
        targets=[{"url": "http://127.0.0.1:1/", "version": "1.0.0"}],
        release={"image": {"reference": f"{registry.host}/web:{{version}}"}},
    )
    refused = wiring.build_expectations(strict, None)  # type: ignore[arg-type]
    assert refused is not None
    got2 = asyncio.run(refused.get("1.0.0"))
    assert got2.manifest is None and "https://" in (got2.error or "")
