"""``release``: one field holding exactly one kind of release source.

Each kind describes itself, says whether pins and release keys apply, and is admitted
by the admin configuration by its own rule; the flat fields of 0.1 and 0.2 are refused
naming the field that replaced them, never read as a spec with no source (consensus).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import (
    RETIRED_RELEASE_FIELDS,
    ReleaseSource,
    camel_name,
    load_spec,
)
from artifactcheck.release.wiring import build_expectations
from artifactcheck.tenancy.admission import AdminConfig, admit

RELEASES = "https://releases.shop.example.com/web/{version}.json"
KUBE = {"kubernetes": {"namespace": "shop", "selector": "app=web"}}

#: One valid value of each kind, as an ArtifactCheck or a YAML file writes it.
KINDS: dict[str, Any] = {
    "manifests": [RELEASES],
    "image": {"reference": "registry.example.com/web:{version}"},
    "config_maps": {"selector": "artifactcheck.io/release-manifests=true"},
}


def test_the_kinds_here_are_the_model_s() -> None:
    assert tuple(KINDS) == ReleaseSource.KINDS


@pytest.mark.parametrize("pair", list(itertools.combinations(KINDS, 2)), ids="+".join)
def test_two_kinds_are_refused_naming_both(pair: tuple[str, str]) -> None:
    release = {kind: KINDS[kind] for kind in pair}
    with pytest.raises(ConfigError) as refused:
        load_spec({**KUBE, "release": release})
    assert f"release: give one kind of release source, not {pair[0]} and {pair[1]}" in str(
        refused.value
    )


def test_two_kinds_in_camel_case_are_refused_whatever_the_key_order() -> None:
    for release in (
        {"configMaps": {}, "manifests": [RELEASES]},
        {"manifests": [RELEASES], "configMaps": {}},
    ):
        with pytest.raises(ConfigError, match="not manifests and config_maps"):
            load_spec({**KUBE, "release": release})


def test_a_release_with_no_kind_is_refused_naming_the_kinds() -> None:
    with pytest.raises(ConfigError, match="release: give one kind of release source: manifests"):
        load_spec({"release": {}})


@pytest.mark.parametrize("kind", list(KINDS))
def test_one_kind_is_taken_and_describes_itself(kind: str) -> None:
    spec = load_spec({**KUBE, "release": {kind: KINDS[kind]}})
    assert spec.release is not None and spec.release.kind_name == kind
    described = {
        "manifests": RELEASES,
        "image": "image registry.example.com/web:{version}:/usr/share/nginx/html",
        "config_maps": "ConfigMaps artifactcheck.io/release-manifests=true in the pods' namespace",
    }
    assert spec.release.describe() == described[kind]
    assert spec.release.signed is (kind != "image")


@pytest.mark.parametrize("spelling", ["snake_case", "camelCase"])
@pytest.mark.parametrize("old", sorted(RETIRED_RELEASE_FIELDS))
def test_a_retired_field_is_refused_naming_its_replacement(old: str, spelling: str) -> None:
    key = old if spelling == "snake_case" else camel_name(old)
    value: Any = {} if old == "release_configmaps" else "x"
    with pytest.raises(ConfigError) as refused:
        load_spec({**KUBE, key: value})
    assert f"{key}: replaced by {RETIRED_RELEASE_FIELDS[old]}" in str(refused.value)
    assert "unknown field" not in str(refused.value)


def test_a_0_2_config_file_is_exit_2_naming_the_new_field(tmp_path: Path) -> None:
    config = tmp_path / "check.yaml"
    config.write_text(
        "targets: [{url: 'http://127.0.0.1:9/', version: 1.0.0}]\n"
        "release_manifest: ['releases/{version}.json']\n",
        "utf-8",
    )
    result = CliRunner().invoke(main, ["verify", "-c", str(config)], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "release_manifest: replaced by release.manifests" in result.stderr


def test_flags_fill_the_release_field(tmp_path: Path) -> None:
    """Two kinds from the command line are refused naming the flags that gave them."""
    result = CliRunner().invoke(
        main,
        [
            "verify",
            "--target",
            "http://127.0.0.1:9/=1.0.0",
            "--release-manifest",
            str(tmp_path / "{version}.json"),
            "--release-image",
            "web:{version}",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 2, result.output
    assert "release (--release-manifest, --release-image): give one kind" in result.stderr


# ------------------------------------------------------------------ admission by kind

ADMIN = AdminConfig.model_validate({"egress": {"allow": ["https://releases.shop.example.com/"]}})


def _admit(release: dict[str, Any]) -> Any:
    return admit("shop", {**KUBE, "release": release}, ADMIN)


def test_admission_manifests_on_the_allow_list() -> None:
    accepted = _admit({"manifests": [RELEASES]})
    assert accepted.accepted, accepted.message
    assert accepted.sources == (RELEASES,)
    refused = _admit({"manifests": ["https://elsewhere.example.com/{version}.json"]})
    assert {(r.field, r.rule) for r in refused.refusals} == {
        ("spec.release.manifests[0]", "EgressNotAllowed")
    }
    local = _admit({"manifests": ["/etc/{version}.json"]})
    assert {(r.field, r.rule) for r in local.refusals} == {
        ("spec.release.manifests[0]", "LocalPathRefused")
    }


def test_admission_refuses_an_image() -> None:
    refused = _admit({"image": KINDS["image"]})
    assert {(r.field, r.rule) for r in refused.refusals} == {
        ("spec.release.image", "ReleaseImageRefused")
    }


def test_admission_takes_config_maps_in_the_check_s_own_namespace() -> None:
    accepted = _admit({"configMaps": KINDS["config_maps"]})
    assert accepted.accepted, accepted.message
    assert accepted.spec is not None and accepted.spec.kubernetes is not None
    assert accepted.spec.kubernetes.namespace == "shop"
    assert accepted.sources == ()


def test_admission_refuses_a_0_2_object_naming_the_new_field() -> None:
    refused = admit("shop", {**KUBE, "releaseManifest": [RELEASES]}, ADMIN)
    assert not refused.accepted
    first = refused.refusals[0]
    assert (first.field, first.rule) == ("spec.releaseManifest", "RetiredField")
    assert first.message.startswith("replaced by release.manifests")


def test_pins_and_keys_need_a_signed_kind() -> None:
    refused = admit(
        "shop", {**KUBE, "release": {"image": KINDS["image"]}, "releasePins": True}, ADMIN
    )
    assert "ReleaseTrustNeedsManifests" in {r.rule for r in refused.refusals}
    consensus = admit("shop", {**KUBE, "releasePins": True}, ADMIN)
    assert "ReleaseTrustNeedsManifests" in {r.rule for r in consensus.refusals}


def test_an_image_with_pins_is_a_config_error_when_wired() -> None:
    class Trust:
        active = True

    spec = load_spec({"release": {"image": KINDS["image"]}})
    with pytest.raises(ConfigError, match="not to release images") as refused:
        build_expectations(spec, None, trust=Trust())  # type: ignore[arg-type]
    assert refused.value.field == "release"


def test_a_source_s_bytes_are_vouched_like_any_release_manifest(tmp_path: Path) -> None:
    """The helper a new source reads its bytes through: the version it declares and
    content hashes, as for files, URLs and ConfigMaps."""
    from artifactcheck.manifests import native
    from artifactcheck.model.errors import ExpectationUnavailable
    from artifactcheck.release.sources import vouched_release

    (tmp_path / "app.js").write_text("console.log(1)\n")
    data = native.dump(native.build(tmp_path, version="1.0.0"))
    spec = load_spec({})
    assert vouched_release(data, "1.0.0", "here", spec).version == "1.0.0"
    with pytest.raises(ExpectationUnavailable, match="declares version 1.0.0, not 2.0.0"):
        vouched_release(data, "2.0.0", "here", spec)
    with pytest.raises(ExpectationUnavailable, match="not a usable release manifest"):
        vouched_release(b"{}", "1.0.0", "here", spec)
