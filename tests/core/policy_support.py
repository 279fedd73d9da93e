"""Builders of the safety-policy tests (artifactcheck/judge/decide.py), one file per step.

``decide`` takes a cycle's verdicts through its steps in order: advance every streak
(test_policy_streak.py); per workload, the limits that may hold an action back
(test_policy_limits.py); per pod, open its gate or release it (test_policy_gate.py),
clear its flag, flag it, quarantine it (test_policy_flag.py); then cordon nodes
(test_policy_cordon.py). The pods and results those tables are made of are built here,
so that a row says only what differs.
"""

from __future__ import annotations

from typing import Any

from artifactcheck.judge.decide import Decision, History, decide
from artifactcheck.model.records import replace
from artifactcheck.model.settings import PolicySettings
from artifactcheck.model.values import (
    ActionKind,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Verdict,
    VersionSignal,
)

M, C, INC, U = Verdict.MISMATCH, Verdict.CONSISTENT, Verdict.INCONCLUSIVE, Verdict.UNREACHABLE
DRIFT = Verdict.DRIFT
Q = PolicySettings(mode="quarantine")
ONE = PolicySettings(mode="quarantine", confirmations=1)


def pod(
    name: str = "pod-0",
    *,
    gate: str | None = None,
    quarantined: bool = False,
    streak: int = 0,
    node: str = "n1",
    image: str = "sha256:fresh",
    owner: str | None = "web-rs",
    **changes: Any,
) -> Instance:
    """A gated pod of shop/web-rs on n1; ``quarantined`` shuts its gate and marks it."""
    notes = {"artifactcheck.io/streak": str(streak)}
    if quarantined:
        notes["artifactcheck.io/quarantined"] = "true"
    inst = Instance(
        name=name,
        base_url="http://127.0.0.2/",
        kind="pod",
        namespace="shop",
        owner=owner,
        node=node,
        image_id=image,
        signals=(VersionSignal("label", "1.0"),),
        has_readiness_gate=True,
        gate_status="False" if quarantined else gate,
        ready=not quarantined and gate == "True",
        annotations=notes,
    )
    return replace(inst, **changes) if changes else inst


def result(
    inst: Instance,
    verdict: Verdict,
    *,
    verified: bool | None = None,
    findings: tuple[Finding, ...] = (),
) -> InstanceResult:
    return InstanceResult(
        inst,
        verdict,
        f"judged {verdict.value}",
        findings=findings,
        reported_version="1.0",
        content_verified=verified,
    )


def fleet(verdicts: list[Verdict], *, gated: bool = True, **changes: Any) -> list[InstanceResult]:
    """pod-0, pod-1, ... of one workload, ready with their gates open, judged in order."""
    return [
        result(pod(f"pod-{n}", gate="True", has_readiness_gate=gated, **changes), v)
        for n, v in enumerate(verdicts)
    ]


def cycles(
    verdicts: list[Verdict], count: int, policy: PolicySettings, **kw: Any
) -> list[Decision]:
    """``count`` cycles ten minutes apart, each judging ``fleet(verdicts)`` afresh."""
    history, out = History(), []
    for cycle in range(count):
        d = decide(fleet(verdicts, **kw), policy=policy, history=history, now=1000.0 + 600 * cycle)
        history = d.history
        out.append(d)
    return out


def one_cycle(results: list[InstanceResult], policy: PolicySettings = ONE, **kw: Any) -> Decision:
    return decide(results, policy=policy, history=kw.pop("history", History()), now=1, **kw)


def targets(d: Decision, kind: ActionKind) -> list[str]:
    return [a.target for a in d.actions if a.kind is kind]


def found(d: Decision, kind: FindingKind) -> list[Finding]:
    return [f for f in d.findings if f.kind is kind]
