"""The Prometheus side of the scale benchmark: the recording rule it loads, Prometheus' own
CPU and rule evaluation figures, and per-query timings from Prometheus' own query stats.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from scaler.sources.promql import QueryKind, recording_rules

__all__ = [
    "RECORDING_GROUP",
    "prometheus_own",
    "query_stats",
    "selection_floor",
    "write_recording_rules",
]

_STATS_KEY = '"stats":'

#: The recording rules' group in ``deploy/rules/vllm-scaler.rules.yaml``.
RECORDING_GROUP = "vllm-scaler-recording"


def write_recording_rules(path: Path, rate_window_seconds: float, interval: float) -> None:
    """The shipped recording rules for the window (TTFT buckets per pod group, throughput
    rates per pod; a test pins the file to the same expressions), evaluated every
    ``interval`` seconds."""
    group = {
        "name": RECORDING_GROUP,
        "interval": f"{max(1, round(interval))}s",
        "rules": recording_rules(rate_window_seconds),
    }
    path.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False), encoding="utf-8")


async def prometheus_own(http: httpx.AsyncClient, url: str) -> dict[str, float]:
    """Prometheus' own ``/metrics``: its CPU seconds and the recording group's evaluations."""
    text = (await http.get(f"{url}/metrics")).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            group = sample.labels.get("rule_group", "")
            if sample.name == "process_cpu_seconds_total":
                out["cpu"] = sample.value
            elif group.endswith(f";{RECORDING_GROUP}"):
                if sample.name == "prometheus_rule_group_interval_seconds":
                    out["interval"] = sample.value
                elif sample.name == "prometheus_rule_group_iterations_total":
                    out["iterations"] = sample.value
            elif sample.name == "prometheus_rule_group_duration_seconds":
                quantile = sample.labels.get("quantile")
                if quantile in ("0.5", "0.99"):
                    out[f"eval_{quantile}"] = sample.value
    return out


async def selection_floor(http: httpx.AsyncClient, url: str) -> float:
    """Seconds Prometheus takes to select every TTFT bucket series once (best of three).

    ``count()`` of the bare selector does nothing else, so any query that reads TTFT p95 from
    vLLM's raw buckets costs at least this much on this Prometheus and machine.
    """
    best = math.inf
    for _ in range(3):
        start = time.monotonic()
        resp = await http.post(
            f"{url}/api/v1/query", data={"query": "count(vllm:time_to_first_token_seconds_bucket)"}
        )
        resp.raise_for_status()
        best = min(best, time.monotonic() - start)
    return round(best, 3)


async def query_stats(
    http: httpx.AsyncClient, url: str, promql: Mapping[QueryKind, str]
) -> dict[QueryKind, dict[str, float]]:
    """Prometheus' own timings of each query, sent alone with ``stats=all`` (best of two).

    Returns:
        Query kind -> ``exec`` (``execTotalTime``), ``prep`` (``queryPreparationTime``:
        selecting the series), ``samples`` (``totalQueryableSamples``), seconds and counts,
        and ``bytes`` (the answer's size); a query that failed is left out.
    """
    out: dict[QueryKind, dict[str, float]] = {}
    for kind, query in promql.items():
        for _ in range(2):
            resp = await http.post(f"{url}/api/v1/query", data={"query": query, "stats": "all"})
            if not resp.is_success:
                break
            stats = _stats_of(resp.text)
            timings = stats.get("timings", {})
            now = {
                "exec": float(timings.get("execTotalTime", 0.0)),
                "prep": float(timings.get("queryPreparationTime", 0.0)),
                "samples": float(stats.get("samples", {}).get("totalQueryableSamples", 0)),
                "bytes": float(len(resp.content)),
            }
            if kind not in out or now["exec"] < out[kind]["exec"]:
                out[kind] = now
    return out


def _stats_of(text: str) -> dict[str, Any]:
    """The ``data.stats`` object of an answer, read from where it starts near the end: the
    whole answer (10^4 series) decoded would add tens of MB to this process' peak RSS,
    which the benchmark reports."""
    at = text.rfind(_STATS_KEY)
    if at < 0:
        return {}
    try:
        stats, _ = json.JSONDecoder().raw_decode(text, at + len(_STATS_KEY))
    except ValueError:
        return {}
    return stats if isinstance(stats, dict) else {}
