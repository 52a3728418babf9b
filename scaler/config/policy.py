"""The scaling policy: a YAML file that lists the targets and how to scale each.

Loaded with :func:`load_policy`; invalid files raise :class:`PolicyError` whose message names
the file, the field path, the value and what was expected. Reference: ``docs/policy.md``.

Every field is spelled in camelCase, as Kubernetes objects spell theirs (``minReplicas``,
``scaleDown.stabilizationWindowSeconds``): a target of the file is a ``VLLMAutoscaler``
resource's spec plus its namespace (:mod:`scaler.config.resource`), written the same either
way. The snake_case names of the first releases (``min_replicas``) are read too. A target
names its workload either as the resource does (``namespace`` and ``scaleTargetRef``, the
HPA's reference: apiVersion, kind, name) or as ``workload`` (the four together).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from scaler.config.kinds import KNOWN_API_VERSIONS as KNOWN_API_VERSIONS
from scaler.config.kinds import KNOWN_PLURALS as KNOWN_PLURALS
from scaler.config.policy_errors import describe_document, describe_yaml_error, validation_lines
from scaler.config.signal_specs import MAX_LATENCY_SECONDS, SPECS

# The signals' blocks live with their specs; re-exported where the policy's users look for them.
from scaler.config.signal_specs import MAX_QUEUE_PER_REPLICA as MAX_QUEUE_PER_REPLICA
from scaler.config.signal_specs import MAX_TOKENS_PER_SECOND as MAX_TOKENS_PER_SECOND
from scaler.config.signal_specs import CapacitySignal as CapacitySignal
from scaler.config.signal_specs import ItlSignal as ItlSignal
from scaler.config.signal_specs import KvCacheSignal as KvCacheSignal
from scaler.config.signal_specs import QueueDepthSignal as QueueDepthSignal
from scaler.config.signal_specs import Signals as Signals
from scaler.config.signal_specs import TtftSignal as TtftSignal
from scaler.config.strict import Strict as _Strict
from scaler.config.strict import beside as _beside
from scaler.config.strict import given as _given
from scaler.config.strict import not_below as _not_below
from scaler.config.strict import validated_beside as _validated_beside
from scaler.config.vocabulary import DNS_LABEL, DNS_SUBDOMAIN
from scaler.config.wording import BAND_ABOVE_ONE

_LABEL_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]*$"

#: What a workload's controller appends to the workload's name in its pods' names (RE2), for
#: the kinds whose pod names give the name back unambiguously: a Deployment's pods are
#: ``<name>-<pod-template-hash>-<suffix>``, a StatefulSet's ``<name>-<ordinal>``. Other kinds'
#: pods are matched as ``<name>-.+``.
POD_NAME_SUFFIX: dict[str, str] = {"Deployment": "-[a-z0-9]+-[a-z0-9]+", "StatefulSet": "-[0-9]+"}


def _written(data: dict[str, Any], name: str) -> bool:
    """Whether the mapping ``data`` (as given) sets field ``name`` in either spelling."""
    return name in data or to_camel(name) in data


#: The most replicas a count may hold: Kubernetes' ``replicas`` is an int32.
MAX_REPLICAS = 2**31 - 1
#: The longest rate window and model-load timeout: a day. Far beyond any real setting, and
#: within what Prometheus takes as a range (1e12 s is refused by the server).
MAX_DAY_SECONDS = 86400
#: The longest TTFT target: an hour (every latency target's).
MAX_TTFT_SECONDS = MAX_LATENCY_SECONDS


def _closest_kind(kind: str) -> str | None:
    """The known kind closest to ``kind``, letter case aside (difflib), if any is close."""
    by_lower = {k.lower(): k for k in KNOWN_PLURALS}
    close = difflib.get_close_matches(kind.lower(), list(by_lower), n=1)
    return by_lower[close[0]] if close else None


def _unknown_kind(close: str) -> str:
    return (
        f"expected one of {', '.join(sorted(KNOWN_PLURALS))}; did you mean {close}? (a kind "
        "of another API also needs 'plural', its resource name)"
    )


def _kind_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with a workload's kind (as given, a well-formed kind without
    ``plural``): not a known kind, or a known one at another apiVersion; None when nothing
    is, or when the kind or plural is refused on its own."""
    kind, plural = data.get("kind"), data.get("plural")
    if plural is not None or not isinstance(kind, str) or not re.match(_KIND, kind):
        return None  # another API's kind (its group and plural as given), or its own error
    if kind not in KNOWN_PLURALS:
        close = _closest_kind(kind)
        if close:  # a typo first: the plural hint would send it the wrong way
            return f"kind: value {kind!r}: {_unknown_kind(close)}"
        return (
            f"kind: value {kind!r}: expected one of {', '.join(sorted(KNOWN_PLURALS))}, or "
            "'plural' set to the resource name of another API's kind (for example "
            "'inferencepools')"
        )
    version = data.get("apiVersion", data.get("api_version"))
    expected = KNOWN_API_VERSIONS[kind]
    if isinstance(version, str) and re.match(_API_VERSION, version) and version != expected:
        return f"apiVersion: value {version!r}: expected {expected} for kind {kind}"
    return None


_KIND = r"^[A-Z][A-Za-z0-9]*$"
_API_VERSION = r"^([a-z0-9.-]+/)?v[0-9]+[a-z0-9]*$"


class WorkloadRef(_Strict):
    """The scaled workload: any object with a ``scale`` subresource."""

    api_version: str = Field(
        alias="apiVersion",
        pattern=_API_VERSION,
        max_length=317,
        description="the workload's API version",
    )
    kind: str = Field(
        pattern=_KIND,
        max_length=63,
        description="Deployment, StatefulSet, ReplicaSet, LeaderWorkerSet, Rollout, or another "
        "API's kind with plural",
    )
    namespace: str = Field(pattern=DNS_LABEL, max_length=63, description="the workload's namespace")
    name: str = Field(pattern=DNS_SUBDOMAIN, max_length=253, description="the workload's name")
    plural: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]+$",
        max_length=63,
        description="Resource plural; defaults from the kind for well-known kinds.",
    )

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )

    @property
    def group(self) -> str:
        """API group ('' for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """API version without the group."""
        return self.api_version.rpartition("/")[2]

    @property
    def resource(self) -> str:
        """Plural resource name used in API paths."""
        if self.plural:
            return self.plural
        return KNOWN_PLURALS[self.kind]

    @field_validator("api_version")
    @classmethod
    def _named_group(cls, value: str) -> str:
        # The scale subresource is read and written under /apis/<group>/...: Kubernetes' core
        # group (apiVersion v1: ReplicationController) is not among what can be scaled here.
        if "/" not in value:
            raise ValueError(
                "expected group/version of a named API group (apps/v1, "
                "leaderworkerset.x-k8s.io/v1, ...): vllm-scaler does not scale kinds of "
                "Kubernetes' core group (v1)"
            )
        return value

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_cased(cls, value: object) -> object:
        # Before the pattern check: ``deployment`` is a known kind in the wrong case.
        if isinstance(value, str) and value not in KNOWN_PLURALS:
            close = _closest_kind(value)
            if close is not None and close.lower() == value.lower():
                raise ValueError(_unknown_kind(close))
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _plural_known(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Self:
        # Wrapped rather than checked after: an unknown kind (a typo) is reported beside the
        # other fields' errors (a bad namespace), in one pass.
        found = _kind_problem(data) if isinstance(data, dict) else None
        extra: list[InitErrorDetails] = []
        if found is not None:
            extra = [
                {
                    "type": "value_error",
                    "loc": (),
                    "input": data,
                    "ctx": {"error": ValueError(found)},
                }
            ]
        ref: Self = _validated_beside(cls, data, handler, extra)
        return ref

    def key(self) -> str:
        """Stable identifier used in logs, metrics and JSON: ``namespace/kind/name``."""
        return f"{self.namespace}/{self.kind}/{self.name}"


class Tolerance(_Strict):
    """Hysteresis band around a ratio of 1 (HPA's tolerance, split by direction).

    Scale up only when value/target > 1 + ``scale_up``; down only when < 1 - ``scale_down``.
    """

    scale_up: float = Field(
        default=0.1,
        ge=0,
        lt=1,
        description=f"0-1 ratio, not a percent: {BAND_ABOVE_ONE} (0.1: scale up above 1.1)",
    )
    scale_down: float = Field(default=0.1, ge=0, lt=1, description="0-1 ratio, not a percent")


_STEP_REPLICAS = "replicas a period may add or remove (the larger of the step limits applies)"
_STEP_PERCENT = "a percent of the replicas (0: off, else >= 1, as HPA's Percent policy)"


class ScalingRules(_Strict):
    """One direction's stabilization window and step limit (HPA ``behavior`` semantics).

    Within ``period_seconds`` the replicas may move by at most the larger of
    ``max_replicas_per_period`` and ``max_percent_per_period`` percent of the count at the
    start of the period: the replicas before every write inside it, scale-ups and scale-downs
    alike (HPA's ``periodStartReplicas``).
    """

    stabilization_window_seconds: float = Field(ge=0, le=3600)
    max_replicas_per_period: int = Field(ge=1, le=MAX_REPLICAS, description=_STEP_REPLICAS)
    max_percent_per_period: float = Field(default=0, ge=0, le=1000, description=_STEP_PERCENT)
    period_seconds: float = Field(
        default=60,
        gt=0,
        le=1800,
        description="the step limits' period, counted from the replicas before our writes "
        "inside it, up or down (HPA)",
    )

    @field_validator("max_percent_per_period", "max_surplus_percent_per_period", check_fields=False)
    @classmethod
    def _a_percent(cls, value: float, info: ValidationInfo) -> float:
        # A percent, as an HPA policy's Percent value (a whole number >= 1): 0.5 is almost
        # always someone meaning 50%, and 0.5% of any real fleet is less than one replica.
        if 0 < value < 1:
            raise ValueError(
                f"{info.field_name}: value {value:g}: expected 0 (off) or a percent >= 1 "
                f"(a percent, not a 0-1 ratio: {value:g} as a ratio is {value * 100:g})"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _step_limit_as_a_whole(cls, data: Any) -> Any:
        # The two step limits are one rule, as an HPA's ``policies`` list is: a block that sets
        # one of them means exactly that limit, not that limit or the other's default.
        if isinstance(data, dict):
            replicas = _written(data, "max_replicas_per_period")
            percent = _written(data, "max_percent_per_period")
            if replicas and not percent:
                data = {**data, "max_percent_per_period": 0}
            elif percent and not replicas:
                data = {**data, "max_replicas_per_period": 1}
        return data


def _window(default: float, toward: str) -> Any:
    """A direction's ``stabilization_window_seconds`` field (``toward``: ``up to the
    lowest``...)."""
    return Field(
        default=default,
        ge=0,
        le=3600,
        description=f"scale {toward} recommendation of this window (HPA)",
    )


def _step_replicas(default: int) -> Any:
    """A direction's ``max_replicas_per_period`` field."""
    return Field(default=default, ge=1, le=MAX_REPLICAS, description=_STEP_REPLICAS)


class ScaleUpRules(ScalingRules):
    """Scale-up rules; each field defaults on its own (HPA's scale-up defaults, but +4 pods or
    +100% per 60 s: a vLLM replica takes minutes to load, so a faster period only stacks up
    starting replicas)."""

    stabilization_window_seconds: float = _window(0, "up to the lowest")
    max_replicas_per_period: int = _step_replicas(4)
    max_percent_per_period: float = Field(default=100, ge=0, le=1000, description=_STEP_PERCENT)


class ScaleDownRules(ScalingRules):
    """Scale-down rules; each field defaults on its own (HPA's 300 s window; one replica per
    60 s, so each removal drains before the next).

    ``max_surplus_percent_per_period`` is a third step limit, taken with the other two as
    their larger change: while the capacity signal has an estimate and a fully valid reading,
    up to that percent of the surplus (the replicas at the start of the period above what the
    capacity signal asks for) may go per period. One replica a minute takes half an hour to
    bring 32 replicas down to the 8 a load needs once a surge is served; a quarter of the
    surplus a minute takes a few minutes, and near the need (a surplus under 8) it is one a
    minute again. Independent of the other two: 0 switches it off.

    ``shorten_window_on_steady_fall`` lets the stabilization window follow a demand that
    falls by more than its own noise (see :func:`scaler.core.decide.down_window_seconds`):
    once the demand has fallen for a whole window without a rise (dated from the level's last
    high once it lies more than one standard deviation of the burstiness below it), and while
    the capacity signal has an estimate and an ``ok`` reading, the window is the time the demand
    forecast's trend takes to lower the demand by one standard deviation of its burstiness,
    at least one rate window and at most ``stabilization_window_seconds``. Recurring bursts
    keep the whole window (each turns the trend up or lifts the level). It needs the capacity
    signal: ``true`` written while the signal is off is refused (the default, true, then does
    nothing).
    """

    stabilization_window_seconds: float = _window(300, "down to the highest")
    max_replicas_per_period: int = _step_replicas(1)
    max_percent_per_period: float = Field(default=0, ge=0, le=1000, description=_STEP_PERCENT)
    max_surplus_percent_per_period: float = Field(
        default=25,
        ge=0,
        le=100,
        description="percent of the replicas over the capacity signal's ask to remove per period",
    )
    shorten_window_on_steady_fall: bool = Field(
        default=True,
        description="shorten the window while the demand falls by more than its burstiness",
    )


def _shortening_without_capacity(scale_down: Any, earlier: dict[str, Any]) -> str | None:
    """``shorten_window_on_steady_fall: true`` written while the capacity signal is off (both
    as valid values): the window follows the capacity signal's forecast of the demand, so
    without it nothing would shorten. Only a value written: the default (true) is harmless."""
    signals = earlier.get("signals")
    given = _given(scale_down, "shorten_window_on_steady_fall")
    if signals is None or signals.capacity_enabled or given is not True:
        return None
    off = (
        "signals.capacity.enabled is false"
        if signals.capacity.enabled is False
        else "signals.capacity is off with signals.ttft_p95"
    )
    return (
        f"shorten_window_on_steady_fall: value true: expected false or unset while {off}: "
        "the window follows the capacity signal's forecast of the demand"
    )


class ScalingPolicy(_Strict):
    """How a target's replicas are decided: everything of a target's policy but which workload
    it is and how its series are found. A target's ``shadow`` is one of these."""

    # Scale to zero is not offered: with no pods there are no vLLM series to wake it up.
    min_replicas: int = Field(
        default=1,
        ge=1,
        le=MAX_REPLICAS,
        description="the fewest replicas written (no scale to zero: without pods there are no "
        "series)",
    )
    max_replicas: int = Field(
        default=10, ge=1, le=MAX_REPLICAS, validate_default=True, description="the most written"
    )
    signals: Signals = Field(default=Signals(), description="the signals and their targets")
    tolerance: Tolerance = Field(
        default=Tolerance(), description="the band around each target in which nothing changes"
    )
    scale_up: ScaleUpRules = Field(
        default_factory=ScaleUpRules, description="the scale-up window and step limits"
    )
    scale_down: ScaleDownRules = Field(
        default_factory=ScaleDownRules, description="the scale-down window and step limits"
    )
    model_load_timeout_seconds: float = Field(
        default=600,
        gt=0,
        le=MAX_DAY_SECONDS,
        description="a pod not Ready for longer counts as stuck, not starting",
    )

    _max_not_below_min = _not_below("max_replicas", "min_replicas")
    _shortening_needs_capacity = _beside("scale_down", _shortening_without_capacity)

    @field_validator("signals")
    @classmethod
    def _some_signal_on(cls, value: Signals) -> Signals:
        if not value.enabled():
            alone = [str(s.name) for s in SPECS if s.default_with is None]
            joined = [f"{s.name} with {s.default_with}" for s in SPECS if s.default_with]
            raise ValueError(
                "value every signal off: expected at least one signal enabled "
                f"({', '.join(alone)}, or {', '.join(joined)})"
            )
        return value


def _shadow_quantile_differs(shadow: Any, earlier: dict[str, Any]) -> str | None:
    """The shadow decides on another quantile of a latency signal (TTFT, ITL) than the active
    policy (both blocks valid): one query reads one quantile per target and signal."""
    mine = earlier.get("signals")
    if mine is None or shadow is None:
        return None
    for s in SPECS:
        if not s.name.latency or not mine.is_enabled(s.name):
            continue
        ours = mine.latency_block(s.name)
        try:
            theirs = type(ours).model_validate(_given(shadow, "signals", s.name.value))
        except ValidationError:
            continue  # reported on its own
        if not theirs.enabled or theirs.quantile == ours.quantile:
            continue
        return (
            f"signals.{s.name}.quantile: value {theirs.quantile:g}: expected the active "
            f"policy's quantile ({ours.quantile:g}): both decide on the same {s.short} reading"
        )
    return None


def _sets_model_load(policy: ScalingPolicy) -> bool:
    """``policy`` sets ``signals.capacity.model_load_seconds`` itself (not its default)."""
    return (
        "signals" in policy.model_fields_set
        and "capacity" in policy.signals.model_fields_set
        and "model_load_seconds" in policy.signals.capacity.model_fields_set
    )


def _a_label_value(value: str) -> str:
    """A matcher's value, never empty: in PromQL ``label=""`` selects the series without
    that label, never what a target means. A check of each value, so that it is reported
    beside an invalid label name of the same mapping."""
    if not value:
        raise ValueError(
            "expected a label value (an empty matcher selects the series that do not have the "
            "label)"
        )
    return value


class ReplicaGroups(_Strict):
    """A replica that is a group of pods: a LeaderWorkerSet's leader and its workers, or any
    kind whose ``/scale`` counts groups. Every field has the kind's default where one is
    known (LeaderWorkerSet: :data:`LEADER_WORKER_SET_GROUPS`); another kind names at least
    ``group_label``.

    Attributes:
        group_label: the pod label whose value names the pod's group (its replica).
        leader_labels: the labels of a group's leader; the scale subresource's selector may
            list the leaders only (a LeaderWorkerSet's does): the pods are listed without
            these requirements, so that the workers are listed too.
        size_field: the dotted path, in the workload object, of the pods per group (a group
            with fewer pods is not Ready); None: a group is as big as its listed pods.
        serving_pods: ``all`` (every pod runs an engine with its own queue: data-parallel or
            disaggregated serving; demand is read from every pod) or ``leaders`` (multi-node
            tensor parallel: the leader serves, the workers hold shards).
    """

    group_label: str | None = Field(
        default=None,
        min_length=1,
        max_length=317,
        description="the pod label whose value names the pod's group (its replica)",
    )
    leader_labels: dict[str, str] | None = Field(
        default=None,
        description=(
            "the labels of a group's leader, left out of the selector so that the workers "
            "are listed too"
        ),
    )
    size_field: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$",
        description=(
            "dotted path, in the workload object, of the pods per group (fewer: not Ready); "
            "none: a group is as big as its listed pods"
        ),
    )
    serving_pods: Literal["all", "leaders"] = Field(
        default="all",
        description=(
            "all: every pod runs an engine with its own queue (data parallel, disaggregated); "
            "leaders: the leader serves (multi-node tensor parallel)"
        ),
    )


#: A LeaderWorkerSet's groups, as its controller labels them (leaderworkerset.x-k8s.io/v1).
LEADER_WORKER_SET_GROUPS = ReplicaGroups(
    group_label="leaderworkerset.sigs.k8s.io/group-index",
    leader_labels={"leaderworkerset.sigs.k8s.io/worker-index": "0"},
    size_field="spec.leaderWorkerTemplate.size",
)
#: Kinds whose replica is a group of pods by default.
GROUP_KINDS: dict[str, ReplicaGroups] = {"LeaderWorkerSet": LEADER_WORKER_SET_GROUPS}


def _groups_named(groups: Any, earlier: dict[str, Any]) -> str | None:
    """``replica_groups`` of a kind without default groups must name its group label."""
    workload = earlier.get("workload")
    if groups is None or workload is None or workload.kind in GROUP_KINDS:
        return None
    if _given(groups, "group_label") not in (None, {}):
        return None
    return (
        f"group_label: value None: expected the pod label that names each pod's group for "
        f"kind {workload.kind} (only {', '.join(sorted(GROUP_KINDS))} has a default)"
    )


class TargetPolicy(ScalingPolicy):
    """How one target is scaled.

    ``shadow`` (optional): a complete second policy for the same workload (every field it does
    not set has its default, not the active policy's value), evaluated every cycle on the same
    readings with its own decision state and never written: its recommendation is exported
    beside the active one, so that a change (the capacity signal, other targets) can be
    compared on live traffic before it is switched on. One exception:
    ``signals.capacity.model_load_seconds``, the workload's model load time (a fact of the
    workload, not a choice of a policy), is the active policy's unless the shadow sets it
    (a shadow that turns capacity off would otherwise assume the 120 s default, and a
    backtest would replay its replicas loading in that time).
    """

    workload: WorkloadRef = Field(description="the scaled workload")
    prometheus_matchers: (
        dict[
            Annotated[str, Field(pattern=_LABEL_NAME)],
            Annotated[str, AfterValidator(_a_label_value)],
        ]
        | None
    ) = Field(
        default=None,
        description=(
            "Label matchers (exact values) that select this target's vLLM series. Default: "
            "namespace=<workload namespace>. Only the series of the pods the Kubernetes API "
            "lists for the workload count, by exact name."
        ),
    )
    shadow: ScalingPolicy | None = Field(
        default=None, description="a second policy, decided every cycle and never written"
    )
    replica_groups: ReplicaGroups | None = Field(
        default=None,
        description=(
            "A replica that is a group of pods (a LeaderWorkerSet's by default): how pods "
            "group, which is the leader, how many make a group, which serve."
        ),
    )

    _shadow_reads_the_same_quantiles = _beside("shadow", _shadow_quantile_differs)
    _groups_name_their_label = _beside("replica_groups", _groups_named)

    @model_validator(mode="before")
    @classmethod
    def _resource_form(cls, data: Any) -> Any:
        # The resource's form (namespace and scaleTargetRef) becomes the workload; an error
        # of the workload is named where it was written (policy_errors.as_written).
        if not isinstance(data, dict):
            return data
        form = resource_form(data)
        if form is None:
            return data
        ref_key, ref, namespace = form
        if "workload" in data:
            raise _error_at(
                ref_key,
                data,
                "expected the workload either as workload (with its namespace) or as "
                "namespace and scaleTargetRef, not both",
            )
        if ref_key is None:
            raise ValidationError.from_exception_data(
                cls.__name__, [{"type": "missing", "loc": ("scaleTargetRef",), "input": data}]
            )
        if namespace is None:
            raise ValidationError.from_exception_data(
                cls.__name__, [{"type": "missing", "loc": ("namespace",), "input": data}]
            )
        if isinstance(ref, dict) and "namespace" in ref:
            raise _error_at(
                ref_key,
                data,
                "namespace: expected none here: the workload is in the target's namespace "
                "(a resource's own), given beside scaleTargetRef",
            )
        workload = {**ref, "namespace": namespace} if isinstance(ref, dict) else ref
        rest = {k: v for k, v in data.items() if k not in (ref_key, "namespace")}
        return {**rest, "workload": workload}

    @property
    def groups(self) -> ReplicaGroups | None:
        """How the target's pods make its replicas: ``replica_groups`` over the kind's
        defaults (every field set), or None when a replica is one pod."""
        default = GROUP_KINDS.get(self.workload.kind)
        given = self.replica_groups
        if given is None:
            return default
        if default is None:
            return given
        return default.model_copy(update=given.model_dump(exclude_unset=True))

    def shadow_target(self) -> TargetPolicy | None:
        """The shadow as a target policy of the same workload and series (None without one)."""
        if self.shadow is None:
            return None
        # the fields as written (validated again, a written field is checked as written)
        fields = self.shadow.model_dump(exclude_unset=True)
        if not _sets_model_load(self.shadow):
            signals = fields.setdefault("signals", {})
            capacity = signals.setdefault("capacity", {})
            capacity["model_load_seconds"] = self.signals.capacity.model_load_seconds
        return TargetPolicy.model_validate(
            {**fields, "workload": self.workload, "prometheus_matchers": self.prometheus_matchers}
        )

    def reading_target(self) -> TargetPolicy:
        """The target as the source should read it: every signal the active policy or its
        shadow enables (the active policy's settings, the shadow's where only it enables the
        signal). Without a shadow, the target itself."""
        if self.shadow is None:
            return self
        mine, theirs = self.signals, self.shadow.signals
        update = {
            s.name.value: theirs.block(s.name)
            for s in SPECS
            if s.name.queried and not mine.is_enabled(s.name) and theirs.is_enabled(s.name)
        }
        if not update:
            return self
        return self.model_copy(update={"signals": mine.model_copy(update=update)})

    @property
    def key(self) -> str:
        """Stable identifier ``namespace/kind/name``."""
        return self.workload.key()

    def pod_name_regex(self) -> str:
        """Regex (RE2, anchored by PromQL) of the pod names the workload's controller creates."""
        suffix = POD_NAME_SUFFIX.get(self.workload.kind, "-.+")
        return re.escape(self.workload.name) + suffix

    def matchers(self) -> dict[str, str]:
        """Exact-match label matchers of the target's vLLM series: ``prometheus_matchers``, or
        its namespace (the source then keeps the series of the pods the Kubernetes API lists
        for the workload, by exact name; only history, without pod lists, reads them by
        :meth:`pod_name_regex`)."""
        if self.prometheus_matchers is not None:
            return dict(self.prometheus_matchers)
        return {"namespace": self.workload.namespace}


#: The labels that tell the copies of one series apart behind an HA Prometheus pair: the
#: Prometheus Operator's external label, Thanos' usual replica label, Mimir's and Cortex's HA
#: tracker label.
DEFAULT_REPLICA_LABELS: tuple[str, ...] = ("prometheus_replica", "replica", "__replica__")


class Policy(_Strict):
    """The whole policy file."""

    rate_window_seconds: float = Field(
        default=60,
        ge=4,
        le=MAX_DAY_SECONDS,
        description="Window of rate() in the queries; at least 4 scrape intervals (the shipped "
        "recording rules are for 60).",
    )
    # not strict: a YAML list is the way to write it (strict mode takes only a tuple)
    replica_labels: tuple[Annotated[str, Field(pattern=_LABEL_NAME, strict=True)], ...] = Field(
        default=DEFAULT_REPLICA_LABELS,
        strict=False,
        description=(
            "Labels that tell apart the copies of one series each replica of an HA Prometheus "
            "pair keeps (external labels such as prometheus_replica): series that differ only "
            "in them are read once. Empty: every series counts."
        ),
    )
    targets: list[TargetPolicy] = Field(
        default_factory=list,
        validate_default=True,
        description="the workloads to scale, each once (none: the VLLMAutoscaler resources "
        "only, with VLLM_SCALER_WATCH_RESOURCES)",
    )

    @field_validator("targets")
    @classmethod
    def _some_target(cls, value: list[TargetPolicy], info: ValidationInfo) -> list[TargetPolicy]:
        # a file of no target is one that scales nothing, unless resources are watched too
        if not value and not (info.context or {}).get("resources"):
            raise PydanticCustomError(
                "too_short",
                "List should have at least 1 item after validation, not 0",
                {"field_type": "List", "min_length": 1, "actual_length": 0},
            )
        return value

    @classmethod
    def without_targets(cls) -> Policy:
        """The policy of a controller without a policy file (it scales resources only)."""
        return cls.model_validate({}, context={"resources": True})

    @model_validator(mode="wrap")
    @classmethod
    def _unique(cls, data: Any, handler: Any) -> Self:
        # Wrapped rather than checked after: a target listed twice is reported beside every
        # other error of the file, for each pair of entries whose workloads are valid.
        policy: Self = _validated_beside(cls, data, handler, _duplicate_targets(data))
        return policy


#: The keys of the resource's form of a target's workload, in either spelling.
_REF_KEYS = ("scaleTargetRef", "scale_target_ref")


def resource_form(entry: dict[str, Any]) -> tuple[str | None, Any, Any] | None:
    """A target entry (as given) in the resource's form: the key its ``scaleTargetRef`` is
    given under (None when absent), that reference and the ``namespace`` (None when absent);
    None when the entry has neither (the ``workload`` form)."""
    ref_key = next((k for k in _REF_KEYS if k in entry), None)
    if ref_key is None and "namespace" not in entry:
        return None
    return ref_key, entry.get(ref_key) if ref_key else None, entry.get("namespace")


def _workload_of(entry: Any) -> Any:
    """A target entry's workload as given, in either form (None when it has none)."""
    if not isinstance(entry, dict):
        return None
    form = resource_form(entry)
    if form is None or "workload" in entry:
        return entry.get("workload")
    _, ref, namespace = form
    return {**ref, "namespace": namespace} if isinstance(ref, dict) else None


def _error_at(key: str | None, data: Any, message: str) -> ValidationError:
    """A value error at ``key`` of a mapping (its top when None)."""
    return ValidationError.from_exception_data(
        "TargetPolicy",
        [
            {
                "type": "value_error",
                "loc": (key,) if key else (),
                "input": data.get(key) if key else data,
                "ctx": {"error": ValueError(message)},
            }
        ],
    )


def _duplicate_targets(data: Any) -> list[InitErrorDetails]:
    """One error per target entry whose workload an earlier entry names too, at
    ``targets[i].workload``, naming both entries."""
    entries = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return []
    first: dict[str, int] = {}
    out: list[InitErrorDetails] = []
    for i, entry in enumerate(entries):
        raw = _workload_of(entry)
        try:
            key = WorkloadRef.model_validate(raw).key()
        except ValidationError:
            continue
        if key not in first:
            first[key] = i
            continue
        error = PydanticCustomError(
            "duplicate_target",
            "target {key} is listed twice (targets[{first}] and targets[{again}]); "
            "expected each workload once",
            {"key": key, "first": first[key], "again": i},
        )
        out.append({"type": error, "loc": ("targets", i, "workload"), "input": key})
    return out


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error.

    PyYAML keeps the last value of a repeated key silently; YAML 1.2 requires keys to be
    unique, and a policy whose second ``max_replicas`` overrides the first is a mistake.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                line = first.start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first given at line {line}); expected each key "
                    "once in a mapping",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


# YAML 1.2 reads ``1e12`` as a number; PyYAML's YAML 1.1 rules want a dot (``1.0e12``) and
# would read it as text, which a number field then refuses.
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


class PolicyError(ValueError):
    """A policy file could not be read or is invalid. The message names file, field and value."""


def parse_policy(data: Any, *, source: str = "<policy>", resources: bool = False) -> Policy:
    """Validate an already-parsed YAML/JSON document as a :class:`Policy`; ``resources``:
    the controller scales VLLMAutoscaler resources too, so the file may list no target.

    Raises:
        PolicyError: listing every invalid field as ``source: field.path: value 'x': expected``.
    """
    try:
        return Policy.model_validate(data, context={"resources": resources})
    except ValidationError as err:
        lines = validation_lines(err, Policy, source, data)
        raise PolicyError("invalid policy\n  " + "\n  ".join(lines)) from None


#: How ``run``, ``recommend`` and ``backtest`` take the policy file.
POLICY_OPTION = "--policy FILE (VLLM_SCALER_POLICY_FILE)"


def load_policy(path: Path, *, given_as: str = POLICY_OPTION, resources: bool = False) -> Policy:
    """Read and validate a YAML policy file.

    ``given_as`` names the way the command took the file (an option, an environment variable,
    a positional argument); a file that cannot be read names it in the message.
    ``resources``: VLLMAutoscaler resources are scaled too (the file may list no target).

    Raises:
        PolicyError: the file is missing, not UTF-8 text, not YAML, or invalid (message names
            file and field, never the content).
    """
    text = read_policy_text(path, given_as=given_as)
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as err:
        raise PolicyError(f"{path}: not valid YAML {describe_yaml_error(err)}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{path}: {describe_document(data)}; expected a mapping with 'targets'")
    return parse_policy(data, source=str(path), resources=resources)


def read_policy_text(path: Path, *, given_as: str = POLICY_OPTION) -> str:
    """The text of a policy file (or of a file of VLLMAutoscaler resources).

    Raises:
        PolicyError: the path is empty, the file is missing or not UTF-8 text; the message
            names the path and ``given_as``.
    """
    if path == Path():  # an empty option or argument arrives as "."
        raise PolicyError(
            f"{path}: the path is empty (or '.', the current directory); expected the path of "
            f"a YAML policy file given as {given_as}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise PolicyError(
            f"{path}: cannot read policy file: {err.strerror}; expected a readable file "
            f"given as {given_as}"
        ) from None
    except UnicodeDecodeError:
        raise PolicyError(
            f"{path}: the file is not UTF-8 text; expected a YAML policy file given as {given_as}"
        ) from None
    return text


def yaml_documents(text: str, source: str) -> list[Any]:
    """Every YAML document of ``text`` (``---`` between them), read as a policy file is read
    (a key twice in a mapping is an error, ``1e12`` a number).

    Raises:
        PolicyError: not valid YAML, naming ``source`` and where.
    """
    try:
        return list(yaml.load_all(text, Loader=_UniqueKeyLoader))
    except yaml.YAMLError as err:
        raise PolicyError(f"{source}: not valid YAML {describe_yaml_error(err)}") from None
