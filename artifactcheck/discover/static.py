"""Bare URL instances from ``--target URL[=VERSION]`` or a CheckSpec's ``targets``.

The simplest discovery: nothing to ask, so nothing can fail here except the user's
input, which :func:`parse_target` rejects with a message naming the bad value.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import Target, format_validation_error
from artifactcheck.model.values import Instance, VersionSignal


def parse_target(text: str) -> Target:
    """``URL`` or ``URL=VERSION`` into a Target, or ConfigError naming the problem."""
    url, sep, version = text.partition("=")
    if "://" not in url:
        raise ConfigError(
            f"--target {text!r}: expected URL or URL=VERSION, e.g. http://10.0.0.7/=1.4.2"
        )
    if sep and not version:
        raise ConfigError(f"--target {text!r}: empty version after '='")
    try:
        return Target(url=url, version=version or None)
    except ValidationError as exc:
        raise ConfigError(f"--target {text!r}: {format_validation_error(exc)}") from exc


def instances_from_targets(targets: Iterable[Target]) -> list[Instance]:
    """One Instance per target; a given version becomes a ``target`` signal."""
    out = []
    seen: set[str] = set()
    for t in targets:
        name = t.name or t.url
        if name in seen:
            raise ConfigError(f"targets: {name} is listed twice")
        seen.add(name)
        signals = (VersionSignal("target", t.version),) if t.version else ()
        out.append(Instance(name=name, base_url=t.url, kind="url", signals=signals))
    return out
