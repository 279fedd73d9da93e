"""The pure parts of artifactcheck.release.registry: references, credentials, challenges."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from artifactcheck.model.errors import ConfigError
from artifactcheck.release.registry import (
    ImageReference,
    has_registry_host,
    load_credentials,
    parse_reference,
)
from artifactcheck.release.registry.session import challenge

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("registry.example.com/web:1.0", ImageReference("registry.example.com", "web", "1.0")),
        ("localhost:5000/x", ImageReference("localhost:5000", "x")),
        ("127.0.0.1:5000/shop/web:1.0.0", ImageReference("127.0.0.1:5000", "shop/web", "1.0.0")),
        (
            f"reg.io:443/a/b/c:v1@{DIGEST}",
            ImageReference("reg.io:443", "a/b/c", "v1", DIGEST),
        ),
        (f"reg.io/web@{DIGEST}", ImageReference("reg.io", "web", None, DIGEST)),
        ("[::1]:5000/web:1", ImageReference("[::1]:5000", "web", "1")),
    ],
)
def test_parse_reference(text: str, want: ImageReference) -> None:
    got = parse_reference(text)
    assert got == want
    assert str(got) == text
    assert got.reference == (want.digest or want.tag or "latest")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("web:1.0", "no registry host"),
        ("shop/web:1.0", "no registry host"),
        ("reg.io/Web:1", "invalid repository"),
        ("reg.io/web:-bad", "invalid tag"),
        ("reg.io/web@sha256:abc", "sha256 digests"),
        ("reg.io/web@sha512:" + "a" * 128, "only sha256"),
        ("reg.io/web@nonsense", "malformed digest"),
        ("reg_io:5000/web", "no registry host|invalid registry host"),
        ("reg.io/../web", "invalid repository"),
    ],
)
def test_bad_references(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_reference(text)


def test_has_registry_host() -> None:
    assert has_registry_host("registry.example.com/web:{version}")
    assert has_registry_host("localhost/web")
    assert has_registry_host("localhost:5000/web")
    assert not has_registry_host("web:1.0")
    assert not has_registry_host("shop/web:1.0")


def _config(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    return path


def test_credentials_forms(tmp_path: Path) -> None:
    auth = base64.b64encode(b"u:p:with:colons").decode()
    path = _config(
        tmp_path,
        {
            "auths": {
                "https://reg.io/v1/": {"auth": auth},
                "other.io:5000": {"username": "a", "password": "b"},
            }
        },
    )
    got = load_credentials(path, "reg.io")
    assert got is not None and (got.username, got.password) == ("u", "p:with:colons")
    assert "p:with" not in repr(got)
    other = load_credentials(path, "other.io:5000")
    assert other is not None and other.username == "a"
    assert load_credentials(path, "nowhere.io") is None
    legacy = _config(tmp_path, {"reg.io": {"auth": auth}})  # .dockercfg, no "auths"
    assert load_credentials(legacy, "reg.io") is not None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "not a JSON object"),
        ('{"auths": []}', "'auths' must be an object"),
        ('{"auths": {"reg.io": {"auth": "!!!"}}}', "not base64"),
        ('{"auths": {"reg.io": {"auth": "' + base64.b64encode(b"nocolon").decode() + '"}}}', ":"),
    ],
)
def test_bad_credentials_files(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=why):
        load_credentials(path, "reg.io")


def test_missing_credentials_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        load_credentials(tmp_path / "absent.json", "reg.io")


def test_challenge_parsing() -> None:
    scheme, params = challenge(
        'Bearer realm="https://auth.io/token",service="registry.io",'
        'scope="repository:a/b:pull,push",error="insufficient_scope"'
    )
    assert scheme == "bearer"
    assert params == {
        "realm": "https://auth.io/token",
        "service": "registry.io",
        "scope": "repository:a/b:pull,push",
        "error": "insufficient_scope",
    }
    assert challenge('Basic realm="Registry Realm"') == ("basic", {"realm": "Registry Realm"})
    assert challenge('Bearer realm="a\\"b"')[1]["realm"] == 'a"b'
