"""The simulated fleet of the scale benchmark: targets, their pods, and the pods' ``/metrics``.

:func:`fleet` builds ``targets`` Deployments of ``pods`` pods spread over namespaces (pod names
as a ReplicaSet gives them), :func:`snapshots` their Kubernetes snapshots (every pod ready),
and :func:`exposition_server` serves, in a child process, one small vLLM exposition per pod
at ``/metrics/<namespace>/<pod>`` (queue, running, KV cache, throughput counters and a TTFT
histogram whose counters grow with wall time, so that ``rate()`` is not zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import multiprocessing
import os
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from scaler.config.policy import Signals, TargetPolicy, TtftSignal, WorkloadRef
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.sim.exposition import TTFT_BUCKETS
from scaler.sim.prometheus_server import die_with_parent

__all__ = ["ExpositionServer", "FleetPod", "exposition_server", "fleet", "page", "snapshots"]

_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(frozen=True, slots=True)
class FleetPod:
    """One simulated pod: its namespace, name and the index of its target."""

    namespace: str
    name: str
    target: int


def fleet(
    targets: int, pods: int, namespaces: int, *, ttft: bool = True
) -> tuple[list[TargetPolicy], list[FleetPod]]:
    """``targets`` Deployment targets (``llm-0000``... in ``team-000``...) with ``pods`` pods
    each, named as a ReplicaSet names them; ``ttft`` False disables ``ttft_p95`` on all."""
    policies: list[TargetPolicy] = []
    signals = Signals(ttft_p95=TtftSignal(enabled=ttft))
    all_pods: list[FleetPod] = []
    for i in range(targets):
        ns = f"team-{i % namespaces:03d}"
        name = f"llm-{i:04d}"
        ref = WorkloadRef(api_version="apps/v1", kind="Deployment", namespace=ns, name=name)
        policies.append(TargetPolicy(workload=ref, max_replicas=max(pods * 2, 10), signals=signals))
        rs = f"{zlib.crc32(name.encode()) % 10**9:09x}"[:9]
        for j in range(pods):
            all_pods.append(FleetPod(ns, f"{name}-{rs}-p{j:03d}", i))
    return policies, all_pods


def snapshots(
    policies: Sequence[TargetPolicy], pods: Sequence[FleetPod]
) -> dict[str, WorkloadSnapshot]:
    """Target key -> its Kubernetes snapshot: every pod listed, ready for an hour."""
    by_target: dict[int, list[PodInfo]] = {}
    for p in pods:
        by_target.setdefault(p.target, []).append(PodInfo(p.name, True, False, 3600.0))
    out: dict[str, WorkloadSnapshot] = {}
    for i, t in enumerate(policies):
        mine = tuple(by_target.get(i, []))
        out[t.key] = WorkloadSnapshot(
            t.workload.namespace, len(mine), len(mine), f"app={t.workload.name}", "1", mine
        )
    return out


def page(pod: str, now: float) -> bytes:
    """A small vLLM exposition for one pod; counters grow with wall time."""
    h = zlib.crc32(pod.encode())
    waiting = h % 7
    running = 1 + h % 5
    kv = (h % 90) / 100.0
    # requests/s: enough that a short rate() window holds hundreds of counts, so two reads a
    # moment apart give nearly the same quantile (few counts would jump between buckets)
    rate = 10.0 + (h % 4) * 5.0
    count = int(now * rate) % 10**9
    labels = f'engine="0",model_name="{_MODEL}"'
    lines = [
        f"vllm:num_requests_waiting{{{labels}}} {waiting}",
        f"vllm:num_requests_running{{{labels}}} {running}",
        f"vllm:kv_cache_usage_perc{{{labels}}} {kv}",
        f'vllm:request_success_total{{{labels},finished_reason="stop"}} {count}',
        f"vllm:prompt_tokens_total{{{labels}}} {count * 900}",
        f"vllm:generation_tokens_total{{{labels}}} {count * 200}",
    ]
    cumulative = 0.0
    n = len(TTFT_BUCKETS)
    for k, le in enumerate(TTFT_BUCKETS):
        cumulative = count * min(1.0, (k + 1) / (n * 0.6))
        bucket = f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}}'
        lines.append(f"{bucket} {math.floor(cumulative)}")
    lines.append(f'vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} {count}')
    lines.append(f"vllm:time_to_first_token_seconds_count{{{labels}}} {count}")
    lines.append(f"vllm:time_to_first_token_seconds_sum{{{labels}}} {count * 0.4:.1f}")
    return ("\n".join(lines) + "\n").encode()


def serve_expositions(port_queue: multiprocessing.Queue[int], parent: int) -> None:  # child
    follow = die_with_parent(parent=parent)
    if follow is not None:  # gone with the benchmark even if it is killed hard
        follow()
    from aiohttp import web

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            body=page(request.match_info["pod"], time.time()),
            content_type="text/plain",
            charset="utf-8",
        )

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/metrics/{namespace}/{pod}", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port_queue.put(int(runner.addresses[0][1]))
        await asyncio.Event().wait()

    asyncio.run(main())


@dataclass(frozen=True, slots=True)
class ExpositionServer:
    """The running exposition server: its loopback port and its process id."""

    port: int
    pid: int


@contextlib.contextmanager
def exposition_server() -> Iterator[ExpositionServer]:
    """Serve every pod's page from a child process (stopped on exit)."""
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[int] = ctx.Queue()
    proc = ctx.Process(target=serve_expositions, args=(queue, os.getpid()), daemon=True)
    proc.start()
    try:
        port = queue.get(timeout=60)
        if proc.pid is None:  # not reached: a started process has one
            raise RuntimeError("the exposition server has no process id")
        yield ExpositionServer(port, proc.pid)
    finally:
        proc.terminate()
        proc.join(10)
