"""Which instance the user meant: a name, a URL or a unique prefix, and a clear error naming
the ones there are when it matches none.
"""

from __future__ import annotations

from collections.abc import Sequence

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.values import (
    Instance,
)


def _norm_url(url: str) -> str:
    """Base URLs always end with '/', so compare URLs the same way."""
    return url if url.endswith("/") else url + "/"


def find_target(ref: str, instances: Sequence[Instance]) -> Instance | None:
    """The instance a TARGET names: URL, name, ``namespace/pod``, pod or container name.

    Returns None when nothing matches (the caller may add a URL as a new target) and
    raises ConfigError when the name is ambiguous, so the user is told which to pick.
    """
    if "://" in ref:
        url = _norm_url(ref)
        return next((i for i in instances if i.base_url == url or i.name == ref), None)
    exact = [i for i in instances if i.name == ref]
    if exact:
        return exact[0]
    loose = [
        i
        for i in instances
        if i.name.rsplit("/", 1)[-1] == ref
        or (i.uid is not None and len(ref) >= 12 and i.uid.startswith(ref))
    ]
    if len(loose) > 1:
        names = ", ".join(sorted(i.name for i in loose)[:10])
        raise ConfigError(f"TARGET {ref!r} is ambiguous: {names}; give namespace/name")
    return loose[0] if loose else None


def unknown_target(ref: str, instances: Sequence[Instance]) -> ConfigError:
    """The error for a TARGET that names no instance, listing what there is."""
    if not instances:
        return ConfigError(
            f"TARGET {ref!r} is not a URL and no instances were found to look it up in: "
            "give --target, --selector, --docker-label or --config"
        )
    names = sorted(i.name for i in instances)
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return ConfigError(f"TARGET {ref!r} matches no instance; known: {', '.join(names[:10])}{more}")
