"""Each target's demand history for the seasonal forecast: range queries of its throughput.

The seasonal forecast (:mod:`scaler.core.seasonal`) is fitted on up to 14 days of a target's
demand at a coarse step: each step's peak, the highest one-minute rate inside it (a replica
fleet is sized for the peak of a window, not its mean: a burst of a minute and a half averaged
over ten minutes reads as a fifth of itself). History has no pod lists, so a target's series
are read by its :func:`~scaler.sources.promql.target_selector` (its matchers, or a regex on
its workload's pod names), as the backtest reads them. One range query per batch of targets
(``POST /api/v1/query_range``) asks, per target and counter, for the target's highest
one-minute total rate in each step (a subquery at a one-minute resolution)::

    label_replace(label_replace(max_over_time(sum(rate(vllm:prompt_tokens_total{SEL}[1m]))
        [STEP:1m]),
        "scaler_metric", "vllm:prompt_tokens_total", "", ""), "scaler_target", "t<i>", "", "")
    or ... (the three counters of every target of the batch)
    or label_replace(label_replace(max_over_time(clamp_min(sum(rate(vllm:prompt_tokens_total
        {SEL}[1m])) - sum(rate(vllm:prefix_cache_hits_total{SEL}[1m])), 0)[STEP:1m]), ...)
    or ... (the same with ``vllm:gpu_prefix_cache_hits_total``, older vLLM's name)

The last two are the prompt tokens the engines computed (the prefix-cache hits taken out) in
the busiest minute of the step, the work the live capacity signal prices: each step's rates
become one :class:`~scaler.core.observation.ThroughputReading` (the hits as the prompt less
the computed peak) whose demand is the capacity signal's own pure pricing
(:func:`scaler.core.capacity.demand_of`), so the history is in the live signal's unit
whatever it is and whatever its cost coefficients are. Where no hit counter answers (a vLLM
without them) every prompt token counts as computed, as in the live read; the current name
is preferred where both answer. A step without all three rates is None (a gap, never zero);
a failed query leaves its targets' history None (the caller keeps the last fit).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from scaler.config.policy import TargetPolicy
from scaler.core.capacity import demand_of
from scaler.core.observation import PodLoad, ThroughputReading
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.answers import answer_problem, decode_json
from scaler.sources.prometheus.http import request_problem
from scaler.sources.promql import target_selector
from scaler.sources.promql_parts import (
    GENERATION_TOKENS_METRIC,
    PREFIX_CACHE_HITS_METRICS,
    PROMPT_TOKENS_METRIC,
    REQUESTS_METRIC,
    promql_duration,
)

__all__ = ["DemandHistory", "HistoryRead", "demand_history_query", "read_demand_history"]

_TARGET_LABEL = "scaler_target"
_METRIC_LABEL = "scaler_metric"
_COUNTERS = (REQUESTS_METRIC, PROMPT_TOKENS_METRIC, GENERATION_TOKENS_METRIC)
#: Each hit counter's series is tagged with its name: its values are the computed prompt
#: tokens' peak (the prompt rate less the hits), not the hits.
_COMPUTED = PREFIX_CACHE_HITS_METRICS
#: Targets per range query: an ``or`` of three sub-queries each.
BATCH_TARGETS = 50


@dataclass(frozen=True, slots=True)
class DemandHistory:
    """One target's demand per step, oldest first.

    Attributes:
        values: demand per step in the capacity signal's units (None: a gap).
        step_seconds: the step, seconds.
        end_at: the time of the last step, epoch seconds.
    """

    values: tuple[float | None, ...]
    step_seconds: float
    end_at: float


@dataclass(frozen=True, slots=True)
class HistoryRead:
    """What one refresh read: each target's history (None where its query failed) and the
    failures, one sentence each."""

    histories: dict[str, DemandHistory | None]
    errors: tuple[str, ...] = ()


def demand_history_query(targets: Sequence[TargetPolicy], step_seconds: float) -> str:
    """The range query of one batch of targets (see the module docstring); target ``i`` is
    tagged ``scaler_target="t<i>"``. The counters' peaks are taken separately: their sum
    per step is at most a little above the peak of the sum, on the safe side; the computed
    prompt tokens' peak is the peak of the difference, so that a minute of many hits does
    not take its hits off another minute's prompts."""
    window = promql_duration(step_seconds)
    parts = []

    def tagged(expr: str, metric: str, i: int) -> str:
        expr = f'label_replace({expr}, "{_METRIC_LABEL}", "{metric}", "", "")'
        return f'label_replace({expr}, "{_TARGET_LABEL}", "t{i}", "", "")'

    for i, t in enumerate(targets):
        sel = target_selector(t)
        for c in _COUNTERS:
            parts.append(tagged(f"max_over_time(sum(rate({c}{{{sel}}}[1m]))[{window}:1m])", c, i))
        prompt = f"sum(rate({PROMPT_TOKENS_METRIC}{{{sel}}}[1m]))"
        for hits in _COMPUTED:
            computed = f"clamp_min({prompt} - sum(rate({hits}{{{sel}}}[1m])), 0)"
            parts.append(tagged(f"max_over_time({computed}[{window}:1m])", hits, i))
    return " or ".join(parts)


def _steps(start: float, end: float, step: float) -> list[float]:
    n = math.floor((end - start) / step + 1e-9)
    return [start + k * step for k in range(n + 1)]


def _parse(
    body: Any, targets: Sequence[TargetPolicy], times: list[float], step: float
) -> dict[str, DemandHistory]:
    index = {t: i for i, t in enumerate(times)}
    rates: dict[tuple[int, str], dict[int, float]] = {}
    for s in body.get("data", {}).get("result", []) or []:
        metric = s.get("metric", {})
        tag, counter = metric.get(_TARGET_LABEL, ""), metric.get(_METRIC_LABEL, "")
        if not tag.startswith("t") or (counter not in _COUNTERS and counter not in _COMPUTED):
            continue
        series = rates.setdefault((int(tag[1:]), counter), {})
        for ts, raw in s.get("values", []) or []:
            k = index.get(float(ts))
            try:
                v = float(raw)
            except (TypeError, ValueError):
                continue
            if k is not None and math.isfinite(v) and v >= 0:
                series[k] = v
    out: dict[str, DemandHistory] = {}
    for i, t in enumerate(targets):
        req, prompt, gen = (rates.get((i, c), {}) for c in _COUNTERS)
        computed = [rates.get((i, c), {}) for c in _COMPUTED]
        values: list[float | None] = []
        for k in range(len(times)):
            if k not in req or k not in prompt or k not in gen:
                values.append(None)
                continue
            done = next((c[k] for c in computed if k in c), None)
            # None: no hit counter, every prompt token computed (as the live read counts it)
            hits = None if done is None else max(0.0, prompt[k] - done)
            load = PodLoad(req[k], prompt[k], gen[k], cached_prompt_tokens_per_second=hits)
            reading = ThroughputReading(SignalStatus.OK, {"history": load})
            values.append(demand_of(t, reading)[0])
        out[t.key] = DemandHistory(tuple(values), step, times[-1])
    return out


async def read_demand_history(
    client: httpx.AsyncClient,
    base_url: str,
    targets: Sequence[TargetPolicy],
    *,
    end: float,
    history_seconds: float,
    step_seconds: float,
    timeout_seconds: float,
) -> HistoryRead:
    """Read every target's demand history, batched (:data:`BATCH_TARGETS` per query).

    Args:
        client: the source's HTTP client.
        base_url: Prometheus' base URL (``/api/v1/query_range`` is added).
        targets: the targets.
        end: the last step, epoch seconds (aligned down to the step, so that refits see the
            same windows).
        history_seconds: how far back, seconds (14 days: both ends are steps, so a weekly
            season of exactly half the series still fits).
        step_seconds: the step and the ``rate()`` window, seconds.
        timeout_seconds: per query.

    Returns:
        A :class:`HistoryRead`; never raises for network or Prometheus faults.
    """
    end = math.floor(end / step_seconds) * step_seconds
    start = end - history_seconds
    times = _steps(start, end, step_seconds)
    url = base_url.rstrip("/") + "/api/v1/query_range"
    histories: dict[str, DemandHistory | None] = {}
    errors: list[str] = []
    for b in range(0, len(targets), BATCH_TARGETS):
        batch = targets[b : b + BATCH_TARGETS]
        query = demand_history_query(batch, step_seconds)
        form = {
            "query": query,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{step_seconds:g}",
            "timeout": promql_duration(timeout_seconds),
        }
        problem: tuple[SignalStatus, str] | None
        try:
            async with asyncio.timeout(timeout_seconds):
                resp = await client.post(url, data=form, timeout=timeout_seconds)
        except (OSError, httpx.HTTPError) as err:
            problem = request_problem(err, timeout_seconds)
        else:
            body: Any
            try:
                body = decode_json(resp.content)
            except ValueError:
                body = None  # answer_problem names what it is
            problem = answer_problem(resp.status_code, body, resp.text.__str__)
        if problem is not None:
            keys = ", ".join(t.key for t in batch)
            errors.append(f"demand history of {keys}: {problem[0]}: {problem[1]}")
            histories.update({t.key: None for t in batch})
            continue
        histories.update(_parse(body, batch, times, step_seconds))
    return HistoryRead(histories, tuple(errors))
