"""Sort keys: versions and instance names as people read them (numbers as numbers).

One home for ordering, so the judge naming releases and the investigation listing pods
agree that ``9.0`` comes before ``10.0`` and ``web-5`` before ``web-10``.
"""

from __future__ import annotations

import re


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders ``9.0`` before ``10.0`` (numbers as numbers)."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.findall(r"\d+|[^\d.+_-]+", version)
    )


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts web-5 before web-10."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part
    )
