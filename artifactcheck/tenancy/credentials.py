"""Which admin credentials go with one request: :class:`CredentialScope`.

A granted credential used to go with every request of a check, the tenant's own pods
included, so a token meant for the CDN was disclosed to whoever controls the pods. Now
each request carries only the credentials whose ``hosts`` match its URL (the egress
allow-list's syntax: a host, ``host:port`` or an http(s) URL prefix), and a request to
one of the check's pods only those the admin marked ``send_to_pods``. It is decided
per request, so a redirect hop to another host is judged afresh (a CDN that redirects
to a pod does not hand the pod its token).

Pure: the header values are resolved by the caller (the controller reads the mounted
files and its environment); the pods' addresses come from the same set the egress
policy uses (:class:`artifactcheck.tenancy.egress.EgressPolicy`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from urllib.parse import urlsplit

from artifactcheck.tenancy.admission import Credential, EgressRule
from artifactcheck.tenancy.egress import Address, parse_address

_NONE: Mapping[str, str] = {}


class CredentialScope:
    """``scope(url)``: the credential headers a request to ``url`` carries.

    ``credentials`` pairs each granted credential with its resolved header values;
    ``instance_addresses`` gives the addresses of the pods the check selects now.
    """

    def __init__(
        self,
        credentials: Sequence[tuple[Credential, Mapping[str, str]]],
        instance_addresses: Callable[[], Collection[Address]],
    ) -> None:
        self.instance_addresses = instance_addresses
        #: (the rules of its hosts, to the pods too, its headers), parsed once
        self._scopes = tuple(
            (tuple(EgressRule(allow=h) for h in cred.hosts), cred.send_to_pods, dict(values))
            for cred, values in credentials
            if values
        )

    def __bool__(self) -> bool:
        """False when no credential has a header to send (nothing to decide)."""
        return bool(self._scopes)

    def __call__(self, url: str) -> Mapping[str, str]:
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            return _NONE
        addr = parse_address(host)
        to_pod = addr is not None and addr in self.instance_addresses()
        out: dict[str, str] = {}
        for rules, to_pods, values in self._scopes:
            if to_pods if to_pod else any(rule.allows_url(url) for rule in rules):
                out.update(values)
        return out or _NONE


__all__ = ["CredentialScope"]
