"""What the Argo Rollouts and Flagger integrations ship, checked alike: each example
ArtifactCheck is accepted by the CRD as written, nothing of its spec pruned.

One parametrised test instead of a near-copy in each integration's module.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from gate_support import REPO, GateCluster

INTEGRATIONS = REPO / "k8s" / "integrations"


@pytest.mark.parametrize(
    "example",
    [
        INTEGRATIONS / "argo-rollouts" / "artifactcheck.yaml",
        INTEGRATIONS / "flagger" / "artifactcheck.yaml",
    ],
    ids=["argo-rollouts", "flagger"],
)
def test_example_artifactcheck_is_accepted_by_the_crd(cluster: GateCluster, example: Path) -> None:
    (check,) = [d for d in yaml.safe_load_all(example.read_text()) if d]
    created = cluster.api.create(check)
    for key in check["spec"]:
        assert key in created["spec"], f"the CRD pruned spec.{key}"
    # nested fields too: the kubernetes section comes back with everything it said
    kubernetes = check["spec"].get("kubernetes")
    if kubernetes is not None:
        assert created["spec"]["kubernetes"] == {**kubernetes, **created["spec"]["kubernetes"]}
