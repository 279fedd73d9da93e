"""A build tool's file given as the release manifest: refused, naming the way out.

Nuxt's ``_nuxt/builds/latest.json``, Rsbuild's ``output.manifest`` and Encore's
``entrypoints.json`` are no format artifactcheck reads; the refusal says how to write
a release manifest (``artifactcheck manifest build DIST --version V``), as the
refusal of a Vite or webpack manifest does. Over a cap, the refusal is only that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main
from artifactcheck.manifests import ManifestLimits
from artifactcheck.model.errors import ExpectationUnavailable
from artifactcheck.release import sources

ENCORE = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks" / "encore" / "r1"
WAY_OUT = "`artifactcheck manifest build DIST --version V`"

NUXT_LATEST = {
    "id": "6f1c0a8e-4a8e-4c55-9d43-7c9d0c7b8f55",
    "timestamp": 1700000000000,
    "matcher": {"static": {}, "wildcard": {}, "dynamic": {}},
    "prerendered": [],
}
RSBUILD = {
    "allFiles": ["/static/js/index.1a2b3c4d.js", "/index.html"],
    "entries": {
        "index": {"initial": {"js": ["/static/js/index.1a2b3c4d.js"]}, "html": ["/index.html"]}
    },
}


def _verify(release: Path) -> tuple[int, str]:
    r = CliRunner().invoke(
        main, ["verify", "-t", "http://127.0.0.1:9/=1.0.0", "--release-manifest", str(release)]
    )
    return r.exit_code, r.output


@pytest.mark.parametrize("doc", [NUXT_LATEST, RSBUILD], ids=["nuxt-latest", "rsbuild"])
def test_an_unknown_release_file_names_the_way_out(tmp_path: Path, doc: object) -> None:
    release = tmp_path / "manifest.json"
    release.write_text(json.dumps(doc))
    code, out = _verify(release)
    assert code == 2, out
    assert "unknown manifest format" in out and WAY_OUT in out, out


def test_encores_entrypoints_names_the_way_out() -> None:
    code, out = _verify(ENCORE / "entrypoints.json")
    assert code == 2, out
    assert "entrypoints.json: not a usable release manifest" in out and WAY_OUT in out, out


def test_a_release_over_a_cap_is_refused_for_that_alone() -> None:
    with pytest.raises(ExpectationUnavailable) as caught:
        sources._parse_release(
            json.dumps(RSBUILD).encode(), "https://releases/1.0.0.json", ManifestLimits(max_bytes=8)
        )
    assert "cap" in str(caught.value) and WAY_OUT not in str(caught.value)


def test_a_release_url_of_an_unknown_format_names_the_way_out() -> None:
    with pytest.raises(ExpectationUnavailable) as caught:
        sources._parse_release(
            json.dumps(NUXT_LATEST).encode(), "https://releases/latest.json", ManifestLimits()
        )
    assert WAY_OUT in str(caught.value)
