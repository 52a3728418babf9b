"""Read vLLM signals for every target from Prometheus, with every failure named.

Missing data is never read as zero: an empty answer is ``empty``, a signal missing while the
pods are provably scraped is ``absent``, and every transport, HTTP, query and parsing fault
has its own :class:`~scaler.core.signals.SignalStatus`.

- :mod:`.http`: the HTTP clients built from the Prometheus settings (TLS, bearer token file,
  headers, timeout) and one instant query.
- :mod:`.answers`: the API's answers checked and parsed (sample values, instant vectors).
- :mod:`.split`: one cycle's answers split back per selector group and per target.
- :mod:`.readings`: each target's readings from the split answers (pure; the backtest
  replays history through it too).
- :mod:`.source`: :class:`PrometheusSource`, the three joined for the control loop.
- :mod:`.check`: the start-up check that every configured query returns series.

The names below are the package's public API.
"""

from scaler.sources.prometheus.answers import Answer, QueryOutcome, parse_sample_value
from scaler.sources.prometheus.check import ConfiguredQueryProblem, check_configured_queries
from scaler.sources.prometheus.http import (
    BearerTokenFileAuth,
    TokenFileError,
    build_http_client,
    client_for,
    read_bearer_token,
    sync_client_for,
)
from scaler.sources.prometheus.readings import (
    DroppedSeries,
    DropReason,
    TargetReadings,
    read_targets,
)
from scaler.sources.prometheus.source import PrometheusSource, SourceResult
from scaler.sources.prometheus.split import PodSeries, SplitAnswers, split_answers

__all__ = [
    "Answer",
    "BearerTokenFileAuth",
    "ConfiguredQueryProblem",
    "DropReason",
    "DroppedSeries",
    "PodSeries",
    "PrometheusSource",
    "QueryOutcome",
    "SourceResult",
    "SplitAnswers",
    "TargetReadings",
    "TokenFileError",
    "build_http_client",
    "check_configured_queries",
    "client_for",
    "parse_sample_value",
    "read_bearer_token",
    "read_targets",
    "split_answers",
    "sync_client_for",
]
