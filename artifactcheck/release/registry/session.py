"""One image read over the distribution API: GETs with retries, auth and redirects.

The registry is an outside service, so each rule here is about what it may make this
process do: authenticate only as its ``WWW-Authenticate`` challenge asks (Basic, or a
Bearer token from its realm), send credentials only to its own origin, follow redirects
by hand and never down to plain HTTP unless the target is listed insecure, retry 429,
5xx and connection errors by the project's one backoff rule, and stop at the deadline.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlencode, urljoin, urlsplit

import httpx

from artifactcheck.fetch.retry import parse_retry_after, retry_wait
from artifactcheck.model.errors import ConfigError, ExpectationUnavailable
from artifactcheck.release.registry.client_options import RegistryOptions
from artifactcheck.release.registry.docker_config import load_credentials
from artifactcheck.release.registry.reference import ImageReference

logger = logging.getLogger("artifactcheck.release.registry")


RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')


def challenge(header: str) -> tuple[str, dict[str, str]]:
    """The scheme and parameters of a ``WWW-Authenticate`` header (the first challenge)."""
    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    for match in _CHALLENGE_PARAM.finditer(rest):
        value = match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params[match.group(1).lower()] = value
    return scheme.lower(), params


def is_loopback(host: str) -> bool:
    name = urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Session:
    """One image read: an httpx client, the credentials, the token, the deadline."""

    def __init__(
        self,
        ref: ImageReference,
        options: RegistryOptions,
        *,
        transport: httpx.BaseTransport | None,
        sleep: Callable[[float], None],
        rng: random.Random,
    ) -> None:
        self.ref = ref
        self.options = options
        self.sleep = sleep
        self.rng = rng
        self.scheme = "http" if options.plain_http(ref.registry) else "https"
        self.origin = f"{self.scheme}://{ref.registry}".lower()  # as _origin() writes it
        self.deadline = time.monotonic() + options.limits.deadline
        config = options.docker_config
        self.credentials = load_credentials(config, ref.registry) if config else None
        self.authorization: str | None = None
        self.where = f"registry {ref.registry}"
        self.client = httpx.Client(
            verify=ssl_context(options.ca_bundle),
            timeout=httpx.Timeout(
                options.read_timeout, connect=options.connect_timeout, pool=options.connect_timeout
            ),
            follow_redirects=False,  # followed by hand: scheme and credentials checked
            trust_env=False,  # a proxy from the environment is not asked for
            transport=transport,
            headers={"User-Agent": "artifactcheck-registry", "Accept-Encoding": "identity"},
        )

    def close(self) -> None:
        self.client.close()

    def url(self, path: str) -> str:
        return f"{self.origin}/v2/{self.ref.repository}/{path}"

    def time_left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ExpectationUnavailable(
                f"{self.where}: reading {self.ref} took longer than "
                f"{self.options.limits.deadline:g}s"
            )
        return left

    # one GET, with retries, authentication and redirects

    def get(self, path: str, *, accept: str | None = None) -> httpx.Response:
        """A streamed GET of ``/v2/<repo>/<path>``: 2xx, or ExpectationUnavailable."""
        url = self.url(path)
        authed = False
        while True:
            response = self._follow(url, accept)
            if response.status_code == 401 and not authed:
                header = response.headers.get("WWW-Authenticate", "")
                response.close()
                self.authorization = self._authenticate(header)
                authed = True
                continue
            if response.is_success:
                return response
            status = response.status_code
            body = _short_body(response)
            response.close()
            raise ExpectationUnavailable(f"{self.where}: GET {url}: {_explain(status, body, self)}")

    def _follow(self, url: str, accept: str | None) -> httpx.Response:
        """Send, following up to 5 redirects by hand; never downgrade, never leak auth."""
        origin = self.origin
        for _ in range(6):
            headers = {}
            if accept:
                headers["Accept"] = accept
            same = _origin(url) == origin
            if same and self.authorization:
                headers["Authorization"] = self.authorization
            response = self._send(url, headers)
            if not response.is_redirect:
                return response
            location = response.headers.get("Location", "")
            response.close()
            target = urljoin(url, location)
            self._refuse_unless_allowed(
                target,
                not_a_url=f"redirect to {location!r} refused",
                plain_http=f"redirect to plain-HTTP {target}",
            )
            url = target
        raise ExpectationUnavailable(f"{self.where}: more than 5 redirects")

    def _refuse_unless_allowed(self, url: str, *, not_a_url: str, plain_http: str) -> None:
        """A URL the registry sends us to (a redirect, a token realm) must be http(s),
        and plain HTTP only to a host listed insecure."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ExpectationUnavailable(f"{self.where}: {not_a_url}")
        if parts.scheme == "http" and not self.options.plain_http(parts.netloc):
            raise ExpectationUnavailable(f"{self.where}: {plain_http} refused (not in insecure)")

    def _send(self, url: str, headers: Mapping[str, str]) -> httpx.Response:
        """One request, retried on 429/5xx/connection errors with full-jitter backoff."""
        attempts = max(1, self.options.attempts)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            self.time_left()
            try:
                request = self.client.build_request("GET", url, headers=headers)
                response = self.client.send(request, stream=True)
            except httpx.TransportError as exc:
                if last:
                    raise ExpectationUnavailable(
                        f"{self.where}: GET {url}: {_transport_reason(exc)} "
                        f"(after {attempts} attempts)"
                    ) from exc
                self._backoff(attempt, None)
                continue
            if response.status_code in RETRY_STATUSES and not last:
                retry_after = response.headers.get("Retry-After")
                response.close()
                self._backoff(attempt, retry_after)
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int, retry_after: str | None) -> None:
        delay = retry_wait(
            attempt,
            base=self.options.backoff,
            cap=self.options.max_backoff,
            rng=self.rng,
            retry_after=parse_retry_after(retry_after),
            retry_after_cap=self.options.max_backoff,
        )
        self.sleep(min(delay, max(0.0, self.deadline - time.monotonic())))

    def _authenticate(self, header: str) -> str:
        """The Authorization value the registry's 401 challenge asks for."""
        scheme, params = challenge(header)
        creds = self.credentials
        if scheme == "basic":
            if creds is None:
                raise ExpectationUnavailable(
                    f"{self.where}: needs credentials (Basic) and the docker config has none "
                    f"for {self.ref.registry}"
                )
            if self.scheme == "http" and not is_loopback(self.ref.registry):
                logger.warning("sending Basic credentials over plain HTTP to %s", self.where)
            return creds.basic()
        if scheme == "bearer":
            return "Bearer " + self._token(params)
        raise ExpectationUnavailable(
            f"{self.where}: 401 with an unsupported challenge {header[:100]!r}"
        )

    def _token(self, params: Mapping[str, str]) -> str:
        """The Bearer token flow: GET realm?service=...&scope=..., Basic if we have creds."""
        realm = params.get("realm", "")
        self._refuse_unless_allowed(
            realm,
            not_a_url=f"token realm {realm!r} is not a URL",
            plain_http=f"plain-HTTP token realm {realm}",
        )
        query: dict[str, str] = {}
        if params.get("service"):
            query["service"] = params["service"]
        query["scope"] = params.get("scope") or f"repository:{self.ref.repository}:pull"
        headers = {"Accept": "application/json"}
        if self.credentials is not None:
            query["account"] = self.credentials.username
            headers["Authorization"] = self.credentials.basic()
        url = realm + ("&" if urlsplit(realm).query else "?") + urlencode(query)
        response = self._send(url, headers)
        try:
            if not response.is_success:
                body = _short_body(response)
                raise ExpectationUnavailable(
                    f"{self.where}: token endpoint {realm}: HTTP {response.status_code}"
                    + (" (credentials refused)" if response.status_code in (401, 403) else "")
                    + (f": {body}" if body else "")
                )
            data = read_capped(response, 1024 * 1024, f"token from {realm}")
        finally:
            response.close()
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise ExpectationUnavailable(f"{self.where}: token endpoint sent no JSON") from exc
        token = doc.get("token") or doc.get("access_token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token or any(c.isspace() for c in token):
            raise ExpectationUnavailable(f"{self.where}: token endpoint sent no token")
        return token


def ssl_context(ca_bundle: str | Path | None) -> ssl.SSLContext:
    """System CAs (certifi where the image has none), plus the given bundle: as fetch."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    paths = ssl.get_default_verify_paths()
    if not any(p and os.path.exists(p) for p in (paths.cafile, paths.capath)):
        import certifi

        ctx.load_verify_locations(cafile=certifi.where())
    if ca_bundle is not None:
        try:
            ctx.load_verify_locations(cafile=str(ca_bundle))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"registry CA bundle {ca_bundle}: cannot load: {exc}") from exc
    return ctx


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _short_body(response: httpx.Response) -> str:
    """The first few hundred bytes of an error body, as one line (registry errors)."""
    try:
        raw = b""
        for chunk in response.iter_bytes():
            raw += chunk
            if len(raw) > 512:
                break
    except httpx.HTTPError:
        return ""
    text = raw[:512].decode("utf-8", "replace")
    try:
        doc = json.loads(text)
        errors = doc.get("errors") if isinstance(doc, dict) else None
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return f"{errors[0].get('code', '')} {errors[0].get('message', '')}".strip()
    except ValueError:
        pass
    return " ".join(text.split())[:200]


def _explain(status: int, body: str, session: Session) -> str:
    what = {
        401: "credentials refused" if session.credentials else "needs credentials",
        403: "access denied",
        404: "not found (no such repository, tag or digest)",
        429: "rate limited",
    }.get(status, "")
    out = f"HTTP {status}"
    if what:
        out += f" {what}"
    if status == 401 and session.credentials is None and session.options.docker_config is None:
        out += " (no docker config given)"
    return out + (f": {body}" if body else "")


def _transport_reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timeout"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    text = str(exc) or type(exc).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return f"TLS certificate not trusted ({text})"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {text}"
    return text


def read_capped(response: httpx.Response, cap: int, what: str) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > cap:
        raise ExpectationUnavailable(f"{what}: {declared} bytes, more than the cap of {cap} bytes")
    buf = bytearray()
    try:
        for chunk in response.iter_bytes():
            buf += chunk
            if len(buf) > cap:
                raise ExpectationUnavailable(f"{what}: more than the cap of {cap} bytes")
    except httpx.HTTPError as exc:
        raise ExpectationUnavailable(f"{what}: {http_reason(exc)}") from exc
    return bytes(buf)


def http_reason(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TransportError):
        return _transport_reason(exc)
    return str(exc) or type(exc).__name__
