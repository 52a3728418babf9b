"""core/v1 Events: created over HTTP (validated as kube-apiserver does), listed over HTTP and
from Python."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from scaler.sim.kubeapi.base import StoreBase
from scaler.sim.kubeapi.errors import (
    JSON,
    DecodeError,
    already_exists,
    bad_request,
    invalid,
    namespace_mismatch,
)
from scaler.sim.kubeapi.leases import MICRO_TIME

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's name generator draws from these


def _generated(n: int) -> str:
    """5 characters of the server's alphabet for the ``n``-th generated name (deterministic)."""
    out = ""
    for _ in range(5):
        n, digit = divmod(n, len(_ALPHABET))
        out = _ALPHABET[digit] + out
    return out


def _legacy_event_causes(namespace: str, event: JSON) -> list[tuple[str, str, str]]:
    """The 422 causes of a core/v1 Event (see :meth:`Events.create_event`)."""
    involved_ns = str((event.get("involvedObject") or {}).get("namespace") or "")
    mismatch = (
        "involvedObject.namespace",
        "FieldValueInvalid",
        f'Invalid value: "{involved_ns}": does not match event.namespace',
    )
    causes: list[tuple[str, str, str]] = []
    if not event.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (
            involved_ns and involved_ns != namespace
        ):
            causes.append(mismatch)
        return causes
    if not involved_ns and namespace not in ("default", "kube-system"):
        causes.append(mismatch)
    for f, limit in (("reportingComponent", None), ("reportingInstance", 128), ("action", 128),
                     ("reason", 128), ("message", 1024)):  # fmt: skip
        value = str(event.get(f) or "")
        if not value and f != "message":
            causes.append((f, "FieldValueRequired", "Required value"))
        elif limit is not None and len(value) > limit:
            causes.append(
                (f, "FieldValueInvalid", f'Invalid value: "": can have at most {limit} characters')
            )
    return causes


class Events(StoreBase):
    """The stored events, keyed by (namespace, name); never aggregated or expired."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self._events: dict[tuple[str, str], JSON] = {}
        self._names = itertools.count(1)  # generateName suffixes

    def create_event(self, namespace: str, body: Any, *, dry_run: bool = False) -> JSON:
        """Validate and store a core/v1 Event posted to ``namespace``, as kube-apiserver's
        legacy (core/v1) validation does (pkg/apis/core/validation ``legacyValidateEvent``):

        - without ``eventTime``: ``involvedObject.namespace`` must be the Event's namespace
          (or both empty/``default``); nothing else is required (not even ``reason`` or
          ``message``);
        - with ``eventTime`` (a MicroTime, else 400): ``involvedObject.namespace`` set unless
          the Event is in ``default`` or ``kube-system``; ``reportingComponent``,
          ``reportingInstance`` (at most 128), ``action`` (at most 128) and ``reason`` (at
          most 128) required; ``message`` at most 1024.

        A ``generateName`` gets 5 characters of the server's alphabet, before validation
        (the 422 names the generated name).

        Raises:
            ApiError: 400 (not an Event, a field that does not decode, namespace mismatch),
                422 (the rules above; no name or generateName), 409 (name exists).
        """
        event = self._decoded_event(namespace, body)
        meta = event["metadata"]
        name = meta.get("name") or ""
        if not name and meta.get("generateName"):
            name = f"{meta['generateName']}{_generated(next(self._names))}"
        causes = _legacy_event_causes(namespace, event)
        if not causes and not name:
            causes = [("metadata.name", "FieldValueRequired",
                       "Required value: name or generateName is required")]  # fmt: skip
        if causes:
            raise invalid("Event", "", name, causes)
        if (namespace, name) in self._events:
            raise already_exists("", "events", name)
        event["kind"] = "Event"
        event["apiVersion"] = "v1"
        created = self._meta(namespace, name, meta.get("labels"))
        event["metadata"] = {**{k: v for k, v in meta.items() if k != "generateName"}, **created}
        if meta.get("generateName"):
            event["metadata"]["generateName"] = meta["generateName"]
        if not dry_run:
            self._events[(namespace, name)] = event
        return copy.deepcopy(event)

    @staticmethod
    def _decoded_event(namespace: str, body: Any) -> JSON:
        """A copy of ``body`` if it decodes into an Event (400 otherwise)."""
        if not isinstance(body, dict):
            raise bad_request("the body of the request is not a JSON object")
        if body.get("kind", "Event") != "Event" or body.get("apiVersion", "v1") != "v1":
            raise bad_request(
                f"expected kind Event apiVersion v1, got kind {body.get('kind')!r} "
                f"apiVersion {body.get('apiVersion')!r}"
            )
        meta = body.get("metadata") or {}
        if not isinstance(meta, dict):
            raise DecodeError("Event", "json: cannot unmarshal into Go struct field Event.metadata")
        if meta.get("namespace", namespace) != namespace:
            raise namespace_mismatch()
        involved = body.get("involvedObject") or {}
        if not isinstance(involved, dict):
            raise DecodeError(
                "Event", "json: cannot unmarshal into Go struct field Event.involvedObject"
            )
        for f in ("reason", "message", "type", "action", "reportingComponent",
                  "reportingInstance"):  # fmt: skip
            if not isinstance(body.get(f, ""), str):
                raise DecodeError(
                    "Event", f"json: cannot unmarshal into Go struct field Event.{f} of type string"
                )
        when = body.get("eventTime")
        if when is not None and (not isinstance(when, str) or not MICRO_TIME.match(when)):
            raise DecodeError(
                "Event", f'parsing time "{when}" as "2006-01-02T15:04:05.000000Z07:00": cannot '
                'parse "Z" as ".000000"',
            )  # fmt: skip
        event = copy.deepcopy(body)
        event["metadata"] = dict(meta)
        return event

    def events(self, namespace: str | None = None) -> list[JSON]:
        """Copies of the stored events (of one namespace or all), oldest first."""
        return [
            copy.deepcopy(e)
            for (ns, _), e in sorted(
                self._events.items(), key=lambda kv: int(kv[1]["metadata"]["resourceVersion"])
            )
            if namespace is None or ns == namespace
        ]
