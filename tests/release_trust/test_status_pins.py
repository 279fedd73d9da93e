"""Pins kept in an ArtifactCheck's status: the rules of the pins file, in the status.

The document is the file's (release/pins.py); what is the status's own: it round-trips
through ``status.releasePins``, it is bounded by ``cacheVersions`` (oldest unchanged
pins dropped first, a changed one kept), the accept annotation's grammar, and the CRD
refuses a status that is not pins (the fake API server validates as a real one does).
"""

from __future__ import annotations

import hashlib
import itertools

import pytest

from artifactcheck.control.crd import crd_manifest
from artifactcheck.control.release_pins import StatusPins, parse_accept
from artifactcheck.model.names import CRD_API_VERSION, CRD_KIND
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
    record = again.accept("1.0", digest("b"), by="kubectl-annotate")
    assert record.sha256 == digest("b") and not again.changed()
    status = StatusPins.from_status(again.to_status(), max_versions=8).to_status()
    assert status["releasePins"][0]["pinned"]["sha256"] == digest("b")
    assert status["acceptedReleases"][0]["by"] == "kubectl-annotate"


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


def test_accept_annotation_grammar() -> None:
    d = digest("x")
    assert parse_accept(f"1.4.2@sha256:{d}") == ("1.4.2", d)
    assert parse_accept(" 1.4.2 ") == ("1.4.2", None)
    for bad in ("", "@sha256:" + d, "1.4.2@sha1:" + d[:40], f"1.4.2@sha256:{d.upper()}"):
        with pytest.raises(ValueError, match="accept-release"):
            parse_accept(bad)
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
        bad = good.to_status()
        bad["releasePins"][0]["pinned"]["sha256"] = "not-a-digest"
        with pytest.raises(Exception, match="sha256"):
            server.patch_status(CRD_API_VERSION, CRD_KIND, "shop", "web", {"status": bad})
    finally:
        server.stop()


def test_who_accepted_is_the_field_manager_of_the_annotation() -> None:
    """Kubernetes records who wrote each field (managedFields); kubectl annotate's is
    ``kubectl-annotate``. The acceptance names it; another field's manager is not it."""
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
