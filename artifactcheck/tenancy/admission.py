"""What a namespaced ArtifactCheck may ask of the controller, as the cluster admin set it.

The controller holds cluster-wide rights and a service-account token; an ArtifactCheck
is written by whoever may create one in a namespace, often an application team. So the
``spec`` of a check is admitted here before anything is fetched or read for it:

* it never names a file, an environment variable or a local path (``http.header_files``,
  ``http.header_env``, ``http.ca_bundle``, a local file in ``release.manifests``), a
  container image or Docker engine (``release.image``, ``docker``) or bare URLs
  (``targets``): those belong to the CLI,
  run by a user on their own files;
* secrets reach a check by reference: the admin configures named **credentials**
  (headers read from mounted Secret files or the controller's environment, CA bundle
  files), each granted to namespaces by glob, and a check lists the names it uses in
  ``http.credentials`` (cert-manager's ClusterIssuer and External Secrets'
  ClusterSecretStore are the model: the admin owns the secret, the tenant the reference);
  a credential's headers go only to the ``hosts`` the admin lists for it, and to the
  check's own pods only when the admin says ``send_to_pods`` (whoever controls the pods
  reads every header sent to them; :mod:`artifactcheck.tenancy.credentials`);
* every URL it names must be on the admin's egress allow-list (hosts or URL prefixes,
  optionally per namespace); :mod:`artifactcheck.tenancy.egress` enforces the same list and the
  address rules on every connection;
* it acts only in its own namespace, within admin limits: minimum interval, instances
  and assets sampled, checks per namespace, and a per-namespace request budget
  (:class:`RequestBudget`).

:func:`admit` is pure: the namespace, the spec mapping and the configuration in, an
:class:`Admission` out, which is either a resolved :class:`CheckSpec` or the list of
:class:`Refusal` values naming the field and the rule. Only :func:`load_admin_config`
reads a file.
"""

from __future__ import annotations

import fnmatch
import math
import posixpath
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.records import Record
from artifactcheck.model.settings import (
    CheckSpec,
    HeaderEnv,
    HeaderFiles,
    KubernetesSource,
    ReleaseSource,
    SamplingSettings,
    check_headers,
    format_validation_error,
    load_spec,
    retired_field,
)
from artifactcheck.model.spelling import Spelling, spelled_as_fields
from artifactcheck.tenancy.egress import HostRule

#: Kinds of release source a namespaced check may use, each admitted by its rule here
#: (manifest URLs on the egress allow-list, ConfigMaps of the check's own namespace).
#: Any other kind, one added later included, is refused until it is admitted here: it
#: may read files, engines or networks of the controller's pod.
CONTROLLER_RELEASE_KINDS = frozenset({"manifests", "config_maps"})
_RELEASE_KIND_REFUSALS: Mapping[str, tuple[str, str]] = {
    "image": ("ReleaseImageRefused", "the controller does not read images"),
}

#: ``spec`` fields only the CLI honours; the CRD does not offer them and admission
#: refuses them (a fake or old API server may not enforce the schema). Paths are
#: tuples of field names; the reason is the rule a refusal names.
CONTROLLER_REFUSED_FIELDS: Mapping[tuple[str, ...], tuple[str, str]] = {
    ("targets",): ("BareTargetsRefused", "the controller checks only pods it selects"),
    ("docker",): ("DockerRefused", "the controller does not reach a Docker engine"),
    **{
        ("release", kind): _RELEASE_KIND_REFUSALS.get(
            kind, ("ReleaseSourceRefused", "the controller does not read this kind of source")
        )
        for kind in ReleaseSource.KINDS
        if kind not in CONTROLLER_RELEASE_KINDS
    },
    ("http", "header_files"): (
        "LocalFileRefused",
        "a check never names a file: refer to an admin credential in http.credentials",
    ),
    ("http", "header_env"): (
        "EnvironmentRefused",
        "a check never names an environment variable: refer to an admin credential in "
        "http.credentials",
    ),
    ("http", "ca_bundle"): (
        "LocalFileRefused",
        "a check never names a file: refer to an admin credential (with a CA bundle) in "
        "http.credentials",
    ),
    ("http", "transport"): (
        "TransportRefused",
        "the controller has one transport, the one that enforces its egress policy",
    ),
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _globs_valid(v: list[str]) -> list[str]:
    for pattern in v:
        if not pattern.strip():
            raise ValueError("a namespace glob must not be empty")
    return v


def _allow_entry(v: str) -> str:
    """A host ('cdn.example.com', 'cdn.example.com:8443') or an http(s) URL prefix, as
    the egress allow-list writes them; ValueError otherwise."""
    if "://" in v:
        split = urlsplit(v)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ValueError(f"a URL prefix must be http(s)://host/..., got {v!r}")
        if split.username or split.password or split.query or split.fragment:
            raise ValueError("a URL prefix has no user, query or fragment")
    elif not HostRule.parse(v).host or "/" in v:
        raise ValueError(f"expected a host or an http(s) URL prefix, got {v!r}")
    return v


class Credential(_Model):
    """A secret the admin lets checks use by name; its values never leave the controller's
    pod except as the request headers (and TLS trust) of the checks granted it.

    Its headers are sent only on requests to ``hosts`` (hosts or URL prefixes, in the
    egress allow-list's syntax, redirect hops judged one by one), and to the pods the
    check selects only with ``send_to_pods``: a credential meant for the CDN is not
    disclosed to whoever controls the pods. A credential with headers that go nowhere
    is a configuration error.
    """

    name: str = Field(description="Name a check lists in http.credentials.")
    namespaces: list[str] = Field(
        description="Namespaces (globs, e.g. 'team-*') whose checks may use it."
    )
    header_files: HeaderFiles
    header_env: HeaderEnv  # the controller's environment
    ca_bundle: str | None = Field(None, description="PEM file of extra trusted CAs.")
    hosts: list[str] = Field(
        default_factory=list,
        description="Where its headers may be sent: hosts ('cdn.example.com', "
        "'cdn.example.com:8443') or http(s) URL prefixes, as egress.allow writes them.",
    )
    send_to_pods: bool = Field(
        False, description="Also send its headers to the pods the check selects."
    )

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: list[str]) -> list[str]:
        return _globs_valid(v)

    @field_validator("header_files", "header_env")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        return check_headers(v)

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        return [_allow_entry(h) for h in v]

    @model_validator(mode="after")
    def _sent_somewhere(self) -> Credential:
        if (self.header_files or self.header_env) and not self.hosts and not self.send_to_pods:
            raise ValueError(
                f"credential {self.name!r} has headers but no hosts: list the hosts (or "
                "URL prefixes) they may be sent to in hosts, and set send_to_pods: true "
                "only if the checked pods may read them"
            )
        return self

    def granted_to(self, namespace: str) -> bool:
        """True when a check in ``namespace`` may use this credential."""
        return any(fnmatch.fnmatchcase(namespace, g) for g in self.namespaces)


class EgressRule(_Model):
    """A destination release manifests and CDNs may be fetched from."""

    allow: str = Field(
        description="A host ('cdn.example.com', 'cdn.example.com:8443') or an http(s) URL "
        "prefix ('https://cdn.example.com/releases/')."
    )
    namespaces: list[str] = Field(
        default_factory=lambda: ["*"], description="Namespaces (globs) it applies to."
    )

    @field_validator("allow")
    @classmethod
    def _allow(cls, v: str) -> str:
        return _allow_entry(v)

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: list[str]) -> list[str]:
        return _globs_valid(v)

    def applies_to(self, namespace: str) -> bool:
        """True when checks in ``namespace`` may use this rule."""
        return any(fnmatch.fnmatchcase(namespace, g) for g in self.namespaces)

    def allows_url(self, url: str) -> bool:
        """True when ``url`` (already parsed as a plain http(s) URL) is under this rule."""
        target = urlsplit(url)
        if "://" not in self.allow:
            rule = HostRule.parse(self.allow)
            return rule.matches(target.hostname or "", _port(target))
        prefix = urlsplit(self.allow)
        if (prefix.scheme, (prefix.hostname or "").lower(), _port(prefix)) != (
            target.scheme,
            (target.hostname or "").lower(),
            _port(target),
        ):
            return False
        base = prefix.path or "/"
        path = target.path or "/"
        if base.endswith("/"):
            return path.startswith(base)
        return path == base or path.startswith(base + "/")


def _port(split: Any) -> int:
    return int(split.port or {"http": 80, "https": 443}.get(split.scheme, 0))


class EgressSettings(_Model):
    """Where fetched URLs may point, beyond the pods a check selects."""

    allow: list[EgressRule] = Field(
        default_factory=list,
        description="Release-manifest and CDN destinations; empty = none (pods only).",
    )
    allow_loopback: bool = Field(
        False, description="Allow loopback addresses (a node-local proxy; tests)."
    )
    deny_cidrs: list[str] = Field(
        default_factory=list,
        description="More networks never connected to (on top of link-local, metadata, "
        "the API server and the controller's own addresses).",
    )
    proxy: str | None = Field(
        None,
        description="HTTP proxy (http://host:port) for release sources and CDNs; the "
        "controller never reads HTTPS_PROXY from its environment. The rules above judge "
        "each request's destination, not the proxy.",
        pattern=r"^http://[^\s/@]+(:[0-9]+)?/?$",
    )
    no_proxy: str = Field(
        "", description="Hosts reached directly although a proxy is set (NO_PROXY syntax)."
    )

    @field_validator("allow", mode="before")
    @classmethod
    def _plain(cls, v: object) -> object:
        if isinstance(v, list):
            return [{"allow": item} if isinstance(item, str) else item for item in v]
        return v

    @field_validator("deny_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        import ipaddress

        for item in v:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError as exc:
                raise ValueError(f"{item!r} is not a network: {exc}") from exc
        return v


class ReleaseDirectory(_Model):
    """A directory of release manifests the admin mounted into the controller (e.g. a
    ConfigMap volume), which checks of some namespaces may name as local files."""

    directory: str = Field(description="Absolute path of the directory.")
    namespaces: list[str] = Field(description="Namespaces (globs) whose checks may use it.")

    @field_validator("directory")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or ".." in v.split("/"):
            raise ValueError(f"must be an absolute path without '..', got {v!r}")
        return posixpath.normpath(v)

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: list[str]) -> list[str]:
        return _globs_valid(v)

    def contains(self, path: str, namespace: str) -> bool:
        """True when ``path`` (a file or template) lies inside, for ``namespace``."""
        if not any(fnmatch.fnmatchcase(namespace, g) for g in self.namespaces):
            return False
        if not path.startswith("/") or ".." in path.split("/"):
            return False
        # The directory the file (or, for a template, its fixed part) is in; the
        # version filled in later cannot leave it (the release source refuses that).
        static = path.split("{", 1)[0]
        folder = posixpath.normpath(static if static.endswith("/") else posixpath.dirname(static))
        return (folder.rstrip("/") + "/").startswith(self.directory.rstrip("/") + "/")


class ReleaseKey(_Model):
    """A public key release manifests may be signed with, granted to namespaces.

    The key is the admin's word on who publishes releases: a check only names it
    (``spec.releaseKeys``), so whoever writes an ArtifactCheck cannot bring their own
    key, nor a path to read. ``file``: a mounted PEM file (a ConfigMap or Secret volume);
    ``pem``: the PEM text itself (a public key is not a secret). Exactly one.
    """

    name: str = Field(description="Name a check lists in releaseKeys.")
    namespaces: list[str] = Field(description="Namespaces (globs) whose checks may use it.")
    file: str | None = Field(None, description="PEM SubjectPublicKeyInfo file (cosign.pub).")
    pem: str | None = Field(None, description="The PEM SubjectPublicKeyInfo text itself.")

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: list[str]) -> list[str]:
        return _globs_valid(v)

    @model_validator(mode="after")
    def _one_source(self) -> ReleaseKey:
        if (self.file is None) == (self.pem is None):
            raise ValueError(f"release key {self.name!r}: give exactly one of file and pem")
        return self

    def granted_to(self, namespace: str) -> bool:
        """True when a check in ``namespace`` may use this key."""
        return any(fnmatch.fnmatchcase(namespace, g) for g in self.namespaces)

    def read(self) -> tuple[bytes, str]:
        """The PEM bytes and where they came from (OSError when the file is missing)."""
        if self.pem is not None:
            return self.pem.encode(), f"admin release key {self.name!r}"
        assert self.file is not None
        with open(self.file, "rb") as f:
            return f.read(64 * 1024 + 1), f"admin release key {self.name!r} ({self.file})"


class Limits(_Model):
    """Fair use: what one check, and one namespace, may cost."""

    min_interval: float = Field(30.0, gt=0, description="Shortest interval, seconds.")
    max_instances: int = Field(
        100, ge=1, description="Most pods sampled per cycle; a check asking more is refused."
    )
    max_assets_per_instance: int = Field(
        1000, ge=0, description="Most assets fetched per pod; a check asking more is refused."
    )
    max_checks_per_namespace: int = Field(
        10, ge=0, description="ArtifactChecks accepted per namespace (oldest first)."
    )
    requests_per_minute: float = Field(
        6000.0, gt=0, description="Request budget per namespace (all its checks together)."
    )
    concurrent_cycles_per_namespace: int = Field(
        2, ge=1, description="Check cycles of one namespace running at once."
    )
    allow_cordon_namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces (globs) whose checks may cordon nodes (cluster-wide action).",
    )


def _names_unique(what: str, names: list[str]) -> None:
    """A check names an admin's credential or key by name: two with one name is ambiguous."""
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{what} names must be unique: {', '.join(dupes)}")


class AdminConfig(_Model):
    """The cluster admin's tenancy configuration (``--admin-config``, a ConfigMap)."""

    credentials: list[Credential] = Field(default_factory=list)
    egress: EgressSettings = Field(default_factory=EgressSettings)
    limits: Limits = Field(default_factory=Limits)
    release_directories: list[ReleaseDirectory] = Field(default_factory=list)
    release_keys: list[ReleaseKey] = Field(default_factory=list)

    @field_validator("release_keys")
    @classmethod
    def _unique_keys(cls, v: list[ReleaseKey]) -> list[ReleaseKey]:
        _names_unique("release key", [k.name for k in v])
        return v

    @field_validator("credentials")
    @classmethod
    def _unique(cls, v: list[Credential]) -> list[Credential]:
        _names_unique("credential", [c.name for c in v])
        return v

    def credential(self, name: str) -> Credential | None:
        """The credential called ``name``, or None."""
        return next((c for c in self.credentials if c.name == name), None)

    def egress_rules(self, namespace: str) -> tuple[EgressRule, ...]:
        """The allow-list rules that apply to checks in ``namespace``."""
        return tuple(r for r in self.egress.allow if r.applies_to(namespace))


def load_admin_config(path: str | Path | None) -> AdminConfig:
    """Read the admin configuration; None is the strict default (nothing granted).

    The file may be the bare configuration or a ConfigMap manifest whose
    ``data["admin-config.yaml"]`` holds it (what k8s/admin-config.yaml ships).
    """
    if path is None:
        return AdminConfig()
    import yaml

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the admin configuration: {exc.strerror}") from exc
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        raise ConfigError(f"{p}: not a YAML admin configuration: {exc}") from exc
    if isinstance(data, Mapping) and data.get("kind") == "ConfigMap":
        inner = (data.get("data") or {}).get("admin-config.yaml", "")
        data = yaml.safe_load(inner) or {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    try:
        return AdminConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(f"{p}: invalid\n{format_validation_error(exc)}") from exc


# --------------------------------------------------------------------------- admission


class Refusal(Record):
    """One reason an ArtifactCheck is not accepted: the field, the rule, in words."""

    field: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} ({self.rule})"


class Admission(Record):
    """The outcome of :func:`admit`: a resolved spec, or refusals (never both)."""

    spec: CheckSpec | None
    refusals: tuple[Refusal, ...] = ()
    sources: tuple[str, ...] = ()  # URLs the check may fetch beyond its pods
    #: The credentials granted, whose headers go only where each one says (the spec's
    #: ``http`` carries their CA bundle, never their headers).
    credentials: tuple[Credential, ...] = ()
    #: The release keys granted (``spec.releaseKeys``): releases must be signed by one.
    release_keys: tuple[ReleaseKey, ...] = ()

    @property
    def accepted(self) -> bool:
        """True when the check may run."""
        return self.spec is not None

    @property
    def reason(self) -> str:
        """The condition reason: the first refusal's rule, or Accepted."""
        return self.refusals[0].rule if self.refusals else "Accepted"

    @property
    def message(self) -> str:
        """The condition message: every refusal, field first."""
        if not self.refusals:
            return "the check is within what the admin configuration allows"
        return "; ".join(str(r) for r in self.refusals)


def _present(spec: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = spec
    for name in path:
        if not isinstance(node, Mapping) or name not in node:
            return False
        node = node[name]
    return node not in (None, {}, [], "")


def _url_refusal(
    field_name: str,
    url: str,
    rules: Sequence[EgressRule],
    namespace: str,
    directories: Sequence[ReleaseDirectory] = (),
) -> Refusal | None:
    """Why a release-manifest template or CDN URL may not be fetched, or None."""
    if not url.startswith(("http://", "https://")):
        if any(d.contains(url, namespace) for d in directories):
            return None
        return Refusal(
            field_name,
            "LocalPathRefused",
            "only http(s) URLs are fetched for a namespaced check, never a local path "
            "(except in a release directory the admin granted this namespace)",
        )
    static = url.split("{", 1)[0]
    split = urlsplit(static)
    if "{" in url and "{" in url.split("//", 1)[1].split("/", 1)[0]:
        return Refusal(
            field_name, "EgressNotAllowed", "the host of a URL must not depend on the version"
        )
    if split.username is not None or split.password is not None or "@" in split.netloc:
        return Refusal(field_name, "EgressNotAllowed", "a URL must not carry user information")
    try:
        split.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return Refusal(field_name, "EgressNotAllowed", "the URL's port is not a number")
    if not split.hostname:
        return Refusal(field_name, "EgressNotAllowed", "the URL names no host")
    segments = split.path.replace("%2e", ".").replace("%2E", ".").split("/")
    if any(s in (".", "..") for s in segments):
        return Refusal(field_name, "EgressNotAllowed", "a URL must not contain dot segments")
    # A template: the part before the first placeholder must already be under a rule
    # (the fetcher keeps every request and redirect under its base).
    if not any(r.allows_url(static) for r in rules):
        return Refusal(
            field_name,
            "EgressNotAllowed",
            f"{split.scheme}://{split.netloc}{split.path} is not on the admin's egress "
            f"allow-list for namespace {namespace!r}",
        )
    return None


def admit(
    namespace: str,
    spec: Mapping[str, Any],
    config: AdminConfig,
    *,
    checks_in_namespace: int = 0,
) -> Admission:
    """Admit the ``spec`` of an ArtifactCheck living in ``namespace``.

    ``checks_in_namespace`` counts the *other* checks already accepted there. Every
    rule is evaluated, so the author sees all refusals at once; nothing is read from
    the file system or the network. The spec may spell fields in camelCase (the CRD's
    names) or snake_case: the rules apply to field names (:func:`spelled_as_fields`),
    and refusals name fields as the spec wrote them.
    """
    if not isinstance(spec, Mapping):
        return Admission(None, (Refusal("spec", "InvalidSpec", "spec must be a mapping"),))
    spelling = spelled_as_fields(spec)
    spec = spelling.spec  # field names from here on, whatever the object's spelling
    refusals = _field_refusals(spec, spelling)
    limits = config.limits
    if checks_in_namespace >= limits.max_checks_per_namespace:
        refusals.append(
            Refusal(
                "metadata.namespace",
                "TooManyChecks",
                f"namespace {namespace!r} already has {checks_in_namespace} accepted "
                f"ArtifactCheck(s), the admin allows {limits.max_checks_per_namespace}",
            )
        )
    try:
        parsed = load_spec(spec, origin="spec", name_of=spelling.name_of)
    except ConfigError as exc:
        # Report the refused fields (if any) first: they explain more than a type error.
        refusals.append(Refusal("spec", "InvalidSpec", str(exc).replace("\n", " ")[:1000]))
        return Admission(None, tuple(refusals))
    source = _own_namespace(parsed, spec, namespace, spelling, refusals)
    refusals.extend(_egress_refusals(parsed, namespace, config, spelling))
    refusals.extend(_limit_refusals(parsed, namespace, limits, spelling))
    granted, credentials = _granted_credentials(parsed, namespace, config, spelling, refusals)
    release_keys = _granted_release_keys(parsed, namespace, config, spelling, refusals)
    if refusals:
        return Admission(None, tuple(refusals))
    resolved = parsed.model_copy(
        update={
            "kubernetes": source,
            "http": parsed.http.model_copy(update=granted),
            "sampling": _bounded_sampling(parsed.sampling, limits),
        }
    )
    urls = tuple(
        u
        for u in [*_release_manifests(parsed), *([parsed.cdn] if parsed.cdn else [])]
        if u.startswith(("http://", "https://"))
    )
    return Admission(resolved, (), urls, credentials, release_keys)


def _field_refusals(spec: Mapping[str, Any], spelling: Spelling) -> list[Refusal]:
    """Fields given under both of their names, and fields only the CLI honours."""
    refusals = [
        Refusal(second, "DuplicateField", f"the same field as {first}, given twice")
        for first, second in spelling.twice
    ]
    for path, (rule, why) in CONTROLLER_REFUSED_FIELDS.items():
        if _present(spec, path):
            refusals.append(Refusal(spelling.name(*path), rule, why))
    for key in spec:
        new = retired_field(key)
        if new is not None:  # an object written for 0.1/0.2: never read as consensus
            refusals.append(Refusal(spelling.name(str(key)), "RetiredField", new))
    return refusals


def _own_namespace(
    parsed: CheckSpec,
    spec: Mapping[str, Any],
    namespace: str,
    spelling: Spelling,
    refusals: list[Refusal],
) -> KubernetesSource:
    """The pod source, always in the check's own namespace; another one is refused."""
    source = parsed.kubernetes
    if source is None:
        return KubernetesSource.model_validate({"namespace": namespace})
    if "namespace" in (spec.get("kubernetes") or {}) and source.namespace != namespace:
        refusals.append(
            Refusal(
                spelling.name("kubernetes", "namespace"),
                "OtherNamespace",
                f"a check acts only in its own namespace {namespace!r}, not {source.namespace!r}",
            )
        )
        return source
    return source.model_copy(update={"namespace": namespace})


def _egress_refusals(
    parsed: CheckSpec, namespace: str, config: AdminConfig, spelling: Spelling
) -> list[Refusal]:
    """Release-manifest and CDN URLs that are not on the admin's allow-list."""
    rules = config.egress_rules(namespace)
    problems = [
        _url_refusal(
            f"{spelling.name('release', 'manifests')}[{i}]",
            template,
            rules,
            namespace,
            config.release_directories,
        )
        for i, template in enumerate(_release_manifests(parsed))
    ]
    if parsed.cdn is not None:
        problems.append(_url_refusal(spelling.name("cdn"), parsed.cdn, rules, namespace))
    return [p for p in problems if p is not None]


def _limit_refusals(
    parsed: CheckSpec, namespace: str, limits: Limits, spelling: Spelling
) -> list[Refusal]:
    """What the check asks beyond the admin's limits: interval, sampling, cordoning."""
    refusals = []
    if parsed.interval < limits.min_interval:
        refusals.append(
            Refusal(
                spelling.name("interval"),
                "IntervalBelowMinimum",
                f"{parsed.interval:g}s is below the admin's minimum of {limits.min_interval:g}s",
            )
        )
    sampling = parsed.sampling
    if sampling.instances is not None and sampling.instances > limits.max_instances:
        refusals.append(
            Refusal(
                spelling.name("sampling", "instances"),
                "SamplingAboveMaximum",
                f"{sampling.instances} is above the admin's maximum of {limits.max_instances}",
            )
        )
    assets = sampling.assets_per_instance
    if assets is not None and assets > limits.max_assets_per_instance:
        refusals.append(
            Refusal(
                spelling.name("sampling", "assets_per_instance"),
                "SamplingAboveMaximum",
                f"{assets} is above the admin's maximum of {limits.max_assets_per_instance}",
            )
        )
    if parsed.policy.cordon_nodes and not any(
        fnmatch.fnmatchcase(namespace, g) for g in limits.allow_cordon_namespaces
    ):
        refusals.append(
            Refusal(
                spelling.name("policy", "cordon_nodes"),
                "ClusterScopedAction",
                "cordoning a node acts beyond the namespace; the admin has not allowed it "
                f"for {namespace!r}",
            )
        )
    return refusals


def _granted_credentials(
    parsed: CheckSpec,
    namespace: str,
    config: AdminConfig,
    spelling: Spelling,
    refusals: list[Refusal],
) -> tuple[dict[str, Any], tuple[Credential, ...]]:
    """The ``http`` fields the check's credentials fill in (the CA bundle: their
    headers are sent per request, :mod:`artifactcheck.tenancy.credentials`) and the
    credentials granted; unknown, ungranted or conflicting credentials are added to
    ``refusals``."""
    header_files: dict[str, str] = {}
    header_env: dict[str, str] = {}
    ca_bundle: str | None = None
    granted: list[Credential] = []
    for i, name in enumerate(parsed.http.credentials):
        cred = config.credential(name)
        where = f"{spelling.name('http', 'credentials')}[{i}]"
        if cred is None or not cred.granted_to(namespace):
            refusals.append(
                Refusal(
                    where,
                    "CredentialNotGranted",
                    f"credential {name!r} is unknown or not granted to namespace {namespace!r}",
                )
            )
            continue
        for header in [*cred.header_files, *cred.header_env]:
            taken = {h.lower() for h in [*parsed.http.headers, *header_files, *header_env]}
            if header.lower() in taken:
                refusals.append(
                    Refusal(
                        where,
                        "CredentialConflict",
                        f"credential {name!r} sets header {header!r}, already set",
                    )
                )
        if cred.ca_bundle is not None:
            if ca_bundle is not None and ca_bundle != cred.ca_bundle:
                refusals.append(
                    Refusal(where, "CredentialConflict", "two credentials bring a CA bundle")
                )
            ca_bundle = cred.ca_bundle
        header_files.update(cred.header_files)
        header_env.update(cred.header_env)
        granted.append(cred)
    return {"ca_bundle": ca_bundle}, tuple(granted)


def _granted_release_keys(
    parsed: CheckSpec,
    namespace: str,
    config: AdminConfig,
    spelling: Spelling,
    refusals: list[Refusal],
) -> tuple[ReleaseKey, ...]:
    """The release keys the check names, each granted to its namespace; an unknown or
    ungranted name is refused (never skipped: a check that asked for signed releases
    must not silently trust unsigned ones). Pins and keys need release manifests."""
    granted: list[ReleaseKey] = []
    for i, name in enumerate(parsed.release_keys):
        key = next((k for k in config.release_keys if k.name == name), None)
        if key is None or not key.granted_to(namespace):
            refusals.append(
                Refusal(
                    f"{spelling.name('release_keys')}[{i}]",
                    "ReleaseKeyNotGranted",
                    f"release key {name!r} is unknown or not granted to namespace {namespace!r}",
                )
            )
            continue
        granted.append(key)
    trusting = [f for f in ("release_keys", "release_pins") if getattr(parsed, f)]
    if trusting and not (parsed.release is not None and parsed.release.signed):
        refusals.append(
            Refusal(
                spelling.name(trusting[0]),
                "ReleaseTrustNeedsManifests",
                "release keys and pins apply to release manifests (release.manifests URLs "
                "or release.configMaps), not to release images or consensus",
            )
        )
    return tuple(granted)


def _release_manifests(parsed: CheckSpec) -> list[str]:
    """The release manifest files and URLs a check names (none for another kind)."""
    if parsed.release is None or parsed.release.manifests is None:
        return []
    return parsed.release.manifests


def _bounded_sampling(sampling: SamplingSettings, limits: Limits) -> SamplingSettings:
    """Sampling with the admin's maximums where the check left it unbounded."""
    assets = sampling.assets_per_instance
    return sampling.model_copy(
        update={
            "instances": sampling.instances or limits.max_instances,
            "assets_per_instance": limits.max_assets_per_instance if assets is None else assets,
        }
    )


def source_hosts(admission: Admission) -> tuple[HostRule, ...]:
    """The (host, port) destinations an accepted check's sources connect to."""
    out: list[HostRule] = []
    for url in admission.sources:
        split = urlsplit(url.split("{", 1)[0])
        out.append(HostRule(host=(split.hostname or "").lower(), port=_port(split)))
    return tuple(dict.fromkeys(out))


# --------------------------------------------------------------------------- fair use


@dataclass
class RequestBudget:
    """A token bucket of requests per namespace, shared by all its checks.

    A cycle may start while the bucket is not empty and pays for its requests after
    it ran (so one cycle may take the bucket into debt, never further): over any
    window a namespace sends at most its rate times the window, plus one cycle.
    """

    per_minute: float
    clock: Callable[[], float] = time.monotonic
    _tokens: dict[str, float] = field(default_factory=dict)
    _stamp: dict[str, float] = field(default_factory=dict)

    @property
    def capacity(self) -> float:
        """The burst a quiet namespace may spend at once: one minute's worth."""
        return self.per_minute

    def _refill(self, namespace: str) -> float:
        now = self.clock()
        last = self._stamp.get(namespace, now)
        tokens = self._tokens.get(namespace, self.capacity)
        tokens = min(self.capacity, tokens + (now - last) * self.per_minute / 60.0)
        self._tokens[namespace], self._stamp[namespace] = tokens, now
        return tokens

    def wait_time(self, namespace: str) -> float:
        """Seconds until ``namespace`` may start a cycle (0 = now)."""
        tokens = self._refill(namespace)
        if tokens > 0:
            return 0.0
        return math.ceil((1 - tokens) * 60.0 / self.per_minute * 1000) / 1000

    def spend(self, namespace: str, requests: int) -> None:
        """Pay for the requests a cycle sent."""
        self._tokens[namespace] = self._refill(namespace) - requests

    def tokens(self, namespace: str) -> float:
        """Requests left now (negative: in debt)."""
        return self._refill(namespace)


__all__ = [
    "CONTROLLER_REFUSED_FIELDS",
    "Admission",
    "AdminConfig",
    "Credential",
    "EgressRule",
    "EgressSettings",
    "Limits",
    "Refusal",
    "ReleaseDirectory",
    "RequestBudget",
    "admit",
    "load_admin_config",
    "source_hosts",
]
