"""The version grammar: what a reported (or configured) version may look like.

A version comes from the instance itself (a label, an annotation, a ``/version`` body),
so it is hostile input, and it chooses which release manifest is loaded: substituted
into a file template, ``../release-1.1.0`` would leave the template's directory; in a
URL, ``1.0.0?a`` would change the request. So a version is used only when it matches a
strict grammar (SemVer-like and the tags real pipelines use: ``1.4.2``, ``v2``,
``2024.06.01-rc.1+build.7``, a git SHA) and is escaped anyway where it is substituted.
Pure: no I/O.
"""

from __future__ import annotations

import re

#: Letters, digits, and ``.``, ``-``, ``_``, ``+`` inside; starts and ends with a letter or
#: digit; no ``..``; at most 128 characters. No ``/``, ``\``, ``?``, ``#``, ``%``, spaces
#: or control characters can match.
VERSION_PATTERN = r"^(?!.*\.\.)[A-Za-z0-9](?:[A-Za-z0-9._+-]{0,126}[A-Za-z0-9])?$"
_VERSION = re.compile(VERSION_PATTERN)


def version_problem(text: str) -> str | None:
    """Why ``text`` is not a usable version, or None when it is one."""
    if not text:
        return "is empty"
    if len(text) > 128:
        return f"is {len(text)} characters long (at most 128)"
    if _VERSION.match(text) is None:
        return (
            f"{text!r} is not a version (letters, digits and . - _ + inside, "
            "starting and ending with a letter or digit, no '..')"
        )
    return None


def is_version(text: str) -> bool:
    """True when ``text`` matches the version grammar."""
    return version_problem(text) is None
