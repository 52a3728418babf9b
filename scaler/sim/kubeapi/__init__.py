"""A strict in-memory stand-in for the part of the Kubernetes API that vllm-scaler uses.

:class:`KubeStore` holds the objects and is driven from Python by the simulated fleet;
:class:`KubeApiServer` serves it over real HTTP (aiohttp.web on loopback) so the real
kubernetes-asyncio client runs against it; :func:`write_kubeconfig` writes a kubeconfig
that points that client at the server.

It is held to kube-apiserver 1.37.2 by the contract suite (``tests/cluster/contract``): the
same requests, sent to both, get the same status, ``reason`` and, where the controller reads
it, the same body. Every call the controller makes is in it.

Served routes (anything else under ``/apis/<group>`` of a group not served here is the
router's plain-text ``404 page not found``, as for a kind whose CRD is not installed; a known
path with another verb is 405)::

    GET                /version, /version/, /healthz, /readyz, /livez   (public)
    GET                /api/v1/namespaces/{ns}/pods            labelSelector, fieldSelector
    GET, PATCH, DELETE /api/v1/namespaces/{ns}/pods/{name}      labels and annotations only
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
- until then its paths are the plain 404, as on a cluster without KEDA.

As kube-apiserver answers (the contract suite checks each):

* Authentication: the one bearer token; a token not ours is 401. No token is
  ``system:anonymous``: the public paths answer, anything else is 403 ``Forbidden`` in
  RBAC's words (``pods is forbidden: User "system:anonymous" cannot list resource "pods"
  in API group "" in the namespace "llm"``).
* Errors are ``v1 Status`` bodies with the real ``reason``/``message``/``details`` shapes:
  ``NotFound``, ``Conflict`` (optimistic-lock message), ``AlreadyExists``, ``Invalid``
  (with ``details.causes``), ``BadRequest``, ``UnsupportedMediaType``, ``MethodNotAllowed``,
  ``Unauthorized``, ``Forbidden``, ``TooManyRequests`` (``Retry-After`` header and
  ``details.retryAfterSeconds``); a ``resourceVersion`` that is no number is a 500 without
  a reason (the storage's ``strconv.ParseUint`` error).
* Write options: ``dryRun`` other than ``All`` and a ``fieldManager`` over 128 bytes are
  422 ``PatchOptions``/``CreateOptions``/``UpdateOptions`` ``Invalid``; ``dryRun=All``
  validates and answers without storing anything.
* ``resourceVersion`` is one global counter (strings of integers); a write that changes
  nothing does not bump it (like the etcd3 store), and ``generation`` moves only with spec.
* ``autoscaling/v1 Scale``: ``spec.replicas`` is omitted when 0 (``omitempty``), the
  scale's uid / resourceVersion / creationTimestamp are the workload's, and
  ``status.selector`` is the workload selector formatted like ``metav1.FormatLabelSelector``
  (requirements sorted by key, e.g. ``app=vllm,role=server``), or left out for a CRD
  without ``labelSelectorPath`` and while the status field it names is unset. A negative
  replica count is the Scale's 422 for a built-in kind and the CRD's (``.spec.replicas:
  should be a non-negative integer``) for a custom one.
* PATCH: a ``metadata.resourceVersion`` inside the patch is a precondition (409 when it
  differs); without one the patch is unconditional. Content types: merge and JSON patch
  for every kind, strategic merge only for built-in kinds (custom resources answer 415
  listing what they accept); a content type that is no patch type is ``415: Unsupported
  Media Type``. A patched object that does not decode (``replicas: "two"``, a label that
  is a number) is 422 with the cause ``patch``.
* PUT: a ``resourceVersion`` that differs is 409. An *empty* one is an unconditional
  update for a scale subresource (every kind) and for the kinds whose strategy allows it
  (HPAs); a Lease or a custom object answers 422 ``metadata.resourceVersion: ... must be
  specified for an update``. A PUT of a missing Lease creates it (201). A Scale PUT body
  without ``spec.replicas`` means 0 replicas.
* Plain objects: POST of an existing name is 409 ``AlreadyExists``; Lease times must be
  MicroTime (``2006-01-02T15:04:05.000000Z``, else 400 as the decoder answers),
  ``leaseDurationSeconds`` > 0 and ``leaseTransitions`` >= 0 (422). Annotations are a map
  of strings of at most 256 KiB in total (422).
* Events: core/v1's legacy validation: ``involvedObject.namespace`` must be the Event's
  namespace (or both empty or ``default``); with an ``eventTime``, ``action``, ``reason``,
  ``reportingComponent`` and ``reportingInstance`` are required too; nothing else is (an
  Event without ``message`` or ``reason`` is created). ``generateName`` gets 5 characters
  of the server's alphabet.
* Pods: a PATCH (merge, strategic merge, JSON patch) may change ``metadata.labels`` and
  ``metadata.annotations`` only (422 otherwise); ``controller.kubernetes.io/pod-deletion-cost``
  must be a canonical int32 (``-007`` passes, ``+5``, ``007`` and ``2147483648`` do not:
  422). A DELETE sets the deletionTimestamp after the pod's grace period (404 when missing).
* ``fieldSelector``: ``=``, ``==``, ``!=`` on the fields each kind selects on (pods:
  ``metadata.name``, ``status.phase``, ``spec.nodeName``...; events: ``involvedObject.*``,
  ``reason``, ``type``, ``source``...; other kinds: ``metadata.name`` and
  ``metadata.namespace``); any other field is 400 ``field label not supported: <field>``.
* Workload status is computed from the pods each workload owns: ``status.replicas`` = the
  active pods (not terminating, phase not Succeeded/Failed) whose controller
  ``ownerReferences`` lead to it (directly or through a ReplicaSet it owns) or that have no
  controller and match its selector (it would adopt them); ``readyReplicas`` = those whose
  Ready condition is True. When a pod change alters a workload's status the workload gets a
  new resourceVersion, as it would when the real workload controller writes status; so a
  client that read the scale before a pod became ready gets a 409 on a conditional write.

Where it differs (on purpose; what needs the real behaviour runs in the cluster tier):

* Only the verbs above: creating or deleting workloads, creating pods, listing workloads
  (405) is done through the Python API of :class:`KubeStore`, which plays the controllers.
  Namespaces are not objects: any namespace exists.
* The workload status is computed at once; a real controller writes it in its own time.
* No RBAC: 403 only for anonymous requests and by fault injection.
* Server-side apply (``application/apply-patch+yaml``) is not served (415 saying so): the
  stand-in keeps no managed fields, so field ownership and apply conflicts are checked on
  the real server (``tests/cluster/test_field_ownership.py``).
* Events are never aggregated or expired.
* No watch, no pagination (``limit``/``continue`` ignored), no protobuf, JSON only;
  ``application/yaml`` is accepted for Scale PUT bodies but answers are always JSON.

Where each part lives (one responsibility per module)::

    store.py        KubeStore: the API groups below assembled over one resourceVersion
    base.py         the clock, the resourceVersion counter, uids, ObjectMeta, registered kinds
    workloads.py    kinds with a scale subresource (apps/v1 and custom), status from pods
    scale.py        the autoscaling/v1 Scale subresource: get, PUT, PATCH
    pods.py         core/v1 Pods (labels and annotations PATCH, DELETE)
    events.py       core/v1 Events
    objects.py      plain objects: kinds without a scale subresource, custom resources
    leases.py       coordination.k8s.io/v1 Lease validation
    autoscalers.py  autoscaling/v2 HorizontalPodAutoscalers and KEDA ScaledObjects
    faults.py       fault injection
    patches.py      PATCH content types and their semantics
    selectors.py    label and field selectors
    requests.py     what a request asks for (the words of an RBAC refusal)
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
