"""What may be sent as an HTTP header: the one home of the name and value rules.

The settings (:mod:`artifactcheck.model.settings`, when a spec is validated) and the
fetcher (:mod:`artifactcheck.fetch.headers`, when a secret value is resolved and when a
header block is written) judge a header by these rules, so a header the spec accepts
is a header the fetcher sends, and one it refuses is refused everywhere.

RFC 9110 section 5.1: a field name is a token (tchar+); section 5.5: a field value is
visible characters, spaces and tabs (obs-text, 0x80-0xff, allowed), never CR, LF, NUL
or another control, which would end the header line and let a value forge another.
"""

from __future__ import annotations

import re
from typing import Final

#: A field name: one or more tchar (use with ``fullmatch``).
FIELD_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: One character a field value must not hold (use with ``search``).
FIELD_VALUE_BAD: Final = re.compile(r"[^\t\x20-\x7e\x80-\xff]")
#: The same rules over the bytes written on the wire.
FIELD_NAME_BYTES: Final = re.compile(FIELD_NAME.pattern.encode())
FIELD_VALUE_BAD_BYTES: Final = re.compile(FIELD_VALUE_BAD.pattern.encode())


def is_field_name(name: str) -> bool:
    """Whether ``name`` may be sent as a header name."""
    return FIELD_NAME.fullmatch(name) is not None


def is_field_value(value: str) -> bool:
    """Whether ``value`` may be sent as a header value."""
    return FIELD_VALUE_BAD.search(value) is None
