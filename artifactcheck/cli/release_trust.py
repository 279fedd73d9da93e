"""The release-trust commands: ``manifest sign``, ``pins accept``/``show``, and the
``verify`` flags ``--pins``, ``--release-key``, ``--release-signature``.

What they guard against and how to run them in CI is docs/release-trust.md. These are
CLI-only settings: they name files on this machine, so they are not fields of the
CheckSpec (the controller will name admin-granted keys instead). ``cryptography`` is
imported only when a key is read, so ``--help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from artifactcheck.cli.common import fail, out_file_option
from artifactcheck.model.errors import ConfigError

if TYPE_CHECKING:
    from artifactcheck.model.settings import CheckSpec
    from artifactcheck.release.guard import ReleaseTrust

PASSPHRASE_ENV = "ARTIFACTCHECK_KEY_PASSPHRASE"


def trust_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--pins``, ``--release-key`` (repeatable) and ``--release-signature``."""
    options = [
        click.option(
            "--pins",
            metavar="FILE",
            type=click.Path(dir_okay=False),
            help="Pin each version's release manifest (sha256 of its bytes) in this JSON file, "
            "created if missing; a different manifest later for a pinned version is "
            "release-changed (exit 1). Adopt one with `artifactcheck pins accept`.",
        ),
        click.option(
            "--release-key",
            "release_keys",
            multiple=True,
            metavar="PUBLIC.pem",
            help="Trust only release manifests signed by this key (PEM public key: ECDSA "
            "P-256 or Ed25519, e.g. cosign.pub; every key in the file is used); repeatable, "
            "any one key suffices.",
        ),
        click.option(
            "--release-signature",
            metavar="PATH-OR-URL",
            help="Where a release's signature envelope is ('{version}' is replaced); "
            "default: the manifest's own location + .intoto.jsonl.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def trust_from_options(opts: Mapping[str, Any], spec: CheckSpec) -> ReleaseTrust | None:
    """The release trust the flags ask for, every file read now (ConfigError names the flag)."""
    pins_path, key_paths, signature = (
        opts.get("pins"),
        opts.get("release_keys") or (),
        opts.get("release_signature"),
    )
    if not pins_path and not key_paths:
        if signature:
            raise ConfigError("--release-signature: needs --release-key to check it with")
        return None
    from artifactcheck.release.guard import ReleaseTrust

    flag = "--pins" if pins_path else "--release-key"
    if spec.release is None or not spec.release.signed:
        raise ConfigError(
            f"{flag}: applies to release manifests; give --release-manifest or "
            "--release-configmaps (release images and consensus are not pinned or signed)"
        )
    if signature and not key_paths:
        raise ConfigError("--release-signature: needs --release-key to check it with")
    if signature and "{version}" in signature.split("://", 1)[-1].split("/", 1)[0]:
        # the instance's word would choose the host the envelope is read from
        raise ConfigError("--release-signature: '{version}' may be in the path, not in the host")
    if key_paths and spec.release.config_maps is not None and not signature:
        raise ConfigError(
            "--release-key: a ConfigMap has no location beside it for an envelope; give "
            "--release-signature (a file or URL, '{version}' replaced)"
        )
    return ReleaseTrust(
        pins=_pins(pins_path) if pins_path else None,
        keys=tuple(key for path in key_paths for key in _public_keys(path)),
        signature=signature or None,
    )


def _pins(path: str) -> Any:
    from artifactcheck.release.pins import FilePins, PinsError

    store = FilePins(path)
    try:
        store.check()
    except PinsError as exc:
        raise ConfigError(f"--pins {exc}") from exc
    return store


def _public_keys(path: str) -> tuple[Any, ...]:
    """Every key in the file (a rotation ships two), or ConfigError naming it."""
    from artifactcheck.release import dsse

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"--release-key {path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return dsse.load_public_keys(data, path)
    except dsse.KeyFileError as exc:
        raise ConfigError(f"--release-key {exc}") from exc


# -- manifest sign -----------------------------------------------------------------------


def build_metadata(env: Mapping[str, str], given: Mapping[str, str | None]) -> dict[str, str]:
    """The build's repository, commit, builder and runner: options first, else CI variables.

    GitHub Actions (GITHUB_SERVER_URL, GITHUB_REPOSITORY, GITHUB_SHA, GITHUB_RUN_ID,
    RUNNER_NAME) and GitLab CI (CI_PROJECT_URL, CI_COMMIT_SHA, CI_JOB_URL,
    CI_RUNNER_DESCRIPTION) are read; what neither gives is left out, never guessed.
    """
    found: dict[str, str | None] = {}
    if env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL") or "https://github.com"
        repo = f"{server}/{env['GITHUB_REPOSITORY']}"
        run = env.get("GITHUB_RUN_ID")
        found = {
            "repository": repo,
            "commit": env.get("GITHUB_SHA"),
            "builder": f"{repo}/actions/runs/{run}" if run else "github-actions",
            "runner": env.get("RUNNER_NAME"),
        }
    elif env.get("CI_PROJECT_URL"):
        found = {
            "repository": env["CI_PROJECT_URL"],
            "commit": env.get("CI_COMMIT_SHA"),
            "builder": env.get("CI_JOB_URL") or "gitlab-ci",
            "runner": env.get("CI_RUNNER_DESCRIPTION"),
        }
    merged = {**found, **{k: v for k, v in given.items() if v}}
    return {k: v for k, v in merged.items() if v}


def _signing_key(key_path: str, passphrase_env: str) -> Any:
    from artifactcheck.release import dsse

    try:
        data = Path(key_path).read_bytes()
    except OSError as exc:
        fail(f"--key {key_path}: cannot read: {exc.strerror or exc}")
    secret = os.environ.get(passphrase_env)
    try:
        return dsse.load_private_key(data, key_path, secret.encode() if secret else None)
    except dsse.PassphraseNeeded:
        if not sys.stdin.isatty():
            fail(f"--key {key_path}: the key is encrypted; set ${passphrase_env} to its passphrase")
        import getpass  # a prompt on a terminal: the one run that asks for a passphrase

        typed = getpass.getpass(f"passphrase for {key_path}: ")
        try:
            return dsse.load_private_key(data, key_path, typed.encode())
        except dsse.KeyFileError as exc:
            fail(f"--key {exc}")
    except dsse.KeyFileError as exc:
        fail(f"--key {exc}")


def _declared_version(data: bytes, release: str) -> str:
    from artifactcheck.manifests import parse_manifest
    from artifactcheck.model.errors import ManifestError

    try:
        manifest = parse_manifest(data, format="native", source=release, path_hint=release)
    except ManifestError as exc:
        fail(f"{release}: not a native release manifest (`manifest build` writes one): {exc}")
    if manifest.version is None:
        fail(f"{release}: declares no version; a signed release names its version")
    return manifest.version


@click.command("sign")
@click.argument("release", type=click.Path(dir_okay=False))
@click.option(
    "--key", "key_path", required=True, metavar="PRIVATE.pem", help="PEM PKCS#8 private key."
)
@click.option(
    "--passphrase-env",
    default=PASSPHRASE_ENV,
    show_default=True,
    metavar="NAME",
    help="Environment variable holding an encrypted key's passphrase (else it is asked for "
    "on a terminal).",
)
@click.option("--repository", help="Source repository [default: from CI variables].")
@click.option("--commit", help="Source commit [default: from CI variables].")
@click.option("--builder", help="The build's job or builder URL [default: from CI variables].")
@click.option("--build-time", help="When it was built [default: now, UTC].")
@out_file_option("Envelope file [default: RELEASE.intoto.jsonl beside it].")
def manifest_sign(
    release: str,
    key_path: str,
    passphrase_env: str,
    repository: str | None,
    commit: str | None,
    builder: str | None,
    build_time: str | None,
    out: str | None,
) -> None:
    """Sign a release manifest: a DSSE envelope of an in-toto Statement, beside it.

    The statement's subject is the manifest's bytes (sha256), its predicate the version
    it declares and the build's metadata; `verify --release-key` checks all three.
    """
    from artifactcheck.release import dsse
    from artifactcheck.release.pins import now_iso, write_file

    try:
        data = Path(release).read_bytes()
    except OSError as exc:
        fail(f"{release}: cannot read: {exc.strerror or exc}")
    version = _declared_version(data, release)
    key = _signing_key(key_path, passphrase_env)
    given = {"repository": repository, "commit": commit, "builder": builder}
    build = {**build_metadata(os.environ, given), "time": build_time or now_iso()}
    body = dsse.statement(name=Path(release).name, data=data, version=version, build=build)
    payload = dsse.canonical(body)
    target = Path(out or release + dsse.SUFFIX)
    try:
        write_file(target, dsse.envelope_line(dsse.sign_envelope(payload, key)))
    except ConfigError as exc:
        fail(str(exc))
    click.echo(f"signed {release} (version {version}) -> {target}", err=True)


# -- pins --------------------------------------------------------------------------------


@click.group("pins")
def pins() -> None:
    """Show and accept pinned releases (see `verify --pins`)."""


def _pins_file(path: str) -> Any:
    from artifactcheck.release.pins import FilePins, PinsError

    store = FilePins(path)
    try:
        store.check()
    except PinsError as exc:
        fail(f"--pins {exc}")
    return store


@pins.command("accept")
@click.argument("version")
@click.option(
    "--digest",
    metavar="SHA256",
    help="The manifest's sha256 to adopt [default: the changed one, when exactly one was "
    "recorded; with several, exit 2 listing them].",
)
@click.option("--pins", "pins_path", required=True, metavar="FILE", help="The pins file.")
def pins_accept(version: str, digest: str | None, pins_path: str) -> None:
    """Adopt a new release manifest for VERSION: the only way a pin changes.

    Without --digest, the changed release recorded for VERSION is adopted only when it
    is the only one; when several were seen, exit 2 lists their digests to choose from.
    """
    from artifactcheck.model.versions import version_problem
    from artifactcheck.release.pins import PinsError, is_sha256

    problem = version_problem(version)
    if problem is not None:
        fail(f"VERSION: {problem}")
    if digest is not None and not is_sha256(digest.lower()):
        fail(f"--digest {digest!r}: expected a hex sha256 (64 characters)")
    store = _pins_file(pins_path)
    try:
        seen = store.accept(version, digest.lower() if digest else None)
    except PinsError as exc:
        fail(f"--pins {pins_path}: {exc}")
    kept = "" if store.release_bytes(seen.sha256) else " (its bytes are not kept yet)"
    click.echo(f"pinned {version} to sha256 {seen.sha256} ({seen.source}){kept}")


@pins.command("show")
@click.option("--pins", "pins_path", required=True, metavar="FILE", help="The pins file.")
def pins_show(pins_path: str) -> None:
    """List every pinned version, and any changed release seen since."""
    doc = _pins_file(pins_path).read()
    for version, entry in sorted(doc.versions.items()):
        line = f"{version}  {entry.pinned.sha256}  {entry.pinned.source}  {entry.pinned.at}"
        for change in entry.changes:
            line += f"\n  changed: {change.sha256}  {change.source}  {change.at}"
        click.echo(line)


# -- manifest verify ---------------------------------------------------------------------


def _read_given(path: str, flag: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        fail(f"{flag} {path}: cannot read: {exc.strerror or exc}")


def _release_entry(files: Mapping[str, Any], path: str) -> Any:
    """The manifest's entry for a local file: by its name, or by the longest release
    path its own path ends with.

    A download keeps its name, not the folder it was built in (``dist/sim/x.whl`` is
    saved as ``x.whl``), so the name is enough unless two files of the release share
    it; then the local path must end with the one meant (``sim/x.tar.gz`` rather than
    ``x.tar.gz``), and when it ends with neither the file is refused as ambiguous.
    """
    local = "/" + Path(path).resolve().as_posix().lstrip("/")
    name = Path(path).name
    named = [p for p in files if p.rsplit("/", 1)[-1] == name]
    if len(named) > 1:
        ending = [p for p in named if local.endswith("/" + p)]
        if not ending:
            shown = ", ".join(sorted(named))
            fail(f"FILE {path}: the release has several files named {name}: {shown}")
        named = [max(ending, key=len)]
    return files[named[0]] if named else None


def _sha256_of(path: str) -> tuple[str, int]:
    import hashlib

    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    except OSError as exc:
        fail(f"FILE {path}: cannot read: {exc.strerror or exc}")
    return digest.hexdigest(), size


@click.command("verify")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--manifest",
    "manifest_path",
    required=True,
    metavar="MANIFEST",
    help="The release manifest (`manifest build` wrote it) the files must be in.",
)
@click.option(
    "--envelope",
    metavar="ENVELOPE",
    help="Its signature envelope [default: MANIFEST.intoto.jsonl beside it].",
)
@click.option(
    "--key",
    "key_paths",
    required=True,
    multiple=True,
    metavar="PUBLIC.pem",
    help="The release's public key (PEM: Ed25519 or ECDSA P-256); repeatable, any one "
    "key suffices.",
)
def manifest_verify(
    files: tuple[str, ...], manifest_path: str, envelope: str | None, key_paths: tuple[str, ...]
) -> None:
    """Check downloaded FILEs against a signed release manifest before installing them.

    The envelope must be signed by one of the keys and vouch for this very manifest
    and the version it declares; then each file's sha256 and size must be the ones the
    manifest records under its name. Exit 0 when every file is the release's, 1 when
    the signature or any file is not, 2 when a file, key or manifest cannot be read.
    """
    from artifactcheck.release import dsse

    try:
        keys = tuple(key for path in key_paths for key in _public_keys(path))
    except ConfigError as exc:  # worded for verify's --release-key
        fail(str(exc).replace("--release-key ", "--key ", 1))
    data = _read_given(manifest_path, "--manifest")
    version = _declared_version(data, manifest_path)
    envelope_path = envelope or manifest_path + dsse.SUFFIX
    signed = _read_given(envelope_path, "--envelope")
    from artifactcheck.manifests import parse_manifest

    try:
        verified = dsse.verify_release(signed, keys=keys, data=data, version=version)
    except dsse.EnvelopeRejected as exc:
        click.echo(f"NOT SIGNED {manifest_path}: {exc} ({envelope_path})")
        sys.exit(1)
    click.echo(f"signed     {manifest_path}: version {version}, key {verified.keyid[:16]}")
    release = parse_manifest(data, format="native", source=manifest_path)
    bad = 0
    for path in files:
        entry = _release_entry(release.files, path)
        sha256, size = _sha256_of(path)
        if entry is None:
            bad += 1
            click.echo(f"NOT IN     {path}: no file of that name in release {version}")
        elif entry.hashes.get("sha256") != sha256 or entry.size != size:
            bad += 1
            click.echo(
                f"DIFFERS    {path}: sha256 {sha256} ({size} bytes), release {version} has "
                f"{entry.hashes.get('sha256')} ({entry.size} bytes)"
            )
        else:
            click.echo(f"ok         {path}: sha256 {sha256}")
    sys.exit(1 if bad else 0)
