"""The addresses the controller must never be sent to, read once at start-up.

The egress policy (:mod:`artifactcheck.tenancy.egress`) is pure; this module does the
reading it needs: the system resolver for the API server's host and the environment for
the ``kubernetes`` Service address and the pod's own addresses (downward API).
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

from artifactcheck.tenancy.egress import Address, parse_address

__all__ = ["api_server_addresses", "own_addresses", "resolve_addresses"]


def resolve_addresses(host: str) -> frozenset[Address]:
    """Every address ``host`` resolves to now (a literal is itself); empty on failure."""
    literal = parse_address(host)
    if literal is not None:
        return frozenset({literal})
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return frozenset()
    found = (parse_address(str(info[4][0])) for info in infos)
    return frozenset(a for a in found if a is not None)


def api_server_addresses(api_host: str | None) -> frozenset[Address]:
    """The API server's addresses: the client's configured host and, in a pod, the
    ``kubernetes`` Service address from the environment (both may name it)."""
    hosts: set[str] = set()
    if api_host:
        split = urlsplit(api_host if "://" in api_host else f"https://{api_host}")
        if split.hostname:
            hosts.add(split.hostname)
    env = os.environ.get("KUBERNETES_SERVICE_HOST")
    if env:
        hosts.add(env)
    out: set[Address] = set()
    for host in hosts:
        out |= resolve_addresses(host)
    return frozenset(out)


def own_addresses(environ: dict[str, str] | None = None) -> frozenset[Address]:
    """The controller pod's addresses, from ``POD_IP`` / ``POD_IPS`` (downward API)."""
    env = os.environ if environ is None else environ
    parts = [env.get("POD_IP", "")] + env.get("POD_IPS", "").split(",")
    found = (parse_address(p) for p in parts if p.strip())
    return frozenset(a for a in found if a is not None)
