"""Hostile instances: huge or lying manifests, SSRF bait, off-host redirects, tarpits.

Each hostile instance must get a clear finding or error, no request may leave the
allowed base URLs (checked at the servers), memory stays bounded and the run ends
within its deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc

from artifactcheck.model.settings import load_spec
from artifactcheck.model.values import FindingKind, Verdict
from artifactcheck.pipeline import run_check
from artifactcheck_sim.web import Hang, Huge, Redirect, Site, Trickle


def check(spec: dict):
    return asyncio.run(run_check(load_spec(spec)))


def by_name(report):
    return {r.instance.name: r for r in report.results}


def test_huge_manifest_is_refused_with_bounded_memory(make_fleet, web) -> None:
    fleet = make_fleet(1)
    huge = web.add(Site(overrides={"artifactcheck.json": Huge(50 * 1024 * 1024)}), "127.91.0.1")
    spec = fleet.spec(
        targets=[{"url": huge, "version": "1.4.1", "name": "huge"}, *fleet.targets()],
        manifest_path="artifactcheck.json",
    )
    spec["cdn"] = None
    tracemalloc.start()
    try:
        report = check(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    r = by_name(report)["huge"]
    assert r.verdict is Verdict.MISMATCH
    invalid = [f for f in r.findings if f.kind is FindingKind.MANIFEST_INVALID]
    assert (
        invalid
        and "too-large" in (r.observation.manifest_fetch.error_kind or "")
        or "cap" in invalid[0].message
    )
    assert peak < 40 * 1024 * 1024, f"peak traced memory {peak / 1e6:.1f} MB"
    # the server did not have to send all 50 MB: the client stopped reading at the cap
    assert web.server(huge).bytes_sent < 50 * 1024 * 1024


def test_ssrf_paths_in_manifest_are_never_fetched(make_fleet, web) -> None:
    fleet = make_fleet(1)
    evil_manifest = {
        "schema": "artifactcheck/release-manifest/v1",
        "version": "1.4.1",
        "files": {
            "index.html": {"sha256": "0" * 64, "size": 1},
            "../../etc/passwd": {"sha256": "0" * 64, "size": 1},
            "http://169.254.169.254/latest": {"sha256": "0" * 64, "size": 1},
        },
    }
    other = web.add(Site(root=fleet.releases["1.4.1"]), "127.91.1.2")
    evil_url = web.add(
        Site(
            root=fleet.releases["1.4.1"],
            overrides={
                "artifactcheck.json": json.dumps(evil_manifest).encode(),
                "index.html": Redirect(other + "index.html"),
            },
        ),
        "127.91.1.1",
    )
    spec = fleet.spec(targets=[{"url": evil_url, "version": "1.4.1", "name": "evil"}])
    spec["cdn"] = None
    report = check(spec)
    r = by_name(report)["evil"]
    assert r.verdict is Verdict.MISMATCH
    kinds = {f.kind for f in r.findings}
    # the native reader refuses the whole manifest or records the unsafe entries
    assert kinds & {FindingKind.MANIFEST_INVALID, FindingKind.UNSAFE_REFERENCE}
    evil_paths = web.server(evil_url).paths
    assert all(".." not in p and "169.254" not in p and "://" not in p for p in evil_paths), (
        evil_paths
    )
    assert web.server(other).request_count == 0, "a redirect off the base URL was followed"


def test_off_host_redirect_is_an_error_not_followed(make_fleet, web) -> None:
    fleet = make_fleet(1)
    other = web.add(Site(root=fleet.releases["1.4.1"]), "127.91.2.2")
    redirecting = web.add(
        Site(
            root=fleet.releases["1.4.1"], overrides={"index.html": Redirect(other + "index.html")}
        ),
        "127.91.2.1",
    )
    spec = fleet.spec(targets=[{"url": redirecting, "version": "1.4.1", "name": "redir"}])
    spec["cdn"] = None
    r = by_name(check(spec))["redir"]
    assert r.verdict is Verdict.INCONCLUSIVE
    fetched = r.observation.assets["index.html"]
    assert fetched.error_kind == "redirect-off-base"
    assert web.server(other).request_count == 0


def test_tarpit_and_trickle_end_within_deadline(make_fleet, web) -> None:
    fleet = make_fleet(1)
    hang = web.add(Site(fault=Hang()), "127.91.3.1")
    trickle = web.add(
        Site(
            root=fleet.releases["1.4.1"],
            overrides={".vite/manifest.json": Trickle(b"{" * 600, interval=1.0)},
        ),
        "127.91.3.2",
    )
    spec = fleet.spec(
        targets=[
            {"url": hang, "version": "1.4.1", "name": "hang"},
            {"url": trickle, "version": "1.4.1", "name": "trickle"},
            *fleet.targets(),
        ],
        http={
            "instance_deadline": 3.0,
            "request_timeout": 2.0,
            "read_timeout": 1.5,
            "connect_timeout": 1.0,
        },
        retry={"attempts": 1},
    )
    spec["cdn"] = None
    started = time.monotonic()
    report = check(spec)
    elapsed = time.monotonic() - started
    # without the deadlines the tarpit holds the run forever and the trickle for 600 s
    assert elapsed < 60.0, f"the run took {elapsed:.1f}s with a 3s per-instance deadline"
    results = by_name(report)
    assert results["hang"].verdict is Verdict.UNREACHABLE
    assert "timeout" in (results["hang"].observation.error_kind or "")
    assert results["trickle"].verdict in (
        Verdict.UNREACHABLE,
        Verdict.MISMATCH,
        Verdict.INCONCLUSIVE,
    )
    assert results["trickle"].verdict is not Verdict.CONSISTENT
    assert results[fleet.instances[0].name].verdict is Verdict.CONSISTENT


def test_failing_fleet_gets_bounded_load(web) -> None:
    """Every instance answers 503: total requests stay within first attempts + budget."""
    from artifactcheck_sim.web import Status, loopback_hosts

    urls = web.add_many(
        [(Site(fault=Status(503)), h) for h in loopback_hosts(20, first="127.92.0.1")]
    )
    spec = {
        "targets": [{"url": u, "version": "1.0"} for u in urls],
        "manifest_path": "artifactcheck.json",
        "retry": {
            "attempts": 4,
            "base_delay": 0.01,
            "max_delay": 0.05,
            "budget_ratio": 0.2,
            "budget_min": 2,
        },
    }
    report = check(spec)
    received = sum(web.server(u).request_count for u in urls)
    first_attempts = 20  # one manifest request per instance; nothing else is reachable
    allowance = 2 + 0.2 * first_attempts
    assert received <= first_attempts + allowance, received
    assert received == report.requests
    assert {r.verdict for r in report.results} <= {
        Verdict.INCONCLUSIVE,
        Verdict.MISMATCH,
        Verdict.UNREACHABLE,
    }
    assert not any(r.verdict is Verdict.MISMATCH for r in report.results), (
        "a 503 is never evidence of a mismatch"
    )


#: Entry pages no browser should be asked to read, as an instance's ``/`` serves them.
HOSTILE_PAGES = {
    "deeply nested": b"<div>" * 400_000,
    "a million attributes": b"<img " + b"a " * 950_000 + b">",
    "too many references": b"".join(b"<img src=a%d.png>" % i for i in range(50_000)),
    "over the page cap": b"<img src=a.png>" + b" " * (3 * 1024 * 1024),
}


def test_hostile_entry_pages_are_inconclusive_and_spare_their_siblings(make_fleet, web) -> None:
    """Each hostile page is its instance's ``inconclusive`` with the reason, within the
    run's deadline; its siblings, serving the real page, are judged as ever."""
    fleet = make_fleet(2)
    hostile = []
    for n, (name, body) in enumerate(HOSTILE_PAGES.items(), start=1):
        site = Site(root=fleet.releases["1.4.1"], overrides={"/": body})
        url = web.add(site, f"127.91.7.{n}")
        hostile.append({"url": url, "version": "1.4.1", "name": name})
    spec = fleet.spec(targets=[*hostile, *fleet.targets()])
    started = time.perf_counter()
    report = check(spec)
    elapsed = time.perf_counter() - started
    results = by_name(report)
    for name in HOSTILE_PAGES:
        r = results[name]
        assert r.verdict is Verdict.INCONCLUSIVE, (name, r.verdict, r.reason)
        assert r.reason.startswith("its pages could not be read as a browser reads them: page /")
    for inst in fleet.instances:
        assert results[inst.name].verdict is Verdict.CONSISTENT, results[inst.name].reason
    assert elapsed < 60, f"{elapsed:.1f} s"
