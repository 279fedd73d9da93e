"""The value records keep what the frozen dataclasses they replaced gave their callers.

:mod:`artifactcheck.model.records` makes the package's frozen values ``msgspec.Struct``
subclasses (cheap to define and to make); these are the properties the rest of the
package relies on: equality and hashing by value, positional and keyword construction,
defaults and default factories, ``__post_init__`` (also through :func:`replace`),
pickling (observations cross processes), ``repr``, pattern matching, refusal of
assignment, and the helpers that take a record and a dataclass alike.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from types import MappingProxyType

import pytest

from artifactcheck.fetch.response import Attempt
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.fetch.tunnel import ProxyEndpoint
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import Record, field_names, replace
from artifactcheck.model.values import (
    Fetched,
    Finding,
    FindingKind,
    Instance,
    Layout,
    Manifest,
    ManifestEntry,
    Observation,
    VersionSignal,
)
from artifactcheck.model.verdicts import VERDICTS, Verdict, VerdictTraits


def _observation() -> Observation:
    inst = Instance("web-1", "http://web-1/", signals=(VersionSignal("target", "1.0.0"),))
    fetched = Fetched("http://web-1/a.js", "a.js", 200, {"sha256": "ab" * 32}, 10)
    return Observation(inst, "artifactcheck.json", assets={"a.js": fetched})


def _fields(record: object) -> dict[str, object]:
    return {name: getattr(record, name) for name in field_names(record)}


def test_records_compare_and_hash_by_value_and_class() -> None:
    one, two = _observation(), _observation()
    assert one == two and one is not two
    found = Finding(FindingKind.DRIFT, "late", "web-1")
    assert hash(found) == hash(Finding(FindingKind.DRIFT, "late", "web-1"))
    assert {found: 1}[Finding(FindingKind.DRIFT, "late", "web-1")] == 1
    with pytest.raises(TypeError):  # a dict field: unhashable, as the dataclass was
        hash(one.instance)
    assert one.instance != replace(one.instance, name="web-2")
    # the same fields in another class are not equal (as a dataclass's __eq__ says)
    assert VersionSignal("a", "b") != Finding(FindingKind.DRIFT, "a")


def test_defaults_are_fresh_per_instance_and_keywords_and_positions_both_work() -> None:
    a, b = Instance("a", "http://a/"), Instance(name="b", base_url="http://b/")
    assert a.labels == {} and a.labels is not b.labels
    assert Observation(a, "m.json").layout == Layout()
    assert ManifestEntry("x.js", {"sha256": "00"}, 3).size == 3
    traits = VERDICTS[Verdict.CONSISTENT]
    assert replace(traits, style="red") == VerdictTraits(**{**_fields(traits), "style": "red"})
    with pytest.raises(TypeError):  # keyword-only, as its dataclass was
        VerdictTraits(0, event_reason="R", style="s")  # type: ignore[misc]


def test_assignment_is_refused() -> None:
    inst = Instance("a", "http://a/")
    with pytest.raises(AttributeError):
        inst.name = "b"  # type: ignore[misc]


def test_replace_runs_post_init_and_keeps_unchanged_fields_objects() -> None:
    info = FormatInfo(
        name="x", title="X", order=99, file_names=("x.json",), root="the site", probes={"x": 1}
    )
    assert isinstance(info.probes, MappingProxyType)  # __post_init__ wrapped it
    again = replace(info, probes={"y": 2})
    assert isinstance(again.probes, MappingProxyType) and dict(again.probes) == {"y": 2}
    obs = _observation()
    moved = replace(obs, instance=replace(obs.instance, node="n1"))
    assert moved.assets is obs.assets and moved.instance.node == "n1"
    with pytest.raises(TypeError):
        replace(obs, no_such_field=1)


def test_replace_and_field_names_take_a_dataclass_too() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int
        b: str = "x"

    assert replace(Plain(1), b="y") == Plain(1, "y")
    assert field_names(Plain) == ("a", "b") == field_names(Plain(1))
    assert field_names(Layout) == ("prefix", "detected", "found_at", "tried")


def test_records_pickle_and_copy_as_values() -> None:
    obs = _observation()
    assert pickle.loads(pickle.dumps(obs)) == obs
    assert copy.deepcopy(obs) == obs and copy.copy(obs) == obs


def test_match_args_allow_positional_patterns() -> None:
    match Finding(FindingKind.DRIFT, "late", "web-1"):
        case Finding(FindingKind.DRIFT, _, name):
            assert name == "web-1"
        case _:
            pytest.fail("the positional pattern did not match")


def test_a_manifests_page_hashes_take_no_part_in_its_value() -> None:
    entry = ManifestEntry("index.html", {"sha256": "cd" * 32})
    worked_out, fresh = (
        Manifest("native", {"index.html": entry}),
        Manifest("native", {"index.html": entry}),
    )
    assert worked_out.page_hashes == frozenset({"cd" * 32})
    assert worked_out == fresh
    assert repr(worked_out) == repr(fresh)
    assert replace(worked_out, files={}).page_hashes == frozenset()
    assert pickle.loads(pickle.dumps(worked_out)) == fresh


def test_a_proxys_credentials_stay_out_of_its_repr() -> None:
    proxy = ProxyEndpoint.parse("http://user:s3cret@proxy.internal:3128")
    assert proxy.authorization and b"Proxy-Authorization" in proxy.authorization
    assert repr(proxy) == "ProxyEndpoint(scheme='http', host='proxy.internal', port=3128)"
    assert proxy == ProxyEndpoint.parse("http://user:s3cret@proxy.internal:3128")


def test_the_base_class_is_frozen_and_subclasses_inherit_it() -> None:
    class Point(Record):
        x: int
        y: int = 0

    with pytest.raises(AttributeError):
        Point(1).x = 2  # type: ignore[misc]
    assert Point(1) == Point(1, 0) and hash(Point(1)) == hash(Point(x=1))
    assert Point.__match_args__ == ("x", "y")


def test_mutable_records_change_in_place_compare_by_value_and_are_unhashable() -> None:
    stats = FetchStats()
    stats.requests += 1
    stats.host("http://a:80").requests += 2
    other = FetchStats(requests=1)
    other.host("http://a:80").requests = 2
    assert stats == other and stats.errors is not other.errors
    assert pickle.loads(pickle.dumps(stats)) == stats  # an observing process's counts
    with pytest.raises(TypeError):
        hash(stats)
    with pytest.raises(AttributeError):
        stats.no_such_counter = 1  # type: ignore[attr-defined]
    attempt = Attempt("http://a/x.js").fail(ErrorKind.TIMEOUT, "read timed out")
    assert (attempt.error_kind, attempt.error) == (ErrorKind.TIMEOUT, "read timed out")
    assert replace(attempt, status=200).status == 200 and attempt.status is None
