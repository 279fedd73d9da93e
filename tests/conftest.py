"""Hermetic test setup shared by every suite.

Proxy and SSL variables from the developer's shell must never reach a test: a proxy
would send loopback traffic elsewhere, and SSL_CERT_FILE would change what verifies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from ci_support import LEAKY_ENV, hermetic_environment

# One private Docker engine per session, whichever suites need it (tests/docker,
# tests/image, tests/registry): a plugin module, so its session fixtures exist once.
pytest_plugins = ("docker_engine",)


def _early(item: pytest.Item) -> bool:
    return callable(getattr(getattr(item, "module", None), "start_early", None))


def _in_worker(config: pytest.Config) -> bool:
    """Whether this is one of pytest-xdist's worker processes (``-n``)."""
    return hasattr(config, "workerinput")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests of a module with ``start_early`` run last: the longest overlap.

    Under ``-n`` (pytest-xdist, ``--dist loadgroup``) each module is one group, run by
    one worker, so a module's fixtures are made once; every test that needs the Docker
    engine is one group, so one worker starts one engine; and the long modules come
    first, each started by its own test, while the other workers take the rest."""
    if not _in_worker(config):
        early = [i for i in items if _early(i)]
        if early:
            items[:] = [i for i in items if not _early(i)] + early
        return
    items.sort(key=lambda i: (not _early(i), i.get_closest_marker("docker") is None))
    for item in items:
        group = "docker" if item.get_closest_marker("docker") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Give a head start to the long tests that wait on their own clock: a test module
    with a ``start_early(config, env)`` function has it called once, as soon as the run
    knows it will run one of its tests (tests/k8s/test_soak.py: five minutes that then
    overlap the rest of the suite instead of adding to it). Not under ``-n``: every
    worker collects every test, and which one runs a module is known only then."""
    if session.config.option.collectonly or _in_worker(session.config):
        return
    started: set[str] = set()
    for item in session.items:
        module = getattr(item, "module", None)
        start = getattr(module, "start_early", None)
        if callable(start) and module.__name__ not in started:
            started.add(module.__name__)
            start(session.config, hermetic_environment())


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)


#: Threads a controller starts: its event loop (sim.running), its watch and Lease pools.
_CONTROLLER_THREADS = ("controller-", "watch_", "lease_")


def _controller_threads() -> set[threading.Thread]:
    return {
        t for t in threading.enumerate() if t.is_alive() and t.name.startswith(_CONTROLLER_THREADS)
    }


@pytest.fixture(autouse=True, scope="module")
def _no_controller_outlives_its_module() -> Iterator[None]:
    """A controller a test module starts ends with that module.

    One left running (a session fixture that yielded inside its ``with``) kept relisting
    under every later test, and a later module's own thread check failed for it: this
    names the module that leaked instead.
    """
    before = _controller_threads()
    yield
    deadline = time.monotonic() + 3.0
    while (left := _controller_threads() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    names = sorted(t.name for t in left)
    assert not left, f"controller threads outlived their test module: {names}"
