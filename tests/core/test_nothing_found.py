"""``prefix.nothing_found`` over every mix of answers: "nothing of the release is served
here" holds exactly when no release file fetched is found and at least one is absent,
whatever the order of the answers and wherever the entry page is among them."""

from __future__ import annotations

import itertools

import pytest

from artifactcheck.judge import prefix
from artifactcheck.model.values import Fetched, Manifest, ManifestEntry

A, B, C, PAGE, OTHER = (c * 64 for c in "abcde")
RELEASE = Manifest(
    format="native",
    version="1.0.0",
    files={
        p: ManifestEntry(path=p, hashes={"sha256": h}) for p, h in {"a.js": A, "b.js": B}.items()
    },
)


def answer(path: str, kind: str) -> Fetched:
    url = f"http://i1/{path}"
    if kind == "timeout":
        return Fetched(url=url, path=path, error="timeout", error_kind="timeout")
    if kind in ("404", "410", "500"):
        return Fetched(url=url, path=path, status=int(kind))
    sha = {"found": A, "differs": OTHER, "page": PAGE, "html": OTHER}[kind]
    headers = {"content-type": "text/html; charset=utf-8"} if kind == "html" else {}
    return Fetched(url=url, path=path, status=200, hashes={"sha256": sha}, headers=headers)


KINDS = ("found", "differs", "404", "410", "500", "page", "html", "timeout")
#: the site's entry page as served (its bytes: what a fallback answers), before, after
#: or among the release files, or not fetched at all
PAGE_AT = ("first", "last", "absent")


def cases() -> list[tuple[dict[str, Fetched], bool]]:
    out = []
    for first, second in itertools.product(KINDS, repeat=2):
        for at in PAGE_AT:
            answers = [("a.js", answer("a.js", first)), ("b.js", answer("b.js", second))]
            answers.insert(1, ("extra.js", answer("extra.js", "404")))  # not a release file
            entry = (
                "index.html",
                Fetched(url="", path="index.html", status=200, hashes={"sha256": PAGE}),
            )
            if at == "first":
                answers.insert(0, entry)
            elif at == "last":
                answers.append(entry)
            page_known = at != "absent"
            found = [
                k in ("found", "differs") or (k == "page" and not page_known)
                for k in (first, second)
            ]
            absent = [
                k in ("404", "410") or k == "html" or (k == "page" and page_known)
                for k in (first, second)
            ]
            out.append((dict(answers), not any(found) and any(absent)))
    return out


@pytest.mark.parametrize(("assets", "expected"), cases())
def test_nothing_found_is_no_file_found_and_one_absent(
    assets: dict[str, Fetched], expected: bool
) -> None:
    assert prefix.nothing_found(assets, RELEASE) is expected


def test_no_release_file_among_the_answers_is_not_nothing_found() -> None:
    assert prefix.nothing_found({"extra.js": answer("extra.js", "404")}, RELEASE) is False
    assert prefix.nothing_found({}, RELEASE) is False
