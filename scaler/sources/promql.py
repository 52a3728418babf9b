"""The PromQL vllm-scaler sends: a fixed set of instant queries covering every target at once.

One control cycle sends at most six instant queries (:class:`QueryKind`), whatever the number
of targets; each query is the ``or`` of one sub-expression per *group*, and every
sub-expression is tagged with :func:`label_replace` so the answer can be split back per group:

- per-pod queries (waiting, running, KV cache, throughput) are grouped by label selector:
  every target with the default selector (its namespace and its pods' names) is in one group
  selected by namespace alone, and targets with explicit ``prometheus_matchers`` group by
  distinct selector (:func:`target_selector`). Each series is tagged
  ``scaler_selector="s<i>"`` and keeps ``namespace`` and ``pod`` so the source can match it
  to the target's live, ready pods (by name in the default group). Tagging (rather than
  merging with a plain ``or``) keeps a series of a pod picked by two selectors in both
  groups, so each target sees exactly what its own selector picks.
- target-level TTFT queries have one sub-expression per target, tagged
  ``scaler_target="<namespace/kind/name>"``.

Why these expressions:

- ``sum by (namespace, pod)`` of ``vllm:num_requests_waiting`` / ``vllm:num_requests_running``:
  vLLM V1 exports one series per engine (label ``engine``); data-parallel pods run several.
  The pod's queue is the sum over its engines.
- ``vllm:num_requests_running`` is not a scaling signal: it exists on every scraped vLLM pod,
  so it proves a pod is scraped. A signal with no series while running series exist is
  ``absent`` (configuration problem, e.g. a renamed metric) rather than ``empty`` (outage).
- KV cache: ``max by (namespace, pod, __name__)`` over ``{__name__=~"new|old"}``: one query
  reads both the new name (``vllm:kv_cache_usage_perc``, vLLM >= 0.9.2) and the old one
  (``vllm:gpu_cache_usage_perc``, removed in 0.12), keeping the name so the source prefers the
  new one per pod and reports which it found. Max over engines: each engine has its own cache
  and the fullest one is the one that preempts.
- TTFT: vLLM's own Grafana expression, ``histogram_quantile(q, sum by (le) (rate(..._bucket
  [W])))`` over the target's pods. It is NaN both when there is no traffic (0/0) and when the
  data is broken, so a second query, ``sum(rate(..._count[W]))``, gives the request rate:
  exactly 0 means idle. Bucket bounds are never hard-coded (vLLM accepts custom buckets).
- Throughput: per pod, ``sum by (namespace, pod) (rate(C{SEL}[W]))`` of each of vLLM's
  counters ``vllm:request_success_total`` (finished requests, every ``finished_reason``),
  ``vllm:prompt_tokens_total`` and ``vllm:generation_tokens_total``, summed over engines, one
  series per counter: ``rate()`` drops the metric name, so each is tagged
  ``scaler_metric="<counter>"`` (not ``__name__`` again: ``or`` matches label sets without
  the name, and would keep only the first counter of each pod). Zero token throughput tells
  a frozen gauge from a busy pod (:mod:`scaler.sources.prometheus.stalls`); the same per-pod
  rates are a target's demand.

All expressions were checked against Prometheus 2.42 (``tests/sources/test_prometheus_real.py``).
Queries get long with many targets: send them as POST form bodies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scaler.config.policy import POD_NAME_SUFFIX, TargetPolicy
from scaler.config.vocabulary import SignalName

__all__ = [
    "GENERATION_TOKENS_METRIC",
    "KV_METRICS",
    "METRIC_LABEL",
    "PROMPT_TOKENS_METRIC",
    "REQUESTS_METRIC",
    "RUNNING_METRIC",
    "SELECTOR_LABEL",
    "SIGNAL_QUERY",
    "TARGET_LABEL",
    "THROUGHPUT_METRICS",
    "TTFT_BUCKET_METRIC",
    "TTFT_COUNT_METRIC",
    "WAITING_METRIC",
    "QueryKind",
    "QueryPlan",
    "build_query_plan",
    "label_value",
    "promql_duration",
    "promql_string",
    "target_selector",
]

#: Label that tags per-pod series with their selector group ("s0", "s1", ...).
SELECTOR_LABEL = "scaler_selector"
#: Label that tags target-level (TTFT) series with the target key.
TARGET_LABEL = "scaler_target"
#: Label that tags each throughput series with the counter it is the rate of.
METRIC_LABEL = "scaler_metric"

WAITING_METRIC = "vllm:num_requests_waiting"
RUNNING_METRIC = "vllm:num_requests_running"
#: KV-cache usage gauges, preferred first (0.9.2 renamed the second to the first).
KV_METRICS: tuple[str, ...] = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
TTFT_BUCKET_METRIC = "vllm:time_to_first_token_seconds_bucket"
TTFT_COUNT_METRIC = "vllm:time_to_first_token_seconds_count"
#: vLLM's counters of finished requests, prefill tokens and generated tokens (all versions).
REQUESTS_METRIC = "vllm:request_success_total"
PROMPT_TOKENS_METRIC = "vllm:prompt_tokens_total"
GENERATION_TOKENS_METRIC = "vllm:generation_tokens_total"
#: The counters whose per-pod rates the throughput query reads (each series' ``scaler_metric``).
THROUGHPUT_METRICS: tuple[str, ...] = (
    REQUESTS_METRIC,
    PROMPT_TOKENS_METRIC,
    GENERATION_TOKENS_METRIC,
)


class QueryKind(StrEnum):
    """The instant queries of one control cycle (at most one of each per cycle)."""

    WAITING = "waiting"
    RUNNING = "running"
    KV_CACHE = "kv_cache"
    TTFT_QUANTILE = "ttft_quantile"
    TTFT_RATE = "ttft_rate"
    THROUGHPUT = "throughput"

    @property
    def per_pod(self) -> bool:
        """True for queries whose series are per (namespace, pod) and tagged by selector."""
        return self in (
            QueryKind.WAITING,
            QueryKind.RUNNING,
            QueryKind.KV_CACHE,
            QueryKind.THROUGHPUT,
        )


#: Which query carries each signal's value.
SIGNAL_QUERY: dict[SignalName, QueryKind] = {
    SignalName.QUEUE_DEPTH: QueryKind.WAITING,
    SignalName.KV_CACHE_USAGE: QueryKind.KV_CACHE,
    SignalName.TTFT_P95: QueryKind.TTFT_QUANTILE,
}


def label_value(value: str) -> str:
    """Escape ``value`` for the inside of a PromQL double-quoted string (a label matcher's
    value): backslash, double quote and newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def promql_string(value: str) -> str:
    """Quote ``value`` as a PromQL double-quoted string literal."""
    return f'"{label_value(value)}"'


def target_selector(target: TargetPolicy) -> str:
    """The label selector body of one target's vLLM series, e.g.
    ``namespace="llm",pod=~"vllm-[a-z0-9]+-[a-z0-9]+"``: its exact-match
    :meth:`~scaler.config.policy.TargetPolicy.matchers`, and with the default matchers a regex
    on the pod names of the workload (:meth:`~scaler.config.policy.TargetPolicy.pod_name_regex`).
    """
    parts = [f'{k}="{label_value(v)}"' for k, v in sorted(target.matchers().items())]
    if target.prometheus_matchers is None:
        parts.append(f'pod=~"{label_value(target.pod_name_regex())}"')
    return ",".join(parts)


def _replacement(value: str) -> str:
    # label_replace expands $1-style references in the replacement: escape literal '$'.
    return promql_string(value.replace("$", "$$"))


def promql_duration(seconds: float) -> str:
    """Format seconds as a PromQL duration (integers only: ``60s``, ``4500ms``).

    Raises:
        ValueError: ``seconds`` is not positive.
    """
    if not seconds > 0:
        raise ValueError(f"duration must be positive, got {seconds!r}")
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _tag(expr: str, label: str, value: str) -> str:
    return f'label_replace({expr}, "{label}", {_replacement(value)}, "", "")'


def _or(parts: Sequence[str]) -> str:
    return " or ".join(parts)


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """The queries of one cycle and how to split their answers back per target.

    Attributes:
        queries: PromQL per query kind; a kind is left out when no target needs it
            (for example no target enables TTFT).
        selector_group: target key -> selector group id (the ``scaler_selector`` value).
        selectors: group id -> label selector body.
    """

    queries: dict[QueryKind, str]
    selector_group: dict[str, str]
    selectors: dict[str, str]


def _per_pod_expr(metric_selector: str, agg: str, by: str) -> str:
    return f"{agg} by ({by}) ({metric_selector})"


def _named_rate(metric: str, sel: str, window: str) -> str:
    """The per-pod rate of counter ``metric``, tagged with its name (rate() drops the name)."""
    rate = _per_pod_expr(f"rate({metric}{{{sel}}}[{window}])", "sum", "namespace, pod")
    return _tag(rate, METRIC_LABEL, metric)


def build_query_plan(targets: Sequence[TargetPolicy], *, rate_window_seconds: float) -> QueryPlan:
    """Build the cycle's queries for all ``targets``.

    Args:
        targets: the targets to read (any number; the query count does not grow with it).
        rate_window_seconds: the ``rate()`` window W of the TTFT and throughput queries
            (``Policy.rate_window_seconds``, at least 4 scrape intervals).

    Returns:
        A :class:`QueryPlan`. Per kind, the query is the ``or`` of tagged sub-expressions:

        - ``waiting``: ``label_replace(sum by (namespace, pod) (vllm:num_requests_waiting{SEL}),
          "scaler_selector", "s<i>", "", "") or ...`` per selector of a queue-enabled target;
        - ``running``: the same on ``vllm:num_requests_running`` for every target's selector;
        - ``kv_cache``: ``label_replace(max by (namespace, pod, __name__) ({__name__=~
          "vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc",SEL}), ...) or ...``;
        - ``ttft_quantile``: ``label_replace(histogram_quantile(Q, sum by (le) (rate(
          vllm:time_to_first_token_seconds_bucket{SEL_t}[W]))), "scaler_target", "<key>",
          "", "") or ...`` per TTFT-enabled target;
        - ``ttft_rate``: ``label_replace(sum(rate(vllm:time_to_first_token_seconds_count
          {SEL_t}[W])), "scaler_target", "<key>", "", "") or ...``;
        - ``throughput``: ``label_replace((label_replace(sum by (namespace, pod) (rate(
          vllm:request_success_total{SEL}[W])), "scaler_metric", "vllm:request_success_total",
          "", "") or <the same for vllm:prompt_tokens_total and vllm:generation_tokens_total>),
          "scaler_selector", "s<i>", "", "") or ...`` for every target's selector.
    """
    window = promql_duration(rate_window_seconds)
    selectors: dict[str, str] = {}
    group_of_selector: dict[str, str] = {}
    selector_group: dict[str, str] = {}
    # Targets with the default selector (their namespace and their pods' names) all share one
    # group whose selector is only their namespaces: with 1,000 targets in 50 namespaces the
    # per-pod queries are one selector instead of an ``or`` of 1,000 (or 50 with pod-name
    # unions), 3-4x cheaper for Prometheus (see scaler/bench/scale.py). The source keeps
    # each target's own pods by name (and a gone pod by its pod-name pattern) and ignores the
    # other vLLM pods of those namespaces. Targets with explicit matchers group by selector.
    default_namespaces: list[str] = []
    for t in targets:
        if t.prometheus_matchers is None and t.workload.namespace not in default_namespaces:
            default_namespaces.append(t.workload.namespace)
    if len(default_namespaces) == 1:
        default_selector = f'namespace="{label_value(default_namespaces[0])}"'
    else:
        union = "|".join(re.escape(ns) for ns in default_namespaces)
        default_selector = f'namespace=~"{label_value(union)}"'
    for t in targets:
        sel = default_selector if t.prometheus_matchers is None else target_selector(t)
        if sel not in group_of_selector:
            gid = f"s{len(group_of_selector)}"
            group_of_selector[sel] = gid
            selectors[gid] = sel
        selector_group[t.key] = group_of_selector[sel]

    def groups_for(signal: SignalName | None) -> list[str]:
        out: list[str] = []
        for t in targets:
            gid = selector_group[t.key]
            if (signal is None or signal in t.signals.enabled()) and gid not in out:
                out.append(gid)
        return out

    kv_names = "|".join(KV_METRICS)
    queries: dict[QueryKind, str] = {}

    def per_pod(kind: QueryKind, gids: list[str]) -> None:
        if not gids:
            return
        parts = []
        for gid in gids:
            sel = selectors[gid]
            if kind is QueryKind.KV_CACHE:
                matchers = ",".join(m for m in (f'__name__=~"{kv_names}"', sel) if m)
                inner = _per_pod_expr(f"{{{matchers}}}", "max", "namespace, pod, __name__")
            elif kind is QueryKind.THROUGHPUT:
                inner = "(" + _or([_named_rate(m, sel, window) for m in THROUGHPUT_METRICS]) + ")"
            else:
                metric = WAITING_METRIC if kind is QueryKind.WAITING else RUNNING_METRIC
                inner = _per_pod_expr(f"{metric}{{{sel}}}", "sum", "namespace, pod")
            parts.append(_tag(inner, SELECTOR_LABEL, gid))
        queries[kind] = _or(parts)

    per_pod(QueryKind.WAITING, groups_for(SignalName.QUEUE_DEPTH))
    per_pod(QueryKind.RUNNING, groups_for(None))
    per_pod(QueryKind.KV_CACHE, groups_for(SignalName.KV_CACHE_USAGE))
    per_pod(QueryKind.THROUGHPUT, groups_for(None))

    ttft_targets = [t for t in targets if SignalName.TTFT_P95 in t.signals.enabled()]
    if ttft_targets:
        quantiles = []
        rates = []
        # Default-selector Deployments and StatefulSets of one namespace (same quantile) share
        # one expression: the target key is derived from the pod name with label_replace
        # (``<name>-<hash>-<suffix>`` / ``<name>-<ordinal>``: the name is unambiguous), then
        # aggregated by it. Others get one sub-expression each.
        grouped: dict[tuple[str, str, str], list[TargetPolicy]] = {}
        single: list[TargetPolicy] = []
        for t in ttft_targets:
            q = repr(float(t.signals.ttft_p95.quantile))
            if t.prometheus_matchers is None and t.workload.kind in POD_NAME_SUFFIX:
                grouped.setdefault((t.workload.namespace, t.workload.kind, q), []).append(t)
            else:
                single.append(t)
        for (ns, kind, q), members in grouped.items():
            if len(members) == 1:
                single.append(members[0])
                continue
            names = "|".join(re.escape(t.workload.name) for t in members)
            capture = f"({names}){POD_NAME_SUFFIX[kind]}"
            sel = f'namespace="{label_value(ns)}",pod=~"{label_value(capture)}"'
            key = f"{ns}/{kind}/$1"

            def keyed(metric: str, sel: str = sel, key: str = key, capture: str = capture) -> str:
                return (
                    f"label_replace(rate({metric}{{{sel}}}[{window}]), "
                    f'"{TARGET_LABEL}", {promql_string(key)}, "pod", {promql_string(capture)})'
                )

            quantiles.append(
                f"histogram_quantile({q}, sum by (le, {TARGET_LABEL}) "
                f"({keyed(TTFT_BUCKET_METRIC)}))"
            )
            rates.append(f"sum by ({TARGET_LABEL}) ({keyed(TTFT_COUNT_METRIC)})")
        for t in sorted(single, key=lambda t: ttft_targets.index(t)):
            sel = target_selector(t)
            q = repr(float(t.signals.ttft_p95.quantile))
            quantiles.append(
                _tag(
                    f"histogram_quantile({q}, sum by (le) "
                    f"(rate({TTFT_BUCKET_METRIC}{{{sel}}}[{window}])))",
                    TARGET_LABEL,
                    t.key,
                )
            )
            rates.append(
                _tag(f"sum(rate({TTFT_COUNT_METRIC}{{{sel}}}[{window}]))", TARGET_LABEL, t.key)
            )
        queries[QueryKind.TTFT_QUANTILE] = _or(quantiles)
        queries[QueryKind.TTFT_RATE] = _or(rates)

    return QueryPlan(queries=queries, selector_group=selector_group, selectors=selectors)
