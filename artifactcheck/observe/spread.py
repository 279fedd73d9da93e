"""How many processes observe a run, and what each may use of its limits.

Every run asks this (:func:`processes_for`), and most answer one: the plan is kept
apart from the processes themselves (:mod:`artifactcheck.observe.pool`, with
``multiprocessing``, ``pickle`` and the workers' plumbing), which a run imports only
when it does use them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from artifactcheck.fetch import urls
from artifactcheck.model.records import Record
from artifactcheck.model.settings import CheckSpec, HttpSettings, RetrySettings
from artifactcheck.model.values import Instance

__all__ = [
    "MAX_AUTO",
    "MIN_PER_PROCESS",
    "Shares",
    "can_fork",
    "cores",
    "host_groups",
    "processes_for",
    "shares",
    "split_by_host",
]

#: Fewer instances than this per process and a fork does not pay (judging, the CDN and
#: the report stay in one process whatever the split).
MIN_PER_PROCESS = 100
#: Processes used at most when the number is not given.
MAX_AUTO = 4


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def can_fork() -> tuple[bool, str]:
    """Whether observing may fork now, and why not."""
    if not hasattr(os, "fork"):
        return False, "this platform cannot fork"
    if threading.active_count() > 1:
        return False, f"{threading.active_count() - 1} other thread(s) run in this process"
    return True, ""


def processes_for(instances: int, hosts: int, *, asked: int | None) -> int:
    """How many processes observe ``instances`` on ``hosts`` distinct hosts.

    ``asked``: the user's number (1: this process only), else one per core, at most
    :data:`MAX_AUTO`, and only with :data:`MIN_PER_PROCESS` instances for each. Never
    more processes than hosts: a host is observed by one process only.
    """
    if asked is not None:
        wanted = asked
    else:
        wanted = min(cores(), MAX_AUTO, instances // MIN_PER_PROCESS)
    return max(1, min(wanted, hosts))


class Shares(Record):
    """What each of ``count`` processes may use of the run's limits."""

    count: int
    http: HttpSettings  # max_connections shared out
    retry: RetrySettings  # the budget's minimum shared out (its ratio is per request)


def shares(spec: CheckSpec, count: int) -> Shares:
    """Each process's share of the run's limits: together, never more than one process."""
    http = spec.http.model_copy(
        update={"max_connections": max(1, spec.http.max_connections // count)}
    )
    retry = spec.retry.model_copy(update={"budget_min": spec.retry.budget_min // count})
    return Shares(count=count, http=http, retry=retry)


def host_groups(instances: Sequence[Instance]) -> list[list[Instance]]:
    """The instances of each host together, the largest groups first (a long one is
    not left to the end). A host is what the fetcher limits per host
    (:func:`urls.host_key`: ``http://a/`` and ``http://a:80/`` are one host)."""
    by_host: dict[str, list[Instance]] = {}
    for instance in instances:
        by_host.setdefault(urls.host_key(instance.base_url), []).append(instance)
    return sorted(by_host.values(), key=len, reverse=True)


def split_by_host(instances: Sequence[Instance], count: int) -> list[list[Instance]]:
    """``count`` fixed slices, each host's instances in one, the largest hosts placed
    first on the slice with the fewest instances (so slices are as even as hosts
    allow): the controller's observing processes, which last longer than one run
    (``verify`` hands hosts out as its processes are free: ``observe.claims``)."""
    slices: list[list[Instance]] = [[] for _ in range(count)]
    for group in host_groups(instances):
        lightest = min(range(count), key=lambda i: len(slices[i]) + len(group))
        slices[lightest].extend(group)
    return slices
