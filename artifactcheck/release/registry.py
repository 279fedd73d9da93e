"""Release images read from an OCI registry over the distribution API, with no Docker.

``release_image`` through a local Docker engine cannot work in a cluster (no socket,
and no business pulling images into a node). This module reads the image the way a
registry client does: ``GET /v2/<repo>/manifests/<ref>`` (an image index or Docker
manifest list is resolved to linux/amd64, or to its only image), then every layer
blob in order, each streamed through its digest check, decompressed and walked as a
tar in stream mode. Whiteouts (``.wh.<name>``, ``.wh..wh..opq``) are applied across
layers exactly as the overlay would see them, and every regular file under the site
directory is hashed while it streams. Nothing is held whole in memory: not a layer,
not a file; what is kept is the path, sha256 and size of each site file.

Why each rule:

* digests pinned: a reference ``repo@sha256:...`` names content, so the manifest's
  bytes must hash to it (a mirror or proxy could serve anything); every blob must hash
  to the digest and size its manifest declares, and a layer's files only count once
  its whole blob verified;
* hostile input: a registry is an outside service, so the manifest size, the number of
  layers and tar members, the bytes downloaded and decompressed, and the time taken
  are capped; a tar member that climbs out with ``..`` refuses the whole image;
* the same paths as ``manifest build`` and ``DockerEngine.manifest_from_image``:
  relative to the site directory, symlinks skipped (a served symlink is the file it
  points to, which is hashed where it lives, or not part of the site), hard links
  recorded with their target's digest;
* credentials from a docker config JSON (a mounted ``kubernetes.io/dockerconfigjson``
  Secret in a cluster), read on every call so a rotated Secret is picked up, sent
  only to the registry they are for (and its token realm), never over plain HTTP to
  another origin after a redirect;
* TLS verified by default (a CA bundle may be given); plain HTTP only for registries
  explicitly named in ``insecure`` (the tests' loopback registry);
* retries with full-jitter backoff on 429, 5xx and connection errors, a few attempts:
  a registry blip should not make a check inconclusive, a dead one must not hang it.

Errors: :class:`~artifactcheck.model.errors.ConfigError` for a reference or a credentials
file that cannot be right; :class:`~artifactcheck.model.errors.ExpectationUnavailable` for
everything the registry or the image content did wrong, with the reason.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib
import ipaddress
import json
import logging
import os
import posixpath
import random
import re
import ssl
import tarfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx

from artifactcheck.fetch.retry import parse_retry_after, retry_wait
from artifactcheck.manifests import native
from artifactcheck.manifests.limits import DEFAULT_LIMITS, ManifestLimits, check_entries
from artifactcheck.model.errors import ConfigError, ExpectationUnavailable, ManifestError
from artifactcheck.model.values import Manifest, ManifestEntry

logger = logging.getLogger("artifactcheck.release.registry")

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = (
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
)
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
IMAGE_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
LAYER_TYPES = frozenset(
    {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
    }
)
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
CHUNK = 256 * 1024

_HOST = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9-]+)*(?::\d{1,5})?$"
)
_HOST6 = re.compile(r"^\[[0-9A-Fa-f:.]+\](?::\d{1,5})?$")
_REPO = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ANY_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[A-Za-z0-9=_-]+$")
_UNUSABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)\s*,?')


# -- references ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImageReference:
    """``host[:port]/repo[:tag][@sha256:digest]``, parsed and validated."""

    registry: str  # host[:port], as written (the key of the docker config's "auths")
    repository: str
    tag: str | None = None
    digest: str | None = None  # "sha256:<hex>": the manifest's bytes must hash to it

    @property
    def reference(self) -> str:
        """What the manifest is fetched by: the digest when pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        out = f"{self.registry}/{self.repository}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out


def has_registry_host(image: str) -> bool:
    """True when the reference's first component names a registry host.

    The Docker convention: a first component with a ``.`` or a ``:``, or ``localhost``,
    is a host (``registry.example.com/web``, ``localhost:5000/web``); ``shop/web`` is a
    Docker Hub repository, which this module does not default to.
    """
    first, slash, _ = image.strip().partition("/")
    return bool(slash) and ("." in first or ":" in first or first == "localhost")


def parse_reference(image: str) -> ImageReference:
    """Parse an image reference, or ConfigError saying what is wrong with it."""
    text = image.strip()
    if not text:
        raise ConfigError("image reference: must not be empty")
    name, at, digest = text.partition("@")
    if at:
        if not _ANY_DIGEST.match(digest):
            raise ConfigError(f"image {image!r}: malformed digest {digest!r}")
        if not _DIGEST.match(digest):
            raise ConfigError(
                f"image {image!r}: only sha256 digests (64 lowercase hex) are supported"
            )
    if not has_registry_host(name):
        raise ConfigError(
            f"image {image!r}: no registry host (write host[:port]/repository[:tag], e.g. "
            "registry.example.com/web:1.0; Docker Hub names are not defaulted)"
        )
    host, _, rest = name.partition("/")
    if not (_HOST.match(host) or _HOST6.match(host)):
        raise ConfigError(f"image {image!r}: invalid registry host {host!r}")
    repo, tag = rest, None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        repo, _, tag = rest.rpartition(":")
        if not _TAG.match(tag):
            raise ConfigError(f"image {image!r}: invalid tag {tag!r}")
    if not _REPO.match(repo) or len(repo) > 255:
        raise ConfigError(
            f"image {image!r}: invalid repository {repo!r} (lowercase letters, digits, "
            "separators . _ __ - and /)"
        )
    return ImageReference(registry=host, repository=repo, tag=tag, digest=digest or None)


# -- options and limits --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """Caps on what one release image may make this process download and read."""

    max_manifest_bytes: int = 4 * 1024 * 1024  # the distribution spec's suggested minimum
    max_layers: int = 128  # overlay's practical maximum is 127
    max_members: int = 1_000_000  # tar members over all layers
    max_download_bytes: int = 4 * 1024**3  # compressed blob bytes over all layers
    max_unpacked_bytes: int = 16 * 1024**3  # decompressed bytes over all layers
    max_name: int = 4096  # characters in one tar member's path
    deadline: float = 600.0  # seconds for the whole image
    files: ManifestLimits = DEFAULT_LIMITS  # files: max_entries caps the site's files


@dataclass(frozen=True, slots=True)
class RegistryOptions:
    """How to reach registries: credentials, trust, plain HTTP, timeouts, retries."""

    docker_config: str | Path | None = None  # docker config JSON (a mounted Secret)
    ca_bundle: str | Path | None = None  # PEM file; default: the system trust store
    insecure: Collection[str] | bool = ()  # hosts[:port] reached over plain HTTP
    platform: tuple[str, str] = ("linux", "amd64")
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    attempts: int = 3
    backoff: float = 0.5  # the first retry waits up to this, doubling
    max_backoff: float = 8.0
    limits: ImageLimits = field(default_factory=ImageLimits)

    def plain_http(self, registry: str) -> bool:
        """True when this registry is explicitly allowed over plain HTTP."""
        if isinstance(self.insecure, bool):
            return self.insecure
        return registry in self.insecure


# -- credentials ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Credentials:
    username: str
    password: str

    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def __repr__(self) -> str:  # never print a password
        return f"Credentials(username={self.username!r}, password=***)"


def _auth_key(key: str) -> str:
    """``https://host:port/v1/`` and ``host:port`` name the same registry."""
    text = key.strip()
    if "://" in text:
        text = urlsplit(text).netloc
    return text.split("/", 1)[0].lower()


def load_credentials(path: str | Path, registry: str) -> Credentials | None:
    """The credentials for ``registry`` in a docker config JSON, or None for anonymous.

    The file is ``~/.docker/config.json`` or a ``kubernetes.io/dockerconfigjson``
    Secret's ``.dockerconfigjson`` (``{"auths": {host: {"auth": base64(user:pass)}}}``;
    ``username``/``password`` fields are accepted too, and the legacy ``.dockercfg``
    form without ``auths``). Credential helpers (``credsStore``) cannot run in a
    cluster and are not used.
    """
    where = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(1024 * 1024 + 1)
    except OSError as exc:
        raise ConfigError(f"registry credentials {where}: {exc.strerror or exc}") from exc
    if len(data) > 1024 * 1024:
        raise ConfigError(f"registry credentials {where}: larger than 1 MiB")
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"registry credentials {where}: not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"registry credentials {where}: not a JSON object")
    auths = doc.get("auths", doc if "auths" not in doc else None)
    if not isinstance(auths, dict):
        raise ConfigError(f"registry credentials {where}: 'auths' must be an object")
    wanted = registry.lower()
    for key, entry in auths.items():
        if not isinstance(key, str) or _auth_key(key) != wanted or not isinstance(entry, dict):
            continue
        auth = entry.get("auth")
        if isinstance(auth, str) and auth:
            try:
                user, sep, password = base64.b64decode(auth, validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise ConfigError(
                    f"registry credentials {where}: auths[{key!r}].auth is not base64(user:pass)"
                ) from exc
            if not sep:
                raise ConfigError(f"registry credentials {where}: auths[{key!r}].auth has no ':'")
            return Credentials(user, password)
        name, secret = entry.get("username"), entry.get("password")
        if isinstance(name, str) and isinstance(secret, str):
            return Credentials(name, secret)
    return None


def default_docker_config() -> Path | None:
    """``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json`` when it exists."""
    base = os.environ.get("DOCKER_CONFIG")
    path = Path(base) / "config.json" if base else Path.home() / ".docker" / "config.json"
    return path if path.is_file() else None


# -- the client ----------------------------------------------------------------------


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    """The scheme and parameters of a ``WWW-Authenticate`` header (the first challenge)."""
    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    for match in _CHALLENGE_PARAM.finditer(rest):
        value = match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params[match.group(1).lower()] = value
    return scheme.lower(), params


def _is_loopback(host: str) -> bool:
    name = urlsplit(f"//{host}").hostname or ""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class _Session:
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
            verify=_ssl_context(options.ca_bundle),
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
        scheme, params = _challenge(header)
        creds = self.credentials
        if scheme == "basic":
            if creds is None:
                raise ExpectationUnavailable(
                    f"{self.where}: needs credentials (Basic) and the docker config has none "
                    f"for {self.ref.registry}"
                )
            if self.scheme == "http" and not _is_loopback(self.ref.registry):
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
            data = _read_capped(response, 1024 * 1024, f"token from {realm}")
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


def _ssl_context(ca_bundle: str | Path | None) -> ssl.SSLContext:
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


def _explain(status: int, body: str, session: _Session) -> str:
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


def _read_capped(response: httpx.Response, cap: int, what: str) -> bytes:
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
        raise ExpectationUnavailable(f"{what}: {_transport_reason_any(exc)}") from exc
    return bytes(buf)


def _transport_reason_any(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TransportError):
        return _transport_reason(exc)
    return str(exc) or type(exc).__name__


# -- manifests -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Descriptor:
    media_type: str
    digest: str
    size: int


def _descriptor(raw: Any, what: str) -> Descriptor:
    if not isinstance(raw, dict):
        raise ExpectationUnavailable(f"{what}: not a descriptor object")
    media, digest, size = raw.get("mediaType"), raw.get("digest"), raw.get("size")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ExpectationUnavailable(f"{what}: digest {digest!r} is not sha256:<64 hex>")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ExpectationUnavailable(f"{what}: size {size!r} invalid")
    return Descriptor(media_type=media if isinstance(media, str) else "", digest=digest, size=size)


def _fetch_manifest(
    session: _Session, reference: str, pinned: str | None
) -> tuple[str, dict[str, Any], str]:
    """(media type, document, digest) of one manifest; its digest checked when pinned."""
    limits = session.options.limits
    what = f"{session.where}: manifest {session.ref.repository}@{reference}"
    response = session.get(f"manifests/{reference}", accept=ACCEPT)
    try:
        data = _read_capped(response, limits.max_manifest_bytes, what)
        content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        claimed = response.headers.get("Docker-Content-Digest")
    finally:
        response.close()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if pinned is not None and digest != pinned:
        raise ExpectationUnavailable(
            f"{what}: content digest {digest} is not the pinned {pinned} (refused)"
        )
    if claimed and claimed.startswith("sha256:") and claimed != digest:
        raise ExpectationUnavailable(
            f"{what}: the registry says digest {claimed}, the bytes hash to {digest}"
        )
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ExpectationUnavailable(f"{what}: not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ExpectationUnavailable(f"{what}: not a JSON object")
    media = doc.get("mediaType") if isinstance(doc.get("mediaType"), str) else content_type
    if media in DOCKER_SCHEMA1 or doc.get("schemaVersion") == 1:
        raise ExpectationUnavailable(f"{what}: Docker schema 1 manifests are not supported")
    if not media:  # an OCI manifest may omit mediaType: tell by its fields
        media = OCI_INDEX if "manifests" in doc else OCI_MANIFEST
    if media not in INDEX_TYPES and media not in IMAGE_TYPES:
        raise ExpectationUnavailable(f"{what}: unsupported media type {media!r}")
    if doc.get("schemaVersion") != 2:
        raise ExpectationUnavailable(f"{what}: schemaVersion must be 2")
    return media, doc, digest


def _pick_platform(doc: Mapping[str, Any], options: RegistryOptions, what: str) -> Descriptor:
    """The image for the wanted platform in an index; the only image when there is one."""
    raw = doc.get("manifests")
    if not isinstance(raw, list) or not raw:
        raise ExpectationUnavailable(f"{what}: an index with no manifests")
    if len(raw) > options.limits.max_layers:
        raise ExpectationUnavailable(f"{what}: {len(raw)} manifests in the index, over the cap")
    images: list[tuple[Descriptor, tuple[str, str]]] = []
    for i, item in enumerate(raw):
        desc = _descriptor(item, f"{what}: manifests[{i}]")
        platform = item.get("platform") if isinstance(item.get("platform"), dict) else {}
        annotations = item.get("annotations") if isinstance(item.get("annotations"), dict) else {}
        if annotations.get("vnd.docker.reference.type") == "attestation-manifest":
            continue  # BuildKit's provenance: not an image
        images.append((desc, (str(platform.get("os", "")), str(platform.get("architecture", "")))))
    for desc, plat in images:
        if plat == options.platform:
            return desc
    if len(images) == 1:
        return images[0][0]
    found = ", ".join(sorted({"/".join(p) for _, p in images})) or "none"
    raise ExpectationUnavailable(
        f"{what}: no {'/'.join(options.platform)} image in the index (it has: {found})"
    )


# -- layers --------------------------------------------------------------------------


class _BlobReader:
    """A file-like view of a blob response: counts, caps and hashes the bytes it passes.

    Its digest is checked when the blob has been read to the end (:meth:`finish`):
    nothing read from it counts until then.
    """

    def __init__(self, response: httpx.Response, desc: Descriptor, budget: _Budget) -> None:
        self._chunks: Iterator[bytes] = response.iter_bytes(CHUNK)
        self._buf = b""
        self._pos = 0  # bytes of _buf already returned (no copying per small read)
        self.desc = desc
        self.budget = budget
        self.hash = hashlib.sha256()
        self.size = 0
        self.eof = False

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (``-1``: up to one chunk, never the whole blob)."""
        if n < 0:
            n = CHUNK
        while not self.eof and len(self._buf) - self._pos < n:
            self.budget.session.time_left()
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self.eof = True
                break
            except httpx.HTTPError as exc:
                raise ExpectationUnavailable(
                    f"{self.budget.session.where}: reading blob {self.desc.digest}: "
                    f"{_transport_reason_any(exc)}"
                ) from exc
            self.size += len(chunk)
            if self.size > self.desc.size:
                raise ExpectationUnavailable(
                    f"blob {self.desc.digest}: more than the {self.desc.size} bytes its "
                    "descriptor declares"
                )
            self.budget.download(len(chunk))
            self.hash.update(chunk)
            self._buf = self._buf[self._pos :] + chunk
            self._pos = 0
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    def finish(self) -> None:
        """Read to the end and verify size and digest: the layer's files count after this."""
        while self.read(CHUNK):
            pass
        if self.size != self.desc.size:
            raise ExpectationUnavailable(
                f"blob {self.desc.digest}: {self.size} bytes, its descriptor declares "
                f"{self.desc.size}"
            )
        got = "sha256:" + self.hash.hexdigest()
        if got != self.desc.digest:
            raise ExpectationUnavailable(
                f"blob {self.desc.digest}: content hashes to {got} (refused)"
            )


class _Unpacked:
    """Counts decompressed bytes against the cap (a small gzip can inflate to terabytes)."""

    def __init__(self, inner: IO[bytes] | Any, budget: _Budget) -> None:
        self.inner = inner
        self.budget = budget

    def read(self, n: int = -1) -> bytes:
        try:
            data: bytes = self.inner.read(n)
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile, zlib.error, truncation
            raise ExpectationUnavailable(f"layer does not decompress: {exc}") from exc
        self.budget.unpack(len(data))
        return data


@dataclass
class _Budget:
    session: _Session
    downloaded: int = 0
    unpacked: int = 0
    members: int = 0

    def download(self, n: int) -> None:
        self.downloaded += n
        cap = self.session.options.limits.max_download_bytes
        if self.downloaded > cap:
            raise ExpectationUnavailable(f"image over the cap of {cap} downloaded bytes")

    def unpack(self, n: int) -> None:
        self.unpacked += n
        cap = self.session.options.limits.max_unpacked_bytes
        if self.unpacked > cap:
            raise ExpectationUnavailable(f"image over the cap of {cap} decompressed bytes")

    def member(self) -> None:
        self.members += 1
        cap = self.session.options.limits.max_members
        if self.members > cap:
            raise ExpectationUnavailable(f"image over the cap of {cap} tar members")


def _decompressed(blob: _BlobReader, media_type: str, budget: _Budget) -> _Unpacked:
    """The layer's tar stream, by its first bytes (media types are sometimes wrong)."""
    head = blob.read(4)
    rest = _Prefixed(head, blob)
    if head[:2] == b"\x1f\x8b":
        return _Unpacked(gzip.GzipFile(fileobj=rest, mode="rb"), budget)  # type: ignore[call-overload]
    if head == b"\x28\xb5\x2f\xfd":
        try:
            zstandard: Any = importlib.import_module("zstandard")
        except ImportError as exc:
            raise ExpectationUnavailable(
                f"layer {blob.desc.digest} is zstd-compressed ({media_type or 'zstd'}) and "
                "the zstandard package is not installed (pip install zstandard)"
            ) from exc
        return _Unpacked(zstandard.ZstdDecompressor().stream_reader(rest), budget)
    return _Unpacked(rest, budget)


class _Prefixed:
    """Bytes already read, then the rest of a stream."""

    def __init__(self, head: bytes, rest: _BlobReader) -> None:
        self.head = head
        self.rest = rest

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0:
                out, self.head = self.head, b""
                return out
            out, self.head = self.head[:n], self.head[n:]
            return out
        return self.rest.read(n)


def _member_path(raw: str, limits: ImageLimits, where: str) -> str:
    """A tar member's path inside the image, normalised; ``..`` refuses the image."""
    if len(raw) > limits.max_name:
        raise ExpectationUnavailable(f"{where}: a member name over {limits.max_name} characters")
    if "\x00" in raw:
        raise ExpectationUnavailable(f"{where}: a member name with a NUL byte")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ExpectationUnavailable(f"{where}: unsafe member name {raw!r} (climbs with '..')")
    return "/".join(parts)  # absolute and ./ paths are relative to the image root


@dataclass
class _Tree:
    """What the layers so far leave under the site directory, and its ancestors."""

    site: str  # the site directory inside the image, no leading or trailing "/"
    files: dict[str, ManifestEntry] = field(default_factory=dict)  # image path -> entry
    kinds: dict[str, str] = field(default_factory=dict)  # site and ancestors -> kind/target
    symlinks: int = 0
    rejected: dict[str, str] = field(default_factory=dict)  # image path -> why not hashed

    def under(self, path: str) -> bool:
        return path.startswith(self.site + "/")

    def watched(self, path: str) -> bool:
        """The site directory or one of its ancestors (a symlink there changes everything)."""
        return path == self.site or self.site.startswith(path + "/")

    def remove(self, path: str, *, subtree: bool = True, keep_self: bool = False) -> None:
        if not keep_self:
            self.files.pop(path, None)
            self.rejected.pop(path, None)
        if subtree:
            prefix = path + "/" if path else ""
            for key in [k for k in self.files if k.startswith(prefix)]:
                del self.files[key]
            for key in [k for k in self.rejected if k.startswith(prefix)]:
                del self.rejected[key]
            for key in [k for k in self.kinds if k.startswith(prefix) or k == path]:
                if key != path or not keep_self:
                    del self.kinds[key]


@dataclass(slots=True)
class _Layer:
    """What one layer's tar does to the tree below it, collected while it is read.

    Whiteouts and replacements delete from the layers below only, so they are applied
    first, then this layer's own entries are laid over the result.
    """

    deleted: list[str] = field(default_factory=list)  # whiteouts: path (and subtree) gone
    opaque: list[str] = field(default_factory=list)  # directories whose lower content is hidden
    replaced: list[tuple[str, bool]] = field(default_factory=list)  # (path, is a directory)
    added: dict[str, ManifestEntry] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    symlinks: int = 0
    unusable: dict[str, str] = field(default_factory=dict)

    def apply(self, tree: _Tree, limits: ImageLimits) -> None:
        for path in self.deleted:
            tree.remove(path)
        for path in self.opaque:
            tree.remove(path, keep_self=True)
        for path, is_dir in self.replaced:
            # a directory merges with a lower directory; anything else replaces the path
            tree.remove(path, subtree=not is_dir)
        tree.files.update(self.added)
        tree.rejected.update(self.unusable)
        tree.kinds.update(self.kinds)
        tree.symlinks += self.symlinks
        check_entries(len(tree.files), limits.files)


def _apply_layer(
    tree: _Tree,
    tar_stream: _Unpacked,
    blob: _BlobReader,
    budget: _Budget,
    where: str,
) -> None:
    """Walk one layer's tar and apply it to the tree, once its blob has verified."""
    limits = budget.session.options.limits
    layer = _Layer()
    try:
        with tarfile.open(fileobj=tar_stream, mode="r|") as tar:  # type: ignore[call-overload]
            for member in tar:
                budget.member()
                _read_member(layer, tree, tar, member, limits, where)
            # the end-of-archive blocks and any padding after them belong to the blob
            while tar_stream.read(CHUNK):
                pass
    except tarfile.TarError as exc:
        raise ExpectationUnavailable(f"{where}: not a readable tar: {exc}") from exc
    except EOFError as exc:
        raise ExpectationUnavailable(f"{where}: truncated tar: {exc}") from exc
    blob.finish()  # the digest is checked before anything of this layer counts
    layer.apply(tree, limits)


def _read_member(
    layer: _Layer,
    tree: _Tree,
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    limits: ImageLimits,
    where: str,
) -> None:
    """Record what one tar member does: a whiteout, a replaced path, a site file."""
    path = _member_path(member.name, limits, where)
    if not path:
        return  # the root itself
    head, base = posixpath.split(path)
    if base == OPAQUE:
        layer.opaque.append(head)
        return
    if base.startswith(WHITEOUT):
        layer.deleted.append(posixpath.join(head, base[len(WHITEOUT) :]))
        return
    layer.replaced.append((path, member.isdir()))
    if tree.watched(path):
        layer.kinds[path] = _kind(member)
    if not tree.under(path):
        return
    rel = path[len(tree.site) + 1 :]
    if (member.isreg() or member.islnk()) and _UNUSABLE.search(rel):
        # no URL can name it (control characters, undecodable bytes)
        layer.unusable[path] = "control character or undecodable byte in the name"
        return
    if member.isreg():
        stream = tar.extractfile(member)
        if stream is None:
            return
        layer.added[path] = _hashed(rel, stream)
    elif member.islnk():
        target = _member_path(member.linkname, limits, where)
        source = layer.added.get(target) or tree.files.get(target)
        if source is None:
            # only site files are hashed, so a link to one outside the site
            # (or to one not seen yet) has no digest to copy
            raise ExpectationUnavailable(
                f"{where}: hard link {path!r} to {member.linkname!r}, a file "
                "not seen before it under the site directory"
            )
        layer.added[path] = ManifestEntry(path=rel, hashes=source.hashes, size=source.size)
    elif member.issym():
        layer.symlinks += 1
    check_entries(len(layer.added), limits.files)


def _kind(member: tarfile.TarInfo) -> str:
    """What a path on the way to the site directory is, in words."""
    if member.isdir():
        return "dir"
    return f"symlink to {member.linkname}" if member.issym() else "not a directory"


def _hashed(rel: str, stream: IO[bytes]) -> ManifestEntry:
    h = hashlib.sha256()
    size = 0
    while chunk := stream.read(CHUNK):
        h.update(chunk)
        size += len(chunk)
    return ManifestEntry(path=rel, hashes={"sha256": h.hexdigest()}, size=size)


# -- the reader ----------------------------------------------------------------------


class RegistryReader:
    """``read_image(image, site, version) -> Manifest`` over the distribution API.

    Plugs into :func:`artifactcheck.release.sources.build_expectations` as ``read_image``; one
    instance may be shared by threads (each call has its own HTTP client).
    """

    def __init__(
        self,
        options: RegistryOptions | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.options = options or RegistryOptions()
        self.transport = transport
        self.sleep = sleep
        self.rng = rng or random.Random()

    def __call__(self, image: str, site: str, version: str) -> Manifest:
        return self.read(image, site=site, version=version)

    def read(self, image: str, *, site: str, version: str) -> Manifest:
        """Hash every regular file under ``site`` in a registry image into a manifest."""
        ref = parse_reference(image)
        if not site.startswith("/"):
            raise ConfigError(f"path: must be absolute inside the image, got {site!r}")
        site_dir = posixpath.normpath(site).strip("/")
        if ".." in site_dir.split("/"):
            raise ConfigError(f"path: must not contain '..', got {site!r}")
        session = _Session(
            ref, self.options, transport=self.transport, sleep=self.sleep, rng=self.rng
        )
        try:
            return self._read(session, ref, site_dir, site, version)
        finally:
            session.close()

    def _read(
        self, session: _Session, ref: ImageReference, site_dir: str, site: str, version: str
    ) -> Manifest:
        top, layers = self._layers(session, ref)
        budget = _Budget(session)
        tree = _Tree(site=site_dir)
        for i, layer in enumerate(layers):
            where = f"{ref}: layer {i + 1}/{len(layers)} {layer.digest[:19]}"
            response = session.get(f"blobs/{layer.digest}")
            try:
                blob = _BlobReader(response, layer, budget)
                _apply_layer(
                    tree, _decompressed(blob, layer.media_type, budget), blob, budget, where
                )
            finally:
                response.close()
        _check_site(tree, ref, site)
        return _manifest_of(tree, ref, site, version, top)

    def _layers(self, session: _Session, ref: ImageReference) -> tuple[str, list[Descriptor]]:
        """The image's manifest digest and its layers, checked against the caps."""
        limits = self.options.limits
        media, doc, digest = _fetch_manifest(session, ref.reference, ref.digest)
        if media in INDEX_TYPES:
            chosen = _pick_platform(doc, self.options, f"{session.where}: index {ref}")
            media, doc, _ = _fetch_manifest(session, chosen.digest, chosen.digest)
            if media not in IMAGE_TYPES:
                raise ExpectationUnavailable(
                    f"{session.where}: {ref}: the index points at {media}, not an image"
                )
        raw_layers = doc.get("layers")
        if not isinstance(raw_layers, list):
            raise ExpectationUnavailable(f"{session.where}: {ref}: manifest has no layers list")
        if len(raw_layers) > limits.max_layers:
            raise ExpectationUnavailable(
                f"{session.where}: {ref}: {len(raw_layers)} layers, more than the cap of "
                f"{limits.max_layers}"
            )
        layers = [_descriptor(x, f"{ref}: layers[{i}]") for i, x in enumerate(raw_layers)]
        for i, layer in enumerate(layers):
            if layer.media_type and layer.media_type not in LAYER_TYPES:
                raise ExpectationUnavailable(
                    f"{ref}: layers[{i}] has media type {layer.media_type!r} (foreign, "
                    "non-distributable or not a layer): cannot be read"
                )
        declared = sum(layer.size for layer in layers)
        if declared > limits.max_download_bytes:
            raise ExpectationUnavailable(
                f"{ref}: layers declare {declared} bytes, more than the cap of "
                f"{limits.max_download_bytes}"
            )
        return digest, layers


def _check_site(tree: _Tree, ref: ImageReference, site: str) -> None:
    """The site path is a directory in the image, and so is every ancestor of it."""
    kind = tree.kinds.get(tree.site)
    for ancestor, what in sorted(tree.kinds.items()):
        if ancestor != tree.site and what != "dir":
            raise ManifestError(f"{ref}:{site}: /{ancestor} is a {what} in the image")
    if kind is None and not tree.files:
        raise ManifestError(f"{ref}:{site}: no such directory in the image")
    if kind not in (None, "dir"):
        raise ManifestError(
            f"{ref}:{site}: a {kind} in the image, not a directory (give the directory "
            "itself as the path)"
        )


def _manifest_of(tree: _Tree, ref: ImageReference, site: str, version: str, top: str) -> Manifest:
    """The native manifest of the site's files, naming the image by its digest."""
    if tree.symlinks:
        logger.info(
            "%s:%s: %d symlinks skipped (as manifest build skips them)",
            ref,
            site,
            tree.symlinks,
        )
    builder = native.Builder(version=version, image_id=top)
    for entry in tree.files.values():
        builder.add(entry.path, entry.hashes["sha256"], entry.size or 0)
    manifest = builder.manifest(source=f"{ref.registry}/{ref.repository}@{top}:{site}")
    if tree.rejected:
        cut = len(tree.site) + 1
        rejected = tuple(sorted((k[cut:], why) for k, why in tree.rejected.items()))
        manifest = replace(manifest, rejected=rejected)
    return manifest


def _default_options() -> RegistryOptions:
    return RegistryOptions(docker_config=default_docker_config())


def read_image(image: str, site: str, version: str) -> Manifest:
    """The Docker engine's ``read_image`` signature, over the registry, default options.

    Credentials come from ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``
    when one exists; TLS is verified against the system trust store.
    """
    return RegistryReader(_default_options())(image, site, version)
