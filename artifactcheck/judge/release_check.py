"""The release check: each answer from the instance against the release's file of the same path.

Missing is missing however the server dresses it up (404/410, or the fallback page);
a refusal (403) is not compared; other bytes are evidence, and the served bytes' hashes
are kept so another release they belong to can be named.
"""

from __future__ import annotations

from collections.abc import Mapping

from artifactcheck.judge.answers import documents, few_names, unobserved
from artifactcheck.judge.codings import coding_answers, decoded
from artifactcheck.judge.prefix import FALLBACK, is_fallback
from artifactcheck.judge.statuses import MISSING, REFUSED
from artifactcheck.manifests import verify_integrity
from artifactcheck.manifests.integrity import vouching_algorithms, vouching_hash
from artifactcheck.model.records import MutableRecord, Record, field
from artifactcheck.model.values import (
    Fetched,
    Finding,
    FindingKind,
    Manifest,
    ManifestEntry,
    Observation,
)

NAMES_ONLY_NOTE = "file names only"


class ReleaseCheck(MutableRecord):
    """What comparing the instance's answers with one release found."""

    findings: list[Finding] = field(default_factory=list)
    compared: set[str] = field(default_factory=set)  # release files judged
    bad: list[str] = field(default_factory=list)  # files with evidence against them
    missing: list[str] = field(default_factory=list)  # 404/410 or the fallback page
    served_hashes: list[str] = field(default_factory=list)  # every 200 compared
    differing: dict[str, str] = field(default_factory=dict)  # path -> sha of other bytes
    names_only: list[str] = field(default_factory=list)  # release has no hash for them
    refused: dict[str, str] = field(default_factory=dict)  # path -> why not compared
    #: The vouching hashes compared, in preference order (reports name them).
    hashes: tuple[str, ...] = ("sha256",)


def against_release(
    obs: Observation,
    release: Manifest,
    version: str,
    pages: frozenset[str],
    hashes: tuple[str, ...] | None = None,
) -> ReleaseCheck:
    """Each answer from the instance against the release's file of the same path.

    ``hashes``: the release's vouching algorithms when the caller knows them already
    (:meth:`HashIndex.hashes_of`, once per release rather than once per instance);
    worked out from ``release`` otherwise.
    """
    if hashes is None:
        hashes = vouching_algorithms(release) or ("sha256",)
    against = _Against(
        obs=obs,
        release=release,
        version=version,
        pages=pages,
        listed=obs.manifest.files if obs.manifest is not None else {},
        check=ReleaseCheck(hashes=hashes),
        algorithm=hashes[0],
    )
    docs = documents(obs)
    for path in sorted(docs):
        against.answer(path, docs[path])
    against.listed_not_released(docs)
    return against.check


class _Against(Record):
    """One instance's answers judged against one release, into ``check``."""

    obs: Observation
    release: Manifest
    version: str
    pages: frozenset[str]
    listed: Mapping[str, ManifestEntry]  # what the served manifest lists
    check: ReleaseCheck
    algorithm: str = "sha256"  # the release's hash, for files it lacks ("sha1": ngsw.json)

    def answer(self, path: str, got: Fetched) -> None:
        """Judge one answer: refused, missing, the release's bytes, the fallback page,
        a file the release lacks, or other bytes."""
        check = self.check
        expected = self.release.files.get(path)
        known = expected is not None or path in self.listed
        vouched = vouching_hash(expected) if expected is not None else None
        want = vouched[1] if vouched is not None else None
        algorithm = vouched[0] if vouched is not None else self.algorithm
        got = _judged_answer(got, algorithm, want)
        if unobserved(got):  # an answer (in any coding) that says nothing: not judged
            return
        if got.status in REFUSED:
            if known:
                check.refused[path] = f"the instance refuses it (HTTP {got.status})"
            return
        # the served bytes in the release's own hash (sha1 for an ngsw.json release), so
        # they can be looked up among the known releases' hashes
        sha = got.hashes.get(algorithm)
        if got.status not in MISSING and want is not None and want == sha:
            check.compared.add(path)
            check.served_hashes.append(want)
            return
        if got.status in MISSING or is_fallback(got, path, self.pages):
            self._missing(path, got, expected)
            return
        if sha is None:  # the release's hash was not computed: its bytes vouch for nothing
            sha, want = got.sha256, None
        assert sha is not None  # unobserved() refused a 2xx without a digest
        if expected is None:
            if path != self.obs.manifest_path and self._is_evidence(path):
                self._unexpected(path, sha)
            return
        check.compared.add(path)
        check.served_hashes.append(sha)
        if want is None:
            check.names_only.append(path)
        else:
            self._differs(path, got, expected, want, sha)

    def _missing(self, path: str, got: Fetched, expected: ManifestEntry | None) -> None:
        """404/410, or the fallback page: missing however the server dresses it up."""
        if got.status in MISSING:
            why, kind = f"answers {got.status}", FindingKind.FILE_MISSING
            # the served manifest answering 404 is judged as the served manifest
            reported = expected is not None or (
                path in self.listed and path != self.obs.manifest_path
            )
        else:
            why, kind = FALLBACK, FindingKind.FALLBACK_PAGE
            reported = expected is not None or path in self.listed
        if expected is not None:
            self.check.compared.add(path)
        if not reported:
            return
        where = f"is in release {self.version}" if expected else "is listed by the served manifest"
        self.check.findings.append(
            Finding(
                kind,
                f"{path} {where} but the instance {why}",
                instance=self.obs.instance.name,
                path=path,
                expected=expected.hashes.get("sha256") if expected else None,
                actual=why,
            )
        )
        self.check.missing.append(path)
        self.check.bad.append(path)

    def _is_evidence(self, path: str) -> bool:
        """A file the release lacks is evidence when the served manifest lists it, or
        when only a page loads it and the release lists every file of the build (one
        made by ``manifest build DIST``): a bundler's manifest lists its bundles, not a
        favicon copied from ``public/``, so lacking it there says nothing."""
        return (
            path in self.listed
            or path not in self.obs.page_loads
            or self.release.format == "native"
        )

    def _unexpected(self, path: str, sha: str) -> None:
        self.check.served_hashes.append(sha)
        what = f"{path} is served but is not part of release {self.version}"
        load = self.obs.page_loads.get(path)
        if load is not None and path not in self.listed:
            pages = ", ".join(load.loaded_by)
            what = f"{path} is loaded by {pages} but is not part of release {self.version}"
        self._other_bytes(FindingKind.FILE_UNEXPECTED, what, path, None, sha)

    def _differs(
        self, path: str, got: Fetched, expected: ManifestEntry, want: str, sha: str
    ) -> None:
        same_size = expected.size is not None and expected.size == got.size
        what = f"{path} differs from release {self.version}"
        if "sha256" not in expected.hashes:  # e.g. an ngsw.json release: say which hash
            what += f" ({next((a for a, v in expected.hashes.items() if v == want), 'sha1')})"
        if decoded(got):  # e.g. a stale precompressed .gz, served for the plain file
            what += f" when served {got.content_encoding}-encoded (its bytes once decoded)"
        elif got.content_encoding not in (None, "identity"):  # x.css.gz labelled gzip
            what += f" (its stored {got.content_encoding} bytes)"
        what += " (same size)" if same_size else ""
        self._other_bytes(FindingKind.CONTENT_DIFFERS, what, path, want, sha)

    def _other_bytes(
        self, kind: FindingKind, message: str, path: str, want: str | None, sha: str
    ) -> None:
        """Evidence against a file: the instance serves bytes the release does not."""
        self.check.findings.append(
            Finding(
                kind, message, instance=self.obs.instance.name, path=path, expected=want, actual=sha
            )
        )
        self.check.bad.append(path)
        self.check.differing[path] = sha

    def listed_not_released(self, docs: Mapping[str, Fetched]) -> None:
        """Files the served manifest lists that the release lacks (and not fetched)."""
        # in C: both manifests list the same hundreds of files, mostly all of them
        listed, released = self.listed.keys(), self.release.files.keys()
        if listed <= released:
            return
        unlisted = listed - released
        on_cdn = self.obs.on_cdn
        unexpected = sorted(p for p in unlisted if p not in docs and p not in on_cdn)
        if unexpected:
            self.check.findings.append(
                Finding(
                    FindingKind.FILE_UNEXPECTED,
                    f"served manifest lists {len(unexpected)} file(s) not in release "
                    f"{self.version}: {few_names(unexpected)}",
                    instance=self.obs.instance.name,
                    path=unexpected[0],
                )
            )
            self.check.bad.append(unexpected[0])


def _judged_answer(got: Fetched, algorithm: str, want: str | None) -> Fetched:
    """The answer a path is judged by: among its compared codings' answers (canonical
    order), the first that is not the release's bytes, so a file is right only when
    every coding asked for is; ``got`` itself when every one is right."""
    for one in coding_answers(got):
        if unobserved(one) or one.status in MISSING or one.hashes.get(algorithm) != want:
            return one
    return got


def integrity_findings(obs: Observation) -> list[Finding]:
    """Served bytes against the hashes the served manifest itself declares (SRI, SHA-1)."""
    if obs.manifest is None:
        return []
    findings = []
    for path, shown in sorted(obs.assets.items()):
        entry = obs.manifest.files.get(path)
        if entry is None or not entry.hashes:
            continue
        failing = [a for a in coding_answers(shown) if a.ok and verify_integrity(entry, a.hashes)]
        if not failing:
            continue
        got = failing[0]
        bad = verify_integrity(entry, got.hashes)
        if bad:
            findings.append(
                Finding(
                    FindingKind.INTEGRITY_FAILED,
                    f"{path} does not match its own manifest's {', '.join(bad)} "
                    f"({obs.manifest.format})",
                    instance=obs.instance.name,
                    path=path,
                    expected=", ".join(f"{a}:{entry.hashes[a]}" for a in bad),
                    actual=got.sha256,
                )
            )
    return findings
