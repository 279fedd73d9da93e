"""Consensus without a release source: siblings reporting one version must serve the same bytes.

A strict majority is taken as the truth and a minority is evidence; a tie blames nobody
(a warning on each). Also the image digests siblings run, compared the same way.

Siblings agree only on content they serve: a 2xx body that is not the site's fallback
page. Two instances answering 404, 403, a 5xx, a redirect or the fallback page for a
file agree on nothing about it (an Encore manifest's files asked under the wrong prefix
answer 404 everywhere: agreeing on those would pass any fleet). The served manifest and
the entry page are compared too, but agreeing on them alone vouches for no file: an
instance whose served content was never compared with a sibling's is not "agreeing".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from artifactcheck.judge import prefix
from artifactcheck.judge.answers import documents, few_names
from artifactcheck.judge.served_check import manifest_fell_back, reported_version
from artifactcheck.judge.statuses import MISSING
from artifactcheck.model.records import Record, replace
from artifactcheck.model.values import (
    Finding,
    FindingKind,
    Instance,
    Observation,
    Severity,
)
from artifactcheck.model.versions import version_problem

#: What an instance holds for a file it does not serve (404/410 or the fallback page):
#: held like a hash, so a sibling serving the file differs from it and never agrees.
ABSENT = "absent"

#: What an instance whose pages were read wholly holds for a file its siblings' pages
#: load and its own do not: its browsers never ask for it, so it differs from them.
NOT_LOADED = "not loaded by its pages"

#: What a sibling holds for a file neither it nor its siblings' manifests name: no answer.
_NO_ANSWER = (ABSENT, NOT_LOADED)


class Agreement(Record):
    """What one instance's siblings (reporting its version) were found to share with it."""

    #: siblings holding the same bytes on every path both answered, sharing at least
    #: one file compared (below)
    agreeing: int = 0
    #: files it serves that a sibling served too: compared with a sibling, the served
    #: manifest and the entry page aside (agreeing on them alone vouches for no file)
    compared: tuple[str, ...] = ()
    #: files it was asked for that no instance of its version serves (404 or the
    #: fallback page everywhere): why nothing was compared, when nothing was
    absent_everywhere: tuple[str, ...] = ()


def consensus_groups(observations: Sequence[Observation]) -> dict[str, list[Observation]]:
    """Observed instances by the (valid) version they report."""
    groups: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        version = reported_version(obs)
        if obs.error is None and version is not None and version_problem(version) is None:
            groups[version].append(obs)
    return groups


def held(obs: Observation) -> dict[str, str]:
    """What the instance served for each path: the sha256 of content found there (a 2xx
    body that is not the fallback page), or :data:`ABSENT`. A refusal, an error, a
    redirect or a 5xx is no answer about the file, so it is not held at all."""
    pages = prefix.page_hashes(obs.assets, None)
    out: dict[str, str] = {}
    for path, got in documents(obs).items():
        if prefix.is_found(got, path, pages):
            assert got.sha256 is not None  # is_found: a hashed body
            out[path] = got.sha256
        elif prefix.is_absent(got, path, pages):
            out[path] = ABSENT
    return out


def answers_of(members: Sequence[Observation]) -> dict[str, dict[str, str]]:
    """What each instance of one version holds for each path (:func:`held`), and
    :data:`NOT_LOADED` for the files its siblings' pages load and its own pages, read
    wholly, do not (a drifted build names other files: the page is the only list)."""
    out = {o.instance.name: held(o) for o in members}
    loaded = {p for o in members for p in o.page_loads if p not in o.on_cdn}
    for obs in members:
        if not obs.page_loads or obs.page_problems or obs.page_failures:
            continue  # pages not read (or not wholly): no evidence of what they load
        docs = out[obs.instance.name]
        for path in loaded - set(obs.page_loads) - set(docs):
            docs[path] = NOT_LOADED
    return out


def _what_absent(obs: Observation, path: str) -> str:
    if path not in documents(obs):
        return NOT_LOADED
    got = documents(obs)[path]
    return f"answers {got.status}" if got.status in MISSING else prefix.FALLBACK


def consensus_findings(observations: Sequence[Observation]) -> dict[str, list[Finding]]:
    """Siblings reporting the same version must serve the same bytes; minorities are suspect.

    For each version and path, the strict majority among the instances that answered
    the path is taken as the truth; an instance holding other bytes, or lacking a file
    most siblings serve, gets a ``minority-content`` finding. A majority lacking a file
    blames nobody (a file served by few is no evidence against their bytes). Without a
    strict majority (a tie), every instance gets a warning instead: the disagreement is
    real but nobody can be blamed.
    """
    out: dict[str, list[Finding]] = defaultdict(list)
    for version, members in consensus_groups(observations).items():
        by_name = {o.instance.name: o for o in members}
        by_path: dict[str, dict[str, str]] = defaultdict(dict)
        for name, docs in answers_of(members).items():
            for path, sha in docs.items():
                by_path[path][name] = sha
        for path in sorted(by_path):
            answers = by_path[path]
            if len(set(answers.values())) <= 1:
                continue
            (top, top_count), *_rest = Counter(answers.values()).most_common()
            if top_count * 2 <= len(answers):
                for name in answers:
                    out[name].append(_no_majority(name, path, version))
                continue
            if top == NOT_LOADED:  # the pages of most siblings do not load it
                for name, sha in answers.items():
                    if sha != NOT_LOADED:
                        out[name].append(_loaded_alone(by_name[name], path, top_count, version))
                continue
            if top == ABSENT:
                continue
            for name, sha in answers.items():
                if sha == top:
                    continue
                if sha == NOT_LOADED:
                    message = (
                        f"{path} is not loaded by its pages while the pages of {top_count} "
                        f"of its {len(answers) - 1} siblings reporting {version} load it"
                    )
                elif sha == ABSENT:
                    what = _what_absent(by_name[name], path)
                    message = (
                        f"{path} is missing here (it {what}) while {top_count} of its "
                        f"{len(answers) - 1} siblings reporting {version} serve it"
                    )
                else:
                    message = (
                        f"{path}{_by(by_name[name], path)} differs from {top_count} of its "
                        f"{len(answers) - 1} siblings reporting {version}"
                    )
                out[name].append(
                    Finding(
                        FindingKind.MINORITY_CONTENT,
                        message,
                        instance=name,
                        path=path,
                        expected=top,
                        actual=sha if sha not in _NO_ANSWER else _what_absent(by_name[name], path),
                    )
                )
    return out


def _loaded_alone(obs: Observation, path: str, others: int, version: str) -> Finding:
    """A file this instance's pages load and the pages of most siblings do not."""
    return Finding(
        FindingKind.MINORITY_CONTENT,
        f"{path} is loaded by its pages{_by(obs, path)} while the pages of {others} of its "
        f"siblings reporting {version} do not load it",
        instance=obs.instance.name,
        path=path,
        expected=NOT_LOADED,
        actual=held(obs).get(path, "not fetched"),
    )


def _by(obs: Observation, path: str) -> str:
    load = obs.page_loads.get(path)
    return f" (loaded by {', '.join(load.loaded_by)})" if load is not None else ""


def _no_majority(name: str, path: str, version: str) -> Finding:
    return Finding(
        FindingKind.NO_CONSENSUS,
        f"siblings reporting {version} disagree on {path} with no majority",
        instance=name,
        path=path,
        severity=Severity.WARNING,
    )


def _countable(obs: Observation, path: str) -> bool:
    """A file whose agreement vouches for content: not the served manifest, not an
    entry page (what a fallback answers for every path)."""
    return path != obs.manifest_path and not prefix.page_path(path)


def serves_content(obs: Observation) -> bool:
    """Some file it served counts for agreement: a 2xx body, not the fallback page, not
    the served manifest nor the entry page. Without one, no sibling "serves the same"."""
    return any(sha != ABSENT and _countable(obs, p) for p, sha in held(obs).items())


def consensus_agreement(observations: Sequence[Observation]) -> dict[str, Agreement]:
    """For each instance, what its siblings reporting its version share with it.

    A sibling agrees when it holds the same bytes on every path both answered (content
    against content, or content against absence, is a difference) and shares at least
    one file served by both (:func:`_countable`). "Agrees with its N siblings" counts
    these, not every instance of the version: of three instances where one is the
    minority, each of the other two agrees with one. Sets of names per answer keep this
    linear in the files of a large fleet, not quadratic in its instances' pairs.
    """
    out: dict[str, Agreement] = {}
    for members in consensus_groups(observations).values():
        answers = answers_of(members)
        same: dict[tuple[str, str], set[str]] = defaultdict(set)  # (path, answer) -> names
        answered: dict[str, set[str]] = defaultdict(set)  # path -> names holding any answer
        for name, docs in answers.items():
            for item in docs.items():
                same[item].add(name)
                answered[item[0]].add(name)
        for obs in members:
            name, docs = obs.instance.name, answers[obs.instance.name]
            shared = {
                (p, sha) for p, sha in docs.items() if sha not in _NO_ANSWER and _countable(obs, p)
            }
            agree: set[str] = set().union(*(same[item] for item in shared))
            differ: set[str] = set().union(*(answered[p] - same[(p, v)] for p, v in docs.items()))
            served_by_others = {
                p
                for p, _ in shared
                if answered[p] - same[(p, ABSENT)] - same[(p, NOT_LOADED)] - {name}
            }
            nowhere = {p for p in docs if _countable(obs, p) and answered[p] == same[(p, ABSENT)]}
            out[name] = Agreement(
                len(agree - differ - {name}),
                tuple(sorted(served_by_others)),
                tuple(sorted(nowhere)),
            )
    return out


def nothing_compared(agreement: Agreement | None) -> str:
    """Why an instance shares no served file with a sibling: the reason of its verdict."""
    head = "nothing it serves was compared with a sibling"
    absent = agreement.absent_everywhere if agreement is not None else ()
    if not absent:
        return f"{head}: no file it was asked for is served by another instance of its version"
    return (
        f"{head}: {len(absent)} file(s) it was asked for answer 404 or the fallback page on "
        f"every instance ({few_names(list(absent), 3)}); a wrong --prefix or --manifest-path?"
    )


def without_release(findings: Sequence[Finding], obs: Observation) -> list[Finding]:
    """The instance's findings as they read with no release: a missing served manifest
    judges nothing "by the release's file list" (there is none); it leaves nothing to
    name the files to compare with siblings, and says so, unless the entry pages name
    them: then no manifest at a well-known name is how most sites are (a Hugo or MkDocs
    build has none), said only in the information a report keeps."""
    out = []
    for f in findings:
        if f.kind is not FindingKind.MANIFEST_MISSING:
            out.append(f)
            continue
        fell_back = manifest_fell_back(obs)
        head = (
            f"served manifest {obs.manifest_path} "
            + (prefix.FALLBACK if fell_back else f"answers {f.actual}")
            if obs.manifest_path and f.actual is not None
            else "the instance serves no manifest at any well-known name"
        )
        detail = f" ({obs.manifest_error})" if obs.manifest_error and not fell_back else ""
        if obs.page_loads:
            said = f"{head}: the {len(obs.page_loads)} file(s) its pages load are compared"
            out.append(replace(f, message=f"{said}{detail}", severity=Severity.INFO))
            continue
        out.append(
            replace(
                f,
                message=f"{head}, and no release was given: nothing names the files to "
                f"compare with its siblings{detail}",
            )
        )
    return out


def image_findings(instances: Sequence[Instance]) -> dict[str, list[Finding]]:
    """Instances of one version running different image digests than most siblings."""
    out: dict[str, list[Finding]] = defaultdict(list)
    groups: dict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        if inst.reported_version and inst.image_id:
            groups[inst.reported_version].append(inst)
    for version, members in groups.items():
        counts = Counter(i.image_id for i in members)
        if len(counts) <= 1:
            continue
        top, _ = counts.most_common(1)[0]
        for inst in members:
            if inst.image_id != top:
                out[inst.name].append(
                    Finding(
                        FindingKind.IMAGE_DIVERGES,
                        f"runs image {inst.image_id} while {counts[top]} of {len(members)} "
                        f"instances reporting {version} run {top}",
                        instance=inst.name,
                        expected=top,
                        actual=inst.image_id,
                        severity=Severity.WARNING,
                    )
                )
    return out
