"""Flagger's webhooks against the real controller on the simulated cluster.

The Canary is read from k8s/integrations/flagger/canary.yaml; each webhook is called as
Flagger's CallWebhook calls it (pkg/controller/webhook.go): a POST of the JSON of a
CanaryWebhookPayload (``name``, ``namespace``, ``phase``, ``checksum``, the hook's
``metadata``), Content-Type application/json, the hook's ``timeout`` (10s when
unset); any status above 202, or no answer, is a failed hook. Pre-rollout, rollout
and confirm-promotion hooks are all called with the phase ``Progressing``.

The cluster runs Flagger's two Deployments: the primary (pods app=web-primary,
serving the stable release) and the canary (pods app=web, the new release).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from gate_support import CANARY, REPO, STABLE, Gate, GateCluster, raw, valid

from artifactcheck.control.health import MAX_BODY_BYTES
from artifactcheck_sim.cluster import wait_for

FLAGGER = REPO / "k8s" / "integrations" / "flagger"
HOOKS = ("pre-rollout", "rollout", "confirm-promotion")
CHECKSUM = "6b4c9d7f58"  # canary.ComputeHash of TrackedConfigs + LastAppliedSpec


def _canary() -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all((FLAGGER / "canary.yaml").read_text()) if d]
    assert doc["apiVersion"] == "flagger.app/v1beta1" and doc["kind"] == "Canary"
    return dict(doc)


def _hooks() -> list[dict[str, Any]]:
    hooks = _canary()["spec"]["analysis"]["webhooks"]
    assert sorted(h["type"] for h in hooks) == sorted(HOOKS)
    return list(hooks)


def _seconds(go_duration: str) -> float:
    m = re.fullmatch(r"(\d+)(ms|s|m)", go_duration)
    assert m, go_duration
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


def payload(canary: dict[str, Any], hook: dict[str, Any]) -> bytes:
    """Go's json.Marshal of Flagger's CanaryWebhookPayload (struct field order, map keys
    sorted, no spaces, metadata omitted when empty)."""
    doc: dict[str, Any] = {
        "name": canary["metadata"]["name"],
        "namespace": canary["metadata"]["namespace"],
        "phase": "Progressing",
        "checksum": CHECKSUM,
    }
    if hook.get("metadata"):
        doc["metadata"] = dict(sorted(hook["metadata"].items()))
    return json.dumps(doc, separators=(",", ":")).encode()


def call_webhook(gate: Gate, hook: dict[str, Any], body: bytes) -> tuple[bool, int, Any]:
    """(accepted, status, answer) as Flagger's callWebhook sees them: retryablehttp
    retries a 5xx answer (but 501) ``retries`` times; any final status above 202 fails
    the hook. The hook's URL goes to the test's controller (the Service's DNS name does
    not resolve here). Every answer must match docs/verdict-api.schema.json."""
    url = urlsplit(hook["url"])
    target = gate.base + url.path + (f"?{url.query}" if url.query else "")
    timeout = _seconds(hook.get("timeout") or "10s")
    for attempt in range(int(hook.get("retries") or 0) + 1):
        req = urllib.request.Request(target, data=body, method="POST")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback
                status, data = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            with exc:
                status, data = exc.code, exc.read()
        if not (500 <= status < 600 and status != 501):
            break
        time.sleep(0.05 * (attempt + 1))  # retryablehttp backs off (1s and more)
    return status <= 202, status, valid(json.loads(data))


def _flagger_pods(cluster: GateCluster, *, canary_serves: str | None = None) -> None:
    for _ in range(3):
        cluster.add_pod(
            version=STABLE, replicaset="web-primary-5b6f", labels={"app": "web-primary"}
        )
    for _ in range(2):
        cluster.add_pod(
            version=CANARY, replicaset="web-7c9f", labels={"app": "web"}, serves=canary_serves
        )


def _check(cluster: GateCluster, **spec: Any) -> None:
    (example,) = [d for d in yaml.safe_load_all((FLAGGER / "artifactcheck.yaml").read_text()) if d]
    selector = example["spec"]["kubernetes"]["selector"]  # the example's, both Deployments
    cluster.add_check(
        kubernetes={"namespace": cluster.namespace, "selector": selector, "port": cluster.port},
        **spec,
    )


def _canary_seen(gate: Gate) -> None:
    path = "/verdicts/v1/namespaces/shop/artifactchecks/web?selector=app=web"
    wait_for(lambda: gate.settled(path)["pods"]["selected"] == 2, timeout=20)


@pytest.fixture(scope="module")
def refusing(shared_cluster: GateCluster, shared_gate: Gate) -> Gate:
    """Flagger's pods and the check on the module's shared controller, for the tests
    whose requests are refused: they change nothing, so one controller serves them all."""
    _flagger_pods(shared_cluster)
    _check(shared_cluster)
    return shared_gate


def test_clean_canary_passes_every_hook(cluster: GateCluster, gate: Gate) -> None:
    _flagger_pods(cluster)
    _check(cluster)
    _canary_seen(gate)
    canary = _canary()
    for hook in _hooks():
        accepted, status, doc = call_webhook(gate, hook, payload(canary, hook))
        assert (accepted, status, doc["result"]) == (True, 200, "passed"), (hook["type"], doc)
        assert doc["pods"]["selected"] == 2 and doc["fresh"] is True
        assert doc["webhook"] == {
            "name": "web",
            "namespace": "shop",
            "phase": "Progressing",
            "checksum": CHECKSUM,
        }


def test_drifted_canary_fails_every_hook(cluster: GateCluster, gate: Gate) -> None:
    _flagger_pods(cluster, canary_serves=STABLE)
    _check(cluster)
    _canary_seen(gate)
    canary = _canary()
    for hook in _hooks():
        accepted, status, doc = call_webhook(gate, hook, payload(canary, hook))
        assert (accepted, status, doc["result"]) == (False, 412, "failed"), (hook["type"], doc)
        assert doc["counts"]["mismatch"] == 2
        assert "serve what their version should not" in doc["reason"]


def test_release_source_outage_fails_the_hook_as_unverifiable(
    cluster: GateCluster, gate: Gate
) -> None:
    for _ in range(3):
        cluster.add_pod(
            version=STABLE, replicaset="web-primary-5b6f", labels={"app": "web-primary"}
        )
    _check(cluster, knownVersions=[STABLE])
    wait_for(
        lambda: (
            gate.settled("/verdicts/v1/namespaces/shop/artifactchecks/web")["result"] == "passed"
        ),
        timeout=20,
    )
    cluster.release_source_down()
    for _ in range(2):
        cluster.add_pod(version=CANARY, replicaset="web-7c9f", labels={"app": "web"})
    _canary_seen(gate)
    hook = next(h for h in _hooks() if h["type"] == "pre-rollout")
    accepted, status, doc = call_webhook(gate, hook, payload(_canary(), hook))
    assert (accepted, status, doc["result"]) == (False, 503, "inconclusive"), doc
    assert doc["counts"]["inconclusive"] == 2


def test_check_in_the_canary_namespace_by_name(cluster: GateCluster, gate: Gate) -> None:
    _flagger_pods(cluster)
    _check(cluster)
    _canary_seen(gate)
    hook = {**_hooks()[0], "metadata": {"check": "web", "selector": "app=web"}}
    accepted, status, doc = call_webhook(gate, hook, payload(_canary(), hook))
    assert (accepted, doc["check"]) == (True, {"namespace": "shop", "name": "web"})


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"not json", 400, "BadPayload"),
        (b"[1, 2]", 400, "BadPayload"),
        (
            b'{"name": "web", "namespace": "shop", "metadata": {"selector": "app=web"}}',
            400,
            "BadPayload",
        ),
        (b'{"name": "web", "namespace": "shop", "metadata": {"check": "web"}}', 400, "BadPayload"),
        (
            b'{"name": "web", "namespace": "shop", "metadata": {"check": "web", "selector": '
            b'"app in (web"}}',
            400,
            "BadSelector",
        ),
        (
            b'{"name": "web", "namespace": "shop", "metadata": {"check": "nope", "selector": '
            b'"app=web"}}',
            404,
            "CheckNotFound",
        ),
        (
            b'{"name": "web", "namespace": "shop", "metadata": {"check": "web", "selector": '
            b'"app=web", "timeout": "soon"}}',
            400,
            "BadTimeout",
        ),
        (
            b'{"name": "web", "namespace": "shop", "metadata": {"check": "web", "selector": '
            b'"app=web", "retries": 3}}',
            400,
            "BadPayload",
        ),
    ],
)
def test_bad_payloads_are_refused_with_a_reason(
    refusing: Gate, body: bytes, status: int, reason: str
) -> None:
    accepted, got, doc = call_webhook(refusing, _hooks()[0], body)
    assert (accepted, got, doc["reason"]) == (False, status, reason), doc


def test_body_size_is_bounded(refusing: Gate) -> None:
    big = b'{"name": "web", "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'
    accepted, status, doc = call_webhook(refusing, _hooks()[0], big)
    assert (accepted, status, doc["reason"]) == (False, 413, "BodyTooLarge")
    # no Content-Length at all: refused before reading anything
    answer = raw(
        refusing.server.port,
        b"POST /verdicts/v1/flagger HTTP/1.1\r\nHost: x\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    assert answer.startswith("HTTP/1.0 411") and '"reason": "LengthRequired"' in answer


def test_the_hook_is_a_post(refusing: Gate) -> None:
    status, doc = refusing.get("/verdicts/v1/flagger")
    assert (status, doc["reason"]) == (405, "MethodNotAllowed")
