"""Signal readings: what the Prometheus source hands to the decision core.

A reading is the source's verdict on one signal of one target for one control cycle:
a value plus a status that says whether the value may be trusted. The decision core
never sees raw Prometheus answers, only these. The signal names themselves are the shared
vocabulary of :mod:`scaler.config.vocabulary` (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from scaler.config.vocabulary import SignalName

__all__ = ["SignalName", "SignalReading", "SignalStatus"]


class SignalStatus(StrEnum):
    """Outcome of reading one signal for one target.

    Usable statuses:

    - ``ok``: a finite value from every ready pod (per-pod signals) or for the target.
    - ``idle``: no traffic (TTFT quantile is NaN because the request rate is 0): valid,
      and it asks for no capacity.
    - ``partial``: per-pod signal with some ready pods missing series. Usable to scale up
      (missing pods count as zero load, HPA's rule); blocks scale-down.
    - ``saturated``: a quantile read from a histogram that is only a lower bound: the rank
      fell in the ``+Inf`` bucket, so the value is the largest finite bucket bound and the
      true quantile is at least that, size unknown (``histogram_quantile`` clamps). Usable
      to scale up (above its target it asks for the largest step a latency signal may take);
      blocks scale-down.
    - ``frozen``: per-pod signal with some ready pods whose values stopped moving: their
      queue, running requests and KV-cache usage bit-identical over several polls while they
      produced no token (vLLM refreshes those gauges only when the engine steps). Those pods
      count as zero load: usable to scale up on the others, blocks scale-down.
    - ``hung``: per-pod signal with some ready pods whose queue does not drain while they
      produce no token (an engine that no longer steps). As ``frozen``: those pods count as
      zero load (their queue is not load more replicas can serve), blocks scale-down.

    Unusable statuses (the signal is invalid this cycle; never read as zero):

    - ``empty``: the query answered success with no series for this target.
    - ``warming_up``: no series yet because the target's pods have been ready for less than
      the ``rate()`` window (a fresh fleet: a rate needs two scrapes in the window). Not a
      fault, and not idle either (requests may have arrived); it clears by itself.
    - ``absent``: no series for this signal although other vLLM series prove the pods are
      scraped (a configuration problem such as a renamed metric, not an outage).
    - ``nan`` / ``inf``: a non-finite value (TTFT NaN while requests flow is ``nan``).
    - ``negative``: a value below zero where none can be.
    - ``out_of_range``: a value beyond its domain where the metric has one: a KV-cache usage
      above 1 (a percent, 0-100, from an engine, simulator or recording rule that is not
      vLLM's 0-1 ratio).
    - ``query_error``: Prometheus answered ``status: error`` (bad query, evaluation timeout).
    - ``http_error``: a non-2xx HTTP status without a usable body.
    - ``timeout``: the HTTP request timed out on our side.
    - ``transport``: the connection failed (refused, reset, DNS).
    - ``bad_response``: the body was not the Prometheus API's JSON shape, or one of this
      target's series was malformed (a bad sample value, a label map that is not one).
    - ``duplicate_series``: the answer held two series for one of this target's pods (or
      one of its TTFT buckets twice): which one is right cannot be told. Only that target
      is affected.

    Neither usable nor blocking:

    - ``learning``: the capacity signal has no estimate of a replica's capacity yet (no seed,
      no busy cycle within the TTFT target): it asks for nothing and, unlike an unusable
      reading, holds back no scale-down (the other signals decide as they would without it).

    A signal the policy switches off has no reading at all.
    """

    OK = "ok"
    IDLE = "idle"
    PARTIAL = "partial"
    EMPTY = "empty"
    WARMING_UP = "warming_up"
    ABSENT = "absent"
    NAN = "nan"
    INF = "inf"
    NEGATIVE = "negative"
    OUT_OF_RANGE = "out_of_range"
    QUERY_ERROR = "query_error"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    TRANSPORT = "transport"
    BAD_RESPONSE = "bad_response"
    FROZEN = "frozen"
    HUNG = "hung"
    DUPLICATE_SERIES = "duplicate_series"
    SATURATED = "saturated"
    LEARNING = "learning"

    @property
    def usable_for_scale_up(self) -> bool:
        """True when the value may drive a scale-up."""
        return self in _USABLE_FOR_SCALE_UP

    @property
    def usable_for_scale_down(self) -> bool:
        """True when the value may drive (or allow) a scale-down."""
        return self in (SignalStatus.OK, SignalStatus.IDLE)

    @property
    def blocks_scale_down(self) -> bool:
        """True when a signal with this status holds every scale-down back (HPA's rule for an
        invalid metric); ``learning`` asks for nothing and blocks nothing."""
        return not self.usable_for_scale_down and self is not SignalStatus.LEARNING


_USABLE_FOR_SCALE_UP = frozenset(
    {
        SignalStatus.OK,
        SignalStatus.IDLE,
        SignalStatus.PARTIAL,
        SignalStatus.FROZEN,
        SignalStatus.HUNG,
        SignalStatus.SATURATED,
    }
)


@dataclass(frozen=True, slots=True)
class SignalReading:
    """One signal of one target in one cycle, as the source read it.

    Attributes:
        name: which signal.
        status: the outcome; see :class:`SignalStatus`.
        value: for per-pod signals the **sum** over the target's live, ready pods that have
            data and are neither frozen nor hung (waiting requests; KV-cache usage as a sum
            of 0-1 ratios); for ``ttft_p95`` the quantile in seconds (for ``saturated`` a
            lower bound of it). ``None`` when the status is not usable.
        pods_with_data: ready pods whose series were found (per-pod signals; 0 otherwise).
        pods_missing: ready pods with no series (per-pod signals; 0 otherwise).
        source_metric: the vLLM metric name the value came from (for the KV-cache rename).
        detail: a short human explanation of a non-``ok`` status (or of what an ``ok``
            value rests on, such as mixed bucket layouts).
        mixed_layouts: for a latency quantile, the histograms' bucket layouts when they differ
            (``mixed bucket layouts: 6 of the 23 bounds ...``): the value was read on the
            bounds they all have; '' for one layout.
    """

    name: SignalName
    status: SignalStatus
    value: float | None = None
    pods_with_data: int = 0
    pods_missing: int = 0
    source_metric: str = ""
    detail: str = ""
    mixed_layouts: str = ""
