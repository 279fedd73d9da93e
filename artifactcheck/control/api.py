"""The verdict API: what the leader knows of an ArtifactCheck's pods, read-only, over HTTP.

Progressive delivery tools ask it whether a canary serves the bytes its version
should (docs/verdict-api.md, docs/integrations.md): Argo Rollouts' web metric provider
with a GET, Flagger with its webhook POST. Every answer comes from the controller's
memory (the last cycle's results and the pods its watch sees), so it needs no RBAC
beyond the controller's own; the request names a check and a label selector, never a
URL or a host, so it cannot make the controller connect anywhere new. A fresh check
(``fresh=true``) only marks the selected pods as new, as a pod that just became ready
is: the next cycle observes them, under the check's own request budget.

The event loop owns the controller's state; every read here runs on that loop (one
short callback), so a request sees one cycle's results, never half of two.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import parse_qs

from artifactcheck.control.forward import ANSWERED_BY, Forwarder
from artifactcheck.control.health import ApiRequest, json_error
from artifactcheck.judge.decide import History, held_out_of_traffic
from artifactcheck.model.selectors import LabelSelector, SelectorError
from artifactcheck.model.values import (
    BAD_VERDICTS,
    UNKNOWN_VERDICTS,
    FindingKind,
    Instance,
    InstanceResult,
    Report,
    Verdict,
)

PREFIX = "/verdicts/v1"
FLAGGER_PATH = f"{PREFIX}/flagger"
API_VERSION = "artifactcheck.io/verdicts/v1"
#: The longest a request may wait for a fresh check (a larger ``timeout`` is cut to it).
MAX_WAIT = 60.0
#: The wait when ``fresh=true`` names no timeout (the GET) and for Flagger's webhook
#: (Flagger gives a webhook 10 seconds unless its ``timeout`` says otherwise).
DEFAULT_WAIT = 30.0
FLAGGER_WAIT = 8.0
#: API requests served at once (fewer than the server's connections: probes keep room).
MAX_CONCURRENT = 16
#: Pods listed one by one in an answer; the counts always cover every selected pod.
MAX_LISTED = 500

_DNS = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_CHECK_PATH = re.compile(rf"^{PREFIX}/namespaces/([^/]+)/artifactchecks/([^/]+)$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")


class ApiError(Exception):
    """An answer that is not a verdict: HTTP status, machine-readable reason, message."""

    def __init__(self, status: int, reason: str, message: str, *, retry_after: int = 0) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message
        self.retry_after = retry_after


class CheckStateView(Protocol):
    """What the API reads of one check's state (the controller's CheckState)."""

    namespace: str
    name: str
    pods: dict[str, Instance]
    pending: set[str]
    wake: asyncio.Event
    last_report: Report | None
    opened: set[str]
    history: History


class ControllerView(Protocol):
    """What the API reads of the controller."""

    @property
    def checks(self) -> Mapping[str, CheckStateView]: ...

    @property
    def refused(self) -> Mapping[str, object]: ...

    @property
    def is_leader(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class PodRow:
    """One selected pod as the last cycle saw it (verdict None: not checked yet)."""

    name: str
    version: str | None
    verdict: Verdict | None
    reason: str
    serves_version: str | None
    verified: bool
    ready: bool
    quarantined: bool
    held: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One check's verdicts, copied on the event loop."""

    namespace: str
    name: str
    rows: tuple[PodRow, ...]
    total_pods: int
    suspect: bool
    started_at: datetime | None
    finished_at: datetime | None
    fresh: bool


def parse_duration(text: str) -> float:
    """``30s``, ``1.5s``, ``500ms``, ``1m``, ``1h`` or plain seconds, cut to
    :data:`MAX_WAIT`; 400 otherwise."""
    m = _DURATION.match(text.strip())
    if m is None:
        raise ApiError(400, "BadTimeout", f"timeout {text[:40]!r}: use e.g. 30s, 500ms, 1m")
    value = (
        float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}[m.group(2)]
    )
    return min(value, MAX_WAIT)


def _flag(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no", ""):
        return False
    raise ApiError(400, "BadParameter", f"fresh={text[:20]!r}: use true or false")


#: A selector longer than this is refused (it also travels in the request line).
MAX_SELECTOR = 1024


@dataclass(frozen=True, slots=True)
class Selector:
    """A request's label selector: as written (the answer echoes it) and parsed, with
    the grammar ``kubectl get -l`` accepts (:mod:`artifactcheck.model.selectors`)."""

    text: str
    parsed: LabelSelector

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.parsed.matches(labels)


def _selector(text: str | None) -> Selector | None:
    if text is None:
        return None
    try:
        if len(text) > MAX_SELECTOR:
            raise SelectorError(f"selector longer than {MAX_SELECTOR} characters")
        return Selector(text=text.strip(), parsed=LabelSelector.parse(text))
    except SelectorError as exc:
        raise ApiError(400, "BadSelector", f"label selector {text[:100]!r}: {exc}") from None


def _names(namespace: str, name: str) -> str:
    for what, value in (("namespace", namespace), ("name", name)):
        if not _DNS.match(value):
            raise ApiError(400, "BadName", f"{what} {value[:80]!r} is not a Kubernetes name")
    return f"{namespace}/{name}"


def _rows(state: CheckStateView, selector: Selector | None) -> tuple[list[PodRow], int]:
    report = state.last_report
    results: dict[str, InstanceResult] = (
        {r.instance.name: r for r in report.results} if report is not None else {}
    )
    quarantined = {n for n, s in state.history.instances.items() if s.quarantined}
    held = held_out_of_traffic(state.pods, opened=state.opened, history=state.history)
    rows: list[PodRow] = []
    for name, inst in sorted(state.pods.items()):
        if selector is not None and not selector.matches(inst.labels):
            continue
        r = results.get(name)
        rows.append(
            PodRow(
                name=name,
                version=(r.reported_version if r else None) or inst.reported_version,
                verdict=r.verdict if r else None,
                reason=r.reason if r else "not checked yet",
                serves_version=r.serves_version if r else None,
                verified=r.verified if r else False,
                ready=inst.ready,
                quarantined=name in quarantined,
                held=name in held,
            )
        )
    return rows, len(state.pods)


def _snapshot(
    ctl: ControllerView, key: str, selector: Selector | None, asked: datetime | None
) -> Snapshot:
    """The check's verdicts now (on the loop); ApiError when there are none to give."""
    state = ctl.checks.get(key)
    if state is None:
        if key in ctl.refused:
            raise ApiError(404, "CheckRefused", f"ArtifactCheck {key} was refused: see its status")
        raise ApiError(404, "CheckNotFound", f"no ArtifactCheck {key}")
    if not ctl.is_leader:
        raise ApiError(
            503,
            "NotLeader",
            "this replica is a standby: only the leader checks pods",
            retry_after=1,
        )
    report = state.last_report
    if report is None:
        raise ApiError(503, "NotYetChecked", f"{key} has not been checked yet", retry_after=1)
    rows, total = _rows(state, selector)
    started = report.started_at
    return Snapshot(
        namespace=state.namespace,
        name=state.name,
        rows=tuple(rows),
        total_pods=total,
        suspect=any(f.kind is FindingKind.SUSPECT_EXPECTATION for f in report.findings),
        started_at=started,
        finished_at=started + timedelta(seconds=report.elapsed) if started else None,
        fresh=asked is not None and started is not None and started >= asked,
    )


def overall(rows: Collection[PodRow]) -> tuple[str, str]:
    """("passed" | "failed" | "inconclusive", why) for a set of pods.

    Failed as soon as one pod serves content its version does not (a whole canary
    that disagrees with its release fails too, even when that makes the expectation
    suspect: not promoting is the safe side). Passed only when every selected pod was
    checked and verified. Anything else (no pod selected, a pod not checked yet,
    unreachable or inconclusive, a release source that vouches for names only) is
    inconclusive: nobody can say.
    """
    n = len(rows)
    if n == 0:
        return "inconclusive", "no ready pod of the check matches the selector"
    bad = [r for r in rows if r.verdict in BAD_VERDICTS]
    if bad:
        kinds = ", ".join(sorted({str(r.verdict) for r in bad}))
        return "failed", f"{len(bad)} of {n} pod(s) serve what their version should not ({kinds})"
    unchecked = [r for r in rows if r.verdict is None]
    if unchecked:
        return "inconclusive", f"{len(unchecked)} of {n} pod(s) not checked yet"
    unknown = [r for r in rows if r.verdict in UNKNOWN_VERDICTS]
    if unknown:
        why = unknown[0].reason
        return "inconclusive", f"{len(unknown)} of {n} pod(s) could not be judged: {why}"
    unverified = [r for r in rows if not r.verified]
    if unverified:
        return "inconclusive", f"{len(unverified)} of {n} pod(s) consistent but not verified"
    return "passed", f"all {n} pod(s) serve what their version should"


def _stamp(when: datetime | None) -> str | None:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


def document(snap: Snapshot, selector: Selector | None) -> dict[str, Any]:
    """The answer's JSON (docs/verdict-api.schema.json)."""
    result, reason = overall(snap.rows)
    counts = {v.value: 0 for v in Verdict} | {"unchecked": 0}
    versions: dict[str, dict[str, int]] = {}
    for r in snap.rows:
        verdict = r.verdict.value if r.verdict else "unchecked"
        counts[verdict] += 1
        per = versions.setdefault(r.version or "", {})
        per[verdict] = per.get(verdict, 0) + 1
    return {
        "apiVersion": API_VERSION,
        "kind": "Verdicts",
        "check": {"namespace": snap.namespace, "name": snap.name},
        "selector": selector.text if selector is not None else None,
        "result": result,
        "reason": reason,
        "fresh": snap.fresh,
        "lastCheckTime": _stamp(snap.finished_at),
        "cycleStartTime": _stamp(snap.started_at),
        "expectationSuspect": snap.suspect,
        "pods": {"selected": len(snap.rows), "total": snap.total_pods},
        "counts": counts,
        "versions": [
            {"version": v or None, "pods": sum(c.values()), "counts": c}
            for v, c in sorted(versions.items())
        ],
        "heldOutOfTraffic": [r.name for r in snap.rows if r.held][:MAX_LISTED],
        "quarantined": [r.name for r in snap.rows if r.quarantined][:MAX_LISTED],
        "instances": [
            {
                "name": r.name,
                "version": r.version,
                "verdict": r.verdict.value if r.verdict else None,
                "reason": r.reason[:500],
                "servesVersion": r.serves_version,
                "verified": r.verified,
                "ready": r.ready,
                "quarantined": r.quarantined,
                "heldOutOfTraffic": r.held,
            }
            for r in snap.rows[:MAX_LISTED]
        ],
        "instancesTruncated": len(snap.rows) > MAX_LISTED,
    }


@dataclass(frozen=True, slots=True)
class _Request:
    """A request that parsed: what answers it here, and how long that may wait."""

    answer: Callable[[], tuple[int, dict[str, Any]]]
    wait: float | None


class VerdictApi:
    """The API's requests, answered from a controller's memory (see the module doc).

    ``loop`` gives the controller's event loop (None until it runs); every read and
    every fresh-check request is a coroutine scheduled on it. With a ``forwarder``,
    a standby passes every request that parsed to the leader (one hop: never one that
    was forwarded already, artifactcheck/control/forward.py); without one it answers
    ``503 NotLeader``. ``identity`` names this replica in :data:`ANSWERED_BY`.
    """

    def __init__(
        self,
        controller: ControllerView,
        *,
        loop: Callable[[], asyncio.AbstractEventLoop | None],
        poll: float = 0.05,
        forwarder: Forwarder | None = None,
        identity: str | None = None,
    ) -> None:
        self.controller = controller
        self.loop = loop
        self.poll = poll
        self.forwarder = forwarder
        self.identity = identity
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)

    # -- HTTP --------------------------------------------------------------------

    def serves(self, path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    def handle(self, request: ApiRequest) -> tuple[int, bytes, dict[str, str]]:
        """One request (a standby forwards it to the leader unless another replica did)."""
        if not self._slots.acquire(blocking=False):
            return self._error(
                ApiError(429, "TooManyRequests", "too many verdict requests", retry_after=1)
            )
        method, path, query, body = request.method, request.path, request.query, request.body
        try:
            routed = self._route(method, path, query, body)
            if (
                self.forwarder is not None
                and request.forwarded_by is None
                and not self.controller.is_leader
            ):
                got = self.forwarder.forward(method, path, query, body, wait=routed.wait or 0.0)
                return got.status, got.body, got.headers
            status, doc = routed.answer()
            return status, json.dumps(doc).encode() + b"\n", self._answered({})
        except ApiError as exc:
            return self._error(exc)
        finally:
            self._slots.release()

    def _answered(self, headers: dict[str, str]) -> dict[str, str]:
        if self.identity is not None:
            headers[ANSWERED_BY] = self.identity
        return headers

    def _error(self, exc: ApiError) -> tuple[int, bytes, dict[str, str]]:
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
        return exc.status, json_error(exc.status, exc.reason, exc.message), self._answered(headers)

    def _route(self, method: str, path: str, query: str, body: bytes | None) -> _Request:
        """Parse the request (ApiError when it is wrong: the leader would say the same,
        so a standby says it without asking)."""
        if path == FLAGGER_PATH:
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "Flagger's webhook is a POST")
            return self._flagger_request(body or b"")
        m = _CHECK_PATH.match(path)
        if m is None:
            raise ApiError(
                404,
                "NotFound",
                f"use {PREFIX}/namespaces/NAMESPACE/artifactchecks/NAME or POST {FLAGGER_PATH}",
            )
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed", "verdicts are read with GET")
        try:
            params = parse_qs(query, keep_blank_values=True, strict_parsing=False, max_num_fields=8)
        except ValueError as exc:
            raise ApiError(400, "BadQuery", str(exc)) from None
        unknown = set(params) - {"selector", "fresh", "timeout"}
        if unknown:
            raise ApiError(400, "BadQuery", f"unknown parameter(s): {', '.join(sorted(unknown))}")
        one = {k: v[-1] for k, v in params.items()}
        fresh = _flag(one.get("fresh", "false"))
        wait = parse_duration(one["timeout"]) if "timeout" in one else DEFAULT_WAIT
        key = _names(m.group(1), m.group(2))
        selector = _selector(one.get("selector"))
        waited = wait if fresh else None
        return _Request(lambda: (200, self.verdicts(key, selector, wait=waited)), waited)

    # -- answers -------------------------------------------------------------------

    def verdicts(
        self, key: str, selector: Selector | None, *, wait: float | None
    ) -> dict[str, Any]:
        """The verdicts of ``key``'s pods (those ``selector`` matches), after a fresh
        check of them when ``wait`` is given (at most that many seconds)."""
        coro = self._fresh(key, selector, wait) if wait is not None else self._now(key, selector)
        snap = self._on_loop(coro, timeout=(wait or 0.0) + 5.0)
        return document(snap, selector)

    def flagger(self, body: bytes) -> tuple[int, dict[str, Any]]:
        """Flagger's webhook: 200 only when the canary's pods serve what they should."""
        return self._flagger_request(body).answer()

    def _flagger_request(self, body: bytes) -> _Request:
        """Flagger's webhook, parsed.

        The payload is Flagger's CanaryWebhookPayload; ``metadata`` names the check
        (``check``: ``name`` in the Canary's namespace, or ``namespace/name``) and
        the canary's pods (``selector``), optionally ``fresh`` and ``timeout``.
        """
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "BadPayload", "the body is not JSON") from None
        if not isinstance(payload, dict):
            raise ApiError(400, "BadPayload", "the body is not a JSON object")
        namespace, name = payload.get("namespace"), payload.get("name")
        meta = payload.get("metadata") or {}
        if not isinstance(namespace, str) or not isinstance(name, str):
            raise ApiError(400, "BadPayload", "name and namespace must be strings")
        if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()
        ):
            raise ApiError(400, "BadPayload", "metadata must map strings to strings")
        check = meta.get("check") or ""
        if not check:
            raise ApiError(400, "BadPayload", "metadata.check must name the ArtifactCheck")
        check_ns, _, check_name = check.rpartition("/")
        key = _names(check_ns or namespace, check_name)
        if "selector" not in meta or not meta["selector"].strip():
            raise ApiError(400, "BadPayload", "metadata.selector must select the canary's pods")
        selector = _selector(meta["selector"])
        fresh = _flag(meta.get("fresh", "true"))
        wait = parse_duration(meta["timeout"]) if "timeout" in meta else FLAGGER_WAIT
        waited = wait if fresh else None
        webhook = {
            "name": name[:253],
            "namespace": namespace[:253],
            "phase": str(payload.get("phase") or "")[:64],
            "checksum": str(payload.get("checksum") or "")[:128],
        }

        def answer() -> tuple[int, dict[str, Any]]:
            doc = self.verdicts(key, selector, wait=waited)
            doc["webhook"] = webhook
            status = {"passed": 200, "failed": 412}.get(doc["result"], 503)
            return status, doc

        return _Request(answer, waited)

    # -- on the event loop -----------------------------------------------------------

    def _on_loop(self, coro: Any, *, timeout: float) -> Snapshot:
        loop = self.loop()
        if loop is None or loop.is_closed() or not loop.is_running():
            coro.close()
            raise ApiError(503, "NotRunning", "the controller is not running", retry_after=1)
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            result: Snapshot = future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise ApiError(
                503, "ControllerBusy", "the controller did not answer in time", retry_after=1
            ) from None
        return result

    async def _now(self, key: str, selector: Selector | None) -> Snapshot:
        return _snapshot(self.controller, key, selector, None)

    async def _fresh(self, key: str, selector: Selector | None, wait: float) -> Snapshot:
        """Mark the selected pods new (the next cycle observes them), then wait for a
        cycle that started after that; 504 when none finished within ``wait``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        asked = datetime.now(UTC)
        snap = _snapshot(self.controller, key, selector, asked)
        state = self.controller.checks[key]
        names = {r.name for r in snap.rows}
        if not names:
            return snap  # nothing to check: the answer says so (inconclusive)
        state.pending.update(names)
        state.wake.set()
        while True:
            snap = _snapshot(self.controller, key, selector, asked)
            if snap.fresh:
                return snap
            if loop.time() >= deadline:
                raise ApiError(
                    504,
                    "WaitTimedOut",
                    f"no check of the selected pods finished within {wait:g}s",
                    retry_after=1,
                )
            await asyncio.sleep(self.poll)


__all__ = ["ApiError", "VerdictApi", "document", "overall", "parse_duration"]
