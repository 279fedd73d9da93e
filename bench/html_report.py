"""Benchmark: size and render time of a 1,000-instance HTML report in a real browser.

A synthetic report of a Kubernetes fleet (1,000 pods on 40 nodes, 8 files fetched
each with nginx's evidence headers; 1 in ``--drift-every`` (50) drifted onto another
release's bytes, 3 files differing each; 10 unreachable; the CDN lacking one file) is
rendered as ``verify --output html=FILE`` renders it, written to a file and opened
from a ``file://`` URL in Debian's headless Chromium (chromium + chromium-driver,
selenium).
Figures: the file's size, the time to render it in Python, and the browser's time
from navigation start to the end of the load event (the page has no script of its
own, so the load event is when it is laid out), the best of N.

    python -m bench.html_report [--instances 1000] [--files 8] [--runs 5] [--drift-every 50]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from artifactcheck.model.values import (
    Coverage,
    Fetched,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Observation,
    Report,
    Verdict,
)
from artifactcheck.present.html_report import render_html
from artifactcheck.present.report import to_json

from .common import ROOT


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build(instances: int = 1000, files: int = 8, drift_every: int = 50) -> Report:
    """The synthetic fleet's report (see the module's docstring)."""
    paths = [f"assets/chunk-{k:02d}-{_digest(str(k))[:8]}.js" for k in range(files)]
    paths[0] = "index.html"
    results = []
    for i in range(instances):
        name = f"web-7d9f8c6b5-{_digest(str(i))[:5]}"
        base = f"http://10.{i // 250}.{i % 250}.17:8080/"
        inst = Instance(
            name=name,
            base_url=base,
            kind="pod",
            namespace="shop",
            node=f"node-{i % 40:02d}",
            owner="web-7d9f8c6b5",
        )
        drifted = i % drift_every == 7 % drift_every
        unreachable = i % 100 == 42
        assets = {}
        findings = []
        for k, path in enumerate(paths):
            digest = _digest(path + ("old" if drifted and 0 < k <= 3 else ""))
            assets[path] = Fetched(
                url=base + path,
                path=path,
                status=200,
                hashes={"sha256": digest},
                size=50034,
                headers={
                    "server": "nginx/1.22.1",
                    "content-type": "application/javascript",
                    "cache-control": "public, max-age=31536000, immutable",
                    "etag": f'"6b0f60df-c3{k}"',
                },
                elapsed=0.0123,
            )
            if drifted and 0 < k <= 3:
                findings.append(
                    Finding(
                        FindingKind.CONTENT_DIFFERS,
                        f"{path} differs from release 1.4.2",
                        instance=name,
                        path=path,
                        expected=_digest(path),
                        actual=digest,
                    )
                )
        if unreachable:
            obs = Observation(
                instance=inst,
                manifest_path="artifactcheck.json",
                error="connect: connection refused",
            )
            verdict, reason = Verdict.UNREACHABLE, "connect: connection refused"
        else:
            obs = Observation(instance=inst, manifest_path="artifactcheck.json", assets=assets)
            verdict = Verdict.MISMATCH if drifted else Verdict.CONSISTENT
            reason = "reports 1.4.2 but serves 1.4.1" if drifted else "ok"
        results.append(
            InstanceResult(
                instance=inst,
                verdict=verdict,
                reason=reason,
                findings=tuple(findings),
                reported_version="1.4.2",
                serves_version="1.4.1" if drifted else "1.4.2",
                fingerprint=None if unreachable else _digest(str(drifted))[:12],
                coverage=Coverage(compared=files, total=files),
                observation=obs,
            )
        )
    cdn_finding = Finding(
        FindingKind.CDN_MISSING,
        f"{paths[1]} is missing on the CDN: it answers 403",
        path=paths[1],
    )
    return Report(
        results=tuple(results),
        findings=(cdn_finding,),
        desired_version="1.4.2",
        cdn="https://cdn.example.com/",
        requests=instances * files,
        elapsed=12.5,
    )


def browser_helpers() -> ModuleType:
    """scripts/html_screenshot.py, the one home of the Chromium flags."""
    spec = importlib.util.spec_from_file_location(
        "html_screenshot", ROOT / "scripts" / "html_screenshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The browser's own figure: navigation start to the end of the load event, in ms.
LOAD_MS = (
    "const n = performance.getEntriesByType('navigation')[0];"
    "return [n.loadEventEnd - n.startTime, document.querySelectorAll('details').length];"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.html_report")
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--drift-every", type=int, default=50, help="1 in N drifted (1: every one, the worst case)"
    )
    args = parser.parse_args(argv)
    report = build(args.instances, args.files, args.drift_every)
    started = time.perf_counter()
    html = render_html(to_json(report))
    rendered = time.perf_counter() - started
    best_load = best_wall = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(html, encoding="utf-8")
        with browser_helpers().chromium() as driver:
            for _ in range(args.runs):
                driver.get("about:blank")
                started = time.perf_counter()
                driver.get(page.as_uri())  # returns once the load event has fired
                wall = time.perf_counter() - started
                load_ms, shown = driver.execute_script(LOAD_MS)
                if shown != args.instances:
                    raise SystemExit(f"the page shows {shown} instances of {args.instances}")
                best_load, best_wall = min(best_load, load_ms / 1000), min(best_wall, wall)
    size = len(html.encode())
    print(
        f"{args.instances:,}-instance HTML report ({args.files} files each, 1 in "
        f"{args.drift_every} drifted): "
        f"{size / 1e6:.2f} MB, rendered in {rendered * 1000:.0f} ms; Chromium loads it in "
        f"{best_load * 1000:.0f} ms (driver.get {best_wall * 1000:.0f} ms), best of {args.runs}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
