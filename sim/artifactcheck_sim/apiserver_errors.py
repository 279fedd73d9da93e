"""Kubernetes ``Status`` errors for the fake API server.

Every failure the fake API server (:mod:`artifactcheck_sim.apiserver`) reports
is an :class:`ApiError`; over HTTP it becomes a ``Status`` body with the same
``code``/``reason``/``message``/``details`` a real kube-apiserver sends for that
situation (the message formats follow ``k8s.io/apimachinery/pkg/api/errors``),
and the in-process API raises it as is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ApiError", "FieldError", "REASONS"]

JsonObj = dict[str, Any]

#: The ``reason`` a real server gives each status code it sends on its own.
REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

_GENERIC_MESSAGES: Mapping[int, str] = {
    400: "the server rejected our request for an unknown reason",
    401: "Unauthorized",
    403: "forbidden",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    406: "the server was unable to respond with a content type that the client supports",
    409: "the server reported a conflict",
    410: "the server reported that the resource has expired",
    415: "the server was unable to respond with a content type that the client supports",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    500: "an error on the server has prevented the request from succeeding",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be"
    " processing the request",
}

_CAUSE_REASONS: Mapping[str, tuple[str, str]] = {
    # FieldError.type -> (StatusCause.reason, message prefix)
    "required": ("FieldValueRequired", "Required value"),
    "invalid": ("FieldValueInvalid", "Invalid value"),
    "forbidden": ("FieldValueForbidden", "Forbidden"),
    "duplicate": ("FieldValueDuplicate", "Duplicate value"),
    "not_supported": ("FieldValueNotSupported", "Unsupported value"),
    "too_long": ("FieldValueTooLong", "Too long"),
    "too_many": ("FieldValueTooMany", "Too many"),
    "type_invalid": ("FieldValueTypeInvalid", "Invalid value"),
}


@dataclass(frozen=True)
class FieldError:
    """One validation failure, like ``k8s.io/apimachinery/pkg/util/validation/field.Error``."""

    field: str
    type: str  # a key of _CAUSE_REASONS
    detail: str = ""
    value: Any = None
    show_value: bool = False

    def body(self) -> str:
        prefix = _CAUSE_REASONS[self.type][1]
        if self.show_value or self.type in (
            "invalid",
            "duplicate",
            "not_supported",
            "type_invalid",
        ):
            shown = f'"{self.value}"' if isinstance(self.value, str) else repr(self.value)
            prefix = f"{prefix}: {shown}"
        return f"{prefix}: {self.detail}" if self.detail else prefix

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def cause(self) -> JsonObj:
        return {"reason": _CAUSE_REASONS[self.type][0], "message": self.body(), "field": self.field}

    @classmethod
    def not_supported(cls, field: str, value: Any, supported: Sequence[str]) -> FieldError:
        """``field.NotSupported``: ``value`` is none of ``supported``."""
        listed = ", ".join(f'"{s}"' for s in supported)
        return cls(field, "not_supported", f"supported values: {listed}", value)


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


class ApiError(Exception):
    """An API failure, i.e. a ``Status`` with ``status: Failure``."""

    def __init__(
        self,
        code: int,
        reason: str | None,
        message: str,
        *,
        details: JsonObj | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"({code}) {reason or REASONS.get(code, '')}: {message}")
        self.code = code
        self.reason = reason if reason is not None else REASONS.get(code, "")
        self.message = message
        self.details = details
        self.headers: dict[str, str] = dict(headers or {})

    @property
    def status(self) -> int:
        return self.code

    def to_status(self) -> JsonObj:
        body: JsonObj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        if not self.reason:
            del body["reason"]
        return body

    # -- constructors mirroring k8s.io/apimachinery/pkg/api/errors --------------------

    @staticmethod
    def _details(resource: str, group: str, name: str | None) -> JsonObj:
        details: JsonObj = {}
        if name:
            details["name"] = name
        if group:
            details["group"] = group
        details["kind"] = resource
        return details

    @classmethod
    def _about(
        cls, code: int, reason: str, target: tuple[str, str, str], tail: str, lead: str = ""
    ) -> ApiError:
        """An error about one named object (``resource``, ``group``, ``name``): the message
        is ``lead``, the object's qualified name in quotes, then ``tail``."""
        resource, group, name = target
        message = f'{lead}{_qualified(resource, group)} "{name}"{tail}'
        return cls(code, reason, message, details=cls._details(resource, group, name))

    @classmethod
    def not_found(cls, resource: str, group: str, name: str) -> ApiError:
        return cls._about(404, "NotFound", (resource, group, name), " not found")

    @classmethod
    def forbidden(cls, resource: str, group: str, name: str | None, message: str) -> ApiError:
        """403 Forbidden: RBAC allows no such request (sim/artifactcheck_sim/apiserver_rbac.py)."""
        return cls(403, "Forbidden", message, details=cls._details(resource, group, name))

    @classmethod
    def no_route(cls) -> ApiError:
        return cls(404, "NotFound", _GENERIC_MESSAGES[404], details={})

    @classmethod
    def already_exists(cls, resource: str, group: str, name: str) -> ApiError:
        return cls._about(409, "AlreadyExists", (resource, group, name), " already exists")

    @classmethod
    def conflict(cls, resource: str, group: str, name: str, why: str) -> ApiError:
        lead = "Operation cannot be fulfilled on "
        return cls._about(409, "Conflict", (resource, group, name), f": {why}", lead)

    @classmethod
    def invalid(cls, kind: str, group: str, name: str, errors: Sequence[FieldError]) -> ApiError:
        qualified = f"{kind}.{group}" if group else kind
        if len(errors) == 1:
            summary = str(errors[0])
        else:
            summary = "[" + ", ".join(str(e) for e in errors) + "]"
        details = {"name": name, **cls._details(kind, group, None)}
        details["causes"] = [e.cause() for e in errors]
        return cls(422, "Invalid", f'{qualified} "{name}" is invalid: {summary}', details=details)

    @classmethod
    def unprocessable(cls, why: str) -> ApiError:
        """A 422 for a patch that cannot be applied (``NewGenericServerResponse``)."""
        return cls(
            422,
            "Invalid",
            _GENERIC_MESSAGES[422],
            details={"causes": [{"reason": "UnexpectedServerResponse", "message": why}]},
        )

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def method_not_allowed(cls) -> ApiError:
        return cls(405, "MethodNotAllowed", _GENERIC_MESSAGES[405], details={})

    @classmethod
    def unsupported_media_type(cls, content_type: str, accepted: Sequence[str]) -> ApiError:
        return cls(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted)}",
            details={"causes": [{"reason": "UnexpectedServerResponse", "message": content_type}]},
        )

    @classmethod
    def expired(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)

    @classmethod
    def internal(cls, why: str) -> ApiError:
        return cls(
            500,
            "InternalError",
            f"Internal error occurred: {why}",
            details={"causes": [{"message": why}]},
        )

    @classmethod
    def generic(cls, code: int, message: str | None = None) -> ApiError:
        """What a real server sends for ``code`` when it has nothing more specific."""
        # Only 429 carries Retry-After, as API Priority and Fairness sends it.  (urllib3,
        # under the official client, silently retries idempotent requests that get one.)
        headers = {"Retry-After": "1"} if code == 429 else None
        details: JsonObj | None = {"retryAfterSeconds": 1} if headers else None
        return cls(
            code,
            REASONS.get(code, "Unknown"),
            message
            or _GENERIC_MESSAGES.get(code, f"the server responded with the status code {code}"),
            details=details,
            headers=headers,
        )
