"""What every part of one controller shares, in one place (:class:`Context`).

The parts (leadership, watching, checking, the writers) are small classes with
explicit state; what they all read (the API client, the settings, the metrics, the
log, the random source, the shutdown flag) is handed to each as one object instead
of a long argument list each.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.control.addresses import api_server_addresses, own_addresses
from artifactcheck.control.controller_settings import ControllerSettings
from artifactcheck.control.health import Heartbeat
from artifactcheck.control.kube_transport import kube_client
from artifactcheck.control.metrics import Metrics
from artifactcheck.tenancy.admission import AdminConfig
from artifactcheck.tenancy.egress import AddressRules

__all__ = ["Context", "sleep_unless_stopped"]


@dataclass(frozen=True)
class Context:
    """One controller's shared, never reassigned, dependencies."""

    api: Any  # the Kubernetes API client (borrowed: the caller closes it)
    settings: ControllerSettings
    admin: AdminConfig  # what namespaced checks may ask for
    metrics: Metrics
    log: logging.Logger | logging.LoggerAdapter[logging.Logger]
    clock: Callable[[], float] = time.time
    rng: random.Random = field(default_factory=random.Random)
    #: Set at shutdown: nothing is acted on after, and watches end.
    stopping: threading.Event = field(default_factory=threading.Event)

    @functools.cached_property
    def heartbeat(self) -> Heartbeat:
        """/healthz: every long-lived loop beats it; stale when one is stuck."""
        return Heartbeat(max_age=max(30.0, self.settings.renew_period * 6))

    @functools.cached_property
    def kube(self) -> KubeHttp:
        """The asynchronous client every watch and write of the controller shares (one
        connection pool, on the lean transport: :mod:`.kube_transport`), made from the
        API client's configuration at first use; closed by :meth:`close_kube` once the
        tasks that use it ended."""
        return kube_client(self.api)

    async def close_kube(self) -> None:
        """Close :attr:`kube`, if it was ever made."""
        made = self.__dict__.get("kube")
        if isinstance(made, KubeHttp):
            await made.aclose()

    @functools.cached_property
    def address_rules(self) -> AddressRules:
        """Addresses no check may connect to: the API server's, our own, the denied."""
        host = getattr(getattr(self.api, "configuration", None), "host", None)
        return AddressRules(
            allow_loopback=self.admin.egress.allow_loopback,
            api_server=api_server_addresses(host),
            own=own_addresses(),
            denied=tuple(
                ipaddress.ip_network(c, strict=False) for c in self.admin.egress.deny_cidrs
            ),
        )


async def sleep_unless_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or until ``stop`` is set.

    ``asyncio.timeout``, not ``asyncio.wait_for``: on Python 3.11, a ``wait_for`` whose
    wait finished in the loop turn before a cancellation returns and drops it, and a
    cancelled loop would then run on (control/checking.py has the case).
    """
    try:
        async with asyncio.timeout(seconds):
            await stop.wait()
    except TimeoutError:
        pass
