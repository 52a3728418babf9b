"""Helpers of the hunt's cases (``tests/cases/hNN-*.md`` and their tests).

Each test names the case text it implements with :func:`tests.support.fakeprom.case_file`, and
``tests/cases/test_index.py`` checks that the case names the test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import httpx

from scaler.config.policy import TargetPolicy
from scaler.core.observation import WorkloadSnapshot
from scaler.sim.exposition import VllmMetrics
from scaler.sim.kubeapi.base import rfc3339
from scaler.sources.prometheus import PrometheusSource, SourceResult
from tests.support.fakeprom import kv, per_pod, ttft_answers


def idle(pods: Iterable[str], *, kv_cache: str = "0.02") -> dict[str, Any]:
    """Answers of idle vLLM pods: nothing waiting or running, KV cache ``kv_cache``, TTFT
    request rate 0."""
    names = list(pods)
    return {
        "waiting": per_pod(dict.fromkeys(names, "0")),
        "running": per_pod(dict.fromkeys(names, "0")),
        "kv_cache": kv(dict.fromkeys(names, kv_cache)),
        **ttft_answers("NaN", "0"),
    }


def busy(waiting: Mapping[str, str], *, kv_cache: str = "0.5") -> dict[str, Any]:
    """Answers of pods with ``waiting`` requests each, one running, KV cache ``kv_cache``
    and an idle TTFT (a test about the queue)."""
    return {
        "waiting": per_pod(waiting),
        "running": per_pod(dict.fromkeys(waiting, "1")),
        "kv_cache": kv(dict.fromkeys(waiting, kv_cache)),
        **ttft_answers("NaN", "0"),
    }


def condition(
    kind: str, status: bool, at: float, *, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """A pod condition as the kubelet or the scheduler writes it."""
    out: dict[str, Any] = {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": rfc3339(at),
    }
    if reason is not None:
        out["reason"] = reason
    if message is not None:
        out["message"] = message
    return out


def busy_exposition(
    start: float, *, waiting: int = 3, kv_cache: float = 0.4
) -> Callable[[], bytes]:
    """A busy vLLM pod's ``/metrics`` body at each scrape (a real Prometheus scrapes it):
    ``waiting`` requests, 2 running, KV cache ``kv_cache``, 500 prompt and 100 generated
    tokens and 2 finished requests per second since ``start`` (``time.monotonic()``)."""
    m = VllmMetrics()

    def render() -> bytes:
        t = time.monotonic() - start
        m.num_requests_waiting, m.num_requests_running, m.kv_cache_usage = waiting, 2, kv_cache
        m.prompt_tokens, m.generation_tokens = int(t * 500), int(t * 100)
        m.request_success["stop"] = int(t * 2)
        return m.render()

    return render


async def read_source(
    url: str,
    targets: Sequence[TargetPolicy],
    snapshots: Mapping[str, WorkloadSnapshot],
    *,
    reads: int = 1,
    rate_window_seconds: float = 4.0,
) -> list[SourceResult]:
    """``reads`` reads of one real :class:`PrometheusSource` on ``url``."""
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(
            client, base_url=url, timeout_seconds=5, rate_window_seconds=rate_window_seconds
        )
        return [await source.read(targets, snapshots) for _ in range(reads)]
