"""CheckSpec and CRD parsing under arbitrary and mutated input (hypothesis).

Configuration reaches artifactcheck from a YAML file, CLI flags and ArtifactCheck
resources anyone with RBAC on the CRD can write. Whatever arrives, ``load_spec`` must
return a CheckSpec or raise :class:`ConfigError` whose message names the offending
field, and an accepted spec must be usable: no value may crash the
policy or the report later (an infinite rate limit made ``decide()`` raise before
finite numbers were required). The CRD's OpenAPI schema is generated from the model,
so for any valid spec the API server's validation (the schema, checked here with
``jsonschema``) and the model must agree.

The served-manifest readers, the other hostile input, are fuzzed by
``tests/manifests/test_hostile.py`` (every reader, arbitrary JSON and bytes, real
manifests with random parts replaced); this file does not repeat them.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from artifactcheck.control.crd import crd_manifest
from artifactcheck.judge.compare import tls_findings
from artifactcheck.judge.decide import History, decide
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import (
    RETIRED_RELEASE_FIELDS,
    CheckSpec,
    camel_name,
    load_spec,
    load_spec_file,
)
from artifactcheck.model.values import CertInfo
from artifactcheck.tenancy.admission import CONTROLLER_REFUSED_FIELDS

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- strategies

JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=16)
)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
NAME = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=12)
URL = st.builds(
    "{}://{}.{}:{}/{}".format,
    st.sampled_from(["http", "https"]),
    NAME,
    st.sampled_from(["example", "internal", "svc"]),
    st.integers(1, 65535),
    NAME | st.just(""),
)

#: Versions: the grammar allows letters, digits and . - _ + inside.
VERSION = st.builds("{}{}".format, NAME, st.sampled_from(["", ".1", "-rc.1", "+build.7", "_x"]))
CONCRETE = NAME.map("/releases/{}.json".format) | URL.map("{}/release.json".format)
TEMPLATE = NAME.map("/releases/{}/{{version}}.json".format) | URL.map("{}/{{version}}.json".format)

#: Values the model's own validators constrain beyond what the types say.
SPECIAL: dict[tuple[str, str], st.SearchStrategy[Any]] = {
    ("Target", "url"): URL,
    ("Target", "version"): st.none() | VERSION,
    ("CheckSpec", "desired_version"): st.none() | VERSION,
    ("CheckSpec", "known_versions"): st.lists(VERSION, max_size=3),
    ("CheckSpec", "cdn"): st.none() | URL,
    # one or several, at most one of them a template, none twice (a list: the CRD form;
    # a lone string, accepted in YAML, is covered by test_one_release_manifest_as_a_string)
    ("ReleaseSource", "manifests"): st.none()
    | st.builds(
        lambda concrete, template: concrete + template,
        st.lists(CONCRETE, max_size=3, unique=True),
        st.lists(TEMPLATE, max_size=1),
    ).filter(bool),
    ("HttpSettings", "compare_encodings"): st.lists(
        st.sampled_from(["identity", "gzip", "br", "deflate"]), min_size=1, max_size=4, unique=True
    ),
    ("HttpSettings", "headers"): st.dictionaries(
        NAME.map("x-{}".format),
        st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    ),
    ("CheckSpec", "previous_versions"): st.lists(VERSION, max_size=3, unique=True),
    ("CheckSpec", "pages"): st.lists(
        st.just("/") | NAME.map("/{}".format), max_size=4, unique=True
    ),
    ("VersionEndpoint", "pointer"): st.just("") | NAME.map("/{}".format),
    ("ReleaseConfigMaps", "selector"): NAME.map("{}=true".format),
    ("DockerSource", "on_mismatch"): st.sampled_from([None, "stop", "pause", "disconnect=web"]),
}


def _number(annotation: Any, metadata: list[Any]) -> st.SearchStrategy[Any]:
    """Numbers inside the field's ge/gt/le/lt constraints (finite, as the model wants)."""
    bounds: dict[str, float] = {}
    for item in metadata:
        for name in ("ge", "gt", "le", "lt"):
            if getattr(item, name, None) is not None:
                bounds[name] = getattr(item, name)
    low = bounds.get("ge", bounds.get("gt"))
    high = bounds.get("le", bounds.get("lt"))
    if annotation is int:
        lo = None if low is None else math.ceil(low) + (1 if "gt" in bounds else 0)
        hi = None if high is None else math.floor(high) - (1 if "lt" in bounds else 0)
        return st.integers(lo if lo is not None else -(10**6), hi if hi is not None else 10**6)
    return st.floats(
        low if low is not None else -1e6,
        high if high is not None else 1e6,
        exclude_min="gt" in bounds,
        exclude_max="lt" in bounds,
        allow_nan=False,
        allow_infinity=False,
    )


def _value(model: str, field: str, annotation: Any, metadata: list[Any]) -> st.SearchStrategy[Any]:
    """A valid value for one field, from its annotation and constraints."""
    if (model, field) in SPECIAL:
        return SPECIAL[(model, field)]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return st.none() | _value(model, field, inner[0], metadata)
    if origin is Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(_value(model, field, args[0], []), max_size=3)
    if origin is dict:
        return st.dictionaries(NAME, NAME, max_size=3)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_doc(annotation)
    if annotation is bool:
        return st.booleans()
    if annotation in (int, float):
        return _number(annotation, metadata)
    if annotation is str:
        return NAME
    raise AssertionError(f"no strategy for {model}.{field}: {annotation!r}")


def model_doc(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Valid input documents for a pydantic model: required fields and some optional ones."""
    required, optional = {}, {}
    hints = typing.get_type_hints(model)
    for name, info in model.model_fields.items():
        strategy = _value(model.__name__, name, hints[name], list(info.metadata))
        (required if info.is_required() else optional)[name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def _one_release_source(doc: dict[str, Any]) -> dict[str, Any]:
    """``release`` holds exactly one kind: keep the first given, or drop a release with
    none. ConfigMaps are read in the pods' namespace, so they come with kubernetes."""
    release = doc.get("release")
    if release is None:
        return doc
    given = [(k, v) for k, v in release.items() if v is not None]
    if not given or (given[0][0] == "config_maps" and doc.get("kubernetes") is None):
        return {k: v for k, v in doc.items() if k != "release"}
    return {**doc, "release": dict(given[:1])}


def _previous_checkable(doc: dict[str, Any]) -> dict[str, Any]:
    """Previous versions need somewhere to check them (the CDN or the instances), a
    release source to load them from, and none of them the desired version: else drop."""
    previous = doc.get("previous_versions") or []
    where = doc.get("cdn") or doc.get("previous_on_instances")
    source = doc.get("release") is not None
    if previous and (not where or not source or doc.get("desired_version") in previous):
        doc = {k: v for k, v in doc.items() if k != "previous_versions"}
    return doc


SPEC = model_doc(CheckSpec).map(_one_release_source).map(_previous_checkable)


def paths(doc: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path to a value inside a document (objects and lists), the root excluded."""
    out = []
    if isinstance(doc, Mapping):
        for key, value in doc.items():
            out.append((*prefix, key))
            out += paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out.append((*prefix, index))
            out += paths(value, (*prefix, index))
    return out


def set_at(doc: Any, path: tuple[str | int, ...], value: Any) -> Any:
    """A deep copy of ``doc`` with the value at ``path`` replaced."""
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def rendered(key: object) -> str:
    """A key as ConfigError messages show it: quoted when it could forge a line or path."""
    text = str(key)
    unsafe = not text or not text.isprintable() or any(c in text for c in ".:")
    return repr(text) if isinstance(key, str) and unsafe else text


def error_locations(message: str) -> list[str]:
    """The ``field.path`` of each line of a ConfigError message after its first."""
    lines = message.split("\n")
    assert len(lines) >= 2, message
    assert lines[0].endswith("invalid"), message
    locations = []
    for line in lines[1:]:
        loc, sep, problem = line.partition(": ")
        assert sep and problem.strip(), f"line does not name a field: {line!r}"
        locations.append(loc)
    return locations


def dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(rendered(p) for p in path)


# --------------------------------------------------------------------------- load_spec


@FAST
@given(st.dictionaries(st.sampled_from(sorted(CheckSpec.model_fields)) | NAME, JSON, max_size=6))
def test_any_mapping_is_a_spec_or_an_error_naming_its_fields(doc: dict[str, Any]) -> None:
    try:
        spec = load_spec(doc)
    except ConfigError as exc:
        # A field's camelCase alias is named by its field name (docs/configuration.md).
        named = {FIELD_OF_ALIAS.get(k, k) if isinstance(k, str) else k for k in doc}
        for loc in error_locations(str(exc)):
            assert loc == "(root)" or any(
                loc == rendered(k) or loc.startswith(f"{rendered(k)}.") for k in named
            ), (
                loc,
                sorted(doc),
            )
    else:
        assert isinstance(spec, CheckSpec)
        assert_usable(spec)


FIELD_OF_ALIAS = {info.alias: name for name, info in CheckSpec.model_fields.items() if info.alias}


def test_a_fields_alias_is_named_by_its_field_name() -> None:
    """The example hypothesis found: an alias key holding a wrong value."""
    with pytest.raises(ConfigError) as caught:
        load_spec({"releasePins": None})
    assert error_locations(str(caught.value)) == ["release_pins"]
    test_any_mapping_is_a_spec_or_an_error_naming_its_fields.hypothesis.inner_test(  # type: ignore[attr-defined]
        {"releasePins": None}
    )


@FAST
@given(JSON.filter(lambda v: not isinstance(v, dict)))
def test_a_non_mapping_is_refused_as_a_whole(doc: Any) -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_spec(doc)


@FAST
@given(SPEC)
def test_generated_valid_specs_load(doc: dict[str, Any]) -> None:
    """Sanity for the strategy the other properties rely on."""
    assert_usable(load_spec(doc))


@FAST
@given(SPEC, st.data())
def test_a_mutated_spec_is_refused_naming_the_mutated_field(doc: dict[str, Any], data) -> None:
    where = paths(doc)
    assume(where)
    path = data.draw(st.sampled_from(where), label="path")
    wrong = data.draw(
        st.sampled_from([[{"x": 1}], {"x": [1]}, "\x00not-a-value", -(10**9), 1e300, True]) | JSON,
        label="value",
    )
    mutated = set_at(doc, path, wrong)
    try:
        spec = load_spec(mutated)
    except ConfigError as exc:
        target = dotted(path)
        locations = error_locations(str(exc))
        assert any(
            loc == target or loc.startswith(target + ".") or target.startswith(loc + ".")
            for loc in locations
        ), (target, locations)
    else:
        assert_usable(spec)


@FAST
@given(SPEC, st.data(), NAME.map("unknown_{}".format))  # no field is named unknown_*
def test_an_unknown_field_is_refused_by_its_full_path(doc: dict[str, Any], data, key: str) -> None:
    objects = [()] + [p for p in paths(doc) if isinstance(_get(doc, p), dict)]
    path = data.draw(st.sampled_from(objects), label="object")
    node = _get(doc, path)
    assume(key not in node)
    if path and path[-1] in ("headers", "header_env", "header_files"):
        return  # free-form maps: any key is a header name
    mutated = set_at(doc, (*path, key), 1) if path else {**doc, key: 1}
    with pytest.raises(ConfigError) as caught:
        load_spec(mutated)
    assert f"{dotted((*path, key))}: unknown field" in str(caught.value)


def _get(doc: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"interval": float("inf")}, "interval"),
        ({"policy": {"max_actions_per_minute": float("inf")}}, "policy.max_actions_per_minute"),
        ({"http": {"tls_expiry_warning_days": float("inf")}}, "http.tls_expiry_warning_days"),
        ({"http": {"read_timeout": float("nan")}}, "http.read_timeout"),
        ({"http": {"tls_expiry_warning_days": 1e300}}, "http.tls_expiry_warning_days"),
    ],
)
def test_infinite_nan_and_absurd_numbers_are_refused(doc: dict[str, Any], field: str) -> None:
    """``.inf`` is valid YAML; it crashed decide() (math.floor) and tls_findings (timedelta),
    and so did a warning period of 1e300 days (found by the mutation property)."""
    with pytest.raises(ConfigError, match=rf"{field}: "):
        load_spec(doc)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("/r/{version}.json", ["/r/{version}.json"]), (["/a.json"], ["/a.json"])],
)
def test_one_release_manifest_as_a_string(value: Any, expected: list[str]) -> None:
    spec = load_spec({"release": {"manifests": value}})
    assert spec.release is not None and spec.release.manifests == expected


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        ({"release": {"manifests": ["/a/{version}.json", "/b/{version}.json"]}}, "at most one"),
        ({"release": {"manifests": ["/a.json", "/a.json"]}}, "twice"),
        (
            {"release": {"manifests": ["/a.json"], "image": {"reference": "web:{version}"}}},
            "not manifests and image",
        ),
        ({"targets": [{"url": "http://a/", "version": "../1"}]}, "not a version"),
        ({"http": {"headers": {"X-A": "b\r\nX-B: c"}}}, "control character"),
        ({"http": {"headers": {"X A": "b"}}}, "not an RFC 9110 token"),
        ({"http": {"host_header": "a\r\nX-B: c"}}, "host name"),
        ({"cdn": "cdn.example.com"}, "http:// or https://"),
    ],
)
def test_release_sources_versions_and_headers_are_checked(
    doc: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_spec(doc)


def assert_usable(spec: CheckSpec) -> None:
    """An accepted spec's numbers are finite and feed the policy and the TLS check."""
    for section in (spec, spec.http, spec.retry, spec.policy, spec.sampling):
        for name, value in section:
            if isinstance(value, float):
                assert math.isfinite(value), f"{name}={value}"
    decide([], policy=spec.policy, history=History(), now=0.0)
    cert = CertInfo("h:443", "CN=h", "CN=ca", datetime(2030, 1, 1, tzinfo=UTC))
    tls_findings(
        cert, now=datetime(2029, 12, 1, tzinfo=UTC), warn_days=spec.http.tls_expiry_warning_days
    )


# --------------------------------------------------------------------------- YAML files


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\xff\xfe\x00garbage", "UTF-8"),
        (b"targets: " + b"[" * 5000 + b"]" * 5000, "nested"),
        (b"http: " + b"{a: " * 5000 + b"1" + b"}" * 5000, "nested"),
        (b"targets: [\n", "YAML"),
        (b"- just\n- a list\n", "mapping"),
        (b"targets: !!python/object/apply:os.system [ls]\n", "YAML"),
    ],
    ids=["not-utf8", "deep-list", "deep-map", "broken", "list", "python-tag"],
)
def test_hostile_yaml_files_are_configuration_errors(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=problem) as caught:
        load_spec_file(path)
    assert str(path) in str(caught.value)


def test_many_entries_and_long_strings_stay_cheap() -> None:
    """No cap is needed on a spec's lists: 20,000 targets and 1 MB strings parse in time."""
    import time

    started = time.perf_counter()
    spec = load_spec(
        {
            "targets": [{"url": f"http://10.0.{i // 250}.{i % 250}:80/"} for i in range(20_000)],
            "http": {"headers": {"x-long": "v" * 2**20}},
            "known_versions": [f"1.{i}" for i in range(20_000)],
            "manifest_path": "assets/" + "m" * 2**20 + ".json",
        }
    )
    assert len(spec.targets) == 20_000
    assert time.perf_counter() - started < 5


# --------------------------------------------------------------------------- CRD schema


def _json_schema(node: Any) -> Any:
    """OpenAPI v3.0 (structural) to JSON Schema draft 4: ``nullable`` becomes a type."""
    if isinstance(node, list):
        return [_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
    if isinstance(out.get("properties"), dict) and "additionalProperties" not in out:
        # what strict field validation (kubectl's default) does: an unknown key, a
        # snake_case spelling of a camelCase field too, is an error, not ignored
        out["additionalProperties"] = False
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


CRD_SPEC = _json_schema(
    crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
)
CRD = jsonschema.Draft4Validator(CRD_SPEC)


def _without_refused(doc: dict[str, Any]) -> dict[str, Any]:
    """The spec (camelCase) minus the CLI-only fields the CRD leaves out (the controller
    refuses them)."""
    doc = copy.deepcopy(doc)
    for path in CONTROLLER_REFUSED_FIELDS:
        node = doc
        for key in path[:-1]:
            node = node.get(camel_name(key)) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(camel_name(path[-1]), None)
    return doc


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (directly, optionally, or as list items: True)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if get_origin(annotation) is dict:
        return None, False
    if get_origin(annotation) is list:
        return _model_of(get_args(annotation)[0])[0], True
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found[0] is not None:
            return found
    return None, False


def _as_crd(doc: Any, model: type[BaseModel] = CheckSpec) -> Any:
    """A snake_case spec document as an ArtifactCheck spells it: the model's own keys in
    camelCase, recursively; keys of maps (header names) stay as they are."""
    if not isinstance(doc, dict):
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        info = model.model_fields.get(key)
        if info is None:
            out[key] = value
            continue
        sub, listed = _model_of(info.annotation)
        if sub is not None and listed and isinstance(value, list):
            value = [_as_crd(v, sub) for v in value]
        elif sub is not None:
            value = _as_crd(value, sub)
        out[camel_name(key)] = value
    return out


def _refused(where: tuple[str, ...], name: str) -> bool:
    return (*where, name) in CONTROLLER_REFUSED_FIELDS


@FAST
@given(SPEC)
def test_the_crd_schema_accepts_every_valid_spec(doc: dict[str, Any]) -> None:
    spec = load_spec(doc)
    assert load_spec(_as_crd(doc)) == spec, "either spelling, one spec"
    errors = [e.message for e in CRD.iter_errors(_without_refused(_as_crd(doc)))]
    assert not errors, errors
    dumped = _without_refused(spec.model_dump(mode="json", by_alias=True))
    errors = [f"{list(e.path)}: {e.message}" for e in CRD.iter_errors(dumped)]
    assert not errors, errors


def _numeric_fields() -> list[tuple[tuple[str, ...], type]]:
    """(path, int|float) of every numeric field of the spec and its sections."""
    out = []
    for section, model in [((), CheckSpec)] + [
        ((name,), info.annotation)
        for name, info in CheckSpec.model_fields.items()
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
    ]:
        hints = typing.get_type_hints(model)
        for name in model.model_fields:
            kind = hints[name]
            args = [a for a in get_args(kind) if a is not type(None)]
            base = args[0] if get_origin(kind) in (typing.Union, types.UnionType) else kind
            if base in (int, float):
                out.append(((*section, name), base))
    return out


NUMERIC = _numeric_fields()


@FAST
@given(
    st.sampled_from(NUMERIC),
    st.integers(-(10**7), 10**7) | st.floats(-1e7, 1e7, allow_nan=False, allow_infinity=False),
)
def test_the_crd_and_the_model_agree_on_numeric_bounds(
    field: tuple[tuple[str, ...], type], number: float
) -> None:
    path, kind = field
    if kind is int:
        number = int(number)
    elif isinstance(number, int):
        number = float(number)
    doc: dict[str, Any] = {}
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = number
    try:
        load_spec(doc)
        model_ok = True
    except ConfigError:
        model_ok = False
    crd_ok = CRD.is_valid(_as_crd(doc))
    assert model_ok == crd_ok, (dotted(path), number, model_ok, crd_ok)


def test_the_crd_enums_are_the_model_literals() -> None:
    """Every Literal in the model is an enum in the CRD, with the same values."""
    found: list[tuple[str, list[Any], list[Any]]] = []

    def walk(model: type[BaseModel], schema: Mapping[str, Any], where: tuple[str, ...]) -> None:
        hints = typing.get_type_hints(model)
        for name in model.model_fields:
            if _refused(where, name):
                continue
            sub = schema["properties"][camel_name(name)]
            kind = hints[name]
            if get_origin(kind) is Literal:
                found.append(
                    (".".join((*where, name)), sorted(get_args(kind)), sorted(sub["enum"]))
                )
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                walk(kind, sub, (*where, name))

    walk(CheckSpec, CRD_SPEC, ())
    assert found and all(model == crd for _, model, crd in found), found


def test_every_model_field_is_in_the_crd() -> None:
    """Every field but the CLI-only ones the controller refuses."""

    def names(
        model: type[BaseModel], schema: Mapping[str, Any], where: tuple[str, ...] = ()
    ) -> Callable[[], None]:
        wanted = {n for n in model.model_fields if not _refused(where, n)}
        # the retired 0.2 fields stay, unpruned, for the controller to refuse by name
        retired = {camel_name(n) for n in RETIRED_RELEASE_FIELDS} if not where else set()
        offered = set(schema["properties"]) - retired
        assert {camel_name(n) for n in wanted} == offered, model.__name__
        hints = typing.get_type_hints(model)
        for name in sorted(wanted):
            kind = hints[name]
            args = [a for a in get_args(kind) if a is not type(None)]
            inner = (
                args[0] if args and get_origin(kind) in (typing.Union, types.UnionType) else kind
            )
            if get_origin(inner) is list:
                inner = get_args(inner)[0]
                schema_node = schema["properties"][camel_name(name)]["items"]
            else:
                schema_node = schema["properties"][camel_name(name)]
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                names(inner, schema_node, (*where, name))
        return lambda: None

    names(CheckSpec, CRD_SPEC)
