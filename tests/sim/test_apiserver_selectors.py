"""Label and field selector parsing/matching used by the fake kube-apiserver."""

from __future__ import annotations

import pytest

from artifactcheck.model.selectors import LabelSelector, SelectorError
from artifactcheck_sim.field_selectors import FieldSelector

LABELS = {"app": "web", "env": "prod", "replicas": "3", "example.com/team": "a"}


@pytest.mark.parametrize(
    "selector, matches",
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("missing=x", False),
        ("app in (db, web)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("app notin (web,db)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("replicas>2", True),
        ("replicas<3", False),
        ("missing>1", False),
        ("app>1", False),  # non-numeric label value
        ("example.com/team=a", True),
        ("app=web,env=prod,!missing", True),
        ("app=web,env=dev", False),
        ("app in (web),env notin (dev, test)", True),
        ("missing=", False),
        ("app in (in, notin, web)", True),  # keywords are plain values inside a set
    ],
)
def test_label_selector_matching(selector: str, matches: bool) -> None:
    assert LabelSelector.parse(selector).matches(LABELS) is matches


def test_empty_value_matches_empty_label() -> None:
    assert LabelSelector.parse("flag=").matches({"flag": ""})
    assert not LabelSelector.parse("flag=").matches({})


@pytest.mark.parametrize(
    "selector",
    [
        "app in ()",
        "app in (a",
        "app in a",
        "=web",
        "app=web,",
        ",app=web",
        "app=web app=db",
        "app=(web)",
        "app web",
        "bad key=x",
        "-leading=x",
        "app=-bad-",
        "x" * 64 + "=v",
        "app=" + "v" * 64,
        "UPPER.example.com/x=y",
        "replicas>x",
        "!",
        "app!",
    ],
)
def test_invalid_label_selectors(selector: str) -> None:
    with pytest.raises(SelectorError):
        LabelSelector.parse(selector)


def test_label_selector_round_trips_to_a_string() -> None:
    text = "app=web,env!=dev,tier in (a,b),x notin (c),y,!z,n>1"
    assert str(LabelSelector.parse(text)) == text
    assert LabelSelector.parse("").empty and LabelSelector.parse("   ").empty


POD = {
    "metadata.name": "web-1",
    "metadata.namespace": "default",
    "spec.nodeName": "",
    "status.phase": "Running",
}


@pytest.mark.parametrize(
    "selector, matches",
    [
        ("", True),
        ("metadata.name=web-1", True),
        ("metadata.name==web-1", True),
        ("metadata.name!=web-1", False),
        ("spec.nodeName=", True),
        ("spec.nodeName!=", False),
        ("status.phase=Running,metadata.namespace=default", True),
        ("status.phase=Running,metadata.namespace=other", False),
        ("metadata.name=web-1,", True),  # empty terms are skipped, as in Kubernetes
    ],
)
def test_field_selector_matching(selector: str, matches: bool) -> None:
    assert FieldSelector.parse(selector).matches(lambda f: POD.get(f, "")) is matches


def test_field_selector_escapes_and_fields() -> None:
    selector = FieldSelector.parse(r"metadata.name=a\,b\=c\\d,spec.nodeName!=n1")
    assert [(r.field, r.op, r.value) for r in selector.requirements] == [
        ("metadata.name", "=", "a,b=c\\d"),
        ("spec.nodeName", "!=", "n1"),
    ]
    assert selector.fields == {"metadata.name", "spec.nodeName"}
    assert str(FieldSelector.parse(str(selector))) == str(selector)


@pytest.mark.parametrize("selector", ["no-operator", "=value", r"a=b\x", "a=b=c", "a=b\\"])
def test_invalid_field_selectors(selector: str) -> None:
    with pytest.raises(SelectorError):
        FieldSelector.parse(selector)
