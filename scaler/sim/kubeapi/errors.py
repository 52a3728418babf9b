"""API errors as ``v1 Status`` bodies, with the reasons and messages a real API server sends.

:class:`ApiError` is raised anywhere in the stand-in and rendered by the server; the helpers
build the common ones (``NotFound``, ``Conflict``, ``Invalid`` with ``details.causes``,
``BadRequest``, ``UnsupportedMediaType``, ``Forbidden``) in the exact shapes of kube-apiserver
1.37 (the contract suite, ``tests/cluster/contract``, holds them to it). :class:`RouteNotFound`
is the router's plain-text 404 of a path no API serves (a kind without its CRD).
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
        """The ``v1 Status`` JSON object (``reason`` left out when empty, as for a 500 whose
        cause the server does not classify)."""
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    @classmethod
    def generic(cls, code: int, reason: str | None = None, message: str | None = None) -> ApiError:
        """An error with the default reason/message of ``code``."""
        default_reason, default_message = _REASONS.get(code, ("Unknown", f"HTTP {code}"))
        return cls(code, reason or default_reason, message or default_message)


class RouteNotFound(ApiError):
    """A path no API serves (a group without its CRD, a resource or version it does not
    have): the router's plain-text ``404 page not found``, no Status."""

    def __init__(self) -> None:
        super().__init__(404, "NotFound", "404 page not found")


def _details(name: str, group: str, kind: str) -> JSON:
    out: JSON = {"name": name} if name else {}  # omitempty
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
                "Invalid value: 0: must be specified for an update",
            )
        ],
    )


def bad_request(message: str) -> ApiError:
    """400 ``BadRequest`` with ``message``."""
    return ApiError(400, "BadRequest", message)


class DecodeError(ApiError):
    """400: a body that does not decode into ``kind`` (a field of the wrong type); ``why``
    is the decoder's words. After a PATCH the server answers :func:`patch_invalid` instead."""

    def __init__(self, kind: str, why: str) -> None:
        super().__init__(
            400, "BadRequest", f'{kind} in version "v1" cannot be handled as a {kind}: {why}'
        )
        self.why = why


def patch_invalid(patched: JSON, why: str) -> ApiError:
    """422 of a PATCH whose result does not decode into the kind: the cause is ``patch``,
    its value the patched object (as kube-apiserver answers it)."""
    import json

    value = json.dumps(patched, separators=(",", ":"))
    message = f"Invalid value: {json.dumps(value)}: {why}"
    return ApiError(
        422,
        "Invalid",
        f' "" is invalid: patch: {message}',
        {"causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}]},
    )


def invalid_resource_version(value: object) -> ApiError:
    """500 without a reason: a ``resourceVersion`` that is no number reaches the storage's
    parser (kube-apiserver answers ``strconv.ParseUint: ...``)."""
    return ApiError(500, "", f'strconv.ParseUint: parsing "{value}": invalid syntax')


def options_invalid(options: str, field: str, cause: str, message: str) -> ApiError:
    """422 of a request's options (``PatchOptions``, ``CreateOptions``, ``UpdateOptions``):
    ``fieldManager`` too long, ``dryRun`` not ``All``."""
    return ApiError(
        422,
        "Invalid",
        f'{options}.meta.k8s.io "" is invalid: {field}: {message}',
        {
            "group": "meta.k8s.io",
            "kind": options,
            "causes": [{"reason": cause, "message": message, "field": field}],
        },
    )


def forbidden(user: str, verb: str, group: str, resource: str, namespace: str,
              name: str = "", subresource: str = "") -> ApiError:  # fmt: skip
    """403 as RBAC words it: ``<resource> "<name>" is forbidden: User "<user>" cannot <verb>
    resource "<resource>[/<sub>]" in API group "<group>" in the namespace "<ns>"``."""
    what = qualified(group, resource) + (f' "{name}"' if name else "")
    full = f"{resource}/{subresource}" if subresource else resource
    return ApiError(
        403,
        "Forbidden",
        f'{what} is forbidden: User "{user}" cannot {verb} resource "{full}" in API group '
        f'"{group}" in the namespace "{namespace}"',
        _details(name, group, resource),
    )


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


def unknown_patch_type() -> ApiError:
    """415 of a PATCH whose content type is no patch type at all (``application/json``)."""
    return ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})


def unsupported_media_type(accepted: Sequence[str]) -> ApiError:
    """415 naming the accepted content types, in the order given."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )
