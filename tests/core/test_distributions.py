"""Two distributions in one repository: the product, and the simulator beside it.

The product's wheel is what every user installs, so it must carry no fake API server,
fleet or demo builds (``sim/`` is ``artifactcheck-sim``, a distribution of its own). The
demo is the one command that needs the simulator: without it, it says how to get it.
``scripts/setup.sh`` installs both in one pip call, and again when either project changes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from artifactcheck.cli.simulator import NOT_INSTALLED

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "sim"
BUILDS = SIM / "artifactcheck_sim" / "builds"


# ----------------------------------------------------------------------------- the wheels


def _wheel(project: Path, out: Path) -> zipfile.ZipFile:
    """Build ``project``'s wheel as pip does for a user (no dependencies, no index)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(out),
            str(project),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


def _copy(names: list[str], into: Path) -> Path:
    """A copy of the checkout's ``names``: builds write build/ and *.egg-info beside them."""
    into.mkdir()
    for name in names:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(
                src,
                into / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"),
            )
        else:
            shutil.copy2(src, into / name)
    return into


def test_the_product_wheel_carries_no_simulator_and_the_sim_wheel_carries_it_all(
    tmp_path: Path,
) -> None:
    # sim/ is in the copy too: lying next to the product must not put it in the wheel
    source = _copy(["pyproject.toml", "README.md", "artifactcheck", "sim"], tmp_path / "src")
    product = _wheel(source, tmp_path / "product")
    names = product.namelist()
    assert "artifactcheck/cli/main.py" in names and "artifactcheck/py.typed" in names
    leaked = [n for n in names if "sim" in n.split("/")[0] or "builds/" in n or "apiserver" in n]
    assert leaked == [], f"the product wheel carries simulator files: {leaked}"
    assert not any(n.startswith("artifactcheck/model/") and "field" in n for n in names)
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert product.read(top_level).decode().split() == ["artifactcheck"]
    # httpcore imports sniffio on every lock it makes, and nothing else brings it any
    # more: without it each Kubernetes request paid failed imports (pyproject.toml)
    (product_metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    assert "Requires-Dist: sniffio>=1.1\n" in product.read(product_metadata).decode()

    simulator = _wheel(source / "sim", tmp_path / "sim")
    sim_names = set(simulator.namelist())
    builds = {
        "artifactcheck_sim/builds/" + p.relative_to(BUILDS).as_posix()
        for p in BUILDS.rglob("*")
        if p.is_file()
    }
    assert "artifactcheck_sim/builds/vite-r1/.vite/manifest.json" in builds
    assert builds - sim_names == set(), "every file of the demo's builds is package data"
    assert {"artifactcheck_sim/apiserver.py", "artifactcheck_sim/field_selectors.py"} <= sim_names
    (metadata,) = [n for n in sim_names if n.endswith(".dist-info/METADATA")]
    assert "Requires-Dist: artifactcheck\n" in simulator.read(metadata).decode()


def test_the_controller_image_is_built_without_the_simulator() -> None:
    """The build context is an allow-list (``*`` first) that never lets ``sim/`` in, and
    the Dockerfile copies nothing of it (nor the whole checkout)."""
    ignore = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert ignore[0] == "*"
    assert not [line for line in ignore if line.startswith("!") and "sim" in line]
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    copies = [line.split()[1:-1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    sources = [src for srcs in copies for src in srcs if not src.startswith("--")]
    assert sources, "the Dockerfile copies the product's source"
    assert not [s for s in sources if "sim" in s or s in (".", "./")], sources


# --------------------------------------------------------------------- the demo without it


def _product_only(*pythonpath: Path) -> dict[str, str]:
    """An environment where the product and its dependencies import, the simulator not.

    ``python -S`` reads no ``.pth`` file, so neither editable install in the venv is seen;
    the checkout's root gives ``artifactcheck`` and site-packages its dependencies, as an
    installed product wheel would.
    """
    site = sysconfig.get_paths()["purelib"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(ROOT), site])
    return env


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", "-m", "artifactcheck", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_the_simulator_the_demo_says_how_to_install_it_and_exits_2() -> None:
    env = _product_only()
    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import artifactcheck_sim"], env=env, capture_output=True
    )
    assert probe.returncode != 0, "the environment was meant to have no simulator"

    proc = _run("demo", "--no-kubernetes", env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"artifactcheck: error: {NOT_INSTALLED}\n"
    assert "pip install -e ./sim" in proc.stderr and "sh scripts/setup.sh demo" in proc.stderr
    assert proc.stdout == ""

    listed = _run("--help", env=env)  # the product itself works, and still offers the demo
    assert listed.returncode == 0 and " demo " in listed.stdout


def test_a_broken_simulator_is_not_reported_as_missing(tmp_path: Path) -> None:
    """A module missing *inside* an installed simulator is a broken install: its own
    traceback names the missing module, not advice to install what is installed."""
    package = tmp_path / "artifactcheck_sim"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "demo.py").write_text("import artifactcheck_missing_dependency  # noqa\n")

    proc = _run("demo", "--no-kubernetes", env=_product_only(tmp_path))
    assert proc.returncode == 1
    assert "No module named 'artifactcheck_missing_dependency'" in proc.stderr
    assert NOT_INSTALLED not in proc.stderr


# ----------------------------------------------------------------------------- setup.sh


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The files ``setup.sh install`` reads, in a checkout of their own."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "sim").mkdir()
    shutil.copy2(ROOT / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    shutil.copy2(ROOT / "pyproject.toml", repo / "pyproject.toml")
    shutil.copy2(SIM / "pyproject.toml", repo / "sim" / "pyproject.toml")
    return repo


def _install(repo: Path, *extra: str) -> list[str]:
    """Run ``setup.sh install`` against a venv whose python records each pip call."""
    venv = repo / "venv"
    log = venv / "pip.log"
    if not venv.exists():
        (venv / "bin").mkdir(parents=True)
        python = venv / "bin" / "python"
        python.write_text(f'#!/bin/sh\necho "$*" >>{log}\n')
        python.chmod(0o755)
    before = log.read_text().splitlines() if log.exists() else []
    env = {"PATH": os.environ["PATH"], "VENV": str(venv), "HOME": str(repo)}
    subprocess.run(
        ["sh", str(repo / "scripts" / "setup.sh"), "install", *extra],
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    calls = log.read_text().splitlines()[len(before) :]
    return [c for c in calls if c.startswith("-m pip install")]


def test_setup_installs_product_and_simulator_in_one_pip_call(checkout: Path) -> None:
    (dev,) = _install(checkout, "dev")
    assert dev.endswith("-e .[dev] -e ./sim")
    assert _install(checkout, "dev") == [], "nothing changed: pip does not run again"
    assert _install(checkout) == [], "a dev install serves the demo too"


def test_setup_runs_pip_again_when_either_pyproject_changes(checkout: Path) -> None:
    assert len(_install(checkout)) == 1
    with (checkout / "sim" / "pyproject.toml").open("a") as f:
        f.write("# a new dependency\n")
    (demo,) = _install(checkout)
    assert demo.endswith("-e . -e ./sim")
    with (checkout / "pyproject.toml").open("a") as f:
        f.write("# another\n")
    assert len(_install(checkout)) == 1
    assert _install(checkout) == []
