"""The one rule for a test's needs: skipped on a developer's machine, failed under CI=true
(tests/ci_support.py)."""

from __future__ import annotations

import pytest
from ci_support import tool, unmet

MISSING = "artifactcheck-no-such-tool"


@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_a_missing_tool_fails_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(BaseException) as info:  # a skip too: it must not pass as one
        tool(MISSING, "apt-get install it")
    assert info.type is pytest.fail.Exception, info
    assert f"CI=true but {MISSING} is not installed" in str(info.value)


@pytest.mark.parametrize("ci", [None, "", "false", "1"])
def test_a_missing_tool_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, ci: str | None) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    for need in (lambda: tool(MISSING, "apt-get install it"), lambda: unmet("no netns here")):
        with pytest.raises(BaseException) as info:
            need()
        assert info.type is pytest.skip.Exception, info
    assert f"{MISSING} is not installed" in str(info.value) or "no netns" in str(info.value)


def test_a_tool_is_found_in_the_venv_then_on_path_then_at_a_fixed_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert tool("python", "the venv's own").endswith("/python")  # beside sys.executable
    assert tool(MISSING, "fixed", also=("/nonexistent/x", "/bin/sh")) == "/bin/sh"
