"""Where the controller may connect on behalf of an ArtifactCheck.

A check's author chooses URLs (a CDN, release manifests) and, through the pods it
selects, addresses. The controller connects from *its* network position: next to the
API server, the cloud metadata service and its own probe ports. This module decides,
for every new connection and after the name was resolved once, whether that address
may be reached; the fetcher then connects to exactly the address that was checked, so
a DNS answer that changes between the check and the connect (rebinding) gains nothing.

Two kinds of destination, two rules:

* **instances**: the pods the check selected. Their IPs come from the API server, not
  from the author, so no allow-list applies; the address rules still do (a
  ``hostNetwork`` pod reports its node's address, a pod may report anything kubelet
  was told).
* **sources**: release manifests and the CDN, named by the author. They must also be
  on the admin's allow-list (a host, or a URL prefix whose scheme, host and port
  count here; the path part is checked at admission, see :mod:`artifactcheck.tenancy.admission`).

Pure: the addresses it needs (the API server's, the controller's own) are read at
start-up by :mod:`artifactcheck.control.addresses` and handed in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection, Iterable
from urllib.parse import urlsplit

from artifactcheck.model.records import Record, field

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Cloud instance-metadata endpoints (AWS, GCP, Azure, OpenStack, ... on IPv4; AWS on
#: IPv6). They answer with credentials to whoever asks from the node.
METADATA_ADDRESSES: tuple[Address, ...] = (
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("fd00:ec2::254"),
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
)

#: Link-local networks: metadata services, node-local agents; never a pod or a CDN.
LINK_LOCAL: tuple[Network, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
)

#: What :func:`EgressPolicy.refusal` says to a connection; fetch reports it verbatim.
Egress = Callable[[str, str, int], "str | None"]


def parse_address(text: str) -> Address | None:
    """An IP address from text (IPv6 zone and brackets tolerated), IPv4-mapped IPv6
    unwrapped so ``::ffff:169.254.169.254`` is judged as the IPv4 address it is."""
    raw = text.strip().strip("[]").split("%", 1)[0]
    try:
        addr = ipaddress.ip_address(raw)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


class HostRule(Record):
    """A destination a source URL may connect to: a host name or literal, and a port
    (None: any port of that host)."""

    host: str
    port: int | None = None

    @classmethod
    def parse(cls, entry: str) -> HostRule:
        """``cdn.example.com``, ``cdn.example.com:8443`` or a URL prefix's authority."""
        if "://" in entry:
            split = urlsplit(entry)
            default = {"http": 80, "https": 443}.get(split.scheme)
            return cls(host=(split.hostname or "").lower(), port=split.port or default)
        split = urlsplit(f"//{entry}")
        return cls(host=(split.hostname or "").lower(), port=split.port)

    def matches(self, host: str, port: int) -> bool:
        """True when a connection to ``host:port`` is what this rule allows."""
        wanted = host.strip("[]").lower().rstrip(".")
        return wanted == self.host.rstrip(".") and (self.port is None or self.port == port)


class AddressRules(Record):
    """The rules every connection obeys, whoever named its destination."""

    allow_loopback: bool = False
    api_server: frozenset[Address] = frozenset()
    own: frozenset[Address] = frozenset()
    denied: tuple[Network, ...] = ()

    def refusal(self, ip: str) -> str | None:
        """Why a connection to ``ip`` is refused, or None when the address is fine."""
        addr = parse_address(ip)
        if addr is None:
            return f"{ip!r} is not an IP address (connections go to checked addresses only)"
        if addr in METADATA_ADDRESSES:
            return f"{addr} is a cloud metadata address"
        if any(addr in net for net in LINK_LOCAL) or addr.is_link_local:
            return f"{addr} is link-local"
        if addr.is_unspecified:
            return f"{addr} is the unspecified address"
        if addr.is_multicast:
            return f"{addr} is a multicast address"
        if isinstance(addr, ipaddress.IPv4Address) and addr == ipaddress.IPv4Address(
            "255.255.255.255"
        ):
            return f"{addr} is the broadcast address"
        if addr in self.api_server:
            return f"{addr} is an address of the Kubernetes API server"
        if addr in self.own:
            return f"{addr} is an address of the controller itself"
        if addr.is_loopback and not self.allow_loopback:
            return f"{addr} is a loopback address (not allowed by the admin configuration)"
        for net in self.denied:
            if addr.version == net.version and addr in net:
                return f"{addr} is in {net}, denied by the admin configuration"
        return None


class EgressPolicy(Record):
    """The egress decision for one check's fetcher: ``policy(host, ip, port)``.

    ``instance_addresses`` returns the addresses (pod IPs, see :func:`addresses_of`) of
    the instances the check selected right now, as a set: it is asked on every new
    connection, so a lookup must not cost a pass over thousands of pods. A connection to
    one of them, at that very address, is an instance connection. Anything else is a
    source connection and needs an allow-list rule.
    """

    rules: AddressRules
    sources: tuple[HostRule, ...] = ()
    instance_addresses: Callable[[], Collection[Address]] = field(default=lambda: frozenset())

    def __call__(self, host: str, ip: str, port: int) -> str | None:
        """The refusal reason for a new connection to ``host`` at ``ip:port``, or None."""
        reason = self.rules.refusal(ip)
        if reason is not None:
            return f"egress to {host}:{port} refused: {reason}"
        if _is_instance(host, ip, self.instance_addresses()):
            return None
        if any(rule.matches(host, port) for rule in self.sources):
            return None
        return (
            f"egress to {host}:{port} refused: neither a pod this check selected nor on "
            "the admin's egress allow-list"
        )


def addresses_of(hosts: Iterable[str]) -> frozenset[Address]:
    """The addresses among ``hosts`` (names that are not an IP literal are dropped)."""
    found = (parse_address(h) for h in hosts)
    return frozenset(a for a in found if a is not None)


def _is_instance(host: str, ip: str, addresses: Collection[Address]) -> bool:
    """A connection to a selected pod: the URL names the pod IP and goes to it."""
    target, wanted = parse_address(host), parse_address(ip)
    if target is None or target != wanted:
        return False
    return target in addresses


__all__ = [
    "LINK_LOCAL",
    "METADATA_ADDRESSES",
    "AddressRules",
    "Egress",
    "EgressPolicy",
    "HostRule",
    "addresses_of",
    "parse_address",
]
