"""Read vLLM signals for every target from Prometheus, with every failure named.

Missing data is never read as zero: an empty answer is ``empty``, a signal missing while the
pods are provably scraped is ``absent``, and every transport, HTTP, query and parsing fault
has its own :class:`~scaler.core.signals.SignalStatus`.

- :mod:`.http`: the HTTP clients built from the Prometheus settings (TLS, bearer token file,
  headers, timeout) and one instant query.
- :mod:`.answers`: the API's answers checked and parsed (sample values, instant vectors).
- :mod:`.split`: one cycle's answers split back per selector group and per target; a bad
  series is a fault of its own pod, target or recorded pod group only.
- :mod:`.throughput`: a target's per-pod request and token rates.
- :mod:`.stalls`: values that stopped moving (frozen gauges, hung engines), across polls.
- :mod:`.readings`: each target's readings from the split answers (pure; the backtest
  replays history through it too).
- :mod:`.source`: :class:`PrometheusSource`, the three joined for the control loop.
- :mod:`.attribution`: which pods are a target's (listed now, or until recently).
- :mod:`.histograms`: the latency histograms' second round (TTFT, ITL: every histogram spec of
  the registry) and their readings; :mod:`.ttft` is TTFT's instance of it.
- :mod:`.check`: the start-up checks (every configured query returns series; the rate
  window holds four scrapes).
- :mod:`.backend`: what the backend supports (the native-histogram functions), asked once by
  every command that reads it.

The names below are the package's public API.
"""

from scaler.sources.prometheus.answers import (
    Answer,
    AnswerError,
    BadSeries,
    QueryOutcome,
    answer_problem,
    error_answer_detail,
    not_prometheus_detail,
    parse_sample_value,
)
from scaler.sources.prometheus.check import (
    ConfiguredQueryProblem,
    LookbackProblem,
    RateWindowProblem,
    check_configured_queries,
    check_lookback,
    check_rate_window,
    probe_problem,
    problem_line,
    refusal_hint,
)
from scaler.sources.prometheus.http import (
    BearerTokenFileAuth,
    TokenFileError,
    build_http_client,
    client_for,
    read_bearer_token,
    request_problem,
    sync_client_for,
    url_hint,
)
from scaler.sources.prometheus.readings import (
    DroppedSeries,
    DropReason,
    TargetReadings,
    read_targets,
)
from scaler.sources.prometheus.source import PrometheusSource, SourceResult
from scaler.sources.prometheus.split import (
    PodSeries,
    SeriesFault,
    SplitAnswers,
    Unattributed,
    split_answers,
)
from scaler.sources.prometheus.stalls import (
    STALL_POLLS,
    PodGauges,
    PodHistory,
    PodStall,
    StallKind,
    track_stalls,
)
from scaler.sources.prometheus.throughput import PodRates, Throughput, read_throughput

__all__ = [
    "STALL_POLLS",
    "Answer",
    "AnswerError",
    "BadSeries",
    "BearerTokenFileAuth",
    "ConfiguredQueryProblem",
    "DropReason",
    "DroppedSeries",
    "LookbackProblem",
    "PodGauges",
    "PodHistory",
    "PodRates",
    "PodSeries",
    "PodStall",
    "PrometheusSource",
    "QueryOutcome",
    "RateWindowProblem",
    "SeriesFault",
    "SourceResult",
    "SplitAnswers",
    "StallKind",
    "TargetReadings",
    "Throughput",
    "TokenFileError",
    "Unattributed",
    "answer_problem",
    "build_http_client",
    "check_configured_queries",
    "check_lookback",
    "check_rate_window",
    "client_for",
    "error_answer_detail",
    "not_prometheus_detail",
    "parse_sample_value",
    "probe_problem",
    "problem_line",
    "read_bearer_token",
    "read_targets",
    "read_throughput",
    "refusal_hint",
    "request_problem",
    "split_answers",
    "sync_client_for",
    "track_stalls",
    "url_hint",
]
