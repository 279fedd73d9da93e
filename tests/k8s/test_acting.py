"""The gates before a cycle's writes (control/actions.py): a replica that may not act
sends nothing and remembers nothing as done; a 429's Retry-After holds every write.

Driven with an API client that records what it is asked and a decision built by
hand: no API server, no cycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from artifactcheck.clients.kube import Throttled
from artifactcheck.control.actions import Acting, Writes
from artifactcheck.control.context import Context
from artifactcheck.control.controller_settings import ControllerSettings
from artifactcheck.control.metrics import Metrics
from artifactcheck.control.state import CheckState
from artifactcheck.judge.decide import Decision, History
from artifactcheck.model.errors import DependencyError
from artifactcheck.model.values import Action, ActionKind
from artifactcheck.tenancy.admission import AdminConfig, admit

ADMIN = AdminConfig.model_validate({"egress": {"allow": ["https://cdn.shop.example.com/"]}})
SPEC = {
    "kubernetes": {"namespace": "shop", "selector": "app=web", "port": 8080},
    "release": {
        "manifests": ["https://cdn.shop.example.com/releases/{version}/artifactcheck.json"]
    },
}


class Untouchable:
    """An API client no request may reach."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the API client was used ({name}) by a replica that may not act")


def state() -> CheckState:
    admission = admit("shop", SPEC, ADMIN)
    assert admission.spec is not None, admission.message
    return CheckState("shop/web", "shop", "web", admission.spec, 1, admission=admission)


def decision() -> Decision:
    actions = (
        Action(ActionKind.QUARANTINE, "shop/web-1", "differs"),
        Action(ActionKind.RELEASE, "shop/web-2", "verified"),
    )
    return Decision(actions=actions, findings=(), history=History())


def acting(may_act: bool) -> tuple[Acting, Writes, Metrics]:
    metrics = Metrics()
    ctx = Context(Untouchable(), ControllerSettings(), ADMIN, metrics, logging.getLogger("t"))
    writes = Writes(lambda: may_act)
    return Acting(ctx, writes), writes, metrics


def test_a_replica_that_may_not_act_sends_nothing_and_keeps_every_action_undone() -> None:
    act, _, metrics = acting(may_act=False)
    chosen = decision()
    log = logging.LoggerAdapter(logging.getLogger("t"), {})
    performed, failed = asyncio.run(act.act(state(), chosen, [], log))
    assert performed == [] and failed == list(chosen.actions)
    assert metrics.registry.get_sample_value("artifactcheck_api_errors_total") is None


def test_a_429_holds_every_write_until_its_retry_after_passed() -> None:
    _, writes, _ = acting(may_act=True)
    assert writes.allowed()
    writes.throttled(DependencyError("a 500 holds nothing"))
    assert writes.allowed()
    writes.throttled(Throttled("429", retry_after=30.0))
    assert writes.held() and not writes.allowed()
    assert writes.not_before >= time.monotonic() + 29
    writes.throttled(Throttled("a shorter one", retry_after=1.0))  # never shortens it
    assert writes.not_before >= time.monotonic() + 29
