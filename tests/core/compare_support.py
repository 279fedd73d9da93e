"""Shared fixtures of the comparison tests: hashes, releases, fetched files, observations.

Why a module of its own: test modules importing each other (``from test_compare import``)
run one module's tests again under another's name and tie them together; every
comparison test reads these from here instead.
"""

from __future__ import annotations

from typing import Any

from artifactcheck.model.values import (
    Expectation,
    Fetched,
    FindingKind,
    Instance,
    Manifest,
    ManifestEntry,
    Observation,
    VersionSignal,
)

A1, A2, B1, B2, IDX1, IDX2 = ("a" * 64, "b" * 64, "c" * 64, "d" * 64, "e" * 64, "f" * 64)
X9 = "9" * 64
K = FindingKind


def release(version: str, files: dict[str, str | None]) -> Manifest:
    return Manifest(
        format="native",
        version=version,
        files={
            p: ManifestEntry(
                path=p, hashes={"sha256": h} if h else {}, size=10, entry=p == "index.html"
            )
            for p, h in files.items()
        },
    )


R1 = release("1.0", {"index.html": IDX1, "assets/a.js": A1, "assets/b.css": B1})
R2 = release("2.0", {"index.html": IDX2, "assets/a.js": A2, "assets/b.css": B2})
NAMES = release("1.0", {"index.html": None, "assets/a.js": None, "assets/b.css": None})


def fetched(
    path: str,
    sha: str | None = None,
    status: int = 200,
    error: str | None = None,
    content_type: str | None = None,
) -> Fetched:
    return Fetched(
        url=f"http://127.0.0.2/{path}",
        path=path,
        status=None if error else status,
        hashes={"sha256": sha} if sha and 200 <= status < 300 and not error else {},
        size=10,
        error=error,
        error_kind="timeout" if error else None,
        headers={"content-type": content_type} if content_type else {},
    )


def obs(name: str, version: str | None, assets: dict[str, Fetched], **kw: Any) -> Observation:
    signals = (VersionSignal("target", version),) if version else ()
    inst = Instance(
        name=name, base_url=f"http://{name}/", signals=signals, image_id=kw.pop("image_id", None)
    )
    kw.setdefault("manifest_path", "artifactcheck.json")
    return Observation(instance=inst, assets=assets, **kw)


def serving(files: dict[str, str]) -> dict[str, Fetched]:
    return {p: fetched(p, h) for p, h in files.items()}


CLEAN = {"index.html": IDX1, "assets/a.js": A1, "assets/b.css": B1}
OLD = {"index.html": IDX2, "assets/a.js": A2, "assets/b.css": B2}  # release 2, all of it
MIX = {"index.html": IDX1, "assets/a.js": A2, "assets/b.css": B1}  # one file of 2.0
E1 = Expectation("1.0", R1)
