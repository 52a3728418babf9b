"""What the controller observed of one target in one cycle (Kubernetes side + signals)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalReading, SignalStatus

#: Pod phases after which a pod never runs again (``status.phase``).
TERMINAL_PHASES = frozenset({"Failed", "Succeeded"})


@dataclass(frozen=True, slots=True)
class ReplicaCounts:
    """Replica counts of one target, read from its ``scale`` subresource and its pods.

    Attributes:
        current: ``spec.replicas`` of the scale subresource: the replicas asked for. This,
            never a count of Prometheus series, is the current replica count.
        status: ``status.replicas`` of the scale subresource.
        ready: live pods (no deletionTimestamp) whose Ready condition is True.
        starting: live pods not ready whose current start (scheduling, or the restart of a
            container) is younger than the model load timeout: capacity already asked for
            that is still loading its model.
        stuck: live pods not ready whose current start is older than the model load timeout
            (an image that does not pull, a model that does not load), or that have waited
            for a node longer than it (a GPU node pool at its limit); reported, and never a
            reason to add more replicas.
        terminating: pods with a deletionTimestamp (draining in-flight requests).
        removing: live pods that this controller's own scale-down removes and that have no
            deletionTimestamp yet (the workload controller has not got to them). Other pods
            beyond ``current`` (a rollout's surge or canary) are not removing.
        unschedulable: live pods the scheduler has not placed (``PodScheduled`` False: no
            node with a free GPU yet, a node still being provisioned, a scheduling gate) for
            less than the model load timeout, after which they are stuck. Asked for, so no
            replicas are added for them; not loading yet, so they never hold a scale-down
            (the ReplicaSet removes unscheduled pods first) and their wait is not model load
            time.
        finished: pods in a terminal phase (``Failed``, ``Succeeded``: evicted for node
            pressure, a container that exited): no longer replicas; the ReplicaSet has
            replaced them (HPA and ReplicaSet ignore them too). Reported only.
        sleeping: ready pods whose vLLM engine is in sleep mode (its owner, an RL trainer or
            a model swapper, parked it on purpose): counted in ``ready``, not ``serving``;
            since spec.replicas counts them, no replicas are added for them.
    """

    current: int
    status: int
    ready: int
    starting: int = 0
    stuck: int = 0
    terminating: int = 0
    removing: int = 0
    unschedulable: int = 0
    finished: int = 0
    sleeping: int = 0

    @property
    def live(self) -> int:
        """Pods that exist, are not terminating and have not finished."""
        return self.ready + self.starting + self.stuck + self.unschedulable

    @property
    def serving(self) -> int:
        """The ready pods up to ``current``: what a rule proportional to the replicas that
        serve (TTFT's) scales. Ready pods beyond ``spec.replicas`` (a blue-green preview, an
        old ReplicaSet kept for a scale-down delay, a surge) are not the workload's size:
        some get no traffic at all, and doubling them would double a fleet that is not
        there). Pods in vLLM's sleep mode serve nothing and are left out first."""
        return min(max(0, self.ready - self.sleeping), self.current)


@dataclass(frozen=True, slots=True)
class PodLoad:
    """One ready pod's throughput and queue this cycle.

    Attributes:
        requests_per_second: ``rate(vllm:request_success_total[W])``, finished requests/s.
        prompt_tokens_per_second: ``rate(vllm:prompt_tokens_total[W])``, tokens/s.
        generation_tokens_per_second: ``rate(vllm:generation_tokens_total[W])``, tokens/s.
        waiting: ``vllm:num_requests_waiting`` of the pod (None: unknown).
        kv_cache_usage: KV-cache usage of the pod, a 0-1 ratio (None: unknown).
    """

    requests_per_second: float
    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    waiting: float | None = None
    kv_cache_usage: float | None = None


@dataclass(frozen=True, slots=True)
class ThroughputReading:
    """A target's throughput this cycle, as the source read it.

    Attributes:
        status: ``ok`` when every ready pod has its rates, ``partial`` when some lack them
            (the sum is then a lower bound: usable to scale up only), or the fault that made
            the reading unusable (``empty``, ``transport``, ...; see
            :class:`~scaler.core.signals.SignalStatus`).
        pods: ready pod -> its :class:`PodLoad`, for the pods with usable rates (stalled pods,
            whose numbers serve nobody, are left out by the source).
        detail: a short explanation of a status other than ``ok``.
    """

    status: SignalStatus
    pods: Mapping[str, PodLoad] = field(default_factory=dict)
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything the decision core needs to know about one target this cycle.

    Attributes:
        replicas: the replica counts.
        signals: a reading for every *enabled* signal of the target's policy that has a query
            of its own (queue depth, KV cache, TTFT).
        throughput: the target's throughput per ready pod (None: not read); the capacity
            signal's input.
        pods: the target's pods (their Ready times teach the model load time and tell which
            pods' rates cover a whole window); empty when unknown.
    """

    replicas: ReplicaCounts
    signals: Mapping[SignalName, SignalReading] = field(default_factory=dict)
    throughput: ThroughputReading | None = None
    pods: tuple[PodInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class PodInfo:
    """One pod of a target as the Kubernetes API lists it.

    Attributes:
        name: pod name.
        ready: the Ready condition is True.
        terminating: ``metadata.deletionTimestamp`` is set.
        age_seconds: seconds since ``metadata.creationTimestamp``.
        phase: ``status.phase`` (Pending, Running, ...).
        deletion_cost: the ``controller.kubernetes.io/pod-deletion-cost`` annotation as
            written (None when absent); the ReplicaSet controller removes lower costs first.
        ready_seconds: seconds since the Ready condition's ``lastTransitionTime`` while the
            pod is ready; None when it is not ready or the time is unknown. A pod ready for
            less than a ``rate()`` window cannot have a rate yet (its series are that young).
        scheduled_seconds: seconds since the ``PodScheduled`` condition turned True (the pod
            got its node); None when unknown.
        unschedulable: why the scheduler has not placed the pod (``PodScheduled`` False:
            ``reason: message``, e.g. ``Unschedulable: 0/4 nodes are available: 4 Insufficient
            nvidia.com/gpu``); None once scheduled or when unknown.
        restarted_seconds: seconds since a container of the pod last terminated (it was
            restarted: an OOM kill, a crash, a failed liveness probe); None when no container
            ever restarted.
    """

    name: str
    ready: bool
    terminating: bool
    age_seconds: float
    phase: str = "Running"
    deletion_cost: str | None = None
    ready_seconds: float | None = None
    scheduled_seconds: float | None = None
    unschedulable: str | None = None
    restarted_seconds: float | None = None

    @property
    def finished(self) -> bool:
        """The pod is in a terminal phase (``Failed``, ``Succeeded``): no longer a replica."""
        return self.phase in TERMINAL_PHASES

    @property
    def start_seconds(self) -> float:
        """Seconds since the pod's current start began: the latest of its creation, its
        scheduling and its last container restart. A pod that waited for a node starts
        loading when it gets one; a pod whose vLLM container restarted loads the model again
        from that restart, however old the pod is."""
        known = [s for s in (self.scheduled_seconds, self.restarted_seconds) if s is not None]
        return min([self.age_seconds, *known])


@dataclass(frozen=True, slots=True)
class WorkloadSnapshot:
    """The Kubernetes side of one target: its ``scale`` subresource and its pods.

    Attributes:
        namespace: the target's namespace.
        spec_replicas: ``spec.replicas`` of the scale subresource (current replicas).
        status_replicas: ``status.replicas`` of the scale subresource.
        selector: ``status.selector`` of the scale subresource (a label selector string).
        resource_version: ``metadata.resourceVersion`` of the scale subresource.
        pods: the pods the selector picks.
    """

    namespace: str
    spec_replicas: int
    status_replicas: int
    selector: str
    resource_version: str
    pods: tuple[PodInfo, ...] = ()

    @property
    def ready_pod_names(self) -> frozenset[str]:
        """Names of live (not terminating) ready pods: the only pods whose series count."""
        return frozenset(
            p.name for p in self.pods if p.ready and not p.terminating and not p.finished
        )

    @property
    def live_pod_names(self) -> frozenset[str]:
        """Names of pods that are not terminating and have not finished."""
        return frozenset(p.name for p in self.pods if not p.terminating and not p.finished)

    def counts(self, model_load_timeout_seconds: float, *, removing: int = 0) -> ReplicaCounts:
        """Classify the pods into ready / starting / stuck / unschedulable / terminating /
        finished.

        A pod in a terminal phase is *finished*, whatever its conditions say. A live pod
        that is not ready and has no node is *unschedulable* while it was created less than
        the model load timeout ago; one that has a node counts as *starting* while its
        current start (:attr:`PodInfo.start_seconds`: scheduling or a container restart, not
        the pod's creation) is younger than the timeout. Either is *stuck* after that.
        ``removing`` is passed through (the pods do not tell it: only the controller knows
        which pods it removes).
        """
        ready = starting = stuck = terminating = unschedulable = finished = 0
        for p in self.pods:
            if p.terminating:
                terminating += 1
            elif p.finished:
                finished += 1
            elif p.ready:
                ready += 1
            elif p.unschedulable is not None and p.age_seconds < model_load_timeout_seconds:
                unschedulable += 1
            elif p.unschedulable is None and p.start_seconds < model_load_timeout_seconds:
                starting += 1
            else:
                stuck += 1
        # Pods the workload controller has not created yet are starting too.
        starting += max(0, self.spec_replicas - (ready + starting + stuck + unschedulable))
        return ReplicaCounts(
            current=self.spec_replicas,
            status=self.status_replicas,
            ready=ready,
            starting=starting,
            stuck=stuck,
            terminating=terminating,
            removing=removing,
            unschedulable=unschedulable,
            finished=finished,
        )
