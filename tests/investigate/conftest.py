"""Fixtures for the on-call views: a simulated fleet on 127.96.N.x and a CLI to drive.

The fleets are the e2e suite's (real Vite builds on loopback servers, a CDN, release
manifests) on their own subnet, so the suites never share an address. ``cli`` runs the
``investigate`` and ``fleet`` commands on a local click group, as ``cli.py`` registers
them, and ``config`` writes a CheckSpec YAML whose targets carry names (web-1...), the
way a person would name them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner
from fleet_support import fleet_fixture, web_fixture

from artifactcheck.cli.investigate import fleet as fleet_command
from artifactcheck.cli.investigate import investigate as investigate_command
from artifactcheck_sim.fleet import SimFleet


@click.group()
def cli_group() -> None:
    """The two commands as cli.py registers them on ``main``."""


cli_group.add_command(investigate_command)
cli_group.add_command(fleet_command)


@dataclass
class Result:
    code: int
    out: str
    err: str


web = web_fixture("investigate")
make_fleet = fleet_fixture("investigate", instances=6, version="1.4.2")


@pytest.fixture
def config(tmp_path: Path) -> Callable[..., str]:
    """Write ``fleet.spec(**overrides)`` as a YAML file; returns its path."""
    counter = itertools.count()

    def write(fleet: SimFleet, **overrides: Any) -> str:
        path = tmp_path / f"check-{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(fleet.spec(**overrides)), encoding="utf-8")
        return str(path)

    return write


@pytest.fixture
def cli() -> Callable[..., Result]:
    def run(*args: str) -> Result:
        result = CliRunner().invoke(cli_group, list(args), catch_exceptions=False)
        return Result(result.exit_code, result.stdout, result.stderr)

    return run
