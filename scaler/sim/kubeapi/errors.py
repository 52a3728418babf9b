"""API errors as ``v1 Status`` bodies, with the reasons and messages a real API server sends.

:class:`ApiError` is raised anywhere in the stand-in and rendered by the server; the helpers
build the common ones (``NotFound``, ``Conflict``, ``Invalid`` with ``details.causes``,
``BadRequest``, ``UnsupportedMediaType``) in the exact shapes of kube-apiserver 1.31.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# A decoded JSON object, as the API sends and stores them.
JSON = dict[str, Any]

CONFLICT_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)

_REASONS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "forbidden: the caller may not perform this action"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", CONFLICT_MESSAGE),
    410: ("Expired", "the resource version is too old"),
    415: ("UnsupportedMediaType", "the body of the request was in an unknown format"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "an error on the server has prevented the request from succeeding"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted"),
}


class ApiError(Exception):
    """An API failure, rendered by the server as a ``v1 Status`` body with ``code`` as status.

    Attributes:
        code: HTTP status code.
        reason: ``Status.reason`` (``NotFound``, ``Conflict``...).
        message: ``Status.message``.
        details: ``Status.details`` or None.
        headers: extra response headers (``Retry-After``).
    """

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: JSON | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = dict(headers or {})

    def status_body(self) -> JSON:
        """The ``v1 Status`` JSON object."""
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    @classmethod
    def generic(cls, code: int, reason: str | None = None, message: str | None = None) -> ApiError:
        """An error with the default reason/message of ``code``."""
        default_reason, default_message = _REASONS.get(code, ("Unknown", f"HTTP {code}"))
        return cls(code, reason or default_reason, message or default_message)


def _details(name: str, group: str, kind: str) -> JSON:
    out: JSON = {"name": name}
    if group:  # omitempty: core-group resources carry no group
        out["group"] = group
    out["kind"] = kind
    return out


def qualified(group: str, plural: str) -> str:
    """A resource as messages name it: ``deployments.apps``; core-group ones bare (``pods``)."""
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    """404 ``NotFound`` for a named object."""
    return ApiError(
        404,
        "NotFound",
        f'{qualified(group, plural)} "{name}" not found',
        _details(name, group, plural),
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    """409 ``AlreadyExists``: a create of a name that is taken."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(group, plural)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(group: str, plural: str, name: str) -> ApiError:
    """409 ``Conflict``: the optimistic-lock failure of a write with a stale resourceVersion."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {CONFLICT_MESSAGE}',
        _details(name, group, plural),
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid. ``causes`` holds (field path, cause reason, cause message)."""
    head = f"{kind}.{group}" if group else kind
    text = ", ".join(f"{f}: {m}" for f, _, m in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details = _details(name, group, kind)
    details["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(422, "Invalid", f'{head} "{name}" is invalid: {text}', details)


def resource_version_required(plural: str, group: str, name: str) -> ApiError:
    """422 for an update without a resourceVersion of a kind whose strategy requires one
    (custom resources). Upstream names the resource (plural), not the kind, in this error."""
    return invalid(
        plural,
        group,
        name,
        [
            (
                "metadata.resourceVersion",
                "FieldValueInvalid",
                "Invalid value: 0x0: must be specified for an update",
            )
        ],
    )


def bad_request(message: str) -> ApiError:
    """400 ``BadRequest`` with ``message``."""
    return ApiError(400, "BadRequest", message)


def name_mismatch(body_name: object, url_name: str) -> ApiError:
    """400: the body's ``metadata.name`` is not the name in the URL."""
    return bad_request(
        f"the name of the object ({body_name}) does not match the name on the URL ({url_name})"
    )


def namespace_mismatch() -> ApiError:
    """400: the body's ``metadata.namespace`` is not the namespace in the URL."""
    return bad_request(
        "the namespace of the provided object does not match the namespace sent on the request"
    )


def unsupported_media_type(accepted: Sequence[str]) -> ApiError:
    """415 naming the accepted content types, in the order given."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )
