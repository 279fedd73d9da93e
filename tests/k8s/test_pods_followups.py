"""Which pods a sampled full cycle observes besides its sample (control/candidates.py,
``followed_up``): those whose last verdicts were bad, longest streak first, at most as
many as the sample. The controller end to end: tests/k8s/test_controller.py."""

from __future__ import annotations

from artifactcheck.control.candidates import followed_up
from artifactcheck.control.state import CheckState
from artifactcheck.judge.decide import History, InstanceState
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Instance

MEMORY = {
    "clean": InstanceState(),
    "once": InstanceState(streak=1),
    "twice": InstanceState(streak=2),
    "quarantined": InstanceState(streak=3, quarantined=True),
    "flag-inherited": InstanceState(flagged=True),
    "gone": InstanceState(streak=2),  # remembered, no longer a pod
}


def state(sample: int) -> CheckState:
    spec = CheckSpec.model_validate({"sampling": {"instances": sample}})
    names = [n for n in MEMORY if n != "gone"]
    return CheckState(
        key="shop/web",
        namespace="shop",
        name="web",
        spec=spec,
        generation=1,
        history=History(instances=MEMORY),
        pods={n: Instance(name=n, base_url=f"http://{n}/") for n in names},
    )


def test_the_bad_pods_outside_the_sample_longest_streak_first() -> None:
    picked = [i.name for i in followed_up(state(5), sampled={"twice"})]
    assert picked == ["quarantined", "once", "flag-inherited"]


def test_never_more_than_the_sample() -> None:
    assert [i.name for i in followed_up(state(2), sampled=set())] == ["quarantined", "twice"]
