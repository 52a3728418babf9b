"""The one registry of the signals vllm-scaler scales on: one :class:`SignalSpec` per signal.

A signal is one entry of :data:`SPECS` (and its member of :class:`SignalName`, its block of
:class:`Signals`): its name and unit, how the source reads it (:class:`GaugeQuery`: a per-pod
gauge; :class:`HistogramQuery`: a latency histogram read in two rounds; none: derived by the
decision core), its policy block (the parse and validation rules: a pydantic model), how it
turns into desired replicas (:class:`Sizing`), its dashboard panel and its alert. Every layer
reads the registry instead of naming signals:

- :mod:`scaler.config.policy` parses each block and validates them together;
- :mod:`scaler.core.evaluation` applies the sizing rule of the spec's :class:`Sizing`;
- :mod:`scaler.sources.promql` builds each spec's queries from its metric names (the batched
  per-target form included), :mod:`scaler.sources.prometheus.histograms` reads every
  histogram spec the same way;
- :mod:`scaler.telemetry.metrics` and :mod:`scaler.dashboards` label, draw and document each
  spec; the chart's alert files (``deploy/helm/vllm-scaler/files/alerts/``, rendered into
  ``deploy/rules``) carry each spec's alert (a test holds the two equal).

A new signal of a known kind (a gauge summed or maxed per pod, a latency histogram) is a new
member of :class:`SignalName`, its block (a field of :class:`Signals`) and its spec here, plus
its query kinds in :class:`scaler.sources.promql.QueryKind`. See ``docs/signals.md``.

Pure: no I/O. The lowest layer with :mod:`scaler.config.vocabulary`, which re-exports
:class:`SignalName`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from pydantic import Field, ValidationInfo, field_validator, model_validator

from scaler.config.strict import Strict, beside, given, not_below

__all__ = [
    "MAX_LATENCY_SECONDS",
    "MAX_QUEUE_PER_REPLICA",
    "MAX_TOKENS_PER_SECOND",
    "SPECS",
    "AlertSpec",
    "CapacityCost",
    "CapacitySignal",
    "CapacityUnit",
    "GaugeQuery",
    "HistogramQuery",
    "ItlSignal",
    "KvCacheSignal",
    "LatencyBlock",
    "PanelSpec",
    "QueueDepthSignal",
    "SignalName",
    "SignalSpec",
    "Signals",
    "Sizing",
    "TtftSignal",
    "histogram_specs",
    "spec",
]

#: The longest latency target (TTFT, ITL): an hour.
MAX_LATENCY_SECONDS = 3600
#: The most waiting requests per replica a queue-depth target may ask for.
MAX_QUEUE_PER_REPLICA = 10_000
#: The most weighted tokens per second a replica's capacity (seeds and bounds) may be: far
#: above any GPU server's prefill and decode rates.
MAX_TOKENS_PER_SECOND = 1e9


class SignalName(StrEnum):
    """The signals vllm-scaler scales on (each one's :class:`SignalSpec` says the rest).

    - ``queue_depth``: requests waiting in vLLM's scheduler
      (``vllm:num_requests_waiting``, summed over engines per pod). Per-pod signal.
    - ``kv_cache_usage``: KV-cache usage as a 0-1 ratio (``vllm:kv_cache_usage_perc``,
      ``vllm:gpu_cache_usage_perc`` before vLLM 0.9.2; max over engines per pod). Per-pod signal.
    - ``ttft_p95``: time to first token, 95th percentile, seconds
      (``histogram_quantile`` over ``vllm:time_to_first_token_seconds_bucket``).
      Target-level signal.
    - ``itl_p95``: inter-token latency, 95th percentile, seconds (``histogram_quantile`` over
      ``vllm:inter_token_latency_seconds_bucket``, ``vllm:time_per_output_token_seconds_bucket``
      before vLLM 0.11). Target-level signal, off unless a target is set.
    - ``capacity``: the demand the fleet will see (weighted tokens per second, from vLLM's
      ``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total``) over what one replica
      serves at the TTFT target, learned online. Derived by the decision core from the
      target's throughput, not read by a query of its own.
    """

    QUEUE_DEPTH = "queue_depth"
    KV_CACHE_USAGE = "kv_cache_usage"
    TTFT_P95 = "ttft_p95"
    ITL_P95 = "itl_p95"
    CAPACITY = "capacity"

    @property
    def spec(self) -> SignalSpec:
        """The signal's entry in the registry."""
        return _BY_NAME[self]

    @property
    def unit(self) -> str:
        """The unit of the signal's value and target in a decision (``recommend`` prints it):
        waiting requests per replica, a 0-1 ratio per replica, seconds, or for the capacity
        signal seconds of replica work per second per replica (the default unit ``work``;
        :meth:`CapacityUnit.per_replica_unit` gives a policy's)."""
        return self.spec.unit

    @property
    def per_pod(self) -> bool:
        """True for signals read per pod and summed over the target's ready pods."""
        return self.spec.sizing is Sizing.PER_POD

    @property
    def latency(self) -> bool:
        """True for the latency quantiles (a target-level value in seconds)."""
        return self.spec.sizing is Sizing.LATENCY

    @property
    def queried(self) -> bool:
        """True for signals with a query of their own (capacity is derived from throughput)."""
        return self.spec.reads is not None


class Sizing(StrEnum):
    """How a signal's reading turns into desired replicas (:mod:`scaler.core.evaluation`).

    - ``per_pod``: HPA's AverageValue rule on the sum over the ready pods, compared with the
      replicas asked for: ``desired = ceil(sum / target)``.
    - ``latency``: HPA's Object Value rule on a target-level quantile, from the serving
      replicas (the ready ones up to ``spec.replicas``, none asleep:
      :attr:`scaler.core.observation.ReplicaCounts.serving`), at most doubling them in one
      decision (AIBrix APA's step: latency is not proportional to load): ``desired =
      ceil(min(value / target, 2) x serving)``; no more than the replicas asked for while some
      start or wait for a node, and for two rate windows after.
    - ``derived``: computed by the decision core from other readings (the capacity signal,
      :func:`scaler.core.sizing.evaluate_capacity`).
    """

    PER_POD = "per_pod"
    LATENCY = "latency"
    DERIVED = "derived"


@dataclass(frozen=True, slots=True)
class GaugeQuery:
    """A per-pod gauge, read by one per-pod query for every target.

    Attributes:
        query: the query kind's name (:class:`scaler.sources.promql.QueryKind`).
        metrics: vLLM's names of the gauge, the current one first: with several, one query
            reads all of them (keeping each series' name) and each pod's first found counts,
            so a renamed metric keeps working across an upgrade (the name found is reported).
        aggregation: ``sum`` or ``max`` over a pod's engines (vLLM V1 exports one series per
            engine): the queue of a pod is the sum of its engines' queues, its KV cache the
            fullest engine's.
        ratio: the gauge is a 0-1 ratio: a value above 1 (a percent where a ratio belongs)
            is ``out_of_range`` and the signal is not used.
    """

    query: str
    metrics: tuple[str, ...]
    aggregation: str
    ratio: bool = False


@dataclass(frozen=True, slots=True)
class HistogramQuery:
    """A latency histogram, read in two rounds (:mod:`scaler.sources.prometheus.histograms`).

    The first round asks each pod's observation rate (which pods have the histogram, in which
    representation, and whether any observation fell in the window); the second the bucket
    rates over exactly the target's pods (or the recording rules' per-group ones), from which
    the source computes the quantile as Prometheus does and tells a lower bound apart.

    Attributes:
        rate_query: the first round's query kind (``ttft_rate``).
        buckets_query: the second round's query kind (``ttft_buckets``).
        metrics: vLLM's names of the histogram (without ``_bucket``), the current one first;
            with several, each series is read under the first name that has it (PromQL
            ``or``), so a rename keeps working across an upgrade (the name found is reported).
        observations: what one observation is, for messages (``first tokens``).
        rules: the file under ``deploy/rules`` whose recording rules hold its per-group
            bucket rates (the controller reads them where they are fresh).
    """

    rate_query: str
    buckets_query: str
    metrics: tuple[str, ...]
    observations: str
    rules: str = "vllm-scaler.rules.yaml"


@dataclass(frozen=True, slots=True)
class PanelSpec:
    """The signal's panel on the decisions dashboard: its value against its target and band.

    Attributes:
        title: the panel's title (``($target)`` is appended).
        unit: Grafana's unit of the value (``s``, ``percentunit``, ``short``).
    """

    title: str
    unit: str


@dataclass(frozen=True, slots=True)
class AlertSpec:
    """The signal's own alert, ``deploy/helm/vllm-scaler/files/alerts/<name>.yaml`` in the
    chart, rendered into ``deploy/rules/vllm-scaler.rules.yaml`` (a test holds the rendered
    rules to it): its name and summary. The generic ones (``VllmScalerSignalInvalid``,
    ``VllmScalerSignalAbsent``) cover every signal besides."""

    name: str
    summary: str


@dataclass(frozen=True, slots=True)
class SignalSpec:
    """Everything the layers need to know of one signal.

    Attributes:
        name: the signal.
        title: its name in words (``TTFT p95``).
        short: its short name in a sentence (``TTFT``).
        unit: the unit of its value and target in a decision (``recommend``'s unit column).
        symbol: the unit as a decision's message writes it after a number (`` s``).
        help: the value's unit in the metrics' help text (``seconds``).
        sizing: how it turns into desired replicas (:class:`Sizing`).
        reads: how the source reads it; None for a signal the decision core derives.
        target_field: its target's field in its policy block (``target_seconds``).
        panel: its panel on the decisions dashboard.
        alert: its own alert, if it has one.
        default_with: a block whose ``enabled`` is None (unset) is on exactly when this
            signal is (the capacity signal: with TTFT).
        learning_floor: a scale-up it drives while the capacity signal is still learning
            raises the learning floor (:func:`scaler.core.phases.learning_floor`).
        not_load: its breach is bounded to one replica when the fleet is not loaded
            (:func:`scaler.core.guards.not_load`).
    """

    name: SignalName
    title: str
    short: str
    unit: str
    symbol: str
    help: str
    sizing: Sizing
    reads: GaugeQuery | HistogramQuery | None
    target_field: str
    panel: PanelSpec
    alert: AlertSpec | None = None
    default_with: SignalName | None = None
    learning_floor: bool = False
    not_load: bool = False

    @property
    def histogram(self) -> HistogramQuery | None:
        """How its histogram is read, for a latency histogram signal."""
        return self.reads if isinstance(self.reads, HistogramQuery) else None

    @property
    def gauge(self) -> GaugeQuery | None:
        """How its gauge is read, for a per-pod gauge signal."""
        return self.reads if isinstance(self.reads, GaugeQuery) else None


# --------------------------------------------------------------------- the policy blocks


class LatencyBlock(Protocol):
    """What every latency signal's policy block has (TTFT's, ITL's)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def quantile(self) -> float: ...


class QueueDepthSignal(Strict):
    """Queue depth: ``vllm:num_requests_waiting`` summed over engines and pods.

    HPA AverageValue semantics: desired = ceil(total waiting / ``target_per_replica``).
    """

    enabled: bool = Field(default=True, description="false switches the signal off")
    target_per_replica: float = Field(
        default=10.0, gt=0, le=MAX_QUEUE_PER_REPLICA, description="waiting requests per replica"
    )


class KvCacheSignal(Strict):
    """KV-cache usage as a 0-1 ratio (not a percent), averaged over ready pods.

    HPA Utilization semantics: desired = ceil(sum of pod ratios / ``target_ratio``).

    Default 0.7: KV-cache usage is the leading signal (it rises before requests wait, while
    the queue is still empty and TTFT still low), but only while there is room above the
    trigger. vLLM stops admitting new requests once the free KV blocks run out, so usage
    saturates at about 0.9-1 and requests queue from there. The scale-up fires at
    ``target_ratio x (1 + tolerance.scale_up)``: with 0.8 that is 0.88, where requests already
    wait, and the new replicas serve only a model load later. With 0.7 it fires at 0.77,
    leaving about 0.2 of the cache for the growth during the model load. Measured with
    ``vllm-scaler bench`` (TTFT SLO 2 s, model load 120 s), against 0.8: on ``conv`` (rate
    scales 2-4, rate-scaling seeds 0-3) 99.6-99.9% of requests within the SLO instead of
    97.0-99.1%, for 0-16% more GPU-hours; on ``code``, whose bursts start from idle and are
    not seen by any signal in time, -0.6 to +3.5 points at -17% to +8% GPU-hours.
    """

    enabled: bool = Field(default=True, description="false switches the signal off")
    target_ratio: float = Field(default=0.7, gt=0, le=1, description="0-1 ratio, not a percent")


class TtftSignal(Strict):
    """TTFT quantile over the target's pods, in seconds.

    HPA Object/Value semantics: desired = ceil(ready replicas x value / ``target_seconds``).
    """

    enabled: bool = Field(default=True, description="false switches the signal off")
    target_seconds: float = Field(
        default=2.0,
        gt=0,
        le=MAX_LATENCY_SECONDS,
        description="the TTFT quantile's target, seconds",
    )
    quantile: float = Field(
        default=0.95, gt=0, lt=1, description="0-1 ratio: the quantile of TTFT (0.95 is p95)"
    )


class ItlSignal(Strict):
    """Inter-token latency quantile over the target's pods, in seconds: the time between two
    streamed tokens of a request (``vllm:inter_token_latency_seconds``, read under its
    pre-0.11 name ``vllm:time_per_output_token_seconds`` where a pod exports only that).

    HPA Object/Value semantics, as TTFT: desired = ceil(ready replicas x value /
    ``target_seconds``), at most doubling in one decision; the decision keeps the replica
    count that holds both TTFT and ITL within their targets (the larger ask wins).

    Off by default, and its target has no default: unlike TTFT, which is queueing that more
    replicas remove, ITL has a floor the replicas cannot go below, the model's decode step on
    its GPU at a small batch (for an 8B model about 17-30 ms a token on an RTX 4090-class GPU,
    6.5 ms on an H100; about 15 ms for a 70B one over five H100s). A target below that floor
    breaches on any fleet, and a latency signal above its band doubles the replicas every cycle
    up to ``max_replicas``: a cost no default should risk. Set it from a measurement of the
    workload (``vllm bench serve``'s ITL or TPOT at the load per replica you plan for, with
    room).
    """

    enabled: bool = Field(default=False, description="true switches the signal on (off by default)")
    target_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_LATENCY_SECONDS,
        validate_default=True,
        description="required when enabled: the model's ITL p95 target on its GPU, seconds",
    )
    quantile: float = Field(
        default=0.95, gt=0, lt=1, description="0-1 ratio: the quantile of ITL (0.95 is p95)"
    )

    @field_validator("target_seconds")
    @classmethod
    def _target_when_enabled(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is None and info.data.get("enabled") is True:
            raise ValueError(
                "expected a number of seconds while itl_p95 is enabled (it has no default: "
                "the inter-token latency a model can reach depends on the model and its GPU; "
                "measure it, for example with vllm bench serve, and set the target above it)"
            )
        return value


#: What one generated token costs in prompt tokens with unit ``weighted_tokens`` by default.
DEFAULT_GENERATION_TOKEN_WEIGHT = 16.0


class CapacityCost(Strict):
    """What a replica's work costs, seconds of one replica's engine time (the capacity signal's
    unit when ``unit`` is ``work``): a profile of the model on its GPU.

    One replica's work per second of traffic is::

        prefill_seconds_per_token x computed prompt tokens/s
        + (decode_seconds_per_token + decode_seconds_per_context_token x context) x generated/s

    where the computed prompt tokens are ``vllm:prompt_tokens_total`` less the prefix-cache
    hits (``vllm:prefix_cache_hits_total``; the older ``vllm:gpu_prefix_cache_hits_total``),
    and ``context`` is the mean prompt plus half the mean output of the requests finished in
    the window (tokens). Prefill is compute-bound: about the same time per computed token at
    any batch. A decode step reads the weights once and the batch's KV cache; the batch a
    replica runs at its capacity is bounded by its KV cache over the context, so a generated
    token's share of a step grows with its context (the weights' read spread over fewer
    sequences, and its own KV read). The defaults are a 7-8B model in BF16 on a 24 GB GPU
    (about 21k prompt tokens/s of prefill, 17 ms a step for the weights, 43k tokens of KV
    cache at 144 KB a token, about 1 TB/s: ``docs/capacity.md``); the learned capacity (work
    seconds per second a replica serves within the SLOs) absorbs a uniform error of them.
    """

    prefill_seconds_per_token: float = Field(
        default=4.7e-5,
        gt=0,
        le=1,
        description="engine seconds per prompt token computed (not found in the prefix cache)",
    )
    decode_seconds_per_token: float = Field(
        default=3.5e-4,
        ge=0,
        le=1,
        description="engine seconds per generated token, the part that does not grow with "
        "its context",
    )
    decode_seconds_per_context_token: float = Field(
        default=5.4e-7,
        ge=0,
        le=1,
        description="engine seconds per generated token per token of its context (its KV read "
        "and the weights' read shared by the batch its KV cache allows)",
    )

    kv_cache_tokens: int = Field(
        default=43_008,
        gt=0,
        le=100_000_000,
        description="tokens one replica's KV cache holds (vLLM logs it at start as the GPU KV "
        "cache size): the batch the decode prices assume; the online fit compares the "
        "fleet's time per output token with the profile's at a full cache",
    )

    def work_seconds(
        self,
        computed_prompt_tokens: float,
        generation_tokens: float,
        context_tokens: float,
    ) -> float:
        """Engine seconds of work (per second for rates): see the class docstring."""
        decode = self.decode_seconds_per_token + self.decode_seconds_per_context_token * max(
            0.0, context_tokens
        )
        return self.prefill_seconds_per_token * computed_prompt_tokens + decode * generation_tokens


class CapacityUnit(StrEnum):
    """The capacity signal's unit of demand and capacity."""

    WORK = "work"
    WEIGHTED_TOKENS = "weighted_tokens"

    @property
    def rate_unit(self) -> str:
        """The unit of a demand or a capacity in this unit, as names, reports and the status
        write it: ``work_seconds_per_second`` (seconds of replica work per second) or
        ``weighted_tokens_per_second``."""
        return (
            "work_seconds_per_second"
            if self is CapacityUnit.WORK
            else ("weighted_tokens_per_second")
        )

    @property
    def per_replica_unit(self) -> str:
        """The capacity signal's value and target in this unit: ``<rate_unit>_per_replica``."""
        return f"{self.rate_unit}_per_replica"

    @property
    def symbol(self) -> str:
        """The unit's short name after a number in messages: ``work s/s`` or ``tok/s``."""
        return "work s/s" if self is CapacityUnit.WORK else "tok/s"


class CapacitySignal(Strict):
    """Capacity: the demand the fleet will see, over what one replica serves at the TTFT target.

    ``desired = ceil(forecast demand x (1 + standing_headroom) / (capacity x
    target_utilization)) + sleeping replicas``, where demand and capacity are *seconds of
    replica work per second* (``unit: work``: prompt tokens computed and generated tokens
    priced by ``cost``, :class:`CapacityCost`), or with ``unit: weighted_tokens`` prompt tokens
    plus ``generation_token_weight`` times generated tokens; capacity per replica is learned
    online (:mod:`scaler.core.capacity`) and the forecast
    covers the model load time (:mod:`scaler.core.forecast`). See ``docs/capacity.md``.

    Seeds (optional): a replica's throughput at the TTFT target on your request mix, for
    example from ``vllm bench serve`` at the rate where TTFT p95 reaches the target: its prompt
    and generated tokens per second. Without a seed the signal asks for nothing until it has
    learned from a busy fleet.

    ``enabled`` defaults to on whenever ``ttft_p95`` is on: the capacity is learned at the
    TTFT target, so without TTFT there is nothing to learn it from (``true`` with TTFT off is
    refused).
    """

    enabled: bool | None = Field(default=None, description="default: on whenever ttft_p95 is on")
    target_utilization: float = Field(
        default=0.85, gt=0, le=1, description="0-1 ratio of the learned capacity to fill"
    )
    generation_token_weight: float | None = Field(
        default=None,
        ge=0,
        le=1000,
        description="with unit weighted_tokens only: what one generated token costs a "
        "replica, in prompt tokens (default 16)",
    )
    seed_prompt_tokens_per_second: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TOKENS_PER_SECOND,
        description="optional, with the generation seed: a replica's prompt tokens/s at the "
        "TTFT target on your mix (e.g. vllm bench serve)",
    )
    seed_generation_tokens_per_second: float | None = Field(
        default=None,
        ge=0,
        le=MAX_TOKENS_PER_SECOND,
        validate_default=True,
        description="optional, with the prompt seed: a replica's generated tokens/s there",
    )
    seed_requests_per_second: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TOKENS_PER_SECOND,
        description="optional, with the token seeds: the requests/s finished there (unit work: "
        "gives the context each generated token is priced at; without it none, which "
        "understates the seed)",
    )
    min_tokens_per_second: float = Field(
        default=1.0,
        gt=0,
        le=MAX_TOKENS_PER_SECOND,
        description="lower bound of the learned capacity, weighted tokens/s",
    )
    max_tokens_per_second: float = Field(
        default=10_000_000.0,
        gt=0,
        le=MAX_TOKENS_PER_SECOND,
        validate_default=True,
        description="upper bound of the learned capacity, weighted tokens/s",
    )
    headroom: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="standard deviations of the demand's recent burstiness added to the forecast",
    )
    model_load_seconds: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="time from pod creation to Ready assumed until one start was observed",
    )
    unit: CapacityUnit = Field(
        default=CapacityUnit.WORK,
        strict=False,
        description="work: demand and capacity in seconds of replica work per second (prompt "
        "tokens computed, the prefix-cache hits left out, and generated tokens priced by "
        "their context: cost); weighted_tokens: the earlier prompt plus "
        "generation_token_weight x generated tokens per second",
    )
    cost: CapacityCost = Field(
        default=CapacityCost(),
        description="what prompt and generated tokens cost a replica, engine seconds (unit work)",
    )
    fit_cost: bool = Field(
        default=True,
        description="unit work: scale the cost's prefill and decode prices online to the "
        "fleet's own vLLM phase histograms (request_prefill/decode_time_seconds), bounded "
        "and seeded by the cost; false: the cost as given",
    )
    min_work_ratio: float = Field(
        default=0.02,
        gt=0,
        le=100,
        description="lower bound of the learned capacity with unit work, seconds of work a "
        "replica serves per second",
    )
    max_work_ratio: float = Field(
        default=20.0,
        gt=0,
        le=100,
        validate_default=True,
        description="upper bound of the learned capacity with unit work, seconds of work per "
        "second",
    )
    standing_headroom: float = Field(
        default=0.0,
        ge=0,
        le=4,
        description="a 0-4 fraction of capacity held above the forecast demand at all times "
        "(0.2: 20% more replicas' worth): GPU-hours paid for the requests of bursts shorter "
        "than a model load, which no reactive sizing meets",
    )
    size_backlog: bool = Field(
        default=True,
        description="while the capacity signal has an estimate and an ok reading, no other "
        "signal scales up past its ask: the backlog the queue and TTFT see is sized as work to "
        "drain within backlog_drain_seconds, and released as it drains",
    )
    backlog_drain_seconds: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="the waiting work is sized to drain within this many seconds on top of "
        "the arrival rate (default: the forecast horizon, the model load plus half the rate "
        "window)",
    )

    # Checks across fields are field checks of the later field, not model ones: they run
    # beside the other fields' errors, in one pass, whenever the fields they compare are valid.
    _max_not_below_min = not_below("max_tokens_per_second", "min_tokens_per_second")
    _max_work_not_below_min = not_below("max_work_ratio", "min_work_ratio")

    @field_validator("seed_generation_tokens_per_second")
    @classmethod
    def _seeds_together(cls, value: float | None, info: ValidationInfo) -> float | None:
        # One seed alone would leave the other at 0: a prompt seed alone would price decode
        # at nothing and size the fleet for prefill only.
        names = ("seed_prompt_tokens_per_second", "seed_generation_tokens_per_second")
        if names[0] not in info.data:  # the prompt seed is invalid: reported on its own
            return value
        prompt = info.data[names[0]]
        if (prompt is None) == (value is None):
            return value
        name, given = (names[1], value) if prompt is None else (names[0], prompt)
        other = next(n for n in names if n != name)
        raise ValueError(
            f"{name}: value {given:g}: expected {other} too: the seed is a replica's "
            "prompt and generated tokens per second at the TTFT target, both measured on "
            "your request mix (0 generated tokens per second only if it generates none)"
        )

    @property
    def token_weight(self) -> float:
        """``generation_token_weight``, 16 when not given."""
        w = self.generation_token_weight
        return DEFAULT_GENERATION_TOKEN_WEIGHT if w is None else w

    def weighted(self, prompt_tokens: float, generation_tokens: float) -> float:
        """Weighted tokens: ``prompt + generation_token_weight x generated`` (any time unit)."""
        return prompt_tokens + self.token_weight * generation_tokens

    @property
    def seed_tokens_per_second(self) -> float | None:
        """The seed in the signal's unit per replica (None without a seed): weighted tokens/s,
        or with unit ``work`` its seconds of work per second priced by ``cost`` (no cache hits;
        each generated token at the context ``seed_requests_per_second`` gives, none without
        it: a seed that understates the capacity, so a few windows raise it)."""
        if self.seed_prompt_tokens_per_second is None:
            return None
        prompt = self.seed_prompt_tokens_per_second
        generated = self.seed_generation_tokens_per_second or 0.0
        if self.unit is CapacityUnit.WORK:
            # the context of a generated token as the demand prices it (scaler.core.capacity.
            # demand_of): the mean prompt plus half the mean output of a finished request
            requests = self.seed_requests_per_second
            context = (prompt + generated / 2) / requests if requests else 0.0
            return self.cost.work_seconds(prompt, generated, context)
        return self.weighted(self.seed_prompt_tokens_per_second, generated)

    @property
    def bounds(self) -> tuple[float, float]:
        """The learned capacity's bounds in the signal's unit."""
        if self.unit is CapacityUnit.WORK:
            return self.min_work_ratio, self.max_work_ratio
        return self.min_tokens_per_second, self.max_tokens_per_second

    @property
    def unit_text(self) -> str:
        """The unit's short name in messages: ``work s/s`` or ``tok/s``."""
        return self.unit.symbol

    @model_validator(mode="after")
    def _weight_needs_token_unit(self) -> CapacitySignal:
        # A weight set by hand with the work unit would be silently ignored: say what moved.
        if self.unit is CapacityUnit.WORK and self.generation_token_weight is not None:
            raise ValueError(
                f"generation_token_weight {self.generation_token_weight:g}: applies only to "
                "unit weighted_tokens; the capacity signal now counts seconds of replica work "
                "(unit work, the default), priced by capacity.cost; set unit: weighted_tokens "
                "to keep the weighting, or drop the weight"
            )
        return self


def _capacity_without_ttft(capacity: Any, earlier: dict[str, Any]) -> str | None:
    """The capacity block asks for the signal while TTFT is off (both as valid values)."""
    ttft = earlier.get("ttft_p95")
    if ttft is None or ttft.enabled or given(capacity, "enabled") is not True:
        return None
    return (
        "enabled: value true: expected false or unset while ttft_p95 is disabled: "
        "a replica's capacity is learned only while TTFT is within its target"
    )


class Signals(Strict):
    """Per-signal targets, one block per entry of :data:`SPECS` (a test holds the two equal).
    Each signal can be switched off with ``enabled: false``."""

    queue_depth: QueueDepthSignal = Field(
        default=QueueDepthSignal(), description="waiting requests per replica"
    )
    kv_cache_usage: KvCacheSignal = Field(
        default=KvCacheSignal(), description="KV-cache usage per replica"
    )
    ttft_p95: TtftSignal = Field(default=TtftSignal(), description="a quantile of TTFT")
    itl_p95: ItlSignal = Field(
        default=ItlSignal(),
        description="a quantile of inter-token latency (off by default; no default target)",
    )
    capacity: CapacitySignal = Field(
        default=CapacitySignal(), description="the forecast demand over a replica's capacity"
    )

    _capacity_needs_ttft = beside("capacity", _capacity_without_ttft)

    def block(self, name: SignalName) -> Strict:
        """The signal's policy block (``signals.<name>``)."""
        found: Strict = getattr(self, name.value)
        return found

    def latency_block(self, name: SignalName) -> LatencyBlock:
        """A latency signal's block (its quantile and target).

        Raises:
            ValueError: ``name`` is no latency signal.
        """
        if not name.latency:
            raise ValueError(f"{name} is no latency signal")
        block: LatencyBlock = getattr(self, name.value)
        return block

    def is_enabled(self, name: SignalName) -> bool:
        """The signal is on: its block's ``enabled``, or, left unset, whether the signal it
        goes with (:attr:`SignalSpec.default_with`) is on."""
        on: bool | None = getattr(self.block(name), "enabled", None)
        with_ = name.spec.default_with
        if on is None:
            return with_ is not None and self.is_enabled(with_)
        return on

    def enabled(self) -> tuple[SignalName, ...]:
        """Names of the enabled signals, in the registry's order."""
        return tuple(s.name for s in SPECS if self.is_enabled(s.name))

    @property
    def capacity_enabled(self) -> bool:
        """The capacity signal is on: asked for, or by default whenever TTFT is on."""
        return self.is_enabled(SignalName.CAPACITY)

    def queried(self) -> tuple[SignalName, ...]:
        """The enabled signals read by a query of their own (all but capacity, which the
        decision core derives from the target's throughput)."""
        return tuple(n for n in self.enabled() if n.queried)

    def target_of(self, name: SignalName) -> float:
        """The configured target of a signal, in its own unit (capacity: the target
        utilization, a 0-1 ratio)."""
        target: float = getattr(self.block(name), name.spec.target_field)
        return target


# ------------------------------------------------------------------------- the registry

SPECS: tuple[SignalSpec, ...] = (
    SignalSpec(
        name=SignalName.QUEUE_DEPTH,
        title="Queue depth",
        short="the queue",
        unit="waiting_requests_per_replica",
        symbol="",
        help="waiting requests per replica",
        sizing=Sizing.PER_POD,
        reads=GaugeQuery("waiting", ("vllm:num_requests_waiting",), "sum"),
        target_field="target_per_replica",
        panel=PanelSpec("Queue depth: waiting requests per replica", "short"),
        alert=AlertSpec(
            "VllmScalerAtMaxReplicasQueueGrowing",
            "{{ $labels.target }} is pinned at max replicas while its queue grows",
        ),
    ),
    SignalSpec(
        name=SignalName.KV_CACHE_USAGE,
        title="KV-cache usage",
        short="the KV cache",
        unit="ratio_per_replica",
        symbol="",
        help="0-1 ratio",
        sizing=Sizing.PER_POD,
        # 0.9.2 renamed the second to the first; 0.12 removed the second
        reads=GaugeQuery(
            "kv_cache",
            ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
            "max",
            ratio=True,
        ),
        target_field="target_ratio",
        panel=PanelSpec("KV-cache usage (0-1)", "percentunit"),
    ),
    SignalSpec(
        name=SignalName.TTFT_P95,
        title="TTFT p95",
        short="TTFT",
        unit="seconds",
        symbol=" s",
        help="seconds",
        sizing=Sizing.LATENCY,
        reads=HistogramQuery(
            "ttft_rate", "ttft_buckets", ("vllm:time_to_first_token_seconds",), "first tokens"
        ),
        target_field="target_seconds",
        panel=PanelSpec("TTFT p95", "s"),
        learning_floor=True,
        not_load=True,
    ),
    SignalSpec(
        name=SignalName.ITL_P95,
        title="ITL p95",
        short="ITL",
        unit="seconds",
        symbol=" s",
        help="seconds",
        sizing=Sizing.LATENCY,
        reads=HistogramQuery(
            "itl_rate",
            "itl_buckets",
            # renamed in 0.11, hidden in 0.12, removed in 0.13
            ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
            "output tokens",
            # off by default: its rules are loaded only where a target enables it
            rules="vllm-scaler-itl.rules.yaml",
        ),
        target_field="target_seconds",
        panel=PanelSpec("ITL p95 (inter-token latency)", "s"),
        alert=AlertSpec(
            "VllmScalerItlAboveTarget",
            "{{ $labels.target }}: inter-token latency p95 stays above its target",
        ),
        # Decode load shows in ITL before requests wait or the KV cache fills (vLLM admits
        # requests while blocks are free, and a larger batch streams each token slower): a
        # breach on a fleet whose pods are not busy is still the load, so it is not bounded.
        not_load=False,
        # The learning floor keeps TTFT's evidence until the capacity signal has an estimate;
        # ITL as a constraint of the capacity sizing is the capacity signal's to take up.
        learning_floor=False,
    ),
    SignalSpec(
        name=SignalName.CAPACITY,
        title="Capacity",
        short="the capacity signal",
        # the default unit's (unit: work); a decision's report and the status write the
        # policy's (CapacityUnit.per_replica_unit, weighted_tokens_per_second_per_replica)
        unit=CapacityUnit.WORK.per_replica_unit,
        symbol=" " + CapacityUnit.WORK.symbol,
        help="forecast demand per replica, seconds of replica work per second "
        "(weighted tokens/s with unit weighted_tokens)",
        sizing=Sizing.DERIVED,
        reads=None,
        target_field="target_utilization",
        panel=PanelSpec(
            "Capacity: forecast demand per replica (work s/s) vs capacity x utilization",
            "short",
        ),
        default_with=SignalName.TTFT_P95,
    ),
)

_BY_NAME: dict[SignalName, SignalSpec] = {s.name: s for s in SPECS}


def spec(name: SignalName) -> SignalSpec:
    """The registry's entry of ``name``."""
    return _BY_NAME[name]


def histogram_specs() -> tuple[SignalSpec, ...]:
    """The specs read from a latency histogram, in the registry's order."""
    return tuple(s for s in SPECS if s.histogram is not None)
