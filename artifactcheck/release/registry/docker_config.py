"""Registry credentials from a docker config JSON (a mounted dockerconfigjson Secret).

The file is read on every image read, so a rotated Secret is picked up without a
restart; only the entry for the registry being read is used, so credentials are sent
to no other host. Credential helpers cannot run in a cluster and are not used.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.records import Record


class Credentials(Record):
    username: str
    password: str

    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def __repr__(self) -> str:  # never print a password
        return f"Credentials(username={self.username!r}, password=***)"


def _auth_key(key: str) -> str:
    """``https://host:port/v1/`` and ``host:port`` name the same registry."""
    text = key.strip()
    if "://" in text:
        text = urlsplit(text).netloc
    return text.split("/", 1)[0].lower()


def load_credentials(path: str | Path, registry: str) -> Credentials | None:
    """The credentials for ``registry`` in a docker config JSON, or None for anonymous.

    The file is ``~/.docker/config.json`` or a ``kubernetes.io/dockerconfigjson``
    Secret's ``.dockerconfigjson`` (``{"auths": {host: {"auth": base64(user:pass)}}}``;
    ``username``/``password`` fields are accepted too, and the legacy ``.dockercfg``
    form without ``auths``). Credential helpers (``credsStore``) cannot run in a
    cluster and are not used.
    """
    where = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(1024 * 1024 + 1)
    except OSError as exc:
        raise ConfigError(f"registry credentials {where}: {exc.strerror or exc}") from exc
    if len(data) > 1024 * 1024:
        raise ConfigError(f"registry credentials {where}: larger than 1 MiB")
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"registry credentials {where}: not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"registry credentials {where}: not a JSON object")
    auths = doc.get("auths", doc if "auths" not in doc else None)
    if not isinstance(auths, dict):
        raise ConfigError(f"registry credentials {where}: 'auths' must be an object")
    wanted = registry.lower()
    for key, entry in auths.items():
        if not isinstance(key, str) or _auth_key(key) != wanted or not isinstance(entry, dict):
            continue
        auth = entry.get("auth")
        if isinstance(auth, str) and auth:
            try:
                user, sep, password = base64.b64decode(auth, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise ConfigError(
                    f"registry credentials {where}: auths[{key!r}].auth is not base64(user:pass)"
                ) from exc
            if not sep:
                raise ConfigError(f"registry credentials {where}: auths[{key!r}].auth has no ':'")
            return Credentials(user, password)
        name, secret = entry.get("username"), entry.get("password")
        if isinstance(name, str) and isinstance(secret, str):
            return Credentials(name, secret)
    return None


def default_docker_config() -> Path | None:
    """``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json`` when it exists."""
    base = os.environ.get("DOCKER_CONFIG")
    path = Path(base) / "config.json" if base else Path.home() / ".docker" / "config.json"
    return path if path.is_file() else None
