"""Command-line options shared by ``verify``, ``investigate`` and ``fleet``.

The three commands select instances, releases and the CDN the same way; one list of
flags and one function turning them into a :class:`~artifactcheck.settings.CheckSpec`
keeps them agreeing (and a YAML file overlaid with flags validates as one model, so a
bad value is reported with its field name whichever way it was given).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .errors import ConfigError
from .settings import CheckSpec


def parse_kv(values: tuple[str, ...], option: str, sep: str = "=") -> dict[str, str]:
    out = {}
    for item in values:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise ConfigError(f"{option} {item!r}: expected NAME{sep}VALUE")
        out[key.strip()] = value.strip()
    return out


def build_spec(config: str | None, overrides: dict[str, Any]) -> Any:
    """A CheckSpec from an optional YAML file overlaid with command-line values."""
    import yaml

    from .settings import load_spec

    data: dict[str, Any] = {}
    origin = "command line"
    if config:
        path = Path(config)
        try:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # C parser: 10x faster
            loaded = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}  # noqa: S506
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        except RecursionError as exc:  # PyYAML composes nested nodes recursively
            raise ConfigError(f"{path}: nested too deeply to be a configuration") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        data = loaded
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
        if isinstance(value, list) and isinstance(node.get(leaf), list):
            node[leaf] = node[leaf] + value
        elif isinstance(value, dict) and isinstance(node.get(leaf), dict):
            node[leaf] = {**node[leaf], **value}
        else:
            node[leaf] = value
    return load_spec(data, origin=origin)


def version_endpoint(value: str | None) -> dict[str, str] | None:
    if not value:
        return None
    path, _, pointer = value.partition("#")
    return {"path": path or "/version", "pointer": pointer}


def target_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The instance, release and CDN flags of ``verify``, so the three commands agree."""
    options = [
        click.option(
            "-t",
            "--target",
            "targets",
            multiple=True,
            metavar="URL[=VERSION]",
            help="An instance to check; repeat for a fleet.",
        ),
        click.option("-c", "--config", type=click.Path(dir_okay=False), help="CheckSpec YAML."),
        click.option("--cdn", help="CDN base URL every served asset must exist on."),
        click.option(
            "--release-manifest",
            metavar="PATH-OR-URL",
            help="Release manifest; '{version}' is replaced by each reported version.",
        ),
        click.option("--release-image", metavar="IMAGE", help="Release image; '{version}' ok."),
        click.option("--release-image-path", metavar="DIR", help="Site directory in the image."),
        click.option(
            "--known-version",
            "known_versions",
            multiple=True,
            metavar="V",
            help="Also load this release to name what a mismatching instance serves.",
        ),
        click.option("--desired-version", metavar="V", help="Version the fleet should run."),
        click.option("--manifest-path", metavar="PATH", help="Served manifest path."),
        click.option("--manifest-format", metavar="FORMAT", help="Served manifest format."),
        click.option(
            "--version-endpoint",
            metavar="PATH[#POINTER]",
            help="Read the version over HTTP, e.g. /version#/version.",
        ),
        click.option("--host-header", metavar="NAME", help="Host header and TLS server name."),
        click.option("--header", "headers", multiple=True, metavar="NAME=VALUE"),
        click.option("--header-env", multiple=True, metavar="NAME=ENVVAR"),
        click.option("--header-file", multiple=True, metavar="NAME=FILE"),
        click.option("--ca-bundle", type=click.Path(dir_okay=False), help="Extra CAs (PEM)."),
        click.option("--insecure", is_flag=True, help="Do not verify TLS certificates."),
        click.option("--deadline", type=float, metavar="SECONDS", help="Per-instance deadline."),
        click.option("--concurrency", type=int, metavar="N", help="Requests in flight."),
        click.option("--docker-label", "docker_labels", multiple=True, metavar="KEY=VALUE"),
        click.option("--docker-network", metavar="NAME"),
        click.option("--docker-port", type=int, metavar="PORT"),
        click.option("-n", "--namespace", help="Pods in this namespace."),
        click.option("-l", "--selector", help="Label selector of the pods."),
        click.option("--pod-port", type=int, metavar="PORT", help="Port the pods serve on."),
        click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig file."),
        click.option("--context", "kube_context", help="Kubeconfig context."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def spec_from_options(opts: dict[str, Any], extra: dict[str, Any] | None = None) -> CheckSpec:
    """A CheckSpec from the shared flags, built exactly as ``verify`` builds it."""
    from .discover.static import parse_target

    targets = [parse_target(t).model_dump(exclude_none=True) for t in opts["targets"]]
    docker: dict[str, Any] | None = None
    if opts["docker_labels"] or opts["docker_network"] or opts["docker_port"]:
        docker = {"labels": list(opts["docker_labels"])}
        if opts["docker_network"]:
            docker["network"] = opts["docker_network"]
        if opts["docker_port"]:
            docker["port"] = opts["docker_port"]
        if opts.get("on_mismatch"):
            docker["on_mismatch"] = opts["on_mismatch"]
    kube: dict[str, Any] | None = None
    if opts["namespace"] or opts["selector"]:
        kube = {"namespace": opts["namespace"] or "default", "selector": opts["selector"] or ""}
        if opts["pod_port"]:
            kube["port"] = opts["pod_port"]
    spec: CheckSpec = build_spec(
        opts["config"],
        {
            "targets": targets,
            "docker": docker,
            "kubernetes": kube,
            "cdn": opts["cdn"],
            "release_manifest": opts["release_manifest"],
            "release_image": opts["release_image"],
            "release_image_path": opts["release_image_path"],
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
            "http.instance_deadline": opts["deadline"],
            "http.max_connections": opts["concurrency"],
            **(extra or {}),
        },
    )
    return spec
