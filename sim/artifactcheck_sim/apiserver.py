"""A fake kube-apiserver, served over real HTTP, for demos, tests and benchmarks.

Why it exists
-------------
artifactcheck runs as a Kubernetes controller: it lists and watches pods,
patches pod and ``ArtifactCheck`` status, records events and holds a leader
election lease.  No real kube-apiserver can be installed where the project is
built and tested, and mocking the ``kubernetes`` client at the Python level
would test our assumptions about the API instead of the API.  So this module
serves the Kubernetes REST API itself, on a loopback port, and the official
``kubernetes`` client talks to it over HTTP exactly as it talks to a cluster:
same URLs, same JSON, same status codes, same watch stream.

What it covers
--------------
* Resources: core/v1 ``pods`` (+ ``/status``, ``/binding``), ``nodes``
  (+ ``/status``), ``namespaces`` (+ ``/status``), ``configmaps``, ``events``;
  ``events.k8s.io/v1`` ``events`` (the same objects as core/v1 events, converted,
  as on a real server); ``coordination.k8s.io/v1`` ``leases``; stored with the
  generic semantics and nothing acting on them (what ``kubectl apply -k k8s/``
  creates): ``services``, ``serviceaccounts``, ``apps/v1`` ``deployments``,
  ``rbac.authorization.k8s.io/v1`` roles, cluster roles and their bindings,
  ``policy/v1`` ``poddisruptionbudgets``, ``networking.k8s.io/v1``
  ``networkpolicies``.  More can be added with
  :meth:`FakeApiServer.register_resource`.
* ``apiextensions.k8s.io/v1`` CustomResourceDefinitions
  (:mod:`~artifactcheck_sim.apiserver_crds`): creating one serves its resource
  (discovery with short names and categories, ``/status``), updating re-registers,
  deleting removes the resource and its objects; custom objects are pruned,
  defaulted and validated by the structural schema
  (:mod:`~artifactcheck_sim.apiserver_schema`: 422 with field paths).  Until a CRD
  for it is created, ``artifactcheck.io/v1alpha1`` ``artifactchecks`` is served
  built in and accepts any body (:class:`~artifactcheck_sim.cluster.SimCluster`
  creates the project's CRD at start, so its schema applies).
* ``fieldValidation`` (``Strict``: 400 for unknown fields; ``Warn``, the default:
  ``Warning`` headers; ``Ignore``), unknown fields dropped for built-in kinds too
  when the Kubernetes definitions (``kubernetes-validate``) are installed.
* ``kubectl``'s media type ``application/json;as=Table;v=v1;g=meta.k8s.io`` on get,
  list and watch (:mod:`~artifactcheck_sim.apiserver_tables`: printer columns).
* OpenAPI v3: ``/openapi/v3`` and one document per group-version
  (:mod:`~artifactcheck_sim.apiserver_openapi`), enough for ``kubectl apply``'s
  validation and ``kubectl explain``.  :meth:`FakeApiServer.write_kubeconfig` for
  pointing a real kubectl at the server.
* Verbs: get, list (cluster-wide and per namespace, ``limit``/``continue``),
  watch, create (``generateName``), update (PUT, create-on-update for leases
  and events), patch (strategic merge, JSON merge, JSON patch), delete,
  deletecollection; ``dryRun=All``.
* Semantics (see :mod:`artifactcheck_sim.apiserver_store`): ``uid``,
  ``creationTimestamp``, one global monotonically increasing
  ``resourceVersion``; 409 on a stale ``resourceVersion`` or a duplicate name;
  status-subresource separation; ``metadata.generation``; no-op writes keep
  the resourceVersion and send no event; finalizers and ``deletionTimestamp``;
  namespaced objects need their namespace (``default``, ``kube-system``,
  ``kube-public`` and ``kube-node-lease`` exist from the start); deleting a
  namespace deletes what is in it; pods get the API defaults, a reset status
  and ``qosClass`` on create, and their spec is immutable but for images,
  tolerations and deadlines.
* Label selectors (all operators) and field selectors (per-resource fields)
  on lists and watches; 400 for invalid ones or unsupported fields.
* Watches: chunked newline-delimited JSON, ``timeoutSeconds``, resume from a
  ``resourceVersion`` out of a bounded per-resource history (``history``
  events), an in-stream ``ERROR`` 410 ``Expired`` event for a resourceVersion
  older than that (then the stream ends), synthetic ``ADDED`` events when no
  resourceVersion (or ``"0"``) is given, ``sendInitialEvents``,
  ``allowWatchBookmarks`` (a BOOKMARK every ``bookmark_interval`` seconds), and
  a ``DELETED`` event for an object that stops matching the watch's selectors.
* Errors are real ``Status`` objects: 400, 404, 405, 409 (``AlreadyExists`` /
  ``Conflict``), 410, 415 (strategic merge patch on a custom resource), 422
  (``Invalid``, with field causes), 500.
* Discovery (``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>``,
  ``/apis/<group>/<version>``), ``/version``, ``/healthz``, ``/livez``,
  ``/readyz``.
* Fault injection: :meth:`~FakeApiServer.pause` / :meth:`~FakeApiServer.resume`
  (an API server restart: listener closed, open watches dropped, same port and
  state afterwards), :meth:`~FakeApiServer.compact` (410 for old
  resourceVersions), :meth:`~FakeApiServer.inject` (answer matching requests
  with an error status and/or a delay).
* Every request is recorded in :attr:`~FakeApiServer.requests`, counted by HTTP
  method in :attr:`~FakeApiServer.request_counts` and by Kubernetes verb in
  :attr:`~FakeApiServer.verb_counts`.
* An in-process API (:meth:`~FakeApiServer.create`, ``get``, ``list``,
  ``update``, ``patch``, ``patch_status``, ``delete``...) with the same
  semantics and watch events as HTTP calls, for simulators and test setup.

What it does not do (be aware when a test passes here)
------------------------------------------------------
No authentication and no admission webhooks; authorization only when
:attr:`~FakeApiServer.rbac` is set, for requests that name a user with
``Impersonate-User`` (RBAC, as sim/artifactcheck_sim/apiserver_rbac.py says); TLS
only when given an ``ssl_context`` (served as a real API server is, with the caller's
certificate; no client certificates are asked for and bearer tokens are not checked);
no protobuf,
CBOR or YAML output, no v1beta1 Tables, and no protobuf or YAML request bodies
(415: ``kubectl create deployment``/``create configmap`` send protobuf and fail;
``kubectl apply`` sends JSON and works); no OpenAPI v2 (``/openapi/v2`` is 404;
kubectl 1.37 only uses it as a fallback); no aggregated discovery (kubectl falls
back to the per-group documents); no server-side apply
(``application/apply-patch+yaml`` answers 415); no ``managedFields``; no CEL
rules, conversion webhooks or ``scale`` subresource for CRDs;
validation of built-in kinds is a small subset of the real one; no garbage
collection of ``ownerReferences`` dependents and ``propagationPolicy`` is
ignored; no graceful pod deletion (pods without finalizers disappear at once,
even when bound to a node) and namespaces do not go through ``Terminating``;
no controllers of any kind (nothing schedules pods, runs kubelets or expires
leases); ``limit``/``continue`` pages are read from the current state rather
than a snapshot; a list's ``resourceVersion``/``resourceVersionMatch``
parameters are ignored (lists are always served from the latest state) and a
watch from a resourceVersion newer than the server's is accepted instead of
being refused as too large; no ``/log``, ``/exec``, ``/eviction`` or other
subresources; no API Priority and Fairness (only injected 429s).

Deliberate simplifications: a write to ``/status`` changes nothing but
``.status`` for every kind (a real ``pods/status`` write may also change labels
and annotations); ``events.k8s.io/v1`` field selectors use the ``regarding.*``
names; error message texts follow Kubernetes' formats but are not guaranteed
byte-for-byte.  Faithful on purpose, although it surprises: a strategic merge
patch replaces ``status.containerStatuses`` whole (it is ``listType=atomic``
with no merge key in the Pod type), and an ``events.k8s.io/v1`` view of a legacy
core event without ``eventTime`` has a null ``eventTime`` (which the Python
client cannot deserialize, exactly as against a real cluster).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import math
import re
import socket
import ssl
import threading
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from aiohttp import web
from multidict import CIMultiDict, MultiMapping

from artifactcheck.model.selectors import LabelSelector, SelectorError
from artifactcheck_sim import apiserver_rbac
from artifactcheck_sim.apiserver_crds import CRDS, custom_resources
from artifactcheck_sim.apiserver_errors import ApiError
from artifactcheck_sim.apiserver_faults import Faults
from artifactcheck_sim.apiserver_openapi import (
    builtin_pruner,
    document_hash,
    group_version_document,
    index_document,
)
from artifactcheck_sim.apiserver_resources import (
    BUILTIN_RESOURCES,
    NAMESPACES,
    STANDARD_VERBS,
    ResourceRegistry,
    ResourceType,
)
from artifactcheck_sim.apiserver_store import PATCH_TYPES, Store, Stored
from artifactcheck_sim.apiserver_tables import to_table, wants_table
from artifactcheck_sim.field_selectors import FieldSelector
from artifactcheck_sim.json_values import json_copy
from artifactcheck_sim.loop_thread import LoopThread, stop_accepting

if TYPE_CHECKING:
    from artifactcheck.clients.kube import ApiClient, Configuration

__all__ = ["ApiError", "FakeApiServer", "ResourceType"]

log = logging.getLogger(__name__)

JsonObj = dict[str, Any]
JsonList = list[JsonObj]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
KUBERNETES_VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-fake.artifactcheck",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_WATCH_DEFAULT_TIMEOUT = 1800.0  # kube-apiserver's --min-request-timeout
_APPLY_PATCH = "application/apply-patch+yaml"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes")


def _json_response(
    body: str | JsonObj,
    status: int = 200,
    headers: dict[str, str] | None = None,
    warnings: Iterable[str] = (),
) -> web.Response:
    text = body if isinstance(body, str) else _dumps(body)
    all_headers: CIMultiDict[str] = CIMultiDict(headers or {})
    for warning in warnings:
        # RFC 7234 warn-code 299 ("miscellaneous persistent warning"), as the API server sends.
        escaped = warning.replace("\\", "\\\\").replace('"', '\\"')
        all_headers.add("Warning", f'299 - "{escaped}"')
    return web.Response(
        body=text.encode(), status=status, content_type="application/json", headers=all_headers
    )


def _error_response(error: ApiError) -> web.Response:
    return _json_response(error.to_status(), error.code, error.headers or None)


class _Signal:
    def __init__(self, name: str) -> None:
        self.name = name


_ABORT = _Signal("abort")  # drop the connection (API server going away)
_END = _Signal("end")  # finish the stream cleanly


class _WatchStream:
    """An open watch response; lives on the server's event loop."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | _Signal] = asyncio.Queue()

    def abort(self) -> None:
        self.queue.put_nowait(_ABORT)

    def end(self) -> None:
        self.queue.put_nowait(_END)


def _unless_missing(call: Callable[[], JsonObj]) -> JsonObj | None:
    """``call()``, or None where it finds no such object (a 404)."""
    try:
        return call()
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


@dataclass
class _Injection:
    method: str
    pattern: re.Pattern[str]
    status: int
    remaining: int  # < 0: unlimited
    delay: float


@dataclass(frozen=True)
class _Route:
    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool


@dataclass(frozen=True)
class _Call:
    """A request to a resource URL with the query options every verb reads."""

    request: web.Request
    route: _Route
    dry_run: bool
    field_validation: str
    table: bool
    include: str
    #: The ``Warning`` headers a write answers with (unknown fields under ``Warn``).
    warnings: builtins.list[str]

    @classmethod
    def of(cls, request: web.Request, route: _Route) -> _Call:
        query = request.query
        validation = query.get("fieldValidation") or "Warn"
        if validation not in ("Ignore", "Warn", "Strict"):
            raise ApiError.bad_request(
                f"fieldValidation parameter unsupported: {validation}; supported values are"
                " Ignore, Warn, Strict"
            )
        return cls(
            request=request,
            route=route,
            dry_run="All" in query.getall("dryRun", []),
            field_validation=validation,
            table=request.method == "GET" and wants_table(request.headers.get("Accept", "")),
            include=query.get("includeObject") or "Partial",
            warnings=[],
        )

    @property
    def write_options(self) -> dict[str, Any]:
        """The keyword arguments the store's writes take from the query."""
        return {
            "dry_run": self.dry_run,
            "field_validation": self.field_validation,
            "warnings": self.warnings,
        }


_ObjectVerb = Callable[["FakeApiServer", _Call, str], Awaitable[web.StreamResponse]]


#: The request key of a watch a fault cuts (seconds it streams first).
_CUT_AFTER = web.RequestKey("artifactcheck_fault_cut_after", float)


def _verb_of(request: web.Request, route: _Route) -> str:
    """The Kubernetes verb of a request to a resource URL."""
    method = request.method
    watching = route.watch_path or (method == "GET" and _truthy(request.query.get("watch")))
    if route.name is None:
        if method == "GET":
            return "watch" if watching else "list"
        return {"POST": "create", "DELETE": "deletecollection"}.get(method, method.lower())
    if watching:
        return "watch"
    if route.subresource == "binding":
        return "create"
    verbs = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    return verbs.get(method, method.lower())


def _watch_timeout(param: str | None) -> float:
    try:
        timeout = float(int(param)) if param else 0.0
    except ValueError:
        raise ApiError.bad_request(f"invalid timeoutSeconds {param!r}") from None
    # as on a real server, 0 (or nothing) means the server's default
    return timeout if timeout > 0 else _WATCH_DEFAULT_TIMEOUT


class _WatchEncoder:
    """Watch event lines as sent: as they are, or (for ``kubectl get -w``) each object
    as a one-row Table, of which only the first carries the columns (kubectl reuses
    them, "to save bandwidth", as a real server sends them)."""

    def __init__(self, resource: ResourceType, table: bool, include: str) -> None:
        self._resource = resource
        self._table = table
        self._include = include
        self._headers_sent = False

    def __call__(self, lines: Iterable[str]) -> bytes:
        return "".join(self._line(line) for line in lines).encode()

    def _line(self, line: str) -> str:
        if not self._table:
            return line
        event = json.loads(line)
        if event.get("type") not in ("ADDED", "MODIFIED", "DELETED"):
            return line
        obj = event["object"]
        meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}
        event["object"] = to_table(
            self._resource,
            [obj],
            meta,
            include_object=self._include,
            no_headers=self._headers_sent,
        )
        self._headers_sent = True
        return _dumps(event) + "\n"


def _drain(stream: _WatchStream, item: str | _Signal) -> tuple[builtins.list[str], _Signal | None]:
    """``item`` and what else is queued already (up to 512 lines), stopping at a signal."""
    batch: builtins.list[str] = []
    while True:
        if isinstance(item, _Signal):
            return batch, item
        batch.append(item)
        if stream.queue.empty() or len(batch) >= 512:
            return batch, None
        item = stream.queue.get_nowait()


class FakeApiServer:
    """A kube-apiserver look-alike on ``http://host:port``; see the module docstring.

    Use as a context manager or call :meth:`start`/:meth:`stop`::

        with FakeApiServer() as server, server.api_client() as api:
            CoreV1Api(api).list_namespaced_pod("default")
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history: int = 1000,
        bookmark_interval: float = 1.0,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        resources: Iterable[ResourceType] = BUILTIN_RESOURCES,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        #: Serve HTTPS with this context (its certificate chain loaded) instead of HTTP.
        self.ssl_context = ssl_context
        self.port = port
        self.bookmark_interval = bookmark_interval
        self._registry = ResourceRegistry(resources)
        if self._registry.by_kind("v1", "Namespace") is None:
            self._registry.register(NAMESPACES)
        if self._registry.by_kind(CRDS.api_version, CRDS.kind) is None:
            self._registry.register(CRDS)
        self._store = Store(self._registry, history=history)
        self._store.builtin_pruner = builtin_pruner
        self._store.observers.append(self._on_change)
        #: CRD name -> the resource types it serves.
        self._custom: dict[str, builtins.list[ResourceType]] = {}
        self._openapi_cache: dict[str, tuple[int, str, str]] = {}
        for namespace in namespaces:
            self._store.create(NAMESPACES, None, {"metadata": {"name": namespace}})
        #: (method, path+query) of every HTTP request received, in order.
        self.requests: builtins.list[tuple[str, str]] = []
        #: HTTP requests by method (``GET``, ``PATCH``...).
        self.request_counts: Counter[str] = Counter()
        #: HTTP requests by Kubernetes verb (``get``, ``list``, ``watch``, ``create``,
        #: ``update``, ``patch``, ``delete``, ``deletecollection``).
        self.verb_counts: Counter[str] = Counter()
        self._injections: builtins.list[_Injection] = []
        #: Seeded faults by verb and resource (sim/artifactcheck_sim/apiserver_faults.py);
        #: None (the default): none.
        self.faults: Faults | None = None
        #: Authorise requests that name a user (``Impersonate-User``) by the stored
        #: RBAC objects, as a real server does (sim/artifactcheck_sim/apiserver_rbac.py);
        #: off (the default): every request is allowed.
        self.rbac = False
        self._inject_lock = threading.Lock()
        self._thread = LoopThread("FakeApiServer", join_timeout=30, drain=True)
        self._runner: web.AppRunner | None = None
        self._listener: socket.socket | None = None  # the listening socket (_unlisten)
        self._streams: set[_WatchStream] = set()
        # Every connection a request came on, dropped when the server stops (_unlisten).
        self._transports: weakref.WeakSet[asyncio.Transport] = weakref.WeakSet()

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    @property
    def running(self) -> bool:
        """True while the server accepts connections (started and not paused)."""
        return self._runner is not None

    def start(self) -> FakeApiServer:
        """Serve in a background thread with its own event loop; returns self."""
        if self._thread.started:
            raise RuntimeError("FakeApiServer already started")
        self._thread.start()
        try:
            self._call(self._listen())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close the server and every watch, and join the thread.  Idempotent."""
        self._thread.stop(self._unlisten(), timeout=60.0)

    def pause(self) -> None:
        """Stop accepting connections and drop open watches, keeping all state (a restart)."""
        if self._thread.loop is None:
            raise RuntimeError("FakeApiServer is not started")
        self._call(self._unlisten())

    def resume(self) -> None:
        """Listen again, on the same port, after :meth:`pause`."""
        if self._thread.loop is None:
            raise RuntimeError("FakeApiServer is not started")
        if self._runner is None:
            self._call(self._listen())

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _call(self, coro: Any, timeout: float = 60.0) -> Any:
        return self._thread.call(coro, timeout)

    async def _listen(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=1.0,
        )
        await runner.setup()
        try:
            # The listening socket is this server's own, so that stopping can end the
            # accepting before the closing (_unlisten).
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            listener = socket.create_server((self.host, self.port), family=family, backlog=128)
            try:
                site = web.SockSite(runner, listener, ssl_context=self.ssl_context)
                await site.start()
            except BaseException:
                listener.close()
                raise
        except BaseException:
            await runner.cleanup()
            raise
        if self.port == 0:
            self.port = int(listener.getsockname()[1])
        self._runner, self._listener = runner, listener

    async def _unlisten(self) -> None:
        for stream in list(self._streams):
            stream.abort()
        runner, self._runner = self._runner, None
        listener, self._listener = self._listener, None
        if runner is not None:
            handlers = runner.server
            if listener is not None:  # what was accepted becomes a connection first
                await stop_accepting([listener], turns=2)
            await runner.cleanup()
            # A connection accepted while the listener closed joins after aiohttp's
            # shutdown took its list: close it too, as a real API server's exit would,
            # rather than leave a client waiting out its read timeout on a dead server.
            for _ in range(5):  # an accepted socket becomes a connection a few turns later
                await asyncio.sleep(0)
                for late in list(handlers.connections if handlers is not None else ()):
                    late.force_close()
        # A close waits until the peer has taken what was written: a watch whose client
        # stopped reading would keep its socket open past the loop's end. What is still
        # open is dropped, as a real API server's exit drops it.
        for transport in list(self._transports):
            transport.abort()
        await asyncio.sleep(0)  # the aborted transports close their sockets

    # ------------------------------------------------------------------ client helpers

    def client_configuration(self) -> Configuration:
        """A ``kubernetes.client.Configuration`` for this server (no auth; with TLS, set
        its ``ssl_ca_cert`` to the CA of the server's certificate)."""
        from artifactcheck.clients.kube import configuration_for

        return configuration_for(self.url)

    def write_kubeconfig(self, path: str, *, ca_file: str | None = None) -> str:
        """Write a kubeconfig for this server (context ``artifactcheck-sim``) to ``path``.

        So that a person, or a test, can point a real ``kubectl`` at the fake: no user
        credentials (none are checked); with TLS, ``ca_file`` is the CA to trust
        (without it the kubeconfig skips verification).  Returns ``path``.
        """
        cluster: JsonObj = {"server": self.url}
        if self.ssl_context is not None:
            if ca_file:
                cluster["certificate-authority"] = ca_file
            else:
                cluster["insecure-skip-tls-verify"] = True
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "artifactcheck-sim", "cluster": cluster}],
            "users": [{"name": "artifactcheck-sim", "user": {}}],
            "contexts": [
                {
                    "name": "artifactcheck-sim",
                    "context": {
                        "cluster": "artifactcheck-sim",
                        "user": "artifactcheck-sim",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": "artifactcheck-sim",
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)  # JSON is YAML: kubectl reads it as is
        return path

    def api_client(self) -> ApiClient:
        """A new ``kubernetes.client.ApiClient``; close it (or use ``with``) when done."""
        from artifactcheck.clients import kube

        return kube.ApiClient(self.client_configuration())

    # ------------------------------------------------------------------ fault injection

    def compact(self) -> None:
        """Forget the event history: watches from older resourceVersions get 410 Gone."""
        self._store.compact()

    def inject(
        self, method: str, path_regex: str, status: int, times: int = 1, delay: float = 0
    ) -> None:
        """Make the next ``times`` requests matching ``method`` and ``path_regex`` misbehave.

        ``method`` is an HTTP method or ``"*"``; ``path_regex`` is searched
        (``re.search``) in the path plus query string.  A matching request is
        delayed by ``delay`` seconds, then, when ``status`` is 400 or more,
        answered with a ``Status`` of that code (the reason a real server gives
        it; 429 carries ``Retry-After: 1``) instead of being served; a
        ``status`` below 400 (e.g. 0) only delays.  ``times=-1`` matches until
        :meth:`clear_injections`.  Earlier injections are tried first.
        """
        if times == 0 or times < -1:
            raise ValueError("times must be positive, or -1 for unlimited")
        with self._inject_lock:
            self._injections.append(
                _Injection(method.upper(), re.compile(path_regex), status, times, delay)
            )

    def clear_injections(self) -> None:
        with self._inject_lock:
            self._injections.clear()

    def _take_injection(self, method: str, path_qs: str) -> _Injection | None:
        with self._inject_lock:
            for injection in self._injections:
                if injection.method in ("*", method) and injection.pattern.search(path_qs):
                    if injection.remaining > 0:
                        injection.remaining -= 1
                        if injection.remaining == 0:
                            self._injections.remove(injection)
                    return injection
        return None

    def reset_requests(self) -> None:
        """Forget the recorded requests and counters."""
        self.requests.clear()
        self.request_counts.clear()
        self.verb_counts.clear()

    # ------------------------------------------------------------------ in-process API

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion handed out."""
        return str(self._store.resource_version)

    @property
    def watch_count(self) -> int:
        """How many watches are open (HTTP watches register while streaming)."""
        return self._store.watch_count

    def register_resource(self, resource: ResourceType) -> None:
        """Serve one more resource type (e.g. another custom resource)."""
        self._registry.register(resource)

    def _resource(self, api_version: str | None, kind: str | None) -> ResourceType:
        resource = self._registry.by_kind(str(api_version or ""), str(kind or ""))
        if resource is None:
            raise ApiError(
                404,
                "NotFound",
                f'the server doesn\'t have a resource type for "{api_version}" "{kind}"',
            )
        return resource

    @staticmethod
    def _copy(stored: Stored) -> JsonObj:
        result: JsonObj = json.loads(stored.raw)
        return result

    def create(self, obj: JsonObj) -> JsonObj:
        """Create ``obj`` (with ``apiVersion``, ``kind``, ``metadata``) as a POST would."""
        resource = self._resource(obj.get("apiVersion"), obj.get("kind"))
        namespace = (obj.get("metadata") or {}).get("namespace") if resource.namespaced else None
        return self._copy(self._store.create(resource, namespace, obj))

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> JsonObj | None:
        """The object, or None when there is none."""
        resource = self._resource(api_version, kind)
        return _unless_missing(lambda: self._copy(self._store.get(resource, namespace, name)))

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> JsonList:
        """Objects of a kind, in one namespace or all, sorted by namespace and name."""
        resource = self._resource(api_version, kind)
        try:
            labels = LabelSelector.parse(label_selector)
            fields = FieldSelector.parse(field_selector)
        except SelectorError as exc:
            raise ApiError.bad_request(str(exc)) from None
        result = self._store.list(resource, namespace, labels, fields)
        return [self._copy(item) for item in result.items]

    def update(self, obj: JsonObj) -> JsonObj:
        """Replace an object as a PUT would (its ``resourceVersion``, if set, must be current)."""
        return self._put(obj, None)

    def update_status(self, obj: JsonObj) -> JsonObj:
        """Replace an object's status as a PUT to ``/status`` would."""
        return self._put(obj, "status")

    def _put(self, obj: JsonObj, subresource: str | None) -> JsonObj:
        resource = self._resource(obj.get("apiVersion"), obj.get("kind"))
        namespace = (obj.get("metadata") or {}).get("namespace") if resource.namespaced else None
        stored, _ = self._store.update(resource, namespace, None, obj, subresource=subresource)
        return self._copy(stored)

    def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> JsonObj:
        """PATCH; ``patch_type`` is ``strategic``, ``merge``, ``json`` or a content type."""
        resource = self._resource(api_version, kind)
        kind_of_patch = PATCH_TYPES.get(patch_type, patch_type)
        stored = self._store.patch(
            resource, namespace, name, kind_of_patch, json_copy(patch), subresource=subresource
        )
        return self._copy(stored)

    def patch_status(self, *args: Any, **options: Any) -> JsonObj:
        """PATCH the ``/status`` subresource: only ``.status`` changes (as :meth:`patch`)."""
        return self.patch(*args, subresource="status", **options)

    def delete(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> JsonObj | None:
        """Delete as a DELETE would; returns its answer (object or Status), None if absent."""
        resource = self._resource(api_version, kind)
        return _unless_missing(lambda: json_copy(self._store.delete(resource, namespace, name)))

    # ------------------------------------------------------------------ CRDs

    def _on_change(self, resource: ResourceType, event_type: str, obj: JsonObj) -> None:
        """Serve what a CustomResourceDefinition defines, from the moment it is stored."""
        if resource.storage != CRDS.storage:
            return
        name = str((obj.get("metadata") or {}).get("name") or "")
        old = self._custom.pop(name, [])
        for gone in old:
            self._registry.unregister(gone)
        if event_type == "DELETED":
            if old:
                self._store.purge(old[0])
            return
        served = custom_resources(obj)
        for new in served:
            self._registry.register(new)
        self._custom[name] = served

    # ------------------------------------------------------------------ HTTP: OpenAPI

    def _openapi_paths(self) -> dict[str, tuple[str, str]]:
        """Group-version path (``api/v1``, ``apis/g/v``) -> (hash, document text)."""
        out: dict[str, tuple[str, str]] = {}
        generation = self._registry.generation
        for group, versions in self._registry.group_versions().items():
            for version in versions:
                path = f"apis/{group}/{version}" if group else f"api/{version}"
                cached = self._openapi_cache.get(path)
                if cached is None or cached[0] != generation:
                    doc = group_version_document(
                        self._registry, group, version, KUBERNETES_VERSION["gitVersion"]
                    )
                    text = _dumps(doc)
                    cached = (generation, document_hash(text), text)
                    self._openapi_cache[path] = cached
                out[path] = (cached[1], cached[2])
        return out

    def _openapi(self, segments: builtins.list[str]) -> web.StreamResponse:
        if segments[1:2] != ["v3"]:
            raise ApiError.no_route()  # no /openapi/v2: kubectl 1.37 reads v3
        paths = self._openapi_paths()
        if len(segments) == 2:
            return _json_response(index_document({p: h for p, (h, _) in paths.items()}))
        found = paths.get("/".join(segments[2:]))
        if found is None:
            raise ApiError.no_route()
        return _json_response(found[1])

    # ------------------------------------------------------------------ HTTP: entry

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.method
        if request.transport is not None:
            self._transports.add(request.transport)
        self.requests.append((method, request.path_qs))
        self.request_counts[method] += 1
        try:
            injection = self._take_injection(method, request.path_qs)
            if injection is not None:
                if injection.delay > 0:
                    await asyncio.sleep(injection.delay)
                if injection.status >= 400:
                    return _error_response(ApiError.generic(injection.status))
            return await self._dispatch(request)
        except ApiError as exc:
            return _error_response(exc)
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception as exc:  # a bug in the fake: answer like a real server would
            log.exception("fake apiserver: %s %s failed", method, request.path_qs)
            return _error_response(ApiError.internal(f"{type(exc).__name__}: {exc}"))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        segments = [s for s in request.path.split("/") if s]
        if not segments:
            return _json_response({"paths": self._paths()})
        head = segments[0]
        if segments == ["version"]:
            return _json_response(dict(KUBERNETES_VERSION))
        if head in ("healthz", "livez", "readyz") and len(segments) == 1:
            return web.Response(text="ok", content_type="text/plain")
        if head == "openapi":
            return self._openapi(segments)
        groups = self._registry.group_versions()
        if head == "api":
            if len(segments) == 1:
                return _json_response(
                    {
                        "kind": "APIVersions",
                        "versions": groups.get("", []),
                        "serverAddressByClientCIDRs": [
                            {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}
                        ],
                    }
                )
            group, version, rest = "", segments[1], segments[2:]
        elif head == "apis":
            if len(segments) == 1:
                return _json_response(
                    {
                        "kind": "APIGroupList",
                        "apiVersion": "v1",
                        "groups": [self._api_group(g, v) for g, v in groups.items() if g],
                    }
                )
            group = segments[1]
            if not group or group not in groups:
                raise ApiError.no_route()
            if len(segments) == 2:
                return _json_response(
                    {
                        "kind": "APIGroup",
                        "apiVersion": "v1",
                        **self._api_group(group, groups[group]),
                    }
                )
            version, rest = segments[2], segments[3:]
        else:
            raise ApiError.no_route()
        if version not in groups.get(group, []):
            raise ApiError.no_route()
        if not rest:
            return _json_response(self._resource_list(group, version))
        route = self._route(group, version, rest)
        return await self._serve(request, route)

    def _paths(self) -> builtins.list[str]:
        paths = [
            "/api",
            "/api/v1",
            "/apis",
            "/healthz",
            "/livez",
            "/openapi/v3",
            "/readyz",
            "/version",
        ]
        for group, versions in self._registry.group_versions().items():
            if group:
                paths.append(f"/apis/{group}")
                paths.extend(f"/apis/{group}/{v}" for v in versions)
        return sorted(paths)

    @staticmethod
    def _api_group(group: str, versions: builtins.list[str]) -> JsonObj:
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": entries, "preferredVersion": entries[0]}

    def _resource_list(self, group: str, version: str) -> JsonObj:
        resources: builtins.list[JsonObj] = []
        for r in self._registry.in_group_version(group, version):
            entry: JsonObj = {
                "name": r.plural,
                "singularName": r.singular or r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(STANDARD_VERBS),
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            if r.categories:
                entry["categories"] = list(r.categories)
            resources.append(entry)
            if r.status_subresource:
                resources.append(
                    {
                        "name": f"{r.plural}/status",
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            for sub in r.subresources:
                resources.append(
                    {
                        "name": f"{r.plural}/{sub}",
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": "Binding" if sub == "binding" else r.kind,
                        "verbs": ["create"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    def _route(self, group: str, version: str, rest: builtins.list[str]) -> _Route:
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        namespace: str | None = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and self._registry.by_path(group, version, rest[2])
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError.no_route()
        resource = self._registry.by_path(group, version, rest[0])
        if resource is None:
            raise ApiError.no_route()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if resource.namespaced and namespace is None and name is not None:
            raise ApiError.no_route()
        if not resource.namespaced and namespace is not None:
            raise ApiError.no_route()
        if sub is not None:
            allowed = (("status",) if resource.status_subresource else ()) + resource.subresources
            if sub not in allowed or watch_path:
                raise ApiError.no_route()
        return _Route(resource, namespace, name, sub, watch_path)

    # ------------------------------------------------------------------ HTTP: resources

    @staticmethod
    async def _body(request: web.Request, *, required: bool = True) -> Any:
        raw = await request.read()
        if not raw.strip():
            if required:
                raise ApiError.bad_request("the body of the request is empty")
            return None
        content_type = request.content_type
        if request.method in ("POST", "PUT") and content_type not in (
            "application/json",
            "application/octet-stream",
            "",
        ):
            raise ApiError.unsupported_media_type(content_type, ["application/json"])
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError.bad_request(
                f"couldn't get version/kind; json parse error: {exc}"
            ) from None

    @staticmethod
    def _selectors(query: MultiMapping[str]) -> tuple[LabelSelector, FieldSelector]:
        try:
            return LabelSelector.parse(query.get("labelSelector")), FieldSelector.parse(
                query.get("fieldSelector")
            )
        except SelectorError as exc:
            raise ApiError.bad_request(str(exc)) from None

    def _list_body(self, resource: ResourceType, items: builtins.list[str], meta: JsonObj) -> str:
        return (
            f'{{"kind":"{resource.list_kind}","apiVersion":"{resource.api_version}",'
            f'"metadata":{_dumps(meta)},"items":[{",".join(items)}]}}'
        )

    async def _serve(self, request: web.Request, route: _Route) -> web.StreamResponse:
        """One request to a resource URL: a collection, a watch, a binding, or one object."""
        faults = self.faults
        if faults is not None:
            injected = await self._inject_fault(faults, request, route)
            if injected is not None:
                return injected
        if self.rbac:
            self._authorize(request, route)
        call = _Call.of(request, route)
        if route.name is None:
            return await self._serve_collection(call)
        if route.watch_path or (request.method == "GET" and _truthy(request.query.get("watch"))):
            return await self._serve_object_watch(call, route.name)
        if route.subresource == "binding":
            return await self._serve_binding(call, route.name)
        verb = self._OBJECT_VERBS.get(request.method)
        if verb is None or (request.method == "DELETE" and route.subresource is not None):
            raise ApiError.method_not_allowed()
        return await verb(self, call, route.name)

    def _authorize(self, request: web.Request, route: _Route) -> None:
        """403 unless the request's user (if it names one) is allowed by RBAC."""
        subject = apiserver_rbac.subject_of(
            request.headers, request.headers.getall("Impersonate-Group", [])
        )
        if subject is None:
            return
        verb = _verb_of(request, route)
        resource = route.resource.plural + (f"/{route.subresource}" if route.subresource else "")
        group = route.resource.group
        rbac_api = "rbac.authorization.k8s.io/v1"
        if not apiserver_rbac.allowed(
            subject,
            verb=verb,
            group=group,
            resource=resource,
            namespace=route.namespace,
            name=route.name,
            objects=lambda kind, ns: self.list(rbac_api, kind, ns),
        ):
            raise ApiError.forbidden(
                route.resource.plural,
                group,
                route.name,
                apiserver_rbac.forbidden_message(
                    subject, verb, group, resource, route.namespace, route.name
                ),
            )

    async def _inject_fault(
        self, faults: Faults, request: web.Request, route: _Route
    ) -> web.StreamResponse | None:
        """Apply the fault :attr:`faults` decides for this request: an answer instead of
        serving it (429, 500, a 410 watch), or None to serve it (after a slow wait; a
        cut watch is marked for :meth:`_pump`)."""
        verb = _verb_of(request, route)
        since = request.query.get("resourceVersion")
        fault = faults.decide(
            verb,
            route.resource.plural,
            request.path_qs,
            resumes=verb == "watch" and since not in (None, "", "0"),
        )
        if fault is None:
            return None
        if fault.kind == "slow":
            await asyncio.sleep(fault.delay)
        elif fault.kind == "cut":
            request[_CUT_AFTER] = fault.delay
        elif fault.kind == "throttle":
            error = ApiError.generic(429)
            error.headers = {"Retry-After": str(fault.retry_after)}
            return _error_response(error)
        elif fault.kind == "error":
            return _error_response(ApiError.generic(500))
        elif fault.kind == "gone":
            status = ApiError.expired(f"too old resource version: {since}").to_status()
            return web.Response(
                body=(_dumps({"type": "ERROR", "object": status}) + "\n").encode(),
                content_type="application/json",
            )
        return None

    async def _serve_collection(self, call: _Call) -> web.StreamResponse:
        request, route, store = call.request, call.route, self._store
        resource, namespace = route.resource, route.namespace
        labels, fields = self._selectors(request.query)
        if request.method == "GET":
            if route.watch_path or _truthy(request.query.get("watch")):
                self.verb_counts["watch"] += 1
                return await self._watch(request, resource, namespace, labels, fields, call.table)
            return self._serve_list(call, labels, fields)
        if resource.namespaced and namespace is None:
            raise ApiError.method_not_allowed()
        if request.method == "POST":
            self.verb_counts["create"] += 1
            body = await self._body(request)
            created = store.create(resource, namespace, body, **call.write_options)
            return _json_response(created.raw, 201, warnings=call.warnings)
        if request.method == "DELETE":
            self.verb_counts["deletecollection"] += 1
            deleted = store.delete_collection(
                resource, namespace, labels, fields, dry_run=call.dry_run
            )
            meta = {"resourceVersion": str(store.resource_version)}
            return _json_response(self._list_body(resource, [_dumps(d) for d in deleted], meta))
        raise ApiError.method_not_allowed()

    def _serve_list(
        self, call: _Call, labels: LabelSelector, fields: FieldSelector
    ) -> web.StreamResponse:
        self.verb_counts["list"] += 1
        query, resource = call.request.query, call.route.resource
        limit = query.get("limit")
        try:
            limit_n = int(limit) if limit else None
        except ValueError:
            raise ApiError.bad_request(f"invalid limit {limit!r}") from None
        result = self._store.list(
            resource,
            call.route.namespace,
            labels,
            fields,
            limit=limit_n,
            continue_token=query.get("continue") or None,
        )
        meta: JsonObj = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
            meta["remainingItemCount"] = result.remaining
        if call.table:
            objs = [i.obj for i in result.items]
            return _json_response(to_table(resource, objs, meta, include_object=call.include))
        return _json_response(self._list_body(resource, [i.raw for i in result.items], meta))

    async def _serve_object_watch(self, call: _Call, name: str) -> web.StreamResponse:
        """``GET .../<name>?watch=1`` (or the ``/watch/`` path): a watch of one object."""
        if call.request.method != "GET":
            raise ApiError.method_not_allowed()
        self.verb_counts["watch"] += 1
        labels, fields = self._selectors(call.request.query)
        fields = FieldSelector(
            fields.requirements + FieldSelector.parse(f"metadata.name={name}").requirements
        )
        route = call.route
        return await self._watch(
            call.request, route.resource, route.namespace, labels, fields, call.table
        )

    async def _serve_binding(self, call: _Call, name: str) -> web.StreamResponse:
        if call.request.method != "POST":
            raise ApiError.method_not_allowed()
        self.verb_counts["create"] += 1
        body = await self._body(call.request)
        namespace = call.route.namespace
        assert namespace is not None
        return _json_response(self._store.bind(call.route.resource, namespace, name, body), 201)

    async def _serve_get(self, call: _Call, name: str) -> web.StreamResponse:
        self.verb_counts["get"] += 1
        resource = call.route.resource
        got = self._store.get(resource, call.route.namespace, name)
        if call.table:
            meta = {"resourceVersion": (got.obj.get("metadata") or {}).get("resourceVersion")}
            return _json_response(to_table(resource, [got.obj], meta, include_object=call.include))
        return _json_response(got.raw)

    async def _serve_update(self, call: _Call, name: str) -> web.StreamResponse:
        self.verb_counts["update"] += 1
        body = await self._body(call.request)
        route = call.route
        stored, was_created = self._store.update(
            route.resource,
            route.namespace,
            name,
            body,
            subresource=route.subresource,
            **call.write_options,
        )
        return _json_response(stored.raw, 201 if was_created else 200, warnings=call.warnings)

    async def _serve_patch(self, call: _Call, name: str) -> web.StreamResponse:
        self.verb_counts["patch"] += 1
        route = call.route
        patch_type = self._patch_type(call.request.content_type, route.resource)
        body = await self._body(call.request)
        stored = self._store.patch(
            route.resource,
            route.namespace,
            name,
            patch_type,
            body,
            subresource=route.subresource,
            **call.write_options,
        )
        return _json_response(stored.raw, warnings=call.warnings)

    @staticmethod
    def _patch_type(content_type: str, resource: ResourceType) -> str:
        """The patch kind a PATCH's content type names, or the 415 a real server answers."""
        if content_type == _APPLY_PATCH:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "server-side apply (application/apply-patch+yaml) is not implemented"
                " by the fake API server",
            )
        patch_type = PATCH_TYPES.get(content_type)
        if patch_type is None or (patch_type == "strategic" and not resource.strategic_merge):
            accepted = ["application/json-patch+json", "application/merge-patch+json", _APPLY_PATCH]
            if resource.strategic_merge:
                accepted.append("application/strategic-merge-patch+json")
            raise ApiError.unsupported_media_type(content_type, accepted)
        return patch_type

    async def _serve_delete(self, call: _Call, name: str) -> web.StreamResponse:
        self.verb_counts["delete"] += 1
        options = await self._body(call.request, required=False)
        preconditions = options.get("preconditions") if isinstance(options, dict) else None
        dry_run = call.dry_run
        if isinstance(options, dict) and "All" in (options.get("dryRun") or []):
            dry_run = True
        answer = self._store.delete(
            call.route.resource,
            call.route.namespace,
            name,
            preconditions=preconditions if isinstance(preconditions, dict) else None,
            dry_run=dry_run,
        )
        return _json_response(answer)

    _OBJECT_VERBS: ClassVar[dict[str, _ObjectVerb]] = {
        "GET": _serve_get,
        "PUT": _serve_update,
        "PATCH": _serve_patch,
        "DELETE": _serve_delete,
    }

    # ------------------------------------------------------------------ HTTP: watch

    async def _watch(
        self,
        request: web.Request,
        resource: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        table: bool,
    ) -> web.StreamResponse:
        query = request.query
        loop = asyncio.get_running_loop()
        timeout = _watch_timeout(query.get("timeoutSeconds"))
        send_initial_param = query.get("sendInitialEvents")
        send_initial = None if send_initial_param is None else _truthy(send_initial_param)
        stream = _WatchStream()
        encode = _WatchEncoder(resource, table, query.get("includeObject") or "Partial")

        def deliver(line: str) -> None:
            try:
                loop.call_soon_threadsafe(stream.queue.put_nowait, line)
            except RuntimeError:  # the loop is closed: the server stopped
                pass

        lines, watcher = self._store.watch(
            resource,
            namespace,
            labels,
            fields,
            query.get("resourceVersion"),
            deliver,
            send_initial_events=send_initial,
        )
        self._streams.add(stream)
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        try:
            await response.prepare(request)
            if lines:
                await response.write(encode(lines))
            if watcher is not None:
                bookmarks = _truthy(query.get("allowWatchBookmarks"))
                await self._pump(request, response, stream, watcher, encode, timeout, bookmarks)
        except ConnectionError:
            pass
        finally:
            if watcher is not None:
                self._store.unwatch(watcher)
            self._streams.discard(stream)
        return response

    async def _pump(
        self,
        request: web.Request,
        response: web.StreamResponse,
        stream: _WatchStream,
        watcher: Any,
        encode: _WatchEncoder,
        timeout: float,
        bookmarks: bool,
    ) -> None:
        """Write the watch's events as they come, with bookmarks, until the timeout,
        the end of the stream, or an abort (which drops the connection, as a crash would)."""
        loop = asyncio.get_running_loop()
        cut = request.get(_CUT_AFTER)
        deadline = loop.time() + (timeout if cut is None else min(timeout, cut))
        next_bookmark = loop.time() + self.bookmark_interval if bookmarks else math.inf
        while (now := loop.time()) < deadline:
            try:
                item = await asyncio.wait_for(
                    stream.queue.get(), min(deadline, next_bookmark) - now
                )
            except TimeoutError:
                if loop.time() >= next_bookmark:
                    self._store.bookmark(watcher)
                    next_bookmark = loop.time() + self.bookmark_interval
                continue
            batch, signal = _drain(stream, item)
            if batch:
                await response.write(encode(batch))
            if signal is _ABORT:
                if request.transport is not None:
                    request.transport.abort()
                return
            if signal is _END:
                return
        if cut is not None and cut < timeout and request.transport is not None:
            request.transport.abort()  # cut mid-stream, as a dropped connection is
