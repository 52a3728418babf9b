"""The benchmark's output: a readable table, a JSON document and a PNG plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scaler.bench.figures import PolicyFigures, RowFigures
from scaler.bench.optimal import NEAR_MINIMAL_SAVING
from scaler.bench.runner import BASELINE, FIXED_SLO_SHARE, HINDSIGHT, REACTIVE, BenchResult

__all__ = ["as_json", "format_table", "plot_bench"]

_DESCRIPTIONS = {
    BASELINE: "KEDA sum(vllm:num_requests_waiting) threshold 5 AverageValue, HPA default behavior",
    "hpa-kv": "HPA on average vllm:kv_cache_usage_perc, target 0.8, default behavior",
    "kpa": "KPA-style on in-flight per replica (stable 180 s, panic 60 s at 2x)",
    "fixed": "cheapest constant fleet keeping >= 99% of requests within both SLOs (mean over "
    "the seeds), chosen in hindsight, ready from the start (static provisioning)",
    "hindsight-instant": "hindsight schedule, instant start: fewest replicas per minute "
    "keeping >= 99% of requests within the TTFT SLO, replayed with state carried across "
    "minutes (the needs)",
    HINDSIGHT: "the yardstick: the cheapest load-paying schedule found (the optimum for the "
    "needs, each added replica loading before its minute, repaired and descended until no "
    "replica-minute can go) keeping >= 99% within both SLOs over the seeds",
    REACTIVE: "the best reactive policy: each minute's instant-start need known at its start, "
    "replicas added then and Ready a model load later, kept through a 5-minute scale-down "
    "window (what it misses needs a forecast of load not yet seen)",
}
_LOWER_BOUND = (
    "lower bound: prefill work of 99% of the requests inside their TTFT SLO windows, at least "
    "one replica at all times (provable floor, not achievable)"
)


def _describe(result: BenchResult, name: str) -> str:
    if name == "vllm-scaler":
        return (
            f"vllm-scaler, {result.policy_source}, max {result.max_replicas} (every row's), "
            f"{result.control_interval_seconds:g} s interval"
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


def _ref_hours(result: BenchResult, name: str) -> float:
    try:
        return result.row(name).mean("gpu_hours")
    except KeyError:
        return math.nan


def _half_ref_hours(result: BenchResult, index: int) -> float:
    try:
        return result.row(HINDSIGHT).half_mean(index, "gpu_hours")
    except KeyError:
        return math.nan


def _seeded(row: RowFigures, key: str) -> dict[str, Any]:
    return {
        "mean": _num(row.mean(key)),
        "spread": _num(row.spread(key)),
        "per_seed": [_num(float(getattr(r, key))) for r in row.runs],
    }


def _row_json(result: BenchResult, row: RowFigures) -> dict[str, Any]:
    p = row.first
    ref_hours = _ref_hours(result, HINDSIGHT)
    base_hours = _ref_hours(result, BASELINE)
    hours = row.mean("gpu_hours")
    return {
        "name": row.name,
        "description": _describe(result, row.name),
        "requests": p.requests,
        "rejected": p.rejected,
        "served": p.served,
        "cut_by_scale_down": sum(r.cut for r in row.runs),
        "unfinished": p.unfinished,
        "slo_request_share": _seeded(row, "slo_request_share"),
        "itl_request_share": _seeded(row, "itl_request_share"),
        "both_request_share": _seeded(row, "both_request_share"),
        "slo_minute_share": _num(p.slo_minute_share),
        "violating_minutes": p.violating_minutes,
        "ttft_p50_seconds": _num(p.ttft_p50),
        "ttft_p95_seconds": _num(p.ttft_p95),
        "ttft_p99_seconds": _num(p.ttft_p99),
        "itl_p95_seconds": _num(p.itl_p95),
        "gpu_hours": _seeded(row, "gpu_hours"),
        "gpu_hours_vs_hindsight_load": _num(round(_ratio(hours, ref_hours), 4)),
        "gpu_hours_vs_baseline": _num(round(_ratio(hours, base_hours), 4)),
        "scale_events": p.scale_events,
        "scale_ups": p.scale_ups,
        "scale_downs": p.scale_downs,
        "direction_reversals": p.reversals,
        "sawtooth": sum(r.sawtooth for r in row.runs),
        "halves": [
            {
                "start_seconds": h.start_seconds,
                "end_seconds": h.end_seconds,
                "requests": h.requests,
                "slo_request_share": _num(row.half_mean(i, "slo_request_share")),
                "itl_request_share": _num(row.half_mean(i, "itl_request_share")),
                "both_request_share": _num(row.half_mean(i, "both_request_share")),
                "both_request_share_spread": _num(row.half_spread(i, "both_request_share")),
                "gpu_hours": _num(round(row.half_mean(i, "gpu_hours"), 4)),
                "gpu_hours_vs_hindsight_load": _num(
                    round(_ratio(row.half_mean(i, "gpu_hours"), _half_ref_hours(result, i)), 4)
                ),
            }
            for i, h in enumerate(p.halves)
        ],
        "peak_queue": p.peak_queue,
        "peak_replicas": max(r.peak_replicas for r in row.runs),
        "sleeping_replicas": p.sleeping_replicas,
        "reaction": None
        if p.reaction is None
        else {
            "first_scale_up_write_seconds": _secs(p.reaction.first_write_seconds),
            "first_added_replica_ready_seconds": _secs(p.reaction.first_ready_seconds),
        },
    }


def _optimal_json(result: BenchResult) -> dict[str, Any] | None:
    opt = result.optimal
    if opt is None:
        return None
    check = opt.check
    return {
        "label": opt.label,
        "gpu_hours": round(opt.best.cost, 4),
        "both_request_share": round(opt.best.share, 6),
        "history": [
            {"step": what, "gpu_hours": round(h, 4), "both_request_share": round(sh, 6)}
            for what, h, sh in opt.history
        ],
        "near_minimal": {
            "candidates_replayed_on_every_seed": check.tried,
            "cheapest": check.cheapest.label,
            "cheapest_gpu_hours": round(check.cheapest_gpu_hours, 4),
            "saving": round(check.saving, 4),
            "threshold": NEAR_MINIMAL_SAVING,
            "near_minimal": check.near_minimal,
        },
        "replays": opt.replays,
    }


def as_json(result: BenchResult, plot: Path | None = None) -> dict[str, Any]:
    """The result as a JSON-ready dict (times in seconds, shares 0-1, NaN/inf as null); every
    share and GPU-hours figure with its mean, spread (half the range) and value per seed."""
    ref = result.by_name(HINDSIGHT) if result.hindsight_replicas else None
    return {
        "trace": result.trace,
        "summary": result.summary,
        "duration_seconds": result.duration_seconds,
        "rate_scale": result.rate_scale,
        "rate_scale_auto": result.rate_scale_auto,
        "rejected": result.rejected,
        "routing": result.routing,
        "routing_seeds": list(result.seeds),
        "keda_cached_metrics": result.keda_cached_metrics,
        # The SLOs bound each request's TTFT and mean ITL; the share of requests within them
        # is the figure.
        "slo_ttft_seconds": result.slo_ttft_seconds,
        "slo_itl_seconds": result.slo_itl_seconds,
        "slo_request_share_target": FIXED_SLO_SHARE,
        "model_load_seconds": result.model_load_seconds,
        "max_replicas": result.max_replicas,
        "max_replicas_derived": result.max_replicas_derived,
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
        "optimal": _optimal_json(result),
        "true_capacity": [
            {
                "start_seconds": round(start, 3),
                "end_seconds": round(end, 3),
                "after": after,
                "requests_per_second": round(cap.requests_per_second, 4),
                "prompt_tokens_per_second": round(cap.prompt_tokens_per_second, 1),
                "computed_prompt_tokens_per_second": round(
                    cap.computed_prompt_tokens_per_second, 1
                ),
                "generation_tokens_per_second": round(cap.generation_tokens_per_second, 1),
            }
            for start, end, after, cap in result.truth
        ],
        "capacity_checks": [
            {
                "at_seconds": round(c.at_seconds, 3),
                "after": c.after,
                "true": round(c.true, 1),
                "learned": None if c.learned is None else round(c.learned, 1),
                "ratio": _num(round(c.ratio, 4)) if c.learned is not None else None,
            }
            for c in result.capacity_checks
        ],
        "lower_bound": {
            "description": _LOWER_BOUND,
            "gpu_hours": round(result.lower_bound_gpu_hours, 4),
            "gpu_hours_vs_hindsight_load": _num(
                round(_ratio(result.lower_bound_gpu_hours, ref.gpu_hours), 4) if ref else math.nan
            ),
        },
        "policies": [_row_json(result, row) for row in result.rows],
        "goals": [{"goal": g.text, "measured": g.measured, "met": g.met} for g in result.goals],
        "plot": str(plot) if plot is not None else None,
        "elapsed_seconds": round(result.elapsed_seconds, 2),
    }


def _share(row: RowFigures, key: str) -> str:
    return f"{100 * row.mean(key):6.2f}±{100 * row.spread(key):4.2f}"


def _row(result: BenchResult, row: RowFigures) -> str:
    p = row.first
    hours = row.mean("gpu_hours")
    return (
        f"{row.name:<18} {_share(row, 'slo_request_share')} {_share(row, 'itl_request_share')} "
        f"{_share(row, 'both_request_share')} {p.ttft_p95:7.2f} {1000 * p.itl_p95:6.0f} "
        f"{hours:7.2f} {_ratio(hours, _ref_hours(result, HINDSIGHT)):6.2f} "
        f"{_ratio(hours, _ref_hours(result, BASELINE)):6.2f} "
        f"{p.scale_events:4d} ({p.scale_ups:>3}/{p.scale_downs:<3}) "
        f"{sum(r.sawtooth for r in row.runs):4d} {p.peak_queue:6d} "
        f"{max(r.peak_replicas for r in row.runs):4d} {p.rejected:5d} "
        f"{sum(r.cut for r in row.runs):4d}"
    )


def _halves(result: BenchResult, row: RowFigures) -> str:
    cells = [
        f"{100 * row.half_mean(i, 'both_request_share'):6.2f}%"
        f"±{100 * row.half_spread(i, 'both_request_share'):4.2f} "
        f"{_ratio(row.half_mean(i, 'gpu_hours'), _half_ref_hours(result, i)):5.2f}x"
        for i in range(len(row.first.halves))
    ]
    return f"  {row.name:<18} " + "   ".join(cells)


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


def _yardstick(result: BenchResult) -> list[str]:
    opt = result.optimal
    if opt is None:
        return []
    check = opt.check
    verdict = (
        f"near-minimal: no schedule keeps {100 * FIXED_SLO_SHARE:g}% within both SLOs at more "
        f"than {100 * NEAR_MINIMAL_SAVING:g}% fewer GPU-hours"
        if check.near_minimal
        else f"NOT near-minimal: {check.cheapest.label} saves {100 * check.saving:.1f}%"
    )
    cheapest = (
        "none of them is cheaper"
        if check.cheapest.label == "the reference"
        else f"the cheapest that keeps it: {check.cheapest.label}, "
        f"{check.cheapest_gpu_hours:.3f} GPU-h ({100 * check.saving:.1f}% less)"
    )
    return [
        "",
        f"yardstick   {HINDSIGHT}: {opt.label}, {opt.best.cost:.3f} GPU-h, "
        f"{100 * opt.best.share:.2f}% within both SLOs (mean of {len(opt.best.shares)} seeds; "
        f"{opt.replays} replays)",
        *(f"  {what}: {hours:.3f} GPU-h, {100 * share:.2f}%" for what, hours, share in opt.history),
        f"  check: {check.tried} schedules around it replayed on every seed (removing "
        f"replica-minutes, constant fleets, the needs plus a margin); {cheapest}; {verdict}",
    ]


def _truth_lines(result: BenchResult) -> list[str]:
    if not result.truth:
        return []
    checks = {c.at_seconds: c for c in result.capacity_checks}
    lines = ["", "true capacity of one replica on each segment's mix (both SLOs at p95) and what "
             "vllm-scaler had learned (first seed, its unit):"]  # fmt: skip
    for (start, end, after, cap), check in zip(result.truth, checks.values(), strict=False):
        learned = "nothing yet" if check.learned is None else _unit_value(check.learned)
        ratio = "" if check.learned is None else f" ({check.ratio:.2f}x)"
        lines.append(
            f"  {start / 60:6.1f}-{end / 60:6.1f} min ({after}): {cap.requests_per_second:.2f} "
            f"req/s, {_unit_value(check.true)} in the learned unit; learned at "
            f"{check.at_seconds / 60:.1f} min: {learned}{ratio}"
        )
    return lines


def _unit_value(x: float) -> str:
    """A capacity in its unit: tokens/s as integers, seconds of work per second (about 1) to
    three significant digits."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def format_table(result: BenchResult, plot: Path | None = None) -> str:
    """The readable report: setup, one row per policy and reference (shares as mean ± half the
    range over the routing seeds), the halves, the yardstick and its check, the true capacity,
    the goals."""
    head = (
        f"{'row':<18} {'TTFT<=SLO %':>11} {'ITL<=SLO %':>11} {'both %':>11} {'TTFT95':>7} "
        f"{'ITL95':>6} {'GPU-h':>7} {'/hind':>6} {'/keda':>6} {'events (up/dn)':>14} "
        f"{'saw':>4} {'peakQ':>6} {'peak':>4} {'rej':>5} {'cut':>4}"
    )
    bound = result.lower_bound_gpu_hours
    ref_hours = _ref_hours(result, HINDSIGHT)
    max_text = (
        f"{result.max_replicas} replicas (twice the busiest minutes' need from empty)"
        if result.max_replicas_derived
        else f"{result.max_replicas} replicas (--max-replicas)"
    )
    lines = [
        result.summary,
        f"trace       {result.trace}",
        f"setup       routing {result.routing} on seeds {', '.join(map(str, result.seeds))}; "
        f"every row's maximum {max_text}; every row starts with {result.initial_replicas}",
        f"SLO         TTFT <= {result.slo_ttft_seconds:g} s and mean ITL <= "
        f"{1000 * result.slo_itl_seconds:g} ms per request, for 99% of the accepted requests; "
        f"model load {result.model_load_seconds:g} s; one replica sustains "
        f"{result.capacity.rate:.2f} req/s at {result.capacity.concurrency:.1f} in flight on "
        f"this mix at x{result.rate_scale:g} (measured on the replayed trace, TTFT only; drives "
        "KPA's target: "
        f"{result.kpa_target:g} = 70%)",
        "",
        head,
        "-" * len(head),
        *(_row(result, r) for r in result.rows),
        f"{'lower bound':<18} {'':>11} {'':>11} {'':>11} {'':>7} {'':>6} {bound:7.2f} "
        f"{_ratio(bound, ref_hours):6.2f} {_ratio(bound, _ref_hours(result, BASELINE)):6.2f}",
        "",
        f"shares: mean ± half the range over the seeds; TTFT95 (s), ITL95 (ms, of each "
        f"request's mean), events and peakQ on the first seed; /hind: GPU-hours over "
        f"{HINDSIGHT}'s; saw: scale-ups within 5 minutes after a scale-down at a steady load "
        "(all seeds); rej: requests longer than the context, rejected at once (in no share)",
        "",
        "first half / second half of the trace (share within both SLOs, GPU-hours over "
        f"{HINDSIGHT}'s in the same half):",
        *(_halves(result, r) for r in result.rows),
        *_yardstick(result),
        *_truth_lines(result),
        "",
        "rows:",
        *(f"  {r.name:<18} {_describe(result, r.name)}" for r in result.rows),
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
