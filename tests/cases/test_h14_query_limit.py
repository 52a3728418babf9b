"""h14: a fleet-wide query over the backend's per-query limit (a REAL Prometheus with
``--query.max-samples``; pods in four namespaces)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from scaler.core.signals import SignalStatus
from scaler.sources.promql import QueryKind
from tests.cases.hunt import busy_exposition, read_source
from tests.support.controller_harness import captured_logs
from tests.support.fakeprom import case_file, snapshot, target
from tests.support.scraped_pods import scraped_pods

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

RATE_WINDOW = 4.0
NAMESPACES = ["ns-a", "ns-b", "ns-c", "ns-d"]


def pod(namespace: str) -> str:
    return f"vllm-5c4d9-{namespace[-1]}0000"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def prometheus(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    start = time.monotonic()
    bodies = {pod(ns): busy_exposition(start, waiting=i + 1) for i, ns in enumerate(NAMESPACES)}
    async with scraped_pods(
        tmp_path_factory.mktemp("prometheus"),
        bodies,
        rate_window_seconds=RATE_WINDOW,
        namespaces={pod(ns): ns for ns in NAMESPACES},
        extra_args=("--query.max-samples=40",),
    ) as url:
        yield url


async def test_h14_a_refused_fleet_wide_query_is_read_in_parts(prometheus: str) -> None:
    """h14: the throughput query over four namespaces is refused; read in two parts every
    target has its throughput; the next cycle reads in the parts without a refusal."""
    case_file("h14-per-query-limit-of-the-backend.md")
    targets = [target(namespace=ns) for ns in NAMESPACES]
    snaps = {t.key: snapshot([pod(t.workload.namespace)], namespace=t.workload.namespace)
             for t in targets}  # fmt: skip
    with captured_logs() as logs:
        first, second = await read_source(prometheus, targets, snaps, reads=2)
    for result in (first, second):
        assert result.queries[QueryKind.THROUGHPUT].ok, result.queries[QueryKind.THROUGHPUT]
        for t in targets:
            tp = result.targets[t.key].throughput
            assert tp.status is SignalStatus.OK, (t.key, tp)
            assert tp.pods[pod(t.workload.namespace)].generation_tokens_per_second > 0
    [split] = [e for e in logs if e["event"] == "query_split"]
    assert split["query"] == "throughput" and split["parts"] == [2, 2]
    assert "too many samples" in split["error"]
    # the refused query of the first cycle is counted as sent, the second had none
    assert first.queries_sent > second.queries_sent >= 2 * 5
