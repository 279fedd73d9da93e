"""Observations of instances that could not be observed, and why.

"Could not observe" is never evidence of a mismatch (see :mod:`artifactcheck.judge.compare`):
each builder here records the answer that stopped the observation and an
``error_kind`` the judge reads as ``unreachable`` or ``inconclusive``.
"""

from __future__ import annotations

from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.values import Fetched, Instance, Observation

#: ``Observation.error_kind`` of an instance whose check raised an unexpected exception.
CHECK_FAILED = ErrorKind.CHECK_FAILED


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception; of its first leaf for an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_failed(instance: Instance, path: str, exc: BaseException) -> Observation:
    """The observation of an instance whose check raised: judged inconclusive."""
    return Observation(
        instance=instance,
        manifest_path=path,
        error=f"the check failed: {describe(exc)}",
        error_kind=CHECK_FAILED,
    )


def unreachable(instance: Instance, path: str, got: Fetched) -> Observation:
    """An instance that did not answer (connect, timeout, TLS): judged unreachable."""
    return _stopped_by(got, instance, path, why=got.error, kind=got.error_kind)


def unobservable(instance: Instance, path: str, got: Fetched, why: str) -> Observation:
    """An instance that answered, but not with anything that can be judged: inconclusive."""
    return _stopped_by(got, instance, path, why=why, kind=ErrorKind.STATUS)


def _stopped_by(
    got: Fetched, instance: Instance, path: str, *, why: str | None, kind: ErrorKind | None
) -> Observation:
    """The one shape of an observation a fetch stopped: the fetch is kept as evidence and
    the error names its URL, so an unreachable and an unjudgeable answer read alike and
    only their ``error_kind`` (what the judge decides on) tells them apart."""
    return Observation(
        instance=instance,
        manifest_path=path,
        manifest_fetch=got,
        error=f"{got.url}: {why}",
        error_kind=kind,
    )
