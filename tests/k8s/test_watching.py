"""How long the controller's watch loop (control/watching.py) waits after a failure:
by the project's one backoff rule (fetch/retry.retry_wait), full jitter growing with
the failures, never sooner than a 429's Retry-After. When it lists and from where it
resumes: tests/k8s/test_watching_async.py.
"""

from __future__ import annotations

import logging
import random

from artifactcheck.clients.kube import Throttled
from artifactcheck.control.context import Context
from artifactcheck.control.controller_settings import ControllerSettings
from artifactcheck.control.metrics import Metrics
from artifactcheck.control.watching import Watching
from artifactcheck.fetch.retry import full_jitter
from artifactcheck.model.errors import DependencyError
from artifactcheck.tenancy.admission import AdminConfig

BASE, CAP = 0.5, 30.0


def watching(seed: int = 7) -> Watching:
    settings = ControllerSettings(backoff_base=BASE, backoff_max=CAP)
    ctx = Context(
        None, settings, AdminConfig(), Metrics(), logging.getLogger("test"), rng=random.Random(seed)
    )
    return Watching(ctx)


def test_the_wait_is_full_jitter_growing_with_the_failures() -> None:
    w, rng = watching(), random.Random(7)
    for failures in range(1, 10):
        want = full_jitter(failures - 1, BASE, CAP, rng)
        assert w.wait_after(failures, DependencyError("cut")) == want


def test_the_wait_is_never_sooner_than_retry_after() -> None:
    w = watching()
    for failures in range(1, 6):  # ceilings 0.5 .. 8: all below the asked 9 s
        assert w.wait_after(failures, Throttled("429", retry_after=9.0)) >= 9.0
    # a late failure's jitter may exceed a short Retry-After: the longer wait wins
    waits = [w.wait_after(8, Throttled("429", retry_after=0.1)) for _ in range(200)]
    assert min(waits) >= 0.1 and max(waits) > 1.0
