"""The header rules have one home (artifactcheck.model.header_rules): the spec's
validation and the fetcher's checks accept exactly the same names and values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from artifactcheck.fetch.error_kinds import HeaderRefused
from artifactcheck.fetch.headers import header_problem
from artifactcheck.fetch.http1 import header_block
from artifactcheck.model.settings import HttpSettings

#: Characters around every edge of the rules: tchar and not, controls, DEL, obs-text,
#: beyond latin-1, and the line ends a regex ``$`` would let through.
EDGES = "aZ09!#$%&'*+-.^_`|~ \t\r\n\x00\x01\x1f\x7f\x80\xff\u0100\u2028:;\"(),/<=>?@[]{}\\"
texts = st.text(alphabet=EDGES, min_size=0, max_size=6)


def _spec_accepts(name: str, value: str) -> bool:
    try:
        HttpSettings(headers={name: value})
    except ValidationError:
        return False
    return True


def _wire_accepts(name: str, value: str) -> bool:
    try:
        header_block([(name.encode("latin-1"), value.encode("latin-1"))])
    except HeaderRefused:
        return False
    return True


@given(texts, texts)
def test_the_spec_and_the_fetcher_agree_on_every_header(name: str, value: str) -> None:
    fetcher_accepts = header_problem(name, value) is None
    assert _spec_accepts(name, value) == fetcher_accepts
    if all(ord(c) <= 0xFF for c in name + value):  # what can be written as bytes
        assert _wire_accepts(name, value) == fetcher_accepts


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("X-Token", "abc def\tghi", True),
        ("X-Token", "caf\xe9", True),  # obs-text
        ("X-Token\n", "v", False),  # a trailing line end is no token
        ("X-Token", "v\n", False),  # nor part of a value
        ("X Token", "v", False),
        ("X-Token", "a\x7fb", False),
        ("X-Token", "\u2028", False),  # beyond a byte
        ("", "v", False),
    ],
)
def test_the_edges_both_entry_points_judge_alike(name: str, value: str, accepted: bool) -> None:
    assert (header_problem(name, value) is None) == accepted
    assert _spec_accepts(name, value) == accepted
