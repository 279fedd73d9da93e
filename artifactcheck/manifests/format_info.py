"""What a manifest reader says about its format, so that nothing else has to.

Every reader module carries one :class:`FormatInfo` as ``FORMAT_INFO``, beside its
``looks_like`` and ``parse``. The package's registries (the formats in detection
order, the names an instance is probed at, the formats a file name suggests, where a
format's paths are relative to, the generated docs/manifest-formats.md) are built
from these records, so a new format is its module and its test, and no list kept by
hand elsewhere can forget it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from artifactcheck.model.records import Record, field, set_in_post_init

__all__ = ["FormatInfo"]


class FormatInfo(Record):
    """One manifest format, as its reader describes it.

    ``order`` places the format in detection and in every listing (error messages, the
    configuration's choices); ``probes`` maps each path an instance is asked for when
    no manifest path is configured to its place in the probe order (lower first:
    formats that carry hashes and a version early, ambiguous names late), across all
    formats. ``file_names`` are the names the build writes it as (a name may hold a
    directory, ``.vite/manifest.json``); ``name_pattern`` is a regular expression for a
    name with a random part (Sprockets'), matched against the whole last segment.
    ``root`` says in words where the paths it lists are relative to; ``root_below`` is
    the directory the build puts the manifest in below that root (``.vite``), which is
    stripped when the manifest's location rebases its paths. ``version`` says where
    the format declares the release's version (``""``: it declares none), and
    ``version_hint`` how a release manifest of the format that declares none can be
    given one, added to the error that refuses it (``""``: only the ways every format
    has, a native manifest or a ``{version}`` template).
    """

    name: str
    title: str
    order: int
    file_names: tuple[str, ...]
    root: str
    version: str = ""
    version_hint: str = ""
    probes: Mapping[str, int] = field(default_factory=dict)
    name_pattern: str | None = None
    root_below: str | None = None

    def __post_init__(self) -> None:
        set_in_post_init(self, "probes", MappingProxyType(dict(self.probes)))

    def name_match(self, path: str) -> int:
        """How much of ``path`` (``/``-separated, no query) this format's names match,
        whole segments only: 0 for no match. The longest match wins, so
        ``.vite/manifest.json`` is Vite's and not every ``manifest.json`` reader's."""
        best = 0
        for name in self.file_names:
            if path == name or path.endswith("/" + name):
                best = max(best, len(name))
        if self.name_pattern is not None:
            last = path.rpartition("/")[2]
            if re.fullmatch(self.name_pattern, last):
                best = max(best, len(last))
        return best
