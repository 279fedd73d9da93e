"""Logging helpers: JSON lines for the controller and a context-carrying adapter.

In a cluster, logs are read by machines first; one JSON object per line with the
namespace, pod and version of the message keeps them searchable. Values of request
headers never reach a log line (see artifactcheck.fetch), so nothing secret is emitted here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and context fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value if isinstance(value, str | int | float | bool) else str(value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """``2026-12-01T10:15:13.123Z LEVEL logger: message``: a timestamp on every line
    (ISO 8601, UTC, milliseconds), so plain logs can be lined up with Events and with
    other components' logs without a log shipper adding one."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        moment = datetime.fromtimestamp(record.created, UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class ContextAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger that adds fixed context (check, namespace, pod) to every record."""

    def __init__(self, logger: logging.Logger, extra: Mapping[str, object]) -> None:
        super().__init__(logger, dict(extra))

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs
