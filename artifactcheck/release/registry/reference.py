"""Image references, ``host[:port]/repository[:tag][@sha256:digest]``, parsed and checked.

A reference is configuration (``release.image.reference``, expanded with the reported version),
so one that cannot be right is a ConfigError before any request. The registry host is
never defaulted (``shop/web`` would silently mean Docker Hub), and only sha256 digests
are accepted, because a pinned manifest is checked by hashing its bytes.
"""

from __future__ import annotations

import re

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.records import Record

_HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9-]+)*(?::\d{1,5})?$"
)
_HOST6 = re.compile(r"^\[[0-9A-Fa-f:.]+\](?::\d{1,5})?$")
_REPO = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ANY_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[A-Za-z0-9=_-]+$")


class ImageReference(Record):
    """``host[:port]/repo[:tag][@sha256:digest]``, parsed and validated."""

    registry: str  # host[:port], as written (the key of the docker config's "auths")
    repository: str
    tag: str | None = None
    digest: str | None = None  # "sha256:<hex>": the manifest's bytes must hash to it

    @property
    def reference(self) -> str:
        """What the manifest is fetched by: the digest when pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        out = f"{self.registry}/{self.repository}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def has_registry_host(image: str) -> bool:
    """True when the reference's first component names a registry host.

    The Docker convention: a first component with a ``.`` or a ``:``, or ``localhost``,
    is a host (``registry.example.com/web``, ``localhost:5000/web``); ``shop/web`` is a
    Docker Hub repository, which this module does not default to.
    """
    first, slash, _ = image.strip().partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def parse_reference(image: str) -> ImageReference:
    """Parse an image reference, or ConfigError saying what is wrong with it."""
    text = image.strip()
    if not text:
        raise ConfigError("image reference: must not be empty")
    name, at, digest = text.partition("@")
    if at:
        if not _ANY_DIGEST.match(digest):
            raise ConfigError(f"image {image!r}: malformed digest {digest!r}")
        if not DIGEST.match(digest):
            raise ConfigError(
                f"image {image!r}: only sha256 digests (64 lowercase hex) are supported"
            )
    if not has_registry_host(name):
        raise ConfigError(
            f"image {image!r}: no registry host (write host[:port]/repository[:tag], e.g. "
            "registry.example.com/web:1.0; Docker Hub names are not defaulted)"
        )
    host, _, rest = name.partition("/")
    if not (_HOST.match(host) or _HOST6.match(host)):
        raise ConfigError(f"image {image!r}: invalid registry host {host!r}")
    repo, tag = rest, None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = rest.rpartition(":")
        if not _TAG.match(tag):
            raise ConfigError(f"image {image!r}: invalid tag {tag!r}")
    if not _REPO.match(repo) or len(repo) > 255:
        raise ConfigError(
            f"image {image!r}: invalid repository {repo!r} (lowercase letters, digits, "
            "separators . _ __ - and /)"
        )
    return ImageReference(registry=host, repository=repo, tag=tag, digest=digest or None)
