"""Read vLLM signals for every target from Prometheus, with every failure named.

:class:`PrometheusSource` sends the cycle's instant queries (:mod:`scaler.sources.promql`, at
most five whatever the number of targets) concurrently, splits the answers per target,
matches per-pod series to each target's live, ready pods, and returns a
:class:`~scaler.core.signals.SignalReading` per enabled signal, plus per-query outcomes and
the facts telemetry needs (dropped stale series, KV metric name found, pods missing metrics).

Missing data is never read as zero: an empty answer is ``empty``, a signal missing while the
pods are provably scraped is ``absent``, and every transport, HTTP, query and parsing fault
has its own :class:`~scaler.core.signals.SignalStatus`. ``read`` never raises for
Prometheus trouble.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import math
import re
import ssl
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import structlog

from scaler.config.policy import TargetPolicy
from scaler.core.observation import WorkloadSnapshot
from scaler.core.signals import SignalName, SignalReading, SignalStatus
from scaler.sources.promql import (
    KV_METRICS,
    SELECTOR_LABEL,
    SIGNAL_QUERY,
    TARGET_LABEL,
    WAITING_METRIC,
    QueryKind,
    QueryPlan,
    build_query_plan,
    promql_duration,
)
from scaler.telemetry.redact import register_secret

__all__ = [
    "BearerTokenFileAuth",
    "ConfiguredQueryProblem",
    "DropReason",
    "DroppedSeries",
    "PrometheusSource",
    "QueryOutcome",
    "SourceResult",
    "TargetReadings",
    "TokenFileError",
    "build_http_client",
    "check_configured_queries",
    "parse_sample_value",
]

log = structlog.get_logger(__name__)

_DETAIL_MAX = 300
# What Prometheus writes for a finite float (strconv.FormatFloat 'f'/'e' forms).
_NUMBER_RE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """How one instant query of the cycle went.

    Attributes:
        kind: which query.
        status: ``ok`` on a well-formed success answer, else the failure reason
            (``transport``, ``timeout``, ``http_error``, ``query_error``, ``bad_response``).
        detail: explanation of a failure (Prometheus ``errorType: error`` for query errors).
        series: series in a successful answer.
        duration_seconds: wall time of the HTTP request.
        query: the PromQL sent.
        warnings: ``warnings`` Prometheus attached to a successful answer.
    """

    kind: QueryKind
    status: SignalStatus
    detail: str = ""
    series: int = 0
    duration_seconds: float = 0.0
    query: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the answer was a well-formed success."""
        return self.status is SignalStatus.OK


class DropReason(StrEnum):
    """Why a per-pod series was not counted for its target."""

    TERMINATING = "terminating"  # the pod has a deletionTimestamp
    NOT_READY = "not_ready"  # live but not Ready (still loading, or failing probes)
    UNKNOWN_POD = "unknown_pod"  # not among the workload's pods: deleted, or foreign
    NO_POD_LABEL = "no_pod_label"  # the series has no ``pod`` label to match


@dataclass(frozen=True, slots=True)
class DroppedSeries:
    """A per-pod series the selector picked but that does not count (stale, not ready...)."""

    query: QueryKind
    namespace: str
    pod: str
    reason: DropReason


@dataclass(frozen=True, slots=True)
class TargetReadings:
    """What the source read for one target.

    Attributes:
        key: the target key (``namespace/kind/name``).
        signals: one reading per *enabled* signal of the target's policy.
        kv_metric: KV-cache metric name(s) found on the ready pods, preferred name first,
            comma-separated when pods differ (mid-upgrade); '' when none was found.
        pods_missing: per-pod signal -> ready pods with no series for it.
        pods_unscraped: ready pods without a ``vllm:num_requests_running`` series (not
            scraped, or scrape failing); empty when the running query failed.
        dropped: series picked by the selector but not counted (pods not live or not ready).
        series_found: query -> series the target's selector (or TTFT expression) returned
            before any pod filtering; the dry-run check uses it.
        pod_load: ready pod -> requests in flight (``vllm:num_requests_running`` plus
            ``vllm:num_requests_waiting``, summed over engines); only pods with both series
            (running only when the waiting query was not sent). Ranks pods for scale-down.
    """

    key: str
    signals: dict[SignalName, SignalReading]
    kv_metric: str = ""
    pods_missing: dict[SignalName, frozenset[str]] = field(default_factory=dict)
    pods_unscraped: frozenset[str] = frozenset()
    dropped: tuple[DroppedSeries, ...] = ()
    series_found: dict[QueryKind, int] = field(default_factory=dict)
    pod_load: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SourceResult:
    """Everything one :meth:`PrometheusSource.read` produced.

    Attributes:
        targets: target key -> :class:`TargetReadings`, for every target passed in.
        queries: query kind -> :class:`QueryOutcome`, for every query sent.
        duration_seconds: wall time of the whole read.
    """

    targets: dict[str, TargetReadings]
    queries: dict[QueryKind, QueryOutcome]
    duration_seconds: float = 0.0

    @property
    def queries_sent(self) -> int:
        """Number of HTTP queries sent (constant in the number of targets, at most 5)."""
        return len(self.queries)

    def readings(self, key: str) -> dict[SignalName, SignalReading]:
        """The signal readings of target ``key`` (KeyError if it was not read)."""
        return self.targets[key].signals


# ------------------------------------------------------------------------ HTTP client


class TokenFileError(OSError):
    """The bearer token file cannot be read; the message names the file, never the token."""


class BearerTokenFileAuth(httpx.Auth):
    """``Authorization: Bearer <token>`` with the token re-read from a file on every request.

    Re-reading picks up rotated tokens (projected service-account tokens rotate hourly).
    The token is never logged and not part of ``repr``.

    Raises (from the request):
        TokenFileError: the file cannot be read; :class:`PrometheusSource` reports
            ``transport`` with a detail naming the file (never its content).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"BearerTokenFileAuth(path={str(self.path)!r})"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else "not UTF-8 text"
            raise TokenFileError(f"cannot read bearer token file {self.path}: {reason}") from None
        register_secret(token)
        request.headers["Authorization"] = f"Bearer {token}"
        yield request


def build_http_client(
    *,
    bearer_token_file: Path | None,
    ca_file: Path | None,
    timeout_seconds: float,
    headers: Mapping[str, str] | None = None,
    client_cert_file: Path | None = None,
    client_key_file: Path | None = None,
) -> httpx.AsyncClient:
    """Build the HTTP client :class:`PrometheusSource` uses.

    Args:
        bearer_token_file: file holding a bearer token, re-read at each request; None for
            no authentication.
        ca_file: PEM bundle to verify Prometheus' TLS certificate; None for system CAs.
        timeout_seconds: per-request timeout (connect, read, write, pool).
        headers: extra headers on every request (for example ``X-Scope-OrgID`` for a
            multi-tenant Thanos/Mimir front end).
        client_cert_file: PEM client certificate for mutual TLS (it may also hold the key).
        client_key_file: PEM key of the client certificate, when in a separate file.

    The caller owns the client and closes it (``await client.aclose()``).

    Raises:
        ValueError: a CA or client certificate file cannot be loaded (at start); the
            message names the file and the reason. :class:`~scaler.config.settings.Settings`
            checks the same files first, naming the setting.
    """
    verify: ssl.SSLContext | bool = True
    if ca_file is not None or client_cert_file is not None:
        try:
            ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
        except OSError as err:  # ssl.SSLError is an OSError
            raise ValueError(f"CA file {ca_file}: {_os_reason(err)}") from None
        if client_cert_file is not None:
            try:
                ctx.load_cert_chain(
                    str(client_cert_file),
                    str(client_key_file) if client_key_file is not None else None,
                )
            except OSError as err:
                files = f"{client_cert_file}" + (f" / {client_key_file}" if client_key_file else "")
                raise ValueError(f"client certificate {files}: {_os_reason(err)}") from None
        verify = ctx
    auth = BearerTokenFileAuth(bearer_token_file) if bearer_token_file is not None else None
    return httpx.AsyncClient(
        auth=auth,
        verify=verify,
        timeout=httpx.Timeout(timeout_seconds),
        headers=dict(headers or {}),
        follow_redirects=False,
    )


def _os_reason(err: OSError) -> str:
    if isinstance(err, ssl.SSLError):
        return str(err.reason or err).replace("_", " ").lower()
    return err.strerror or str(err)


def _register_url_credentials(url: str) -> None:
    """Mask a password in the URL's user-info, and the Basic credential httpx derives from it."""
    parts = httpx.URL(url)
    if not parts.password:
        return
    register_secret(parts.password)
    basic = f"{parts.username}:{parts.password}".encode()
    register_secret(base64.b64encode(basic).decode())


# -------------------------------------------------------------------------- parsing


class _BadResponse(ValueError):
    """The answer is not the Prometheus API's JSON shape."""


def parse_sample_value(raw: object) -> float:
    """Parse a Prometheus sample value string.

    Prometheus encodes sample values as JSON strings: decimal numbers, ``"NaN"``,
    ``"+Inf"`` and ``"-Inf"``. Those three are matched explicitly (``float()`` would also
    accept spellings like ``"nan"``, ``"infinity"`` or ``"1_0"`` that Prometheus never sends).

    Returns:
        The float; NaN and +/-inf for the special strings.

    Raises:
        ValueError: not a string, or not a number Prometheus would write.
    """
    if not isinstance(raw, str):
        raise ValueError(f"sample value {raw!r} is not a string")
    if raw == "NaN":
        return math.nan
    if raw in ("+Inf", "Inf"):
        return math.inf
    if raw == "-Inf":
        return -math.inf
    if not _NUMBER_RE.match(raw):
        raise ValueError(f"sample value {raw!r} is not a number")
    value = float(raw)
    if not math.isfinite(value):
        raise ValueError(f"sample value {raw!r} overflows a float")
    return value


_Series = tuple[dict[str, str], float]
_STR_ONLY = frozenset({str})


def _parse_vector(body: Any) -> tuple[list[_Series], tuple[str, ...]]:
    """Check the ``status: success`` body's shape and return its (labels, value) series."""
    data = body.get("data")
    if not isinstance(data, dict):
        raise _BadResponse("'data' is missing or not an object")
    if data.get("resultType") != "vector":
        raise _BadResponse(f"resultType {data.get('resultType')!r}, expected 'vector'")
    result = data.get("result")
    if not isinstance(result, list):
        raise _BadResponse("'data.result' is not a list")
    out: list[_Series] = []
    for i, item in enumerate(result):
        if not isinstance(item, dict):
            raise _BadResponse(f"result[{i}] is not an object")
        metric = item.get("metric")
        value = item.get("value")
        # map(type, ...) keeps the check in C: answers carry 10^4-10^5 series.
        if not isinstance(metric, dict) or not (
            _STR_ONLY.issuperset(map(type, metric))
            and _STR_ONLY.issuperset(map(type, metric.values()))
        ):
            raise _BadResponse(f"result[{i}].metric is not a label map")
        if (
            not isinstance(value, list)
            or len(value) != 2
            or isinstance(value[0], bool)
            or not isinstance(value[0], int | float)
        ):
            raise _BadResponse(f'result[{i}].value is not [timestamp, "value"]')
        try:
            out.append((dict(metric), parse_sample_value(value[1])))
        except ValueError as err:
            raise _BadResponse(f"result[{i}]: {err}") from None
    warnings = body.get("warnings") or []
    return out, tuple(str(w) for w in warnings) if isinstance(warnings, list) else ()


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_MAX else text[: _DETAIL_MAX - 3] + "..."


@dataclass(frozen=True, slots=True)
class _Answer:
    outcome: QueryOutcome
    series: list[_Series]


# ----------------------------------------------------------------- per-target logic


def _names(pods: Sequence[str] | frozenset[str], limit: int = 5) -> str:
    ordered = sorted(pods)
    shown = ", ".join(ordered[:limit])
    return shown + (f" and {len(ordered) - limit} more" if len(ordered) > limit else "")


def _bad_value_reading(
    name: SignalName, value: float, where: str, source_metric: str = ""
) -> SignalReading | None:
    """A reading for a non-finite or negative value, or None if the value is fine."""
    if math.isnan(value):
        status, shown = SignalStatus.NAN, "NaN"
    elif math.isinf(value):
        status, shown = SignalStatus.INF, "+Inf" if value > 0 else "-Inf"
    elif value < 0:
        status, shown = SignalStatus.NEGATIVE, repr(value)
    else:
        return None
    return SignalReading(
        name, status, source_metric=source_metric, detail=f"{where}: value {shown}"
    )


@dataclass(slots=True)
class _PodSeries:
    """Series of one selector group in one per-pod query, keyed by (namespace, pod)."""

    by_pod: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    no_pod_label: int = 0
    _strays: dict[str, list[str]] | None = None

    @property
    def count(self) -> int:
        return len(self.by_pod) + self.no_pod_label

    def strays(self, known_pods: set[tuple[str, str]], namespace: str) -> list[tuple[str, str]]:
        """Keys of series in ``namespace`` (or without a namespace label) whose pod no
        snapshot lists, sorted.

        Indexed once per cycle and group: each target of the default group then looks its own
        pods up by name and scans only these, instead of every series of every namespace
        (1,000 targets of 8,000 pods would otherwise scan 8 million per query).
        """
        if self._strays is None:
            index: dict[str, list[str]] = {}
            for ns, pod in sorted(self.by_pod):
                if not ns or (ns, pod) not in known_pods:
                    index.setdefault(ns, []).append(pod)
            self._strays = index
        return [("", pod) for pod in self._strays.get("", [])] + [
            (namespace, pod) for pod in self._strays.get(namespace, [])
        ]


def _split_per_pod(answer: _Answer, kind: QueryKind) -> dict[str, _PodSeries]:
    """Group a per-pod answer by selector group -> (namespace, pod) -> {metric: value}.

    Raises:
        _BadResponse: a series lacks the group tag or is duplicated (the answer does not
            match the query that was sent).
    """
    groups: dict[str, _PodSeries] = {}
    for labels, value in answer.series:
        gid = labels.get(SELECTOR_LABEL)
        if gid is None:
            raise _BadResponse(f"a series has no {SELECTOR_LABEL} label: {labels}")
        grp = groups.setdefault(gid, _PodSeries())
        pod = labels.get("pod")
        if not pod:
            grp.no_pod_label += 1
            continue
        # An empty namespace means the series has no namespace label; the source
        # then matches it on the target's namespace (the selector already scoped it).
        metric = labels.get("__name__", str(kind))
        slot = grp.by_pod.setdefault((labels.get("namespace", ""), pod), {})
        if metric in slot:
            raise _BadResponse(f"duplicate series for {labels}")
        slot[metric] = value
    return groups


def _split_per_target(answer: _Answer) -> dict[str, float]:
    """Map a target-level answer to target key -> value.

    Raises:
        _BadResponse: a series lacks the target tag or a target appears twice.
    """
    out: dict[str, float] = {}
    for labels, value in answer.series:
        key = labels.get(TARGET_LABEL)
        if key is None:
            raise _BadResponse(f"a series has no {TARGET_LABEL} label: {labels}")
        if key in out:
            raise _BadResponse(f"duplicate series for target {key}")
        out[key] = value
    return out


def _failed(answer: _Answer, err: _BadResponse) -> _Answer:
    """The answer turned out not to match the query sent: the whole query is bad_response."""
    o = answer.outcome  # logged once, as ``query_failed``, by the controller
    return _Answer(
        QueryOutcome(
            o.kind,
            SignalStatus.BAD_RESPONSE,
            detail=_short(str(err)),
            duration_seconds=o.duration_seconds,
            query=o.query,
        ),
        [],
    )


class PrometheusSource:
    """Reads every target's signals from Prometheus in a constant number of queries.

    Args:
        client: the HTTP client (see :func:`build_http_client` for auth and TLS); the
            caller owns and closes it.
        base_url: Prometheus base URL, e.g. ``http://prometheus:9090`` or a path-prefixed
            URL such as ``https://thanos/prometheus``.
        timeout_seconds: total deadline per query (client side; also sent to Prometheus
            as the ``timeout`` parameter so it stops evaluating).
        rate_window_seconds: ``rate()`` window of the TTFT queries
            (``Policy.rate_window_seconds``).

    Raises:
        ValueError: a non-positive timeout or rate window.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        timeout_seconds: float,
        rate_window_seconds: float = 60.0,
    ) -> None:
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be positive, got {timeout_seconds!r}")
        if not rate_window_seconds > 0:
            raise ValueError(f"rate_window_seconds must be positive, got {rate_window_seconds!r}")
        self._client = client
        self._url = base_url.rstrip("/") + "/api/v1/query"
        _register_url_credentials(base_url)
        self._timeout = timeout_seconds
        self.rate_window_seconds = rate_window_seconds

    # ------------------------------------------------------------------ queries

    async def _query(self, kind: QueryKind, promql: str) -> _Answer:
        """Run one instant query; never raises for network or Prometheus faults."""
        start = time.monotonic()

        def fail(status: SignalStatus, detail: str) -> _Answer:
            # Not logged here: the outcome carries the detail, and the controller logs one
            # ``query_failed`` event per failed query.
            outcome = QueryOutcome(
                kind,
                status,
                detail=_short(detail),
                duration_seconds=time.monotonic() - start,
                query=promql,
            )
            return _Answer(outcome, [])

        try:
            # httpx timeouts are per operation; asyncio.timeout bounds the whole exchange
            # (a server trickling bytes would otherwise never time out).
            async with asyncio.timeout(self._timeout):
                resp = await self._client.post(
                    self._url,
                    data={"query": promql, "timeout": promql_duration(self._timeout)},
                    timeout=self._timeout,
                )
        except (TimeoutError, httpx.TimeoutException):
            return fail(SignalStatus.TIMEOUT, f"no answer within {self._timeout}s")
        except httpx.TransportError as err:
            return fail(SignalStatus.TRANSPORT, f"{type(err).__name__}: {err}")
        except TokenFileError as err:
            return fail(SignalStatus.TRANSPORT, f"request not sent: {err}")
        except OSError as err:
            return fail(SignalStatus.TRANSPORT, f"request not sent: {err.strerror or err}")
        except httpx.HTTPError as err:  # e.g. too many redirects, invalid URL
            return fail(SignalStatus.TRANSPORT, f"{type(err).__name__}: {err}")

        try:
            body: Any = resp.json()
        except ValueError:
            body = None
        is_prom = isinstance(body, dict) and body.get("status") in ("success", "error")
        if is_prom and body["status"] == "error":
            # Prometheus' own error (400 bad_data, 422 execution, 503 timeout/canceled...).
            return fail(
                SignalStatus.QUERY_ERROR,
                f"{body.get('errorType', '?')}: {body.get('error', '')} (HTTP {resp.status_code})",
            )
        if not resp.is_success:
            return fail(
                SignalStatus.HTTP_ERROR, f"HTTP {resp.status_code}: {_short(resp.text) or '-'}"
            )
        if not is_prom:
            return fail(
                SignalStatus.BAD_RESPONSE,
                f"not a Prometheus API answer: {_short(resp.text) or '(empty body)'}",
            )
        try:
            series, warnings = _parse_vector(body)
        except _BadResponse as err:
            return fail(SignalStatus.BAD_RESPONSE, str(err))
        return _Answer(
            QueryOutcome(
                kind,
                SignalStatus.OK,
                series=len(series),
                duration_seconds=time.monotonic() - start,
                query=promql,
                warnings=warnings,
            ),
            series,
        )

    # --------------------------------------------------------------------- read

    async def read(
        self,
        policy_targets: Sequence[TargetPolicy],
        snapshots: Mapping[str, WorkloadSnapshot],
    ) -> SourceResult:
        """Read every enabled signal of every target.

        Args:
            policy_targets: the targets (their selectors and enabled signals).
            snapshots: target key -> its Kubernetes snapshot; per-pod series count only
                for the snapshot's live, ready pods. A target without a snapshot gets
                ``empty`` per-pod signals ("no workload snapshot").

        Returns:
            A :class:`SourceResult` with a :class:`TargetReadings` per target. Never raises
            for Prometheus faults; each becomes a named status.
        """
        start = time.monotonic()
        plan = build_query_plan(policy_targets, rate_window_seconds=self.rate_window_seconds)
        kinds = list(plan.queries)
        answers_list = await asyncio.gather(*(self._query(k, plan.queries[k]) for k in kinds))
        answers = dict(zip(kinds, answers_list, strict=True))

        pod_groups, target_series = split_answers(answers)
        targets = read_targets(
            policy_targets,
            snapshots,
            plan,
            answers,
            pod_groups,
            target_series,
            rate_window_seconds=self.rate_window_seconds,
        )
        return SourceResult(
            targets=targets,
            queries={k: a.outcome for k, a in answers.items()},
            duration_seconds=time.monotonic() - start,
        )


def split_answers(
    answers: dict[QueryKind, _Answer],
) -> tuple[dict[QueryKind, dict[str, _PodSeries]], dict[QueryKind, dict[str, float]]]:
    """Split one cycle's answers: per-pod ones per selector group, TTFT ones per target.

    Pure (no I/O); shared by the live read and the backtest's replay of history. An answer
    whose shape does not match its query is replaced in ``answers`` by a ``bad_response``.

    Returns:
        ``(pod_groups, target_series)``: query -> selector group -> series, and TTFT query ->
        target key -> value.
    """
    pod_groups: dict[QueryKind, dict[str, _PodSeries]] = {}
    for kind, ans in list(answers.items()):
        if not (kind.per_pod and ans.outcome.ok):
            continue
        try:
            pod_groups[kind] = _split_per_pod(ans, kind)
        except _BadResponse as err:
            answers[kind] = _failed(ans, err)
    target_series: dict[QueryKind, dict[str, float]] = {}
    for kind in (QueryKind.TTFT_QUANTILE, QueryKind.TTFT_RATE):
        t_ans = answers.get(kind)
        if t_ans is None or not t_ans.outcome.ok:
            continue
        try:
            target_series[kind] = _split_per_target(t_ans)
        except _BadResponse as err:
            answers[kind] = _failed(t_ans, err)
    return pod_groups, target_series


def read_targets(
    policy_targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot],
    plan: QueryPlan,
    answers: dict[QueryKind, _Answer],
    pod_groups: dict[QueryKind, dict[str, _PodSeries]],
    target_series: dict[QueryKind, dict[str, float]],
    *,
    rate_window_seconds: float,
) -> dict[str, TargetReadings]:
    """Classify the split answers of one cycle into each target's readings (pure, no I/O).

    Per-pod series count only for the snapshot's live, ready pods; a series of a pod that
    belongs to another target (picked by a shared selector) is that target's, not stale.
    """
    known_pods: set[tuple[str, str]] = {
        (snap.namespace, p.name) for snap in snapshots.values() for p in snap.pods
    }
    return {
        t.key: _TargetReader(
            target=t,
            snapshot=snapshots.get(t.key),
            gid=plan.selector_group[t.key],
            answers=answers,
            pod_groups=pod_groups,
            target_series=target_series,
            known_pods=known_pods,
            rate_window_seconds=rate_window_seconds,
        ).read()
        for t in policy_targets
    }


@functools.lru_cache(maxsize=4096)
def _pattern(regex: str) -> re.Pattern[str]:
    """A pod-name pattern of :meth:`TargetPolicy.pod_name_regex` (PromQL anchors it: fullmatch)."""
    return re.compile(regex)


@dataclass(slots=True)
class _TargetReader:
    """Turns the split answers into one target's readings."""

    target: TargetPolicy
    snapshot: WorkloadSnapshot | None
    gid: str
    answers: dict[QueryKind, _Answer]
    pod_groups: dict[QueryKind, dict[str, _PodSeries]]
    target_series: dict[QueryKind, dict[str, float]]
    known_pods: set[tuple[str, str]]
    rate_window_seconds: float
    dropped: list[DroppedSeries] = field(default_factory=list)
    series_found: dict[QueryKind, int] = field(default_factory=dict)
    _pod_cache: dict[QueryKind, dict[str, dict[str, float]] | None] = field(default_factory=dict)

    @property
    def ready(self) -> frozenset[str]:
        return self.snapshot.ready_pod_names if self.snapshot else frozenset()

    def outcome(self, kind: QueryKind) -> QueryOutcome | None:
        ans = self.answers.get(kind)
        return ans.outcome if ans else None

    def pod_values(self, kind: QueryKind) -> dict[str, dict[str, float]] | None:
        """Ready pod -> {metric: value} for a per-pod query; None if the query failed.

        Series of pods that are not live and ready are recorded in ``dropped`` (once per
        query: the result is cached).
        """
        if kind not in self._pod_cache:
            self._pod_cache[kind] = self._pod_values(kind)
        return self._pod_cache[kind]

    def _pod_values(self, kind: QueryKind) -> dict[str, dict[str, float]] | None:
        groups = self.pod_groups.get(kind)
        if groups is None:
            return None
        grp = groups.get(self.gid, _PodSeries())
        # A default-selector target's group selects whole namespaces (see build_query_plan):
        # only its own pods' series, and gone pods its pod-name pattern picks, are its.
        own = (
            _pattern(self.target.pod_name_regex())
            if self.target.prometheus_matchers is None
            else None
        )
        snap = self.snapshot
        if own is not None and snap is not None:
            return self._own_pod_values(kind, grp, own, snap)
        namespace = self.target.workload.namespace
        if own is None:
            self.series_found[kind] = grp.count
        else:
            self.series_found[kind] = grp.no_pod_label + sum(
                1
                for ns, pod in grp.by_pod
                if (ns or namespace) == namespace
                and (namespace, pod) not in self.known_pods
                and own.fullmatch(pod)
            )
        out: dict[str, dict[str, float]] = {}
        if snap is None:
            return out
        pods = {p.name: p for p in snap.pods}
        ready = snap.ready_pod_names
        for _ in range(grp.no_pod_label):
            self.dropped.append(DroppedSeries(kind, snap.namespace, "", DropReason.NO_POD_LABEL))
        for (ns, pod), metrics in sorted(grp.by_pod.items()):
            ns = ns or snap.namespace
            if ns == snap.namespace and pod in ready:
                out[pod] = metrics
                continue
            info = pods.get(pod) if ns == snap.namespace else None
            if info is not None:
                reason = DropReason.TERMINATING if info.terminating else DropReason.NOT_READY
            elif (ns, pod) in self.known_pods:
                continue  # another target's pod, picked by a shared selector
            else:
                reason = DropReason.UNKNOWN_POD
            self.dropped.append(DroppedSeries(kind, ns, pod, reason))
        return out

    def _own_pod_values(
        self, kind: QueryKind, grp: _PodSeries, own: re.Pattern[str], snap: WorkloadSnapshot
    ) -> dict[str, dict[str, float]]:
        """:meth:`_pod_values` for a target sharing its namespace's group: the series of its
        own pods (looked up by name), plus the stray series its pod-name pattern picks."""
        ns = snap.namespace
        ready = snap.ready_pod_names
        own_names = {p.name for p in snap.pods}
        found = grp.no_pod_label
        out: dict[str, dict[str, float]] = {}
        dropped: list[DroppedSeries] = []
        for p in snap.pods:
            # A series without a namespace label is matched on the target's namespace; the
            # namespaced one wins when both exist.
            for key in (("", p.name), (ns, p.name)):
                metrics = grp.by_pod.get(key)
                if metrics is None:
                    continue
                found += 1
                if p.name in ready:
                    out[p.name] = metrics
                else:
                    reason = DropReason.TERMINATING if p.terminating else DropReason.NOT_READY
                    dropped.append(DroppedSeries(kind, ns, p.name, reason))
        for series_ns, pod in grp.strays(self.known_pods, ns):
            if (series_ns or ns) != ns or pod in own_names or (ns, pod) in self.known_pods:
                continue  # another namespace's, already counted, or another target's pod
            if own.fullmatch(pod):  # a gone pod of this target
                found += 1
                dropped.append(DroppedSeries(kind, ns, pod, DropReason.UNKNOWN_POD))
        self.series_found[kind] = found
        self.dropped.extend(
            [DroppedSeries(kind, ns, "", DropReason.NO_POD_LABEL)] * grp.no_pod_label
        )
        self.dropped.extend(sorted(dropped, key=lambda d: d.pod))
        return out

    def read(self) -> TargetReadings:
        running = self.pod_values(QueryKind.RUNNING)
        scraped = bool(running)  # at least one ready pod of this target exports vLLM series
        unscraped = self.ready - set(running) if running is not None else frozenset()

        signals: dict[SignalName, SignalReading] = {}
        pods_missing: dict[SignalName, frozenset[str]] = {}
        kv_metric = ""
        for name in self.target.signals.enabled():
            if name is SignalName.TTFT_P95:
                signals[name] = self.ttft(scraped)
                continue
            reading, missing = self.per_pod(name, scraped)
            signals[name] = reading
            if missing:
                pods_missing[name] = missing
            if name is SignalName.KV_CACHE_USAGE:
                kv_metric = reading.source_metric
        for name, r in signals.items():
            if r.status is SignalStatus.ABSENT:
                query = self.outcome(SIGNAL_QUERY[name])
                log.error(
                    "signal absent while the target's pods are scraped",
                    target=self.target.key,
                    signal=str(name),
                    detail=r.detail,
                    query=query.query if query else "",
                )
        return TargetReadings(
            key=self.target.key,
            signals=signals,
            kv_metric=kv_metric,
            pods_missing=pods_missing,
            pods_unscraped=frozenset(unscraped),
            dropped=tuple(self.dropped),
            series_found=dict(self.series_found),
            pod_load=self.pod_load(running),
        )

    def pod_load(self, running: dict[str, dict[str, float]] | None) -> dict[str, float]:
        """Requests in flight per ready pod (running + waiting); pods lacking data are left out."""
        if not running:
            return {}
        waiting_sent = QueryKind.WAITING in self.answers
        waiting = self.pod_values(QueryKind.WAITING) if waiting_sent else {}
        if waiting is None:
            return {}
        out: dict[str, float] = {}
        for pod, metrics in running.items():
            if waiting_sent and pod not in waiting:
                continue
            total = math.fsum(metrics.values()) + math.fsum((waiting.get(pod) or {}).values())
            if math.isfinite(total) and total >= 0:
                out[pod] = total
        return out

    def per_pod(self, name: SignalName, scraped: bool) -> tuple[SignalReading, frozenset[str]]:
        """Reading of a per-pod signal: the sum over the ready pods with data."""
        kind = SIGNAL_QUERY[name]
        outcome = self.outcome(kind)
        values = self.pod_values(kind)
        if outcome is None or values is None:
            status = outcome.status if outcome else SignalStatus.EMPTY
            detail = outcome.detail if outcome else "query not sent"
            return SignalReading(name, status, detail=f"{kind} query: {detail}"), frozenset()
        if self.snapshot is None:
            return SignalReading(name, SignalStatus.EMPTY, detail="no workload snapshot"), (
                frozenset()
            )
        ready = self.ready
        if not ready:
            return SignalReading(name, SignalStatus.EMPTY, detail="no ready pods"), frozenset()

        per_pod: dict[str, float] = {}
        metric_used: dict[str, str] = {}
        for pod, metrics in values.items():
            if name is SignalName.KV_CACHE_USAGE:
                # Prefer the new name per pod: vLLM 0.9.2-0.10 exports both.
                metric = next((m for m in KV_METRICS if m in metrics), None)
                if metric is None:
                    continue
            else:
                metric = next(iter(metrics))
            per_pod[pod] = metrics[metric]
            metric_used[pod] = metric
        if name is SignalName.KV_CACHE_USAGE:
            # Mid-upgrade pods may differ: report every name found, preferred first.
            source_metric = ",".join(m for m in KV_METRICS if m in metric_used.values())
            wanted = " or ".join(KV_METRICS)
        else:
            source_metric = wanted = WAITING_METRIC

        if not per_pod:
            if scraped:
                return SignalReading(
                    name,
                    SignalStatus.ABSENT,
                    pods_missing=len(ready),
                    source_metric=source_metric,
                    detail=f"no {wanted} series for {len(ready)} ready pods, although their "
                    "vllm:num_requests_running series exist (renamed or disabled metric?)",
                ), ready
            return SignalReading(
                name,
                SignalStatus.EMPTY,
                pods_missing=len(ready),
                source_metric=source_metric,
                detail=f"no series for any of {len(ready)} ready pods",
            ), ready

        for pod in sorted(per_pod):
            bad = _bad_value_reading(name, per_pod[pod], f"pod {pod}", source_metric)
            if bad is not None:
                return bad, frozenset(ready - per_pod.keys())

        total = math.fsum(per_pod.values())
        missing = frozenset(ready - per_pod.keys())
        if missing:
            return SignalReading(
                name,
                SignalStatus.PARTIAL,
                value=total,
                pods_with_data=len(per_pod),
                pods_missing=len(missing),
                source_metric=source_metric,
                detail=f"{len(missing)} of {len(ready)} ready pods have no series: "
                + _names(missing),
            ), missing
        return SignalReading(
            name,
            SignalStatus.OK,
            value=total,
            pods_with_data=len(per_pod),
            source_metric=source_metric,
        ), missing

    def ttft(self, scraped: bool) -> SignalReading:
        """Reading of the TTFT quantile: ok, idle (NaN with zero request rate) or a fault."""
        name = SignalName.TTFT_P95
        metric = "vllm:time_to_first_token_seconds"
        key = self.target.key
        outcome = self.outcome(QueryKind.TTFT_QUANTILE)
        series = self.target_series.get(QueryKind.TTFT_QUANTILE)
        if outcome is None or series is None:
            status = outcome.status if outcome else SignalStatus.EMPTY
            detail = outcome.detail if outcome else "query not sent"
            return SignalReading(name, status, source_metric=metric, detail=f"ttft query: {detail}")
        self.series_found[QueryKind.TTFT_QUANTILE] = int(key in series)
        if key not in series:
            rates = self.target_series.get(QueryKind.TTFT_RATE) or {}
            if rates.get(key) == 0.0:
                # VictoriaMetrics (MetricsQL) drops the NaN an idle window's quantile is, where
                # Prometheus returns it: a request rate of exactly 0 is the same idle, and the
                # histogram is there (the rate is its _count's).
                self.series_found[QueryKind.TTFT_QUANTILE] = 1
                return self.ttft_nan()
            if scraped:
                return SignalReading(
                    name,
                    SignalStatus.ABSENT,
                    source_metric=metric,
                    detail="no TTFT histogram series although the pods are scraped",
                )
            return SignalReading(
                name, SignalStatus.EMPTY, source_metric=metric, detail="no TTFT histogram series"
            )
        value = series[key]
        if math.isnan(value):
            return self.ttft_nan()
        bad = _bad_value_reading(name, value, "TTFT quantile", metric)
        if bad is not None:
            return bad
        return SignalReading(name, SignalStatus.OK, value=value, source_metric=metric)

    def ttft_nan(self) -> SignalReading:
        """NaN quantile: idle only when the request rate is known to be exactly zero."""
        name = SignalName.TTFT_P95
        metric = "vllm:time_to_first_token_seconds"
        window = promql_duration(self.rate_window_seconds)
        rate_outcome = self.outcome(QueryKind.TTFT_RATE)
        rates = self.target_series.get(QueryKind.TTFT_RATE)
        if rates is None:
            why = rate_outcome.status if rate_outcome else "not sent"
            return SignalReading(
                name,
                SignalStatus.NAN,
                source_metric=metric,
                detail=f"TTFT quantile NaN and request rate unknown (rate query: {why})",
            )
        rate = rates.get(self.target.key)
        if rate is None:
            return SignalReading(
                name,
                SignalStatus.NAN,
                source_metric=metric,
                detail="TTFT quantile NaN and the request-rate query has no series",
            )
        if rate == 0.0:
            # 0/0 in histogram_quantile: no requests in the window. Valid, no pressure.
            return SignalReading(
                name,
                SignalStatus.IDLE,
                value=0.0,
                source_metric=metric,
                detail=f"no requests in the last {window} (request rate 0)",
            )
        return SignalReading(
            name,
            SignalStatus.NAN,
            source_metric=metric,
            detail=f"TTFT quantile NaN while requests flow at {rate:g}/s",
        )


# ------------------------------------------------------------------------ dry-run


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

    def __str__(self) -> str:
        return f"{self.target} {self.signal}: {self.status}: {self.detail}; query: {self.query}"


async def check_configured_queries(
    source: PrometheusSource,
    policy_targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot] | None = None,
) -> list[ConfiguredQueryProblem]:
    """Check at start that every enabled signal's query returns series (dry-run).

    A signal fails the check when its query fails or when the target's selector (or TTFT
    expression) returns no series at all, before any pod filtering. Snapshots are
    optional: without them only the raw series count is checked.

    Returns:
        The problems, empty when every configured query returns data. The caller should
        fail loudly (log an error naming each query, exit non-zero) when it is not empty;
        ``str(problem)`` is a one-line message naming target, signal, status and query.
    """
    result = await source.read(policy_targets, snapshots or {})
    problems: list[ConfiguredQueryProblem] = []
    for t in policy_targets:
        tr = result.targets[t.key]
        running_found = tr.series_found.get(QueryKind.RUNNING, 0) > 0
        own = build_query_plan([t], rate_window_seconds=source.rate_window_seconds).queries
        for name in t.signals.enabled():
            kind = SIGNAL_QUERY[name]
            outcome = result.queries.get(kind)
            query = own.get(kind, "")
            if outcome is None or not outcome.ok:
                status = outcome.status if outcome else SignalStatus.EMPTY
                detail = outcome.detail if outcome else "query not sent"
                problems.append(ConfiguredQueryProblem(t.key, name, status, query, detail))
                continue
            if tr.series_found.get(kind, 0) > 0:
                continue
            if running_found:
                status = SignalStatus.ABSENT
                detail = (
                    f"{kind} query returns no series for {t.key} although "
                    "vllm:num_requests_running series exist for its selector"
                )
            else:
                status = SignalStatus.EMPTY
                detail = (
                    f"{kind} query returns no series for {t.key}: no vLLM series match "
                    f"its selector {{{t.promql_selector()}}}"
                )
            problems.append(ConfiguredQueryProblem(t.key, name, status, query, detail))
    return problems
