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

Where each part lives (one responsibility per module)::

    store.py        KubeStore: the API groups below assembled over one resourceVersion
    base.py         the clock, the resourceVersion counter, uids, ObjectMeta, registered kinds
    workloads.py    kinds with a scale subresource (apps/v1 and custom), status from pods
    scale.py        the autoscaling/v1 Scale subresource: get, PUT, PATCH
    pods.py         core/v1 Pods (labels and annotations PATCH)
    events.py       core/v1 Events
    objects.py      plain objects: kinds without a scale subresource, custom resources
    leases.py       coordination.k8s.io/v1 Lease validation
    autoscalers.py  autoscaling/v2 HorizontalPodAutoscalers and KEDA ScaledObjects
    faults.py       fault injection
    patches.py      PATCH content types and their semantics
    selectors.py    label and field selectors
    errors.py       ApiError and the v1 Status bodies
    server.py       KubeApiServer: the HTTP routes, auth and request log
    kubeconfig.py   write_kubeconfig
"""

from scaler.sim.kubeapi.base import owner_reference, rfc3339
from scaler.sim.kubeapi.errors import CONFLICT_MESSAGE, JSON, ApiError
from scaler.sim.kubeapi.kubeconfig import write_kubeconfig
from scaler.sim.kubeapi.patches import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH
from scaler.sim.kubeapi.pods import POD_DELETION_COST_ANNOTATION
from scaler.sim.kubeapi.selectors import (
    LabelSelector,
    SelectorError,
    format_selector,
    parse_label_selector,
)
from scaler.sim.kubeapi.server import KubeApiServer, RecordedRequest
from scaler.sim.kubeapi.store import KubeStore
from scaler.sim.kubeapi.workloads import ScaleChange

__all__ = [
    "APPLY_PATCH",
    "CONFLICT_MESSAGE",
    "JSON",
    "JSON_PATCH",
    "MERGE_PATCH",
    "POD_DELETION_COST_ANNOTATION",
    "STRATEGIC_PATCH",
    "ApiError",
    "KubeApiServer",
    "KubeStore",
    "LabelSelector",
    "RecordedRequest",
    "ScaleChange",
    "SelectorError",
    "format_selector",
    "owner_reference",
    "parse_label_selector",
    "rfc3339",
    "write_kubeconfig",
]
