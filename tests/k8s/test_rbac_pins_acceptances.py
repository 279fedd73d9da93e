"""Who may do what to pins and acceptances, as the shipped RBAC grants it.

The fake API server enforces no RBAC, so the rules are evaluated here as the API
server's RBAC authorizer does (a rule allows a verb on a resource of a group; a Role
only in its namespace, a ClusterRole bound by a RoleBinding only in the binding's),
for three subjects: the controller's ServiceAccount (the install's bindings), a check's
author bound to ``artifactcheck-editor`` in ``shop``, and a release approver bound to
``artifactcheck-release-approver`` in ``shop`` (bindings an admin writes).

The attacks they answer: the check's author erasing the pins (deleting, editing or
re-creating the ConfigMap in the controller's namespace, or writing the status that
mirrors them) or accepting a changed release; the approver doing anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from artifactcheck.control.release_pins import store_name

K8S = Path(__file__).resolve().parents[2] / "k8s"
HOME = "artifactcheck-system"  # the controller's namespace: where the pins are kept
CONTROLLER = ("ServiceAccount", HOME, "artifactcheck")
AUTHOR = ("User", None, "alice")
APPROVER = ("User", None, "rita")
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def _docs(*names: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in names:
        out += [d for d in yaml.safe_load_all((K8S / name).read_text()) if isinstance(d, dict)]
    return out


def _binding(kind: str, role: str, subject: tuple[str, str | None, str], ns: str) -> dict[str, Any]:
    """A RoleBinding an admin writes: ``subject`` gets ClusterRole ``role`` in ``ns``."""
    s_kind, s_ns, s_name = subject
    return {
        "kind": kind,
        "metadata": {"name": f"{s_name}-{role}", "namespace": ns},
        "roleRef": {"kind": "ClusterRole", "name": role},
        "subjects": [{"kind": s_kind, "name": s_name, **({"namespace": s_ns} if s_ns else {})}],
    }


@dataclass(frozen=True)
class Authorizer:
    """RBAC as the API server evaluates it, over a set of documents."""

    docs: tuple[dict[str, Any], ...]

    def _rules(self, subject: tuple[str, str | None, str], namespace: str) -> list[dict[str, Any]]:
        roles = {
            (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
            for d in self.docs
            if d.get("kind") in ("Role", "ClusterRole")
        }
        rules: list[dict[str, Any]] = []
        for b in self.docs:
            if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            subjects = {(s["kind"], s.get("namespace"), s["name"]) for s in b["subjects"]}
            if subject not in subjects:
                continue
            if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] != namespace:
                continue
            ref = b["roleRef"]
            where = b["metadata"].get("namespace") if ref["kind"] == "Role" else None
            role = roles.get((ref["kind"], where, ref["name"]))
            rules += (role or {}).get("rules") or []
        return rules

    def allows(
        self,
        subject: tuple[str, str | None, str],
        verb: str,
        group: str,
        resource: str,
        namespace: str,
        name: str | None = None,
    ) -> bool:
        for rule in self._rules(subject, namespace):
            if (
                group in rule.get("apiGroups", [])
                and resource in rule.get("resources", [])
                and verb in rule.get("verbs", [])
                and (not rule.get("resourceNames") or name in rule["resourceNames"])
            ):
                return True
        return False


@pytest.fixture(scope="module", params=["cluster", "namespaced"])
def rbac(request: pytest.FixtureRequest) -> Authorizer:
    """The install's RBAC (cluster-wide, or the namespaced variant) and the admin's
    bindings of a check's author and a release approver in ``shop``."""
    own = "rbac.yaml" if request.param == "cluster" else "namespaced/rbac.yaml"
    docs = _docs(own, "rbac-roles.yaml")
    docs += [
        _binding("RoleBinding", "artifactcheck-editor", AUTHOR, "shop"),
        _binding("RoleBinding", "artifactcheck-release-approver", APPROVER, "shop"),
    ]
    return Authorizer(tuple(docs))


STORE = store_name("shop", "web")


@pytest.mark.parametrize("verb", WRITES)
@pytest.mark.parametrize("namespace", [HOME, "shop"])
def test_a_check_s_author_cannot_touch_the_pins(
    rbac: Authorizer, verb: str, namespace: str
) -> None:
    """Not the store (in the controller's namespace, nor a ConfigMap anywhere), not the
    status that mirrors it, and no acceptance."""
    assert rbac.allows(AUTHOR, "create", "artifactcheck.io", "artifactchecks", "shop")
    assert rbac.allows(AUTHOR, "delete", "artifactcheck.io", "artifactchecks", "shop")
    assert not rbac.allows(AUTHOR, verb, "", "configmaps", namespace, STORE)
    assert not rbac.allows(AUTHOR, verb, "artifactcheck.io", "artifactchecks/status", namespace)
    assert not rbac.allows(AUTHOR, verb, "artifactcheck.io", "releaseacceptances", namespace)


def test_a_release_approver_can_only_accept(rbac: Authorizer) -> None:
    """Create (and read, and clear away) ReleaseAcceptances in its namespace: nothing
    else, not even their status, which says what the controller made of them."""
    assert rbac.allows(APPROVER, "create", "artifactcheck.io", "releaseacceptances", "shop")
    assert not rbac.allows(APPROVER, "create", "artifactcheck.io", "releaseacceptances", "web2")
    for verb in WRITES:
        assert not rbac.allows(APPROVER, verb, "artifactcheck.io", "artifactchecks", "shop")
        assert not rbac.allows(
            APPROVER, verb, "artifactcheck.io", "releaseacceptances/status", "shop"
        )
        assert not rbac.allows(APPROVER, verb, "", "configmaps", HOME, STORE)
    for verb in ("update", "patch"):  # an acceptance acted on is not rewritten
        assert not rbac.allows(APPROVER, verb, "artifactcheck.io", "releaseacceptances", "shop")
    rules = [
        r
        for d in _docs("rbac-roles.yaml")
        for r in d["rules"]
        if d["metadata"]["name"] == "artifactcheck-release-approver"
    ]
    assert {res for r in rules for res in r["resources"]} == {"releaseacceptances"}


def test_the_controller_writes_pins_only_at_home_and_never_erases(rbac: Authorizer) -> None:
    """The store is written in the controller's namespace only (a Role there, not the
    ClusterRole); erasing it is not the controller's to do."""
    for verb in ("list", "watch", "create", "update"):
        assert rbac.allows(CONTROLLER, verb, "", "configmaps", HOME, STORE)
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        assert not rbac.allows(CONTROLLER, verb, "", "configmaps", "shop"), verb
    assert not rbac.allows(CONTROLLER, "delete", "", "configmaps", HOME, STORE)
    assert rbac.allows(CONTROLLER, "watch", "artifactcheck.io", "releaseacceptances", "shop")
    assert rbac.allows(CONTROLLER, "patch", "artifactcheck.io", "releaseacceptances/status", "shop")
    for verb in ("create", "update", "patch", "delete"):
        assert not rbac.allows(CONTROLLER, verb, "artifactcheck.io", "releaseacceptances", "shop")


def test_the_authorizer_is_not_vacuous() -> None:
    """Bound to the controller's Role, the author could write the store: the checks
    above fail when the RBAC grants what they forbid."""
    docs = [*_docs("rbac.yaml", "rbac-roles.yaml")]
    docs.append(
        {
            "kind": "RoleBinding",
            "metadata": {"name": "oops", "namespace": HOME},
            "roleRef": {"kind": "Role", "name": "artifactcheck-leader-election"},
            "subjects": [{"kind": "User", "name": "alice"}],
        }
    )
    assert Authorizer(tuple(docs)).allows(AUTHOR, "update", "", "configmaps", HOME, STORE)
