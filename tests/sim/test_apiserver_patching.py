"""The patch algorithms behind the fake kube-apiserver's PATCH (pure functions)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from artifactcheck_sim.apiserver_resources import POD_MERGE_SCHEMA
from artifactcheck_sim.patching import (
    PatchError,
    json_equal,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

# ------------------------------------------------------------------------ RFC 7386 (its appendix A)


@pytest.mark.parametrize(
    "target, patch, result",
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_json_merge_patch_rfc7386_examples(target: Any, patch: Any, result: Any) -> None:
    original = copy.deepcopy(target)
    assert json_merge_patch(target, patch) == result
    assert target == original  # inputs are not mutated


# ----------------------------------------------------------------------------------------- RFC 6902


DOC = {"foo": ["bar", "baz"], "a/b": 1, "m~n": 2, "obj": {"x": 1}}


@pytest.mark.parametrize(
    "ops, result",
    [
        ([{"op": "add", "path": "/foo/1", "value": "qux"}], {**DOC, "foo": ["bar", "qux", "baz"]}),
        ([{"op": "add", "path": "/foo/-", "value": "end"}], {**DOC, "foo": ["bar", "baz", "end"]}),
        ([{"op": "add", "path": "/new", "value": {"k": [1]}}], {**DOC, "new": {"k": [1]}}),
        ([{"op": "remove", "path": "/foo/0"}], {**DOC, "foo": ["baz"]}),
        ([{"op": "replace", "path": "/a~1b", "value": 10}], {**DOC, "a/b": 10}),
        ([{"op": "replace", "path": "/m~0n", "value": 20}], {**DOC, "m~n": 20}),
        ([{"op": "move", "from": "/obj/x", "path": "/y"}], {**DOC, "obj": {}, "y": 1}),
        ([{"op": "copy", "from": "/foo", "path": "/bar"}], {**DOC, "bar": ["bar", "baz"]}),
        ([{"op": "test", "path": "/foo", "value": ["bar", "baz"]}], DOC),
        ([{"op": "test", "path": "/a~1b", "value": 1.0}], DOC),
        ([{"op": "replace", "path": "", "value": {"whole": True}}], {"whole": True}),
    ],
)
def test_json_patch_operations(ops: list[dict[str, Any]], result: Any) -> None:
    original = copy.deepcopy(DOC)
    assert json_patch(DOC, ops) == result
    assert original == DOC


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/foo/0", "value": "nope"}],
        [{"op": "test", "path": "/a~1b", "value": True}],  # 1 is not true in JSON
        [{"op": "test", "path": "/missing", "value": None}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/missing/deeper", "value": 1}],
        [{"op": "add", "path": "/foo/7", "value": 1}],
        [{"op": "add", "path": "/foo/01", "value": 1}],
        [{"op": "remove", "path": "/foo/-"}],
        [{"op": "move", "from": "/obj", "path": "/obj/inside"}],
        [{"op": "add", "path": "/x"}],
        [{"op": "frobnicate", "path": "/x"}],
        [{"op": "add", "path": "no-slash", "value": 1}],
    ],
)
def test_json_patch_failures_are_422(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchError) as info:
        json_patch(DOC, ops)
    assert info.value.status == 422


@pytest.mark.parametrize("ops", [{"op": "add"}, ["not an object"], "text"])
def test_malformed_json_patches_are_400(ops: Any) -> None:
    with pytest.raises(PatchError) as info:
        json_patch(DOC, ops)
    assert info.value.status == 400


def test_json_patch_is_all_or_nothing() -> None:
    doc = {"a": 1}
    with pytest.raises(PatchError):
        json_patch(
            doc,
            [{"op": "replace", "path": "/a", "value": 2}, {"op": "test", "path": "/a", "value": 1}],
        )
    assert doc == {"a": 1}


def test_json_equal_is_strict_about_booleans() -> None:
    assert json_equal(1, 1.0) and not json_equal(1, True) and not json_equal(0, False)
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})


# ---------------------------------------------------------------------------------- strategic merge


def pod_with(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "finalizers": ["a"],
            "ownerReferences": [{"uid": "1", "name": "rs"}],
        },
        "spec": {
            "containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "side:1"},
            ],
            "tolerations": [{"key": "x"}],
        },
        "status": status,
    }


CONDITIONS = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]


def smp(original: dict[str, Any], patch: Any) -> dict[str, Any]:
    return strategic_merge_patch(original, patch, POD_MERGE_SCHEMA)


def test_smp_merges_conditions_by_type() -> None:
    result = smp(
        pod_with(conditions=CONDITIONS),
        {
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Initialized", "status": "True"},
                ]
            }
        },
    )
    assert result["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True"},
        {"type": "Initialized", "status": "True"},
    ]


def test_smp_merges_nested_lists_by_key() -> None:
    result = smp(
        pod_with(),
        {
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "9"}],
                    }
                ]
            }
        },
    )
    app = result["spec"]["containers"][0]
    assert app["image"] == "app:1"
    assert app["env"] == [{"name": "A", "value": "9"}, {"name": "B", "value": "2"}]
    assert result["spec"]["containers"][1] == {"name": "side", "image": "side:1"}


def test_smp_replaces_lists_without_a_strategy() -> None:
    result = smp(
        pod_with(containerStatuses=[{"name": "app"}, {"name": "side"}]),
        {
            "spec": {"tolerations": [{"key": "y"}]},
            "status": {"containerStatuses": [{"name": "side"}]},
        },
    )
    assert result["spec"]["tolerations"] == [{"key": "y"}]
    assert result["status"]["containerStatuses"] == [{"name": "side"}]


def test_smp_directives() -> None:
    original = pod_with(conditions=CONDITIONS)
    deleted = smp(original, {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}})
    assert deleted["status"]["conditions"] == [{"type": "PodScheduled", "status": "True"}]
    replaced = smp(
        original,
        {"status": {"conditions": [{"$patch": "replace"}, {"type": "X", "status": "True"}]}},
    )
    assert replaced["status"]["conditions"] == [{"type": "X", "status": "True"}]
    map_replaced = smp(original, {"status": {"$patch": "replace", "phase": "Running"}})
    assert map_replaced["status"] == {"phase": "Running"}
    map_deleted = smp(original, {"status": {"$patch": "delete"}})
    assert "status" not in map_deleted
    # As in Kubernetes, "$patch: replace" on any list element replaces the whole list with
    # the elements that carry no directive (here: none).
    emptied = smp(
        original, {"spec": {"containers": [{"name": "app", "image": "app:2", "$patch": "replace"}]}}
    )
    assert emptied["spec"]["containers"] == []


def test_smp_primitive_lists_and_their_directives() -> None:
    original = pod_with()
    added = smp(original, {"metadata": {"finalizers": ["b", "a"]}})
    assert added["metadata"]["finalizers"] == ["a", "b"]
    removed = smp(added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert removed["metadata"]["finalizers"] == ["b"]
    owners = smp(original, {"metadata": {"ownerReferences": [{"uid": "2", "name": "job"}]}})
    assert [o["uid"] for o in owners["metadata"]["ownerReferences"]] == ["1", "2"]


def test_smp_set_element_order_and_retain_keys() -> None:
    ordered = smp(
        pod_with(), {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}]}}
    )
    assert [c["name"] for c in ordered["spec"]["containers"]] == ["side", "app"]
    retained = smp(pod_with(), {"spec": {"$retainKeys": ["containers"], "containers": []}})
    assert set(retained["spec"]) == {"containers"}


def test_smp_null_deletes_and_does_not_mutate_its_input() -> None:
    original = pod_with(phase="Running", reason="x")
    frozen = copy.deepcopy(original)
    result = smp(original, {"status": {"reason": None}, "metadata": {"labels": {"a": "b"}}})
    assert result["status"] == {"phase": "Running"}
    assert result["metadata"]["labels"] == {"a": "b"}
    assert original == frozen


@pytest.mark.parametrize(
    "patch",
    [
        ["not", "a", "map"],
        {"status": {"conditions": [{"status": "True"}]}},  # no merge key
        {"status": {"conditions": ["Ready"]}},
        {"status": {"$patch": "explode"}},
        {"status": {"conditions": [{"type": "Ready", "$patch": "merge"}]}},
        {"status": {"conditions": [{"type": "Ready", "$patch": "explode"}]}},
        {"status": {"conditions": [{"$patch": "delete"}]}},  # delete needs the merge key
        {"$patch": "delete"},
    ],
)
def test_bad_strategic_merge_patches_are_400(patch: Any) -> None:
    with pytest.raises(PatchError) as info:
        smp(pod_with(conditions=CONDITIONS), patch)
    assert info.value.status == 400
