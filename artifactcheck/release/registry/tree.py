"""A layer's tar walked in stream mode and laid over the layers below it.

Whiteouts (``.wh.<name>``, ``.wh..wh..opq``) are applied as the overlay would see them;
a member that climbs out with ``..`` refuses the image; files under the site directory
are hashed while they stream, with the same paths as ``manifest build`` (relative to the
site, symlinks skipped, hard links recorded with their target's digest); a name no URL
can carry is recorded as rejected, by the manifests' one rule for unusable names.
"""

from __future__ import annotations

import hashlib
import posixpath
import tarfile
from typing import IO

from artifactcheck.manifests.limits import (
    check_entries,
    unusable_name,
)
from artifactcheck.model.errors import ExpectationUnavailable
from artifactcheck.model.records import MutableRecord, field
from artifactcheck.model.values import ManifestEntry
from artifactcheck.release.registry.client_options import ImageLimits
from artifactcheck.release.registry.layers import CHUNK, BlobReader, Budget, Unpacked

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


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


class Tree(MutableRecord):
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


class _Layer(MutableRecord):
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

    def apply(self, tree: Tree, limits: ImageLimits) -> None:
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


def apply_layer(
    tree: Tree,
    tar_stream: Unpacked,
    blob: BlobReader,
    budget: Budget,
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
    tree: Tree,
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
    if (member.isreg() or member.islnk()) and unusable_name(rel):
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
