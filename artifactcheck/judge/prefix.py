"""Where a release's files are served: the prefix between its paths and an instance's URL.

A release's paths are relative to its build directory (``STATIC_ROOT``,
``public/assets``, ``dist``), and an instance may serve that directory under a prefix:
Django's ``STATIC_URL`` (``/static/``), Rails' ``/assets/``, an app under a sub-path.
Fetched at the wrong place every file answers 404, a redirect to a login page or the
SPA's ``index.html``, which looks exactly like an instance serving nothing of the
release; so "nothing of the release is served here" is never a mismatch by itself:
the files are looked for under a few candidate prefixes, and the verdict names the
prefix to use (:func:`wrong_place_reason`). Pure rules, no I/O: the observer
(:mod:`artifactcheck.observe.instance`) fetches, this module reads the answers.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from artifactcheck.judge.statuses import MISSING
from artifactcheck.model.values import Fetched, Layout, Manifest, is_entry_page

#: Prefixes tried, after the evidence (the served manifest's listing, the version
#: endpoint's directory), when a release's files are not where they were looked for:
#: Django's and Rails' defaults. The instance's own URL (``""``) is always a candidate.
COMMON_PREFIXES: tuple[str, ...] = ("static/", "assets/")
#: Release files fetched under each candidate prefix; most must be found there.
PROBES = 3


def shown_prefix(prefix: str) -> str:
    """A prefix as a user writes it: ``static/`` -> ``/static/``, ``""`` -> ``/``."""
    return "/" + prefix


#: How a file answered with the fallback page is said, in a verdict and in the table.
FALLBACK = "answers with index.html (the fallback page)"


def is_page(path: str) -> bool:
    """An HTML document (or a directory, which answers its index page): what an SPA
    fallback answers with, so never a probe and never "missing" for answering HTML."""
    return not path or path.endswith("/") or path.lower().endswith((".html", ".htm"))


page_path = is_entry_page  # an entry page (``index.html`` anywhere): what a fallback serves


def page_hashes(assets: Mapping[str, Fetched], release: Manifest | None) -> frozenset[str]:
    """sha256 of the site's HTML entry pages: what an SPA fallback answers with."""
    found = {f.sha256 for p, f in assets.items() if page_path(p) and f.ok and f.sha256}
    if release is None:
        return frozenset(found)
    return release.page_hashes.union(found) if found else release.page_hashes


def is_fallback(got: Fetched, path: str, pages: Collection[str]) -> bool:
    """A 200 that is the site's HTML page (or a login page a redirect led to) standing in
    for a missing non-HTML file."""
    if not got.ok or is_page(path):
        return False
    if got.sha256 is not None and got.sha256 in pages:
        return True
    return got.headers.get("content-type", "").lower().startswith("text/html")


def is_found(got: Fetched, path: str, pages: Collection[str]) -> bool:
    """The file is served here: a 2xx body that is not the fallback page. Its bytes may
    still differ; where a file is and what it holds are judged apart."""
    return got.ok and got.sha256 is not None and not is_fallback(got, path, pages)


def is_absent(got: Fetched, path: str, pages: Collection[str]) -> bool:
    """The file is not served here: 404/410, or the fallback page."""
    if got.error is None and got.status in MISSING:
        return True
    return is_fallback(got, path, pages)


def nothing_found(assets: Mapping[str, Fetched], release: Manifest) -> bool:
    """Not one of the release's files fetched is served here, and some are absent:
    the files were looked for in the wrong place (or none of them is deployed).

    One pass that ends at the first file found (every instance serving the release,
    nearly always the first file), the entry pages' hashes worked out only once a
    release file is among the answers: it runs once per instance observed.
    """
    files = release.files
    pages: frozenset[str] | None = None
    absent = False
    for path, got in assets.items():
        if path not in files:
            continue
        if pages is None:
            pages = page_hashes(assets, release)
        if is_found(got, path, pages):
            return False
        absent = absent or is_absent(got, path, pages)
    return absent


def probe_paths(release: Manifest, count: int = PROBES) -> list[str]:
    """A few release files to look for under a candidate prefix: no HTML page (a
    fallback answers those too) and no dot-path (nginx denies them), spread over the
    sorted list so one directory served elsewhere does not decide alone."""
    usable = sorted(
        p
        for p in release.files
        if not is_page(p) and not any(s.startswith(".") for s in p.split("/"))
    )
    if len(usable) <= count:
        return usable
    return [usable[i * len(usable) // count] for i in range(count)]


def confirmed(answers: Sequence[tuple[str, Fetched]], pages: Collection[str]) -> bool:
    """Most probes were found: the release's files are served under this prefix."""
    found = sum(1 for path, got in answers if is_found(got, path, pages))
    return bool(answers) and found * 2 > len(answers)


def prefix_from_listing(listed: Iterable[str], release: Collection[str]) -> str | None:
    """The directory the served manifest lists the release's files under, when most
    of its entries are ``PREFIX + a release path`` (a Django manifest read at
    ``static/staticfiles.json`` lists ``static/admin/css/base.css``); None otherwise."""
    counts: Counter[str] = Counter()
    total = 0
    for path in listed:
        total += 1
        if path in release:  # listed where the release has it: no prefix between them
            continue
        segments = path.split("/")
        for cut in range(1, len(segments)):
            if "/".join(segments[cut:]) in release:
                counts["".join(f"{s}/" for s in segments[:cut])] += 1
                break
    if not counts:
        return None
    best, hits = counts.most_common(1)[0]
    return best if hits * 2 > total else None


def manifest_directory(path: str, manifest: Manifest | None) -> str | None:
    """The directory of a served manifest that lists only files below it (a Django
    manifest read at ``static/staticfiles.json``), as a prefix; None otherwise (a
    manifest at the root, Vite's ``.vite/manifest.json`` listing its parent's files)."""
    head = directory_of(path)
    if head is None or manifest is None or not manifest.files:
        return None
    return head if all(p.startswith(head) for p in manifest.files) else None


def directory_of(path: str) -> str | None:
    """The directory of an endpoint path as a prefix (``/static/version`` -> ``static/``)."""
    head = posixpath.dirname(path.strip().lstrip("/"))
    parts = [s for s in head.split("/") if s and s not in (".", "..")]
    return "".join(f"{s}/" for s in parts) or None


def redirect_prefix(base_url: str, final_url: str) -> str | None:
    """The directory the target's own URL redirected to, as a prefix (a site whose root
    answers ``302 /app/`` serves its app under ``app/``); None when it was not
    redirected, or not to a directory below the target, or to a page asking where to
    come back to (``/login/?next=/``: a login page says nothing of where files are)."""
    base = urlsplit(base_url).path
    base = base if base.endswith("/") else base.rpartition("/")[0] + "/"
    final = urlsplit(final_url)
    target = final.path
    if final.query or not target.startswith(base) or target == base:
        return None
    rest = unquote(target[len(base) :])
    return directory_of(rest if not rest.endswith("/") else rest + "index.html")


def candidates(looked: str, *evidence: str | None, linked: Iterable[str | None] = ()) -> list[str]:
    """The prefixes to look under after ``looked`` found nothing, best evidence first:
    the given ones (learned from a sibling, the served manifest, the version endpoint,
    where the target's URL redirects), then ``linked`` (the directories the entry page
    links to, as prefixes, most linked first), then :data:`COMMON_PREFIXES`, then the
    instance's own URL; each once, never ``looked`` itself."""
    out: list[str] = []
    for prefix in (*evidence, *linked, *COMMON_PREFIXES, ""):
        if prefix is not None and prefix != looked and prefix not in out:
            out.append(prefix)
    return out


def detected_message(layout: Layout) -> str:
    """The report's line for a prefix chosen by probing."""
    at = shown_prefix(layout.prefix)
    return (
        f"the release's files are served under {at}, not at the target itself: detected, "
        f"and used (give --prefix {at} to say so)"
    )


def wrong_place_reason(layout: Layout, version: str, absent: int) -> str:
    """Why an instance where none of the release's files was found is inconclusive,
    naming the prefix to use (or the ones tried)."""
    at = "at the target itself" if not layout.prefix else f"under {shown_prefix(layout.prefix)}"
    head = f"no file of release {version} is served {at} ({absent} answer 404 or the fallback page)"
    if layout.found_at is not None:
        use = shown_prefix(layout.found_at)
        return f"{head}; they are served under {use}: give --prefix {use}"
    tried = ", ".join(shown_prefix(p) for p in layout.tried)
    also = f", nor under {tried}" if tried else ""
    return (
        f"{head}{also}: a wrong base URL, or nothing of the release is deployed; give "
        "--prefix PATH where the release's files are served (Django STATIC_URL, Rails /assets/)"
    )
