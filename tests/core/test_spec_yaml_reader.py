"""The spec reader's own construction of plain YAML gives what PyYAML's safe loader
gives, for every document: the same values (aliases still shared, not copied), the
same refusals, and every document its fast walk does not cover constructed by the
safe loader itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from artifactcheck.cli.main import main
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import read_spec_yaml

SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read(tmp_path: Path, text: str) -> dict[str, Any]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    return read_spec_yaml(spec)


DOCUMENTS = {
    "targets": "targets:\n- url: http://127.0.0.1:1/\n  version: 1.4.2\n  name: web-1\n",
    "scalars": (
        "a: 1\nb: 0x1F\nc: 1_000\nd: 1:30\ne: yes\nf: Off\ng: ~\nh: 1.5e3\ni: .inf\n"
        "j: 2026-12-06\nk: 2026-12-06T08:00:00Z\nl: '1'\nm: !!str 2\nn:\no: [null, true]\n"
    ),
    "flow": "x: {a: [1, {b: c}], d: []}\ny: {}\n",
    "alias": "base: &b {url: http://a/}\none: *b\ntwo: *b\n",
    "scalar alias": "a: &v 1.4.2\nb: *v\n",
    "merge key": "base: &b {url: http://a/, name: x}\nt: {<<: *b, name: y}\n",
    "inline merge key": "t: {<<: {url: http://a/, name: x}, name: y}\n",
    "merge key list": "t:\n  <<: [{a: 1}, {b: 2}]\n  c: 3\n",
    "value key": "a: {=: 1, b: 2}\n",
    "int key": "1: one\n2: two\n",
    "null key": "? ~\n: x\nb: 1\n",
    "set": "s: !!set {a, b}\n",
    "omap": "o: !!omap [a: 1, b: 2]\n",
    "pairs": "p: !!pairs [a: 1, a: 2]\n",
    "binary": "b: !!binary aGVsbG8=\n",
    "duplicate keys": "a: 1\na: 2\n",
    "explicit map tag": "a: !!map {b: 1}\nc: !!seq [1]\n",
    "recursive": "a: &a [*a]\n",
}


@pytest.mark.parametrize("text", DOCUMENTS.values(), ids=DOCUMENTS.keys())
def test_the_same_values_as_the_safe_loader(tmp_path: Path, text: str) -> None:
    ours = read(tmp_path, text)
    theirs = yaml.load(text, Loader=SAFE)  # noqa: S506 - a safe loader
    assert repr(ours) == repr(theirs)  # repr: a recursive value compares too


def test_an_alias_is_shared_not_copied(tmp_path: Path) -> None:
    data = read(tmp_path, "base: &b {url: http://a/}\none: *b\ntwo: *b\n")
    assert data["one"] is data["two"] is data["base"]


def test_nested_aliases_stay_small(tmp_path: Path) -> None:
    """A "billion laughs" document stays its size: each alias is one shared object."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 6)]
    data = read(tmp_path, "\n".join(lines) + "\n")
    assert data["l5"][0] is data["l4"] and data["l5"][9] is data["l4"]


REFUSED = {
    "python tag": "a: !!python/object/apply:os.system [ls]\n",
    "python name": "a: !!python/name:os.system\n",
    "unknown tag": "a: !custom 1\n",
    "unknown collection tag": "a: !custom {b: 1}\n",
    "unhashable key": "? [a]\n: 1\n",
    "two documents": "a: 1\n---\nb: 2\n",
}


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_the_same_refusals_as_the_safe_loader(tmp_path: Path, text: str) -> None:
    with pytest.raises(yaml.YAMLError) as theirs:
        yaml.load(text, Loader=SAFE)  # noqa: S506 - a safe loader
    with pytest.raises(ConfigError) as ours:
        read(tmp_path, text)
    assert str(ours.value) == f"{tmp_path / 'spec.yaml'}: not valid YAML: {theirs.value}"


keys = st.text(max_size=8)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=5), st.booleans())
def test_any_dumped_mapping_reads_as_the_safe_loader_reads_it(
    data: dict[str, Any], flow: bool
) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ours = read(Path(tmp), text)
    theirs = yaml.load(text, Loader=SAFE) or {}  # noqa: S506 - a safe loader
    assert ours == theirs


@pytest.mark.parametrize("value", ["!!timestamp nope", "!!int nope", "!!float nope", "!!bool nope"])
def test_a_tagged_scalar_that_cannot_be_made_is_a_config_error(tmp_path: Path, value: str) -> None:
    """PyYAML's safe constructor fails on these with ValueError, KeyError or
    AttributeError rather than a YAMLError; the reader names the file all the same."""
    with pytest.raises(ConfigError) as caught:
        read(tmp_path, f"targets: {value}\n")
    expected = f"{tmp_path / 'spec.yaml'}: not valid YAML: a tagged value that cannot be made"
    assert str(caught.value) == expected
    run = CliRunner().invoke(main, ["verify", "--config", str(tmp_path / "spec.yaml")])
    assert run.exit_code == 2 and f"artifactcheck: error: {expected}" in run.stderr
