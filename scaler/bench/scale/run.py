"""The scale benchmark's run: the fleet and Prometheus started, the three approaches measured.

:func:`run_scale_bench` starts the exposition server and a Prometheus scraping every pod,
waits until each pod has a whole rate window of samples, then runs vllm-scaler's plan on raw
buckets, one query per target and signal, and vllm-scaler's plan with the TTFT recording rule
loaded, and returns their :class:`~scaler.bench.scale.report.ScaleResult`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

from scaler.bench.scale.cycles import figures, peak_rss_mb, rss_mb, run_ours, run_per_target
from scaler.bench.scale.fleet import exposition_server, fleet, snapshots
from scaler.bench.scale.machine import background_cores, machine_cores
from scaler.bench.scale.report import ScaleResult, disagreements, throughput_disagreements
from scaler.bench.scale.server import (
    prometheus_own,
    query_stats,
    selection_floor,
    write_recording_rules,
)
from scaler.core.signals import SignalName, SignalReading
from scaler.sim.exposition import TTFT_BUCKETS
from scaler.sim.prometheus_server import PrometheusServer, wait_for_series, write_file_sd
from scaler.sources.prometheus import PrometheusSource, Throughput
from scaler.sources.promql import (
    GENERATION_TOKENS_METRIC,
    build_query_plan,
    recorded_rate_metric,
    recorded_ttft_metric,
)

__all__ = ["run_scale_bench"]


async def _wait_for_count(url: str, query: str, count: int, timeout: float, poll: float) -> None:
    """Wait until ``query`` returns at least ``count`` series, asking Prometheus to count
    them: the series themselves (8,000 of them, every poll) would be decoded here, and the
    memory they leave behind would count as the controller's in the reported peak RSS."""
    await wait_for_series(
        url, f"count({query}) >= {count}", timeout=timeout, min_series=1, poll_seconds=poll
    )


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
    background_seconds: float = 20.0,
    workdir: Path | None = None,
    progress: bool = False,
) -> ScaleResult:
    """Run the benchmark (see :mod:`scaler.bench.scale`) and return its figures.

    ``per_target_cycles`` 0 skips the one-query-per-target comparison; ``ttft`` False disables
    ``ttft_p95`` on every target (three per-pod queries a cycle). Measuring starts once
    every pod has a whole ``rate_window_seconds`` of samples, so both plans read full windows,
    after ``background_seconds`` with no cycle, over which the CPU the scraping takes is
    measured (each approach's cycle floor: :mod:`.machine`).
    """
    started = time.monotonic()
    load_start = os.getloadavg()[0]
    policies, pods = fleet(targets, pods_per_target, namespaces, ttft=ttft)
    snaps = snapshots(policies, pods)

    def say(msg: str) -> None:
        if progress:
            print(msg, file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-")))
        expositions = stack.enter_context(exposition_server())
        port = expositions.port
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
        await _wait_for_count(prom.url, "vllm:num_requests_running", len(pods), 600, 2)
        # Every pod's samples must span a whole rate window: when a series starts inside
        # the window, rate() extrapolates only to its first sample and reads low (5-8% here
        # when only window/interval - 1 samples were awaited), so the plans read at
        # different moments disagreed. window/interval + 1 samples within twice the window
        # means the first sample is at least a window old.
        spanning = int(rate_window_seconds / scrape_interval_seconds) + 1
        await _wait_for_count(
            prom.url,
            f"count_over_time(vllm:num_requests_running[{int(2 * rate_window_seconds)}s])"
            f" >= {spanning}",
            len(pods),
            600 + 2 * rate_window_seconds,
            1,
        )
        setup = time.monotonic() - started
        if prom._proc is None:  # not reached: astart() returned
            raise RuntimeError("prometheus has no process")
        prom_pid = prom._proc.pid
        say(f"measuring what scraping takes, {background_seconds:g} s without cycles")
        background = await background_cores(prom_pid, [expositions.pid], background_seconds)
        cores = machine_cores()
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
            rss0 = rss_mb()
            ours: dict[str, dict[SignalName, SignalReading]] = {}
            theirs: dict[str, dict[SignalName, SignalReading]] = {}
            flow: dict[str, Throughput] = {}  # each target's throughput, raw plan
            flow_rules: dict[str, Throughput] = {}  # and from the recording rules
            cpu0 = (await prometheus_own(http, prom.url)).get("cpu", 0.0)
            ran = await run_ours(source, policies, snaps, cycles, ours, flow)
            cpu = (await prometheus_own(http, prom.url)).get("cpu", 0.0) - cpu0
            rss = rss_mb() - rss0
            stats = await query_stats(http, prom.url, ran.promql)
            approaches = [
                figures(
                    "vllm-scaler, raw buckets",
                    ran,
                    rss,
                    cpu=cpu,
                    prometheus_stats=stats,
                    background=background,
                    cores=cores,
                )
            ]
            # only a cycle that reads TTFT pays this floor
            floor = await selection_floor(http, prom.url) if ttft else 0.0
            if per_target_cycles > 0:
                n = len(policies) * (len(plan.queries) + (1 if ttft else 0))
                say(f"per-target: {per_target_cycles} cycles of up to {n} queries")
                rss0 = rss_mb()
                ran = await run_per_target(
                    source, policies, snaps, per_target_cycles, per_target_concurrency, theirs
                )
                approaches.append(
                    figures("one query per target (KEDA model)", ran, rss_mb() - rss0)
                )
            rules: dict[str, float] = {}
            via_rules: dict[str, dict[SignalName, SignalReading]] = {}
            if ttft:
                rule_file = workdir / "recording.rules.yaml"
                # the shipped group's interval: two scrapes (30 s for the usual 15 s)
                write_recording_rules(rule_file, rate_window_seconds, 2 * scrape_interval_seconds)
                prom.reload([rule_file])
                say("recording rules loaded: waiting for their first evaluation")
                recorded = f'{recorded_ttft_metric(rate_window_seconds)}{{le="+Inf"}}'
                await _wait_for_count(prom.url, recorded, len(policies), 600, 1)
                # the group's last rule: the per-pod rates of every pod
                last = recorded_rate_metric(GENERATION_TOKENS_METRIC, rate_window_seconds)
                await _wait_for_count(prom.url, last, len(pods), 600, 1)
                say(f"vllm-scaler, recording rules: {cycles} cycles")
                rss0 = rss_mb()
                cpu0 = (await prometheus_own(http, prom.url)).get("cpu", 0.0)
                ran = await run_ours(source, policies, snaps, cycles, via_rules, flow_rules)
                rules = await prometheus_own(http, prom.url)
                rss = rss_mb() - rss0
                stats = await query_stats(http, prom.url, ran.promql)
                approaches.append(
                    figures(
                        "vllm-scaler, recording rules",
                        ran,
                        rss,
                        cpu=rules.get("cpu", 0.0) - cpu0,
                        prometheus_stats=stats,
                        background=background,
                        cores=cores,
                    )
                )
        load = (round(load_start, 2), round(os.getloadavg()[0], 2))
        series = len(pods) * (5 + len(TTFT_BUCKETS) + 1)
        prom_rss = peak_rss_mb(prom_pid)
    differ = disagreements(ours, theirs)
    differ_rules = disagreements(via_rules, ours) + throughput_disagreements(flow_rules, flow)
    return ScaleResult(
        targets=targets,
        pods_per_target=pods_per_target,
        namespaces=namespaces,
        series=series,
        scrape_interval_seconds=scrape_interval_seconds,
        process_peak_rss_mb=round(peak_rss_mb(), 1),
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
        cores=cores,
        background_cores=round(background.cores, 3),
        background_prometheus_cores=round(background.prometheus_cores, 3),
    )
