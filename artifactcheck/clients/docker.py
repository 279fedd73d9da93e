"""The Docker engine, through the ``docker`` SDK: containers, images and actions.

Compose stacks and CI jobs run the same web front ends as a cluster does, and a
release's container image is the most direct record of what it should serve. This is
the only module that imports the ``docker`` SDK (and ``requests`` under it): every
SDK, HTTP and socket error is translated here into the tree of
:mod:`artifactcheck.model.errors`, always ``raise ... from exc``:

* the engine cannot be reached, refuses a call, or lacks the image asked for ->
  :class:`DependencyError` (the verdict is ``inconclusive``, never ``mismatch``);
* the image lacks the directory, or its archive is not a site tree ->
  :class:`ManifestError` (no manifest can be read from it);
* unusable input (blank image, malformed reference, relative path, bad
  ``DOCKER_HOST``) -> :class:`ConfigError`.

The SDK is synchronous: call these methods from ``asyncio.to_thread``. The engine is
never asked to pull: images must already be present (``docker load``/``import``).
"""

from __future__ import annotations

import io
import logging
import os
import posixpath
import socket
import tarfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, Any

import docker
import docker.errors
import docker.utils
import requests

from artifactcheck.manifests import native
from artifactcheck.manifests.limits import DEFAULT_LIMITS, ManifestLimits, check_entries
from artifactcheck.model.errors import (
    ArtifactCheckError,
    ConfigError,
    DependencyError,
    ManifestError,
)
from artifactcheck.model.values import Manifest

__all__ = ["DEFAULT_DOCKER_HOST", "PURPOSE_LABEL", "DockerEngine", "find_network"]

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
DEFAULT_TIMEOUT = 30.0
#: Label put on the never-started containers made by ``manifest_from_image``, so a
#: leftover (engine died before the removal) can be found and removed.
PURPOSE_LABEL = "io.artifactcheck.purpose"
_NEVER_STARTED = ["/artifactcheck-container-is-never-started"]

_GO_MODE_DIR = 1 << 31  # os.FileMode bits in X-Docker-Container-Path-Stat
_LOG = logging.getLogger(__name__)

Logger = logging.Logger | logging.LoggerAdapter[logging.Logger]


class _ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of byte chunks, holding one chunk at most.

    ``tarfile`` in stream mode (``r|``) wants a file object; the engine gives a chunk
    iterator. Adapting one to the other keeps a whole image tree out of memory.
    """

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._view = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._view:
            try:
                self._view = memoryview(next(self._chunks))
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._view))
        buffer[:n] = self._view[:n]
        self._view = self._view[n:]
        return n


class DockerEngine:
    """One Docker engine: its containers, manifests from images and container actions.

    The SDK client is created on first use, so building an engine does no I/O and a
    CLI can construct one before it knows whether Docker is needed at all.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        client: Any = None,
        logger: Logger | None = None,
    ) -> None:
        env = dict(os.environ)
        self.base_url: str = base_url or env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST
        self.timeout = timeout
        self.logger: Logger = logger or _LOG
        self._client: Any = client
        self._client_lock = threading.Lock()  # callers use asyncio.to_thread
        self._env = env if base_url is None else None

    # -- plumbing ------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The ``docker.DockerClient``, connected (API version negotiated) on first use."""
        with self._client_lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    def _connect(self) -> Any:
        if self.base_url.startswith("unix://"):
            self._probe_unix_socket(self.base_url[len("unix://") :])
        kwargs: dict[str, Any] = {"base_url": self.base_url}
        try:
            if self._env is not None:
                # honours DOCKER_TLS_VERIFY / DOCKER_CERT_PATH like the docker CLI
                kwargs.update(docker.utils.kwargs_from_env(environment=self._env))
                kwargs["base_url"] = self.base_url
            return docker.DockerClient(**kwargs, timeout=self.timeout, version="auto")
        except docker.errors.DockerException as exc:
            if exc.__cause__ is None and exc.__context__ is None:
                raise ConfigError(f"Docker host {self.base_url!r}: {exc}") from exc
            raise self._unreachable(exc) from exc
        except (requests.exceptions.RequestException, OSError) as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: BaseException) -> DependencyError:
        return DependencyError(f"Docker engine unreachable at {self.base_url}: {_reason(exc)}")

    def _probe_unix_socket(self, path: str) -> None:
        """Connect once ourselves: the SDK leaks its socket when the connect fails."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(self.timeout)
            try:
                probe.connect(path if path.startswith("/") else "/" + path)
            except OSError as exc:
                raise self._unreachable(exc) from exc

    @contextmanager
    def _translated(self, action: str) -> Iterator[None]:
        """Turn SDK, HTTP and socket errors raised while doing ``action`` into ours."""
        try:
            yield
        except ArtifactCheckError:
            raise
        except docker.errors.APIError as exc:
            raise DependencyError(
                f"Docker engine at {self.base_url}: {action} failed: {_explain(exc)}"
            ) from exc
        except requests.exceptions.Timeout as exc:
            raise DependencyError(
                f"Docker engine at {self.base_url} did not answer within "
                f"{self.timeout:g}s while {action}"
            ) from exc
        except (requests.exceptions.RequestException, OSError) as exc:
            raise self._unreachable(exc) from exc
        except docker.errors.DockerException as exc:
            if isinstance(exc.__cause__ or exc.__context__, requests.exceptions.RequestException):
                raise self._unreachable(exc) from exc
            raise DependencyError(
                f"Docker engine at {self.base_url}: {action} failed: {exc}"
            ) from exc

    def close(self) -> None:
        """Release the connection pool."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> DockerEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ping(self) -> None:
        """Fail fast with DependencyError when the engine does not answer."""
        with self._translated("pinging"):
            self.client.ping()

    # -- containers ----------------------------------------------------------------

    def running_containers(self, labels: Sequence[str] = ()) -> list[Mapping[str, Any]]:
        """``docker inspect`` of each running container matching every label filter
        (``KEY=VALUE`` or ``KEY``; the engine ANDs them)."""
        filters: dict[str, Any] = {"status": "running"}
        if labels:
            filters["label"] = list(labels)
        with self._translated("listing containers"):
            containers = self.client.containers.list(filters=filters, ignore_removed=True)
        return [container.attrs for container in containers]

    def repo_digests(self, image_id: str) -> tuple[str, ...]:
        """The registry digests of a local image; none for imported or built images."""
        try:
            with self._translated(f"inspecting image {image_id}"):
                found = self.client.api.inspect_image(image_id)
        except DependencyError as exc:
            if isinstance(exc.__cause__, docker.errors.NotFound):
                return ()
            raise
        return tuple(d for d in found.get("RepoDigests") or () if isinstance(d, str))

    # -- expected content from an image -------------------------------------------

    def manifest_from_image(
        self,
        image: str,
        *,
        path: str,
        version: str,
        limits: ManifestLimits = DEFAULT_LIMITS,
    ) -> Manifest:
        """Hash every regular file under ``path`` in a local image into a native manifest.

        A container is created (never started, no network) only so that the engine
        will archive its filesystem; it is removed whatever happens. The tar stream is
        read member by member, so a large tree is never held in memory. Paths are
        relative to ``path``, exactly as ``manifest build`` writes them for the same
        directory: symlinks are skipped (``build`` skips them too), a hard link is
        recorded with the digest of the file it links to (on disk it is that file).
        """
        if not image or not image.strip():
            raise ConfigError("image: must not be empty")
        if not path.startswith("/"):
            raise ConfigError(f"path: must be absolute inside the image, got {path!r}")
        image_id = self._image_id(image)
        with self._translated(f"creating a container from {image}"):
            created = self.client.api.create_container(
                image_id,
                entrypoint=_NEVER_STARTED,
                network_disabled=True,
                labels={PURPOSE_LABEL: "manifest-from-image"},
                host_config=self.client.api.create_host_config(network_mode="none"),
                use_config_proxy=False,
            )
        container_id: str = created["Id"]
        try:
            builder = native.Builder(version=version, image_id=image_id)
            self._hash_archive(container_id, image, path, builder, limits)
            return builder.manifest(source=f"{image}:{path}")
        finally:
            self._remove_created(container_id, image)

    def _image_id(self, image: str) -> str:
        """The local image ID (``sha256:...``) a reference resolves to, never pulling."""
        try:
            with self._translated(f"inspecting image {image}"):
                found = self.client.api.inspect_image(image)
        except DependencyError as exc:
            cause = exc.__cause__
            if isinstance(cause, docker.errors.NotFound):
                raise DependencyError(
                    f"image {image!r} not found on the Docker engine at {self.base_url} "
                    "(artifactcheck never pulls: pull or load it first)"
                ) from cause
            if isinstance(cause, docker.errors.APIError) and cause.status_code == 400:
                raise ConfigError(f"image {image!r}: {_explain(cause)}") from cause
            raise
        return str(found["Id"])

    def _hash_archive(
        self,
        container_id: str,
        image: str,
        path: str,
        builder: native.Builder,
        limits: ManifestLimits,
    ) -> None:
        """Stream ``GET /containers/{id}/archive`` into the builder."""
        # A trailing slash makes the engine follow a symlinked directory (docker cp).
        request_path = path.rstrip("/") + "/"
        where = f"{image}:{path}"
        api = self.client.api
        try:
            with self._translated(f"archiving {where}"):
                # api.get_archive() would switch the socket's read timeout off for the
                # whole stream; a hung engine must not hang the check.
                response = api._get(
                    api._url("/containers/{0}/archive", container_id),
                    params={"path": request_path},
                    stream=True,
                )
                try:
                    api._raise_for_status(response)
                except BaseException:
                    response.close()
                    raise
        except DependencyError as exc:
            cause = exc.__cause__
            if isinstance(cause, docker.errors.NotFound):
                raise ManifestError(f"{where}: no such directory in the image") from cause
            if isinstance(cause, docker.errors.APIError) and "not a directory" in _explain(cause):
                # the engine answers 500 "lstat .../merged/<path>/: not a directory"
                raise ManifestError(f"{where}: not a directory in the image") from cause
            if isinstance(cause, docker.errors.APIError) and cause.status_code == 400:
                raise ManifestError(f"{where}: {_explain(cause)}") from cause
            raise
        try:
            stat = _path_stat(response.headers.get("X-Docker-Container-Path-Stat"))
            mode = int(stat.get("mode") or 0)
            if stat and not mode & _GO_MODE_DIR:
                raise ManifestError(f"{where}: not a directory in the image")
            with self._translated(f"reading the archive of {where}"):
                _read_tar(response.iter_content(native.CHUNK), builder, where, limits)
        finally:
            response.close()

    def _remove_created(self, container_id: str, image: str) -> None:
        """Remove the never-started container and its anonymous volumes; warn on failure."""
        try:
            with self._translated(f"removing container {container_id[:12]}"):
                self.client.api.remove_container(container_id, v=True, force=True)
        except DependencyError as exc:
            self.logger.warning(
                "container %s created from %s was not removed (label %s): %s",
                container_id[:12],
                image,
                PURPOSE_LABEL,
                exc,
            )

    # -- actions -------------------------------------------------------------------

    def stop(self, container: str, *, timeout: int = 10) -> None:
        """Stop a container: SIGTERM, SIGKILL after ``timeout`` s; no-op when stopped."""
        with self._on_container(container, "stopping"):
            self.client.api.stop(container, timeout=timeout)

    def pause(self, container: str) -> None:
        """Freeze a container's processes, kept for investigation; no-op when paused."""
        try:
            with self._on_container(container, "pausing"):
                self.client.api.pause(container)
        except DependencyError as exc:
            if _status(exc.__cause__) == 409 and self._state(container).get("Paused"):
                return
            raise

    def unpause(self, container: str) -> None:
        """Undo :meth:`pause`; no-op when the container is not paused."""
        if not self._state(container).get("Paused"):
            return
        with self._on_container(container, "unpausing"):
            self.client.api.unpause(container)

    def disconnect(self, container: str, network: str, *, force: bool = False) -> None:
        """Take a container off one network (out of traffic, still running); idempotent."""
        with self._on_container(container, "inspecting"):
            attrs = self.client.api.inspect_container(container)
        attached = (attrs.get("NetworkSettings") or {}).get("Networks") or {}
        if find_network(attached, network) is None:
            return
        with self._on_container(container, f"disconnecting from network {network}"):
            self.client.api.disconnect_container_from_network(container, network, force=force)

    def _state(self, container: str) -> Mapping[str, Any]:
        with self._on_container(container, "inspecting"):
            attrs = self.client.api.inspect_container(container)
        state: Mapping[str, Any] = attrs.get("State") or {}
        return state

    @contextmanager
    def _on_container(self, container: str, action: str) -> Iterator[None]:
        """Like :meth:`_translated`, naming the container and saying when it is gone."""
        try:
            with self._translated(f"{action} container {container}"):
                yield
        except DependencyError as exc:
            if isinstance(exc.__cause__, docker.errors.NotFound):
                raise DependencyError(
                    f"Docker engine at {self.base_url}: {action} container {container} "
                    f"failed: no such container ({_explain(exc.__cause__)})"
                ) from exc.__cause__
            raise


# -- helpers ------------------------------------------------------------------


def find_network(networks: Mapping[str, Any], wanted: str) -> str | None:
    """The key of ``networks`` named ``wanted``, or the one whose ID starts with it.

    Like the docker CLI: an exact name first, then a unique ID prefix.
    """
    if wanted in networks:
        return wanted
    by_id = [
        name
        for name, net in networks.items()
        if wanted and str((net or {}).get("NetworkID") or "").startswith(wanted)
    ]
    return by_id[0] if len(by_id) == 1 else None


def _path_stat(header: str | None) -> Mapping[str, Any]:
    if not header:
        return {}
    try:
        stat = docker.utils.decode_json_header(header)
    except ValueError:
        return {}
    return stat if isinstance(stat, dict) else {}


def _read_tar(
    chunks: Iterator[bytes], builder: native.Builder, where: str, limits: ManifestLimits
) -> None:
    """Hash each member of a streamed ``docker cp``-style tar, relative to its root."""
    prefix: str | None = None
    try:
        with tarfile.open(fileobj=_ChunkReader(chunks), mode="r|") as tar:
            for member in tar:
                name = member.name.rstrip("/")
                if prefix is None:  # the archive starts with the directory itself
                    prefix = name + "/" if name else "/"
                    if not member.isdir():
                        raise ManifestError(f"{where}: not a directory in the image")
                    continue
                if not name.startswith(prefix):
                    raise ManifestError(f"{where}: archive member {member.name!r} outside it")
                rel = _safe_relative(name[len(prefix) :], where)
                if member.isreg():
                    stream: IO[bytes] | None = tar.extractfile(member)
                    if stream is None:
                        continue
                    builder.add_stream(rel, stream)
                elif member.islnk():
                    _add_hardlink(builder, rel, member.linkname, prefix, where)
                else:
                    continue  # directories, symlinks, devices, fifos: not files of a site
                check_entries(len(builder.files), limits)
    except tarfile.TarError as exc:
        raise DependencyError(f"{where}: the engine sent an unreadable archive: {exc}") from exc
    if prefix is None:
        raise DependencyError(f"{where}: the engine sent an empty archive")


def _add_hardlink(
    builder: native.Builder, rel: str, linkname: str, prefix: str, where: str
) -> None:
    """Record a hard link with its target's digest (tar stores the bytes only once)."""
    target = linkname.rstrip("/")
    if target.startswith(prefix):
        target = target[len(prefix) :]
    entry = builder.files.get(_safe_relative(target, where))
    if entry is None or entry.size is None or "sha256" not in entry.hashes:
        raise ManifestError(f"{where}: hard link {rel!r} to {linkname!r}, not seen before it")
    builder.add(rel, entry.hashes["sha256"], entry.size)


def _safe_relative(rel: str, where: str) -> str:
    clean = posixpath.normpath(rel) if rel else ""
    if not clean or clean == "." or clean.startswith(("/", "../")) or clean == "..":
        raise ManifestError(f"{where}: unsafe archive member name {rel!r}")
    return clean


def _status(exc: BaseException | None) -> int | None:
    return exc.status_code if isinstance(exc, docker.errors.APIError) else None


def _explain(exc: docker.errors.APIError) -> str:
    """``404 no such image: x`` from the engine's own message, without the URL noise."""
    text = exc.explanation
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = str(text or exc).strip()
    return f"{exc.status_code} {text}" if exc.status_code else text


#: What a user can act on, for the socket errors an engine address commonly meets.
_SOCKET_REASONS: tuple[tuple[type[OSError], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (FileNotFoundError, "no such socket (is dockerd running?)"),
    (PermissionError, "permission denied on the socket"),
)


def _reason(exc: BaseException) -> str:
    """The innermost socket-level cause of a connection failure, in a few words."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        err = pending.pop(0)
        if id(err) in seen:
            continue
        seen.add(id(err))
        for kind, words in _SOCKET_REASONS:
            if isinstance(err, kind):
                return words
        if isinstance(err, OSError) and err.strerror:
            return err.strerror.lower()
        pending.extend(a for a in err.args if isinstance(a, BaseException))
        for nxt in (err.__cause__, err.__context__, getattr(err, "reason", None)):
            if isinstance(nxt, BaseException):
                pending.append(nxt)
    return str(exc) or type(exc).__name__
