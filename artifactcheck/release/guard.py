"""Release trust at the source: a manifest is used only if signed (keys) and unchanged (pins).

Each release source hands every manifest it loads, with the very bytes it parsed, to
:meth:`ReleaseGuard.admit` before it becomes an expectation (the shape every source
relies on is ``artifactcheck.release.sources.ReleaseAdmitter``). With release keys, the
manifest needs a valid DSSE envelope beside it (:mod:`artifactcheck.release.dsse`);
anything else makes the release untrusted: no expectation, so its instances are
``inconclusive``, never ``consistent`` and never ``mismatch``. With pins
(:mod:`artifactcheck.release.pins`), a trusted manifest is pinned the first time its
version is seen; a different one later is ``release-changed`` (exit 1), and the
version's instances are judged against the pinned copy when it is still at hand, else
they are ``inconclusive``.

Every failure here (no envelope, a hostile one, a pins file that cannot be written now)
is that release's problem only: it becomes ExpectationUnavailable for that version and
a finding, never an exception that ends the run.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.manifests import parse_manifest
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ArtifactCheckError, ExpectationUnavailable, ManifestError
from artifactcheck.model.records import Record, replace
from artifactcheck.model.values import Finding, FindingKind, Manifest
from artifactcheck.release import dsse
from artifactcheck.release.pins import Observed, PinStore
from artifactcheck.release.sources import (
    ReleaseWithdrawn,
    expand,
    is_template,
    read_release_bytes,
)


class ReleaseTrust(Record):
    """What releases must satisfy: pins to keep, keys to be signed by, where envelopes are.

    ``signature``: the envelope's location (file or URL, ``{version}`` replaced), or
    None for the manifest's own location with ``.intoto.jsonl`` appended.
    """

    pins: PinStore | None = None
    keys: tuple[dsse.PublicKey, ...] = ()
    signature: str | None = None

    @property
    def active(self) -> bool:
        """Something is asked of releases."""
        return self.pins is not None or bool(self.keys)


class ReleaseGuard:
    """Admits release manifests under a :class:`ReleaseTrust`, noting what it found."""

    def __init__(
        self, trust: ReleaseTrust, *, fetcher: Fetcher | None, limits: ManifestLimits
    ) -> None:
        self.trust = trust
        self.fetcher = fetcher
        self.limits = limits
        self._findings: dict[str, Finding] = {}

    def findings(self) -> list[Finding]:
        """Run-level findings: releases changed or untrusted, one per version."""
        return list(self._findings.values())

    def untrusted(self) -> set[str]:
        """Versions whose release manifest last failed its signature check."""
        return {v for v, f in self._findings.items() if f.kind is FindingKind.RELEASE_UNTRUSTED}

    async def admit(self, version: str, manifest: Manifest, data: bytes, where: str) -> Manifest:
        """The manifest to judge ``version`` by, or ExpectationUnavailable saying why none."""
        declared = manifest.version or version
        if self.trust.keys:
            await self._check_signature(declared, data, where)
        if self.trust.pins is None:
            return manifest
        digest = hashlib.sha256(data).hexdigest()
        store = self.trust.pins
        try:
            seen = await asyncio.to_thread(store.observe, declared, digest, where, data)
        except (ArtifactCheckError, OSError, ValueError) as exc:
            raise ExpectationUnavailable(f"pins {store.description}: {exc}") from exc
        if not seen.changed:
            if self._findings.get(declared, _NONE).kind is FindingKind.RELEASE_CHANGED:
                del self._findings[declared]  # accepted since: no longer changed
            return manifest
        return await self._pinned_copy(declared, seen, digest, where)

    async def _check_signature(self, version: str, data: bytes, where: str) -> None:
        location = self.trust.signature or where + dsse.SUFFIX
        try:
            location = self._envelope_location(version, where)
            envelopes = await self._read_envelope(location)
            dsse.verify_release(envelopes, keys=self.trust.keys, data=data, version=version)
        except (ArtifactCheckError, dsse.EnvelopeRejected) as exc:
            message = f"release {version} ({where}) is untrusted: {location}: {exc}"
            self._findings[version] = Finding(
                FindingKind.RELEASE_UNTRUSTED, message, expected="a valid envelope", actual=str(exc)
            )
            raise ExpectationUnavailable(message) from exc
        self._findings.pop(version, None)

    def _envelope_location(self, version: str, where: str) -> str:
        template = self.trust.signature
        if template is None:
            return where + dsse.SUFFIX
        return expand(template, version) if is_template(template) else template

    async def _read_envelope(self, location: str) -> bytes:
        if location.startswith(("http://", "https://")):
            return await read_release_bytes(location, self.fetcher)
        try:
            return await asyncio.to_thread(_read_capped, Path(location))
        except OSError as exc:
            raise ExpectationUnavailable(f"no envelope: {exc.strerror or exc}") from exc

    async def _pinned_copy(self, version: str, seen: Observed, digest: str, where: str) -> Manifest:
        """The pinned release of a changed version, when its bytes are still at hand."""
        assert self.trust.pins is not None
        pinned = seen.pins.pinned
        data = await asyncio.to_thread(self.trust.pins.release_bytes, pinned.sha256)
        manifest = None if data is None else self._parse_pinned(data, version, pinned.source)
        judged = (
            f"its instances are judged against the pinned copy ({pinned.source})"
            if manifest is not None
            else "the pinned manifest is not at hand, so its instances are inconclusive"
        )
        hint = getattr(self.trust.pins, "accept_hint", None)
        how = (
            hint(version, digest)
            if callable(hint)
            else f"artifactcheck pins accept {version} --digest {digest} "
            f"--pins {self.trust.pins.description}"
        )
        message = (
            f"release {version} changed: {where} now has sha256 {digest}, but {pinned.sha256} "
            f"was pinned (from {pinned.source} at {pinned.at}); {judged}. Adopt the new one "
            f"only on purpose: {how}"
        )
        self._findings[version] = Finding(
            FindingKind.RELEASE_CHANGED, message, expected=pinned.sha256, actual=digest
        )
        if manifest is None:
            raise ReleaseWithdrawn(message)
        return manifest

    def _parse_pinned(self, data: bytes, version: str, source: str) -> Manifest | None:
        where = f"{source} (pinned copy)"
        try:
            manifest = parse_manifest(data, limits=self.limits, source=where, path_hint=source)
        except ManifestError:
            return None
        if manifest.version not in (None, version):
            return None
        return replace(manifest, source=where)


#: No finding recorded for a version.
_NONE = Finding(FindingKind.EXPECTATION_UNAVAILABLE, "")


def _read_capped(path: Path) -> bytes:
    with path.open("rb") as f:
        data = f.read(dsse.MAX_ENVELOPE_BYTES + 1)
    return data
