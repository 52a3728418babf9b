"""A backend's per-query limit hit by the fleet-wide queries: split them, never lose the fleet.

The source reads every target in a constant number of queries (:mod:`scaler.sources.promql`),
so one query selects the series of every namespace at once. Query backends limit what one
query may touch: Prometheus' ``--query.max-samples``, Mimir's ``max_fetched_series_per_query``
and ``max_fetched_chunk_bytes_per_query`` (``err-mimir-max-series-per-query``...), Thanos'
``--query.max-series``/store limits, VictoriaMetrics' ``-search.maxUniqueTimeseries`` and
``-search.maxSamplesPerQuery``. Past it the whole answer is an error, and every target of the
fleet loses that signal because of how many the others are.

When a first-round answer is refused for a limit, the source reads the targets again in two
halves, split by their selectors (whole namespaces for the default selector), each half with
the same queries over fewer series, halving again while a half is still refused (at most
:data:`MAX_SPLITS` levels); the targets that alone exceed the limit keep the error, with the
backend's message naming its limit. The halves are remembered: later cycles read in them
directly, until the targets change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from scaler.config.policy import TargetPolicy
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.answers import QueryOutcome
from scaler.sources.promql import query_selector

__all__ = ["LIMIT_PATTERN", "MAX_SPLITS", "halves", "limited"]

#: Levels of halving at most (up to 2^6 = 64 parts in a cycle).
MAX_SPLITS = 6

#: The messages of per-query limits of Prometheus, Mimir/Cortex, Thanos and VictoriaMetrics.
LIMIT_PATTERN = re.compile(
    r"too many samples|max[-_ ]?samples|exceeded the maximum number of"
    r"|err-mimir-max-|max[-_]fetched|exceeded series limit|series limit"
    r"|maxUniqueTimeseries|maxSamplesPerQuery|maxSeries|limit of \d+ series"
    r"|query processing would load too many",
    re.IGNORECASE,
)


def limited(outcome: QueryOutcome) -> bool:
    """The answer was refused for a per-query limit of the backend."""
    if outcome.status not in (SignalStatus.QUERY_ERROR, SignalStatus.HTTP_ERROR):
        return False
    return LIMIT_PATTERN.search(outcome.detail) is not None


def halves(
    targets: Sequence[TargetPolicy],
) -> tuple[list[TargetPolicy], list[TargetPolicy]] | None:
    """``targets`` in two parts by selector (a namespace never split between them, so a part
    selects fewer series), about half the targets each; None when they share one selector."""
    by_selector: dict[str, list[TargetPolicy]] = {}
    for t in targets:
        by_selector.setdefault(query_selector(t), []).append(t)
    groups = sorted(by_selector.values(), key=lambda g: (-len(g), g[0].key))
    if len(groups) < 2:
        return None
    first: list[TargetPolicy] = []
    second: list[TargetPolicy] = []
    for g in groups:  # largest first, each to the smaller part
        (first if len(first) <= len(second) else second).extend(g)
    return first, second
