"""Pins as the controller keeps them: the rules of the pins file, in a ConfigMap and
the status.

The document is the file's (release/pins.py); what is the controller's own: it
round-trips through ``status.releasePins`` and the pins ConfigMap's data, it is bounded
by ``cacheVersions`` (oldest unchanged pins dropped first, a changed one kept), the
store's name is the check's, a ReleaseAcceptance's grammar, and the CRDs refuse a
status that is not pins and an acceptance that names no digest (the fake API server
validates as a real one does).
"""

from __future__ import annotations

import hashlib
import itertools

import pytest

from artifactcheck.control.accepting import acceptance_by, requested
from artifactcheck.control.crd import acceptance_crd_manifest, crd_manifest
from artifactcheck.control.release_pins import StatusPins, store_name
from artifactcheck.model.names import ACCEPTANCE_KIND, CRD_API_VERSION, CRD_KIND
from artifactcheck.release.pins import PinsError
from artifactcheck_sim.apiserver import FakeApiServer

_ticks = itertools.count()


def clock() -> str:
    return f"2026-12-02T00:00:{next(_ticks) % 60:02d}Z"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_status_round_trip_keeps_pins_changes_and_acceptances() -> None:
    pins = StatusPins(max_versions=8, clock=clock)
    assert pins.observe("1.0", digest("a"), "cm/a", b"a").new
    seen = pins.observe("1.0", digest("b"), "cm/a", b"b")
    assert seen.changed and seen.pins.pinned.sha256 == digest("a")
    again = StatusPins.from_status(pins.to_status(), max_versions=8)
    assert set(again.changed()) == {"1.0"}
    assert again.release_bytes(digest("a")) is None, "no bytes in a status: inconclusive"
    by = acceptance_by("shop", "rebuild")
    record = again.accept("1.0", digest("b"), by=by)
    assert record.sha256 == digest("b") and not again.changed()
    status = StatusPins.from_status(again.to_status(), max_versions=8).to_status()
    assert status["releasePins"][0]["pinned"]["sha256"] == digest("b")
    assert status["acceptedReleases"][0]["by"] == "ReleaseAcceptance shop/rebuild"
    assert again.accepted_by(by) == record and again.accepted_by("other") is None
    # the store's form: the same document, read back
    stored = StatusPins.from_data(again.to_data(), max_versions=8)
    assert stored is not None and stored.to_status() == again.to_status()
    assert StatusPins.from_data({"pins.json": "not json"}, max_versions=8) is None
    assert StatusPins.from_data({}, max_versions=8) is None


def test_an_acceptance_without_a_digest_stays_ambiguous_after_a_restart() -> None:
    """Two changes seen (B, then C): read back from the status or the store, the pins
    still hold both, so an acceptance without a digest adopts neither."""
    pins = StatusPins(max_versions=8, clock=clock)
    pins.observe("1.0", digest("a"), "cm/a", b"a")
    pins.observe("1.0", digest("b"), "cm/a", b"b")
    pins.observe("1.0", digest("c"), "cm/a", b"c")
    for again in (
        StatusPins.from_status(pins.to_status(), max_versions=8),
        StatusPins.from_data(pins.to_data(), max_versions=8),
    ):
        assert again is not None
        with pytest.raises(PinsError) as refused:
            again.accept("1.0", None)
        assert digest("b") in str(refused.value) and digest("c") in str(refused.value)
        assert again.accept("1.0", digest("b")).sha256 == digest("b")


def test_the_store_is_named_after_the_check() -> None:
    """Deterministic (a re-created check finds it), one per check, a valid name."""
    assert store_name("shop", "web") == "artifactcheck-pins.shop.web"
    assert store_name("shop", "web") != store_name("shop", "web2")
    assert store_name("sho", "p.web") != store_name("shop", ".web")
    long = store_name("shop", "a" * 253)
    assert len(long) <= 253 and long == store_name("shop", "a" * 253)


def test_a_merge_after_a_conflict_loses_no_pin_and_erase_forgets_all() -> None:
    ours, theirs = StatusPins(clock=clock), StatusPins(clock=clock)
    ours.observe("1.0", digest("a"), "s", b"a")
    theirs.observe("1.0", digest("other"), "s", b"other")
    theirs.observe("2.0", digest("b"), "s", b"b")
    ours.merge_missing(theirs)
    got = {p["version"]: p["pinned"]["sha256"] for p in ours.to_status()["releasePins"]}
    assert got == {"1.0": digest("a"), "2.0": digest("b")}
    assert ours.erase() == ["1.0", "2.0"] and ours.empty()


def test_bounded_by_cache_versions_oldest_unchanged_first() -> None:
    pins = StatusPins(max_versions=3, clock=clock)
    for v in ("1", "2", "3"):
        pins.observe(v, digest(v), "src", v.encode())
    pins.observe("1", digest("rebuilt"), "src", b"rebuilt")  # 1 changed: kept
    pins.observe("4", digest("4"), "src", b"4")
    assert [p["version"] for p in pins.to_status()["releasePins"]] == ["1", "3", "4"]
    # a status longer than the bound (cacheVersions lowered) is cut when read
    cut = StatusPins.from_status(pins.to_status(), max_versions=2)
    assert [p["version"] for p in cut.to_status()["releasePins"]] == ["1", "4"]


def test_a_release_acceptance_names_a_version_and_a_digest() -> None:
    d = digest("x")
    assert requested({"spec": {"check": "web", "version": "1.4.2", "sha256": d}}) == ("1.4.2", d)
    assert requested({"spec": {"check": "web", "version": " 1.4.2 "}}) == ("1.4.2", None)
    for bad in (
        {"version": ""},
        {"sha256": d},
        {"version": "1.4.2", "sha256": d.upper()},
        {"version": "1.4.2", "sha256": d[:40]},
        {"version": "v" * 129},
    ):
        with pytest.raises(ValueError, match="spec"):
            requested({"spec": {"check": "web", **bad}})
    with pytest.raises(PinsError, match="no changed release"):
        StatusPins().accept("9.9", None)


def test_the_crd_refuses_a_status_whose_pins_are_not_digests() -> None:
    server = FakeApiServer(host="127.0.0.1", port=0, namespaces=("shop",)).start()
    try:
        server.create(crd_manifest())
        server.create(
            {
                "apiVersion": CRD_API_VERSION,
                "kind": CRD_KIND,
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"kubernetes": {"selector": "app=web"}},
            }
        )
        good = StatusPins(clock=clock)
        good.observe("1.0", digest("a"), "cm/a", b"a")
        written = server.patch_status(
            CRD_API_VERSION, CRD_KIND, "shop", "web", {"status": good.to_status()}
        )
        assert written["status"]["releasePins"][0]["pinned"]["sha256"] == digest("a")
        good.observe("1.0", digest("b"), "cm/a", b"b")
        good.observe("1.0", digest("c"), "cm/a", b"c")
        written = server.patch_status(
            CRD_API_VERSION, CRD_KIND, "shop", "web", {"status": good.to_status()}
        )
        kept = written["status"]["releasePins"][0]
        assert [e["sha256"] for e in kept["earlier"]] == [digest("b")], "earlier is in the schema"
        bad = good.to_status()
        bad["releasePins"][0]["pinned"]["sha256"] = "not-a-digest"
        with pytest.raises(Exception, match="sha256"):
            server.patch_status(CRD_API_VERSION, CRD_KIND, "shop", "web", {"status": bad})
    finally:
        server.stop()


def test_the_acceptance_crd_refuses_what_is_not_an_acceptance() -> None:
    server = FakeApiServer(host="127.0.0.1", port=0, namespaces=("shop",)).start()
    try:
        server.create(acceptance_crd_manifest())

        def acceptance(name: str, **spec: object) -> dict[str, object]:
            return {
                "apiVersion": CRD_API_VERSION,
                "kind": ACCEPTANCE_KIND,
                "metadata": {"name": name, "namespace": "shop"},
                "spec": spec,
            }

        made = server.create(acceptance("ok", check="web", version="1.4.2", sha256=digest("a")))
        assert made["spec"]["sha256"] == digest("a")
        with pytest.raises(Exception, match="sha256"):
            server.create(acceptance("bad", check="web", version="1.4.2", sha256="abc"))
        with pytest.raises(Exception, match="check"):
            server.create(acceptance("no-check", version="1.4.2"))
    finally:
        server.stop()


def test_the_refusal_of_an_annotation_names_its_field_manager() -> None:
    """Kubernetes records who wrote each field (managedFields); kubectl annotate's is
    ``kubectl-annotate``, but any client chooses its own: the refusal names it, nothing
    trusts it. Another field's manager is not it."""
    from artifactcheck.control.controller import _annotated_by

    def entry(manager: str, annotation: str) -> dict[str, object]:
        return {
            "manager": manager,
            "operation": "Update",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{annotation}": {}}}},
        }

    other = entry("argocd-controller", "argocd.argoproj.io/tracking-id")
    ours = entry("kubectl-annotate", "artifactcheck.io/accept-release")
    assert _annotated_by({"metadata": {"managedFields": [other, ours]}}) == "kubectl-annotate"
    assert _annotated_by({"metadata": {"managedFields": [other]}}) == ""
    assert _annotated_by({"metadata": {}}) == ""
