"""An emulated Prometheus in virtual time: scrapes, staleness, instant and range queries.

What it reproduces of Prometheus 2.x, because the decision core's inputs depend on it:

- each replica is a scrape target from the moment it is Ready until its pod is deleted
  (vLLM's API server serves ``/metrics`` only after the model is loaded; a terminating pod is
  still discovered and scraped while it drains, as with pod or endpoints discovery);
- every target is scraped every ``scrape_interval_seconds`` at its own fixed offset
  (Prometheus spreads targets over the interval by hashing them); the offset here is
  ``crc32(pod name) mod interval`` in whole seconds, so runs are deterministic;
- a deleted pod's series get a staleness marker at the deletion time: instant queries stop
  returning them at once, while ``rate()`` still uses the samples before the marker;
- instant queries return a series' newest sample within the 5-minute lookback delta;
- ``rate()`` uses the samples in ``[t - W, t]`` with Prometheus' extrapolation
  (:func:`scaler.bench.promql.extrapolated_rate`); the TTFT quantile is the production
  source's, computed from the bucket rates answered here.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import deque
from collections.abc import Container, Iterable
from dataclasses import dataclass, field

from scaler.bench.promql import extrapolated_rate
from scaler.sim.exposition import TTFT_BUCKETS
from scaler.sim.fleet import SimPod

__all__ = ["LOOKBACK_DELTA_SECONDS", "PodSample", "ScrapedSeries", "Tsdb"]

#: Prometheus' default ``--query.lookback-delta``, seconds.
LOOKBACK_DELTA_SECONDS = 300.0
# Samples are kept at least this long (the lookback delta and any rate window up to 10 min,
# with a margin), longer when the longest rate window queried needs it.
_RETENTION_SECONDS = 900.0
# What is kept beyond the longest rate window: a scrape interval's worth and more.
_RETENTION_MARGIN_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class PodSample:
    """One scrape of one replica (time in seconds; gauges and counters as vLLM exports them).

    Attributes:
        t: scrape time, seconds.
        waiting: ``vllm:num_requests_waiting``.
        running: ``vllm:num_requests_running``.
        kv_usage: ``vllm:kv_cache_usage_perc`` (0-1).
        ttft_buckets: cumulative ``vllm:time_to_first_token_seconds_bucket`` counts, one per
            bound of :data:`~scaler.sim.exposition.TTFT_BUCKETS` then ``+Inf``.
        ttft_count: ``vllm:time_to_first_token_seconds_count``.
        requests: ``vllm:request_success_total`` summed over ``finished_reason``.
        prompt_tokens: ``vllm:prompt_tokens_total``.
        generation_tokens: ``vllm:generation_tokens_total``.
        prefix_cache_hits: ``vllm:prefix_cache_hits_total`` (prompt tokens found in the
            prefix cache).
        asleep: ``1 - vllm:engine_sleep_state{sleep_state="awake"}``: 1 while the engine is
            in sleep mode.
        prefill_seconds, decode_seconds: ``vllm:request_prefill_time_seconds_sum`` and
            ``vllm:request_decode_time_seconds_sum`` (the requests' phase times).
    """

    t: float
    waiting: float
    running: float
    kv_usage: float
    ttft_buckets: tuple[float, ...]
    ttft_count: float
    requests: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    prefix_cache_hits: float = 0.0
    asleep: float = 0.0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0


@dataclass(slots=True)
class ScrapedSeries:
    """Everything scraped from one pod."""

    pod: str
    offset: float
    samples: deque[PodSample] = field(default_factory=deque)
    stale_at: float | None = None

    def latest(self, t: float) -> PodSample | None:
        """The sample an instant query at ``t`` sees, or None (stale, too old, none)."""
        if not self.samples:
            return None
        s = self.samples[-1]
        if s.t > t:  # only when querying the past, which the bench never does
            older = [x for x in self.samples if x.t <= t]
            if not older:
                return None
            s = older[-1]
        if self.stale_at is not None and self.stale_at <= t and self.stale_at >= s.t:
            return None
        if t - s.t > LOOKBACK_DELTA_SECONDS:
            return None
        return s

    def in_range(self, start: float, end: float) -> list[PodSample]:
        """Samples with ``start <= t <= end`` (Prometheus 2.x range selection)."""
        return [s for s in self.samples if start <= s.t <= end]


_BOUNDS: tuple[float, ...] = (*TTFT_BUCKETS, math.inf)


class Tsdb:
    """Scraped series of a simulated fleet, queryable as Prometheus would answer.

    Args:
        scrape_interval_seconds: Prometheus' ``scrape_interval`` (whole seconds; the bench
            ticks once per second).
        longest_window_seconds: the longest ``rate()`` window that will be queried, seconds:
            samples are kept that long (and a margin), as Prometheus' retention would hold them.

    Raises:
        ValueError: ``scrape_interval_seconds`` < 1.
    """

    def __init__(
        self, scrape_interval_seconds: int = 15, *, longest_window_seconds: float = 0.0
    ) -> None:
        if scrape_interval_seconds < 1:
            raise ValueError("scrape_interval_seconds must be >= 1")
        self.scrape_interval_seconds = scrape_interval_seconds
        self.retention_seconds = max(
            _RETENTION_SECONDS, longest_window_seconds + _RETENTION_MARGIN_SECONDS
        )
        self.series: dict[str, ScrapedSeries] = {}

    def _offset(self, pod: str) -> float:
        return float(zlib.crc32(pod.encode()) % self.scrape_interval_seconds)

    def scrape(self, pods: Iterable[SimPod], t: float) -> None:
        """Scrape, at second ``t``, every target whose offset falls on ``t``.

        ``pods`` are the pods that exist (live or terminating); ready ones are targets. The
        caller must have advanced their engines to ``t``. Pods that disappeared since the
        last call get their staleness marker at their deletion time.
        """
        present: set[str] = set()
        for pod in pods:
            present.add(pod.name)
            if pod.ready_at is None or pod.metrics is None:
                continue
            s = self.series.get(pod.name)
            if s is None:
                s = self.series[pod.name] = ScrapedSeries(pod.name, self._offset(pod.name))
            if (round(t) - s.offset) % self.scrape_interval_seconds != 0:
                continue
            pod.engine.sync_gauges()  # a lean export brings its gauges up to date when read
            m = pod.metrics
            s.samples.append(
                PodSample(
                    t=t,
                    waiting=float(m.num_requests_waiting),
                    running=float(m.num_requests_running),
                    kv_usage=m.kv_cache_usage,
                    ttft_buckets=tuple(float(c) for c in itertools.accumulate(m.ttft.counts)),
                    ttft_count=float(m.ttft.count),
                    requests=float(sum(m.request_success.values())),
                    prompt_tokens=float(m.prompt_tokens),
                    generation_tokens=float(m.generation_tokens),
                    prefix_cache_hits=float(m.prefix_cache_hits),
                    asleep=1.0 if m.sleep_level else 0.0,
                    prefill_seconds=m.prefill_time.sum,
                    decode_seconds=m.decode_time.sum,
                )
            )
        for name, s in list(self.series.items()):
            if s.stale_at is None and name not in present:
                s.stale_at = t
            while s.samples and s.samples[0].t < t - self.retention_seconds:
                s.samples.popleft()
            if s.stale_at is not None and not s.samples:
                del self.series[name]

    # ------------------------------------------------------------------ queries
    def instant(self, t: float) -> dict[str, PodSample]:
        """Pod -> the sample an instant query at ``t`` returns (non-stale pods only)."""
        out: dict[str, PodSample] = {}
        for name, s in self.series.items():
            latest = s.latest(t)
            if latest is not None:
                out[name] = latest
        return out

    def sum_waiting(self, t: float) -> float | None:
        """``sum(vllm:num_requests_waiting)`` at ``t``; None for an empty answer."""
        values = [s.waiting for s in self.instant(t).values()]
        return math.fsum(values) if values else None

    def ttft_rates(
        self, t: float, window: float, pods: Container[str] | None = None
    ) -> list[tuple[float, float]] | None:
        """``sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[W]))`` at ``t`` over
        ``pods`` (every pod when None): ``(le, rate per second)`` per bucket, ``+Inf`` last.

        Returns None when no pod has two samples in the window (Prometheus answers an empty
        vector).
        """
        sums = [0.0] * len(_BOUNDS)
        found = False
        start = t - window
        for name, s in self.series.items():
            if pods is not None and name not in pods:
                continue
            pts = s.in_range(start, t)
            if len(pts) < 2:
                continue
            for i in range(len(_BOUNDS)):
                r = extrapolated_rate([(p.t, p.ttft_buckets[i]) for p in pts], start, t)
                if r is not None:
                    sums[i] += r
                    found = True
        if not found:
            return None
        return list(zip(_BOUNDS, sums, strict=True))

    def ttft_histograms(self, t: float, window: float, pods: Container[str]) -> int:
        """``count(rate(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[W]))`` at ``t``
        over ``pods``: the pods with two samples in the window (every simulated replica has
        the same bucket layout, so each bound is on all of them)."""
        start = t - window
        return sum(
            1 for name, s in self.series.items() if name in pods and len(s.in_range(start, t)) >= 2
        )

    def ttft_count_rates(self, t: float, window: float) -> dict[str, float]:
        """Pod -> ``rate(vllm:time_to_first_token_seconds_count[W])`` at ``t`` (pods with two
        samples in the window only, as Prometheus answers)."""
        out: dict[str, float] = {}
        start = t - window
        for name, s in self.series.items():
            pts = s.in_range(start, t)
            rate = extrapolated_rate([(p.t, p.ttft_count) for p in pts], start, t)
            if rate is not None:
                out[name] = rate
        return out

    def counter_rates(
        self, t: float, window: float
    ) -> dict[str, tuple[float, float, float, float, float, float]]:
        """Per pod, ``rate(...[W])`` at ``t`` of finished requests, prompt tokens, generated
        tokens, prefix-cache hits and the prefill and decode phase sums; pods with fewer than
        two samples in the window are left out (as Prometheus leaves them out of
        ``rate()``)."""
        out: dict[str, tuple[float, float, float, float, float, float]] = {}
        start = t - window
        for name, s in self.series.items():
            pts = s.in_range(start, t)
            if len(pts) < 2:
                continue
            req = extrapolated_rate([(p.t, p.requests) for p in pts], start, t)
            prompt = extrapolated_rate([(p.t, p.prompt_tokens) for p in pts], start, t)
            gen = extrapolated_rate([(p.t, p.generation_tokens) for p in pts], start, t)
            hits = extrapolated_rate([(p.t, p.prefix_cache_hits) for p in pts], start, t)
            pre = extrapolated_rate([(p.t, p.prefill_seconds) for p in pts], start, t)
            dec = extrapolated_rate([(p.t, p.decode_seconds) for p in pts], start, t)
            if req is not None and prompt is not None and gen is not None:
                out[name] = (
                    req, prompt, gen, hits if hits is not None else 0.0,
                    pre if pre is not None else 0.0, dec if dec is not None else 0.0,
                )  # fmt: skip
        return out
