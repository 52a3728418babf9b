"""The start-up checks: every configured signal's query returns series, and the rate window
holds enough scrapes.

``recommend`` (and any caller that wants to fail loudly at start) runs
:func:`check_configured_queries` once before the first round: a signal whose query fails, or
whose selector returns no series at all, is a configuration problem (a renamed metric, a
wrong selector, a Deployment that does not exist) rather than an outage to ride out.
:func:`check_rate_window` (``run`` and ``recommend``) finds the pods' scrape interval and
names a ``rate()`` window shorter than four of them, which silently yields no TTFT.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaler.config.policy import TargetPolicy
from scaler.config.vocabulary import SignalName
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.answers import QueryOutcome, http_status_text
from scaler.sources.prometheus.http import url_hint
from scaler.sources.prometheus.source import PrometheusSource
from scaler.sources.prometheus.ttft import MIN_SCRAPES_PER_WINDOW
from scaler.sources.promql import SIGNAL_QUERY, QueryKind, build_query_plan, target_selector

__all__ = [
    "MIN_SCRAPES_PER_LOOKBACK",
    "ConfiguredQueryProblem",
    "LookbackProblem",
    "RateWindowProblem",
    "check_configured_queries",
    "check_lookback",
    "check_rate_window",
    "probe_problem",
    "problem_line",
]


@dataclass(frozen=True, slots=True)
class ConfiguredQueryProblem:
    """A configured signal whose query returns no series at all (or fails).

    Attributes:
        target: target key.
        signal: the signal.
        status: ``absent`` (other vLLM series exist: a renamed or missing metric),
            ``empty`` (nothing at all for the selector), or the failed query's status.
        query: the PromQL of this target alone for that signal (paste it into the
            Prometheus UI to see what it returns).
        detail: a human explanation.
    """

    target: str
    signal: SignalName
    status: SignalStatus
    query: str
    detail: str

    @property
    def no_series(self) -> bool:
        """The query was answered, with no series for the target (``empty``, ``absent``)."""
        return self.status in (SignalStatus.EMPTY, SignalStatus.ABSENT)

    def __str__(self) -> str:
        """One line: ``<target>: signal <signal> has no series (<status>): <detail>; the
        query that returned nothing: <query>``; for a failed query ``<target> <signal>:
        <status>: <detail>; query: <query>``."""
        query = self.query or "(not sent)"
        if self.no_series:
            return (
                f"{self.target}: signal {self.signal} has no series ({self.status}): "
                f"{self.detail}; the query that returned nothing: {query}"
            )
        return f"{self.target} {self.signal}: {self.status}: {self.detail}; query: {query}"


async def check_configured_queries(
    source: PrometheusSource,
    policy_targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot] | None = None,
) -> list[ConfiguredQueryProblem]:
    """Check at start that every enabled signal's query returns series (dry-run).

    A signal fails the check when its query fails or when no series of the target's own
    pods (the snapshot's, by name; with explicit matchers, whatever they pick) is returned,
    before any readiness filtering, unless the reading is ``warming_up`` (every ready pod
    younger than the TTFT rate window: a fresh fleet, not a configuration problem). A
    default-selector target without a snapshot has no pods to attribute series to: it is left
    out, for the caller to report as unreadable.

    Returns:
        The problems, empty when every configured query returns data. The caller should
        fail loudly (log an error naming each query, exit non-zero) when it is not empty;
        ``str(problem)`` is a one-line message naming target, signal, status and query.
    """
    snapshots = snapshots or {}
    # the problems are the caller's to report, once: the read does not log them as well
    result = await source.read(policy_targets, snapshots, log_absent=False)
    problems: list[ConfiguredQueryProblem] = []
    for t in policy_targets:
        # without its pod list a default-selector target has no series to attribute: only a
        # failed query is its problem here, the caller reports the target as unreadable
        unlisted = t.prometheus_matchers is None and t.key not in snapshots
        tr = result.targets[t.key]
        running_found = tr.series_found.get(QueryKind.RUNNING, 0) > 0
        own = build_query_plan(
            [t],
            rate_window_seconds=source.rate_window_seconds,
            native_histograms=source.native_histograms is not False,
            replica_labels=source.replica_labels,
        ).queries
        for name in t.signals.queried():
            kind = SIGNAL_QUERY[name]
            outcome = result.queries.get(kind)
            query = own.get(kind, "")
            histogram = name.spec.histogram
            rate_kind = QueryKind(histogram.rate_query) if histogram is not None else kind
            if not kind.per_pod:
                # Which pods have a latency histogram is the first round's rate query; the
                # second is sent only for targets with requests.
                query = own.get(rate_kind, "")
                if outcome is None or outcome.ok:
                    outcome = result.queries.get(rate_kind)
            if outcome is None or not outcome.ok:
                status = outcome.status if outcome else SignalStatus.EMPTY
                detail = outcome.detail if outcome else "query not sent"
                problems.append(ConfiguredQueryProblem(t.key, name, status, query, detail))
                continue
            if unlisted or tr.series_found.get(kind, 0) > 0:
                continue
            reading = tr.signals.get(name)
            if reading is not None and reading.status is SignalStatus.WARMING_UP:
                continue  # a fresh fleet: the series are younger than the rate window
            if (
                not kind.per_pod
                and reading is not None
                and (reading.status in (SignalStatus.ABSENT, SignalStatus.EMPTY))
            ):
                # names both histogram representations, or a rate window that is too short
                status = reading.status
                detail = reading.detail
            elif running_found:
                status = SignalStatus.ABSENT
                detail = (
                    "its pods' vllm:num_requests_running series exist, so the metric of this "
                    "signal is missing or renamed"
                )
            else:
                status = SignalStatus.EMPTY
                detail = _whose(t, snapshots)
            problems.append(ConfiguredQueryProblem(t.key, name, status, query, detail))
    return problems


def _whose(t: TargetPolicy, snapshots: Mapping[str, WorkloadSnapshot]) -> str:
    """Whose series were looked for, for the message of a signal without any."""
    if t.prometheus_matchers is not None:
        return f"no vLLM series match its selector {{{target_selector(t)}}}"
    snap = snapshots[t.key]
    return (
        f"none of its {len(snap.pods)} pods (selector {snap.selector or 'none'} in namespace "
        f"{snap.namespace}) has vLLM series"
    )


@dataclass(frozen=True, slots=True)
class RateWindowProblem:
    """A ``rate()`` window shorter than :data:`~scaler.sources.prometheus.ttft.
    MIN_SCRAPES_PER_WINDOW` scrape intervals of a target's pods (seconds both)."""

    target: str
    rate_window_seconds: float
    scrape_interval_seconds: float

    @property
    def minimum_seconds(self) -> float:
        """The shortest window that holds enough scrapes."""
        return MIN_SCRAPES_PER_WINDOW * self.scrape_interval_seconds

    def __str__(self) -> str:
        return (
            f"{self.target}: rate window {self.rate_window_seconds:g}s is shorter than "
            f"{MIN_SCRAPES_PER_WINDOW} scrape intervals (its pods are scraped every "
            f"{self.scrape_interval_seconds:g}s): rate() finds fewer than two samples in some "
            "windows, so TTFT is empty or flickers; set rate_window_seconds to at least "
            f"{self.minimum_seconds:g}"
        )


#: Scrape intervals the instant-query lookback must span at least: a sample is found for
#: this long after its scrape, and the next scrape comes an interval later (or more: a
#: slow or failed scrape).
MIN_SCRAPES_PER_LOOKBACK = 2


@dataclass(frozen=True, slots=True)
class LookbackProblem:
    """An instant-query lookback shorter than :data:`MIN_SCRAPES_PER_LOOKBACK` scrape
    intervals of a target's pods (seconds both): its gauges vanish between scrapes."""

    target: str
    lookback_seconds: float
    scrape_interval_seconds: float

    def __str__(self) -> str:
        least = MIN_SCRAPES_PER_LOOKBACK * self.scrape_interval_seconds
        return (
            f"{self.target}: the query backend's lookback ({self.lookback_seconds:g}s, "
            f"--query.lookback-delta) is shorter than {MIN_SCRAPES_PER_LOOKBACK} scrape "
            f"intervals of its pods (scraped every {self.scrape_interval_seconds:g}s): "
            "between scrapes an instant query finds no sample, so queue depth and KV cache "
            "read empty or partial in some cycles and hold every scale-down; set "
            f"--query.lookback-delta to at least {least:g}s (the default is 5m)"
        )


async def check_lookback(
    source: PrometheusSource, scrape_intervals: Mapping[str, float]
) -> list[LookbackProblem]:
    """The targets whose pods are scraped less often than the backend's lookback allows
    (:meth:`~scaler.sources.prometheus.PrometheusSource.lookback_delta_seconds`; none when
    the backend does not say)."""
    lookback = await source.lookback_delta_seconds()
    if lookback is None:
        return []
    return [
        LookbackProblem(key, lookback, interval)
        for key, interval in sorted(scrape_intervals.items())
        if lookback < MIN_SCRAPES_PER_LOOKBACK * interval
    ]


async def check_rate_window(
    source: PrometheusSource,
    policy_targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot],
) -> list[RateWindowProblem]:
    """Find the scrape interval of each target's pods that enables a latency signal (TTFT, ITL;
    kept by ``source`` for its readings) and return the targets whose rate window is shorter
    than four of them."""
    ttft = [t for t in policy_targets if any(n.latency for n in t.signals.enabled())]
    intervals = await source.probe_scrape_intervals(ttft, snapshots)
    window = source.rate_window_seconds
    return [
        RateWindowProblem(t.key, window, intervals[t.key])
        for t in ttft
        if t.key in intervals and window < MIN_SCRAPES_PER_WINDOW * intervals[t.key]
    ]


def refusal_hint(status: int, auth: str) -> str:
    """``"; <what 401 or 403 means> (authentication: <auth>)"`` for those statuses, else ''.
    ``auth`` is the kind of authentication the requests carry (never a credential)."""
    if status not in _REFUSALS:
        return ""
    return f"; {_REFUSALS[status]} (authentication: {auth})"


#: What a refusal means, by HTTP status, for the start-up probe's message.
_REFUSALS = {
    401: "Prometheus (or the proxy in front of it) did not accept the credentials, or got none",
    403: "the credentials were accepted but may not query (the token's or the tenant's "
    "permissions, the proxy's access rules)",
}


def probe_problem(outcome: QueryOutcome, url: str, auth: str) -> str:
    """The start-up probe's failure in one line (:func:`problem_line` of the outcome)."""
    return problem_line(outcome.status, outcome.detail, outcome.http_status, url, auth)


def problem_line(
    status: SignalStatus, detail: str, http_status: int | None, url: str, auth: str
) -> str:
    """A failed query of Prometheus in one line, the same in every command: naming the URL
    (give it without a password, :func:`~scaler.config.settings.redact_url`), the HTTP status
    with its reason phrase and the server's message, and for 401 and 403 what they mean and
    the kind of authentication the requests carry (``auth``, never a credential); an answer
    that is not Prometheus' API, and a server that cannot be reached, each said as such; and
    what to change in a URL with ``/api/v1`` or in an ``https://`` one that reached plain
    http (:func:`~scaler.sources.prometheus.http.url_hint`)."""
    if http_status is not None and not 200 <= http_status < 300:
        phrase = http_status_text(http_status)
        said = detail.removeprefix(f"HTTP {phrase}: ")
        hints = refusal_hint(http_status, auth) + url_hint(url, http_status, detail)
        return f"Prometheus at {url} answered HTTP {phrase}: {said}{hints}"
    if status in (SignalStatus.TRANSPORT, SignalStatus.TIMEOUT):
        hint = url_hint(url, None, detail)
        return f"Prometheus at {url} cannot be reached: {status}: {detail}{hint}"
    return (
        f"Prometheus at {url} does not answer as Prometheus' HTTP API: {status}: "
        f"{detail} (check the URL and its path prefix)"
    )
