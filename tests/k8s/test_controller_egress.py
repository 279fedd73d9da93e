"""The controller's egress policy follows its pods as they come, move and go.

The policy is asked on every new connection, so the controller keeps each pod's
parsed address and rebuilds only the set of them when a pod changes
(``CheckState.addresses``). These tests drive the pod bookkeeping the watch calls
(``control.candidates``: ``pods_listed``, ``pod_changed``) and ask the policy the
fetcher would ask: a pod that moved is reachable at its new address only, one that went
away not at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from artifactcheck.control import candidates, check_wiring
from artifactcheck.control.controller import CheckState, Controller, ControllerSettings
from artifactcheck.tenancy.admission import AdminConfig, admit

ADMIN = AdminConfig.model_validate({"egress": {"allow": ["https://cdn.shop.example.com/"]}})
SPEC = {
    "kubernetes": {"namespace": "shop", "selector": "app=web", "port": 8080},
    "release": {
        "manifests": ["https://cdn.shop.example.com/releases/{version}/artifactcheck.json"]
    },
}


def pod(name: str, ip: str | None, *, ready: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [{"type": "ContainersReady", "status": "True" if ready else "False"}],
    }
    if ip is not None:
        status["podIP"] = ip
    return {
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "web:1.4.2"}]},
        "status": status,
    }


@pytest.fixture()
def controller() -> Iterator[tuple[Controller, CheckState]]:
    api = kubernetes.client.ApiClient()
    settings = ControllerSettings(namespace="shop", lease_namespace="ops", admin=ADMIN)
    try:
        ctl = Controller(api_client=api, settings=settings)
        admission = admit("shop", SPEC, ADMIN)
        assert admission.spec is not None, admission.message
        state = CheckState(
            key="shop/web",
            namespace="shop",
            name="web",
            spec=admission.spec,
            generation=1,
            admission=admission,
        )
        yield ctl, state
    finally:
        api.close()  # type: ignore[no-untyped-call]


def listed(ctl: Controller, state: CheckState, *found: dict[str, Any]) -> None:
    """A list of the pods, as the watch delivers it (each summarised as listed)."""
    candidates.pods_listed(state, 0.0, [candidates.summary(state, p) for p in found])


def allowed(ctl: Controller, state: CheckState, ip: str) -> bool:
    return check_wiring.egress_for(state, ctl.address_rules)(ip, ip, 8080) is None


def test_listed_pods_are_reachable_and_no_other_address(
    controller: tuple[Controller, CheckState],
) -> None:
    ctl, state = controller
    listed(ctl, state, pod("a", "10.244.0.5"), pod("b", "10.244.0.6"))
    assert allowed(ctl, state, "10.244.0.5") and allowed(ctl, state, "10.244.0.6")
    assert not allowed(ctl, state, "10.244.0.7")


def test_a_pod_that_moves_is_reachable_at_its_new_address_only(
    controller: tuple[Controller, CheckState],
) -> None:
    ctl, state = controller
    listed(ctl, state, pod("a", "10.244.0.5"), pod("b", "10.244.0.6"))
    assert allowed(ctl, state, "10.244.0.6")  # the set is built, then must follow
    candidates.pod_changed(state, 0.0, "MODIFIED", pod("b", "10.244.0.9"))
    assert allowed(ctl, state, "10.244.0.9")
    assert not allowed(ctl, state, "10.244.0.6")
    assert allowed(ctl, state, "10.244.0.5")


def test_pods_that_go_away_or_stop_being_ready_are_not_reachable(
    controller: tuple[Controller, CheckState],
) -> None:
    ctl, state = controller
    listed(ctl, state, pod("a", "10.244.0.5"), pod("b", "10.244.0.6"))
    assert allowed(ctl, state, "10.244.0.5") and allowed(ctl, state, "10.244.0.6")
    candidates.pod_changed(state, 0.0, "DELETED", pod("a", "10.244.0.5"))
    assert not allowed(ctl, state, "10.244.0.5")
    candidates.pod_changed(state, 0.0, "MODIFIED", pod("b", "10.244.0.6", ready=False))
    assert not allowed(ctl, state, "10.244.0.6")
    # a new pod, then a relist that no longer has it
    candidates.pod_changed(state, 0.0, "ADDED", pod("c", "10.244.0.8"))
    assert allowed(ctl, state, "10.244.0.8")
    listed(
        ctl, state, pod("d", "10.244.0.10"), pod("e", None), pod("f", "10.244.0.11", ready=False)
    )
    assert not allowed(ctl, state, "10.244.0.8")
    assert allowed(ctl, state, "10.244.0.10")
    assert not allowed(ctl, state, "10.244.0.11")  # listed, but its containers are not ready
    assert set(state.pods) == {"shop/d"}
