"""Argo Rollouts' web metric against the real controller on the simulated cluster.

The AnalysisTemplate and the Rollouts are read from k8s/integrations/argo-rollouts/ and
used as Argo would use them (tests/gates/argo_emulation.py): the Rollout's args resolved (the
canary ReplicaSet's hash for ``podTemplateHashValue: Latest``), the URL templated, a
GET, the JSONPath, the success and failure conditions. Only the verdict API's address
is the test's own (the template's ``verdict-api`` argument), since the Service's DNS
name does not resolve here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from argo_emulation import ExprError, evaluate, jsonpath, measure, outcome, render, resolve_args
from gate_support import CANARY, REPO, STABLE, Gate, GateCluster, valid

from artifactcheck_sim.cluster import wait_for

ARGO = REPO / "k8s" / "integrations" / "argo-rollouts"
CHECK = "/verdicts/v1/namespaces/shop/artifactchecks/web"
HASHES = {"Latest": "7f4b", "Stable": "6c9d"}  # GateCluster's canary and stable hashes


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _template() -> dict[str, Any]:
    (doc,) = _load(ARGO / "analysistemplate.yaml")
    assert doc["apiVersion"] == "argoproj.io/v1alpha1" and doc["kind"] == "AnalysisTemplate"
    return doc


def _metric() -> dict[str, Any]:
    (metric,) = _template()["spec"]["metrics"]
    return dict(metric)


def _analyses() -> dict[str, list[dict[str, Any]]]:
    """Every analysis the Rollout examples run with this template: its args."""
    out: dict[str, list[dict[str, Any]]] = {}
    name = _template()["metadata"]["name"]
    for file in ("rollout-canary.yaml", "rollout-bluegreen.yaml"):
        (rollout,) = _load(ARGO / file)
        assert rollout["kind"] == "Rollout"
        strategy = rollout["spec"]["strategy"]
        found: list[tuple[str, dict[str, Any]]] = []
        if "canary" in strategy:
            found.append(("background", strategy["canary"]["analysis"]))
            found += [
                (f"step {i}", step["analysis"])
                for i, step in enumerate(strategy["canary"]["steps"])
                if "analysis" in step
            ]
        else:
            found += [
                (key, strategy["blueGreen"][key])
                for key in ("prePromotionAnalysis", "postPromotionAnalysis")
            ]
        for where, analysis in found:
            assert [t["templateName"] for t in analysis["templates"]] == [name]
            out[f"{file} {where}"] = analysis["args"]
    return out


def _args(gate: Gate, rollout_args: list[dict[str, Any]], check: str = "web") -> dict[str, str]:
    args = resolve_args(_template(), rollout_args, HASHES)
    args["verdict-api"] = gate.base  # the Service's address, as the cluster would route it
    args["check-namespace"], args["check-name"] = "shop", check
    return args


def _canary_seen(gate: Gate, n: int) -> None:
    """Wait until the controller's watch has the canary's pods (so that a test
    cannot pass on "no pod matches")."""
    path = CHECK + "?selector=rollouts-pod-template-hash=7f4b"
    wait_for(lambda: gate.settled(path)["pods"]["selected"] == n, timeout=20)


def test_template_and_rollouts_are_what_argo_reads() -> None:
    metric = _metric()
    web = metric["provider"]["web"]
    assert web["jsonPath"] == "{$.result}"
    assert "{{args.pod-template-hash}}" in web["url"] and "fresh=true" in web["url"]
    # the controller's wait (timeout=...) must end before Argo's own timeout
    wait = float(web["url"].split("timeout=")[1].split("s")[0])
    assert wait < web["timeoutSeconds"]
    analyses = _analyses()
    assert len(analyses) == 4  # canary background + step, blue-green pre + post
    for where, args in analyses.items():
        hashes = [a for a in args if a["name"] == "pod-template-hash"]
        assert hashes == [
            {"name": "pod-template-hash", "valueFrom": {"podTemplateHashValue": "Latest"}}
        ], where
        resolved = resolve_args(_template(), args, HASHES)
        assert resolved["pod-template-hash"] == HASHES["Latest"]
        assert render(web["url"], resolved).startswith(
            "http://artifactcheck-metrics.artifactcheck-system.svc:8080/verdicts/v1/"
        )


def test_clean_canary_succeeds(cluster: GateCluster, gate: Gate) -> None:
    cluster.add_stable(3)
    cluster.add_check()
    cluster.add_canary(2)
    _canary_seen(gate, 2)
    for where, rollout_args in _analyses().items():
        if "bluegreen" in where:
            continue
        phase, value = measure(_metric(), _args(gate, rollout_args))
        assert (phase, value) == ("Successful", "passed"), where


def test_drifted_canary_fails(cluster: GateCluster, gate: Gate) -> None:
    """The canary ReplicaSet's pods keep 1.4.2's file names but serve 1.4.1's bytes."""
    cluster.add_stable(3)
    cluster.add_check()
    cluster.add_canary(2, serves=STABLE)
    _canary_seen(gate, 2)
    for where, rollout_args in _analyses().items():
        if "bluegreen" in where:
            continue
        phase, value = measure(_metric(), _args(gate, rollout_args))
        assert (phase, value) == ("Failed", "failed"), where
    # the stable ReplicaSet, asked the same way, is fine: the verdict is per ReplicaSet
    stable = _args(gate, next(iter(_analyses().values())))
    stable["pod-template-hash"] = HASHES["Stable"]
    assert measure(_metric(), stable) == ("Successful", "passed")


def test_one_drifted_pod_among_the_canary_fails(cluster: GateCluster, gate: Gate) -> None:
    cluster.add_stable(2)
    cluster.add_check()
    cluster.add_canary(2)
    cluster.add_canary(1, serves=STABLE)
    _canary_seen(gate, 3)
    args = _args(gate, next(iter(_analyses().values())))
    assert measure(_metric(), args) == ("Failed", "failed")


def test_release_source_outage_is_inconclusive(cluster: GateCluster, gate: Gate) -> None:
    """The stable release was loaded before the outage; the canary's release cannot be:
    its pods cannot be verified, the analysis is Inconclusive (the rollout pauses)."""
    cluster.add_stable(3)
    cluster.add_check(knownVersions=[STABLE])
    stable = CHECK
    wait_for(lambda: gate.settled(stable)["result"] == "passed", timeout=20)
    cluster.release_source_down()
    cluster.add_canary(2)
    _canary_seen(gate, 2)
    args = _args(gate, next(iter(_analyses().values())))
    assert measure(_metric(), args) == ("Inconclusive", "inconclusive")
    status, doc = gate.get(
        stable + "?selector=rollouts-pod-template-hash=7f4b&fresh=true&timeout=20s"
    )
    assert status == 200 and valid(doc)["fresh"] is True
    assert doc["counts"]["inconclusive"] == 2, doc
    assert {v["version"] for v in doc["versions"]} == {CANARY}


def test_unknown_check_is_a_measurement_error(cluster: GateCluster, gate: Gate) -> None:
    cluster.add_stable(1)
    cluster.add_check()
    args = _args(gate, next(iter(_analyses().values())), check="nope")
    phase, value = measure(_metric(), args)
    assert phase == "Error" and "404" in value and "CheckNotFound" in value


# -- the emulation itself, on the expressions Argo's own docs show ----------------------


@pytest.mark.parametrize(
    ("expression", "result", "expected"),
    [
        ('result == "passed"', "passed", True),
        ('result == "passed"', "failed", False),
        ('result != "failed"', "inconclusive", True),
        ('result == "a" || result == "b"', "b", True),
        ('result == "a" && (result == "a" || result == "b")', "a", True),
        ("not (result == 'x')", "y", True),
        ('!(result == "x") and result != "y"', "y", False),
    ],
)
def test_expressions(expression: str, result: Any, expected: bool) -> None:
    assert evaluate(expression, result) is expected


def test_expressions_argo_would_refuse_are_refused() -> None:
    for bad in ('result == "a" &&', "result", "len(result) > 0", 'other == "x"'):
        with pytest.raises(ExprError):
            evaluate(bad, "a")


def test_outcome_rules() -> None:
    both = {"successCondition": 'result == "passed"', "failureCondition": 'result == "failed"'}
    assert outcome(both, "passed") == "Successful"
    assert outcome(both, "failed") == "Failed"
    assert outcome(both, "inconclusive") == "Inconclusive"
    only_success = {"successCondition": 'result == "passed"'}
    assert outcome(only_success, "inconclusive") == "Failed"
    overlapping = {"successCondition": "true", "failureCondition": "true"}
    assert outcome(overlapping, "x") == "Failed"  # failure wins, as in EvaluateResult
    assert jsonpath("{$.result}", {"result": "passed"}) == "passed"
    assert jsonpath("{.a.b}", {"a": {"b": 1}}) == 1
