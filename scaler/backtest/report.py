"""What a backtest shows: a text report, a JSON document and a PNG plot.

Times in the text are UTC (``HH:MM:SS``, the date in the header); in JSON they are Unix
seconds and RFC 3339. Replica-hours are ``spec.replicas`` integrated over time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scaler.backtest.history import ReplicaHistory
from scaler.backtest.replay import ReplayResult, ReplayStep, ReplaySummary, ScaleChange
from scaler.backtest.timeparse import rfc3339
from scaler.config.policy import TargetPolicy
from scaler.config.signal_specs import CapacityUnit
from scaler.config.vocabulary import SignalName
from scaler.config.wording import counted
from scaler.controller.report import shown_value
from scaler.core.signals import SignalStatus

__all__ = ["TargetBacktest", "format_text", "plot_backtest", "to_json"]


@dataclass(frozen=True, slots=True)
class TargetBacktest:
    """One target's backtest: its policy, where the actual replicas came from, the replay,
    the replay of its shadow policy on the same history (None without one), and notes on
    what history lacks (a throughput counter the capacity signal needs)."""

    policy: TargetPolicy
    replicas: ReplicaHistory
    result: ReplayResult
    shadow: ReplayResult | None = None
    notes: tuple[str, ...] = ()


def _hms(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def _tokens(x: float) -> str:
    return f"{x / 1e3:.3g}k" if x >= 1e3 else f"{x:.3g}"


def _signal_text(step: ReplayStep, unit: CapacityUnit) -> str:
    """The signals as the decision compared them with their targets: queue depth and KV-cache
    usage per replica (the sum over the pods over the replay's replicas), TTFT in seconds,
    the capacity signal's demand and learned capacity in its ``unit`` (work s/s by default).
    A signal without a value to show is its status, as every report of a decision shows it
    (:func:`~scaler.controller.report.shown_value`): an idle TTFT is ``ttft_p95=idle``."""
    parts = []
    evaluated = {e.name: e for e in step.evaluations}
    for name, r in step.signals.items():
        flag = "" if r.status == "ok" else f"({r.status})"
        e = evaluated.get(name)
        if e is not None:
            shown = shown_value(e)
            value = None if isinstance(shown, str) else shown
        else:  # a signal only the shadow enables: the reading as read
            value = None if name.per_pod or r.status is SignalStatus.IDLE else r.value
        if value is None:
            parts.append(f"{name}={r.status}")
        elif name is SignalName.TTFT_P95:
            parts.append(f"{name}={value:.2f}s{flag}")
        else:
            parts.append(f"{name}={value:.2f}/replica{flag}")
    c = step.capacity
    if c is not None:
        demand = c.demand_tokens_per_second
        if demand is not None:
            parts.append(f"demand={_tokens(demand)} {unit.symbol}")
        learned = c.capacity_tokens_per_second
        parts.append(
            f"capacity={_tokens(learned)}/replica" if learned is not None else "capacity=learning"
        )
    s = step.seasonal
    if s is not None and s.forecast is not None:
        parts.append(f"seasonal={_tokens(s.demand)}" if s.demand is not None else "seasonal=off")
    return " ".join(parts)


def _events(events: Sequence[ScaleChange], limit: int = 12) -> str:
    if not events:
        return "none"
    up = sum(1 for e in events if e.to_replicas > e.from_replicas)
    shown = ", ".join(f"{_hms(e.at)} {e.from_replicas}->{e.to_replicas}" for e in events[:limit])
    more = f", ... {len(events) - limit} more" if len(events) > limit else ""
    return f"{len(events)} ({up} up, {len(events) - up} down): {shown}{more}"


def _load(r: ReplayResult) -> str:
    """The model load time a replay assumed: ``"20 s"``."""
    return f"{r.model_load_seconds:g} s"


def _hours(h: float) -> str:
    return f"{h:.2f}" if h >= 10 else f"{h:.3g}"


def _change_pct(actual: float, policy: float) -> str:
    if actual <= 0:
        return "actual 0"
    return f"{(policy - actual) / actual * 100:+.0f}% vs actual"


def _duration(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:g} s"


def _coverage(s: ReplaySummary) -> str:
    """How much of the replayed time had actual replicas (what the totals cover)."""
    pct = 100 * s.covered_seconds / s.total_seconds if s.total_seconds > 0 else 100.0
    return (
        f"{_duration(s.covered_seconds)} of {_duration(s.total_seconds)} ({pct:.0f}%) had "
        "actual replicas; the totals below cover that time only"
    )


def steps_text(count: int) -> str:
    """``"1 step"``, ``"1,441 steps"``: a count of steps with its noun."""
    return counted(count, "step", thousands=True)


#: Reasons whose sentence the timeline gives even when the policy's replicas stay the same.
_EXPLAINED = ("scale_up", "scale_down", "step_limited", "stabilized", "at_max")


def format_text(backtests: Sequence[TargetBacktest], *, step_seconds: float) -> str:
    """A human report: per target, the timeline at every change of either count, then totals."""
    lines: list[str] = []
    for bt in backtests:
        steps = bt.result.steps
        s = bt.result.summary
        src = bt.replicas.source or "none"
        sh = bt.shadow
        lines.append(
            f"{bt.result.target}: {rfc3339(steps[0].at)} .. {rfc3339(steps[-1].at)}, "
            f"{steps_text(len(steps))} of {step_seconds:g} s, actual replicas from {src}, "
            f"model load {_load(bt.result)}"
            # the shadow's only when it differs (it takes the target's unless it sets its own)
            + (f" (shadow {_load(sh)})" if sh is not None and _load(sh) != _load(bt.result) else "")
        )
        shadow_steps = sh.steps if sh is not None else None
        # wide enough for every reason of the table (waiting_for_pending, ...)
        width = max(len("reason"), *(len(str(st.reason)) for st in steps))
        lines.append(
            "  time      actual  policy  "
            + ("shadow  " if shadow_steps is not None else "")
            + f"{'reason':<{width}} signals"
        )
        prev: tuple[int | None, int, int] | None = None
        for i, st in enumerate(steps):
            other = shadow_steps[i].policy_replicas if shadow_steps is not None else -1
            key = (st.actual_replicas, st.policy_replicas, other)
            if key == prev:
                continue
            prev = key
            if st.actual_replicas is None:
                # a gap: no actual replicas, so nothing to compare; one line per gap
                lines.append(f"  {_hms(st.at)}  {'gap':>6}  (no actual replicas in history)")
                continue
            column = f"{other:>6}  " if shadow_steps is not None else ""
            lines.append(
                f"  {_hms(st.at)}  {st.actual_replicas:>6}  {st.policy_replicas:>6}  {column}"
                f"{st.reason!s:<{width}} {_signal_text(st, bt.result.capacity_unit)}"
            )
            # each side's sentence at every change of its replicas (whatever the reason: a
            # scale-down clamped to min_replicas is at_min), from the actual count at the start
            changed = st.policy_replicas != (
                steps[i - 1].policy_replicas if i else st.actual_replicas
            )
            if changed or st.reason in _EXPLAINED:
                lines.append(f"            {st.message}")
            if shadow_steps is not None and other != (
                shadow_steps[i - 1].policy_replicas if i else st.actual_replicas
            ):
                lines.append(f"            shadow: {shadow_steps[i].message}")
        change = _change_pct(s.actual_replica_hours, s.policy_replica_hours)
        lines.append(f"  covered        {_coverage(s)}")
        lines.append(
            f"  replica-hours  actual {_hours(s.actual_replica_hours)}, policy "
            f"{_hours(s.policy_replica_hours)} ({change})"
            + (
                f", shadow {_hours(sh.summary.policy_replica_hours)} "
                f"({_change_pct(s.actual_replica_hours, sh.summary.policy_replica_hours)})"
                if sh is not None
                else ""
            )
        )
        lines.append(
            f"  peak           actual {s.actual_peak}, policy {s.policy_peak}"
            + (f", shadow {sh.summary.policy_peak}" if sh is not None else "")
        )
        lines.append(f"  scale events   actual {_events(s.actual_events)}")
        lines.append(f"                 policy {_events(s.policy_events)}")
        if sh is not None:
            lines.append(f"                 shadow {_events(sh.summary.policy_events)}")
        if s.risk_steps is None:
            lines.append(
                f"  vs actual      below {steps_text(s.below_actual_steps)}, above "
                f"{steps_text(s.above_actual_steps)} (ttft_p95 not enabled: no risk count)"
            )
        else:
            lines.append(
                f"  vs actual      below {steps_text(s.below_actual_steps)} ({s.risk_steps} "
                f"while TTFT was above target: risk), above {steps_text(s.above_actual_steps)} "
                f"({s.relief_steps} while TTFT was above target); TTFT above target in "
                f"{steps_text(s.ttft_above_target_steps or 0)}"
            )
        if s.actual_missing_steps:
            lines.append(
                f"  gaps           {steps_text(s.actual_missing_steps)} without actual replicas "
                "(left out of replica-hours, peaks and the comparison)"
            )
        status = "; ".join(
            f"{sig} " + ", ".join(f"{k} {v}" for k, v in sorted(per.items()))
            for sig, per in s.signal_status.items()
        )
        lines.append(f"  signal status  {status}")
        lines.append("")
    return "\n".join(lines)


def _num(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _signal_json(step: ReplayStep, name: SignalName, status: str, value: float | None) -> Any:
    """A signal in JSON: status, value as read (queue depth and KV cache: the sum over the
    pods), and for those two ``per_replica``, what the decision compared with the target."""
    out: dict[str, Any] = {"status": str(status), "value": _num(value)}
    if name.per_pod:
        per = next((e.value for e in step.evaluations if e.name is name), None)
        out["per_replica"] = _num(per)
    return out


def _capacity_json(step: ReplayStep, unit: CapacityUnit) -> dict[str, Any] | None:
    c = step.capacity
    if c is None:
        return None
    rate = unit.rate_unit  # the unit in the keys, as recommend's JSON writes them
    return {
        "unit": rate,
        f"demand_{rate}": _num(c.demand_tokens_per_second),
        f"forecast_demand_{rate}": _num(c.forecast_tokens_per_second),
        f"capacity_{rate}_per_replica": _num(c.capacity_tokens_per_second),
        "utilization_ratio": _num(c.utilization),
        "samples": c.samples,
        "seasonal_forecast": _num(step.seasonal.demand) if step.seasonal is not None else None,
        "seasonal_in_use": (
            step.seasonal.forecast.in_use
            if step.seasonal is not None and step.seasonal.forecast is not None
            else None
        ),
    }


def _change(e: ScaleChange) -> dict[str, Any]:
    out: dict[str, Any] = {"at": e.at, "time": rfc3339(e.at), "from": e.from_replicas}
    out["to"] = e.to_replicas
    if e.reason:
        out["reason"] = e.reason
    return out


def to_json(
    backtests: Sequence[TargetBacktest],
    *,
    start: float,
    end: float,
    step_seconds: float,
    model_load_seconds: float | None,
    plot: Path | None,
) -> dict[str, Any]:
    """The machine-readable report (``--output json``): per target the policy's summary and
    steps, and under ``shadow`` the shadow policy's (null without one).

    ``model_load_seconds`` is ``--model-load-seconds`` (seconds; None when not given: each
    replay used its own policy's ``signals.capacity.model_load_seconds``); every target, and
    its shadow, says the model load time its replay assumed in its own
    ``model_load_seconds``."""
    targets = []
    for bt in backtests:
        s = bt.result.summary
        sh = bt.shadow
        targets.append(
            {
                "target": bt.result.target,
                "replica_source": str(bt.replicas.source) if bt.replicas.source else None,
                "replica_queries": list(bt.replicas.queries or ()),
                "model_load_seconds": bt.result.model_load_seconds,
                "notes": list(bt.notes),
                "summary": {
                    "actual_replica_hours": s.actual_replica_hours,
                    "policy_replica_hours": s.policy_replica_hours,
                    "actual_peak": s.actual_peak,
                    "policy_peak": s.policy_peak,
                    "actual_scale_events": [_change(e) for e in s.actual_events],
                    "policy_scale_events": [_change(e) for e in s.policy_events],
                    "below_actual_steps": s.below_actual_steps,
                    "above_actual_steps": s.above_actual_steps,
                    "ttft_above_target_steps": s.ttft_above_target_steps,
                    "risk_steps": s.risk_steps,
                    "relief_steps": s.relief_steps,
                    "actual_missing_steps": s.actual_missing_steps,
                    "covered_seconds": s.covered_seconds,
                    "total_seconds": s.total_seconds,
                    "signal_status": s.signal_status,
                    "reasons": s.reasons,
                },
                "steps": [
                    {
                        "at": st.at,
                        "time": rfc3339(st.at),
                        "actual_replicas": st.actual_replicas,
                        "actual_ready": st.actual_ready,
                        "policy_replicas": st.policy_replicas,
                        "policy_ready": st.policy_ready,
                        "recommended_replicas": st.recommended,
                        "reason": str(st.reason),
                        "message": st.message,
                        "signals": {
                            str(n): _signal_json(st, n, r.status, r.value)
                            for n, r in st.signals.items()
                        },
                        "capacity": _capacity_json(st, bt.result.capacity_unit),
                    }
                    for st in bt.result.steps
                ],
                "shadow": None
                if sh is None
                else {
                    "model_load_seconds": sh.model_load_seconds,
                    "replica_hours": sh.summary.policy_replica_hours,
                    "peak": sh.summary.policy_peak,
                    "scale_events": [_change(e) for e in sh.summary.policy_events],
                    "below_actual_steps": sh.summary.below_actual_steps,
                    "above_actual_steps": sh.summary.above_actual_steps,
                    "risk_steps": sh.summary.risk_steps,
                    "relief_steps": sh.summary.relief_steps,
                    "reasons": sh.summary.reasons,
                    "steps": [
                        {
                            "at": st.at,
                            "replicas": st.policy_replicas,
                            "ready": st.policy_ready,
                            "recommended_replicas": st.recommended,
                            "reason": str(st.reason),
                            "message": st.message,
                        }
                        for st in sh.steps
                    ],
                },
            }
        )
    return {
        "start": rfc3339(start),
        "end": rfc3339(end),
        "step_seconds": step_seconds,
        "model_load_seconds": model_load_seconds,
        "plot": str(plot) if plot else None,
        "targets": targets,
    }


def plot_backtest(backtests: Sequence[TargetBacktest], path: Path) -> Path:
    """Write a PNG: per target, replicas (actual vs policy, and the shadow policy's dashed)
    above the observed signals.

    The replicas panel shades steps where the policy is below actual while TTFT was above
    its target (risk). The signals panel shows each signal as a ratio to its target (log
    scale, 1 = at target, zero drawn at 1e-3): queue depth and KV-cache usage per actual ready
    replica, TTFT as observed, and the capacity signal's ratio as the decision computed it
    (the forecast demand per replica of the policy over the learned capacity times the target
    utilization; none while it is learning).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(backtests)
    fig, axes = plt.subplots(2 * rows, 1, figsize=(11, 6 * rows), sharex=True, squeeze=False)
    t0 = backtests[0].result.steps[0].at
    span = backtests[0].result.steps[-1].at - t0
    unit, scale = ("hours", 3600.0) if span > 3 * 3600 else ("minutes", 60.0)
    for k, bt in enumerate(backtests):
        ax1, ax2 = axes[2 * k][0], axes[2 * k + 1][0]
        steps = bt.result.steps
        t = [(st.at - t0) / scale for st in steps]
        ax1.set_title(
            f"{bt.result.target} (actual from {bt.replicas.source}), from {rfc3339(t0)}",
            fontsize=10,
        )

        # a gap (no actual replicas) is drawn as a gap in every line, as it is left out of
        # the totals
        covered = [st.actual_replicas is not None for st in steps]

        def _gapped(values: Sequence[int | None], covered: list[bool] = covered) -> list[float]:
            return [
                float(v) if v is not None and c else math.nan
                for v, c in zip(values, covered, strict=True)
            ]

        for label, counts, color, style in (
            ("actual", _gapped([st.actual_replicas for st in steps]), "tab:blue", "-"),
            ("actual ready", _gapped([st.actual_ready for st in steps]), "tab:blue", ":"),
            ("policy", _gapped([st.policy_replicas for st in steps]), "tab:orange", "-"),
            ("policy ready", _gapped([st.policy_ready for st in steps]), "tab:orange", ":"),
        ):
            lw = 1.6 if style == "-" else 1.2
            ax1.step(t, counts, where="post", color=color, ls=style, lw=lw, label=label)
        if bt.shadow is not None:
            hours = bt.shadow.summary.policy_replica_hours
            ax1.step(
                t, _gapped([st.policy_replicas for st in bt.shadow.steps]), where="post",
                color="tab:green", ls="--", lw=1.4, label=f"shadow ({_hours(hours)} replica-h)",
            )  # fmt: skip
        target_s = bt.policy.signals.ttft_p95.target_seconds
        risky = False
        for i, st in enumerate(steps):
            r = st.signals.get(SignalName.TTFT_P95)
            slow = r is not None and r.status == "ok" and (r.value or 0) > target_s
            below = st.actual_replicas is not None and st.policy_replicas < st.actual_replicas
            if slow and below and i + 1 < len(t):
                ax1.axvspan(
                    t[i], t[i + 1], color="tab:red", alpha=0.15, lw=0,
                    label=None if risky else "policy below actual, TTFT above target",
                )  # fmt: skip
                risky = True
        ax1.set_ylabel("replicas (spec.replicas)")
        ax1.legend(loc="upper left", fontsize=8)

        sig = bt.policy.signals
        for name, color in (
            (SignalName.QUEUE_DEPTH, "tab:red"),
            (SignalName.KV_CACHE_USAGE, "tab:purple"),
            (SignalName.TTFT_P95, "tab:green"),
        ):
            if name not in sig.enabled():
                continue
            target = sig.target_of(name)
            ys: list[float] = []
            for st in steps:
                r = st.signals.get(name)
                value = r.value if r is not None and r.status in ("ok", "partial") else None
                ready = st.actual_ready or 0  # a gap: nothing to divide by
                if value is None or (name.per_pod and ready <= 0):
                    ys.append(math.nan)
                    continue
                per = value / ready if name.per_pod else value
                ys.append(max(per / target, 1e-3))
            label = f"{name} / target" + (" (per actual ready replica)" if name.per_pod else "")
            ax2.plot(t, ys, color=color, lw=1, label=label)
        if SignalName.CAPACITY in sig.enabled():
            ratios = [
                next((e.ratio for e in st.evaluations if e.name is SignalName.CAPACITY), None)
                for st in steps
            ]
            ax2.plot(
                t,
                [max(r, 1e-3) if r is not None else math.nan for r in ratios],
                color="tab:brown",
                lw=1,
                label="capacity: forecast demand / (capacity x utilization) per policy replica",
            )
        ax2.axhline(1.0, color="black", ls="--", lw=0.8, label="at target")
        ax2.set_yscale("log")
        ax2.set_ylabel("ratio to target")
        ax2.legend(loc="upper left", fontsize=8)
    axes[-1][0].set_xlabel(f"{unit} since start")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
