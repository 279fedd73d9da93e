"""When is an instance's content *verified*: the rule that opens a readiness gate.

``judge/compare.py`` (``_verified``) decides it with the verdict; ``judge/decide.py``
opens a gate (or undoes a quarantine) only on a verdict under which the bytes may be
right *and* verified content. A CDN verdict (``cdn-missing``, ``cdn-mismatch``)
outranks the reasons an instance could not be verified, so each of those reasons is
pinned here with a CDN verdict on top: a names-only release, files that could not be
fetched, nothing compared, no release at all, consensus of one. Each row is judged
and then handed to policy in gate mode with fail-open off: the gate opens exactly when
the row says "verified".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from artifactcheck.judge.compare import (
    Agreement,
    CdnView,
    HashIndex,
    compare_fleet,
    judge_instance,
)
from artifactcheck.judge.decide import History, InstanceState, decide
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    ActionKind,
    Expectation,
    Fetched,
    Instance,
    InstanceResult,
    Manifest,
    ManifestEntry,
    Observation,
    Verdict,
    VersionSignal,
)
from artifactcheck.model.verdicts import MAY_BE_RIGHT, VOUCHING

IDX, A, B, SERVED_MANIFEST = "e" * 64, "a" * 64, "b" * 64, "f" * 64
PATHS = ("index.html", "assets/a.js", "assets/b.css")


def release(hashes: dict[str, str | None], version: str = "1.0") -> Manifest:
    return Manifest(
        format="native",
        version=version,
        files={
            p: ManifestEntry(
                path=p, hashes={"sha256": h} if h else {}, size=10, entry=p == PATHS[0]
            )
            for p, h in hashes.items()
        },
    )


R1 = release({"index.html": IDX, "assets/a.js": A, "assets/b.css": B})
NAMES_ONLY = release(dict.fromkeys(PATHS))


def got(path: str, sha: str | None = None, status: int = 200, error: str | None = None) -> Fetched:
    return Fetched(
        url=f"http://127.0.0.2/{path}",
        path=path,
        status=None if error else status,
        hashes={"sha256": sha} if sha and not error and 200 <= status < 300 else {},
        size=10,
        error=error,
        error_kind="timeout" if error else None,
    )


CLEAN = {"index.html": got("index.html", IDX), "assets/a.js": got("assets/a.js", A)}
CLEAN |= {"assets/b.css": got("assets/b.css", B)}
#: consensus mode: one sibling holds the same bytes, and they share a file served by both
SHARED = Agreement(agreeing=1, compared=("assets/a.js", "assets/b.css"))
TIMED_OUT = CLEAN | {"assets/b.css": got("assets/b.css", error="read timed out")}
# every release file refused (403: not compared); only the served manifest answered
REFUSED = {p: got(p, status=403) for p in PATHS} | {
    "asset-manifest.json": got("asset-manifest.json", SERVED_MANIFEST)
}

#: The CDN lacks a file the instance serves: ``cdn-missing`` outranks what follows.
CDN_MISSING = CdnView(
    "http://cdn/",
    {
        "assets/a.js": got("assets/a.js", status=404),
        "assets/b.css": got("assets/b.css", B),
        "asset-manifest.json": got("asset-manifest.json", status=404),
    },
)
#: The CDN holds other bytes for a file: ``cdn-mismatch``.
CDN_OTHER = CdnView(
    "http://cdn/",
    {"assets/a.js": got("assets/a.js", "9" * 64), "assets/b.css": got("assets/b.css", B)},
)


@dataclass(frozen=True)
class Row:
    id: str
    assets: dict[str, Fetched]
    verdict: Verdict
    verified: bool
    expectation: Expectation | None = field(default_factory=lambda: Expectation("1.0", R1))
    cdn: CdnView | None = None
    version: str | None = "1.0"
    peers: int | None = None  # consensus mode (expectation None): instances of the version
    agreement: Agreement | None = None  # consensus mode: what its siblings share with it
    desired: str | None = None
    manifest_path: str = "artifactcheck.json"


ROWS = [
    # verified: the bytes were compared with a source that vouches for them
    Row("release-clean", CLEAN, Verdict.CONSISTENT, True),
    Row("drift-clean", CLEAN, Verdict.DRIFT, True, desired="2.0"),
    Row("cdn-missing-own-bytes-right", CLEAN, Verdict.CDN_MISSING, True, cdn=CDN_MISSING),
    Row("cdn-mismatch-own-bytes-right", CLEAN, Verdict.CDN_MISMATCH, True, cdn=CDN_OTHER),
    Row(
        "consensus-of-two",
        CLEAN,
        Verdict.CONSISTENT,
        True,
        expectation=None,
        peers=2,
        agreement=SHARED,
    ),
    Row(
        "consensus-of-two-cdn-missing",
        CLEAN,
        Verdict.CDN_MISSING,
        True,
        expectation=None,
        peers=2,
        cdn=CDN_MISSING,
        agreement=SHARED,
    ),
    # never verified, each with a CDN verdict outranking the reason
    Row(
        "names-only-under-cdn-missing",
        {p: got(p, c * 64) for p, c in zip(PATHS, "xyz", strict=True)},
        Verdict.CDN_MISSING,
        False,
        expectation=Expectation("1.0", NAMES_ONLY),
        cdn=CDN_MISSING,
    ),
    Row("unfetched-under-cdn-missing", TIMED_OUT, Verdict.CDN_MISSING, False, cdn=CDN_MISSING),
    Row("unfetched-under-cdn-mismatch", TIMED_OUT, Verdict.CDN_MISMATCH, False, cdn=CDN_OTHER),
    Row(
        "nothing-compared-under-cdn-missing",
        REFUSED,
        Verdict.CDN_MISSING,
        False,
        cdn=CDN_MISSING,
        manifest_path="asset-manifest.json",
    ),
    Row(
        "no-release-under-cdn-missing",
        CLEAN,
        Verdict.CDN_MISSING,
        False,
        expectation=Expectation("1.0", None, error="source down"),
        cdn=CDN_MISSING,
    ),
    Row(
        "no-version-under-cdn-missing",
        CLEAN,
        Verdict.CDN_MISSING,
        False,
        version=None,
        expectation=None,
        cdn=CDN_MISSING,
    ),
    Row(
        "consensus-of-one-under-cdn-missing",
        CLEAN,
        Verdict.CDN_MISSING,
        False,
        expectation=None,
        peers=1,
        cdn=CDN_MISSING,
    ),
    Row(
        "consensus-nothing-shared-under-cdn-missing",  # siblings agreeing on nothing served
        CLEAN,
        Verdict.CDN_MISSING,
        False,
        expectation=None,
        peers=2,
        cdn=CDN_MISSING,
        agreement=Agreement(agreeing=0, compared=()),
    ),
    Row(
        "consensus-agreeing-with-none-under-cdn-missing",
        CLEAN,
        Verdict.CDN_MISSING,
        False,
        expectation=None,
        peers=3,
        cdn=CDN_MISSING,
        agreement=Agreement(agreeing=0, compared=("assets/a.js",)),
    ),
    # never verified, and not a verdict under which the bytes may be right
    Row(
        "names-only",
        {p: got(p, c * 64) for p, c in zip(PATHS, "xyz", strict=True)},
        Verdict.INCONCLUSIVE,
        False,
        expectation=Expectation("1.0", NAMES_ONLY),
    ),
    Row("unfetched", TIMED_OUT, Verdict.INCONCLUSIVE, False),
    Row(
        "nothing-compared",
        REFUSED,
        Verdict.INCONCLUSIVE,
        False,
        manifest_path="asset-manifest.json",
    ),
    Row("consensus-of-one", CLEAN, Verdict.INCONCLUSIVE, False, expectation=None, peers=1),
    Row("mismatch", CLEAN | {"assets/a.js": got("assets/a.js", "9" * 64)}, Verdict.MISMATCH, False),
    Row("invalid-version", CLEAN, Verdict.INCONCLUSIVE, False, version="1.0?a"),
]


def observation(row: Row, name: str = "p1") -> Observation:
    signals = (VersionSignal("target", row.version),) if row.version else ()
    pod = Instance(
        name=name,
        base_url=f"http://{name}/",
        signals=signals,
        owner="web-abc",
        namespace="shop",
        has_readiness_gate=True,
        gate_status="False",
        ready=False,
    )
    return Observation(instance=pod, assets=row.assets, manifest_path=row.manifest_path)


def judged(row: Row) -> InstanceResult:
    return judge_instance(
        observation(row),
        expectation=row.expectation,
        index=HashIndex({"1.0": R1}),
        cdn=row.cdn,
        desired_version=row.desired,
        peers=row.peers,
        agreement=row.agreement,
    )


GATE_POLICY = PolicySettings(mode="quarantine", gate_fail_open=False, confirmations=1)


def gate_opened(result: InstanceResult, history: History | None = None) -> bool:
    decision = decide(
        [result], policy=GATE_POLICY, history=history or History(), now=1000.0, gate_mode=True
    )
    return any(a.kind is ActionKind.RELEASE for a in decision.actions)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_verified_and_the_gate(row: Row) -> None:
    r = judged(row)
    assert r.verdict is row.verdict, r.reason
    assert r.verified is row.verified, r.reason
    assert gate_opened(r) is row.verified, r.reason


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r.verified], ids=[r.id for r in ROWS if r.verified]
)
def test_a_quarantine_is_undone_only_on_verified_content(row: Row) -> None:
    r = judged(row)
    held = History(instances={"p1": InstanceState(quarantined=True)})
    assert gate_opened(r, held)
    unverified = replace(r, content_verified=False)
    assert not gate_opened(unverified, held)


def test_a_quarantine_stays_when_release_on_recovery_is_off() -> None:
    r = judged(ROWS[0])
    held = History(instances={"p1": InstanceState(quarantined=True)})
    policy = GATE_POLICY.model_copy(update={"release_on_recovery": False})
    d = decide([r], policy=policy, history=held, now=1000.0, gate_mode=True)
    assert r.verified and not d.actions


@pytest.mark.parametrize(
    "verdict",
    [v for v in Verdict if v not in MAY_BE_RIGHT],
)
def test_verified_content_under_a_bad_verdict_opens_no_gate(verdict: Verdict) -> None:
    """Policy checks the verdict too: "verified" alone is not enough."""
    r = replace(judged(ROWS[0]), verdict=verdict, content_verified=True)
    assert not gate_opened(r)


@pytest.mark.parametrize(
    ("verdict", "verified"),
    [(v, v in VOUCHING) for v in Verdict],
)
def test_a_hand_built_result_is_verified_by_its_verdict(verdict: Verdict, verified: bool) -> None:
    r = InstanceResult(
        instance=Instance(name="x", base_url="http://x/"), verdict=verdict, reason=""
    )
    assert r.verified is verified


def test_a_flag_is_cleared_only_on_verified_consistent_content() -> None:
    flagged = History(instances={"p1": InstanceState(flagged=True)})
    policy = PolicySettings(mode="flag", confirmations=1)

    def unflagged(r: InstanceResult) -> bool:
        d = decide([r], policy=policy, history=flagged, now=1000.0)
        return any(a.kind is ActionKind.UNFLAG for a in d.actions)

    clean = judged(ROWS[0])
    assert unflagged(clean)
    assert not unflagged(replace(clean, content_verified=False))
    cdn = judged(next(r for r in ROWS if r.id == "cdn-missing-own-bytes-right"))
    assert cdn.verified and not unflagged(cdn)  # verified, but the CDN still disagrees


# ------------------------------------------------ an invalid version: never exit 1, never acts


def _invalid(served: Manifest | None) -> InstanceResult:
    row = Row("x", CLEAN, Verdict.INCONCLUSIVE, False, version="../release-1.0")
    hostile = replace(observation(row), manifest=served)
    (r,) = compare_fleet([hostile], expectations={"1.0": Expectation("1.0", R1)})
    return r


#: A served manifest whose own hash for assets/a.js is not what is served: evidence
#: against the bytes (integrity-failed) that needs no release lookup.
SELF_CONTRADICTING = release({"index.html": IDX, "assets/a.js": "9" * 64, "assets/b.css": B})


@pytest.mark.parametrize(
    "served",
    [
        pytest.param(None, id="clean-bytes"),
        pytest.param(SELF_CONTRADICTING, id="integrity-failed"),
    ],
)
def test_an_invalid_reported_version_is_inconclusive_and_never_acted_on(
    served: Manifest | None,
) -> None:
    """docs/architecture.md's rule 0: an invalid version judges nothing (exit 3), even
    beside evidence against the bytes, and policy never flags or quarantines it."""
    r = _invalid(served)
    assert r.verdict is Verdict.INCONCLUSIVE and "invalid version" in r.reason
    assert (served is not None) is any(f.kind.value == "integrity-failed" for f in r.findings)
    assert not r.verified
    history = History()
    policy = PolicySettings(mode="quarantine", confirmations=2, gate_fail_open=True)
    for cycle in range(4):  # confirmations never accumulate: nothing is flagged or quarantined
        d = decide([r], policy=policy, history=history, now=1000.0 + cycle, gate_mode=True)
        assert not d.actions, d.actions  # not even failing open: the version is evidence
        history = d.history
    assert history.instances["p1"].streak == 0
