"""What the controller observed of one target in one cycle (Kubernetes side + signals)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.config.vocabulary import SignalName
from scaler.core.seasonal import SeasonalForecast
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
        ready: live pods (no deletionTimestamp) whose Ready condition is True; when a
            replica is a group of pods (a LeaderWorkerSet's), every count is of groups.
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
        cached_prompt_tokens_per_second: ``rate(vllm:prefix_cache_hits_total[W])`` (older
            vLLM: ``vllm:gpu_prefix_cache_hits_total``), prompt tokens found in the prefix
            cache and not computed, tokens/s (None: not exported; every prompt token is then
            counted as computed).
        prefill_seconds_per_second: ``rate(vllm:request_prefill_time_seconds_sum[W])``, the
            requests' prefill phase (first scheduling to first token), seconds per second
            (None: not exported or not a finite number >= 0).
        decode_seconds_per_second: ``rate(vllm:request_decode_time_seconds_sum[W])``, the
            requests' decode phase (first to last token), seconds per second (None: as above).
    """

    requests_per_second: float
    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    waiting: float | None = None
    kv_cache_usage: float | None = None
    cached_prompt_tokens_per_second: float | None = None
    prefill_seconds_per_second: float | None = None
    decode_seconds_per_second: float | None = None

    @property
    def computed_prompt_tokens_per_second(self) -> float:
        """Prompt tokens/s the engine computed: all of them less the prefix-cache hits (never
        below 0: a hit counted in a window whose prompt was counted in the one before)."""
        hits = self.cached_prompt_tokens_per_second or 0.0
        return max(0.0, self.prompt_tokens_per_second - hits)


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
        seasonal: the target's last seasonal forecast (:mod:`scaler.core.seasonal`), fitted
            off the control loop; None when none was fitted.
    """

    replicas: ReplicaCounts
    signals: Mapping[SignalName, SignalReading] = field(default_factory=dict)
    throughput: ThroughputReading | None = None
    pods: tuple[PodInfo, ...] = ()
    seasonal: SeasonalForecast | None = None


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
        group: the replica the pod is part of, when a replica is a group of pods (a
            LeaderWorkerSet's group index); None: the pod is a replica of its own.
        serves: its series are the replica's demand (False: a worker of a group whose
            leader alone serves).
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
    group: str | None = None
    serves: bool = True

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
        pods: the target's pods: the ones the selector picks that the workload owns, or whose
            owner cannot be told (:attr:`foreign` are left out).
        group_size: pods per replica when a replica is a group of pods (a group with fewer
            is not Ready); None: as many as are listed.
        foreign: pods the selector picks that another workload owns (its ownerReferences
            lead elsewhere): ``(pod, owner)``, owner as ``Kind namespace/name``.
        unowned: pods of :attr:`pods` whose owner cannot be told (no controller reference,
            one that cannot be followed): ``(pod, why)``; they count for the target unless
            another target's selector picks them too.
        shared: such pods that another target's selector picks too: ``(pod, the other
            targets)``; left out of :attr:`pods` (neither target counts them, as the HPA's
            AmbiguousSelector).
    """

    namespace: str
    spec_replicas: int
    status_replicas: int
    selector: str
    resource_version: str
    pods: tuple[PodInfo, ...] = ()
    group_size: int | None = None
    foreign: tuple[tuple[str, str], ...] = ()
    unowned: tuple[tuple[str, str], ...] = ()
    shared: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def grouped(self) -> bool:
        """A replica is a group of pods."""
        return any(p.group is not None for p in self.pods)

    def groups(self) -> dict[str, list[PodInfo]]:
        """Group -> its pods (a pod without a group is a group of its own)."""
        out: dict[str, list[PodInfo]] = {}
        for p in self.pods:
            out.setdefault(p.group if p.group is not None else p.name, []).append(p)
        return out

    def _group_ready(self, pods: list[PodInfo]) -> bool:
        """Every pod of the group ready, live and not finished, and as many as a group holds."""
        whole = self.group_size is None or len(pods) >= self.group_size
        return whole and all(p.ready and not p.terminating and not p.finished for p in pods)

    @property
    def ready_pod_names(self) -> frozenset[str]:
        """Names of live (not terminating, not finished) ready pods that serve: the only pods
        whose series count. When a replica is a group of pods, only those of Ready groups."""
        if not self.grouped:
            return frozenset(
                p.name for p in self.pods if p.ready and not p.terminating and not p.finished
            )
        return frozenset(
            p.name
            for pods in self.groups().values()
            if self._group_ready(pods)
            for p in pods
            if p.serves
        )

    @property
    def live_pod_names(self) -> frozenset[str]:
        """Names of pods that are not terminating and have not finished."""
        return frozenset(p.name for p in self.pods if not p.terminating and not p.finished)

    def counts(self, model_load_timeout_seconds: float, *, removing: int = 0) -> ReplicaCounts:
        """Classify the pods into ready / starting / stuck / unschedulable / terminating /
        finished.

        Each replica is classified: a pod, or when a replica is a group of pods, the group.
        A replica is *terminating* (draining) when one of its pods is, and *finished* when
        all its pods are in a terminal phase, whatever their conditions say. It is *ready*
        when all its pods are ready, none has finished, and a group has :attr:`group_size`
        of them. A replica not ready with a pod that has no node is *unschedulable* while
        its newest such pod was created less than the model load timeout ago; any other
        counts as *starting* while its newest current start (:attr:`PodInfo.start_seconds`:
        scheduling or a container restart, not the pod's creation; a worker recreated starts
        its group again) is younger than the timeout. Either is *stuck* after that.
        ``removing`` is passed through (the pods do not tell it: only the controller knows
        which pods it removes).
        """
        units = self.groups().values() if self.grouped else [[p] for p in self.pods]
        ready = starting = stuck = terminating = unschedulable = finished = 0
        for pods in units:
            live = [p for p in pods if not p.finished]
            waiting = [p for p in live if not p.ready and p.unschedulable is not None]
            if any(p.terminating for p in pods):
                terminating += 1
            elif not live:
                finished += 1
            elif self._group_ready(pods):
                ready += 1
            elif waiting:
                if min(p.age_seconds for p in waiting) < model_load_timeout_seconds:
                    unschedulable += 1
                else:
                    stuck += 1
            elif min(p.start_seconds for p in live) < model_load_timeout_seconds:
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
