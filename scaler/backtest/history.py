"""Reading history from Prometheus: the controller's own queries and the actual replica counts.

Every query is a range query (``/api/v1/query_range``) sent with prometheus-api-client's
``PrometheusConnect.custom_query_range``. Prometheus refuses a range query whose
``(end - start) / step`` exceeds 11,000 (``exceeded maximum resolution of 11,000 points per
timeseries``), so the time range is split into chunks of at most ``max_points`` evaluation
steps (:func:`chunk_grid`), all on one grid ``start + i x step`` so that chunks neither
overlap nor leave gaps. A range query evaluates its expression at each step exactly as an
instant query at that time would (same 5 min lookback), so step ``i`` of the answer is what the
controller would have read at ``start + i x step``.

Signals: the queries of :func:`scaler.sources.promql.build_query_plan`, unchanged, and the
TTFT bucket rates per target by :func:`scaler.sources.prometheus.histograms.history_histogram_plan`
(history has no pod lists, so each target's series are picked by its explicit matchers or its
workload's pod-name pattern; the live controller asks for the exact pods it lists).

Actual replicas, first source with data wins (:class:`ReplicaSource`):

1. kube-state-metrics (Deployments and StatefulSets): ``kube_deployment_spec_replicas`` and
   ``kube_deployment_status_replicas_ready`` (``kube_statefulset_replicas`` and
   ``kube_statefulset_status_replicas_ready``), labels ``namespace`` and
   ``deployment``/``statefulset``;
2. vllm-scaler's own ``vllm_scaler_current_replicas{target}`` and
   ``vllm_scaler_ready_replicas{target}``;
3. the number of the target's pods that export vLLM series
   (``count(count by (namespace, pod) (vllm:num_requests_running{SEL}))``; the inner count
   folds the per-engine series of data-parallel pods), used as both spec and ready.

Each is wrapped in ``max(...)``: two controller replicas, or a kube-state-metrics restart,
export the same value under different ``instance`` labels.
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import requests
import requests.auth
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from requests.adapters import Retry

from scaler.backtest.timeparse import rfc3339
from scaler.config.policy import DEFAULT_REPLICA_LABELS, TargetPolicy
from scaler.config.secrets import shortened
from scaler.config.settings import PrometheusSettings, env_name, redact_url
from scaler.config.signal_specs import histogram_specs
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import (
    TokenFileError,
    error_answer_detail,
    not_prometheus_detail,
    parse_sample_value,
    problem_line,
    read_bearer_token,
    refusal_hint,
    url_hint,
)
from scaler.sources.prometheus.backend import NATIVE_HISTOGRAM_PROBE, native_histograms_from
from scaler.sources.prometheus.cloud_auth import CloudAuthError, requests_auth_for
from scaler.sources.prometheus.histograms import history_histogram_plan
from scaler.sources.promql import (
    RUNNING_METRIC,
    QueryKind,
    QueryPlan,
    build_query_plan,
    promql_duration,
    promql_string,
    target_selector,
)

__all__ = [
    "PROMETHEUS_MAX_POINTS",
    "HistoryError",
    "Matrix",
    "PrometheusRangeClient",
    "PrometheusUnreachableError",
    "RangeQuery",
    "ReplicaHistory",
    "ReplicaSource",
    "SignalHistory",
    "StepGrid",
    "chunk_grid",
    "history_queries",
    "make_grid",
    "read_matrix",
    "read_replica_history",
    "read_signal_history",
    "replica_queries",
    "shown_query",
]

#: Prometheus' limit: a range query may have at most 11,000 steps ((end - start) / step).
PROMETHEUS_MAX_POINTS = 11_000

#: One series as the range API returns it: labels and ``[[unix seconds, "value"], ...]``.
RawSeries = Mapping[str, Any]
#: Labels and value of one series at one step.
Sample = tuple[dict[str, str], float]
#: Step index -> the series that have a value at that step (an instant vector per step).
Matrix = dict[int, list[Sample]]


class HistoryError(RuntimeError):
    """A range query failed (connection, HTTP or Prometheus error, malformed answer)."""


class PrometheusUnreachableError(HistoryError):
    """Prometheus could not be reached at all (connection refused, DNS, TLS, timeout): said
    in one line naming the URL, without the query (every query would fail the same way)."""


class RangeQuery(Protocol):
    """Runs one range query; ``start``/``end``/``step`` in seconds, ``end`` inclusive."""

    def __call__(self, query: str, start: float, end: float, step: float) -> list[RawSeries]: ...


@dataclass(frozen=True, slots=True)
class StepGrid:
    """The evaluation times ``start + i x step`` for ``i`` in ``0 .. count - 1``.

    Attributes:
        start: first evaluation time, whole Unix seconds (prometheus-api-client rounds
            ``start``/``end`` to whole seconds, so the grid is built on them).
        step: seconds between evaluations, a whole number >= 1.
        count: number of evaluation times.
    """

    start: float
    step: float
    count: int

    @property
    def end(self) -> float:
        """Last evaluation time, Unix seconds."""
        return self.start + (self.count - 1) * self.step

    @property
    def times(self) -> list[float]:
        """Every evaluation time, Unix seconds."""
        return [self.start + i * self.step for i in range(self.count)]

    def index_of(self, ts: float) -> int | None:
        """The step index of timestamp ``ts`` (None when off the grid or out of range)."""
        pos = (ts - self.start) / self.step
        i = round(pos)
        if abs(pos - i) > 1e-6 or not 0 <= i < self.count:
            return None
        return i


def make_grid(start: float, end: float, step: float) -> StepGrid:
    """The grid from ``start`` (rounded down to a whole second) to at most ``end``.

    Raises:
        ValueError: ``step`` is not a whole number of seconds >= 1, or ``end < start``.
    """
    if not math.isfinite(step) or step < 1 or step != int(step):
        raise ValueError(f"step must be a whole number of seconds >= 1, got {step!r}")
    first = float(math.floor(start))
    if end < first:
        raise ValueError("end is before start")
    return StepGrid(first, float(step), int((end - first) // step) + 1)


def chunk_grid(
    grid: StepGrid, max_points: int = PROMETHEUS_MAX_POINTS
) -> list[tuple[float, float]]:
    """Split the grid into ``(start, end)`` chunks of at most ``max_points`` steps each.

    Each chunk starts and ends on the grid and the next chunk starts one step after the
    previous one ends, so every evaluation time is in exactly one chunk. With the default,
    ``(end - start) / step`` of a chunk is at most 10,999, under Prometheus' limit.

    Raises:
        ValueError: ``max_points`` < 1.
    """
    if max_points < 1:
        raise ValueError(f"max_points must be >= 1, got {max_points}")
    out: list[tuple[float, float]] = []
    for first in range(0, grid.count, max_points):
        last = min(first + max_points, grid.count) - 1
        out.append((grid.start + first * grid.step, grid.start + last * grid.step))
    return out


class PrometheusRangeClient:
    """Range queries through prometheus-api-client's ``PrometheusConnect`` (requests, sync).

    Built from the same :class:`~scaler.config.settings.PrometheusSettings` as the
    controller's httpx client, so the backtest reads Prometheus exactly as the controller
    does: the URL (a password in it is sent as HTTP Basic authentication by requests, as by
    httpx), the bearer token file re-read on every request, the CA bundle, the client
    certificate for mutual TLS, the extra headers (a tenant for Mimir or Thanos) and the
    per-request timeout (also sent as the query's ``timeout`` parameter).

    Args:
        settings: the Prometheus client settings.
    """

    def __init__(self, settings: PrometheusSettings) -> None:
        settings.register_prometheus_secrets()
        session = requests.Session()
        if settings.prometheus_ca_file is not None:
            session.verify = str(settings.prometheus_ca_file)
        cert, key = settings.prometheus_client_cert_file, settings.prometheus_client_key_file
        if cert is not None:
            session.cert = (str(cert), str(key)) if key is not None else str(cert)
        token = settings.prometheus_bearer_token_file
        self._auth = settings.prometheus_auth
        self._credentials_hint = _credentials_hint(settings)
        self._timeout = settings.prometheus_timeout_seconds
        url = str(settings.prometheus_url).rstrip("/")
        # every message names the URL without its password; only the library gets the URL
        self._shown_url = redact_url(url)
        # An error answer is reported with its status and the server's message, as the
        # controller reports it, instead of the library's "HTTP Status Code ... (b'...')".
        session.hooks["response"].append(self._refused)
        auth = requests_auth_for(settings) or (
            _BearerTokenFile(token) if token is not None else _user_alone(url)
        )
        self._prom = PrometheusConnect(
            url=url,
            headers=dict(settings.prometheus_headers),
            auth=auth,  # type: ignore[arg-type]
            session=session,
            timeout=self._timeout,  # type: ignore[arg-type]  # requests takes a float
            retry=RETRY,
        )

    def __call__(self, query: str, start: float, end: float, step: float) -> list[RawSeries]:
        result = self._answer(
            lambda: self._prom.custom_query_range(
                query,
                start_time=datetime.fromtimestamp(start, UTC),
                end_time=datetime.fromtimestamp(end, UTC),
                # every digit (":g" keeps six: a 1,036,801 s step went as 1.0368e+06)
                step=f"{step:.15g}",
                params={"timeout": promql_duration(self._timeout)},
            )
        )
        if not isinstance(result, list):
            raise HistoryError(f"not a Prometheus range answer: {_short(repr(result))}")
        return result

    def native_histograms(self) -> bool:
        """Whether the backend has the native-histogram functions: one instant query,
        :data:`~scaler.sources.prometheus.backend.NATIVE_HISTOGRAM_PROBE`, read as the
        controller reads it (:func:`~scaler.sources.prometheus.backend.
        native_histograms_from`).

        Raises:
            HistoryError: the backend refused the question for another reason (the same
                refusal every query would meet), naming it and the query.
            PrometheusUnreachableError: Prometheus cannot be reached.
        """
        try:
            self._answer(
                lambda: self._prom.custom_query(
                    NATIVE_HISTOGRAM_PROBE, params={"timeout": promql_duration(self._timeout)}
                )
            )
        except PrometheusUnreachableError:
            raise
        except HistoryError as err:
            found = native_histograms_from(SignalStatus.QUERY_ERROR, str(err))
            if found is None:
                raise HistoryError(f"{err}; query {shown_query(NATIVE_HISTOGRAM_PROBE)}") from None
            return found
        return True

    def _answer(self, ask: Callable[[], Any]) -> Any:
        """``ask()``'s answer, every failure of it a :class:`HistoryError` said in one line."""
        try:
            return ask()
        except PrometheusApiClientException as err:
            raise HistoryError(f"Prometheus refused the query: {_short(str(err))}") from None
        except (TokenFileError, CloudAuthError) as err:
            raise HistoryError(f"request not sent: {err}") from None
        except requests.exceptions.JSONDecodeError as err:
            # reached, but the body is not JSON: a web server's page, a proxy's login form
            raise self._not_prometheus(err.doc) from None
        except (KeyError, TypeError):  # JSON without data.result
            raise self._not_prometheus("a JSON body without data.result") from None
        except requests.Timeout:
            raise PrometheusUnreachableError(
                f"Prometheus at {self._shown_url} cannot be reached: timeout: no answer "
                f"within {self._timeout:g}s"
            ) from None
        except requests.RequestException as err:
            reason = _transport_reason(err)
            raise PrometheusUnreachableError(
                f"Prometheus at {self._shown_url} cannot be reached: transport: {reason}"
                + url_hint(self._shown_url, None, reason)
            ) from None

    def _not_prometheus(self, text: str) -> HistoryError:
        detail = not_prometheus_detail(text)
        return HistoryError(
            problem_line(SignalStatus.BAD_RESPONSE, detail, None, self._shown_url, self._auth)
        )

    def close(self) -> None:
        """Close the HTTP session."""
        self._prom.close()

    def _refused(self, response: requests.Response, *_args: object, **_kwargs: object) -> None:
        if not response.ok:
            code = response.status_code
            detail = error_answer_detail(code, response.text) + refusal_hint(code, self._auth)
            if code in (401, 403):
                detail += self._credentials_hint
            detail += url_hint(self._shown_url, code, detail)
            raise HistoryError(f"Prometheus at {self._shown_url} refused the query: {detail}")


def _credentials_hint(settings: PrometheusSettings) -> str:
    """``; check <the settings that carry the credentials sent>`` for a refusal, or, when none
    were sent, the settings that can carry them (never a value)."""

    def option(field: str, what: str = "") -> str:
        return f"--{field.replace('_', '-')}{what} ({env_name(field)})"

    url = settings.prometheus_url
    used = []
    if url.username or url.password is not None:
        used.append(option("prometheus_url", "'s user-info"))
    if settings.prometheus_bearer_token_file is not None:
        used.append(option("prometheus_bearer_token_file"))
    if settings.prometheus_headers:
        used.append(option("prometheus_headers"))
    if used:
        return f"; check {' and '.join(used)}"
    every = [option("prometheus_bearer_token_file"), option("prometheus_headers")]
    return f"; none were sent: set {' or '.join(every)}, or user-info in --prometheus-url"


def _transport_reason(err: BaseException) -> str:
    """The root cause of a requests connection error in a few words (``Connection refused``,
    ``Name or service not known``, a TLS reason, ``Remote end closed connection without
    response``), instead of urllib3's "HTTPConnectionPool(...): Max retries exceeded ...
    (Caused by NewConnectionError(...))": the first operating-system error with a reason in
    the chain of causes, else the innermost exception that is neither requests' nor urllib3's."""
    seen: set[int] = set()
    todo: list[BaseException] = [err]
    inner: BaseException | None = None
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLError):
            return str(e.reason or e).replace("_", " ").lower()
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
        if not type(e).__module__.startswith(("requests", "urllib3")):
            inner = e
        todo += [a for a in e.args if isinstance(a, BaseException)]
        todo += [
            x
            for x in (getattr(e, "reason", None), e.__cause__, e.__context__)
            if isinstance(x, BaseException)
        ]
    if inner is not None:
        return _short(str(inner) or type(inner).__name__)
    return _short(f"{type(err).__name__}: {err}")


#: Retries of a range query: only answers that say "try again" (429, and a gateway's 502,
#: 503, 504; Retry-After is honoured), three at most with 0.5, 1, 2 s between. Any other
#: error answer is reported at once; after the last retry, the last answer is.
RETRY = Retry(
    total=3,
    backoff_factor=0.5,
    status_forcelist=(429, 502, 503, 504),
    raise_on_status=False,
)


class _BearerTokenFile(requests.auth.AuthBase):
    """``Authorization: Bearer <token>``, the token re-read from its file for every request
    (a rotated token is picked up), as the controller's httpx client does."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {read_bearer_token(self.path)}"
        return request


def _user_alone(url: str) -> requests.auth.HTTPBasicAuth | None:
    """Basic authentication with an empty password for a URL whose user-info is a user name
    alone (``http://token@host``), as httpx sends it for the controller; requests would send
    no credential at all. None for any other URL (requests handles ``user:password``)."""
    parts = urlsplit(url)
    if parts.username and parts.password is None:
        return requests.auth.HTTPBasicAuth(unquote(parts.username), "")
    return None


def _short(text: str) -> str:
    """``text`` masked, on one line, cut to 300 characters (a secret is masked before the cut)."""
    return shortened(text, 300)


def read_matrix(
    query_range: RangeQuery,
    query: str,
    grid: StepGrid,
    *,
    max_points: int = PROMETHEUS_MAX_POINTS,
    on_chunk: Callable[[], None] | None = None,
) -> Matrix:
    """Run ``query`` over the grid chunk by chunk and regroup the answer per step.

    Returns:
        Step index -> ``(labels, value)`` of every series with a sample at that step. Values
        keep NaN and +/-Inf (Prometheus' ``"NaN"``, ``"+Inf"``); the classification decides.

    Raises:
        HistoryError: a chunk failed or its answer is not the range API's shape; the message
            names the query and the chunk's time range.
    """
    out: Matrix = {}
    for start, end in chunk_grid(grid, max_points):
        try:
            series = query_range(query, start, end, grid.step)
            _add_series(out, series, grid)
        except PrometheusUnreachableError:
            raise
        except HistoryError as err:
            raise HistoryError(
                f"{err}; query {shown_query(query)} from {rfc3339(start)} to {rfc3339(end)}"
            ) from None
        if on_chunk is not None:
            on_chunk()
    return out


#: How much of a long query an error shows: its start and its end.
_QUERY_SHOWN = 160


def shown_query(query: str) -> str:
    """``query`` quoted for an error message, shortened when long (its start and end with
    ``...`` between): an error says which query, and its cause is the part to keep whole."""
    if len(query) <= _QUERY_SHOWN:
        return repr(query)
    half = _QUERY_SHOWN // 2
    return f"{query[:half]!r} ... {query[-half:]!r} ({len(query)} characters)"


def _timestamp(pair: object) -> float | None:
    """The time of a ``[unix seconds, "value"]`` pair; None when it is not such a pair or its
    time is not a finite number."""
    if not isinstance(pair, list | tuple) or len(pair) != 2:
        return None
    try:
        stamp = float(pair[0])
    except (TypeError, ValueError):
        return None
    return stamp if math.isfinite(stamp) else None


def _add_series(out: Matrix, series: Sequence[RawSeries], grid: StepGrid) -> None:
    for item in series:
        labels = item.get("metric") if isinstance(item, Mapping) else None
        values = item.get("values") if isinstance(item, Mapping) else None
        if not isinstance(labels, Mapping) or not isinstance(values, list):
            raise HistoryError(f"not a range series: {_short(repr(item))}")
        clean = {str(k): str(v) for k, v in labels.items()}
        for pair in values:
            stamp = _timestamp(pair)
            if stamp is None:
                raise HistoryError(f"not a [time, value] pair: {_short(repr(pair))}")
            idx = grid.index_of(stamp)
            if idx is None:
                continue
            try:
                value = parse_sample_value(pair[1])
            except ValueError as err:
                raise HistoryError(str(err)) from None
            out.setdefault(idx, []).append((clean, value))


# -------------------------------------------------------------------------------- signals


@dataclass(frozen=True, slots=True)
class SignalHistory:
    """The controller's queries over the grid.

    Attributes:
        plan: the query plan (the controller's exact PromQL and the selector groups).
        grid: the evaluation times.
        matrices: query kind -> per-step series.
    """

    plan: QueryPlan
    grid: StepGrid
    matrices: dict[QueryKind, Matrix]


def read_signal_history(
    query_range: RangeQuery,
    targets: Sequence[TargetPolicy],
    *,
    rate_window_seconds: float,
    grid: StepGrid,
    max_points: int = PROMETHEUS_MAX_POINTS,
    on_chunk: Callable[[], None] | None = None,
    native_histograms: bool = True,
    replica_labels: Sequence[str] = DEFAULT_REPLICA_LABELS,
) -> SignalHistory:
    """Read every query of the controller's plan for ``targets`` as range queries, built for
    what the backend supports as the controller builds them (``native_histograms``: the
    backend has the native-histogram functions, :meth:`PrometheusRangeClient.
    native_histograms`; ``replica_labels``: ``Policy.replica_labels``, the copies of a series
    behind an HA Prometheus pair read once).

    Raises:
        HistoryError: a query failed.
    """
    plan = build_query_plan(
        targets,
        rate_window_seconds=rate_window_seconds,
        native_histograms=native_histograms,
        replica_labels=replica_labels,
    )
    queries = history_queries(
        targets,
        rate_window_seconds=rate_window_seconds,
        native_histograms=native_histograms,
        replica_labels=replica_labels,
    )
    matrices = {
        kind: read_matrix(query_range, q, grid, max_points=max_points, on_chunk=on_chunk)
        for kind, q in queries.items()
    }
    return SignalHistory(plan, grid, matrices)


def history_queries(
    targets: Sequence[TargetPolicy],
    *,
    rate_window_seconds: float,
    native_histograms: bool = True,
    replica_labels: Sequence[str] = DEFAULT_REPLICA_LABELS,
) -> dict[QueryKind, str]:
    """Every query the backtest reads as a range: the per-pod ones and each latency
    histogram's buckets (TTFT's, ITL's; without native-histogram functions when the backend
    has none), each series read once behind an HA pair (``replica_labels``), as the
    controller reads them."""
    window = rate_window_seconds
    plan = build_query_plan(
        targets,
        rate_window_seconds=window,
        native_histograms=native_histograms,
        replica_labels=replica_labels,
    )
    queries = dict(plan.queries)
    for spec in histogram_specs():
        h = history_histogram_plan(
            spec, targets, rate_window_seconds=window, native_histograms=native_histograms
        ).query
        if h is not None and spec.histogram is not None:
            queries[QueryKind(spec.histogram.buckets_query)] = h
    return queries


# ------------------------------------------------------------------------------- replicas


class ReplicaSource(StrEnum):
    """Where the actual replica counts came from, in order of preference."""

    KUBE_STATE_METRICS = "kube-state-metrics"
    VLLM_SCALER = "vllm-scaler"
    VLLM_PODS = "vllm-pods"


ALL_REPLICA_SOURCES: tuple[ReplicaSource, ...] = tuple(ReplicaSource)


def replica_queries(target: TargetPolicy, source: ReplicaSource) -> tuple[str, str] | None:
    """``(spec replicas, ready replicas)`` queries of ``target`` from ``source``.

    Returns None when the source cannot describe the target (kube-state-metrics has no
    replica metrics for kinds other than Deployment and StatefulSet).
    """
    w = target.workload
    ns = promql_string(w.namespace)
    name = promql_string(w.name)
    if source is ReplicaSource.KUBE_STATE_METRICS:
        if w.kind == "Deployment":
            sel = f"namespace={ns},deployment={name}"
            return (
                f"max(kube_deployment_spec_replicas{{{sel}}})",
                f"max(kube_deployment_status_replicas_ready{{{sel}}})",
            )
        if w.kind == "StatefulSet":
            sel = f"namespace={ns},statefulset={name}"
            return (
                f"max(kube_statefulset_replicas{{{sel}}})",
                f"max(kube_statefulset_status_replicas_ready{{{sel}}})",
            )
        return None
    if source is ReplicaSource.VLLM_SCALER:
        sel = f"target={promql_string(target.key)}"
        return (
            f"max(vllm_scaler_current_replicas{{{sel}}})",
            f"max(vllm_scaler_ready_replicas{{{sel}}})",
        )
    pods = f"count(count by (namespace, pod) ({RUNNING_METRIC}{{{target_selector(target)}}}))"
    return pods, pods


@dataclass(frozen=True, slots=True)
class ReplicaHistory:
    """The target's actual replicas per step.

    Attributes:
        source: where they came from; None when no source had data.
        spec: ``spec.replicas`` per step (None where the source has no sample).
        ready: ready replicas per step (None where the source has no sample).
        queries: the ``(spec, ready)`` PromQL used.
        tried: the sources tried, in order.
    """

    source: ReplicaSource | None
    spec: list[float | None]
    ready: list[float | None]
    queries: tuple[str, str] | None
    tried: tuple[ReplicaSource, ...]


def _scalar_series(matrix: Matrix, count: int) -> list[float | None]:
    out: list[float | None] = [None] * count
    for idx, samples in matrix.items():
        finite = [v for _, v in samples if math.isfinite(v)]
        if finite:
            out[idx] = max(finite)
    return out


def read_replica_history(
    query_range: RangeQuery,
    target: TargetPolicy,
    *,
    grid: StepGrid,
    sources: Sequence[ReplicaSource] = ALL_REPLICA_SOURCES,
    max_points: int = PROMETHEUS_MAX_POINTS,
    on_chunk: Callable[[], None] | None = None,
    on_query: Callable[[], None] | None = None,
) -> ReplicaHistory:
    """Read the target's actual replicas from the first of ``sources`` that has data.

    A source's ready query is read only when its spec query had data, and only when it
    differs from the spec query (the pod count is both). ``on_query`` is called before each
    query is read (one range request per chunk of the grid follows, each reported to
    ``on_chunk``): a progress bar can grow its total by exactly what is read.

    Raises:
        HistoryError: a query failed.
    """
    tried: list[ReplicaSource] = []

    def read(query: str) -> list[float | None]:
        if on_query is not None:
            on_query()
        matrix = read_matrix(query_range, query, grid, max_points=max_points, on_chunk=on_chunk)
        return _scalar_series(matrix, grid.count)

    for source in sources:
        queries = replica_queries(target, source)
        if queries is None:
            continue
        tried.append(source)
        spec = read(queries[0])
        if all(v is None for v in spec):
            continue
        ready = list(spec) if queries[1] == queries[0] else read(queries[1])
        return ReplicaHistory(source, spec, ready, queries, tuple(tried))
    empty: list[float | None] = [None] * grid.count
    return ReplicaHistory(None, empty, list(empty), None, tuple(tried))
