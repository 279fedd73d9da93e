"""One rule for every file the tool writes (clients.filesystem.unwritable): a report is
written in place, the pins file is replaced by a rename, so only the latter needs its
directory writable when the file exists. Permissions are simulated: root may write
anywhere, and the suite runs as root in CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from artifactcheck.clients.filesystem import unwritable


@pytest.mark.parametrize(
    ("exists", "file_ok", "dir_ok", "in_place", "replaced"),
    [
        (False, True, True, None, None),
        (False, True, False, "directory {d} is not writable", "replaced, never truncated"),
        (True, True, True, None, None),
        (True, True, False, None, "replaced, never truncated"),
        (True, False, True, "is not writable", "is not writable"),
    ],
    ids=["new", "new-locked-dir", "existing", "existing-locked-dir", "read-only-file"],
)
def test_why_a_file_cannot_be_written(
    exists: bool,
    file_ok: bool,
    dir_ok: bool,
    in_place: str | None,
    replaced: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = tmp_path / "out.json"
    if exists:
        target.write_text("{}")
    allowed = {str(target): file_ok, str(tmp_path): dir_ok}
    monkeypatch.setattr(os, "access", lambda p, _mode: allowed[str(p)])
    for want, got in (
        (in_place, unwritable(target)),
        (replaced, unwritable(target, replaced=True)),
    ):
        if want is None:
            assert got is None
        else:
            assert got is not None and want.format(d=tmp_path) in got, got


def test_a_directory_or_a_missing_directory(tmp_path: Path) -> None:
    assert unwritable(tmp_path) == "is a directory"
    assert unwritable(tmp_path / "no" / "x.json", replaced=True) == (
        f"directory {tmp_path / 'no'} does not exist"
    )
