"""Holding every new connection to the egress policy, at the address it will use.

The policy (:data:`artifactcheck.tenancy.egress.Egress`, ``policy(host, ip, port) ->
reason | None``) judges an address; here a host name is resolved once and the very
address the policy approved is the one connected to, so a DNS answer that changes
between the check and the connect (rebinding) cannot send a request elsewhere. Both
the HTTP/1.1 transport and the certificate probe connect through this.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import TYPE_CHECKING

from artifactcheck.fetch.error_kinds import EgressRefused

if TYPE_CHECKING:  # a tenant's policy module (its address sets) loads where one is made
    from artifactcheck.tenancy.egress import Egress

__all__ = ["approved_address"]


async def approved_address(host: str, port: int, policy: Egress) -> str:
    """The one IP address a new connection to ``host`` may use.

    An IP literal is checked as it is. Raises :class:`EgressRefused` when the policy
    refuses (an exception from the policy refuses too: it never lets traffic through),
    and OSError when the name has no address.
    """
    try:
        ipaddress.ip_address(host)
        ip = host
    except ValueError:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
        if not infos:
            raise OSError(f"{host} has no address") from None
        ip = str(infos[0][4][0])
    try:
        reason = policy(host, ip, port)
    except Exception as exc:  # noqa: BLE001 - a failing policy refuses
        reason = f"the egress policy failed ({type(exc).__name__})"
    if reason is not None:
        where = host if ip == host else f"{host} ({ip})"
        raise EgressRefused(f"connection to {where} port {port} refused: {reason}")
    return ip
