"""Configuration: one pydantic model, :class:`CheckSpec`, for the CRD, YAML and CLI.

Every field carries a description with its unit, because the same text feeds the
CRD's OpenAPI schema and ``--help``. Unknown fields are rejected (a typo in a YAML
file must not silently turn a check off), and :func:`load_spec` turns pydantic's
validation errors into a :class:`~artifactcheck.model.errors.ConfigError` naming each field.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.header_rules import is_field_name, is_field_value
from artifactcheck.model.names import DEFAULT_CONDITION_TYPE, RELEASE_CONFIGMAP_SELECTOR
from artifactcheck.model.records import Record
from artifactcheck.model.versions import version_problem


def header_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be sent as an HTTP header name, or None."""
    if not is_field_name(name):
        return f"header name {name!r} is not an RFC 9110 token"
    return None


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value, or None (never echoes it)."""
    if not is_field_value(value):
        return "header value contains a control character (CR, LF, NUL or another)"
    return None


def check_headers(headers: dict[str, str], *, values: bool = False) -> dict[str, str]:
    """``headers`` unchanged, or ValueError for the first name (or, with ``values``, the
    first value) that cannot be sent: a pydantic validator for header maps."""
    for name, value in headers.items():
        problem = header_name_problem(name)
        if problem is None and values:
            value_problem = header_value_problem(value)
            problem = None if value_problem is None else f"{name}: {value_problem}"
        if problem is not None:
            raise ValueError(problem)
    return headers


def _check_version(v: str | None) -> str | None:
    if v is not None:
        problem = version_problem(v)
        if problem is not None:
            raise ValueError(f"version {problem}")
    return v


ManifestFormatName = Literal[
    "auto",
    "native",
    "vite",
    "webpack-manifest",
    "cra",
    "webpack-assets",
    "django",
    "ngsw",
    "sprockets",
    "propshaft",
]


Coding = Literal["identity", "gzip", "br", "deflate"]


#: Words written in capitals inside a camelCase name (Kubernetes API conventions: an
#: acronym keeps one case, lower at the start, ``caBundle``, upper after it, ``verifyTLS``).
def _empty() -> list[Any]:
    """A new empty list: the default of the list fields. pydantic reads the signature
    of every default factory; a Python function's is read at once, the builtin
    ``list``'s goes through ``inspect``'s text-signature parser, a cost every start-up
    paid once per list field (docs/benchmarks.md, `bench.startup`)."""
    return []


_ACRONYMS = frozenset({"ca", "cdn", "http", "ip", "tls", "url"})
#: Words that are Kubernetes kinds, spelled as the kind is: ``releaseConfigMaps``.
_KIND_WORDS = {"configmaps": "ConfigMaps", "configmap": "ConfigMap"}


def camel_name(field_name: str) -> str:
    """The camelCase name an ArtifactCheck (the CRD) uses for a snake_case field.

    ``config_maps`` -> ``configMaps``, ``verify_tls`` -> ``verifyTLS``,
    ``ca_bundle`` -> ``caBundle``, ``release_configmaps`` -> ``releaseConfigMaps``.
    """
    first, *rest = field_name.split("_")
    words = [first]
    for word in rest:
        if word in _ACRONYMS:
            words.append(word.upper())
        else:
            words.append(_KIND_WORDS.get(word, word[:1].upper() + word[1:]))
    return "".join(words)


class _Model(BaseModel):
    # No inf/NaN: ".inf" is valid YAML, and an infinite rate limit or warning period
    # would only fail later, inside the policy or a report (math.floor, timedelta).
    # Every field has a camelCase alias (the CRD's spelling, Kubernetes API conventions)
    # and is accepted under either name (a YAML file may keep snake_case); validation
    # errors name the snake_case field path, which the CLI maps to its flags.
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        allow_inf_nan=False,
        alias_generator=camel_name,
        loc_by_alias=False,
    )


class RetrySettings(_Model):
    """Retries: few, exponential with full jitter, under a budget per run."""

    attempts: int = Field(3, ge=1, le=10, description="Total tries per request, first included.")
    base_delay: float = Field(0.2, ge=0, le=60, description="First backoff ceiling, seconds.")
    max_delay: float = Field(5.0, ge=0, le=300, description="Largest backoff ceiling, seconds.")
    max_retry_after: float = Field(
        30.0, ge=0, le=600, description="Longest Retry-After honoured, seconds."
    )
    budget_ratio: float = Field(
        0.2,
        ge=0,
        le=10,
        description="Retries allowed per run as a fraction of first attempts (0.2 = 20%).",
    )
    budget_min: int = Field(
        10, ge=0, description="Retries always allowed per run, whatever the ratio."
    )


#: Request headers whose values are secrets, read when a request is sent rather than
#: written where the spec is: a check's ``http`` and an admin's credential name them
#: alike, so one definition serves both.
HeaderEnv = Annotated[
    dict[str, str],
    Field(
        default_factory=dict,
        description="Extra request headers whose value is read from an environment variable.",
    ),
]
HeaderFiles = Annotated[
    dict[str, str],
    Field(
        default_factory=dict,
        description="Extra request headers whose value is read from a file (a mounted Secret).",
    ),
]


class HttpSettings(_Model):
    """How instances and the CDN are reached."""

    connect_timeout: float = Field(3.0, gt=0, le=300, description="TCP/TLS connect, seconds.")
    read_timeout: float = Field(5.0, gt=0, le=600, description="Between two reads, seconds.")
    request_timeout: float = Field(
        20.0, gt=0, le=3600, description="One whole request, body included, seconds."
    )
    instance_deadline: float = Field(
        60.0, gt=0, le=3600, description="Everything fetched from one instance, seconds."
    )
    max_connections: int = Field(64, ge=1, le=4096, description="Requests in flight in total.")
    max_per_host: int = Field(4, ge=1, le=256, description="Requests in flight per host.")
    max_body_bytes: int = Field(
        64 * 1024 * 1024, ge=1, description="Largest asset body read, bytes."
    )
    max_manifest_bytes: int = Field(
        8 * 1024 * 1024, ge=1, description="Largest manifest or /version body, bytes."
    )
    max_manifest_entries: int = Field(
        100_000, ge=1, description="Most entries accepted in one manifest."
    )
    verify_tls: bool = Field(True, description="Verify TLS certificates.")
    ca_bundle: str | None = Field(None, description="PEM file of extra trusted CAs.")
    host_header: str | None = Field(
        None, description="Host header (and TLS server name) sent to instances."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra request headers (values are never logged)."
    )
    header_env: HeaderEnv
    header_files: HeaderFiles
    credentials: list[str] = Field(
        default_factory=_empty,
        description="Names of credentials (request headers, CA bundles) that the cluster "
        "admin configured for the controller and granted to this namespace; controller only.",
    )
    identity_encoding: bool = Field(
        True, description="Ask for Accept-Encoding: identity; compressed answers are decoded."
    )
    compare_encodings: list[Coding] = Field(
        default_factory=lambda: list[Coding](["identity"]),
        description="Content codings each asset is fetched in and compared (decoded): "
        "browsers receive gzip/br, which a stale precompressed file can make differ.",
    )
    tls_expiry_warning_days: float = Field(
        14.0, ge=0, le=3650, description="Warn when a certificate expires within this many days."
    )
    transport: Literal["http1"] = Field(
        "http1",
        description="Transport for every request: 'http1', artifactcheck's lean HTTP/1.1 "
        "keep-alive transport, directly and through a proxy (see docs/http-stacks.md). "
        "'auto' is read as 'http1'; 'httpx' (httpx's own pool) is refused: remove the field.",
    )
    proxy_instances: bool = Field(
        False,
        description="Send requests to instances through the proxy too (HTTPS_PROXY, "
        "HTTP_PROXY and NO_PROXY in the CLI; the admin configuration's in the controller). "
        "Off: instances are fetched directly and only release sources and CDNs use a proxy.",
    )

    @field_validator("transport", mode="before")
    @classmethod
    def _transport_alias(cls, v: object) -> object:
        """'auto' is the old name of 'http1'; 'httpx' is refused with what to do, since
        a run silently on another transport than the one named is not what was asked."""
        if v == "httpx":
            raise ValueError(
                "'httpx' (httpx's own pool) is no longer a transport: remove the field, or "
                "set 'http1', the lean transport that every request uses (docs/http-stacks.md)"
            )
        return "http1" if v == "auto" else v

    @field_validator("host_header")
    @classmethod
    def _host(cls, v: str | None) -> str | None:
        if v is not None and (header_value_problem(v) or not v.strip() or " " in v):
            raise ValueError("must be a host name (no spaces or control characters)")
        return v

    @field_validator("headers", "header_env", "header_files")
    @classmethod
    def _header_names(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        return check_headers(v, values=info.field_name == "headers")

    @field_validator("compare_encodings")
    @classmethod
    def _encodings(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("must name at least one coding, e.g. identity")
        if len(set(v)) != len(v):
            raise ValueError("names a coding twice")
        return v


class SamplingSettings(_Model):
    """How much of the fleet and of each instance's files is checked."""

    instances: int | None = Field(
        None,
        ge=1,
        description=(
            "Instances checked; null = all. The controller also checks again, up to as "
            "many, the pods whose last verdicts were bad, until confirmed or cleared."
        ),
    )
    assets_per_instance: int | None = Field(
        None, ge=0, description="Assets fetched per instance, entry points always; null = all."
    )
    seed: int | None = Field(None, description="Random seed for reproducible samples.")


class VersionEndpoint(_Model):
    """Where an instance reports its version over HTTP.

    Also written as one string, the command line's ``PATH[#POINTER]``
    (``version_endpoint: "/api/version#/version"``), in a YAML file.
    """

    path: str = Field(
        "/version",
        description="Path of the version document, resolved against the instance's URL (the "
        "target), never against the prefix its release's files are served under.",
    )
    pointer: str = Field(
        "", description="RFC 6901 JSON pointer to the version; empty = whole body as text."
    )

    @field_validator("pointer")
    @classmethod
    def _pointer(cls, v: str) -> str:
        if v and not v.startswith("/"):
            raise ValueError("a JSON pointer is empty or starts with '/'")
        return v


def endpoint_fields(value: str) -> dict[str, str]:
    """``PATH[#POINTER]`` (the command line's spelling) as VersionEndpoint's fields."""
    path, _, pointer = value.strip().partition("#")
    return {"path": path or "/version", "pointer": pointer}


def normalise_prefix(value: str) -> str:
    """A prefix as a relative directory: ``/static/``, ``static`` -> ``static/``; ``/`` -> ``""``.

    ValueError for what cannot be a directory under the instance's URL: another host, a
    query, ``..``, a control character.
    """
    text = value.strip()
    if "://" in text or text.startswith("//"):
        raise ValueError(
            f"must be a path under the instance's URL such as /static/, got {value!r} "
            "(the CDN's own path is part of --cdn)"
        )
    if any(c in text for c in "?#\\") or not text.isprintable():
        raise ValueError(f"must be a plain path such as /static/, got {value!r}")
    segments = [s for s in text.split("/") if s]
    if any(s in (".", "..") for s in segments):
        raise ValueError(f"must not contain '.' or '..' segments, got {value!r}")
    return "".join(f"{s}/" for s in segments)


class Target(_Model):
    """A bare URL instance, optionally with the version it is known to report."""

    url: str = Field(description="Base URL of the instance, e.g. http://10.0.0.7:8080/.")
    version: str | None = Field(None, description="Version the instance reports.")
    name: str | None = Field(None, description="Display name; defaults to the URL.")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"must be an http:// or https:// URL, got {v!r}")
        return v if v.endswith("/") else v + "/"

    @field_validator("version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        return _check_version(v)


class KubernetesSource(_Model):
    """Pods selected in a cluster."""

    namespace: str = Field("default", description="Namespace of the pods.")
    selector: str = Field("", description="Label selector of the pods.")
    version_label: str | None = Field(
        "app.kubernetes.io/version", description="Pod label holding the version."
    )
    version_annotation: str | None = Field(None, description="Pod annotation holding it.")
    scheme: Literal["http", "https"] = Field("http", description="Scheme used to reach pods.")
    port: int = Field(80, ge=1, le=65535, description="Port the pods serve on.")
    ready_only: bool = Field(True, description="Only pods whose containers are ready.")


class DockerSource(_Model):
    """Containers selected on a Docker engine."""

    labels: list[str] = Field(default_factory=_empty, description="Label filters, KEY=VALUE.")
    network: str | None = Field(None, description="Network whose container IP is used.")
    port: int = Field(80, ge=1, le=65535, description="Container port the site serves on.")
    use_published_port: bool = Field(False, description="Reach the published host port.")
    version_labels: list[str] = Field(
        default_factory=lambda: ["org.opencontainers.image.version", "app.kubernetes.io/version"],
        description="Container labels holding the version, first found wins.",
    )
    on_mismatch: str | None = Field(
        None,
        description="Take a confirmed mismatching container out of traffic: 'stop', 'pause' "
        "or 'disconnect=NETWORK' (labels cannot be changed); off by default.",
    )

    @field_validator("on_mismatch")
    @classmethod
    def _on_mismatch(cls, v: str | None) -> str | None:
        if v is None:
            return v
        kind, _, network = v.partition("=")
        if kind not in ("stop", "pause", "disconnect") or (kind == "disconnect") != bool(network):
            raise ValueError("expected 'stop', 'pause' or 'disconnect=NETWORK'")
        return v


class PolicySettings(_Model):
    """When verdicts turn into actions, and the safety limits around them."""

    mode: Literal["report", "flag", "quarantine"] = Field(
        "flag", description="Strongest action taken on a confirmed mismatch."
    )
    confirmations: int = Field(
        2, ge=1, le=100, description="Consecutive bad verdicts before acting."
    )
    max_quarantine_fraction: float = Field(
        0.25, ge=0, le=1, description="Largest fraction of a workload quarantined at once."
    )
    min_ready: int = Field(1, ge=0, description="Ready pods always left in a workload.")
    majority_threshold: float = Field(
        0.5,
        gt=0,
        le=1,
        description="When more than this fraction disagrees, suspect the expectation.",
    )
    max_actions_per_minute: float = Field(
        10.0, gt=0, description="Rate limit on write actions, per minute."
    )
    dry_run: bool = Field(False, description="Decide and report actions, never perform them.")
    release_on_recovery: bool = Field(
        True, description="Undo a quarantine when the instance becomes consistent."
    )
    gate_fail_open: bool = Field(
        True, description="Gate mode: mark pods verified when a dependency is down."
    )
    condition_type: str = Field(
        DEFAULT_CONDITION_TYPE, description="Readiness-gate condition type."
    )
    cordon_nodes: bool = Field(False, description="Cordon nodes that serve stale content.")
    max_cordoned_nodes: int = Field(1, ge=0, description="Nodes cordoned at once, at most.")
    uncordon_on_recovery: bool = Field(False, description="Uncordon when consistent again.")


class ReleaseConfigMaps(_Model):
    """Release manifests kept in ConfigMaps of the check's own namespace.

    One ConfigMap per release: the ``artifactcheck.io/version`` label names the version,
    the ``manifest.json`` key (data or binaryData) holds the manifest. The namespace is
    never configurable: a check reads only its own namespace's ConfigMaps.
    """

    selector: str = Field(
        RELEASE_CONFIGMAP_SELECTOR,
        description="Label selector of the release-manifest ConfigMaps in the check's namespace.",
    )

    @field_validator("selector")
    @classmethod
    def _selector(cls, v: str) -> str:
        # an empty selector would take every ConfigMap of the namespace for a release
        if not v.strip():
            raise ValueError("must not be empty: name the release-manifest ConfigMaps by label")
        return v

    def describe(self) -> str:
        """How reports and ``describe`` name this source."""
        return f"ConfigMaps {self.selector} in the pods' namespace"


class RegistryAccess(_Model):
    """How the CLI reaches a release image's registry (files of this machine: the
    controller reads no image)."""

    auth: str | None = Field(
        None,
        description="Docker config JSON with registry credentials (a mounted "
        "kubernetes.io/dockerconfigjson Secret); default: ~/.docker/config.json if it exists.",
    )
    ca_bundle: str | None = Field(
        None, description="PEM file of extra CAs trusted for registries; default: http.ca_bundle."
    )
    insecure: list[str] = Field(
        default_factory=_empty, description="Registries (host:port) reached over plain HTTP."
    )


class ReleaseImage(_Model):
    """A container image whose site directory is the release (CLI only)."""

    reference: str = Field(description="Release image reference; '{version}' is replaced.")
    path: str = Field(
        "/usr/share/nginx/html", description="Directory of the site inside the release image."
    )
    source: Literal["auto", "registry", "docker"] = Field(
        "auto",
        description="How the image is read: 'registry' over the OCI distribution API (no "
        "Docker engine), 'docker' through the local Docker engine, 'auto' = registry when the "
        "reference names a registry host (host.name/, host:port/), else docker.",
    )
    registry: RegistryAccess = Field(default_factory=RegistryAccess)

    @field_validator("reference")
    @classmethod
    def _reference(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    def describe(self) -> str:
        """How reports and ``describe`` name this source."""
        return f"image {self.reference}:{self.path}"


class ReleaseManifests(Record):
    """The ``manifests`` kind as a value: release manifest files and URLs, at most one
    of them a ``{version}`` template (the field itself is the plain list YAML writes)."""

    sources: tuple[str, ...]

    def describe(self) -> str:
        """How reports and ``describe`` name this source."""
        return ", ".join(self.sources)


#: One kind of release source, as :attr:`ReleaseSource.kind` hands it out.
ReleaseKind = ReleaseManifests | ReleaseImage | ReleaseConfigMaps


def field_error(loc: tuple[str | int, ...], message: str, value: object) -> ValidationError:
    """A validation error at ``loc`` (relative to the model validated), for a rule a
    model validator checks across fields: its message names the field it is about,
    as a field validator's would."""
    return ValidationError.from_exception_data(
        "CheckSpec",
        [
            InitErrorDetails(
                type=PydanticCustomError("value_error", "Value error, {why}", {"why": message}),
                loc=loc,
                input=value,
            )
        ],
    )


class ReleaseSource(_Model):
    """Where the expected release comes from: exactly one of its kinds.

    Each kind knows what it is (:attr:`kind`): how it is described, whether pins and
    release keys apply to it (:attr:`SIGNED`); the release package builds its reader
    and admission admits it, each from one table keyed by kind.
    """

    #: The kinds by field name, in the order a message lists them: every field is a kind.
    KINDS: ClassVar[tuple[str, ...]]
    #: Kinds whose releases are manifests with bytes of their own: pins and release
    #: keys apply to them; an image is a tree of files, with no one document to sign.
    SIGNED: ClassVar[frozenset[str]] = frozenset({"manifests", "config_maps"})

    manifests: list[str] | None = Field(
        None,
        description="Release manifest files or URLs (one or several); '{version}' in one is "
        "replaced by the escaped reported version. Each is used only for the version it declares.",
    )
    image: ReleaseImage | None = Field(
        None, description="Read the release from a container image (CLI only)."
    )
    config_maps: ReleaseConfigMaps | None = Field(
        None,
        description="Read release manifests from ConfigMaps (one per version, label "
        "artifactcheck.io/version, key manifest.json) in the pods' own namespace, watched.",
    )

    @field_validator("manifests", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @field_validator("manifests")
    @classmethod
    def _sources(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("must name at least one release manifest file or URL")
        for item in v:
            if not item.strip():
                raise ValueError("must not be empty")
        if len(set(v)) != len(v):
            raise ValueError("names the same release manifest twice")
        templates = [item for item in v if "{version}" in item]
        if len(templates) > 1:
            raise ValueError(
                "at most one '{version}' template (the others are concrete files, each used "
                f"for the version it declares); got {len(templates)}"
            )
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> ReleaseSource:
        # Two kinds would need a rule for which one wins; silently using one of them is
        # how a configured source gets ignored. Judged on the whole object, never on
        # which field happened to be validated first.
        given = [name for name in self.KINDS if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one kind of release source, not {' and '.join(given)}")
        if not given:
            raise ValueError(f"give one kind of release source: {', '.join(self.KINDS)}")
        return self

    @property
    def kind_name(self) -> str:
        """The field name of the kind given (``manifests``, ``image``, ``config_maps``)."""
        return next(name for name in self.KINDS if getattr(self, name) is not None)

    @property
    def kind(self) -> ReleaseKind:
        """The kind given, as a value."""
        if self.manifests is not None:
            return ReleaseManifests(tuple(self.manifests))
        found: ReleaseKind = getattr(self, self.kind_name)
        return found

    @property
    def signed(self) -> bool:
        """Whether pins and release keys apply to this source."""
        return self.kind_name in self.SIGNED

    def describe(self) -> str:
        """How reports and ``describe`` name this source."""
        return self.kind.describe()


ReleaseSource.KINDS = tuple(ReleaseSource.model_fields)


#: The flat fields of 0.1 and 0.2 that ``release`` replaced, each with its new place:
#: an old object is refused naming it rather than read as if it had no source.
RETIRED_RELEASE_FIELDS: Mapping[str, str] = {
    "release_manifest": "release.manifests",
    "release_image": "release.image.reference",
    "release_image_path": "release.image.path",
    "release_image_source": "release.image.source",
    "release_configmaps": "release.config_maps",
    "registry_auth": "release.image.registry.auth",
    "registry_ca_bundle": "release.image.registry.ca_bundle",
    "registry_insecure": "release.image.registry.insecure",
}


#: Entry pages read per instance at most (``pages``): each costs one request per instance.
MAX_PAGES = 16


def check_page(page: str) -> str:
    """An entry page path as ``pages`` takes it: it starts with one ``/`` and stays under
    the instance's URL (no host, no ``.`` or ``..``, no query or fragment, printable)."""
    if len(page) > 2048:
        raise ValueError(f"a page path of {len(page)} characters, more than 2048")
    if not page.startswith("/") or page.startswith("//"):
        raise ValueError(f"each page is a path starting with one '/', got {page!r}")
    if any(c in page for c in "?#\\ ") or not page.isprintable():
        raise ValueError(f"each page is a plain path (no query, fragment or space), got {page!r}")
    if any(part in (".", "..") for part in page.split("/")):
        raise ValueError(f"a page may not climb with '.' or '..', got {page!r}")
    return page


PagePath = Annotated[str, AfterValidator(check_page)]


class CheckSpec(_Model):
    """A whole check: which instances, what they should serve, and what to do."""

    targets: list[Target] = Field(default_factory=_empty, description="Bare URL instances.")
    kubernetes: KubernetesSource | None = Field(None, description="Pods in a cluster.")
    docker: DockerSource | None = Field(None, description="Docker containers.")
    prefix: str | None = Field(
        None,
        description="Path under each instance's URL where the release's files are served "
        "(Django STATIC_URL /static/, Rails /assets/); '/' = at the URL itself; null = "
        "detected (the URL itself, else the first of the served manifest's directory, "
        "static/, assets/ that serves the release's files, said in the report). The CDN "
        "URL's own path plays this role on the CDN.",
    )
    manifest_path: str | None = Field(
        None,
        description="Path of the served manifest: starting with '/', from the target's "
        "root; otherwise under the prefix; null = try the well-known names, then the ones "
        "the release lists.",
    )
    manifest_format: ManifestFormatName = Field("auto", description="Served manifest format.")
    release: ReleaseSource | None = Field(
        None,
        description="Where the expected release comes from: exactly one kind of release "
        "source; null = consensus of the instances.",
    )
    allow_names_only: bool = Field(
        False,
        description="Accept a release manifest without content hashes (Vite, webpack, CRA, "
        "Django): only file names are compared, and every report says so. A run judged by "
        "such a manifest never exits 0: names that match are inconclusive, since nobody "
        "vouched for the bytes.",
    )
    cdn: str | None = Field(
        None,
        description="CDN base URL the assets must exist on: the release's paths are looked "
        "up under its path (STATIC_URL https://cdn.example/static/ holds static/'s files "
        "as https://cdn.example/static/PATH), whatever the instances' prefix.",
    )
    cdn_include: list[str] = Field(
        default_factory=_empty,
        description="Globs of referenced files checked on the CDN; empty = every file.",
    )
    cdn_exclude: list[str] = Field(
        default_factory=lambda: ["*.html", "*.htm"],
        description="Globs of referenced files not checked on the CDN (entry pages are "
        "served by the origin).",
    )
    desired_version: str | None = Field(
        None, description="Version the workload should run; others are drift."
    )
    known_versions: list[str] = Field(
        default_factory=_empty,
        description="Other releases loaded to name what a mismatching instance serves.",
    )
    version_endpoint: VersionEndpoint | None = Field(
        None, description="Read the version from the instance over HTTP."
    )
    previous_on_instances: bool = Field(
        False,
        description="Also ask every instance for each previous_versions release's files "
        "(sampled like the current release's) and require the same bytes.",
    )
    previous_versions: list[str] = Field(
        default_factory=_empty,
        description="Releases that pages still open in browsers may ask for after a rollout "
        "(version skew): each is loaded from the release source and every one of its files "
        "must still be served by the CDN (cdn, the same include/exclude globs) and, with "
        "previous_on_instances, by the instances; a file missing or different is "
        "skew-missing or skew-differs (exit 1).",
    )
    skew_window: float = Field(
        3600.0,
        gt=0,
        description="Controller: seconds after a rollout during which the release the "
        "workload ran before the desired one is checked as a previous version.",
    )
    pages: list[PagePath] = Field(
        default_factory=lambda: ["/"],
        max_length=MAX_PAGES,
        description="Entry pages read from each instance, as paths resolved against the "
        "instance's URL like version_endpoint ('/' = the URL itself; add '/login' and the "
        f"like; at most {MAX_PAGES}, no query): a browser's view of what the site loads "
        "(scripts, stylesheets, preloads, icons, images). An empty list reads no page.",
    )
    interval: float = Field(60.0, gt=0, description="Controller re-sampling period, seconds.")
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    retry: RetrySettings = Field(default_factory=RetrySettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    cache_versions: int = Field(
        32, ge=1, le=10_000, description="Release manifests kept in memory, most recent first."
    )
    release_pins: bool = Field(
        False,
        description="Controller: pin each version's first release manifest in a ConfigMap "
        "of the controller's namespace (mirrored in status.releasePins, at most "
        "cache_versions); a different one later is ReleaseChanged and its instances "
        "inconclusive until a ReleaseAcceptance accepts it. The CLI's equivalent is "
        "--pins FILE.",
    )
    release_keys: list[str] = Field(
        default_factory=_empty,
        description="Controller: names of release keys the cluster admin configured "
        "(admin configuration release_keys, granted per namespace); release manifests "
        "must then carry a valid DSSE envelope beside them (URL + .intoto.jsonl) signed by "
        "one of them, else their instances are inconclusive. The CLI's equivalent is "
        "--release-key FILE.",
    )

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str | None) -> str | None:
        return None if v is None else normalise_prefix(v)

    @field_validator("version_endpoint", mode="before")
    @classmethod
    def _endpoint_as_string(cls, v: object) -> object:
        # the command line's PATH[#POINTER]: a YAML file copied from a command works
        return endpoint_fields(v) if isinstance(v, str) else v

    @model_validator(mode="before")
    @classmethod
    def _retired_fields(cls, data: object) -> object:
        # A 0.1 or 0.2 object must not read as one with no release source (consensus):
        # each old field is refused naming the field that replaced it.
        if not isinstance(data, Mapping):
            return data
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "value_error",
                    "Value error, {why}",
                    {"why": why},
                ),
                loc=(key,),
                input=data[key],
            )
            for key in data
            for why in [retired_field(key)]
            if why is not None
        ]
        if errors:
            raise ValidationError.from_exception_data("CheckSpec", errors)
        return data

    @model_validator(mode="after")
    def _release_needs(self) -> CheckSpec:
        # The ConfigMaps are read in the namespace of the checked pods and nowhere else,
        # so there must be one; judged on the whole spec, never on field order.
        if self.release is not None and self.release.config_maps is not None:
            if self.kubernetes is None:
                raise field_error(
                    ("release", "config_maps"),
                    "reads the ConfigMaps of the checked pods' namespace: give kubernetes "
                    "(--namespace)",
                    self.release.config_maps.selector,
                )
        if self.previous_versions and self.release is None:
            raise field_error(
                ("previous_versions",),
                "needs a release source to load the previous release from: release "
                "(--release-manifest, --release-image or --release-configmaps)",
                self.previous_versions,
            )
        return self

    @field_validator("cdn")
    @classmethod
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must not be empty")
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"must be an http:// or https:// URL, got {v!r}")
        return v

    @field_validator("pages")
    @classmethod
    def _pages(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("names the same page twice")
        return v

    @field_validator("desired_version")
    @classmethod
    def _desired(cls, v: str | None) -> str | None:
        return _check_version(v)

    @field_validator("known_versions")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        for item in v:
            _check_version(item)
        return v

    @field_validator("previous_versions")
    @classmethod
    def _previous(cls, v: list[str], info: ValidationInfo) -> list[str]:
        # A previous release is checked where browsers still ask for it; with nowhere to
        # ask, or no source to load it from, the flag would silently check nothing.
        for item in v:
            _check_version(item)
        if not v:
            return v
        if len(set(v)) != len(v):
            raise ValueError("names the same version twice")
        desired = info.data.get("desired_version")
        if desired in v:
            raise ValueError(
                f"{desired} is the desired (current) version; a previous version is one "
                "the fleet ran before it"
            )
        if not info.data.get("cdn") and not info.data.get("previous_on_instances"):
            raise ValueError(
                "needs somewhere to check the previous release: give cdn (--cdn) or "
                "previous_on_instances (--previous-on-instances)"
            )
        return v


_RETIRED_HOW = (
    "the release source is one field, release, holding one of manifests, image or "
    "config_maps (ArtifactCheck: release.manifests, release.image, release.configMaps)"
)


def _retired_name(key: object) -> str | None:
    """The retired release field ``key`` names, in either spelling, or None."""
    for field in RETIRED_RELEASE_FIELDS:
        if key in (field, camel_name(field)):
            return field
    return None


def retired_field(key: object) -> str | None:
    """Why ``key``, a 0.1/0.2 release field in either spelling, is refused (naming the
    field that replaced it), or None for any other key."""
    field = _retired_name(key)
    if field is None:
        return None
    return f"replaced by {RETIRED_RELEASE_FIELDS[field]}: {_RETIRED_HOW}"


def loc_part(part: object) -> str:
    """One field-path element; a key that could forge a line or a path is quoted.

    Also how admission renders what follows a field spelled by the object (a list
    index, a header name), so both name locations alike."""
    text = str(part)
    unsafe = not text or not text.isprintable() or any(c in text for c in ".:")
    return repr(text) if isinstance(part, str) and unsafe else text


def _as_typed(value: object) -> str:
    """`` 0`` after ``--concurrency``: a scalar as the user typed it, so the line reads
    like the command; anything else (a header map, which may hold secrets) is left out."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return ""
    text = str(value)
    if len(text) > 80 or not text.isprintable():
        return ""
    return f" {text}"


def format_validation_error(
    exc: ValidationError,
    *,
    prefix: str = "",
    name_of: Callable[[tuple[str | int, ...]], str | None] | None = None,
) -> str:
    """Render pydantic errors as ``field.path: problem`` lines.

    ``name_of(loc)`` may name a location differently (the command line names the flag
    that set a value, e.g. ``--concurrency`` for ``http.max_connections``).
    """
    lines = []
    for err in exc.errors():
        loc = ".".join(loc_part(p) for p in err["loc"]) or "(root)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        named = name_of(tuple(err["loc"])) if name_of is not None else None
        if named is not None and named.startswith("--"):
            named += _as_typed(err.get("input"))
        lines.append(f"{prefix}{named or loc}: {msg}")
    return "\n".join(lines)


def load_spec(
    data: Mapping[str, Any],
    *,
    origin: str = "configuration",
    name_of: Callable[[tuple[str | int, ...]], str | None] | None = None,
) -> CheckSpec:
    """Validate a mapping into a :class:`CheckSpec`, or raise ConfigError naming fields.

    ``name_of`` renames a field location in the message (see
    :func:`format_validation_error`).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{origin}: expected a mapping at the top level")
    try:
        return CheckSpec.model_validate(dict(data))
    except ValidationError as exc:
        text = format_validation_error(exc, name_of=name_of)
        raise ConfigError(f"{origin}: invalid\n{text}") from exc


class _NotPlain(Exception):
    """A document :func:`_plain_data` leaves to PyYAML's own constructor."""


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


def _plain_data(node: Any, construct_scalar: Callable[[Any], Any], held: set[int]) -> Any:
    """The value of a composed YAML node of plain mappings, lists and scalars.

    PyYAML's safe constructor makes each node through generic dispatch (a tag lookup,
    a generator per mapping, a merge-key scan); a spec of 1,000 targets is thousands of
    nodes, and that construction was most of reading it. This walks a tree of the
    three core tags directly: a string scalar is its text, any other scalar goes to the
    safe constructor (``construct_scalar``: ints, booleans, nulls, timestamps, unknown
    tags refused as before), and anything else raises :class:`_NotPlain` so the whole
    document is constructed by PyYAML: a collection reached twice (an alias, which the
    safe constructor shares rather than copies), a key that is not a string (a merge
    key ``<<``, a number), a collection of another tag (``!!set``, ``!!omap``).
    """
    tag = node.tag
    if tag == _STR:
        return node.value
    if tag == _MAP or tag == _SEQ:
        if id(node) in held:
            raise _NotPlain
        held.add(id(node))
        if tag == _SEQ:
            return [_plain_data(item, construct_scalar, held) for item in node.value]
        out: dict[str, Any] = {}
        for key, value in node.value:
            if key.tag != _STR:
                raise _NotPlain
            out[key.value] = _plain_data(value, construct_scalar, held)
        return out
    if node.id == "scalar":
        return construct_scalar(node)
    raise _NotPlain


@functools.cache
def _plain_loader() -> type:
    """PyYAML's safe loader (libyaml's, where PyYAML was built with it) that constructs
    a document of plain mappings, lists and scalars through :func:`_plain_data`."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class PlainLoader(base):  # type: ignore[misc, valid-type]
        def get_single_data(self) -> Any:
            node = self.get_single_node()
            if node is None:
                return None
            try:
                return _plain_data(node, self.construct_object, set())
            except _NotPlain:
                return self.construct_document(node)

    return PlainLoader


def read_spec_yaml(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML (or JSON) spec file; an empty file is ``{}``.

    The one reader of spec files (``--config`` and :func:`load_spec_file`), so a file
    that is not UTF-8, not YAML, nested too deeply or not a mapping is the same
    ConfigError naming the file whichever way it is read. Only plain YAML is
    constructed (the safe loader: a Python tag is an error), by libyaml when present.
    """
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        data = yaml.load(text, Loader=_plain_loader())  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):  # libyaml's own depth cap
            raise ConfigError(f"{p}: nested too deeply to be a configuration") from exc
        raise ConfigError(f"{p}: not valid YAML: {exc}") from exc
    except RecursionError as exc:  # PyYAML composes nested nodes recursively
        raise ConfigError(f"{p}: nested too deeply to be a configuration") from exc
    except (ValueError, KeyError, AttributeError) as exc:
        # the safe constructor's own failures on an explicitly tagged scalar it cannot
        # make (``!!int nope``, ``!!bool nope``, ``!!timestamp nope``)
        raise ConfigError(f"{p}: not valid YAML: a tagged value that cannot be made") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    return data


def load_spec_file(path: str | Path) -> CheckSpec:
    """Read a YAML (or JSON) file into a :class:`CheckSpec`."""
    return load_spec(read_spec_yaml(path), origin=str(Path(path)))


def markdown_reference() -> str:
    """The configuration reference (docs/configuration.md), generated from the models.

    Generated rather than written so it cannot drift from what ``load_spec`` accepts;
    a test compares the committed file with this function's output.
    """
    lines = [
        "# Configuration reference",
        "",
        "Generated from the `CheckSpec` model by `python -m artifactcheck.model.settings > "
        "docs/configuration.md`. The same model validates a `--config` YAML file, the "
        "command-line flags and the `spec` of an `ArtifactCheck` resource; unknown fields "
        "are rejected with their name.",
        "",
        "An `ArtifactCheck` spells every field in camelCase, as Kubernetes API conventions "
        "want (column *ArtifactCheck*: `release.configMaps`, `http.maxConnections`, "
        "`policy.gateFailOpen`; an acronym keeps one case, `verifyTLS`, `caBundle`). The "
        "CRD offers only that spelling: like any "
        "unknown field, a snake_case key in an ArtifactCheck is pruned by the API server "
        "(or refused, with strict field validation). A `--config` YAML file accepts either "
        "spelling; error messages name the snake_case field path (or the flag that set "
        "it). Keys of maps such as `http.headers` are data (header names), never renamed. "
        "Fields only the CLI honours (files, environment variables, Docker, bare URLs) are "
        "not in the CRD at all; see docs/security.md.",
        "",
        "The release source is one field, `release`, holding exactly one of its kinds: "
        "`manifests`, `image` (CLI only) or `config_maps`. The flat fields of 0.1 and 0.2 "
        "(`release_manifest`, `release_image`, `release_image_path`, "
        "`release_image_source`, `release_configmaps`, `registry_auth`, "
        "`registry_ca_bundle`, `registry_insecure`) are refused, each naming the field that "
        "replaced it: `release_manifest: [a.json]` reads `release: {manifests: [a.json]}`, "
        "`release_image: web:{version}` reads `release: {image: {reference: "
        "web:{version}}}`, `registry_auth` reads `release.image.registry.auth`, "
        "`releaseConfigMaps: {...}` reads `release: {configMaps: {...}}`.",
        "",
    ]

    def table(model: type[BaseModel], prefix: str) -> None:
        camel = ".".join(camel_name(p) for p in prefix.split(".")) if prefix else ""
        also = f" (ArtifactCheck: `{camel}`)" if camel != prefix else ""
        lines.append(f"## `{prefix or 'CheckSpec'}`{also}")
        lines.append("")
        if model.__doc__:
            lines.extend([model.__doc__.strip().splitlines()[0], ""])
        lines.append("| field | ArtifactCheck | type | default | description |")
        lines.append("|---|---|---|---|---|")
        nested: list[tuple[type[BaseModel], str]] = []
        for name, info in model.model_fields.items():
            ann = info.annotation
            sub = _model_in(ann)
            type_name = _type_name(ann)
            if info.is_required():
                default = "required"
            elif info.default_factory is not None:
                default = "see below" if sub else f"`{info.default_factory()}`"  # type: ignore[call-arg]
            else:
                default = f"`{info.default!r}`"
            desc = info.description or ""
            if not desc and sub is not None:
                desc = (sub.__doc__ or "").strip().splitlines()[0]
            alias = info.alias or name
            lines.append(f"| `{name}` | `{alias}` | {type_name} | {default} | {desc} |")
            if sub is not None:
                nested.append((sub, f"{prefix}.{name}" if prefix else name))
        lines.append("")
        for sub, path in nested:
            table(sub, path)

    table(CheckSpec, "")
    return "\n".join(lines).rstrip() + "\n"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _type_name(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "")
    text = re.sub(r"\b(?:artifactcheck\.model\.settings|__main__)\.", "", text)
    text = re.sub(r"<class '([^']+)'>", r"\1", text)
    text = re.sub(r"Annotated\[(\w+), [^\]]*\]", r"\1", text)  # validators are no type
    return "`" + text.replace("|", "or") + "`"


if __name__ == "__main__":  # pragma: no cover
    print(markdown_reference(), end="")
