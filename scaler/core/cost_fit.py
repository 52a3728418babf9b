"""The capacity signal's prices fitted online to the target's own fleet (pure).

The capacity signal's unit ``work`` prices a replica's work from a profile
(:class:`~scaler.config.signal_specs.CapacityCost`: seconds per computed prompt token, per
generated token and per generated token per token of its context). A profile is one GPU and
one model; a fleet on another GPU, another model or another vLLM prices its work otherwise.
This module scales the profile's two parts, prefill and decode, by factors learned from the
fleet's own vLLM histograms, so that the demand (seconds of work per second) follows what the
work costs where it runs:

- **prefill**: ``rate(vllm:request_prefill_time_seconds_sum[W])`` (the requests' PREFILL
  phase, first scheduling to first token, summed: seconds of prefill per second) against the
  profile's price of the prompt tokens computed in the window
  (``prefill_seconds_per_token x (vllm:prompt_tokens_total - vllm:prefix_cache_hits_total)``).
  Per-request wall times add up to engine time only while a pod prefills one request at a
  time (several prompts sharing a step each count the whole step), so a window is used only
  while the pods' mean prefill concurrency (the rate of the sum, by Little's law) is at most
  :data:`MAX_PREFILL_CONCURRENCY` and its prompts are long enough to fill steps of their own
  (:data:`MIN_PROMPT_TOKENS` computed per request).
- **decode**: ``rate(vllm:request_decode_time_seconds_sum[W])`` (the DECODE phase, first to
  last token: the mean number of sequences decoding, by Little's law) over the generated
  tokens is the time per output token a sequence saw; the profile's own time per output
  token at that batch is ``decode_seconds_per_context_token x kv_cache_tokens`` (a step's read
  of the weights and of a full KV cache, which is how the profile prices a generated token at
  the batch a full cache allows) plus ``decode_seconds_per_token`` per sequence decoding. The
  decode factor is their ratio, from windows whose pods' KV cache is at least
  :data:`MIN_KV_USAGE` full on average (a lightly used cache makes steps faster than the
  profile's full-cache price, which sizes the capacity a replica has when its cache is full).

Each factor is a **ratio of sums** over the windows learned from, each sum decayed by
``exp(-W / HALF_LIFE)`` per window learned (not per second: an idle hour neither teaches nor
forgets), with the profile itself as a prior worth :data:`PRIOR_SECONDS` seconds of work on
both sides (the seed: with no evidence the factor is 1). A window is used only when it is
busy enough (:data:`MIN_WINDOW_SECONDS` of priced work), every number is finite and >= 0,
its measured phase time is above zero (a histogram whose sum stands still while the pods
compute is frozen or not exported: read as evidence, it would price the work at nothing and
drive the factors to their lower bound),
and, after :data:`OUTLIER_AFTER_WINDOWS` windows, its own ratio is within
:data:`OUTLIER_RATIO` of the factor so far (a stalled pod's
frozen counters, a burst of aborted requests); the factor is clamped to
``[1 / MAX_FACTOR, MAX_FACTOR]``: a profile cannot be off by more, and a fault cannot take the
prices further. At most one window per rate window is learned from.

**Why factors on the profile and not free coefficients**: vLLM exports per-request wall times,
not engine time; their sums are engine time only under the conditions above, and a free fit
of three coefficients to them learns the operating point (a lightly loaded replica decodes
each token faster; sized on that, the fleet shrinks until it is not light). Scaling the
profile keeps its shape (the context dependence of a generated token, the prefix-cache hits
left out) and learns only how much faster or slower the fleet runs it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from scaler.config.signal_specs import CapacityCost
from scaler.core.observation import PodLoad, ThroughputReading

__all__ = [
    "HALF_LIFE_SECONDS",
    "MAX_FACTOR",
    "MAX_PREFILL_CONCURRENCY",
    "MIN_KV_USAGE",
    "MIN_PROMPT_TOKENS",
    "MIN_WINDOW_SECONDS",
    "OUTLIER_AFTER_WINDOWS",
    "OUTLIER_RATIO",
    "PRIOR_SECONDS",
    "CostFit",
    "CostWindow",
    "cost_window",
    "learn_cost",
    "priced_cost",
]

#: The decay of the sums, seconds of windows learned from (the fit follows a change of GPU,
#: model or vLLM over about this much busy time).
HALF_LIFE_SECONDS = 1800.0
#: The factors' bounds: ``[1 / MAX_FACTOR, MAX_FACTOR]``.
MAX_FACTOR = 4.0
#: The profile's weight as a prior, seconds of priced work on both sides of each ratio.
PRIOR_SECONDS = 60.0
#: A window teaches only with at least this much priced work (the fleet's, seconds): an idle
#: or nearly idle window's few requests say more about their own luck than about the fleet.
MIN_WINDOW_SECONDS = 5.0
#: A window whose own ratio is further than this factor from the fit's is an outlier.
OUTLIER_RATIO = 3.0
#: The pods' mean prefill concurrency above which per-request prefill times overlap too much
#: to be engine time.
MAX_PREFILL_CONCURRENCY = 1.0
#: The mean computed prompt per finished request below which a window says nothing of the
#: prefill price: a prompt shorter than a step's token budget (vLLM V1's default on GPUs
#: under 70 GiB: 2,048) shares its step, whose whole duration (the weights' read, the decodes
#: beside it) its prefill time counts.
MIN_PROMPT_TOKENS = 2048.0
#: The windows learned from before a window far from the fit counts as an outlier (until
#: then the bounds alone hold it: a profile off by more than the outlier band is learned).
OUTLIER_AFTER_WINDOWS = 10
#: The pods' mean KV-cache usage (0-1) below which a window says nothing of the decode price
#: at a full cache.
MIN_KV_USAGE = 0.5


@dataclass(frozen=True, slots=True)
class CostFit:
    """The fitted scale of the profile's prefill and decode prices (part of the capacity
    memory, persisted with the decision state).

    Attributes:
        prefill_measured, prefill_priced: decayed sums over the windows learned from, seconds
            of prefill measured and priced by the profile (the prior not included).
        decode_measured, decode_priced: the same for decode.
        learned_at: controller time of the last window learned from (None: none).
        windows: windows learned from.
    """

    prefill_measured: float = 0.0
    prefill_priced: float = 0.0
    decode_measured: float = 0.0
    decode_priced: float = 0.0
    learned_at: float | None = None
    windows: int = 0

    @property
    def prefill_factor(self) -> float:
        """Measured over priced prefill seconds, the prior included, within the bounds."""
        return _factor(self.prefill_measured, self.prefill_priced)

    @property
    def decode_factor(self) -> float:
        """Measured over priced decode seconds, the prior included, within the bounds."""
        return _factor(self.decode_measured, self.decode_priced)


def _factor(measured: float, priced: float) -> float:
    ratio = (measured + PRIOR_SECONDS) / (priced + PRIOR_SECONDS)
    return min(MAX_FACTOR, max(1 / MAX_FACTOR, ratio))


@dataclass(frozen=True, slots=True)
class CostWindow:
    """One window's evidence, fleet sums over the pods with the histograms (seconds per
    second; None: the window says nothing of that part)."""

    prefill_measured: float | None
    prefill_priced: float | None
    decode_measured: float | None
    decode_priced: float | None


def priced_cost(profile: CapacityCost, fit: CostFit | None) -> CapacityCost:
    """The profile with the fit's factors applied (the profile itself without a fit)."""
    if fit is None or fit.windows == 0:
        return profile
    p, d = fit.prefill_factor, fit.decode_factor
    return profile.model_copy(
        update={
            "prefill_seconds_per_token": profile.prefill_seconds_per_token * p,
            "decode_seconds_per_token": profile.decode_seconds_per_token * d,
            "decode_seconds_per_context_token": profile.decode_seconds_per_context_token * d,
        }
    )


def _finite(values: Iterable[float | None]) -> list[float] | None:
    out = []
    for v in values:
        if v is None or not math.isfinite(v) or v < 0:
            return None
        out.append(v)
    return out


def cost_window(
    profile: CapacityCost, reading: ThroughputReading | None, window_seconds: float
) -> CostWindow | None:
    """This window's evidence on the prices, or None (no usable reading, or no pod with the
    histograms' rates).

    Only the pods that export both histograms count, each with all its rates finite and >= 0
    (one bad number leaves the pod out: never read as zero); a part whose conditions (module
    docstring) do not hold is None.
    """
    if reading is None or not reading.status.usable_for_scale_up:
        return None
    pods: list[PodLoad] = []
    for pod in reading.pods.values():
        numbers = _finite(
            (
                pod.prefill_seconds_per_second,
                pod.decode_seconds_per_second,
                pod.prompt_tokens_per_second,
                pod.generation_tokens_per_second,
            )
        )
        if numbers is not None:
            pods.append(pod)
    if not pods:
        return None
    n = len(pods)
    prefill = math.fsum(p.prefill_seconds_per_second or 0.0 for p in pods)
    computed = math.fsum(p.computed_prompt_tokens_per_second for p in pods)
    requests = math.fsum(p.requests_per_second for p in pods)
    priced_p = profile.prefill_seconds_per_token * computed
    # A phase histogram whose sum did not move while the pods computed seconds of work is
    # frozen or not exported (a stalled pod, an exporter without it): never "no time spent".
    usable_p = (
        priced_p * window_seconds >= MIN_WINDOW_SECONDS
        and prefill > 0
        and prefill / n <= MAX_PREFILL_CONCURRENCY
        and requests > 0
        and computed / requests >= MIN_PROMPT_TOKENS
    )
    decode = math.fsum(p.decode_seconds_per_second or 0.0 for p in pods)
    generated = math.fsum(p.generation_tokens_per_second for p in pods)
    kv = [p.kv_cache_usage for p in pods]
    kv_known = _finite(kv)
    full = kv_known is not None and math.fsum(kv_known) / n >= MIN_KV_USAGE
    # the profile's time per output token at this batch: a step's read of the weights and a
    # full cache, plus the per-sequence cost of the sequences decoding (decode / n per pod)
    tpot = profile.decode_seconds_per_context_token * profile.kv_cache_tokens + (
        profile.decode_seconds_per_token * decode / n
    )
    priced_d = tpot * generated
    usable_d = full and decode > 0 and priced_d * window_seconds >= MIN_WINDOW_SECONDS
    return CostWindow(
        prefill if usable_p else None,
        priced_p if usable_p else None,
        decode if usable_d else None,
        priced_d if usable_d else None,
    )


def _learn(
    measured: float,
    priced: float,
    window: tuple[float | None, float | None],
    keep: float,
    windows: int,
) -> tuple[float, float, bool]:
    m, p = window
    if m is None or p is None or p <= 0:
        return measured, priced, False
    factor = _factor(measured, priced)
    far = not (factor / OUTLIER_RATIO <= m / p <= factor * OUTLIER_RATIO)
    if far and windows >= OUTLIER_AFTER_WINDOWS:
        return measured, priced, False
    return measured * keep + m, priced * keep + p, True


def learn_cost(
    profile: CapacityCost,
    fit: CostFit,
    reading: ThroughputReading | None,
    now: float,
    *,
    window_seconds: float,
) -> CostFit:
    """``fit`` after this cycle's reading (unchanged when it teaches nothing, or when the last
    window learned from is less than a rate window old: consecutive cycles share most of it).

    Args:
        profile: the policy's ``capacity.cost``.
        fit: the fit so far.
        reading: this cycle's throughput reading (None: none).
        now: the controller's clock, seconds.
        window_seconds: the ``rate()`` window of the throughput query, seconds.
    """
    if fit.learned_at is not None and 0 <= now - fit.learned_at < window_seconds:
        return fit
    w = cost_window(profile, reading, window_seconds)
    if w is None:
        return fit
    keep = math.exp(-window_seconds * math.log(2) / HALF_LIFE_SECONDS)
    # sums of seconds of work per second, as seconds over the window
    scale = window_seconds
    pm, pp, p_ok = _learn(
        fit.prefill_measured,
        fit.prefill_priced,
        _times(w.prefill_measured, w.prefill_priced, scale),
        keep,
        fit.windows,
    )
    dm, dp, d_ok = _learn(
        fit.decode_measured,
        fit.decode_priced,
        _times(w.decode_measured, w.decode_priced, scale),
        keep,
        fit.windows,
    )
    if not (p_ok or d_ok):
        return fit
    return replace(
        fit,
        prefill_measured=pm,
        prefill_priced=pp,
        decode_measured=dm,
        decode_priced=dp,
        learned_at=now,
        windows=fit.windows + 1,
    )


def _times(m: float | None, p: float | None, scale: float) -> tuple[float | None, float | None]:
    return (None if m is None else m * scale, None if p is None else p * scale)
