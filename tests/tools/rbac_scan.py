"""Does the RBAC in ``k8s/`` grant exactly what the package's Kubernetes calls need?

A forgotten permission is a 403 in production; a grant nobody uses is power a stolen
token carries for free. Both are found here, offline: the package is scanned (``ast``)
for calls of the official ``kubernetes`` client, each method name is mapped to the
(API group, resource, verb) it needs, and those needs are matched against the Roles and
ClusterRoles bound to the controller's ServiceAccount. Every message names the call or
the rule and says what to change.

The asynchronous client (``artifactcheck.clients.kube_http``) is read too: each of its
requests names its path by a resource of ``artifactcheck.clients.kube_routes``
(``PODS.path(namespace, name, "status")`` in ``kube.patch(...)``); the request's method
gives the verb, the resource its group and plural, ``path``/``cluster_path`` the scope.

Why a tool module and not a test: the scanner is a program of its own, with its own
unit tests (tests/tools/test_rbac_scan.py); tests/k8s/test_manifests.py runs it on the
shipped files. Run it by hand with ``python tests/tools/rbac_scan.py`` (exit status 1
and the messages when the RBAC and the code disagree).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from artifactcheck.clients import kube_routes
from artifactcheck.model.names import CRD_GROUP, CRD_PLURAL

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "artifactcheck"
#: The files whose grants the shipped controller may hold (the cordon one is opt-in).
SHIPPED_RBAC = (REPO / "k8s" / "rbac.yaml", REPO / "k8s" / "rbac-node-cordon.yaml")
#: (namespace, name) of the ServiceAccount the controller runs as.
SERVICE_ACCOUNT = ("artifactcheck-system", "artifactcheck")

#: Verb prefixes of the official client's methods and the RBAC verb each needs.
_VERB_PREFIXES = (
    ("delete_collection_", "deletecollection"),
    ("list_", "list"),
    ("read_", "get"),
    ("get_", "get"),
    ("create_", "create"),
    ("patch_", "patch"),
    ("replace_", "update"),
    ("delete_", "delete"),
)
#: Subresource suffixes, and the resources they belong to (None: any resource). A
#: suffix like ``_binding`` is also the tail of ordinary names (validating admission
#: policy bindings), hence the owners.
_SUBRESOURCES: dict[str, frozenset[str] | None] = {
    "status": None,
    "scale": None,
    "log": frozenset({"pod"}),
    "eviction": frozenset({"pod"}),
    "binding": frozenset({"pod"}),
    "ephemeralcontainers": frozenset({"pod"}),
    "resize": frozenset({"pod"}),
    "token": frozenset({"service_account"}),
    "approval": frozenset({"certificate_signing_request"}),
    "finalize": frozenset({"namespace"}),
}
_IRREGULAR_PLURALS = {"endpoints": "endpoints", "component_status": "componentstatuses"}
#: Discovery endpoints every authenticated client may call (system:discovery).
DISCOVERY = re.compile(r"^get_(api_group|api_resources|api_versions|code)$")
#: Ways of reaching the API that the scanner cannot map to RBAC rules.
_UNVERIFIABLE = {
    "call_api",
    "param_serialize",
    "DynamicClient",
    "create_from_yaml",
    "create_from_dict",
    "create_from_directory",
}


@dataclass(frozen=True)
class Endpoint:
    """What one client method touches, as RBAC sees it."""

    verb: str
    resource: str  # plural, with "/subresource" when there is one
    namespaced: bool
    custom: bool  # CustomObjectsApi: group and plural come from the arguments


def _plural(snake: str) -> str:
    if snake in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[snake]
    word = snake.replace("_", "")
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def parse_method(name: str) -> Endpoint | None:
    """Map a client method name to its RBAC endpoint, or None if it is not one.

    ``patch_namespaced_pod_status`` -> patch pods/status, namespaced;
    ``list_pod_for_all_namespaces`` -> list pods, cluster-wide;
    ``list_namespaced_custom_object`` -> list of a custom resource named by the call.
    """
    found = [(p, v) for p, v in _VERB_PREFIXES if name.startswith(p)]
    if not found:
        return None
    prefix, verb = found[0]
    rest = name[len(prefix) :]
    namespaced = False
    if rest.endswith("_for_all_namespaces"):
        rest = rest[: -len("_for_all_namespaces")]
    elif rest.startswith("namespaced_"):
        rest, namespaced = rest[len("namespaced_") :], True
    elif rest.startswith("cluster_custom_object"):
        rest = rest[len("cluster_") :]
    sub = ""
    if rest not in _IRREGULAR_PLURALS:
        for suffix, owners in _SUBRESOURCES.items():
            base = rest[: -len(suffix) - 1]
            if rest.endswith("_" + suffix) and (owners is None or base in owners):
                rest, sub = base, suffix
                break
    custom = rest == "custom_object"
    resource = "" if custom else _plural(rest)
    return Endpoint(verb, f"{resource}/{sub}" if sub else resource, namespaced, custom)


@cache
def _client_sources() -> dict[str, str]:
    """Source of every API class of the installed client, by class name.

    Read as text rather than imported: importing all API classes drags in ~900 models
    and costs seconds; the method names and request paths are plain in the source.
    """
    spec = importlib.util.find_spec("kubernetes.client")
    assert spec and spec.submodule_search_locations, "the kubernetes client is not installed"
    api_dir = Path(next(iter(spec.submodule_search_locations))) / "api"
    sources = {}
    for path in sorted(api_dir.glob("*_api.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^class (\w+Api)\b", text, re.M):
            sources[match.group(1)] = text
    assert sources, f"no API classes found in {api_dir}"
    return sources


@cache
def client_methods() -> dict[str, tuple[str, ...]]:
    """Every HTTP-calling method of the installed client, with the classes defining it."""
    methods: dict[str, list[str]] = {}
    for cname, source in _client_sources().items():
        for name in re.findall(r"^    def ([a-z]\w*)\(", source, re.M):
            if name.endswith(("_with_http_info", "_preload_content")):
                continue
            if any(name.startswith(p) for p, _ in _VERB_PREFIXES) or name.startswith("connect_"):
                methods.setdefault(name, []).append(cname)
    return {name: tuple(sorted(set(classes))) for name, classes in methods.items()}


def _class_source(cname: str) -> str:
    return _client_sources()[cname]


@cache
def _class_group(cname: str) -> str | None:
    """API group of a client class, read from the paths it requests ("" is core)."""
    source = _class_source(cname)
    match = re.search(r"""['"]/apis/([a-z0-9.-]+)/v\w+/""", source)
    if match and "{group}" not in match.group(0):
        return match.group(1)
    if re.search(r"""['"]/api/v1/""", source):
        return ""
    return None


@cache
def client_paths(cname: str) -> dict[str, tuple[str, str]]:
    """HTTP method and path template the client requests, per method of one class."""
    paths: dict[str, tuple[str, str]] = {}
    for chunk in _class_source(cname).split("\n    def ")[1:]:
        name = chunk[: chunk.find("(")]
        if name.startswith("_") and name.endswith("_serialize"):
            new = re.search(r"method='(\w+)',\s*resource_path='([^']+)'", chunk)
            if new:
                paths[name[1 : -len("_serialize")]] = (new.group(1), new.group(2))
        elif name.endswith("_with_http_info"):
            # Clients generated before v34 call call_api(path, method) right here.
            old = re.search(r"call_api\(\s*'([^']+)',\s*'(\w+)'", chunk)
            if old:
                paths.setdefault(name[: -len("_with_http_info")], (old.group(2), old.group(1)))
    return paths


def endpoint_from_path(http_method: str, path: str) -> tuple[str, str]:
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest[:2] == ["namespaces", "{namespace}"]:
        rest = rest[2:]
    named = len(rest) > 1 and rest[1] == "{name}"
    resource = "/".join([rest[0], *rest[2:3]])
    verb = {
        "GET": "get" if named else "list",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if named else "deletecollection",
    }[http_method]
    return verb, resource


@dataclass(frozen=True)
class Need:
    """One permission the code needs, and where it was found."""

    where: str
    method: str
    groups: tuple[str, ...]
    resource: str
    verb: str
    namespaced: bool

    def rule(self, group: str) -> str:
        return (
            f'- apiGroups: ["{group}"]\n  resources: ["{self.resource}"]\n  verbs: ["{self.verb}"]'
        )


def _module_constants(trees: list[ast.Module]) -> dict[str, set[str]]:
    """Module-level ``NAME = "text"`` constants, to resolve custom-object arguments."""
    table: dict[str, set[str]] = {
        "GROUP": {CRD_GROUP},
        "PLURAL": {CRD_PLURAL},
    }
    for tree in trees:
        for stmt in tree.body:
            targets: list[ast.expr] = []
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            if not targets or not isinstance(value, ast.Constant):
                continue
            if isinstance(value.value, str):
                for target in targets:
                    if isinstance(target, ast.Name):
                        table.setdefault(target.id, set()).add(value.value)
    return table


def _string_arg(
    call: ast.Call | None, keyword: str, position: int, constants: Mapping[str, set[str]]
) -> str | None:
    if call is None:
        return None
    node: ast.expr | None = None
    for kw in call.keywords:
        if kw.arg == keyword:
            node = kw.value
    if node is None and len(call.args) > position:
        node = call.args[position]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    values = constants.get(name or "", set())
    return next(iter(values)) if len(values) == 1 else None


def _custom_target(
    method: str, call: ast.Call | None, constants: Mapping[str, set[str]]
) -> tuple[str, str]:
    """(group, plural) of a CustomObjectsApi call; artifactchecks when not spelt out."""
    namespaced = "namespaced_" in method
    plural_kw = "resource_plural" if method.endswith("_for_all_namespaces") else "plural"
    group = _string_arg(call, "group", 0, constants) or CRD_GROUP
    plural = _string_arg(call, plural_kw, 3 if namespaced else 2, constants) or CRD_PLURAL
    return group, plural


def _last_name(node: ast.AST | None) -> str | None:
    """``core`` of ``core``, ``self._core`` or ``k8s.CoreV1Api``: the name that is bound."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.rsplit(".", 1)[-1]  # a string annotation
    return None


def _receivers(tree: ast.Module) -> dict[str, set[str]]:
    """Which client classes each name is bound to in a module.

    ``self._core = k8s.CoreV1Api(api)`` or ``core: client.CoreV1Api`` binds ``_core`` or
    ``core``; a call ``self._core.read_namespaced_event`` then needs the core group only,
    not also events.k8s.io, whose EventsV1Api has a method of the same name.
    """
    classes = _client_sources()
    bound: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        pairs: list[tuple[ast.AST | None, ast.AST | None]] = []
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            pairs = [(t, node.value.func) for t in node.targets]
        elif isinstance(node, ast.AnnAssign):
            pairs = [(node.target, node.annotation)]
            if isinstance(node.value, ast.Call):
                pairs.append((node.target, node.value.func))
        elif isinstance(node, ast.arg):
            pairs = [(node, node.annotation)]
        for target, source in pairs:
            name = target.arg if isinstance(target, ast.arg) else _last_name(target)
            cls = _last_name(source)
            if name and cls in classes:
                bound.setdefault(name, set()).add(cls)
    return bound


def _is_raw_options(node: ast.expr) -> bool:
    """``raw(timeout)`` (artifactcheck.clients.kube.raw): the transport options every
    request passes, which never include ``watch`` (test_raw_options_never_watch)."""
    return isinstance(node, ast.Call) and _last_name(node.func) == "raw"


def _list_verbs(call: ast.Call | None) -> list[str]:
    """A direct call lists, ``watch=True`` watches; a passed-on method (to
    ``watch.Watch().stream``), ``watch=<expr>`` or ``**kwargs`` may do both
    (``**raw(...)`` excepted: it never sets ``watch``)."""
    if call is None:
        return ["list", "watch"]
    for kw in call.keywords:
        if kw.arg is None and _is_raw_options(kw.value):
            continue
        if kw.arg is None:
            return ["list", "watch"]
        if kw.arg == "watch":
            if not isinstance(kw.value, ast.Constant):
                return ["list", "watch"]
            return ["watch"] if kw.value.value is True else ["list"]
    return ["list"]


def _scan_tree(
    tree: ast.Module, where: str, constants: Mapping[str, set[str]]
) -> tuple[list[Need], list[str]]:
    """Permissions needed by one module, and problems the scanner cannot map."""
    methods = client_methods()
    receivers = _receivers(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    needs: list[Need] = []
    problems: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        else:
            continue
        line = f"{where}:{getattr(node, 'lineno', '?')}"
        if name in _UNVERIFIABLE and not isinstance(node, ast.Constant):
            problems.append(f"{line}: {name} reaches the API in a way RBAC cannot be checked")
            continue
        if name not in methods or DISCOVERY.match(name):
            continue
        endpoint = parse_method(name)
        if endpoint is None:
            problems.append(f"{line}: {name}() cannot be mapped to an RBAC rule")
            continue
        parent = parents.get(node)
        call = parent if isinstance(parent, ast.Call) and parent.func is node else None
        verbs = _list_verbs(call) if endpoint.verb == "list" else [endpoint.verb]
        resource = endpoint.resource
        if endpoint.custom:
            group, plural = _custom_target(name, call, constants)
            groups: tuple[str, ...] = (group,)
            resource = plural + resource
        else:
            receiver = _last_name(node.value) if isinstance(node, ast.Attribute) else None
            known = receivers.get(receiver or "", set()) & set(methods[name])
            found = {_class_group(c) for c in known or methods[name]}
            groups = tuple(sorted(g for g in found if g is not None))
            if not groups:
                problems.append(f"{line}: {name}(): no API group found in the client")
                continue
        for verb in verbs:
            needs.append(Need(line, name, groups, resource, verb, endpoint.namespaced))
    return needs, problems


#: The asynchronous client's request methods and the RBAC verb each needs.
_HTTP_VERBS = {
    "get": "get",
    "list": "list",
    "watch": "watch",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
}
#: The route builders of :class:`artifactcheck.clients.kube_routes.Resource`.
_ROUTE_SCOPES = {"path": True, "cluster_path": False}


def _resource_of(node: ast.expr) -> kube_routes.Resource | None:
    """The :mod:`kube_routes` resource a name (``PODS``, ``routes.PODS``) stands for."""
    name = _last_name(node)
    found = getattr(kube_routes, name, None) if name and name.isupper() else None
    return found if isinstance(found, kube_routes.Resource) else None


def _subresource(route: ast.Call) -> str | None:
    """The ``sub`` of a route call ("" when none); None when it is not spelt out."""
    position = 2 if _last_name(route.func) == "path" else 1
    node: ast.expr | None = route.args[position] if len(route.args) > position else None
    for kw in route.keywords:
        if kw.arg == "sub":
            node = kw.value
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _scan_routes(tree: ast.Module, where: str) -> tuple[list[Need], list[str]]:
    """Permissions needed by the asynchronous client's requests in one module: every
    ``RESOURCE.path(...)``/``RESOURCE.cluster_path(...)`` must be an argument of a
    request (``kube.patch(what, PODS.path(...), ...)``), whose method is the verb."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    needs: list[Need] = []
    problems: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        scope = node.func.attr
        resource = _resource_of(node.func.value)
        if scope not in _ROUTE_SCOPES or resource is None:
            continue
        line = f"{where}:{node.lineno}"
        request: ast.AST | None = parents.get(node)
        while request is not None and not (
            isinstance(request, ast.Call)
            and isinstance(request.func, ast.Attribute)
            and request.func.attr in _HTTP_VERBS
        ):
            request = parents.get(request)
        sub = _subresource(node)
        if request is None or sub is None:
            problems.append(
                f"{line}: {resource.plural} {scope}() is not an argument of a request "
                "(kube.get/list/watch/create/replace/patch) with a literal subresource: "
                "the RBAC it needs cannot be read"
            )
            continue
        assert isinstance(request, ast.Call) and isinstance(request.func, ast.Attribute)
        method = request.func.attr
        plural = f"{resource.plural}/{sub}" if sub else resource.plural
        needs.append(
            Need(
                line,
                f"{method} {resource.plural}",
                (resource.group,),
                plural,
                _HTTP_VERBS[method],
                _ROUTE_SCOPES[scope],
            )
        )
    return needs, problems


_FOLLOWED_KUBERNETES_SKIP = ("kubernetes.client", "kubernetes.config", "kubernetes.watch")


def _kubernetes_helpers(tree: ast.Module) -> set[Path]:
    """Helper modules of the kubernetes package our code imports (e.g. leader election).

    ``kubernetes.leaderelection.resourcelock.leaselock`` calls the client itself; its
    calls are made with our ServiceAccount, so they are scanned as if they were ours.
    """
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                modules.add(f"{node.module}.{alias.name}")
                modules.add(node.module)
    files: set[Path] = set()
    for module in modules:
        root = module.replace(".aio.", ".")
        if not root.startswith("kubernetes.") or root.startswith(_FOLLOWED_KUBERNETES_SKIP):
            continue
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec and spec.origin and spec.origin.endswith(".py"):
            files.add(Path(spec.origin))
    return {f for f in files if not f.name.endswith("_test.py")}


def package_files(package: Path = PACKAGE) -> list[Path]:
    """The package's modules, minus ``sim/``.

    ``sim/artifactcheck_sim`` is the fake API server and the fleet the demo and tests set up
    through the client against it; it never runs with the controller's ServiceAccount.
    """
    return [p for p in sorted(package.rglob("*.py")) if "sim" not in p.relative_to(package).parts]


def scan_for_needs(files: list[Path], *, root: Path) -> tuple[list[Need], list[str]]:
    """Every Kubernetes permission the given modules (and the helpers they use) need."""
    trees: list[tuple[str, ast.Module]] = []
    problems: list[str] = []
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:  # someone is mid-edit: say so, do not pass silently
            problems.append(f"{path}: cannot be parsed: {exc}")
            continue
        trees.append((str(path.relative_to(root)), tree))
    helpers: set[Path] = set()
    for _, tree in trees:
        helpers |= _kubernetes_helpers(tree)
    for path in sorted(helpers):
        trees.append((f"{path.name} (kubernetes helper)", ast.parse(path.read_text("utf-8"))))
    constants = _module_constants([t for _, t in trees])
    needs: list[Need] = []
    for where, tree in trees:
        found, issues = _scan_tree(tree, where, constants)
        routed, unmapped = _scan_routes(tree, where)
        needs += found + routed
        problems += issues + unmapped
    return needs, problems


@dataclass(frozen=True)
class Grant:
    """Rules of a role, and whether the binding makes them cluster-wide."""

    source: str
    cluster_wide: bool
    rules: tuple[dict[str, Any], ...]


def _meta(body: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = body.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def grants_in(paths: list[Path] | tuple[Path, ...]) -> list[Grant]:
    """The rules bound to :data:`SERVICE_ACCOUNT` by the RBAC documents of ``paths``.

    A role no binding of ours names, or a binding of another subject, grants us nothing.
    """
    docs = [
        (f"{path.name}#{i} {body.get('kind')}/{_meta(body).get('name')}", body)
        for path in paths
        for i, body in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        if isinstance(body, dict)
    ]
    roles = {
        (body.get("kind"), _meta(body).get("namespace"), _meta(body).get("name")): (label, body)
        for label, body in docs
    }
    grants = []
    for _, binding in docs:
        if binding.get("kind") not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        subjects = {(s.get("namespace"), s["name"]) for s in binding.get("subjects", [])}
        if SERVICE_ACCOUNT not in subjects:
            continue
        ref = binding["roleRef"]
        namespace = _meta(binding).get("namespace")
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"]))
        if role is None:
            continue
        cluster_wide = binding["kind"] == "ClusterRoleBinding"
        grants.append(Grant(role[0], cluster_wide, tuple(role[1].get("rules") or [])))
    return grants


def _is_allowed(need: Need, group: str, grants: list[Grant]) -> bool:
    for grant in grants:
        if not (grant.cluster_wide or need.namespaced):
            continue  # a Role cannot grant cluster-scoped or all-namespaces access
        for rule in grant.rules:
            if (
                group in rule.get("apiGroups", [])
                and need.resource in rule.get("resources", [])
                and need.verb in rule.get("verbs", [])
                and (not rule.get("resourceNames") or need.verb in ("get", "update", "patch"))
            ):
                return True
    return False


def missing(needs: list[Need], grants: list[Grant]) -> list[str]:
    """One message per permission the code needs and the RBAC files do not grant."""
    failures = []
    for need in needs:
        if need.verb in ("delete", "deletecollection"):
            failures.append(f"{need.where}: {need.method}() deletes; artifactcheck never does")
            continue
        for group in need.groups:
            if _is_allowed(need, group, grants):
                continue
            label = f"'{group}'" if group else "'' (core)"
            scope = (
                "in a namespace (a Role or a ClusterRole)"
                if need.namespaced
                else "cluster-wide (a ClusterRole bound by a ClusterRoleBinding)"
            )
            notes = []
            if len(need.groups) > 1:
                notes.append(
                    f"the receiver's client class is unknown and {need.method} exists for "
                    f"groups {list(need.groups)}: each must be allowed, or bind the receiver "
                    "to one API class (x = client.CoreV1Api(...)) so the scanner sees which"
                )
            if need.resource.split("/")[0] == "nodes":
                notes.append("node rights belong in k8s/rbac-node-cordon.yaml only")
            failures.append(
                f"{need.where}: {need.method}() needs '{need.verb}' on '{need.resource}' in "
                f"API group {label} {scope}; no rule in k8s/rbac.yaml or "
                f"k8s/rbac-node-cordon.yaml allows it."
                + "".join(f"\n  note: {n}" for n in notes)
                + f"\nMissing rule:\n{need.rule(group)}"
            )
    return failures


def unused(needs: list[Need], grants: list[Grant]) -> list[str]:
    """One message per (group, resource, verb) a rule grants and no client call needs.

    A grant nobody uses is power an attacker who steals the token gets for free, and a
    reviewer reading the role believes something uses it; so it fails like a missing one.
    A call whose client class the scanner could not pin down counts for each group it may
    be in (the missing-grant check already asks for all of them).
    """
    failures = []
    for grant in grants:
        for rule in grant.rules:
            for group in rule.get("apiGroups", []):
                for resource in rule.get("resources", []):
                    for verb in rule.get("verbs", []):
                        used = [
                            n
                            for n in needs
                            if group in n.groups
                            and n.resource == resource
                            and n.verb == verb
                            and (grant.cluster_wide or n.namespaced)
                        ]
                        if used:
                            continue
                        label = f"'{group}'" if group else "'' (core)"
                        failures.append(
                            f"{grant.source} grants '{verb}' on '{resource}' in API group "
                            f"{label}, and no Kubernetes client call in the package needs it: "
                            "remove the verb (or the rule), or add the code that uses it."
                        )
    return failures


def check(
    files: list[Path] | None = None,
    rbac: list[Path] | tuple[Path, ...] = SHIPPED_RBAC,
    *,
    root: Path = REPO,
) -> list[str]:
    """Every disagreement between the code in ``files`` and the grants in ``rbac``.

    What the scanner cannot map, what the code needs and no rule grants, and what a rule
    grants and no call needs; empty when the two agree.
    """
    needs, problems = scan_for_needs(package_files() if files is None else files, root=root)
    grants = grants_in(rbac)
    return problems + missing(needs, grants) + unused(needs, grants)


def main() -> int:
    """Check the package against the shipped RBAC; print each disagreement."""
    failures = check()
    print("\n\n".join(failures) or "rbac_scan: the RBAC grants what the code needs, no more")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
