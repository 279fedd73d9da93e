#!/bin/sh
# Set up artifactcheck in a virtual environment in this checkout, then run something.
#
#   sh scripts/setup.sh demo [DEMO OPTIONS]    # the simulated fleet, checked and explained
#   sh scripts/setup.sh test [PYTEST ARGS]     # the test needs, then python -m pytest -q -n auto
#   sh scripts/setup.sh install [dev]          # only the virtual environment
#   sh scripts/setup.sh run CMD [ARGS]         # CMD from the virtual environment
#
# Works on a fresh Debian 12/13 or Ubuntu 24.04 that has nothing but python3:
#   * the virtual environment is ./.venv (git-ignored; VENV=DIR to choose another);
#     when `python3 -m venv` cannot make one (Debian ships ensurepip separately),
#     the package python3-venv is installed with apt-get (as root, else with sudo);
#   * the package and its simulator (./sim, the artifactcheck-sim distribution the demo
#     and the tests run against) are installed into it, editable, in one pip call so that
#     pip never looks for artifactcheck on the package index: `. ./sim` for the demo,
#     `.[dev] ./sim` for tests;
#   * `test` also installs the system packages the Docker tests need (.ci/docker.sh:
#     docker.io, busybox-static, iptables, iproute2, mmdebstrap), as root or with sudo.
# Nothing is ever written to the system Python (PEP 668). Re-running is cheap: the
# environment is reused, and pip runs again only when pyproject.toml or
# sim/pyproject.toml changed.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
venv=${VENV:-$repo/.venv}
python=${PYTHON:-python3}

say() { printf 'setup: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

# Run a command as root: directly when we are root, else through sudo.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root for: $* (run as root, or install sudo)"
    fi
}

apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "no apt-get: install $* yourself, then re-run"
    say "apt-get install $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "$@" >/dev/null
}

venv_ok() {
    [ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip --version >/dev/null 2>&1
}

make_venv() {
    venv_ok && return 0
    command -v "$python" >/dev/null 2>&1 || die "no $python: apt-get install python3"
    "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || die "$python is $("$python" -V 2>&1); artifactcheck needs Python >= 3.11"
    say "creating the virtual environment $venv"
    if ! "$python" -m venv --clear "$venv" >/dev/null 2>&1; then
        # Debian/Ubuntu: venv's ensurepip lives in python3-venv (python3.X-venv).
        rm -rf "$venv"
        apt_install python3-venv
        "$python" -m venv --clear "$venv" || die "$python -m venv failed even with python3-venv"
    fi
    venv_ok || die "$venv has no working pip"
}

# install "" | "dev": pip install -e .[extra] -e ./sim, skipped when already done for
# these two pyproject.toml files
install() {
    extra=$1
    make_venv
    spec=.
    [ -n "$extra" ] && spec=".[$extra]"
    stamp="$venv/.artifactcheck-installed"
    projects="$(cksum <pyproject.toml) $(cksum <sim/pyproject.toml)"
    want="$extra $projects"
    # a dev install also satisfies the demo's needs
    if [ -f "$stamp" ]; then
        have=$(cat "$stamp")
        [ "$have" = "$want" ] && return 0
        [ -z "$extra" ] && [ "$have" = "dev $projects" ] && return 0
    fi
    say "installing $spec and ./sim into $venv (pip, from the package index)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" -e ./sim
    printf '%s\n' "$want" >"$stamp"
}

# Byte-compile the checkout's own modules, as pip does for a package it installs (an
# editable install leaves them as source): on a machine that sets
# PYTHONDONTWRITEBYTECODE, every process would otherwise compile them again, 0.3-0.7 s
# for each controller or CLI the tests start. Only missing or stale files are written.
compile_sources() {
    "$venv/bin/python" -m compileall -q -j 0 artifactcheck sim/artifactcheck_sim >/dev/null \
        || say "note: byte-compiling the sources failed (they run from source)"
}

cmd=${1:-install}
[ $# -gt 0 ] && shift
case $cmd in
    demo)
        install ""
        compile_sources
        exec "$venv/bin/artifactcheck" demo "$@"
        ;;
    test)
        if [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; then
            as_root bash "$repo/.ci/docker.sh"
        else
            say "not root and no sudo: no Docker engine installed (the Docker tests skip)"
        fi
        install dev
        compile_sources
        # one worker per core (pytest-xdist): each test module, and every test of
        # the Docker engine, stays on one worker (tests/conftest.py)
        exec "$venv/bin/python" -m pytest -q -n auto --dist loadgroup "$@"
        ;;
    install)
        install "${1:-}"
        say "ready: . $venv/bin/activate (or run $venv/bin/artifactcheck)"
        ;;
    run)
        [ $# -gt 0 ] || die "usage: sh scripts/setup.sh run CMD [ARGS]"
        install dev
        prog=$1
        shift
        if [ -x "$venv/bin/$prog" ]; then prog="$venv/bin/$prog"; fi
        exec "$prog" "$@"
        ;;
    -h | --help | help)
        sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
        ;;
    *)
        die "unknown command '$cmd' (demo, test, install [dev], run CMD)"
        ;;
esac
