"""The fake API server's copy of a JSON value: equal, and sharing no dict or list.

Every write copies the stored object, the patch, or the status kept across an update;
a copy that shared a nested dict with the stored object would let one request's change
show in another's answer (or in a watch event already sent), which the real API server,
decoding a fresh object per request, never does.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from artifactcheck_sim.json_values import json_copy

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _containers(value: Any) -> list[Any]:
    """Every dict and list in ``value``, the root included."""
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            out.append(item)
            stack.extend(item)
    return out


@given(json_values)
def test_a_copy_equals_deepcopys_and_shares_no_container(value: Any) -> None:
    copied = json_copy(value)
    assert copied == copy.deepcopy(value)
    originals = {id(c) for c in _containers(value)}
    assert not originals & {id(c) for c in _containers(copied)}


def test_changing_the_copy_leaves_the_stored_object_as_it_was() -> None:
    pod = {"metadata": {"labels": {"app": "web"}}, "status": {"conditions": [{"type": "Ready"}]}}
    copied = json_copy(pod)
    copied["metadata"]["labels"]["app"] = "other"
    copied["status"]["conditions"][0]["status"] = "True"
    copied["status"]["conditions"].append({"type": "artifactcheck.io/content-verified"})
    assert pod == {
        "metadata": {"labels": {"app": "web"}},
        "status": {"conditions": [{"type": "Ready"}]},
    }


def test_a_value_of_another_kind_is_copied_as_deepcopy_copies_it() -> None:
    inner = {"a": [1]}
    value = {"tuple": (inner, 2), "set": {1, 2}}
    copied = json_copy(value)
    assert copied == value
    assert copied["tuple"][0] is not inner
    assert copied["set"] is not value["set"]
