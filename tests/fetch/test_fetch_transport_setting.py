"""``http.transport``: every request goes over our own HTTP/1.1 transport.

'http1' and its old name 'auto' are read; 'httpx' (httpx's own pool, no longer
offered) is a configuration error naming the field and what to write instead, before
any request is sent, never a run silently on another transport than the one named.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from artifactcheck.cli.main import main
from artifactcheck.model.settings import HttpSettings, load_spec
from artifactcheck_sim.web import Site, WebFleet


@pytest.mark.parametrize("name", ["http1", "auto"])
def test_http1_and_its_old_name_are_read(name: str) -> None:
    assert HttpSettings(transport=name).transport == "http1"  # type: ignore[arg-type]


def test_httpx_is_refused_with_what_to_write_instead() -> None:
    with pytest.raises(ValidationError) as caught:
        HttpSettings(transport="httpx")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "'httpx' (httpx's own pool) is no longer a transport" in message
    assert "remove the field, or set 'http1'" in message


def test_a_spec_naming_httpx_is_a_configuration_error() -> None:
    with pytest.raises(Exception, match=r"http\.transport") as caught:
        load_spec({"http": {"transport": "httpx"}, "targets": [{"url": "http://127.0.0.9/"}]})
    assert "no longer a transport" in str(caught.value)


def test_verify_with_httpx_in_the_config_exits_2_before_any_request(
    fleet: WebFleet, host: Callable[[], str], tmp_path: Path
) -> None:
    base = fleet.add(Site(version="1.4.1"), host())
    config = tmp_path / "check.yaml"
    config.write_text("http:\n  transport: httpx\n", "utf-8")
    result = CliRunner().invoke(
        main, ["verify", "--target", base, "--config", str(config)], catch_exceptions=False
    )
    assert result.exit_code == 2, result.output
    assert "http.transport" in result.stderr and "no longer a transport" in result.stderr
    assert fleet.server(base).connections_total == 0
