"""A target's request and token throughput, per ready pod, from the throughput query (pure).

The query (:data:`~scaler.sources.promql.QueryKind.THROUGHPUT`) gives, per pod and summed
over vLLM's engines, the per-second rates over the rate window ``W`` of three counters that
every vLLM version exports: ``vllm:request_success_total`` (finished requests, every
``finished_reason``), ``vllm:prompt_tokens_total`` (prefill tokens) and
``vllm:generation_tokens_total`` (generated tokens). :func:`read_throughput` keeps the target's
live, ready pods that have all three as finite, non-negative rates, and names what is wrong
with the others the way the signals do: missing data is never read as zero throughput.

Two readers: the stall detector (:mod:`.stalls`: zero tokens tell a frozen gauge from a busy
pod) and a target's demand (requests, prompt tokens and generated tokens per second: the sum
over :attr:`Throughput.pods`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.answers import QueryOutcome
from scaler.sources.prometheus.split import SeriesFault
from scaler.sources.promql import (
    DECODE_TIME_METRIC,
    GENERATION_TOKENS_METRIC,
    PREFILL_TIME_METRIC,
    PREFIX_CACHE_HITS_METRICS,
    PROMPT_TOKENS_METRIC,
    REQUESTS_METRIC,
    THROUGHPUT_METRICS,
)

__all__ = ["PodRates", "Throughput", "read_throughput"]


@dataclass(frozen=True, slots=True)
class PodRates:
    """Per-second rates of one pod's vLLM counters over the rate window, summed over engines.

    Attributes:
        requests_per_second: ``rate(vllm:request_success_total[W])``: finished requests per
            second, aborted ones included.
        prompt_tokens_per_second: ``rate(vllm:prompt_tokens_total[W])``: prefill tokens per
            second.
        generation_tokens_per_second: ``rate(vllm:generation_tokens_total[W])``: generated
            tokens per second.
        cached_prompt_tokens_per_second: ``rate(vllm:prefix_cache_hits_total[W])`` (older:
            ``vllm:gpu_prefix_cache_hits_total``): prompt tokens found in the prefix cache,
            not computed; None when the pod exports neither or its rate is not a finite
            number >= 0 (every prompt token then counts as computed).

        prefill_seconds_per_second: ``rate(vllm:request_prefill_time_seconds_sum[W])``, the
            requests' prefill phase, seconds per second; None when not exported or not a
            finite number >= 0 (the price fit then learns nothing from the pod).
        decode_seconds_per_second: ``rate(vllm:request_decode_time_seconds_sum[W])``, the
            requests' decode phase, seconds per second; None as above.
    """

    requests_per_second: float
    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    cached_prompt_tokens_per_second: float | None = None
    prefill_seconds_per_second: float | None = None
    decode_seconds_per_second: float | None = None

    @property
    def tokens_per_second(self) -> float:
        """Prefill plus generated tokens per second; exactly 0 when the engine did no work
        in the whole window."""
        return self.prompt_tokens_per_second + self.generation_tokens_per_second

    @classmethod
    def sum(cls, rates: Iterable[PodRates]) -> PodRates:
        """The rates of several pods added up (a target's throughput)."""
        rs = list(rates)
        return cls(
            requests_per_second=math.fsum(r.requests_per_second for r in rs),
            prompt_tokens_per_second=math.fsum(r.prompt_tokens_per_second for r in rs),
            generation_tokens_per_second=math.fsum(r.generation_tokens_per_second for r in rs),
        )


@dataclass(frozen=True, slots=True)
class Throughput:
    """One target's throughput this cycle.

    Attributes:
        status: ``ok`` when every ready pod has its three rates; ``partial`` when some lack
            one (a pod ready for less than two scrapes has no ``rate()`` yet); ``empty``
            when no ready pod has them (all just started, counters not exported, or the
            query not sent); the query's failure status; or, for one
            of its ready pods, ``duplicate_series``, ``bad_response``, ``nan``, ``inf`` or
            ``negative`` (that pod is then left out, the others are kept).
        pods: ready pod -> its rates, for the pods whose three rates are usable.
        missing: ready pods without usable rates.
        detail: explanation of a status other than ``ok``.
    """

    status: SignalStatus
    pods: Mapping[str, PodRates] = field(default_factory=dict)
    missing: frozenset[str] = frozenset()
    detail: str = ""

    @property
    def total(self) -> PodRates | None:
        """The sum over :attr:`pods` (a lower bound unless the status is ``ok``); None when
        no pod has rates."""
        return PodRates.sum(self.pods.values()) if self.pods else None


def _bad(value: float) -> SignalStatus | None:
    if math.isnan(value):
        return SignalStatus.NAN
    if math.isinf(value):
        return SignalStatus.INF
    if value < 0:
        return SignalStatus.NEGATIVE
    return None


def _optional(metrics: Mapping[str, float], name: str) -> float | None:
    """The rate of an optional counter, None when absent or not a finite number >= 0."""
    value = metrics.get(name)
    return value if value is not None and _bad(value) is None else None


def _hits(metrics: Mapping[str, float]) -> float | None:
    """The pod's prefix-cache hits per second, the current counter's name first (None: not
    exported, or not a finite rate >= 0: the prompt tokens then count as computed)."""
    for name in PREFIX_CACHE_HITS_METRICS:
        value = metrics.get(name)
        if value is not None:
            return value if _bad(value) is None else None
    return None


def read_throughput(
    outcome: QueryOutcome | None,
    values: Mapping[str, Mapping[str, float]] | None,
    faults: Mapping[str, SeriesFault],
    ready: frozenset[str],
    just_ready: frozenset[str] = frozenset(),
) -> Throughput:
    """Classify the throughput series of a target's ready pods.

    Args:
        outcome: how the throughput query went (None: not sent).
        values: ready pod -> counter name -> rate per second (None: the query failed).
        faults: ready pod -> the fault of its series in the answer, if any.
        ready: the target's live, ready pods.
        just_ready: those of ``ready`` Ready too recently for ``rate()`` to have two samples
            of them: without rates they are named in the detail but keep the status ``ok``
            (they have served next to nothing yet; they stay in ``missing``, so nothing is
            learned from the window).

    Returns:
        A :class:`Throughput`; never raises.
    """
    if outcome is None or values is None:
        status = outcome.status if outcome else SignalStatus.EMPTY
        detail = outcome.detail if outcome else "query not sent"
        return Throughput(status, missing=ready, detail=f"throughput query: {detail}")
    pods: dict[str, PodRates] = {}
    problem: tuple[SignalStatus, str] | None = None
    for pod in sorted(ready):
        fault = faults.get(pod)
        if fault is not None:
            problem = problem or (fault.status, f"pod {pod}: {fault.detail}")
            continue
        metrics = values.get(pod)
        if metrics is None or any(m not in metrics for m in THROUGHPUT_METRICS):
            continue
        for m in THROUGHPUT_METRICS:
            bad = _bad(metrics[m])
            if bad is not None:
                problem = problem or (bad, f"pod {pod}: {m} rate {metrics[m]!r}")
                break
        else:
            pods[pod] = PodRates(
                requests_per_second=metrics[REQUESTS_METRIC],
                prompt_tokens_per_second=metrics[PROMPT_TOKENS_METRIC],
                generation_tokens_per_second=metrics[GENERATION_TOKENS_METRIC],
                cached_prompt_tokens_per_second=_hits(metrics),
                prefill_seconds_per_second=_optional(metrics, PREFILL_TIME_METRIC),
                decode_seconds_per_second=_optional(metrics, DECODE_TIME_METRIC),
            )
    missing = ready - pods.keys()
    if problem is not None:
        return Throughput(problem[0], pods, missing, problem[1])
    if not ready:
        return Throughput(SignalStatus.EMPTY, detail="no ready pods")
    if not pods:
        # Not ``absent``: right after the pods start, rate() has fewer than two samples.
        return Throughput(
            SignalStatus.EMPTY,
            missing=missing,
            detail=f"no rates of {', '.join(THROUGHPUT_METRICS)} for any of {len(ready)} ready "
            "pods (started less than two scrapes ago, or the counters are not exported)",
        )
    if missing:
        # a pod Ready too recently for two samples has served next to nothing yet: usable
        absent = missing - just_ready
        named = absent or missing
        shown = ", ".join(sorted(named)[:5]) + (" and more" if len(named) > 5 else "")
        why = "have no rates" if absent else "Ready too recently for rates"
        return Throughput(
            SignalStatus.PARTIAL if absent else SignalStatus.OK,
            pods,
            missing,
            f"{len(named)} of {len(ready)} ready pods {why}: {shown}",
        )
    return Throughput(SignalStatus.OK, pods)
