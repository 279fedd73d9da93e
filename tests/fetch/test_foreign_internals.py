"""No other library's internals are read or patched: httpx, httpcore and h11 are used
through their public API only (docs/http-stacks.md), so an upgrade of theirs cannot
silently change what a fetch reads.

The package's source is searched as text: a private name of httpx's stack
(``httpcore._…``, ``httpx.…._x``, h11's ``_h11_state`` or ``trailing_data``), and, in
any module that imports that stack, a class swapped on a live object (``__class__ =``).
A dotted module path in quotes is not an attribute: ``sys.modules`` keys name modules
(fetch/__init__.py leaves ``httpx._main``, httpx's optional command line, unimported).
"""

from __future__ import annotations

import re
from pathlib import Path

import artifactcheck

PACKAGE = Path(artifactcheck.__file__).parent

#: A private attribute of httpx's stack, read or written anywhere in the package.
PRIVATE = re.compile(
    r"_h11|trailing_data|httpcore\._|h11\._|\b(?:httpx|httpcore|h11)(?:\.\w+)*\._[a-z]\w*"
    r"|\._pool\b\.(?:_|connections)"
)
#: A module that imports httpx's stack.
USES_STACK = re.compile(r"^\s*(?:import|from)\s+(?:httpx|httpcore|h11)\b", re.M)
SWAP = re.compile(r"__class__\s*=(?!=)")


def offences(path: Path, text: str) -> list[str]:
    """Lines of ``text`` that reach into httpx's stack."""
    found = []
    swaps = USES_STACK.search(text) is not None
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        # a dotted module path in quotes (a sys.modules key) is not an attribute read
        code = re.sub(r"\"\w+(?:\.\w+)+\"|'\w+(?:\.\w+)+'", '""', code)
        if PRIVATE.search(code) or (swaps and SWAP.search(code)):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    return found


def test_the_package_never_reads_or_patches_httpx_internals() -> None:
    found = [
        offence
        for path in sorted(PACKAGE.rglob("*.py"))
        for offence in offences(path, path.read_text("utf-8"))
    ]
    assert found == []


def test_the_search_finds_what_it_forbids() -> None:
    """The patterns themselves, on the lines the package once had."""
    using = "import httpcore\n"
    for line in (
        "transport._pool.__class__ = _SilentReusePool",
        "connection.__class__ = _SilentConnection",
        'h11_state = getattr(connection, "_h11_state", None)',
        "if h11_state.trailing_data[0]:",
        "from httpcore._async.http11 import AsyncHTTP11Connection",
        "httpx._transports.default.AsyncHTTPTransport",
        "pool = transport._pool.connections",
    ):
        assert offences(PACKAGE / "x.py", using + line), line
    for line in ("import httpx", "transport = httpx.AsyncHTTPTransport()", "x == y.__class__"):
        assert not offences(PACKAGE / "x.py", using + line), line
