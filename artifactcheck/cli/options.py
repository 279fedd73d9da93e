"""Command-line options shared by ``verify``, ``investigate`` and ``fleet``.

The three commands select instances, releases and the CDN the same way; one list of
flags and one function turning them into a :class:`~artifactcheck.model.settings.CheckSpec`
keeps them agreeing (and a YAML file overlaid with flags validates as one model, so a
bad value is reported with its field name whichever way it was given).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from artifactcheck.clients.filesystem import unwritable
from artifactcheck.model.errors import ConfigError

if TYPE_CHECKING:  # pydantic loads when a spec is built, not for --help
    from artifactcheck.model.settings import CheckSpec


class SingleValueOption(click.Option):
    """An option taking one value that refuses to be given twice.

    click keeps the last of repeated occurrences, so ``--release-manifest a.json
    --release-manifest b.json`` would silently check against ``b.json`` alone; a dropped
    value is a verdict against the wrong expectation. The parser is told to collect
    every occurrence (as for ``multiple=True``) and more than one is a usage error.
    Options meant to repeat use ``multiple=True`` (or ``count=True``) and are left alone.
    """

    def add_to_parser(self, parser: Any, ctx: click.Context) -> None:
        """Collect occurrences into a list instead of overwriting one value."""
        if self.multiple or self.count:
            super().add_to_parser(parser, ctx)
            return
        self.multiple = True
        try:
            super().add_to_parser(parser, ctx)
        finally:
            self.multiple = False

    def consume_value(self, ctx: click.Context, opts: Mapping[str, Any]) -> Any:
        """Refuse a repeated occurrence; unwrap a single one."""
        raw = opts.get(self.name) if self.name is not None else None
        if not (self.multiple or self.count) and isinstance(raw, list):
            if len(raw) > 1:
                spelled = " / ".join(self.opts + self.secondary_opts)
                raise click.BadOptionUsage(
                    self.name or spelled,
                    f"{spelled} was given {len(raw)} times; it takes one value (give it once)",
                    ctx=ctx,
                )
            opts = {**opts, self.name: raw[0]}
        return super().consume_value(ctx, opts)


def guard_repeats(command: click.Command) -> None:
    """Make every single-value option of a command tree refuse repetition.

    Applied to the whole CLI once, so a command added later (or in another module)
    cannot reintroduce click's keep-the-last default.
    """
    for param in command.params:
        if type(param) is click.Option and not (param.multiple or param.count):
            param.__class__ = SingleValueOption
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            guard_repeats(sub)


#: CheckSpec field path -> the flag that sets it, so an error names what the user typed.
FLAG_OF_FIELD: Mapping[str, str] = {
    "targets": "--target",
    "docker.labels": "--docker-label",
    "docker.network": "--docker-network",
    "docker.port": "--docker-port",
    "docker.on_mismatch": "--on-mismatch",
    "kubernetes.namespace": "--namespace",
    "kubernetes.selector": "--selector",
    "kubernetes.port": "--pod-port",
    "cdn": "--cdn",
    "cdn_include": "--cdn-include",
    "cdn_exclude": "--cdn-exclude",
    "prefix": "--prefix",
    "release.manifests": "--release-manifest",
    "allow_names_only": "--allow-names-only",
    "release.image.reference": "--release-image",
    "release.image.path": "--release-image-path",
    "release.config_maps.selector": "--release-configmaps",
    "known_versions": "--known-version",
    "desired_version": "--desired-version",
    "previous_versions": "--previous-version",
    "previous_on_instances": "--previous-on-instances",
    "manifest_path": "--manifest-path",
    "manifest_format": "--manifest-format",
    "version_endpoint": "--version-endpoint",
    "http.host_header": "--host-header",
    "http.headers": "--header",
    "http.header_env": "--header-env",
    "http.header_files": "--header-file",
    "http.ca_bundle": "--ca-bundle",
    "http.verify_tls": "--insecure",
    "http.compare_encodings": "--compare-encoding",
    "http.instance_deadline": "--deadline",
    "http.max_connections": "--concurrency",
    "sampling.instances": "--sample-instances",
    "sampling.assets_per_instance": "--sample-assets",
    "sampling.seed": "--seed",
    "policy.confirmations": "--confirmations",
    "policy.max_quarantine_fraction": "--max-fraction",
    "policy.dry_run": "--dry-run",
    "pages": "--page",
}


class FlagNames:
    """Which field locations of a spec were set by which flag (not by the config file)."""

    def __init__(self) -> None:
        self._names: dict[tuple[str | int, ...], str] = {}

    def add(self, loc: tuple[str | int, ...], flag: str) -> None:
        """Record that ``flag`` set the value at ``loc``."""
        self._names[loc] = flag

    def flag_for(self, field: str) -> str | None:
        """The flag that set a dotted field path, if a flag did."""
        return self(tuple(field.split(".")))

    def __call__(self, loc: tuple[str | int, ...]) -> str | None:
        """The flag naming a location (the longest recorded prefix), or None; a section
        some flags filled (``release`` from --release-image) is named with them."""
        for n in range(len(loc), 0, -1):
            flag = self._names.get(loc[:n])
            if flag is not None:
                if n == len(loc):
                    return flag
                return f"{flag} ({'.'.join(str(p) for p in loc)})"
        inside = [f for at, f in self._names.items() if loc and at[: len(loc)] == loc]
        if inside:
            return f"{'.'.join(str(p) for p in loc)} ({', '.join(dict.fromkeys(inside))})"
        return None

    def explain(self, exc: ConfigError) -> ConfigError:
        """The same error with the field replaced by the flag that set it, if any."""
        flag = self.flag_for(exc.field) if exc.field else None
        if flag is None:
            return exc
        renamed = ConfigError(f"{flag}: {exc.detail}")
        renamed.__cause__ = exc.__cause__
        return renamed


def check_destinations(outs: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """Refuse, before anything runs, outputs that would interleave on standard output,
    one file named twice, or a file that cannot be written (``dest`` None = stdout)."""
    to_stdout = [kind for kind, dest in outs if dest is None]
    if len(to_stdout) > 1:
        raise ConfigError(
            f"--output: {' and '.join(to_stdout)} would both go to standard output; "
            f"write all but one to a file, e.g. -o {to_stdout[-1]}=report.{to_stdout[-1]}"
        )
    files = [dest for _, dest in outs if dest is not None]
    for dest in files:
        if files.count(dest) > 1:
            raise ConfigError(f"--output: {dest} is given twice; one file per format")
        problem = unwritable(Path(dest))
        if problem is not None:
            raise ConfigError(f"--output {dest}: {problem}")
    return outs


def parse_kv(values: tuple[str, ...], option: str, sep: str = "=") -> dict[str, str]:
    out = {}
    for item in values:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise ConfigError(f"{option} {item!r}: expected NAME{sep}VALUE")
        out[key.strip()] = value.strip()
    return out


def _as_field_names(loaded: dict[str, Any], path: Path) -> dict[str, Any]:
    """The file's keys as field names: a file may spell fields in camelCase (as an
    ArtifactCheck does) or snake_case, and flags overlay field names, so a flag for a
    field the file spelled ``maxConnections`` overrides it instead of clashing."""
    from artifactcheck.model.spelling import spelled_as_fields

    spelling = spelled_as_fields(loaded)
    if spelling.twice:
        both = ", ".join(
            f"{a.removeprefix('spec.')} and {b.removeprefix('spec.')}" for a, b in spelling.twice
        )
        raise ConfigError(f"{path}: {both}: one field given under both of its names")
    return spelling.spec


#: List fields whose flags add to the field's default when the file does not set it:
#: ``--cdn-exclude '*.map'`` keeps HTML pages off the CDN check as before.
#: ``--page /login`` reads /login beside the target's own page.
_FLAGS_ADD_TO_DEFAULT = frozenset({"cdn_exclude", "pages"})


def _field_default(key: str) -> Any:
    from artifactcheck.model.settings import CheckSpec

    info = CheckSpec.model_fields[key]
    return info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]


def build_spec(
    config: str | None, overrides: dict[str, Any], flags: FlagNames | None = None
) -> Any:
    """A CheckSpec from an optional YAML file overlaid with command-line values.

    ``flags`` is filled with the locations each override set (see FLAG_OF_FIELD), so a
    validation error names the flag rather than the field when a flag set the value.
    """
    from artifactcheck.model.settings import load_spec, read_spec_yaml

    data: dict[str, Any] = {}
    origin = "command line"
    if config:
        path = Path(config)
        data = _as_field_names(read_spec_yaml(path), path)
        origin = f"{path} + command line"
    for key, value in overrides.items():
        if value is None or value == () or value == []:
            continue
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{origin}: {part} must be a mapping")
        before = node.get(leaf)
        if before is None and not parents and key in _FLAGS_ADD_TO_DEFAULT:
            before = list(_field_default(key))
        if isinstance(value, list) and isinstance(before, str):
            before = [before]  # ``manifests: one.json`` in YAML, more from flags
        if isinstance(value, list) and isinstance(before, list):
            node[leaf] = before + value
        elif isinstance(value, dict) and isinstance(before, dict):
            node[leaf] = {**before, **value}
        else:
            node[leaf] = value
        if flags is not None:
            _record(flags, key, value, before)
    return load_spec(data, origin=origin, name_of=flags)


def _record(flags: FlagNames, key: str, value: Any, before: Any) -> None:
    """Note which locations a flag's value occupies in the merged document."""
    loc = tuple(key.split("."))
    flag = FLAG_OF_FIELD.get(key)
    if isinstance(value, dict) and flag is None:  # a section built from several flags
        for sub in value:
            sub_flag = FLAG_OF_FIELD.get(f"{key}.{sub}")
            if sub_flag is not None:
                flags.add((*loc, sub), sub_flag)
        return
    if flag is None:
        return
    if isinstance(value, list):
        offset = len(before) if isinstance(before, list) else 0
        for i in range(len(value)):
            flags.add((*loc, offset + i), flag)
        if not offset:
            flags.add(loc, flag)
    elif isinstance(value, dict):
        for sub in value:
            flags.add((*loc, sub), flag)
        if not isinstance(before, dict):
            flags.add(loc, flag)
    else:
        flags.add(loc, flag)


def version_endpoint(value: str | None) -> dict[str, str] | None:
    """``--version-endpoint PATH[#POINTER]`` as the spec's fields (the YAML spelling
    is the same string, read by the model)."""
    if not value:
        return None
    from artifactcheck.model.settings import endpoint_fields

    return endpoint_fields(value)


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def target_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The instance, release and CDN flags of ``verify``, so the three commands agree.

    Listed in ``--help`` in this order: where, release, served, HTTP, discovery.
    """
    options = [
        *_where_options(),
        *_release_options(),
        *_served_options(),
        *_http_options(),
        *_discovery_options(),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def previous_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--previous-version`` (repeatable) and ``--previous-on-instances``: the releases
    pages still open in browsers ask for after a rollout (``verify`` only)."""
    options = [
        click.option(
            "--previous-version",
            "previous_versions",
            multiple=True,
            metavar="V",
            help="A release pages already open in browsers may still ask for (version "
            "skew): the CDN (--cdn) must still serve every file of it, loaded from the "
            "release source; a file missing or different is skew-missing or skew-differs "
            "(exit 1). Repeatable.",
        ),
        click.option(
            "--previous-on-instances",
            cls=SingleValueOption,
            is_flag=True,
            default=None,
            help="With --previous-version: the instances too must serve every file of the "
            "previous release (sampled like the current one's).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _where_options() -> list[Decorator]:
    """Instances given by URL, the configuration file and the CDN."""
    one = SingleValueOption
    return [
        click.option(
            "-t",
            "--target",
            "targets",
            multiple=True,
            metavar="URL[=VERSION]",
            help="An instance to check, with the version it runs; repeatable.",
        ),
        click.option(
            "-c",
            "--config",
            cls=one,
            type=click.Path(exists=True, dir_okay=False),
            help="CheckSpec YAML file; flags add to or override it.",
        ),
        click.option(
            "--cdn",
            cls=one,
            metavar="URL",
            help="CDN base URL (http:// or https://) the referenced assets must exist on; "
            "its path is where the release's files are (STATIC_URL), never added to "
            "--prefix.",
        ),
        click.option(
            "--cdn-include",
            "cdn_include",
            multiple=True,
            metavar="GLOB",
            help="Check only the files matching this glob on the CDN (e.g. '_next/static/*' "
            "for Next.js assetPrefix); repeatable. Default: every file.",
        ),
        click.option(
            "--cdn-exclude",
            "cdn_exclude",
            multiple=True,
            metavar="GLOB",
            help="Do not check the files matching this glob on the CDN; repeatable, added to "
            "the default '*.html', '*.htm' (entry pages are served by the origin).",
        ),
    ]


def _release_options() -> list[Decorator]:
    """Where the expected release comes from, and the versions in play."""
    one = SingleValueOption
    return [
        click.option(
            "--release-manifest",
            "release_manifest",
            multiple=True,
            metavar="PATH-OR-URL",
            help="Release manifest (from `manifest build`), used for the version it declares; "
            "repeatable, one per release. At most one may contain '{version}', which is "
            "replaced by each reported version for the versions no other one declares.",
        ),
        click.option(
            "--allow-names-only",
            cls=one,
            is_flag=True,
            default=None,
            help="Accept a release manifest without content hashes (Vite, webpack, CRA, "
            "Django): only file names are compared, and the report says so. A run judged "
            "by such a manifest never exits 0: matching names are inconclusive (exit 3), "
            "since nothing vouched for the bytes.",
        ),
        click.option(
            "--release-image",
            cls=one,
            metavar="IMAGE",
            help="Release image to read the expected files from ('{version}' is replaced); "
            "not with --release-manifest.",
        ),
        click.option(
            "--release-image-path",
            cls=one,
            metavar="DIR",
            help="Site directory inside the release image.",
        ),
        click.option(
            "--release-configmaps",
            "release_configmaps",
            cls=one,
            metavar="SELECTOR",
            help="Read release manifests from the ConfigMaps matching this label selector in "
            "--namespace (one per version: label artifactcheck.io/version, key manifest.json).",
        ),
        click.option(
            "--known-version",
            "known_versions",
            multiple=True,
            metavar="V",
            help="Also load this release to name what a mismatching instance serves; repeatable.",
        ),
        click.option(
            "--desired-version",
            cls=one,
            metavar="V",
            help="Version the fleet should run; instances reporting another are drift.",
        ),
    ]


def _served_options() -> list[Decorator]:
    """How an instance tells what it serves and which version it runs."""
    one = SingleValueOption
    return [
        click.option(
            "--prefix",
            cls=one,
            metavar="PATH",
            help="Path under each target where the release's files are served: Django "
            "STATIC_URL /static/, Rails /assets/, an app under a sub-path; '/' = the target "
            "itself. Default: detected (the target, else the served manifest's directory, "
            "static/ or assets/), and the report says so.",
        ),
        click.option(
            "--manifest-path",
            cls=one,
            metavar="PATH",
            help="Path of the manifest the instances serve: from the target's root when it "
            "starts with '/' (/assets/.sprockets-manifest-<hex>.json), else under the prefix "
            "(manifest.json with --prefix /build/). Default: the well-known names, then the "
            "manifest names the release lists.",
        ),
        click.option(
            "--manifest-format",
            cls=one,
            metavar="FORMAT",
            help="Format of the served manifest (default: detected).",
        ),
        click.option(
            "--version-endpoint",
            cls=one,
            metavar="PATH[#POINTER]",
            help="Read the version over HTTP, e.g. /version#/version; the path is resolved "
            "against the target URL, never against --prefix.",
        ),
        click.option(
            "--page",
            "pages",
            multiple=True,
            metavar="PATH",
            help="Another entry page to read as a browser does (what it loads), e.g. /login, "
            "resolved against the target URL like --version-endpoint; repeatable. The "
            "target's own page (/) is always read unless a --config file's pages: says "
            "otherwise.",
        ),
    ]


def _http_options() -> list[Decorator]:
    """How instances are reached: headers, TLS, codings, time and concurrency."""
    one = SingleValueOption
    return [
        click.option(
            "--host-header",
            cls=one,
            metavar="NAME",
            help="Host header and TLS server name sent to instances.",
        ),
        click.option(
            "--header",
            "headers",
            multiple=True,
            metavar="NAME=VALUE",
            help="Extra request header sent to instances; repeatable.",
        ),
        click.option(
            "--header-env",
            multiple=True,
            metavar="NAME=ENVVAR",
            help="Extra request header whose value is read from an environment variable.",
        ),
        click.option(
            "--header-file",
            multiple=True,
            metavar="NAME=FILE",
            help="Extra request header whose value is read from a file (a mounted secret).",
        ),
        click.option(
            "--ca-bundle",
            cls=one,
            type=click.Path(exists=True, dir_okay=False),
            help="Extra trusted CAs (PEM file).",
        ),
        click.option("--insecure", cls=one, is_flag=True, help="Do not verify TLS certificates."),
        click.option(
            "--compare-encoding",
            "compare_encodings",
            multiple=True,
            type=click.Choice(["identity", "gzip", "br", "deflate"]),
            help="Content coding each asset is fetched in and compared, decoded; repeatable "
            "(default: identity only). Browsers receive gzip or br: add them to catch a stale "
            "precompressed file (nginx gzip_static).",
        ),
        click.option(
            "--deadline",
            cls=one,
            type=float,
            metavar="SECONDS",
            help="Time allowed for everything fetched from one instance.",
        ),
        click.option(
            "--concurrency", cls=one, type=int, metavar="N", help="Requests in flight in total."
        ),
    ]


def _discovery_options() -> list[Decorator]:
    """Instances discovered on a Docker engine or in a cluster."""
    one = SingleValueOption
    return [
        click.option(
            "--docker-label",
            "docker_labels",
            multiple=True,
            metavar="KEY=VALUE",
            help="Check the Docker containers with this label; repeatable.",
        ),
        click.option(
            "--docker-network",
            cls=one,
            metavar="NAME",
            help="Docker network whose container address is used.",
        ),
        click.option(
            "--docker-port",
            cls=one,
            type=int,
            metavar="PORT",
            help="Container port the site serves on.",
        ),
        click.option("-n", "--namespace", cls=one, help="Check the pods in this namespace."),
        click.option("-l", "--selector", cls=one, help="Label selector of the pods."),
        click.option(
            "--pod-port", cls=one, type=int, metavar="PORT", help="Port the pods serve on."
        ),
        click.option(
            "--kubeconfig", cls=one, type=click.Path(dir_okay=False), help="Kubeconfig file."
        ),
        click.option("--context", "kube_context", cls=one, help="Kubeconfig context."),
    ]


def spec_from_options(
    opts: dict[str, Any], extra: dict[str, Any] | None = None, *, preflight: bool = True
) -> CheckSpec:
    """A CheckSpec from the shared flags, built exactly as ``verify`` builds it.

    With ``preflight`` (the default), what the spec names on this machine is checked
    too (release manifest files, header files), so a typo is a configuration error
    naming its flag before any request is sent.
    """
    from artifactcheck.discover.static import parse_target

    targets = [parse_target(t).model_dump(exclude_none=True) for t in opts["targets"]]
    flags = FlagNames()
    spec: CheckSpec = build_spec(
        opts["config"],
        {
            "targets": targets,
            "docker": _docker_section(opts),
            "kubernetes": _kubernetes_section(opts),
            "cdn": opts["cdn"],
            "cdn_include": list(opts.get("cdn_include") or ()),
            "cdn_exclude": list(opts.get("cdn_exclude") or ()),
            "prefix": opts.get("prefix"),
            "release.manifests": list(opts["release_manifest"]),
            "allow_names_only": True if opts.get("allow_names_only") else None,
            "release.image.reference": opts["release_image"],
            "release.image.path": opts["release_image_path"],
            "release.config_maps.selector": opts.get("release_configmaps"),
            "known_versions": list(opts["known_versions"]),
            "desired_version": opts["desired_version"],
            "manifest_path": opts["manifest_path"],
            "manifest_format": opts["manifest_format"],
            "version_endpoint": version_endpoint(opts["version_endpoint"]),
            "http.host_header": opts["host_header"],
            "http.headers": parse_kv(opts["headers"], "--header") or None,
            "http.header_env": parse_kv(opts["header_env"], "--header-env") or None,
            "http.header_files": parse_kv(opts["header_file"], "--header-file") or None,
            "http.ca_bundle": opts["ca_bundle"],
            "http.verify_tls": False if opts["insecure"] else None,
            "http.compare_encodings": list(opts.get("compare_encodings") or ()) or None,
            "http.instance_deadline": opts["deadline"],
            "http.max_connections": opts["concurrency"],
            "pages": list(opts.get("pages") or ()) or None,
            **(extra or {}),
        },
        flags,
    )
    if preflight:
        try:
            check_local_sources(spec)
        except ConfigError as exc:
            raise flags.explain(exc) from exc
    return spec


def _docker_section(opts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``docker`` section the Docker flags ask for, or None when none was given."""
    if not (opts["docker_labels"] or opts["docker_network"] or opts["docker_port"]):
        return None
    docker: dict[str, Any] = {"labels": list(opts["docker_labels"])}
    if opts["docker_network"]:
        docker["network"] = opts["docker_network"]
    if opts["docker_port"]:
        docker["port"] = opts["docker_port"]
    if opts.get("on_mismatch"):
        docker["on_mismatch"] = opts["on_mismatch"]
    return docker


def _kubernetes_section(opts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``kubernetes`` section --namespace/--selector ask for, or None."""
    if not (opts["namespace"] or opts["selector"]):
        return None
    kube = {"namespace": opts["namespace"] or "default", "selector": opts["selector"] or ""}
    if opts["pod_port"]:
        kube["port"] = opts["pod_port"]
    return kube


def check_local_sources(spec: CheckSpec) -> None:
    """Refuse, before any request, what names a file on this machine that cannot be used.

    Release manifest files are read and checked (see
    :func:`artifactcheck.release.sources.plan_release_manifests`); header files and the CA
    bundle must be readable files. A URL source can only be judged when it is fetched.
    """
    from artifactcheck.manifests.limits import ManifestLimits
    from artifactcheck.release.sources import plan_release_manifests

    limits = ManifestLimits(
        max_bytes=spec.http.max_manifest_bytes, max_entries=spec.http.max_manifest_entries
    )
    plan_release_manifests(spec, fetcher=None, limits=limits)
    _readable(spec.http.header_files.items(), "http.header_files")
    if spec.http.ca_bundle:
        _readable([("", spec.http.ca_bundle)], "http.ca_bundle")


def _readable(files: Iterable[tuple[str, str]], field: str) -> None:
    for name, path in files:
        label = f"{name}={path}" if name else path
        if not Path(path).is_file():
            raise ConfigError(f"{label}: no such file", field=field)
        if not os.access(path, os.R_OK):
            raise ConfigError(f"{label}: not readable", field=field)
