"""core/v1 Events: created over HTTP (validated), listed over HTTP and from Python."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from scaler.sim.kubeapi.base import StoreBase
from scaler.sim.kubeapi.errors import (
    JSON,
    already_exists,
    bad_request,
    invalid,
    namespace_mismatch,
)


class Events(StoreBase):
    """The stored events, keyed by (namespace, name); never aggregated or expired."""

    def __init__(self, now: Callable[[], float]) -> None:
        super().__init__(now)
        self._events: dict[tuple[str, str], JSON] = {}
        self._names = itertools.count(1)  # generateName suffixes

    def create_event(self, namespace: str, body: Any, *, dry_run: bool = False) -> JSON:
        """Validate and store a core/v1 Event posted to ``namespace``.

        Raises:
            ApiError: 400 (not an Event, namespace mismatch), 422 (missing fields),
                409 (name exists).
        """
        if not isinstance(body, dict):
            raise bad_request("the body of the request is not a JSON object")
        if body.get("kind", "Event") != "Event" or body.get("apiVersion", "v1") != "v1":
            raise bad_request(
                f"expected kind Event apiVersion v1, got kind {body.get('kind')!r} "
                f"apiVersion {body.get('apiVersion')!r}"
            )
        meta = body.get("metadata") or {}
        if meta.get("namespace", namespace) != namespace:
            raise namespace_mismatch()
        name = meta.get("name") or ""
        causes: list[tuple[str, str, str]] = []
        if not name and not meta.get("generateName"):
            causes.append(
                (
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                )
            )
        inv = body.get("involvedObject")
        if not isinstance(inv, dict) or not inv.get("name") or not inv.get("kind"):
            causes.append(("involvedObject", "FieldValueRequired", "Required value"))
        elif inv.get("namespace", namespace) != namespace:
            causes.append(
                (
                    "involvedObject.namespace",
                    "FieldValueInvalid",
                    f'Invalid value: "{inv.get("namespace")}": does not match event.namespace',
                )
            )
        for f in ("reason", "message"):
            if not isinstance(body.get(f), str) or not body[f]:
                causes.append((f, "FieldValueRequired", "Required value"))
        if causes:
            raise invalid("Event", "", name or str(meta.get("generateName")), causes)
        if not name:
            name = f"{meta['generateName']}{next(self._names):05x}"
        if (namespace, name) in self._events:
            raise already_exists("", "events", name)
        event = copy.deepcopy(body)
        event["kind"] = "Event"
        event["apiVersion"] = "v1"
        created = self._meta(namespace, name, meta.get("labels"))
        event["metadata"] = {**{k: v for k, v in meta.items() if k != "generateName"}, **created}
        if meta.get("generateName"):
            event["metadata"]["generateName"] = meta["generateName"]
        if not dry_run:
            self._events[(namespace, name)] = event
        return copy.deepcopy(event)

    def events(self, namespace: str | None = None) -> list[JSON]:
        """Copies of the stored events (of one namespace or all), oldest first."""
        return [
            copy.deepcopy(e)
            for (ns, _), e in sorted(
                self._events.items(), key=lambda kv: int(kv[1]["metadata"]["resourceVersion"])
            )
            if namespace is None or ns == namespace
        ]
