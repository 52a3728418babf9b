"""The fixed vocabulary of decision reasons, and of the limits that shape a change; and what a
phase of a decision returns (:class:`Phase`: its replicas, its limits, its :class:`Hold`).

Every decision carries exactly one :class:`Reason`, and every :class:`Limit` that changed the
recommended replicas into the desired ones. The values are stable: they appear in
logs, in the ``vllm_scaler_decisions_total{reason=...}`` counter, in Kubernetes Events and in
``recommend --output json``. Add to this list; never rename.

One word in the code for a replica asked for but not yet Ready: *starting*
(:attr:`~scaler.core.observation.ReplicaCounts.starting`). Two stable names keep the older
word: the value ``waiting_for_pending`` of :attr:`Reason.WAITING_FOR_STARTING` and the metric
``vllm_scaler_pending_replicas``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """Why a decision came out the way it did.

    Changes:
      - ``scale_up`` / ``scale_down``: signals asked for more / fewer replicas and nothing
        limited it.
      - ``step_limited``: the change was cut by the per-period step limit.
      - ``at_max`` / ``at_min``: the recommendation was clamped to max / min replicas
        (also when current replicas are outside the range and are brought back into it).

    Holds (desired == current):
      - ``within_tolerance``: the signal that asks for the most replicas has its ratio to
        its target inside the tolerance band (the others ask for no more).
      - ``demand_covered``: that signal is outside its tolerance band, but its proportional
        rule gives no more than the current replicas: below the band the demand rounds up
        to them (15 waiting on 2 replicas against 10 per replica: ratio 0.75, and
        ``ceil(15 / 10) = 2``); above it, TTFT's demand from the ready replicas is no more
        than the replicas asked for (some of them stuck).
      - ``stabilized``: the stabilization window held back a change the signals asked for.
      - ``waiting_for_pending`` (:attr:`WAITING_FOR_STARTING`): replicas still starting
        (loading their model) already cover the demand, or a scale-down waits until they
        are ready.
      - ``waiting_for_ttft_window``: no replica is starting any more, but replicas were
        starting less than two TTFT rate windows ago, and only TTFT asks for more: its rate
        window may still hold requests that queued before those replicas were ready.
      - ``waiting_for_drain``: a scale-down waits until the pods removed earlier are gone.
      - ``scale_down_blocked_missing_signal``: a scale-down was asked while an enabled signal
        was missing or invalid (HPA's rule: never scale down on a partial picture).
      - ``no_valid_signals``: no enabled signal is usable (unreadable, or read with an
        unusable value); hold the current replicas.
      - ``outside_writer``: someone else keeps changing ``spec.replicas``; we re-apply at most
        once per cooldown instead of fighting.

    Set by the controller over the core's decision (the message keeps what the signals asked):
      - ``conflict``: a HorizontalPodAutoscaler or KEDA ScaledObject targets the workload;
        recommend only, never write.
      - ``paused``: the workload carries ``vllm-scaler.io/paused: "true"`` (or an invalid pin).
      - ``pinned``: the workload carries ``vllm-scaler.io/pinned-replicas: "N"``; N is written.
      - ``scaling_disabled``: ``spec.replicas`` is 0 (set by a person or an idler): as for the
        HPA, scaling is disabled and nothing is written until replicas go above 0 again.
      - ``selector_required``: the target's scale subresource answers no ``status.selector``
        (a custom resource without ``labelSelectorPath``, an operator that has not written
        it yet): its pods cannot be told, so nothing is read or written (the HPA:
        ScalingActive=False, SelectorRequired).
      - ``ambiguous_selector``: pods whose owner cannot be told are picked by another
        target's selector too: neither counts them, and the target does not scale down
        while that lasts (the HPA's AmbiguousSelector).
    """

    SCALE_UP = "scale_up"
    SCALE_DOWN = "scale_down"
    STEP_LIMITED = "step_limited"
    AT_MAX = "at_max"
    AT_MIN = "at_min"
    WITHIN_TOLERANCE = "within_tolerance"
    STABILIZED = "stabilized"
    WAITING_FOR_STARTING = "waiting_for_pending"
    WAITING_FOR_DRAIN = "waiting_for_drain"
    SCALE_DOWN_BLOCKED_MISSING_SIGNAL = "scale_down_blocked_missing_signal"
    NO_VALID_SIGNALS = "no_valid_signals"
    OUTSIDE_WRITER = "outside_writer"
    CONFLICT = "conflict"
    PAUSED = "paused"
    PINNED = "pinned"
    SCALING_DISABLED = "scaling_disabled"
    DEMAND_COVERED = "demand_covered"
    WAITING_FOR_TTFT_WINDOW = "waiting_for_ttft_window"
    SELECTOR_REQUIRED = "selector_required"
    AMBIGUOUS_SELECTOR = "ambiguous_selector"


class Limit(StrEnum):
    """What changed the recommended replicas into the desired ones (``Decision.limits``).

    The values are stable: they appear in ``recommend --output json`` (``limits``).
    """

    STABILIZATION = "stabilization"
    STEP_LIMIT = "step_limit"
    MAX_REPLICAS = "max_replicas"
    MIN_REPLICAS = "min_replicas"
    LEARNING_FLOOR = "learning_floor"
    BACKLOG = "backlog"


@dataclass(frozen=True, slots=True)
class Because:
    """A decision's reason and its sentence with the numbers (what the decision says)."""

    reason: Reason
    message: str

    def noted(self, note: str) -> Because:
        """The same reason with ``note`` added to its message ('' adds nothing)."""
        return Because(self.reason, self.message + note) if note else self


@dataclass(frozen=True, slots=True)
class Hold(Because):
    """The current replicas held, and why: a guard of :func:`scaler.core.guards.recommend`
    (``no_valid_signals``, ``scale_down_blocked_missing_signal``, ``waiting_for_pending``,
    ``waiting_for_drain``, ``waiting_for_ttft_window``) or the outside-writer rule
    (``outside_writer``).

    Attributes:
        reason: one of the holds' reasons above.
        message: its sentence with the numbers.
        recorded: what the stabilization history keeps for the cycle (None: the current
            replicas): a hold that only waits, for draining pods or for a latency signal's
            rate window to pass a queue the new replicas drained, records what the signals
            ask for; it is no evidence that the current replicas are needed.
    """

    recorded: int | None = None

    @property
    def blocked(self) -> bool:
        """Held for want of valid signals: its history entry is the current replicas, and a
        scale-down window shortened by a steady fall never reaches back past it."""
        return self.reason in (Reason.NO_VALID_SIGNALS, Reason.SCALE_DOWN_BLOCKED_MISSING_SIGNAL)


class PhaseName(StrEnum):
    """The phases of one decision, in order (HPA's ``normalizeDesiredReplicasWithBehaviors``:
    the recommendation, its stabilization, the rate limits, the bounds)."""

    RECOMMEND = "recommend"  # each signal's proportional rule, the largest wins; the guards
    SEASONAL = "seasonal"  # the seasonal forecast's replicas, by max, for scale-up only
    STABILIZE = "stabilize"  # the stabilization windows
    LEARNING_FLOOR = "learning_floor"  # while the capacity signal learns: no scale-down below it
    BACKLOG = "backlog"  # a backlog sized as work to drain (the capacity signal), not a rate
    STEP_LIMIT = "step_limit"  # the per-period step limits
    CLAMP = "clamp"  # min and max replicas
    OUTSIDE_WRITER = "outside_writer"  # re-apply over another writer at most once per cooldown


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase's outcome: the replicas it leaves, the limits that shaped them, and the hold
    it makes, if any.

    Attributes:
        name: which phase.
        replicas: the replicas after it.
        limits: what it limited (:class:`Limit`); empty when it left the replicas as they came.
        hold: the current replicas held and why (:class:`Hold`), for the phases that hold.
    """

    name: PhaseName
    replicas: int
    limits: tuple[Limit, ...] = ()
    hold: Hold | None = None
