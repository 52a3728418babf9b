"""vLLM pods whose latency histograms a test lays out, scraped by a real Prometheus, and the
real control loop reading them: the set-up of the real-path tests of the latency signals
(TTFT, ITL) and their bucket layouts.

Each :class:`HistogramPod` serves its own ``/metrics`` on loopback in vLLM's exposition
format: the scheduler gauges, the three token counters, and for each latency histogram it
has the bounds it was given, observing a fixed latency at a fixed rate (each request's
observations land in the one bucket that holds the latency). The counts follow the wall
clock, so Prometheus' ``rate()`` reads the given rates. Prometheus (Debian's binary) finds
the pods through file-based service discovery with their ``namespace`` and ``pod`` labels,
scrapes every second and, with ``rules``, evaluates recording rules every second.

:func:`open_loop` runs the real controller (Kubernetes API stand-in, real client, real
source) against that Prometheus: nothing of the reading path is a stand-in.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes_asyncio.client import ApiClient

from scaler.actuators.kubernetes import KubernetesActuator, build_api_client
from scaler.config.policy import Policy, parse_policy
from scaler.controller.loop import Controller
from scaler.controller.report import TargetReport
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.sources.prometheus import PrometheusSource
from scaler.telemetry.metrics import ScalerMetrics
from tests.support.clock import FakeClock
from tests.support.policies import case_target_doc
from tests.support.scraped_pods import scraped_pods

#: vLLM V1's TTFT buckets (seconds; reference/vllm-metrics.md), and V0's, which stop at 10 s.
TTFT_V1 = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
           7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
TTFT_V0 = TTFT_V1[:16]
#: vLLM's inter-token latency buckets (V1), and V0's, which stop at 2.5 s.
ITL_V1 = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
          10.0, 20.0, 40.0, 80.0)  # fmt: skip
ITL_V0 = ITL_V1[:13]
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
#: The name of the inter-token latency histogram before vLLM 0.11 (gone since 0.13).
TPOT = "vllm:time_per_output_token_seconds"
TOKEN = "loop-token"
T0 = 1_718_000_000.0


@dataclass
class Latency:
    """One latency histogram of a pod: its name, bounds, and what it observes.

    Attributes:
        name: the histogram's name (without ``_bucket``).
        bounds: its finite bucket bounds, seconds.
        seconds: every observation's latency; None: no observation at all (idle).
        per_request: observations per request (1 for TTFT; the output tokens after the
            first for inter-token latency).
    """

    name: str
    bounds: Sequence[float]
    seconds: float | None
    per_request: float = 1.0


@dataclass
class HistogramPod:
    """One vLLM pod's ``/metrics`` (see the module docstring).

    Attributes:
        name: the pod's name (a Deployment's ``<name>-<hash>-<suffix>``).
        namespace: its ``namespace`` label.
        histograms: its latency histograms.
        requests_per_second: finished requests per second (and TTFT observations).
        waiting, running, kv: the scheduler gauges (one engine).
        prompt_tokens, output_tokens: tokens per request.
    """

    name: str
    namespace: str = "llm"
    histograms: list[Latency] = field(default_factory=list)
    requests_per_second: float = 1.0
    waiting: float = 0.0
    running: float = 1.0
    kv: float = 0.1
    prompt_tokens: float = 512.0
    output_tokens: float = 128.0
    started: float = field(default_factory=time.monotonic)

    def body(self) -> bytes:
        """The exposition at this scrape: counters at their rates since :attr:`started`."""
        requests = self.requests_per_second * (time.monotonic() - self.started + 60.0)
        labels = 'engine="0",model_name="m"'
        lines: list[str] = []
        for metric, kind, value in (
            ("vllm:num_requests_waiting", "gauge", self.waiting),
            ("vllm:num_requests_running", "gauge", self.running),
            ("vllm:kv_cache_usage_perc", "gauge", self.kv),
            ("vllm:request_success_total", "counter", requests),
            ("vllm:prompt_tokens_total", "counter", requests * self.prompt_tokens),
            ("vllm:generation_tokens_total", "counter", requests * self.output_tokens),
        ):
            lines += [f"# HELP {metric} of the test pod", f"# TYPE {metric} {kind}"]
            lines.append(f"{metric}{{{labels}}} {value!r}")
        for h in self.histograms:
            observed = 0.0 if h.seconds is None else requests * h.per_request
            lines += [f"# HELP {h.name} of the test pod", f"# TYPE {h.name} histogram"]
            for le in [*h.bounds, math.inf]:
                inside = h.seconds is not None and h.seconds <= le
                shown = "+Inf" if le == math.inf else repr(float(le))
                count = observed if inside else 0.0
                lines.append(f'{h.name}_bucket{{{labels},le="{shown}"}} {count!r}')
            lines.append(f"{h.name}_count{{{labels}}} {observed!r}")
            lines.append(f"{h.name}_sum{{{labels}}} {observed * (h.seconds or 0.0)!r}")
        return ("\n".join(lines) + "\n").encode()


def write_rules(path: Path, rules: Sequence[Mapping[str, str]]) -> Path:
    """A Prometheus rules file of one group evaluated every second."""
    doc = {"groups": [{"name": "test-recording", "interval": "1s", "rules": list(rules)}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def scraped(
    tmp: Path,
    pods: Iterable[HistogramPod],
    *,
    rate_window_seconds: float,
    rules: Sequence[Path] = (),
    recorded: str | None = None,
) -> AsyncIterator[str]:
    """Serve ``pods`` and start Prometheus on them (with the rule files ``rules``); yield its
    URL once every pod has a whole ``rate()`` window of samples (and, with ``recorded``, once
    that query returns a series): :func:`tests.support.scraped_pods.scraped_pods`."""
    pods = list(pods)
    async with scraped_pods(
        tmp,
        {p.name: p.body for p in pods},
        rate_window_seconds=rate_window_seconds,
        namespaces={p.name: p.namespace for p in pods},
        rule_files=rules,
        ready_when=recorded,
        timeout_seconds=60.0,
    ) as url:
        yield url


async def instant(url: str, query: str) -> list[dict[str, Any]]:
    """An instant query's result (a test's own look at what Prometheus holds)."""
    async with httpx.AsyncClient(timeout=10.0) as client:
        resp = await client.post(f"{url}/api/v1/query", data={"query": query})
        resp.raise_for_status()
        result: list[dict[str, Any]] = resp.json()["data"]["result"]
        return result


def namespaced_policy(
    signals: Mapping[str, Mapping[str, Any]], *, rate_window_seconds: float
) -> Policy:
    """The cases' target, Deployment ``vllm``, once in each namespace of ``signals``, with that
    namespace's signal blocks (a test's policy over the pods of :func:`scraped`)."""
    return parse_policy(
        {
            "rate_window_seconds": rate_window_seconds,
            "targets": [
                case_target_doc(
                    workload={
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "namespace": ns,
                        "name": "vllm",
                    },
                    signals=dict(blocks),
                )
                for ns, blocks in signals.items()
            ],
        },
        source="test-policy",
    )


@dataclass
class Loop:
    """The real controller against a real Prometheus (see the module docstring)."""

    clock: FakeClock
    store: KubeStore
    metrics: ScalerMetrics
    controller: Controller

    async def cycle(self) -> dict[str, TargetReport]:
        """One ``run_cycle``: each target's report by key."""
        return {r.target: r for r in await self.controller.run_cycle()}

    def value(self, name: str, **labels: str) -> float | None:
        """A sample of the controller's own metrics (None when the series does not exist)."""
        return self.metrics.registry.get_sample_value(name, labels)


@contextlib.asynccontextmanager
async def open_loop(
    tmp: Path, prometheus_url: str, policy: Policy, pods: Iterable[HistogramPod]
) -> AsyncIterator[Loop]:
    """The real loop on ``policy``: each target a Deployment (``spec.replicas`` its pods among
    ``pods``, labelled ``app=<name>``, Ready for an hour), read from ``prometheus_url``."""
    clock = FakeClock(T0)
    store = KubeStore(clock)
    pods = list(pods)
    for t in policy.targets:
        ns, name = t.workload.namespace, t.workload.name
        own = [p for p in pods if p.namespace == ns and p.name.startswith(f"{name}-")]
        labels = {"app": name}
        store.add_deployment(ns, name, len(own), labels)
        for p in own:
            store.add_pod(ns, p.name, labels, ready=True, created_at=clock.now - 3600)
    async with contextlib.AsyncExitStack() as stack:
        kube = await stack.enter_async_context(KubeApiServer(store, token=TOKEN))
        kubeconfig = write_kubeconfig(tmp / "kubeconfig", server_url=kube.url, token=TOKEN)
        api: ApiClient = await build_api_client(kubeconfig=kubeconfig, in_cluster=False)
        stack.push_async_callback(api.close)
        http = await stack.enter_async_context(httpx.AsyncClient())
        source = PrometheusSource(
            http,
            base_url=prometheus_url,
            timeout_seconds=10,
            rate_window_seconds=policy.rate_window_seconds,
            clock=clock,
        )
        metrics = ScalerMetrics()
        controller = Controller(
            policy=policy,
            source=source,
            actuator=KubernetesActuator(api, clock=clock),
            metrics=metrics,
            clock=clock,
        )
        yield Loop(clock, store, metrics, controller)
