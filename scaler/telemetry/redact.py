"""Secrets never reach a log line: a registry of secret values and a structlog processor.

Whatever reads a secret (the Prometheus bearer token file at each request, header values
from the settings) registers it; :func:`redact_secrets` replaces every occurrence in every
string of a log event with ``***`` - also inside an error text a server echoed back.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

__all__ = ["redact", "redact_secrets", "register_secret"]

_SECRETS: set[str] = set()
_MIN_LENGTH = 4  # shorter values would mask ordinary text


def register_secret(value: str) -> None:
    """Remember ``value`` (stripped) as a secret to mask in logs."""
    value = value.strip()
    if len(value) >= _MIN_LENGTH:
        _SECRETS.add(value)


def redact(value: Any) -> Any:
    """``value`` with every registered secret replaced by ``***`` (strings, lists, dicts)."""
    if isinstance(value, str):
        for secret in sorted(_SECRETS, key=len, reverse=True):
            if secret in value:
                value = value.replace(secret, "***")
        return value
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value


def redact_secrets(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: mask registered secrets in every value of the event."""
    if not _SECRETS:
        return event_dict
    for key, value in list(event_dict.items()):
        event_dict[key] = redact(value)
    return event_dict
