"""RBAC for the fake API server: who the request is, and whether a rule allows it.

Why: a rule about who may do what (a check's author may not touch the controller's
pins; a release approver may only accept) is only tested when a server refuses the
request a real one refuses. With :attr:`FakeApiServer.rbac` on, every request to a
resource URL that names a user is authorised as the API server's RBAC authorizer
does, against the Roles, ClusterRoles and bindings stored in the fake: a rule allows
a verb on a resource (``plural`` or ``plural/subresource``) of an API group, optionally
only on ``resourceNames``; a ClusterRoleBinding everywhere, a RoleBinding only in its
namespace. Denied: 403 Forbidden, with the message a real server writes.

Who: the ``Impersonate-User`` header (``Impersonate-Group``, repeated, adds groups),
which the official client sends when told (``ApiClient.set_default_header``). A
ServiceAccount is ``system:serviceaccount:NAMESPACE:NAME``. Not implemented: the
``impersonate`` verb itself (the header *is* the authentication here), aggregation
rules, non-resource URLs, wildcards other than ``*``. A request that names no user is
the fake's administrator (the harness's own client), allowed everything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Subject", "allowed", "forbidden_message", "subject_of"]

_SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Subject:
    """An authenticated user and its groups."""

    user: str
    groups: frozenset[str]

    def named_by(self, subject: Mapping[str, Any], binding_namespace: str | None) -> bool:
        """Whether a binding's ``subjects`` entry names this user."""
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User":
            return name == self.user
        if kind == "Group":
            return name in self.groups
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or binding_namespace
            return self.user == f"{_SA_PREFIX}{namespace}:{name}"
        return False


def subject_of(headers: Mapping[str, str], groups: Iterable[str]) -> Subject | None:
    """The user a request acts as (None: none named, the fake's administrator)."""
    user = headers.get("Impersonate-User")
    if not user:
        return None
    extra = {"system:authenticated"}
    if user.startswith(_SA_PREFIX):
        namespace = user[len(_SA_PREFIX) :].split(":", 1)[0]
        extra |= {"system:serviceaccounts", f"system:serviceaccounts:{namespace}"}
    return Subject(user=user, groups=frozenset(groups) | extra)


def _matches(values: Iterable[str], wanted: str) -> bool:
    listed = list(values)
    return "*" in listed or wanted in listed


def _rule_allows(
    rule: Mapping[str, Any], verb: str, group: str, resource: str, name: str | None
) -> bool:
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("apiGroups") or [], group)
        and _matches(rule.get("resources") or [], resource)
        and _matches(rule.get("verbs") or [], verb)
        and (not names or (name is not None and name in names))
    )


def allowed(
    subject: Subject,
    *,
    verb: str,
    group: str,
    resource: str,
    namespace: str | None,
    name: str | None,
    objects: Callable[[str, str | None], list[dict[str, Any]]],
) -> bool:
    """Whether any binding of ``subject`` grants ``verb`` on the resource.

    ``objects(kind, namespace)`` lists stored RBAC objects of a kind (every namespace
    when ``namespace`` is None).
    """
    roles: dict[tuple[object, object, object], dict[str, Any]] = {
        (kind, (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")): o
        for kind in ("Role", "ClusterRole")
        for o in objects(kind, None)
    }
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding in objects(kind, None):
            where = (binding.get("metadata") or {}).get("namespace")
            if kind == "RoleBinding" and where != namespace:
                continue  # a RoleBinding grants in its own namespace only
            if not any(subject.named_by(s, where) for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            role = roles.get(
                (ref.get("kind"), where if ref.get("kind") == "Role" else None, ref.get("name"))
            )
            for rule in (role or {}).get("rules") or []:
                if _rule_allows(rule, verb, group, resource, name):
                    return True
    return False


def forbidden_message(
    subject: Subject, verb: str, group: str, resource: str, namespace: str | None, name: str | None
) -> str:
    """What a real API server answers, e.g. ``configmaps "x" is forbidden: User "alice"
    cannot delete resource "configmaps" in API group "" in the namespace "ns"``."""
    plural, _, sub = resource.partition("/")
    what = f"{plural}{'.' + group if group else ''}"
    target = f'{what} "{name}"' if name else what
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    subresource = f' subresource "{sub}"' if sub else ""
    return (
        f'{target} is forbidden: User "{subject.user}" cannot {verb} resource "{plural}"'
        f'{subresource} in API group "{group}"{where}'
    )
