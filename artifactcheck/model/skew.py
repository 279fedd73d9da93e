"""Whether a previous release is still served: one place's answers for its files.

After a rollout, pages already open in users' browsers keep asking for the files of the
release they were loaded from (version skew): a CDN or an instance that no longer has
them breaks those pages although every instance serves the new release correctly. So a
previous release is judged apart from the instances' verdicts, place by place (the CDN,
each instance), and the report has a section of its own for it.
"""

from __future__ import annotations

from artifactcheck.model.records import Record

#: The ``where`` of the CDN's check (an instance's is its name).
ON_CDN = "cdn"


class PreviousServed(Record):
    """What one place served of one previous release: the files missing or different.

    ``error`` says why the place could not be checked at all (no release for the
    version, the CDN unreachable); ``unchecked`` the files with no usable answer. Either
    leaves the run inconclusive, never consistent: nothing was shown to be there.
    """

    version: str
    where: str  # ON_CDN or the instance's name
    base_url: str | None = None  # where the files were asked for
    required: int = 0  # files of the release asked for here
    total: int = 0  # files of the release
    missing: tuple[str, ...] = ()
    differs: tuple[str, ...] = ()
    unchecked: tuple[str, ...] = ()
    sampled: bool = False
    error: str | None = None

    @property
    def wrong(self) -> bool:
        """A file of the previous release is missing or different here."""
        return bool(self.missing or self.differs)

    @property
    def unknown(self) -> bool:
        """Something of the previous release could not be checked here."""
        return self.error is not None or bool(self.unchecked)
