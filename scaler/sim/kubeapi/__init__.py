"""A strict in-memory stand-in for the part of the Kubernetes API that vllm-scaler uses.

:class:`KubeStore` holds the objects and is driven from Python by the simulated fleet;
:class:`KubeApiServer` serves it over real HTTP (aiohttp.web on loopback) so the real
kubernetes-asyncio client runs against it; :func:`write_kubeconfig` writes a kubeconfig
that points that client at the server.

Served routes (everything else is a 404 ``Status``; a known path with another verb is 405)::

    GET                /version, /version/
    GET                /api/v1/namespaces/{ns}/pods            labelSelector, fieldSelector
    GET, PATCH         /api/v1/namespaces/{ns}/pods/{name}      labels and annotations only
    GET, POST          /api/v1/namespaces/{ns}/events          fieldSelector on GET
    GET                /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}   workloads
    GET, PUT, PATCH    /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/scale
    GET, POST          /apis/{group}/{version}/namespaces/{ns}/{plural}          plain objects
    GET, PUT, PATCH    /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}   plain objects

Workloads are the kinds with a scale subresource (:meth:`KubeStore.register_kind`; apps/v1
Deployment, StatefulSet and ReplicaSet by default). Plain objects are kinds without one
(:meth:`KubeStore.register_object_kind`): ``coordination.k8s.io/v1`` Lease and
``autoscaling/v2`` HorizontalPodAutoscaler by default; KEDA's ``keda.sh/v1alpha1``
ScaledObject once :meth:`KubeStore.add_scaled_object` (or a registration) installs the "CRD"
- until then its paths are 404, as on a cluster without KEDA.

Where it deliberately matches a real API server (1.31):

* Errors are ``v1 Status`` bodies with the real ``reason``/``message``/``details`` shapes:
  ``NotFound``, ``Conflict`` (optimistic-lock message), ``Invalid`` (with ``details.causes``),
  ``BadRequest``, ``UnsupportedMediaType``, ``MethodNotAllowed``, ``Unauthorized``,
  ``TooManyRequests`` (``Retry-After`` header and ``details.retryAfterSeconds``).
* ``resourceVersion`` is one global counter (strings of integers); a write that changes
  nothing does not bump it (like the etcd3 store), and ``generation`` moves only with spec.
* ``autoscaling/v1 Scale``: ``spec.replicas`` is omitted when 0 (``omitempty``), the
  scale's uid / resourceVersion / creationTimestamp are the workload's, and
  ``status.selector`` is the workload selector formatted like ``metav1.FormatLabelSelector``
  (requirements sorted by key, e.g. ``app=vllm,role=server``).
* PATCH: a ``metadata.resourceVersion`` inside the patch is a precondition (409 when it
  differs); without one the patch is unconditional. Content types: merge and JSON patch
  for every kind, strategic merge only for built-in kinds (custom resources answer 415, as
  for CRDs), ``application/apply-patch+yaml`` with a required ``fieldManager``.
* PUT: a ``resourceVersion`` that differs is 409. An *empty* one is accepted for the
  built-in ``apps`` kinds (their strategies allow unconditional update) and is 422
  ``metadata.resourceVersion: ... must be specified for an update`` for custom kinds
  (the CRD strategy does not). A PUT body without ``spec.replicas`` means 0 replicas.
* ``dryRun=All`` validates and answers without storing anything.
* Plain objects: POST of an existing name is 409 ``AlreadyExists``; PUT/PATCH follow the
  scale rules above (resourceVersion precondition, 422 for an empty one on custom kinds,
  415 for strategic merge on custom kinds, no bump for a no-op). Lease times must be
  MicroTime (``2006-01-02T15:04:05.000000Z``, else 400 as the decoder answers),
  ``leaseDurationSeconds`` > 0 and ``leaseTransitions`` >= 0 (422). Annotations are a map
  of strings of at most 256 KiB in total (422).
* Pod PATCH (merge, strategic merge, JSON patch) may change ``metadata.labels`` and
  ``metadata.annotations`` only (422 otherwise); ``controller.kubernetes.io/pod-deletion-cost``
  must be an int32 (422).
* Workload status is computed from pods: ``status.replicas`` = active pods matching the
  selector (not terminating, phase not Succeeded/Failed), ``readyReplicas`` = those whose
  Ready condition is True. When a pod change alters a workload's status the workload gets
  a new resourceVersion, as it would when the real workload controller writes status; so
  a client that read the scale before a pod became ready gets a 409 on a conditional write.

Where it differs (simplifications, on purpose):

* Only the verbs above; creating/deleting pods, deployments and the like is done through
  the Python API of :class:`KubeStore`, not HTTP (those verbs answer 405).
* Authentication is one static bearer token; anonymous requests (even ``/version``) get
  401 - as on a cluster with anonymous auth disabled. No RBAC: 403 only by fault injection.
* Server-side apply stores ``spec.replicas`` but keeps no managed fields and never reports
  field-manager conflicts; ``fieldManager`` is otherwise ignored.
* Event creation requires ``involvedObject``, ``reason`` and ``message`` (422 otherwise) -
  stricter than the real core/v1 validation, to catch incomplete events in tests. Events
  are never aggregated or expired.
* ``fieldSelector`` supports ``=``, ``==`` and ``!=`` on any dotted field path
  (``metadata.name``, ``status.phase``, ``involvedObject.name``...); the real server
  accepts only an allow-listed set of fields per resource.
* No watch, no pagination (``limit``/``continue`` ignored), no protobuf, JSON only;
  ``application/yaml`` is accepted for PUT bodies but answers are always JSON.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from aiohttp import web

__all__ = [
    "ApiError",
    "KubeApiServer",
    "KubeStore",
    "LabelSelector",
    "RecordedRequest",
    "ScaleChange",
    "SelectorError",
    "format_selector",
    "parse_label_selector",
    "rfc3339",
    "write_kubeconfig",
]

JSON = dict[str, Any]

CONFLICT_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

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


def rfc3339(epoch_seconds: float) -> str:
    """Format epoch seconds as the API does: RFC3339 UTC truncated to whole seconds."""
    return datetime.fromtimestamp(int(epoch_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- errors


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


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def _not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(group, plural)} "{name}" not found',
        _details(name, group, plural),
    )


def _conflict(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f"Operation cannot be fulfilled on {_qualified(group, plural)} "
        f'"{name}": {CONFLICT_MESSAGE}',
        _details(name, group, plural),
    )


def _invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid. ``causes`` holds (field path, cause reason, cause message)."""
    head = f"{kind}.{group}" if group else kind
    text = ", ".join(f"{f}: {m}" for f, _, m in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details = _details(name, group, kind)
    details["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(422, "Invalid", f'{head} "{name}" is invalid: {text}', details)


def _bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


# --------------------------------------------------------------------------- label selectors


class SelectorError(ValueError):
    """A label or field selector string does not parse."""


_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SPECIAL = set("!=(),<>")

Operator = Literal["exists", "!exists", "=", "!=", "in", "notin", "gt", "lt"]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement of a label selector: ``key``, an operator and its values."""

    key: str
    op: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement (``!=``/``notin`` match absence)."""
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        if self.op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        try:
            have = int(labels[self.key])
        except ValueError:
            return False
        bound = int(self.values[0])
        return have > bound if self.op == "gt" else have < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether all requirements hold for ``labels``."""
        return all(r.matches(labels) for r in self.requirements)


def _lex(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in _SPECIAL:
            two = text[i : i + 2]
            if two in ("==", "!="):
                tokens.append(two)
                i += 2
            else:
                tokens.append(c)
                i += 1
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            tokens.append(text[i:j])
            i = j
    return tokens


def _check_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise SelectorError(f"invalid label key {key!r}: prefix must be a DNS subdomain")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        raise SelectorError(
            f"invalid label key {key!r}: name part must be 63 characters or less, consist of "
            "alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
        )
    return key


def _check_value(value: str) -> str:
    if value and (len(value) > 63 or not _QUALIFIED_NAME.match(value)):
        raise SelectorError(
            f"invalid label value {value!r}: must be 63 characters or less, consist of "
            "alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"
        )
    return value


def _is_ident(tok: str | None) -> bool:
    return tok is not None and tok not in _SPECIAL and tok not in ("==", "!=")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the Kubernetes label selector grammar.

    Accepts comma-separated requirements: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
    ``a notin (x)``, ``a`` (exists), ``!a`` (does not exist), ``a>1``, ``a<1``.

    Raises:
        SelectorError: the text does not parse, or a key/value is not a valid label.
    """
    toks = _lex(text)
    if not toks:
        return LabelSelector()
    pos = 0
    reqs: list[Requirement] = []

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    def take(what: str) -> str:
        nonlocal pos
        tok = peek()
        if tok is None:
            raise SelectorError(f"unable to parse requirement: found end of input, expected {what}")
        pos += 1
        return tok

    while True:
        tok = take("identifier or '!'")
        if tok == "!":
            key = take("identifier")
            if not _is_ident(key):
                raise SelectorError(
                    f"unable to parse requirement: found {key!r}, expected identifier"
                )
            reqs.append(Requirement(_check_key(key), "!exists"))
        elif _is_ident(tok):
            key = _check_key(tok)
            nxt = peek()
            if nxt is None or nxt == ",":
                reqs.append(Requirement(key, "exists"))
            elif nxt in ("=", "==", "!=", ">", "<"):
                pos += 1
                value = peek()
                if value is not None and _is_ident(value):
                    pos += 1
                else:
                    value = ""  # 'a=' selects the empty value, as upstream
                if nxt in (">", "<"):
                    if not re.fullmatch(r"-?[0-9]+", value):
                        raise SelectorError(
                            f"unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                            f"must be an integer, got {value!r}"
                        )
                    op: Operator = "gt" if nxt == ">" else "lt"
                else:
                    _check_value(value)
                    op = "!=" if nxt == "!=" else "="
                reqs.append(Requirement(key, op, (value,)))
            elif nxt in ("in", "notin"):
                pos += 1
                if take("'('") != "(":
                    raise SelectorError(
                        f"unable to parse requirement: found {toks[pos - 1]!r}, expected '('"
                    )
                values: list[str] = []
                expect_value = True
                while True:
                    t = take("')'")
                    if t == ")":
                        if values and expect_value:
                            values.append("")  # trailing comma selects "" as upstream
                        break
                    if t == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                        continue
                    if not expect_value or not _is_ident(t):
                        raise SelectorError(
                            f"unable to parse requirement: found {t!r}, expected ',' or ')'"
                        )
                    values.append(_check_value(t))
                    expect_value = False
                if not values:
                    raise SelectorError(
                        "unable to parse requirement: for 'in', 'notin' operators, values set "
                        "can't be empty"
                    )
                reqs.append(Requirement(key, "in" if nxt == "in" else "notin", tuple(values)))
            else:
                raise SelectorError(
                    f"unable to parse requirement: found {nxt!r}, expected one of "
                    "'=', '==', '!=', 'in', 'notin', ',', '>', '<'"
                )
        else:
            raise SelectorError(f"unable to parse requirement: found {tok!r}, expected identifier")
        sep = peek()
        if sep is None:
            return LabelSelector(tuple(reqs))
        if sep != ",":
            raise SelectorError(f"found {sep!r}, expected: ',' or end of string")
        pos += 1


def format_selector(match_labels: Mapping[str, str]) -> str:
    """``matchLabels`` as the API formats a selector: ``k=v`` sorted by key, comma-joined."""
    return ",".join(f"{k}={match_labels[k]}" for k in sorted(match_labels))


def _field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def _field_filter(text: str) -> Callable[[Mapping[str, Any]], bool]:
    """Parse a field selector (``a.b=x,c!=y``); see the module docstring for the subset."""
    terms: list[tuple[str, bool, str]] = []
    for raw in filter(None, (t.strip() for t in text.split(","))):
        m = re.fullmatch(r"([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*)", raw)
        if m is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
        terms.append((m.group(1), m.group(2) != "!=", m.group(3).strip()))
    return lambda obj: all((_field(obj, p) == v) == eq for p, eq, v in terms)


# --------------------------------------------------------------------------- store


@dataclass(frozen=True, slots=True)
class ScaleChange:
    """A change of a workload's ``spec.replicas``, as given to ``on_scale_change`` callbacks.

    ``source`` is ``"api"`` for a PUT/PATCH through the server and ``"external"`` for
    :meth:`KubeStore.external_scale` (another writer such as ``kubectl scale``).
    """

    group: str
    plural: str
    namespace: str
    name: str
    old_replicas: int
    new_replicas: int
    resource_version: str
    source: Literal["api", "external"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One HTTP request the server answered (``path`` without query; ``status`` is the answer)."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    status: int


@dataclass(slots=True)
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    remaining: int
    retry_after: int | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class _Kind:
    group: str
    version: str
    kind: str
    plural: str
    builtin: bool  # strategic merge + unconditional update allowed


@dataclass(slots=True)
class _Workload:
    kind: _Kind
    obj: JSON
    selector: LabelSelector = field(default_factory=LabelSelector)


ScaleCallback = Callable[[ScaleChange], None]


class KubeStore:
    """The objects of the simulated cluster and the Python API the fleet drives them with.

    Every mutation bumps the global ``resourceVersion``. All ``namespace``/``name``
    arguments are strings; replica counts are ints >= 0; times are epoch seconds from the
    injected ``now``.

    Args:
        now: clock returning epoch seconds; used for creationTimestamp and friends.
    """

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._rv = 0
        self._uids = itertools.count(1)
        self._kinds: dict[tuple[str, str], _Kind] = {}
        self._workloads: dict[tuple[str, str, str, str], _Workload] = {}
        self._pods: dict[tuple[str, str], JSON] = {}
        self._events: dict[tuple[str, str], JSON] = {}
        self._callbacks: list[ScaleCallback] = []
        self._faults: list[_Fault] = []
        self._names = itertools.count(1)
        self._object_kinds: dict[tuple[str, str], _Kind] = {}
        self._objects: dict[tuple[str, str, str, str], JSON] = {}
        self.register_kind("apps", "v1", "Deployment", "deployments", builtin=True)
        self.register_kind("apps", "v1", "StatefulSet", "statefulsets", builtin=True)
        self.register_kind("apps", "v1", "ReplicaSet", "replicasets", builtin=True)
        self.register_object_kind("coordination.k8s.io", "v1", "Lease", "leases", builtin=True)
        self.register_object_kind(
            "autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", builtin=True
        )

    # -- bookkeeping

    @property
    def resource_version(self) -> str:
        """The newest resourceVersion handed out."""
        return str(self._rv)

    def _bump(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _meta(self, namespace: str, name: str, labels: Mapping[str, str] | None) -> JSON:
        meta: JSON = {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.UUID(int=next(self._uids), version=4)),
            "resourceVersion": self._bump(),
            "creationTimestamp": rfc3339(self._now()),
        }
        if labels:
            meta["labels"] = dict(labels)
        return meta

    # -- kinds and workloads

    def register_kind(
        self, group: str, version: str, kind: str, plural: str, *, builtin: bool = False
    ) -> None:
        """Register a kind with a ``scale`` subresource, e.g.
        ``("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets")``.

        ``builtin`` kinds accept strategic merge patches and unconditional PUTs (as the
        apps kinds do); custom kinds behave like CRDs.
        """
        self._kinds[(group, plural)] = _Kind(group, version, kind, plural, builtin)

    def _kind(self, group: str, version: str, plural: str) -> _Kind | None:
        k = self._kinds.get((group, plural))
        return k if k is not None and k.version == version else None

    def add_workload(
        self,
        group: str,
        plural: str,
        namespace: str,
        name: str,
        *,
        replicas: int,
        labels: Mapping[str, str],
    ) -> JSON:
        """Create a workload of a registered kind selecting pods with ``labels``.

        ``labels`` become ``spec.selector.matchLabels`` and the pod template labels.
        Returns a copy of the stored object.

        Raises:
            KeyError: the kind is not registered. ValueError: it exists or replicas < 0.
        """
        kind = self._kinds[(group, plural)]
        key = (group, plural, namespace, name)
        if key in self._workloads:
            raise ValueError(f"{_qualified(group, plural)} {namespace}/{name} exists")
        if replicas < 0:
            raise ValueError("replicas must be >= 0")
        obj: JSON = {
            "apiVersion": f"{group}/{kind.version}" if group else kind.version,
            "kind": kind.kind,
            "metadata": {**self._meta(namespace, name, labels), "generation": 1},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": dict(labels)},
                "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai"}]},
                },
            },
            "status": {"observedGeneration": 1},
        }
        w = _Workload(kind, obj, parse_label_selector(format_selector(labels)))
        self._workloads[key] = w
        self._refresh_status(w, bump=False)
        return copy.deepcopy(obj)

    def add_deployment(
        self, namespace: str, name: str, replicas: int, labels: Mapping[str, str]
    ) -> JSON:
        """Create an apps/v1 Deployment (see :meth:`add_workload`)."""
        return self.add_workload(
            "apps", "deployments", namespace, name, replicas=replicas, labels=labels
        )

    def add_statefulset(
        self, namespace: str, name: str, replicas: int, labels: Mapping[str, str]
    ) -> JSON:
        """Create an apps/v1 StatefulSet (see :meth:`add_workload`)."""
        return self.add_workload(
            "apps", "statefulsets", namespace, name, replicas=replicas, labels=labels
        )

    def _workload(self, group: str, plural: str, namespace: str, name: str) -> _Workload:
        w = self._workloads.get((group, plural, namespace, name))
        if w is None:
            raise _not_found(group, plural, name)
        return w

    def get_workload(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> JSON:
        """A copy of the stored workload object.

        Raises:
            ApiError: 404 when it does not exist.
        """
        return copy.deepcopy(self._workload(group, plural, namespace, name).obj)

    def get_spec_replicas(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> int:
        """``spec.replicas`` of a workload (ApiError 404 when missing)."""
        return int(self._workload(group, plural, namespace, name).obj["spec"]["replicas"])

    def external_scale(
        self,
        namespace: str,
        name: str,
        replicas: int,
        *,
        group: str = "apps",
        plural: str = "deployments",
    ) -> str:
        """Another writer (``kubectl scale``) sets ``spec.replicas``. Returns the new RV.

        Always bumps the resourceVersion, so a client holding the old one conflicts.
        """
        w = self._workload(group, plural, namespace, name)
        old = int(w.obj["spec"]["replicas"])
        w.obj["spec"]["replicas"] = replicas
        rv = self._bump()
        w.obj["metadata"]["resourceVersion"] = rv
        w.obj["metadata"]["generation"] += 1
        w.obj["status"]["observedGeneration"] = w.obj["metadata"]["generation"]
        if old != replicas:
            self._notify(ScaleChange(group, plural, namespace, name, old, replicas, rv, "external"))
        return rv

    def delete_workload(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> None:
        """Delete a workload (its pods stay until deleted; ApiError 404 when missing)."""
        self._workload(group, plural, namespace, name)
        del self._workloads[(group, plural, namespace, name)]
        self._bump()

    def touch_workload(
        self, namespace: str, name: str, *, group: str = "apps", plural: str = "deployments"
    ) -> str:
        """Another writer updates the workload without touching replicas (an annotation).

        Returns the new resourceVersion.
        """
        w = self._workload(group, plural, namespace, name)
        rv = self._bump()
        w.obj["metadata"]["resourceVersion"] = rv
        annotations = w.obj["metadata"].setdefault("annotations", {})
        annotations["sim.vllm-scaler/touched"] = rv
        return rv

    def on_scale_change(self, callback: ScaleCallback) -> Callable[[], None]:
        """Call ``callback(change)`` whenever a workload's spec.replicas changes.

        Called synchronously inside the request handler, before the response is sent.
        Returns a function that unsubscribes.
        """
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback)

    def _notify(self, change: ScaleChange) -> None:
        for cb in list(self._callbacks):
            cb(change)

    def _refresh_status(self, w: _Workload, *, bump: bool = True) -> None:
        ns = w.obj["metadata"]["namespace"]
        active = [
            p
            for (pns, _), p in self._pods.items()
            if pns == ns
            and w.selector.matches(p["metadata"].get("labels", {}))
            and "deletionTimestamp" not in p["metadata"]
            and p["status"]["phase"] not in ("Succeeded", "Failed")
        ]
        ready = sum(1 for p in active if _pod_ready(p))
        status: JSON = {"observedGeneration": w.obj["metadata"]["generation"]}
        # int32 omitempty fields: zero values are left out, as the API serializes them.
        for k, v in (
            ("replicas", len(active)),
            ("readyReplicas", ready),
            ("availableReplicas", ready),
        ):
            if v:
                status[k] = v
        if status != w.obj["status"]:
            w.obj["status"] = status
            if bump:
                w.obj["metadata"]["resourceVersion"] = self._bump()

    def _refresh_namespace(self, namespace: str) -> None:
        for (_, _, ns, _), w in self._workloads.items():
            if ns == namespace:
                self._refresh_status(w)

    # -- scale subresource

    def _scale_of(self, w: _Workload) -> JSON:
        meta = w.obj["metadata"]
        spec: JSON = {}
        if w.obj["spec"]["replicas"]:
            spec["replicas"] = w.obj["spec"]["replicas"]  # omitempty: 0 is left out
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
                "creationTimestamp": meta["creationTimestamp"],
            },
            "spec": spec,
            "status": {
                "replicas": w.obj["status"].get("replicas", 0),
                "selector": format_selector(w.obj["spec"]["selector"]["matchLabels"]),
            },
        }

    def get_scale(self, group: str, version: str, plural: str, namespace: str, name: str) -> JSON:
        """The ``autoscaling/v1 Scale`` of a workload.

        Raises:
            ApiError: 404 for an unknown kind/version or workload.
        """
        if self._kind(group, version, plural) is None:
            raise ApiError.generic(404)
        return self._scale_of(self._workload(group, plural, namespace, name))

    def write_scale(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        new_scale: JSON,
        *,
        require_rv: bool,
        dry_run: bool = False,
    ) -> JSON:
        """Store ``spec.replicas`` of ``new_scale`` (an updated Scale object).

        ``require_rv``: an empty resourceVersion is 422 for custom kinds (PUT semantics);
        PATCH passes False because its result always carries one.

        Raises:
            ApiError: 404, 400 (name/type mismatch), 409 (resourceVersion), 422 (replicas).
        """
        kind = self._kind(group, version, plural)
        if kind is None:
            raise ApiError.generic(404)
        w = self._workload(group, plural, namespace, name)
        meta = new_scale.get("metadata") or {}
        if not isinstance(meta, dict):
            raise _bad_request("metadata must be an object")
        if meta.get("name", name) != name:
            raise _bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        if meta.get("namespace", namespace) != namespace:
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        rv = meta.get("resourceVersion") or ""
        if not isinstance(rv, str):
            raise _bad_request("metadata.resourceVersion must be a string")
        if rv == "" and require_rv and not kind.builtin:
            # Upstream names the resource (plural), not the kind, in this one error.
            raise _invalid(
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
        if rv and not rv.isdigit():
            raise _bad_request(f"invalid resource version: {rv!r}")
        if rv and rv != w.obj["metadata"]["resourceVersion"]:
            raise _conflict(group, plural, name)
        spec = new_scale.get("spec") or {}
        if not isinstance(spec, dict):
            raise _bad_request("spec must be an object")
        replicas = spec.get("replicas", 0)
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise _bad_request(
                f"unable to decode Scale: spec.replicas: expected int32, got {replicas!r}"
            )
        if replicas < 0:
            raise _invalid(
                "Scale",
                "autoscaling",
                name,
                [
                    (
                        "spec.replicas",
                        "FieldValueInvalid",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                    )
                ],
            )
        old = int(w.obj["spec"]["replicas"])
        if dry_run:
            preview = copy.deepcopy(w)
            preview.obj["spec"]["replicas"] = replicas
            return self._scale_of(preview)
        if replicas != old:  # a no-op write leaves the resourceVersion alone
            w.obj["spec"]["replicas"] = replicas
            w.obj["metadata"]["generation"] += 1
            w.obj["status"]["observedGeneration"] = w.obj["metadata"]["generation"]
            new_rv = self._bump()
            w.obj["metadata"]["resourceVersion"] = new_rv
            self._notify(ScaleChange(group, plural, namespace, name, old, replicas, new_rv, "api"))
        return self._scale_of(w)

    def scale_kind(self, group: str, version: str, plural: str) -> _Kind | None:
        """The registered kind at ``/apis/{group}/{version}/.../{plural}``, if any."""
        return self._kind(group, version, plural)

    # -- pods

    def add_pod(
        self,
        namespace: str,
        name: str,
        labels: Mapping[str, str],
        *,
        ready: bool = False,
        phase: str | None = None,
        created_at: float | None = None,
    ) -> JSON:
        """Create a pod. ``phase`` defaults to Running when ready, Pending otherwise.

        ``created_at`` (epoch seconds) backdates creationTimestamp. Returns a copy.

        Raises:
            ValueError: a pod with that name exists.
        """
        if (namespace, name) in self._pods:
            raise ValueError(f"pod {namespace}/{name} exists")
        meta = self._meta(namespace, name, labels)
        if created_at is not None:
            meta["creationTimestamp"] = rfc3339(created_at)
        pod: JSON = {
            "metadata": meta,
            "spec": {
                "containers": [{"name": "vllm", "image": "vllm/vllm-openai"}],
                "terminationGracePeriodSeconds": 30,
            },
            "status": {
                "phase": phase or ("Running" if ready else "Pending"),
                "conditions": [_ready_condition(ready, meta["creationTimestamp"])],
            },
        }
        self._pods[(namespace, name)] = pod
        self._refresh_namespace(namespace)
        return copy.deepcopy(pod)

    def _pod(self, namespace: str, name: str) -> JSON:
        pod = self._pods.get((namespace, name))
        if pod is None:
            raise _not_found("", "pods", name)
        return pod

    def get_pod(self, namespace: str, name: str) -> JSON:
        """A copy of a pod (ApiError 404 when missing)."""
        return copy.deepcopy(self._pod(namespace, name))

    def set_pod_ready(
        self, namespace: str, name: str, ready: bool = True, *, phase: str | None = None
    ) -> None:
        """Set the Ready condition (and phase: Running when ready unless given)."""
        pod = self._pod(namespace, name)
        pod["status"]["conditions"] = [_ready_condition(ready, rfc3339(self._now()))]
        if phase is not None:
            pod["status"]["phase"] = phase
        elif ready:
            pod["status"]["phase"] = "Running"
        pod["metadata"]["resourceVersion"] = self._bump()
        self._refresh_namespace(namespace)

    def mark_pod_terminating(
        self, namespace: str, name: str, *, grace_period_seconds: int = 30
    ) -> None:
        """Set deletionTimestamp (now + grace) and deletionGracePeriodSeconds, like a DELETE."""
        pod = self._pod(namespace, name)
        meta = pod["metadata"]
        if "deletionTimestamp" not in meta:
            meta["deletionTimestamp"] = rfc3339(self._now() + grace_period_seconds)
            meta["deletionGracePeriodSeconds"] = grace_period_seconds
            meta["resourceVersion"] = self._bump()
            self._refresh_namespace(namespace)

    def delete_pod(self, namespace: str, name: str) -> None:
        """Remove a pod for good (ApiError 404 when missing)."""
        self._pod(namespace, name)
        del self._pods[(namespace, name)]
        self._bump()
        self._refresh_namespace(namespace)

    def list_pods(self, namespace: str, selector: str = "") -> list[JSON]:
        """Copies of the pods of ``namespace`` matching a label selector, by name.

        Raises:
            SelectorError: the selector does not parse.
        """
        sel = parse_label_selector(selector)
        return [
            copy.deepcopy(p)
            for (ns, name), p in sorted(self._pods.items())
            if ns == namespace and sel.matches(p["metadata"].get("labels", {}))
        ]

    # -- events

    def create_event(self, namespace: str, body: Any, *, dry_run: bool = False) -> JSON:
        """Validate and store a core/v1 Event posted to ``namespace``.

        Raises:
            ApiError: 400 (not an Event, namespace mismatch), 422 (missing fields),
                409 (name exists).
        """
        if not isinstance(body, dict):
            raise _bad_request("the body of the request is not a JSON object")
        if body.get("kind", "Event") != "Event" or body.get("apiVersion", "v1") != "v1":
            raise _bad_request(
                f"expected kind Event apiVersion v1, got kind {body.get('kind')!r} "
                f"apiVersion {body.get('apiVersion')!r}"
            )
        meta = body.get("metadata") or {}
        if meta.get("namespace", namespace) != namespace:
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
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
            raise _invalid("Event", "", name or str(meta.get("generateName")), causes)
        if not name:
            name = f"{meta['generateName']}{next(self._names):05x}"
        if (namespace, name) in self._events:
            raise ApiError(
                409,
                "AlreadyExists",
                f'events "{name}" already exists',
                _details(name, "", "events"),
            )
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

    # -- workload annotations and pod patches

    def set_workload_annotations(
        self,
        namespace: str,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        group: str = "apps",
        plural: str = "deployments",
    ) -> str:
        """Another writer (``kubectl annotate``) sets or (with None) removes annotations.

        Returns the new resourceVersion.
        """
        w = self._workload(group, plural, namespace, name)
        current = w.obj["metadata"].setdefault("annotations", {})
        for k, v in annotations.items():
            if v is None:
                current.pop(k, None)
            else:
                current[k] = v
        if not current:
            del w.obj["metadata"]["annotations"]
        rv = self._bump()
        w.obj["metadata"]["resourceVersion"] = rv
        return rv

    def patch_pod(self, namespace: str, name: str, new_pod: JSON, *, dry_run: bool = False) -> JSON:
        """Store a patched pod (the result of applying a patch to :meth:`get_pod`).

        Only ``metadata.labels`` and ``metadata.annotations`` may change (the rest of a
        running pod is immutable for our purposes: 422, like upstream's "pod updates may not
        change fields other than ..."); label and annotation values must be strings (400,
        as the JSON decoder answers). ``controller.kubernetes.io/pod-deletion-cost`` must be
        an int32 (422).

        Raises:
            ApiError: 404, 400, 409 (resourceVersion precondition), 422.
        """
        pod = self._pod(namespace, name)
        meta = new_pod.get("metadata")
        if not isinstance(meta, dict):
            raise _bad_request("metadata must be an object")
        rv = meta.get("resourceVersion") or ""
        if rv and rv != pod["metadata"]["resourceVersion"]:
            raise _conflict("", "pods", name)
        if meta.get("name", name) != name:
            raise _bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        for f in ("labels", "annotations"):
            values = meta.get(f) or {}
            if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
                raise _bad_request(f"unable to decode Pod: metadata.{f}: expected a map of strings")
        cost = (meta.get("annotations") or {}).get(POD_DELETION_COST_ANNOTATION)
        if cost is not None and not _is_int32(cost):
            raise _invalid(
                "Pod",
                "",
                name,
                [
                    (
                        f"metadata.annotations[{POD_DELETION_COST_ANNOTATION}]",
                        "FieldValueInvalid",
                        f'Invalid value: "{cost}": must be a 32bit integer',
                    )
                ],
            )
        changed = [
            k
            for k in set(new_pod) | set(pod)
            if k not in ("metadata", "status", "kind", "apiVersion")
            and new_pod.get(k) != pod.get(k)
        ]
        fixed = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")
        changed += [f"metadata.{k}" for k in fixed if meta.get(k) != pod["metadata"].get(k)]
        if changed:
            raise _invalid(
                "Pod",
                "",
                name,
                [
                    (
                        sorted(changed)[0],
                        "Forbidden",
                        "Forbidden: pod updates may not change fields other than labels and "
                        "annotations (vllm-scaler stand-in)",
                    )
                ],
            )
        out = copy.deepcopy(pod)
        for f in ("labels", "annotations"):
            if meta.get(f):
                out["metadata"][f] = dict(meta[f])
            else:
                out["metadata"].pop(f, None)
        if dry_run or out == pod:
            return out
        out["metadata"]["resourceVersion"] = self._bump()
        self._pods[(namespace, name)] = out
        return copy.deepcopy(out)

    # -- plain objects: Leases, HorizontalPodAutoscalers, ScaledObjects

    def register_object_kind(
        self, group: str, version: str, kind: str, plural: str, *, builtin: bool = False
    ) -> None:
        """Serve namespaced objects of a kind without a scale subresource (get, list, create,
        update, patch). ``builtin`` kinds accept strategic merge patches and unconditional
        updates; custom kinds (CRDs) do not. Unregistered kinds answer 404, as a cluster
        without the CRD does.
        """
        self._object_kinds[(group, plural)] = _Kind(group, version, kind, plural, builtin)

    def object_kind(self, group: str, version: str, plural: str) -> _Kind | None:
        """The registered plain kind at ``/apis/{group}/{version}/.../{plural}``, if any."""
        k = self._object_kinds.get((group, plural))
        return k if k is not None and k.version == version else None

    def _plain_kind(self, group: str, version: str, plural: str) -> _Kind:
        k = self.object_kind(group, version, plural)
        if k is None:
            raise ApiError.generic(404)
        return k

    def get_object(self, group: str, plural: str, namespace: str, name: str) -> JSON:
        """A copy of a stored plain object (ApiError 404 when missing)."""
        obj = self._objects.get((group, plural, namespace, name))
        if obj is None:
            raise _not_found(group, plural, name)
        return copy.deepcopy(obj)

    def list_objects(self, group: str, plural: str, namespace: str) -> list[JSON]:
        """Copies of the plain objects of one kind in ``namespace``, by name."""
        return [
            copy.deepcopy(o)
            for (g, p, ns, _), o in sorted(self._objects.items())
            if (g, p, ns) == (group, plural, namespace)
        ]

    def delete_object(self, group: str, plural: str, namespace: str, name: str) -> None:
        """Remove a plain object (Python API only; ApiError 404 when missing)."""
        self.get_object(group, plural, namespace, name)
        del self._objects[(group, plural, namespace, name)]
        self._bump()

    def _check_object(self, kind: _Kind, namespace: str, name: str, body: Any) -> JSON:
        if not isinstance(body, dict):
            raise _bad_request("the body of the request is not a JSON object")
        api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
        if (
            body.get("kind", kind.kind) != kind.kind
            or body.get("apiVersion", api_version) != api_version
        ):
            raise _bad_request(
                f"expected kind {kind.kind} apiVersion {api_version}, got kind "
                f"{body.get('kind')!r} apiVersion {body.get('apiVersion')!r}"
            )
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            raise _bad_request("metadata must be an object")
        if meta.get("namespace", namespace) != namespace:
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(
            isinstance(v, str) for v in annotations.values()
        ):
            raise _bad_request("unable to decode: metadata.annotations: expected a map of strings")
        causes: list[tuple[str, str, str]] = []
        if not name or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            causes.append(
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                    "lower case alphanumeric characters, '-' or '.'",
                )
            )
        size = sum(len(k) + len(v) for k, v in annotations.items())
        if size > 256 * 1024:
            causes.append(
                (
                    "metadata.annotations",
                    "FieldValueTooLong",
                    f"Too long: may not be more than 262144 bytes (got {size})",
                )
            )
        if kind.kind == "Lease":
            causes += _lease_causes(body.get("spec"))
        if causes:
            raise _invalid(kind.kind, kind.group, name, causes)
        return body

    def create_object(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
    ) -> JSON:
        """Create a plain object (POST).

        Raises:
            ApiError: 404 (kind), 400 (shape, namespace), 409 ``AlreadyExists``, 422.
        """
        kind = self._plain_kind(group, version, plural)
        name = (
            str(((body or {}).get("metadata") or {}).get("name") or "")
            if isinstance(body, dict)
            else ""
        )
        obj = self._check_object(kind, namespace, name, body)
        if (group, plural, namespace, name) in self._objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{_qualified(group, plural)} "{name}" already exists',
                _details(name, group, plural),
            )
        out = copy.deepcopy(obj)
        out["kind"] = kind.kind
        out["apiVersion"] = f"{group}/{version}" if group else version
        meta = out["metadata"]
        meta.pop("resourceVersion", None)
        created = self._meta(namespace, name, meta.get("labels"))
        out["metadata"] = {**meta, **created}
        if not dry_run:
            self._objects[(group, plural, namespace, name)] = out
        return copy.deepcopy(out)

    def update_object(
        self,
        group: str,
        version: str,
        plural: str,
        namespace: str,
        name: str,
        body: Any,
        *,
        require_rv: bool,
        dry_run: bool = False,
    ) -> JSON:
        """Replace a plain object (PUT; PATCH passes the patched object, ``require_rv`` False).

        A non-empty ``metadata.resourceVersion`` that differs is 409; an empty one is 422
        for custom kinds when ``require_rv`` (CRD strategy), accepted for built-in kinds.
        An update that changes nothing keeps the resourceVersion.

        Raises:
            ApiError: 404, 400, 409, 422.
        """
        kind = self._plain_kind(group, version, plural)
        old = self._objects.get((group, plural, namespace, name))
        if old is None:
            raise _not_found(group, plural, name)
        meta = (body or {}).get("metadata") if isinstance(body, dict) else None
        if isinstance(meta, dict) and meta.get("name", name) != name:
            raise _bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})"
            )
        obj = self._check_object(kind, namespace, name, body)
        rv = obj["metadata"].get("resourceVersion") or ""
        if not isinstance(rv, str) or (rv and not rv.isdigit()):
            raise _bad_request(f"invalid resource version: {rv!r}")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise _conflict(group, plural, name)
        if not rv and require_rv and not kind.builtin:
            raise _invalid(
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
        out = copy.deepcopy(obj)
        out["kind"] = kind.kind
        out["apiVersion"] = old["apiVersion"]
        keep = ("name", "namespace", "uid", "creationTimestamp", "resourceVersion")
        out["metadata"] = {
            **{k: v for k, v in out["metadata"].items() if k not in keep},
            **{k: old["metadata"][k] for k in keep},
        }
        if out == old or dry_run:
            return out
        out["metadata"]["resourceVersion"] = self._bump()
        self._objects[(group, plural, namespace, name)] = out
        return copy.deepcopy(out)

    def add_hpa(
        self,
        namespace: str,
        name: str,
        *,
        target_kind: str = "Deployment",
        target_name: str,
        target_api_version: str | None = "apps/v1",
        min_replicas: int = 1,
        max_replicas: int = 10,
    ) -> JSON:
        """Create an ``autoscaling/v2`` HorizontalPodAutoscaler targeting a workload."""
        ref: JSON = {"kind": target_kind, "name": target_name}
        if target_api_version is not None:
            ref["apiVersion"] = target_api_version
        return self.create_object(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "scaleTargetRef": ref,
                    "minReplicas": min_replicas,
                    "maxReplicas": max_replicas,
                },
            },
        )

    def add_scaled_object(
        self,
        namespace: str,
        name: str,
        *,
        target_name: str,
        target_kind: str | None = None,
        target_api_version: str | None = None,
    ) -> JSON:
        """Create a KEDA ``keda.sh/v1alpha1`` ScaledObject (registering the CRD if needed).

        ``target_kind``/``target_api_version`` None leave them out of ``scaleTargetRef``
        (KEDA's defaults: Deployment, apps/v1).
        """
        if self.object_kind("keda.sh", "v1alpha1", "scaledobjects") is None:
            self.register_object_kind("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects")
        ref: JSON = {"name": target_name}
        if target_kind is not None:
            ref["kind"] = target_kind
        if target_api_version is not None:
            ref["apiVersion"] = target_api_version
        return self.create_object(
            "keda.sh",
            "v1alpha1",
            "scaledobjects",
            namespace,
            {"metadata": {"name": name}, "spec": {"scaleTargetRef": ref, "triggers": []}},
        )

    # -- fault injection

    def inject_fault(
        self,
        method: str,
        path_regex: str,
        status: int,
        *,
        times: int = 1,
        retry_after: int | None = None,
        body_reason: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` (``"*"`` for any) and
        ``path_regex`` (``re.search`` on the URL path) with ``status`` and a Status body.

        ``retry_after`` (seconds) sets the ``Retry-After`` header and
        ``details.retryAfterSeconds``; ``body_reason`` overrides ``Status.reason``.
        Faults apply after authentication and before routing.
        """
        if times < 1:
            raise ValueError("times must be >= 1")
        self._faults.append(
            _Fault(method.upper(), re.compile(path_regex), status, times, retry_after, body_reason)
        )

    def clear_faults(self) -> None:
        """Drop every pending fault."""
        self._faults.clear()

    def take_fault(self, method: str, path: str) -> ApiError | None:
        """Consume the first pending fault matching this request, as an ApiError."""
        for f in self._faults:
            if f.method in ("*", method.upper()) and f.pattern.search(path):
                f.remaining -= 1
                if f.remaining == 0:
                    self._faults.remove(f)
                err = ApiError.generic(f.status, f.reason)
                if f.retry_after is not None:
                    err.headers["Retry-After"] = str(f.retry_after)
                    err.details = {"retryAfterSeconds": f.retry_after}
                return err
        return None


POD_DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")


def _is_int32(value: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", value) is not None and -(2**31) <= int(value) < 2**31


def _lease_causes(spec: Any) -> list[tuple[str, str, str]]:
    """Validation of a coordination.k8s.io/v1 Lease spec (MicroTime format is a decode error).

    Raises:
        ApiError: 400 when a time is not a MicroTime (``2006-01-02T15:04:05.000000Z``).
    """
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise _bad_request("unable to decode Lease: spec must be an object")
    causes: list[tuple[str, str, str]] = []
    for f in ("acquireTime", "renewTime"):
        v = spec.get(f)
        if v is not None and (not isinstance(v, str) or not _MICRO_TIME.match(v)):
            raise _bad_request(
                f'unable to decode Lease: spec.{f}: parsing time "{v}" as '
                '"2006-01-02T15:04:05.000000Z07:00": cannot parse'
            )
    holder = spec.get("holderIdentity")
    if holder is not None and not isinstance(holder, str):
        raise _bad_request("unable to decode Lease: spec.holderIdentity: expected a string")
    for f, minimum in (("leaseDurationSeconds", 1), ("leaseTransitions", 0)):
        v = spec.get(f)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise _bad_request(f"unable to decode Lease: spec.{f}: expected int32, got {v!r}")
        if v < minimum:
            causes.append(
                (
                    f"spec.{f}",
                    "FieldValueInvalid",
                    f"Invalid value: {v}: must be greater than "
                    + ("0" if minimum == 1 else "or equal to 0"),
                )
            )
    return causes


def _ready_condition(ready: bool, when: str) -> JSON:
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "lastProbeTime": None,
        "lastTransitionTime": when,
    }


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod["status"].get("conditions", [])
    )


# --------------------------------------------------------------------------- patching


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (null deletes)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge_patch(out.get(k), v)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, test (enough for objects; lists by index).

    Raises:
        ValueError: a malformed operation list (400). LookupError: an operation failed (422).
    """
    if not isinstance(ops, list):
        raise ValueError("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ValueError(f"invalid json patch operation {op!r}")
        parts = _pointer(op["path"])
        if not parts:
            raise LookupError("operations on the document root are not supported")
        parent: Any = doc
        for p in parts[:-1]:
            try:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
            except (KeyError, IndexError, ValueError, TypeError):
                raise LookupError(f"doc is missing path: {op['path']!r}") from None
        last = parts[-1]
        kind = op["op"]
        if not isinstance(parent, dict):
            raise LookupError(f"unsupported path for {kind}: {op['path']!r}")
        if kind == "test":
            if parent.get(last) != op.get("value"):
                raise LookupError(f"testing value {op['path']} failed: test failed")
        elif kind in ("add", "replace"):
            if "value" not in op:
                raise ValueError(f"{kind} operation has no value")
            if kind == "replace" and last not in parent:
                raise LookupError(
                    f"replace operation does not apply: doc is missing key: {op['path']}"
                )
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if last not in parent:
                raise LookupError(
                    f"remove operation does not apply: doc is missing key: {op['path']}"
                )
            del parent[last]
        else:
            raise ValueError(f"unsupported json patch operation {kind!r}")
    return doc


# --------------------------------------------------------------------------- server


def _json(body: JSON, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


def _media_type(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";")[0].strip().lower()


def _dry_run(request: web.Request) -> bool:
    value = request.query.get("dryRun")
    if value is None:
        return False
    if value != "All":
        raise _bad_request(f"Invalid dryRun value {value!r}: only 'All' is supported")
    return True


class KubeApiServer:
    """Serves a :class:`KubeStore` over HTTP on loopback with bearer-token auth.

    Use as ``async with KubeApiServer(store, token="t") as server: server.url``. Every
    answered request is appended to :attr:`requests` (in order).

    Args:
        store: the objects to serve.
        token: the only accepted bearer token.
        host: bind address. port: 0 picks a free port (see :attr:`url` after start).
    """

    def __init__(
        self, store: KubeStore, *, token: str, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.store = store
        self.token = token
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._runner: web.AppRunner | None = None
        self._app = web.Application(middlewares=[self._middleware])
        r = self._app.router
        r.add_route("*", "/version", self._version)
        r.add_route("*", "/version/", self._version)  # the generated VersionApi uses this
        r.add_route("*", "/api/v1/namespaces/{ns}/pods", self._pods)
        r.add_route("*", "/api/v1/namespaces/{ns}/pods/{name}", self._pod)
        r.add_route("*", "/api/v1/namespaces/{ns}/events", self._events)
        r.add_route("*", "/apis/{group}/{version}/namespaces/{ns}/{plural}", self._collection)
        r.add_route("*", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}", self._object)
        r.add_route(
            "*", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/scale", self._scale
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (valid after :meth:`start`)."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> str:
        """Bind and serve; returns :attr:`url`. Restarting reuses the first port."""
        runner = web.AppRunner(self._app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.url

    async def stop(self) -> None:
        """Stop serving and close connections (clients then see connection refused)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> KubeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def methods(self) -> list[str]:
        """The HTTP methods of :attr:`requests`, in order."""
        return [r.method for r in self.requests]

    # -- plumbing

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                raise ApiError.generic(401)
            fault = self.store.take_fault(request.method, request.path)
            if fault is not None:
                raise fault
            response = await handler(request)
        except ApiError as err:
            response = _json(err.status_body(), err.code, err.headers)
        except SelectorError as err:
            response = _json(_bad_request(str(err)).status_body(), 400)
        except web.HTTPNotFound:
            response = _json(ApiError.generic(404).status_body(), 404)
        except web.HTTPMethodNotAllowed:
            response = _json(ApiError.generic(405).status_body(), 405)
        self.requests.append(
            RecordedRequest(
                request.method,
                request.path,
                dict(request.query),
                request.headers.get("Content-Type"),
                response.status,
            )
        )
        return response

    @staticmethod
    def _allow(request: web.Request, *methods: str) -> None:
        if request.method not in methods:
            raise ApiError.generic(405)

    @staticmethod
    async def _body(request: web.Request, *, yaml_ok: bool = False) -> Any:
        raw = await request.read()
        try:
            if yaml_ok:
                return yaml.safe_load(raw.decode("utf-8"))
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as err:
            raise _bad_request(f"error decoding request body: {err}") from None

    # -- handlers

    async def _version(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET")
        return _json(
            {
                "major": "1",
                "minor": "31",
                "gitVersion": "v1.31.0-vllm-scaler-sim",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean",
                "buildDate": "2024-08-13T00:00:00Z",
                "goVersion": "go1.22.5",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        )

    def _list(self, kind: str, items: Iterable[JSON], request: web.Request) -> web.Response:
        if "fieldSelector" in request.query:
            keep = _field_filter(request.query["fieldSelector"])
            items = [i for i in items if keep(i)]
        return _json(
            {
                "kind": kind,
                "apiVersion": "v1",
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": list(items),  # list items carry no kind/apiVersion, as upstream
            }
        )

    async def _pods(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET")
        ns = request.match_info["ns"]
        pods = self.store.list_pods(ns, request.query.get("labelSelector", ""))
        return self._list("PodList", pods, request)

    async def _pod(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "PATCH")
        ns, name = request.match_info["ns"], request.match_info["name"]
        pod = self.store.get_pod(ns, name)
        if request.method == "PATCH":
            dry_run = _dry_run(request)
            new = await self._patched(request, pod, builtin=True)
            pod = self.store.patch_pod(ns, name, new, dry_run=dry_run)
        return _json({"kind": "Pod", "apiVersion": "v1", **pod})

    async def _patched(self, request: web.Request, current: JSON, *, builtin: bool) -> JSON:
        """``current`` with the request's merge, strategic merge (built-in kinds only; for
        maps it is a merge patch) or JSON patch applied (400/415/422 as upstream)."""
        accepted = [JSON_PATCH, MERGE_PATCH]
        if builtin:
            accepted.append(STRATEGIC_PATCH)
        media = _media_type(request)
        if media not in accepted:
            raise _unsupported(accepted)
        return _apply_patch(current, media, await self._body(request))

    async def _collection(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        group, version, plural, ns = m["group"], m["version"], m["plural"], m["ns"]
        kind = self.store.object_kind(group, version, plural)
        if kind is None:
            if self.store.scale_kind(group, version, plural) is not None:
                raise ApiError.generic(405)  # listing workloads is not served
            raise ApiError.generic(404)
        self._allow(request, "GET", "POST")
        if request.method == "GET":
            return self._list(
                f"{kind.kind}List", self.store.list_objects(group, plural, ns), request
            )
        if _media_type(request) != "application/json":
            raise _unsupported(["application/json", "application/yaml"])
        body = await self._body(request)
        created = self.store.create_object(
            group, version, plural, ns, body, dry_run=_dry_run(request)
        )
        return _json(created, 201)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "POST")
        ns = request.match_info["ns"]
        if request.method == "GET":
            return self._list("EventList", self.store.events(ns), request)
        if _media_type(request) != "application/json":
            raise _unsupported(["application/json", "application/yaml"])
        body = await self._body(request)
        return _json(self.store.create_event(ns, body, dry_run=_dry_run(request)), 201)

    async def _object(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        group, version, plural, ns, name = (
            m["group"],
            m["version"],
            m["plural"],
            m["ns"],
            m["name"],
        )
        plain = self.store.object_kind(group, version, plural)
        if plain is not None:
            self._allow(request, "GET", "PUT", "PATCH")
            current = self.store.get_object(group, plural, ns, name)
            if request.method == "GET":
                return _json(current)
            dry_run = _dry_run(request)
            if request.method == "PUT":
                if _media_type(request) != "application/json":
                    raise _unsupported(["application/json", "application/yaml"])
                body = await self._body(request)
                require_rv = True
            else:
                body = await self._patched(request, current, builtin=plain.builtin)
                require_rv = False
            return _json(
                self.store.update_object(
                    group, version, plural, ns, name, body, require_rv=require_rv, dry_run=dry_run
                )
            )
        self._allow(request, "GET")
        if self.store.scale_kind(m["group"], m["version"], m["plural"]) is None:
            raise ApiError.generic(404)
        return _json(
            self.store.get_workload(m["ns"], m["name"], group=m["group"], plural=m["plural"])
        )

    async def _scale(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "PUT", "PATCH")
        m = request.match_info
        group, version, plural, ns, name = (
            m["group"],
            m["version"],
            m["plural"],
            m["ns"],
            m["name"],
        )
        kind = self.store.scale_kind(group, version, plural)
        if kind is None:
            raise ApiError.generic(404)
        current = self.store.get_scale(group, version, plural, ns, name)
        if request.method == "GET":
            return _json(current)
        dry_run = _dry_run(request)
        media = _media_type(request)
        if request.method == "PUT":
            if media not in ("application/json", "application/yaml"):
                raise _unsupported(["application/json", "application/yaml"])
            body = await self._body(request, yaml_ok=media == "application/yaml")
            if not isinstance(body, dict):
                raise _bad_request("the body of the request is not an object")
            if body.get("kind", "Scale") != "Scale" or body.get("apiVersion", "autoscaling/v1") != (
                "autoscaling/v1"
            ):
                raise _bad_request(
                    f"expected kind Scale apiVersion autoscaling/v1, got kind "
                    f"{body.get('kind')!r} apiVersion {body.get('apiVersion')!r}"
                )
            new = body
            require_rv = True
        else:
            accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
            if kind.builtin:
                accepted.insert(2, STRATEGIC_PATCH)
            if media not in accepted:
                raise _unsupported(accepted)
            if media == APPLY_PATCH:
                if not request.query.get("fieldManager"):
                    raise _invalid(
                        "PatchOptions",
                        "meta.k8s.io",
                        "",
                        [
                            (
                                "fieldManager",
                                "FieldValueRequired",
                                "Required value: is required for apply patch",
                            )
                        ],
                    )
                patch = await self._body(request, yaml_ok=True)
            else:
                patch = await self._body(request)
            new = _apply_patch(current, media, patch)
            require_rv = False
        result = self.store.write_scale(
            group, version, plural, ns, name, new, require_rv=require_rv, dry_run=dry_run
        )
        return _json(result)


def _unsupported(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def _apply_patch(current: JSON, media: str, patch: Any) -> JSON:
    """``current`` with a JSON patch or a merge-style patch (merge, strategic merge on maps,
    apply) applied; 400 for a malformed patch, 422 for a JSON patch path that does not exist."""
    if media == JSON_PATCH:
        try:
            new = _json_patch(current, patch)
        except ValueError as err:
            raise _bad_request(str(err)) from None
        except LookupError as err:
            raise ApiError(422, "Invalid", str(err)) from None
    else:
        if not isinstance(patch, dict):
            raise _bad_request("the patch must be a JSON object")
        new = _merge_patch(current, patch)
    if not isinstance(new, dict):
        raise _bad_request("the patched object is not an object")
    return new


def write_kubeconfig(
    path: Path, *, server_url: str, token: str, namespace: str = "default"
) -> Path:
    """Write a kubeconfig with one cluster/user/context ``sim`` (bearer token auth).

    Loadable by ``kubernetes_asyncio.config.load_kube_config(config_file=...)``.
    Returns ``path``; the file is created with mode 0600 as kubectl does.
    """
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": server_url}}],
        "users": [{"name": "sim", "user": {"token": token}}],
        "contexts": [
            {"name": "sim", "context": {"cluster": "sim", "user": "sim", "namespace": namespace}}
        ],
        "current-context": "sim",
        "preferences": {},
    }
    path = Path(path)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)
    return path
