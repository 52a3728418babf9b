"""Scale benchmark: many targets on one real Prometheus, vllm-scaler's plan vs one query per target.

``vllm-scaler bench-scale`` (or ``python -m scaler.bench.scale``) starts, on loopback:

- an exposition server in a child process serving one static vLLM ``/metrics`` page per pod at
  ``/metrics/<namespace>/<pod>`` (queue, running, KV cache, a TTFT histogram whose counters
  grow with time so ``rate()`` is non-zero), for ``targets x pods`` pods;
- Debian's ``prometheus`` scraping every pod through file-based service discovery (one SD
  target per pod: the same address, its own ``__metrics_path__``, and ``namespace``/``pod``
  labels as Kubernetes discovery gives them).

Once every pod is scraped, it runs control cycles three ways, one after the other, against the
same Prometheus:

- **vllm-scaler, raw**: :class:`~scaler.sources.prometheus.PrometheusSource` (the production
  query plan, at most six queries whatever the number of targets) then
  :func:`~scaler.core.decide.decide` for every target, with no recording rule loaded: TTFT
  from the raw bucket series of each target's pods;
- **per-target** (the KEDA model: one ScaledObject trigger per target and signal): each
  target's own queries (the same PromQL built for that target alone), sent with bounded
  concurrency, then the same decisions;
- **vllm-scaler, recording rules**: the TTFT recording rule of ``deploy/rules`` loaded (a
  Prometheus reload), then the same cycles, which read its per-pod-group bucket rates.

The rule's own cost is reported beside the cycles (Prometheus' rule group evaluation duration
and interval), and Prometheus' CPU seconds per cycle for each approach, so that a saving is
not merely moved into the rule evaluation; the machine's load average too.

A cycle here is the Prometheus side plus the decisions; the Kubernetes reads (informer-style
snapshots of each Deployment and its pods) are built once and handed in, since their cost
does not depend on the query plan. Reported per approach: queries per cycle, cycle duration
p50 and p95, this process' peak RSS growth during the approach, and Prometheus' peak RSS.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import typer
import yaml
from prometheus_client.parser import text_string_to_metric_families

from scaler.config.cli_options import OutputFormat, OutputOpt
from scaler.config.options import option_errors
from scaler.config.policy import Signals, TargetPolicy, TtftSignal, WorkloadRef
from scaler.controller.observe import observe
from scaler.core.decide import decide
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.core.signals import SignalName, SignalReading
from scaler.core.state import TargetState
from scaler.sim.exposition import TTFT_BUCKETS
from scaler.sim.prometheus_server import PrometheusServer, wait_for_series, write_file_sd
from scaler.sources.prometheus import PrometheusSource, TargetReadings
from scaler.sources.promql import build_query_plan, recorded_ttft_metric, recording_rule_expr

__all__ = [
    "ScaleFigures",
    "ScaleResult",
    "format_result",
    "main",
    "register_scale",
    "run_scale_bench",
]

_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(frozen=True, slots=True)
class ScaleFigures:
    """One approach's figures."""

    approach: str
    queries_per_cycle: int
    cycles: int
    cycle_p50_seconds: float
    cycle_p95_seconds: float
    cycle_max_seconds: float
    rss_growth_mb: float
    failed_queries: int
    controller_cpu_p50_seconds: float = 0.0
    prometheus_cpu_per_cycle_seconds: float = 0.0
    ttft_recorded_targets: int = 0


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """The whole benchmark."""

    targets: int
    pods_per_target: int
    namespaces: int
    series: int
    scrape_interval_seconds: float
    process_peak_rss_mb: float
    prometheus_peak_rss_mb: float
    approaches: tuple[ScaleFigures, ...]
    setup_seconds: float
    disagreeing_signals: int = 0
    disagreements: tuple[str, ...] = ()
    ttft_selection_floor_seconds: float = 0.0
    ttft_enabled: bool = True
    rule_eval_p50_seconds: float = 0.0
    rule_eval_p99_seconds: float = 0.0
    rule_interval_seconds: float = 0.0
    rule_evaluations: int = 0
    load_average: tuple[float, float] = (0.0, 0.0)
    rules_disagreeing_signals: int = 0
    rules_disagreements: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        """A JSON-able dict."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "approaches"}
        out["approaches"] = [_fields(a) for a in self.approaches]
        return out


def _fields(f: ScaleFigures) -> dict[str, object]:
    return {k: getattr(f, k) for k in f.__dataclass_fields__}


# ------------------------------------------------------------------------ the fleet


@dataclass(frozen=True, slots=True)
class _Pod:
    namespace: str
    name: str
    target: int


def _fleet(
    targets: int, pods: int, namespaces: int, *, ttft: bool = True
) -> tuple[list[TargetPolicy], list[_Pod]]:
    policies: list[TargetPolicy] = []
    signals = Signals(ttft_p95=TtftSignal(enabled=ttft))
    all_pods: list[_Pod] = []
    for i in range(targets):
        ns = f"team-{i % namespaces:03d}"
        name = f"llm-{i:04d}"
        ref = WorkloadRef(api_version="apps/v1", kind="Deployment", namespace=ns, name=name)
        policies.append(TargetPolicy(workload=ref, max_replicas=max(pods * 2, 10), signals=signals))
        rs = f"{zlib.crc32(name.encode()) % 10**9:09x}"[:9]
        for j in range(pods):
            all_pods.append(_Pod(ns, f"{name}-{rs}-p{j:03d}", i))
    return policies, all_pods


def _snapshots(
    policies: Sequence[TargetPolicy], pods: Sequence[_Pod]
) -> dict[str, WorkloadSnapshot]:
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


def _page(pod: str, now: float) -> bytes:
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


def _serve_expositions(port_queue: multiprocessing.Queue[int]) -> None:  # child process
    from aiohttp import web

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(
            body=_page(request.match_info["pod"], time.time()),
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


@contextlib.contextmanager
def _exposition_server() -> Iterator[int]:
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[int] = ctx.Queue()
    proc = ctx.Process(target=_serve_expositions, args=(queue,), daemon=True)
    proc.start()
    try:
        yield queue.get(timeout=60)
    finally:
        proc.terminate()
        proc.join(10)


def _rss_mb() -> float:
    """This process' resident set size now, MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _peak_rss_mb(pid: int | None = None) -> float:
    """Peak resident set size (VmHWM) of a process, MiB."""
    path = f"/proc/{pid or 'self'}/status"
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# ------------------------------------------------------------------------ the cycles


async def _decide_all(
    policies: Sequence[TargetPolicy],
    snaps: dict[str, WorkloadSnapshot],
    readings: dict[str, TargetReadings],
    states: dict[str, TargetState | None],
    now: float,
    ttft_window_seconds: float,
) -> None:
    for t in policies:
        state = states.get(t.key)
        obs = observe(t, snaps[t.key], readings[t.key], state)
        states[t.key] = decide(t, obs, state, now, ttft_window_seconds=ttft_window_seconds).state


async def _ours(
    source: PrometheusSource,
    policies: Sequence[TargetPolicy],
    snaps: dict[str, WorkloadSnapshot],
    cycles: int,
    last: dict[str, dict[SignalName, SignalReading]],
    outside: list[float],
    recorded: list[int] | None = None,
) -> tuple[list[float], int, int]:
    durations: list[float] = []
    states: dict[str, TargetState | None] = {}
    queries = failed = 0
    for _ in range(cycles):
        start = time.monotonic()
        cpu = time.process_time()
        result = await source.read(policies, snaps)
        await _decide_all(
            policies, snaps, result.targets, states, time.time(), source.rate_window_seconds
        )
        readings = {k: r.signals for k, r in result.targets.items()}
        durations.append(time.monotonic() - start)
        # the controller's own work: this process' CPU time in the cycle (answers parsed,
        # split and read, decisions); the exposition server runs in a child process
        outside.append(time.process_time() - cpu)
        last.update(readings)
        queries = result.queries_sent
        failed += sum(1 for o in result.queries.values() if not o.ok)
        if recorded is not None:
            recorded.append(sum(1 for r in result.targets.values() if r.ttft_query == "recorded"))
    return durations, queries, failed


async def _per_target(
    source: PrometheusSource,
    policies: Sequence[TargetPolicy],
    snaps: dict[str, WorkloadSnapshot],
    cycles: int,
    concurrency: int,
    last: dict[str, dict[SignalName, SignalReading]],
) -> tuple[list[float], int, int]:
    durations: list[float] = []
    states: dict[str, TargetState | None] = {}
    sem = asyncio.Semaphore(concurrency)
    queries = failed = 0

    async def one(t: TargetPolicy) -> tuple[str, TargetReadings, int, int]:
        async with sem:
            r = await source.read([t], {t.key: snaps[t.key]})
        bad = sum(1 for o in r.queries.values() if not o.ok)
        return t.key, r.targets[t.key], r.queries_sent, bad

    for _ in range(cycles):
        start = time.monotonic()
        results = await asyncio.gather(*(one(t) for t in policies))
        await _decide_all(
            policies,
            snaps,
            {k: r for k, r, _, _ in results},
            states,
            time.time(),
            source.rate_window_seconds,
        )
        readings = {k: r.signals for k, r, _, _ in results}
        durations.append(time.monotonic() - start)
        last.update(readings)
        queries = sum(q for _, _, q, _ in results)
        failed += sum(b for _, _, _, b in results)
    return durations, queries, failed


def _p(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def _figures(
    name: str,
    durations: list[float],
    queries: int,
    failed: int,
    rss: float,
    outside: Sequence[float] = (),
    *,
    cpu: float = 0.0,
    recorded: int = 0,
) -> ScaleFigures:
    return ScaleFigures(
        approach=name,
        queries_per_cycle=queries,
        cycles=len(durations),
        cycle_p50_seconds=round(statistics.median(durations), 4),
        cycle_p95_seconds=round(_p(durations, 0.95), 4),
        cycle_max_seconds=round(max(durations), 4),
        rss_growth_mb=round(rss, 1),
        failed_queries=failed,
        controller_cpu_p50_seconds=round(statistics.median(outside), 4) if outside else 0.0,
        prometheus_cpu_per_cycle_seconds=round(cpu / len(durations), 4),
        ttft_recorded_targets=recorded,
    )


#: The recording rules' group in ``deploy/rules/vllm-scaler.rules.yaml``.
RECORDING_GROUP = "vllm-scaler-recording"


def _write_recording_rules(path: Path, rate_window_seconds: float, interval: float) -> None:
    """The shipped TTFT recording rule for the window (a test pins the file to the same
    expression), evaluated every ``interval`` seconds."""
    group = {
        "name": RECORDING_GROUP,
        "interval": f"{max(1, round(interval))}s",
        "rules": [
            {
                "record": recorded_ttft_metric(rate_window_seconds),
                "expr": recording_rule_expr(rate_window_seconds),
            }
        ],
    }
    path.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False), encoding="utf-8")


async def _prometheus_own(http: httpx.AsyncClient, url: str) -> dict[str, float]:
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


async def _selection_floor(http: httpx.AsyncClient, url: str) -> float:
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


async def run_scale_bench(
    *,
    targets: int = 1000,
    ttft: bool = True,
    pods_per_target: int = 8,
    namespaces: int = 50,
    cycles: int = 20,
    per_target_cycles: int = 5,
    per_target_concurrency: int = 32,
    scrape_interval_seconds: float = 15.0,
    timeout_seconds: float = 30.0,
    rate_window_seconds: float = 60.0,
    workdir: Path | None = None,
    progress: bool = False,
) -> ScaleResult:
    """Run the benchmark (see the module docstring) and return its figures.

    ``per_target_cycles`` 0 skips the one-query-per-target comparison; ``ttft`` False disables
    ``ttft_p95`` on every target (three per-pod queries a cycle). Measuring starts once
    every pod has a whole ``rate_window_seconds`` of samples, so both plans read full windows.
    """
    started = time.monotonic()
    load_start = os.getloadavg()[0]
    policies, pods = _fleet(targets, pods_per_target, namespaces, ttft=ttft)
    snaps = _snapshots(policies, pods)

    def say(msg: str) -> None:
        if progress:
            print(msg, file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-")))
        port = stack.enter_context(_exposition_server())
        sd = workdir / "targets.json"
        write_file_sd(
            sd,
            [
                (
                    [f"127.0.0.1:{port}"],
                    {
                        "__metrics_path__": f"/metrics/{p.namespace}/{p.name}",
                        "namespace": p.namespace,
                        "pod": p.name,
                    },
                )
                for p in pods
            ],
        )
        prom = PrometheusServer(
            workdir / "prom",
            scrape_interval_seconds=scrape_interval_seconds,
            sd_file=sd,
            ready_timeout_seconds=120,
        )
        await prom.astart()
        stack.callback(prom.stop)
        say(f"prometheus {prom.url}: waiting for {len(pods)} pods to be scraped twice")
        await wait_for_series(
            prom.url, "vllm:num_requests_running", timeout=600, min_series=len(pods), poll_seconds=2
        )
        # A whole rate window of samples for every pod: before that, rate() extrapolates
        # over a partial window and two reads a moment apart can differ a lot.
        full = int(rate_window_seconds / scrape_interval_seconds) - 1
        await wait_for_series(
            prom.url,
            f"count_over_time(vllm:num_requests_running[{int(rate_window_seconds)}s]) >= {full}",
            timeout=600 + rate_window_seconds,
            min_series=len(pods),
            poll_seconds=1,
        )
        setup = time.monotonic() - started
        async with httpx.AsyncClient(
            timeout=timeout_seconds, limits=httpx.Limits(max_connections=per_target_concurrency)
        ) as http:
            source = PrometheusSource(
                http,
                base_url=prom.url,
                timeout_seconds=timeout_seconds,
                rate_window_seconds=rate_window_seconds,
            )
            plan = build_query_plan(policies, rate_window_seconds=rate_window_seconds)
            say(f"vllm-scaler, raw: {cycles} cycles of up to {len(plan.queries) + 1} queries")
            rss0 = _rss_mb()
            ours: dict[str, dict[SignalName, SignalReading]] = {}
            theirs: dict[str, dict[SignalName, SignalReading]] = {}
            outside: list[float] = []
            cpu0 = (await _prometheus_own(http, prom.url)).get("cpu", 0.0)
            d, q, f = await _ours(source, policies, snaps, cycles, ours, outside)
            cpu = (await _prometheus_own(http, prom.url)).get("cpu", 0.0) - cpu0
            approaches = [
                _figures("vllm-scaler, raw buckets", d, q, f, _rss_mb() - rss0, outside, cpu=cpu)
            ]
            # only a cycle that reads TTFT pays this floor
            floor = await _selection_floor(http, prom.url) if ttft else 0.0
            if per_target_cycles > 0:
                n = len(policies) * (len(plan.queries) + (1 if ttft else 0))
                say(f"per-target: {per_target_cycles} cycles of up to {n} queries")
                rss0 = _rss_mb()
                d, q, f = await _per_target(
                    source, policies, snaps, per_target_cycles, per_target_concurrency, theirs
                )
                approaches.append(
                    _figures("one query per target (KEDA model)", d, q, f, _rss_mb() - rss0)
                )
            rules: dict[str, float] = {}
            via_rules: dict[str, dict[SignalName, SignalReading]] = {}
            if ttft:
                rule_file = workdir / "recording.rules.yaml"
                # the shipped group's interval: two scrapes (30 s for the usual 15 s)
                _write_recording_rules(rule_file, rate_window_seconds, 2 * scrape_interval_seconds)
                prom.reload([rule_file])
                say("recording rules loaded: waiting for their first evaluation")
                await wait_for_series(
                    prom.url,
                    f'{recorded_ttft_metric(rate_window_seconds)}{{le="+Inf"}}',
                    timeout=600,
                    min_series=len(policies),
                    poll_seconds=1,
                )
                say(f"vllm-scaler, recording rules: {cycles} cycles")
                rss0 = _rss_mb()
                outside = []
                recorded: list[int] = []
                cpu0 = (await _prometheus_own(http, prom.url)).get("cpu", 0.0)
                d, q, f = await _ours(source, policies, snaps, cycles, via_rules, outside, recorded)
                rules = await _prometheus_own(http, prom.url)
                approaches.append(
                    _figures(
                        "vllm-scaler, recording rules",
                        d,
                        q,
                        f,
                        _rss_mb() - rss0,
                        outside,
                        cpu=rules.get("cpu", 0.0) - cpu0,
                        recorded=min(recorded),
                    )
                )
        load = (round(load_start, 2), round(os.getloadavg()[0], 2))
        series = len(pods) * (5 + len(TTFT_BUCKETS) + 1)
        prom_rss = _peak_rss_mb(prom._proc.pid if prom._proc is not None else None)
    differ = _disagreements(ours, theirs)
    differ_rules = _disagreements(via_rules, ours)
    return ScaleResult(
        targets=targets,
        pods_per_target=pods_per_target,
        namespaces=namespaces,
        series=series,
        scrape_interval_seconds=scrape_interval_seconds,
        process_peak_rss_mb=round(_peak_rss_mb(), 1),
        prometheus_peak_rss_mb=round(prom_rss, 1),
        approaches=tuple(approaches),
        setup_seconds=round(setup, 1),
        disagreeing_signals=len(differ),
        disagreements=differ,
        ttft_selection_floor_seconds=floor,
        ttft_enabled=ttft,
        rule_eval_p50_seconds=round(rules.get("eval_0.5", 0.0), 4),
        rule_eval_p99_seconds=round(rules.get("eval_0.99", 0.0), 4),
        rule_interval_seconds=rules.get("interval", 0.0),
        rule_evaluations=int(rules.get("iterations", 0)),
        load_average=load,
        rules_disagreeing_signals=len(differ_rules),
        rules_disagreements=differ_rules,
    )


def _disagreements(
    ours: dict[str, dict[SignalName, SignalReading]],
    theirs: dict[str, dict[SignalName, SignalReading]],
) -> tuple[str, ...]:
    """The (target, signal) readings whose status or value differ between the two plans.

    The gauges are static, so per-pod values must be equal; TTFT is read at a slightly
    different time by each plan (counters grow), so it may differ by 10%.
    """
    bad: list[str] = []
    for key, mine in ours.items():
        other = theirs.get(key)
        if other is None:
            continue
        for name, a in mine.items():
            b = other.get(name)
            if b is None or a.status is not b.status:
                bad.append(f"{key} {name}: {a.status} vs {b.status if b else 'none'}")
            elif a.value is not None and b.value is not None:
                tol = 1e-9 if name.per_pod else 0.1
                if abs(a.value - b.value) > tol * max(1.0, abs(b.value)):
                    bad.append(f"{key} {name}: {a.value!r} vs {b.value!r}")
    return tuple(bad)


def format_result(r: ScaleResult) -> str:
    """The figures as a plain-text table with the goals."""
    lines = [
        f"{r.targets} targets x {r.pods_per_target} pods = {r.targets * r.pods_per_target} pods "
        f"in {r.namespaces} namespaces, ~{r.series} series, scrape every "
        f"{r.scrape_interval_seconds:g} s (setup {r.setup_seconds:g} s); load average "
        f"{r.load_average[0]:g} at start, {r.load_average[1]:g} at the end",
        "signals read: queue depth, KV cache"
        + (", TTFT p95" if r.ttft_enabled else " (TTFT p95 disabled on every target)"),
        "",
        f"{'approach':36} {'queries/cycle':>13} {'cycles':>6} {'p50 s':>8} {'p95 s':>8} "
        f"{'max s':>8} {'prom CPU s':>10} {'RSS +MB':>8} {'failed':>6}",
    ]
    for a in r.approaches:
        lines.append(
            f"{a.approach:36} {a.queries_per_cycle:>13} {a.cycles:>6} {a.cycle_p50_seconds:>8.3f} "
            f"{a.cycle_p95_seconds:>8.3f} {a.cycle_max_seconds:>8.3f} "
            f"{a.prometheus_cpu_per_cycle_seconds:>10.3f} {a.rss_growth_mb:>8.1f} "
            f"{a.failed_queries:>6}"
        )
    best = min(
        (a for a in r.approaches if a.approach.startswith("vllm-scaler")),
        key=lambda a: a.cycle_p95_seconds,
    )
    lines += [
        "",
        "prom CPU s: Prometheus' CPU seconds per cycle while the approach ran (rule "
        "evaluations included)",
        f"peak RSS: this process {r.process_peak_rss_mb:.1f} MB (controller side, the "
        f"exposition server runs in a child process), Prometheus {r.prometheus_peak_rss_mb:.1f} MB",
        f"readings that differ between the raw plan and one query per target: "
        f"{r.disagreeing_signals}, between the raw plan and the recording rules: "
        f"{r.rules_disagreeing_signals} (target, signal)",
        "vllm-scaler's own work per cycle (its CPU time: parsing, attribution, decisions), "
        "p50: "
        + ", ".join(
            f"{a.controller_cpu_p50_seconds:.3f} s ({a.approach.removeprefix('vllm-scaler, ')})"
            for a in r.approaches
            if a.approach.startswith("vllm-scaler")
        )
        + (
            f"; Prometheus selecting the {r.targets * r.pods_per_target * (len(TTFT_BUCKETS) + 1)}"
            " TTFT bucket series once (count(), nothing else): "
            f"{r.ttft_selection_floor_seconds:.3f} s, the floor of any cycle that reads TTFT p95"
            " from raw buckets"
            if r.ttft_enabled
            else ""
        ),
    ]
    if r.rule_evaluations:
        share = r.rule_eval_p50_seconds / r.rule_interval_seconds if r.rule_interval_seconds else 0
        recorded = next(
            (a.ttft_recorded_targets for a in r.approaches if a.approach.endswith("rules")), 0
        )
        lines.append(
            f"recording rule: evaluation p50 {r.rule_eval_p50_seconds:.3f} s, p99 "
            f"{r.rule_eval_p99_seconds:.3f} s, every {r.rule_interval_seconds:g} s "
            f"({share:.0%} of one core; {r.rule_evaluations} evaluations); "
            f"{recorded} of {r.targets} targets read TTFT from it in every cycle"
        )
    lines.append(
        f"goals ({best.approach}): "
        f"<= 6 queries/cycle: {'met' if best.queries_per_cycle <= 6 else 'NOT met'}; "
        f"p95 <= 1 s: {'met' if best.cycle_p95_seconds <= 1 else 'NOT met'}; "
        f"RSS < 150 MB: {'met' if r.process_peak_rss_mb < 150 else 'NOT met'}"
    )
    return "\n".join(lines)


# option -> (low, low inclusive, high)
_BOUNDS = {
    "--targets": (1.0, True, 100_000.0),
    "--pods": (1.0, True, 1000.0),
    "--namespaces": (1.0, True, 100_000.0),
    "--cycles": (1.0, True, 100_000.0),
    "--per-target-cycles": (0.0, True, 100_000.0),
    "--scrape-interval": (0.0, False, 3600.0),
}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scaler.bench.scale [--targets N] [--pods N] [--cycles N] [--no-ttft]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m scaler.bench.scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--namespaces", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--per-target-cycles", type=int, default=5)
    parser.add_argument("--scrape-interval", type=float, default=15.0)
    parser.add_argument("--no-ttft", action="store_true", help="disable ttft_p95 on every target")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    errors = option_errors(
        _BOUNDS,
        targets=args.targets,
        pods=args.pods,
        namespaces=args.namespaces,
        cycles=args.cycles,
        per_target_cycles=args.per_target_cycles,
        scrape_interval=args.scrape_interval,
    )
    if not errors and args.namespaces > args.targets:
        errors.append(
            f"--namespaces: value {args.namespaces}: expected at most --targets ({args.targets})"
        )
    if errors:
        print("\n".join(f"vllm-scaler: {e}" for e in errors), file=sys.stderr)
        return 2
    _quiet()
    result = asyncio.run(
        run_scale_bench(
            targets=args.targets,
            pods_per_target=args.pods,
            namespaces=args.namespaces,
            cycles=args.cycles,
            per_target_cycles=args.per_target_cycles,
            scrape_interval_seconds=args.scrape_interval,
            ttft=not args.no_ttft,
            progress=True,
        )
    )
    print(json.dumps(result.as_json(), indent=1) if args.json else format_result(result))
    return 0


def register_scale(app: typer.Typer) -> None:
    """Add ``bench-scale`` to the main typer app (``scaler/cli.py``)."""

    @app.command("bench-scale")
    def bench_scale(
        targets: int = typer.Option(1000, help="Targets (Deployments)."),
        pods: int = typer.Option(8, help="Pods per target."),
        namespaces: int = typer.Option(50, help="Namespaces the targets are spread over."),
        cycles: int = typer.Option(20, help="Control cycles with vllm-scaler's query plan."),
        per_target_cycles: int = typer.Option(
            3, help="Cycles with one query per target and signal (0: skip)."
        ),
        scrape_interval: float = typer.Option(15.0, help="Prometheus scrape interval, s."),
        no_ttft: bool = typer.Option(
            False, "--no-ttft", help="Disable ttft_p95 on every target (queue and KV only)."
        ),
        output: OutputOpt = OutputFormat.TEXT,
    ) -> None:
        """Scale benchmark: many targets on a real Prometheus; queries, cycle time, RSS.

        It starts its own Prometheus on loopback (no credentials: the Prometheus settings do
        not apply); progress goes to stderr, the result to stdout.
        """
        json_output = output is OutputFormat.JSON
        raise typer.Exit(
            main(
                [
                    f"--targets={targets}",
                    f"--pods={pods}",
                    f"--namespaces={namespaces}",
                    f"--cycles={cycles}",
                    f"--per-target-cycles={per_target_cycles}",
                    f"--scrape-interval={scrape_interval}",
                    *(["--no-ttft"] if no_ttft else []),
                    *(["--json"] if json_output else []),
                ]
            )
        )


def _quiet() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
