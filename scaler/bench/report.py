"""The benchmark's output: a readable table, a JSON document and a PNG plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scaler.bench.figures import PolicyFigures
from scaler.bench.runner import BASELINE, FIXED_SLO_SHARE, HINDSIGHT, REACTIVE, BenchResult
from scaler.config.wording import counted

__all__ = ["as_json", "format_table", "plot_bench"]

_DESCRIPTIONS = {
    BASELINE: "KEDA sum(vllm:num_requests_waiting) threshold 5 AverageValue, HPA default behavior",
    "hpa-kv": "HPA on average vllm:kv_cache_usage_perc, target 0.8, default behavior",
    "kpa": "KPA-style on in-flight per replica (stable 180 s, panic 60 s at 2x)",
    "fixed": "cheapest constant fleet keeping >= 99% of requests within the SLO, chosen in "
    "hindsight, ready from the start (static provisioning)",
    "hindsight-instant": "hindsight schedule, instant start: fewest replicas per minute "
    "keeping >= 99% of requests within the SLO, replayed with state carried across minutes",
    HINDSIGHT: "hindsight schedule paying model load: the same service, each added replica "
    "loading its model before its minute (paid), removed replicas paid while draining",
    REACTIVE: "the best reactive policy: each minute's instant-start need known at its start, "
    "replicas added then and Ready a model load later, kept through a 5-minute scale-down "
    "window (what it misses needs a forecast of load not yet seen)",
}
_LOWER_BOUND = (
    "lower bound: prefill work of 99% of the requests inside their SLO windows, at least one "
    "replica at all times (provable floor, not achievable)"
)


def _describe(result: BenchResult, name: str) -> str:
    if name == "vllm-scaler":
        return (
            f"vllm-scaler, {result.policy_source}, {result.control_interval_seconds:g} s interval"
        )
    if name == BASELINE:
        poll = (
            "30 s cached poll (useCachedMetrics)"
            if result.keda_cached_metrics
            else "queried on every 15 s HPA sync"
        )
        return f"{_DESCRIPTIONS[BASELINE]}, {poll}"
    return _DESCRIPTIONS.get(name, name)


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.inf


def _num(x: float) -> float | None:
    # JSON has no NaN or Infinity.
    return x if math.isfinite(x) else None


def _secs(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def as_json(result: BenchResult, plot: Path | None = None) -> dict[str, Any]:
    """The result as a JSON-ready dict (times in seconds, shares 0-1, NaN/inf as null)."""
    ref = result.by_name(HINDSIGHT)
    base = result.by_name(BASELINE)
    policies = []
    for p in result.policies:
        policies.append(
            {
                "name": p.name,
                "description": _describe(result, p.name),
                "requests": p.requests,
                "rejected": p.rejected,
                "served": p.served,
                "cut_by_scale_down": p.cut,
                "unfinished": p.unfinished,
                "slo_request_share": _num(p.slo_request_share),
                "slo_minute_share": _num(p.slo_minute_share),
                "violating_minutes": p.violating_minutes,
                "ttft_p50_seconds": _num(p.ttft_p50),
                "ttft_p95_seconds": _num(p.ttft_p95),
                "ttft_p99_seconds": _num(p.ttft_p99),
                "gpu_hours": round(p.gpu_hours, 4),
                "gpu_hours_vs_hindsight_load": _num(round(_ratio(p.gpu_hours, ref.gpu_hours), 4)),
                "gpu_hours_vs_baseline": _num(round(_ratio(p.gpu_hours, base.gpu_hours), 4)),
                "scale_events": p.scale_events,
                "scale_ups": p.scale_ups,
                "scale_downs": p.scale_downs,
                "scale_events_vs_baseline": _num(
                    round(_ratio(p.scale_events, base.scale_events), 4)
                ),
                "direction_reversals": p.reversals,
                "sawtooth": p.sawtooth,
                "halves": [
                    {
                        "start_seconds": h.start_seconds,
                        "end_seconds": h.end_seconds,
                        "requests": h.requests,
                        "slo_request_share": _num(h.slo_request_share),
                        "gpu_hours": round(h.gpu_hours, 4),
                        "gpu_hours_vs_hindsight_load": _num(
                            round(_ratio(h.gpu_hours, rh.gpu_hours), 4)
                        ),
                    }
                    for h, rh in zip(p.halves, ref.halves, strict=True)
                ],
                "peak_queue": p.peak_queue,
                "peak_replicas": p.peak_replicas,
                "reaction": None
                if p.reaction is None
                else {
                    "first_scale_up_write_seconds": _secs(p.reaction.first_write_seconds),
                    "first_added_replica_ready_seconds": _secs(p.reaction.first_ready_seconds),
                },
            }
        )
    return {
        "trace": result.trace,
        "summary": result.summary,
        "duration_seconds": result.duration_seconds,
        "rate_scale": result.rate_scale,
        "rate_scale_auto": result.rate_scale_auto,
        "rejected": result.rejected,
        "routing": result.routing,
        "keda_cached_metrics": result.keda_cached_metrics,
        # The SLO bounds each request's TTFT; the share of requests within it is the figure.
        "slo_ttft_seconds": result.slo_ttft_seconds,
        "slo_request_share_target": FIXED_SLO_SHARE,
        "model_load_seconds": result.model_load_seconds,
        "replica_capacity": {
            "requests_per_second": round(result.capacity.rate, 4),
            "concurrency": round(result.capacity.concurrency, 3),
        },
        "kpa_target_concurrency": result.kpa_target,
        "initial_replicas": result.initial_replicas,
        "step_seconds": result.step_seconds,
        "baseline": BASELINE,
        "reference": HINDSIGHT,
        "hindsight_replicas_per_minute": {k: list(v) for k, v in result.hindsight_replicas.items()},
        "lower_bound": {
            "description": _LOWER_BOUND,
            "gpu_hours": round(result.lower_bound_gpu_hours, 4),
            "gpu_hours_vs_hindsight_load": _num(
                round(_ratio(result.lower_bound_gpu_hours, ref.gpu_hours), 4)
            ),
        },
        "policies": policies,
        "goals": [{"goal": g.text, "measured": g.measured, "met": g.met} for g in result.goals],
        "plot": str(plot) if plot is not None else None,
        "elapsed_seconds": round(result.elapsed_seconds, 2),
    }


def _row(p: PolicyFigures, ref: PolicyFigures, base: PolicyFigures) -> str:
    return (
        f"{p.name:<18} {100 * p.slo_request_share:7.2f}% {100 * p.slo_minute_share:6.1f}% "
        f"{p.ttft_p50:6.2f} {p.ttft_p95:7.2f} {p.ttft_p99:7.2f} {p.gpu_hours:7.2f} "
        f"{_ratio(p.gpu_hours, ref.gpu_hours):6.2f} {_ratio(p.gpu_hours, base.gpu_hours):6.2f} "
        f"{p.scale_events:4d} ({p.scale_ups:>3}/{p.scale_downs:<3}) {p.reversals:4d} "
        f"{p.sawtooth:4d} {p.peak_queue:6d} {p.peak_replicas:4d} {p.rejected:5d} {p.cut:4d}"
    )


def _halves(p: PolicyFigures, ref: PolicyFigures) -> str:
    cells = [
        f"{100 * h.slo_request_share:6.2f}% {_ratio(h.gpu_hours, rh.gpu_hours):5.2f}x"
        for h, rh in zip(p.halves, ref.halves, strict=True)
    ]
    return f"  {p.name:<18} " + "   ".join(cells)


def _reaction(p: PolicyFigures) -> str:
    r = p.reaction
    if r is None:
        return ""

    def fmt(x: float | None) -> str:
        return "never" if x is None else f"{x:+.0f} s"

    return (
        f"  {p.name:<18} first scale-up write {fmt(r.first_write_seconds)}, first added "
        f"replica Ready {fmt(r.first_ready_seconds)}"
    )


def format_table(result: BenchResult, plot: Path | None = None) -> str:
    """The readable report: setup, one row per policy and reference, the goals."""
    ref = result.by_name(HINDSIGHT)
    base = result.by_name(BASELINE)
    head = (
        f"{'policy':<18} {'req<=SLO':>8} {'min<=SLO':>7} {'p50 s':>6} {'p95 s':>7} "
        f"{'p99 s':>7} {'GPU-h':>7} {'/hind':>6} {'/keda':>6} {'events (up/dn)':>14} "
        f"{'rev':>4} {'saw':>4} {'peakQ':>6} {'peak':>4} {'rej':>5} {'cut':>4}"
    )
    bound = result.lower_bound_gpu_hours
    lines = [
        result.summary,
        f"trace       {result.trace}",
        f"setup       routing {result.routing}; "
        f"hindsight peak {counted(ref.peak_replicas, 'replica')}; "
        f"every policy starts with {result.initial_replicas}",
        f"SLO         TTFT <= {result.slo_ttft_seconds:g} s for 99% of the accepted requests; "
        f"model load {result.model_load_seconds:g} s; one replica sustains "
        f"{result.capacity.rate:.2f} req/s at {result.capacity.concurrency:.1f} in flight on "
        f"this mix at x{result.rate_scale:g} (measured on the replayed trace; drives KPA's "
        f"target: {result.kpa_target:g} = 70%)",
        "",
        head,
        "-" * len(head),
        *(_row(p, ref, base) for p in result.policies),
        f"{'lower bound':<18} {'':>8} {'':>7} {'':>6} {'':>7} {'':>7} {bound:7.2f} "
        f"{_ratio(bound, ref.gpu_hours):6.2f} {_ratio(bound, base.gpu_hours):6.2f}",
        "",
        f"/hind: GPU-hours over {HINDSIGHT}'s; saw: scale-ups within 5 minutes after a "
        "scale-down at a steady load; rej: requests longer than the context, rejected at once "
        "(in no share)",
        "",
        "first half / second half of the trace (share within the SLO, GPU-hours over "
        f"{HINDSIGHT}'s in the same half):",
        *(_halves(p, ref) for p in result.policies),
        "",
        "rows:",
        *(f"  {p.name:<18} {_describe(result, p.name)}" for p in result.policies),
        f"  {'lower bound':<18} {_LOWER_BOUND}",
    ]
    if result.step_seconds is not None:
        lines += [
            "",
            f"reaction to the load step at {result.step_seconds:g} s (negative: ahead of it):",
            *(_reaction(p) for p in result.policies if p.reaction is not None),
        ]
    lines += [
        "",
        "goals for vllm-scaler:",
        *(f"  [{'met' if g.met else 'MISSED'}] {g.text}: {g.measured}" for g in result.goals),
        f"elapsed     {result.elapsed_seconds:.1f} s",
    ]
    if plot is not None:
        lines.append(f"plot        {plot}")
    return "\n".join(lines)


_STYLES: dict[str, dict[str, Any]] = {
    HINDSIGHT: {"color": "black", "lw": 1.8, "ls": "--"},
    "hindsight-instant": {"color": "dimgray", "lw": 1.2, "ls": ":"},
    REACTIVE: {"color": "darkgray", "lw": 1.2, "ls": "-."},
}


def plot_bench(result: BenchResult, path: Path) -> Path:
    """PNG: offered load; replicas (pods, loading and draining included) per policy and
    reference; TTFT p95 per minute per row against the SLO. The title states the trace, the
    routing and the lower bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(12, 9.5), sharex=True)
    fig.suptitle(
        f"{result.trace}\nrouting {result.routing}; TTFT SLO {result.slo_ttft_seconds:g} s for "
        f"99% of requests; model load {result.model_load_seconds:g} s; {result.rejected} "
        f"rejected (too long); lower bound {result.lower_bound_gpu_hours:.2f} GPU-h",
        fontsize=9,
    )
    minutes = [i * 10 / 60 for i in range(len(result.arrivals_per_second))]
    ax1.plot(minutes, result.arrivals_per_second, color="tab:gray", lw=0.8)
    ax1.set_ylabel("arrivals/s (10 s)")
    for p in result.policies:
        t = [s / 60 for s, _ in p.replicas_over_time]
        n = [c for _, c in p.replicas_over_time]
        t.append(result.duration_seconds / 60)
        n.append(n[-1] if n else 0)
        style = _STYLES.get(p.name, {"lw": 1.1})
        ax2.step(t, n, where="post", label=f"{p.name} ({p.gpu_hours:.1f} GPU-h)", **style)
        m = [i + 0.5 for i in range(len(p.minute_p95))]
        v = [min(x, 1e3) if not math.isnan(x) else math.nan for x in p.minute_p95]
        ax3.plot(
            m,
            v,
            marker="o",
            ms=2.5,
            lw=0.9,
            label=p.name,
            **({"color": _STYLES[p.name]["color"]} if p.name in _STYLES else {}),
        )
    ax2.set_ylabel("replicas (pods)")
    ax2.legend(loc="upper left", fontsize=7, ncol=2)
    ax3.axhline(result.slo_ttft_seconds, color="tab:red", ls="--", lw=1, label="SLO")
    ax3.set_yscale("log")
    ax3.set_ylabel("TTFT p95 per minute, s")
    ax3.set_xlabel("minutes since trace start")
    ax3.legend(loc="upper left", fontsize=7, ncol=3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
