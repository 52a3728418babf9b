"""The scale benchmark's figures and their report (text and JSON).

Per approach (:class:`ScaleFigures`): queries and cycle time, the controller's own CPU,
Prometheus' CPU while it ran, the load average at its start, and per query (:class:
`QueryFigures`) the series answered, the time the controller waited for it and Prometheus'
own timings of the same PromQL. For the whole run (:class:`ScaleResult`): the fleet, the
recording rule's evaluation cost, peak RSS and whether every plan read the same values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from scaler.config.wording import counted
from scaler.core.signals import SignalName, SignalReading
from scaler.sim.exposition import TTFT_BUCKETS
from scaler.sources.prometheus import Throughput

__all__ = ["QueryFigures", "ScaleFigures", "ScaleResult", "disagreements", "format_result"]

#: The control interval the rule's cost is shared over (the policy's default).
CONTROL_INTERVAL_SECONDS = 15.0


@dataclass(frozen=True, slots=True)
class QueryFigures:
    """One query of an approach's cycle.

    Attributes:
        kind: the query (``waiting``, ``ttft_buckets``...).
        series: series in its answer (the last cycle).
        client_p50_seconds: median wall time from sending it to its answer parsed (other
            queries of the cycle run meanwhile).
        prometheus_exec_seconds: Prometheus' own execution time of the same PromQL, sent
            alone after the cycles (``stats=all``: ``execTotalTime``, best of two).
        prometheus_selection_seconds: the part of it spent selecting series
            (``queryPreparationTime``).
        samples: samples it read (``totalQueryableSamples``).
        response_mb: size of its answer, MiB.
    """

    kind: str
    series: int
    client_p50_seconds: float
    prometheus_exec_seconds: float = 0.0
    prometheus_selection_seconds: float = 0.0
    samples: int = 0
    response_mb: float = 0.0


@dataclass(frozen=True, slots=True)
class ScaleFigures:
    """One approach's figures (seconds; RSS in MiB). ``queries_per_cycle`` is the last
    cycle's count; ``resending_cycles`` cycles sent a dependent query again, the plan
    having changed since the cycle before (up to ``queries_max_per_cycle`` queries).
    ``work_per_cycle_seconds``: the cycle's own CPU seconds (Prometheus' beyond its
    scraping, rule evaluations included, plus the controller's); ``cycle_floor_seconds``:
    the shortest cycle that work allows on the cores scraping leaves (:mod:`.machine`;
    both 0 when not measured)."""

    approach: str
    queries_per_cycle: int
    cycles: int
    cycle_p50_seconds: float
    cycle_p95_seconds: float
    cycle_max_seconds: float
    rss_growth_mb: float
    failed_queries: int
    controller_cpu_p50_seconds: float = 0.0
    controller_cpu_p95_seconds: float = 0.0
    prometheus_cpu_per_cycle_seconds: float = 0.0
    ttft_recorded_targets: int = 0
    throughput_recorded_namespaces: int = 0
    load_average: float = 0.0
    queries: tuple[QueryFigures, ...] = ()
    queries_max_per_cycle: int = 0
    resending_cycles: int = 0
    work_per_cycle_seconds: float = 0.0
    cycle_floor_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """The whole benchmark. ``cores``: the CPUs the run could use; ``background_cores``:
    the CPU scraping took before any cycle (Prometheus and the exposition server; of which
    ``background_prometheus_cores`` Prometheus), cores."""

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
    cores: int = 0
    background_cores: float = 0.0
    background_prometheus_cores: float = 0.0

    def as_json(self) -> dict[str, object]:
        """A JSON-able dict."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "approaches"}
        out["approaches"] = [dataclasses.asdict(a) for a in self.approaches]
        return out


def disagreements(
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


def throughput_disagreements(
    ours: Mapping[str, Throughput], theirs: Mapping[str, Throughput], tolerance: float = 0.05
) -> tuple[str, ...]:
    """The targets whose throughput differs between two plans: another status, other pods,
    or a total rate (requests, prompt or generated tokens per second) more than
    ``tolerance`` (a ratio) apart. The counters grow at a constant rate per pod, so the
    rates of two reads a moment apart (or of a recording a rate window old) agree within a
    few percent; a pod read twice or left out moves a target's total by an eighth."""
    bad: list[str] = []
    for key, a in ours.items():
        b = theirs.get(key)
        if b is None:
            continue
        if a.status is not b.status or set(a.pods) != set(b.pods):
            bad.append(
                f"{key} throughput: {a.status} {len(a.pods)} pods vs {b.status} {len(b.pods)} pods"
            )
            continue
        ta, tb = a.total, b.total
        if ta is None or tb is None:
            continue
        for name in (
            "requests_per_second",
            "prompt_tokens_per_second",
            "generation_tokens_per_second",
        ):
            x, y = getattr(ta, name), getattr(tb, name)
            if abs(x - y) > tolerance * max(1.0, abs(y)):
                bad.append(f"{key} throughput {name}: {x!r} vs {y!r}")
    return tuple(bad)


def _ours(a: ScaleFigures) -> bool:
    return a.approach.startswith("vllm-scaler")


def format_result(r: ScaleResult) -> str:
    """The figures as plain-text tables with the goals."""
    lines = [
        f"{r.targets} targets x {r.pods_per_target} pods = {r.targets * r.pods_per_target} pods "
        f"in {counted(r.namespaces, 'namespace')}, ~{r.series} series, scrape every "
        f"{r.scrape_interval_seconds:g} s (setup {r.setup_seconds:g} s); load average "
        f"{r.load_average[0]:g} at start, {r.load_average[1]:g} at the end",
        "signals read: queue depth, KV cache"
        + (", TTFT p95" if r.ttft_enabled else " (TTFT p95 disabled on every target)"),
        "",
        f"{'approach':36} {'load':>5} {'queries/cycle':>13} {'cycles':>6} {'p50 s':>7} "
        f"{'p95 s':>7} {'max s':>7} {'own CPU s':>9} {'prom CPU s':>10} {'work s':>7} "
        f"{'floor s':>7} {'RSS +MB':>7} {'failed':>6}",
    ]
    for a in r.approaches:
        own = f"{a.controller_cpu_p50_seconds:.3f}" if _ours(a) else "-"
        measured = _ours(a) and a.work_per_cycle_seconds > 0
        work = f"{a.work_per_cycle_seconds:.3f}" if measured else "-"
        floor = f"{a.cycle_floor_seconds:.3f}" if measured else "-"
        lines.append(
            f"{a.approach:36} {a.load_average:>5.2f} {a.queries_per_cycle:>13} {a.cycles:>6} "
            f"{a.cycle_p50_seconds:>7.3f} {a.cycle_p95_seconds:>7.3f} {a.cycle_max_seconds:>7.3f} "
            f"{own:>9} {a.prometheus_cpu_per_cycle_seconds:>10.3f} {work:>7} {floor:>7} "
            f"{a.rss_growth_mb:>7.1f} {a.failed_queries:>6}"
        )
    lines += [
        "",
        "load: the 1-minute load average when the approach started (the machine's other work "
        "moves the times; the CPU seconds move less)",
        "own CPU s: vllm-scaler's own CPU seconds per cycle, p50 (decoding, checking and "
        "splitting the answers, attribution to pods, decisions)",
        "prom CPU s: Prometheus' CPU seconds per cycle while the approach ran (its scrapes and "
        "rule evaluations included)",
    ]
    if r.cores:
        lines.append(
            f"work s: the cycle's own CPU seconds (Prometheus' beyond what its scraping took "
            f"before any cycle, rule evaluations included, plus vllm-scaler's); floor s: that "
            f"work spread over the {r.cores - r.background_cores:.2f} of {r.cores} cores the "
            f"scraping leaves ({r.background_cores:.2f} cores: Prometheus "
            f"{r.background_prometheus_cores:.2f}, the exposition server "
            f"{r.background_cores - r.background_prometheus_cores:.2f}): no cycle doing the same "
            "work is shorter on this machine"
        )
    for a in r.approaches:
        if not (_ours(a) and a.queries):
            continue
        resent = ""
        if a.resending_cycles:
            resent = (
                f"; {a.resending_cycles} of {a.cycles} cycles sent a dependent query again, "
                f"planned otherwise than the cycle before: up to {a.queries_max_per_cycle} "
                "queries"
            )
        lines += [
            "",
            f"{a.approach}: per query (own CPU p95 {a.controller_cpu_p95_seconds:.3f} s{resent})",
            f"  {'query':13} {'series':>7} {'answer MiB':>10} {'waited p50 s':>12} "
            f"{'prom exec s':>11} {'selecting s':>11} {'samples':>8}",
        ]
        for q in a.queries:
            lines.append(
                f"  {q.kind:13} {q.series:>7} {q.response_mb:>10.2f} {q.client_p50_seconds:>12.3f} "
                f"{q.prometheus_exec_seconds:>11.3f} {q.prometheus_selection_seconds:>11.3f} "
                f"{q.samples:>8}"
            )
    lines += [
        "",
        "waited: from sending the query to its answer parsed, the cycle's other queries "
        "running meanwhile; prom exec / selecting: Prometheus' own timings of the same query "
        "sent alone after the cycles (stats=all: execTotalTime, queryPreparationTime)",
        f"peak RSS: this process {r.process_peak_rss_mb:.1f} MB (controller side, the "
        f"exposition server runs in a child process), Prometheus {r.prometheus_peak_rss_mb:.1f} MB",
        f"readings that differ between the raw plan and one query per target: "
        f"{r.disagreeing_signals}, between the raw plan and the recording rules: "
        f"{r.rules_disagreeing_signals} (target, signal)",
    ]
    if r.ttft_enabled:
        lines.append(
            f"Prometheus selecting the {r.targets * r.pods_per_target * (len(TTFT_BUCKETS) + 1)}"
            " TTFT bucket series once (count(), nothing else): "
            f"{r.ttft_selection_floor_seconds:.3f} s, the floor of any cycle that reads TTFT p95"
            " from raw buckets"
        )
    if r.rule_evaluations:
        share = r.rule_eval_p50_seconds / r.rule_interval_seconds if r.rule_interval_seconds else 0
        per_cycle = share * CONTROL_INTERVAL_SECONDS
        by_rules = [a for a in r.approaches if a.approach.endswith("rules")]
        recorded = by_rules[0].ttft_recorded_targets if by_rules else 0
        recorded_ns = by_rules[0].throughput_recorded_namespaces if by_rules else 0
        lines.append(
            f"recording rule: evaluation p50 {r.rule_eval_p50_seconds:.3f} s, p99 "
            f"{r.rule_eval_p99_seconds:.3f} s, every {r.rule_interval_seconds:g} s "
            f"({share:.0%} of one core; {counted(r.rule_evaluations, 'evaluation')}): "
            f"{per_cycle:.3f} s of Prometheus per {CONTROL_INTERVAL_SECONDS:g} s control cycle; "
            f"{recorded} of {r.targets} targets read TTFT from it in every cycle, "
            f"{recorded_ns} of {r.namespaces} namespaces their pods' throughput"
        )
    best = min((a for a in r.approaches if _ours(a)), key=lambda a: a.cycle_p95_seconds)
    p95 = "met" if best.cycle_p95_seconds <= 1 else "NOT met"
    if best.cycle_p95_seconds > 1 and best.cycle_floor_seconds > 1:
        p95 += (
            f" (and cannot be on this machine with this work: floor "
            f"{best.cycle_floor_seconds:.3f} s)"
        )
    lines.append(
        f"goals ({best.approach}): "
        f"<= 6 queries/cycle: {'met' if best.queries_per_cycle <= 6 else 'NOT met'}; "
        f"p95 <= 1 s: {p95}; "
        f"RSS < 150 MB: {'met' if r.process_peak_rss_mb < 150 else 'NOT met'}"
    )
    return "\n".join(lines)
