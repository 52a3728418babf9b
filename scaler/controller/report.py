"""The controller's reports: one :class:`TargetReport` per target and cycle, and how
``run``/``recommend`` print them (``--output json`` and ``text``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from scaler.core.decide import Decision
from scaler.core.evaluation import SignalEvaluation
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import TargetReadings

__all__ = [
    "OutputFormat",
    "TargetReport",
    "decision_json",
    "print_reports",
    "report_json",
    "side_by_side",
]

OutputFormat = Literal["log", "text", "json"]


@dataclass(frozen=True, slots=True)
class TargetReport:
    """The outcome of one cycle for one target.

    Attributes:
        target: the target key ``namespace/Kind/name``.
        decision: the decision, or None when the target could not be read.
        readings: what the source read (None when the target could not be read).
        action: ``scaled``, ``unchanged``, ``dry_run`` or the failed write's outcome; ``none``
            when nothing was asked; ``not_leader`` when another replica leads;
            ``read_failed`` when the target could not be read.
        error: why the target could not be read or written.
        shadow: the decision of the target's shadow policy (None without one); never
            written.
    """

    target: str
    decision: Decision | None
    readings: TargetReadings | None
    action: str
    error: str = ""
    shadow: Decision | None = None


def decision_json(d: Decision) -> dict[str, Any]:
    """A decision's fields in ``recommend --output json`` (also a shadow's)."""
    out: dict[str, Any] = {
        "current_replicas": d.current_replicas,
        "desired_replicas": d.desired_replicas,
        "recommended_replicas": d.recommended_replicas,
        "reason": str(d.reason),
        "message": d.message,
        "driving_signal": str(d.driving_signal) if d.driving_signal else None,
        "limits": [str(limit) for limit in d.limits],
        "replicas": {
            "ready": d.replicas.ready,
            "starting": d.replicas.starting,
            "stuck": d.replicas.stuck,
            "terminating": d.replicas.terminating,
        },
        "signals": [
            {
                "name": str(e.name),
                "unit": e.name.unit,
                "value": e.value,
                # a learning capacity signal has no estimate yet, hence no target
                "target": None if e.status is SignalStatus.LEARNING else e.target,
                "ratio": e.ratio,
                "valid": e.valid,
                "status": str(e.status),
                "desired_replicas": e.desired_replicas,
                "detail": e.detail,
            }
            for e in d.signals
        ],
        "model_load_seconds": d.state.load_times.median_seconds,
    }
    if d.capacity is not None:
        c = d.capacity
        out["capacity"] = {
            "demand_tokens_per_second": c.demand_tokens_per_second,
            "waiting_tokens": c.waiting_tokens,
            "forecast_tokens_per_second": c.forecast_tokens_per_second,
            "capacity_tokens_per_second": c.capacity_tokens_per_second,
            "utilization": c.utilization,
            "horizon_seconds": c.horizon_seconds,
            "samples": c.samples,
        }
    return out


def report_json(report: TargetReport) -> dict[str, Any]:
    """The ``recommend --output json`` object of one target (see the README for its fields):
    the active decision's fields, and under ``shadow`` the shadow policy's (null without one)."""
    d = report.decision
    out: dict[str, Any] = {"target": report.target, "action": report.action}
    if d is None:
        out.update(
            current_replicas=None,
            desired_replicas=None,
            reason="target_read_failed",
            message=report.error,
            signals=[],
        )
        return out
    out.update(decision_json(d))
    out["shadow"] = decision_json(report.shadow) if report.shadow is not None else None
    if report.readings is not None:
        r = report.readings
        out["kv_cache_metric"] = r.kv_metric
        out["ttft_metric"] = r.ttft_metric
        out["stalled_pods"] = {pod: str(s.kind) for pod, s in sorted(r.stalled.items())}
        total = r.throughput.total
        out["throughput"] = {
            "status": str(r.throughput.status),
            "pods_with_rates": len(r.throughput.pods),
            "requests_per_second": total.requests_per_second if total else None,
            "prompt_tokens_per_second": total.prompt_tokens_per_second if total else None,
            "generation_tokens_per_second": total.generation_tokens_per_second if total else None,
        }
    return out


def print_reports(reports: list[TargetReport], fmt: OutputFormat, out: TextIO) -> None:
    """Print one round of reports as a JSON array (``json``) or a readable table (``text``)."""
    if fmt == "json":
        out.write(
            json.dumps(
                [report_json(r) for r in reports], indent=2, allow_nan=False, default=_json_default
            )
            + "\n"
        )
        out.flush()
        return
    for r in reports:
        d = r.decision
        if d is None:
            out.write(f"{r.target}: cannot read the target: {r.error}\n")
            continue
        out.write(
            f"{r.target}: current {d.current_replicas} -> desired {d.desired_replicas} "
            f"[{d.reason}] {d.message}\n"
            f"  replicas: ready {d.replicas.ready}, starting {d.replicas.starting}, "
            f"stuck {d.replicas.stuck}, terminating {d.replicas.terminating}\n"
        )
        if r.readings is not None and r.readings.stalled:
            out.write(
                "  not counted: "
                + "; ".join(s.describe() for _, s in sorted(r.readings.stalled.items()))
                + "\n"
            )
        if r.shadow is not None:
            out.write(side_by_side(d, r.shadow))
            continue
        for e in d.signals:
            out.write(_signal_line(e))
    out.flush()


def _signal_line(e: SignalEvaluation) -> str:
    """One signal of the text report: value and target in the signal's unit, the ratio, and
    whether it may drive a decision (a learning capacity signal is no invalid one: it has no
    estimate yet, asks for nothing and holds nothing back)."""
    value = "-" if e.value is None else f"{e.value:.4g}"
    ratio = "-" if e.ratio is None else f"{e.ratio:.2f}"
    learning = e.status is SignalStatus.LEARNING
    target = "-" if learning else f"{e.target:g}"
    if learning:
        state = "learning (no estimate yet)"
    else:
        state = f"{'valid' if e.valid else 'INVALID'} {e.status}"
    extra = f" ({e.detail})" if e.detail and e.status is not SignalStatus.OK else ""
    return (
        f"  {e.name:<15} value {value:>8}  target {target:<6} ratio {ratio:>5}  {state}{extra}"
        f" [{e.name.unit}]\n"
    )


def _cell(e: SignalEvaluation | None) -> str:
    if e is None:
        return "off"
    if not e.valid or e.value is None or e.ratio is None:
        return str(e.status)
    return f"{e.value:.4g} / {e.target:.4g} = {e.ratio:.2f} -> {e.desired_replicas}"


def side_by_side(active: Decision, shadow: Decision) -> str:
    """The active and the shadow decision in two columns: desired replicas and reason, then
    each signal either enables as value / target = ratio -> replicas it asks for, then the
    shadow's message."""
    rows = [
        ("", "active", "shadow"),
        (
            "desired",
            f"{active.desired_replicas} [{active.reason}]",
            f"{shadow.desired_replicas} [{shadow.reason}]",
        ),
    ]
    mine = {e.name: e for e in active.signals}
    theirs = {e.name: e for e in shadow.signals}
    for name in [*mine, *(n for n in theirs if n not in mine)]:
        rows.append((str(name), _cell(mine.get(name)), _cell(theirs.get(name))))
    left = max(len(r[0]) for r in rows)
    mid = max(len(r[1]) for r in rows)
    lines = [f"  {a:<{left}}  {b:<{mid}}  {c}".rstrip() for a, b, c in rows]
    lines.append(f"  shadow: {shadow.message}")
    return "\n".join(lines) + "\n"


def _json_default(value: object) -> object:
    return str(value)
