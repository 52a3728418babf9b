"""The controller's reports: one :class:`TargetReport` per target and cycle, and how
``run``/``recommend`` print them (``--output json`` and ``text``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from scaler.config.signal_specs import CapacityUnit
from scaler.config.vocabulary import SignalName
from scaler.core.decide import Decision
from scaler.core.evaluation import SignalEvaluation
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import TargetReadings

__all__ = [
    "OutputFormat",
    "TargetReport",
    "decision_json",
    "print_reports",
    "report_json",
    "shown_value",
    "signal_table",
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
        resource: the ``VLLMAutoscaler`` that defines the target (``namespace/name``; ''
            for the policy file's). A resource the controller refuses has a report of its
            own: ``target`` ``VLLMAutoscaler namespace/name``, action ``refused`` and why.
    """

    target: str
    decision: Decision | None
    readings: TargetReadings | None
    action: str
    error: str = ""
    shadow: Decision | None = None
    resource: str = ""


def capacity_unit(d: Decision) -> CapacityUnit:
    """The unit of the capacity signal's numbers in ``d``: its memory's, which a decision
    leaves in the policy's ``signals.capacity.unit`` (memory in another unit is dropped)."""
    try:
        return CapacityUnit(d.state.capacity.unit)
    except ValueError:
        return CapacityUnit.WORK


def signal_unit(d: Decision, name: SignalName) -> str:
    """The unit of ``name``'s value and target in ``d`` (recommend's unit column and JSON):
    the registry's, the capacity signal's in the policy's unit
    (``work_seconds_per_second_per_replica`` by default)."""
    return capacity_unit(d).per_replica_unit if name is SignalName.CAPACITY else name.unit


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
        # without a selector the pods are unknown: no count, not 0 ready
        "replicas": None
        if d.reason is Reason.SELECTOR_REQUIRED
        else {
            "ready": d.replicas.ready,
            "starting": d.replicas.starting,
            "stuck": d.replicas.stuck,
            "terminating": d.replicas.terminating,
            "unschedulable": d.replicas.unschedulable,
            "finished": d.replicas.finished,
            "sleeping": d.replicas.sleeping,
        },
        "signals": [
            {
                "name": str(e.name),
                "unit": signal_unit(d, e.name),
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
        rate = capacity_unit(d).rate_unit  # the unit in the keys: a number is never misread
        out["capacity"] = {
            "unit": rate,
            f"demand_{rate}": c.demand_tokens_per_second,
            f"waiting_{rate.removesuffix('_per_second')}": c.waiting_tokens,
            f"forecast_demand_{rate}": c.forecast_tokens_per_second,
            f"capacity_{rate}_per_replica": c.capacity_tokens_per_second,
            "utilization": c.utilization,
            "horizon_seconds": c.horizon_seconds,
            "samples": c.samples,
            "price_factors": {
                "prefill": c.prefill_factor,
                "decode": c.decode_factor,
                "windows": c.cost_windows,
            },
        }
    s = d.seasonal
    if s is not None and s.forecast is not None:
        check = s.forecast.check
        out["seasonal"] = {
            "in_use": s.forecast.in_use,
            "demand": s.demand,
            "replicas": s.replicas,
            "raised": s.raised,
            "horizon_seconds": s.horizon_seconds,
            "mape": check.mape if check is not None else None,
            "naive_mape": check.naive_mape if check is not None else None,
            "note": s.forecast.note,
        }
    return out


def seasonal_line(d: Decision) -> str:
    """The recommend line of the seasonal forecast ("" before its first fit): in use or off
    and why, and what it asks for this cycle."""
    s = d.seasonal
    if s is None or s.forecast is None:
        return ""
    asked = (
        f"; asks {s.replicas} replicas for demand {s.demand:.4g} within {s.horizon_seconds:.0f} s"
        f"{' (raised the recommendation)' if s.raised else ''}"
        if s.replicas is not None and s.demand is not None
        else ""
    )
    return f"  seasonal: {s.forecast.note}{asked}\n"


def report_json(report: TargetReport) -> dict[str, Any]:
    """The ``recommend --output json`` object of one target (``docs/recommend.md`` describes
    its fields): the active decision's fields, and under ``shadow`` the shadow policy's (null
    without one)."""
    d = report.decision
    out: dict[str, Any] = {
        "target": report.target,
        "resource": report.resource or None,
        "action": report.action,
    }
    if d is None:
        out.update(
            current_replicas=None,
            desired_replicas=None,
            reason="resource_refused" if report.action == "refused" else "target_read_failed",
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
        # every other latency histogram read (itl_metric), under the name its pods export
        for name, metric in r.histogram_metrics.items():
            out.setdefault(f"{name.removesuffix('_p95')}_metric", metric)
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
            why = "not scaled" if r.action == "refused" else "cannot read the target"
            out.write(f"{r.target}: {why}: {r.error}\n")
            continue
        counts = (
            "pods unknown (no selector)"
            if d.reason is Reason.SELECTOR_REQUIRED
            else f"ready {d.replicas.ready}, starting {d.replicas.starting}, "
            f"stuck {d.replicas.stuck}, terminating {d.replicas.terminating}"
            + (
                f", waiting for a node {d.replicas.unschedulable}"
                if d.replicas.unschedulable
                else ""
            )
            + (f", finished (not counted) {d.replicas.finished}" if d.replicas.finished else "")
            + (f", asleep (sleep mode) {d.replicas.sleeping}" if d.replicas.sleeping else "")
        )
        named = f"{r.target} (VLLMAutoscaler {r.resource})" if r.resource else r.target
        out.write(
            f"{named}: current {d.current_replicas} -> desired {d.desired_replicas} "
            f"[{d.reason}] {d.message}\n"
            f"  replicas: {counts}\n"
        )
        if r.readings is not None and r.readings.stalled:
            out.write(
                "  not counted: "
                + "; ".join(s.describe() for _, s in sorted(r.readings.stalled.items()))
                + "\n"
            )
        out.write(seasonal_line(d))
        out.write(signal_table(d, r.shadow))
    out.flush()


def shown_value(e: SignalEvaluation) -> float | str:
    """What every report of a decision (the text table, the decision log, the demo's lines
    built from it) shows for a signal: its value in its unit when one was measured; otherwise
    its status, never a made-up number: ``idle`` (no requests in the window: a TTFT quantile
    has no value, its NaN is not 0 s), ``learning`` (the capacity signal has no estimate yet;
    its value is only the demand per replica) or the status that made it invalid."""
    if e.status is SignalStatus.IDLE or not e.valid or e.value is None:
        return str(e.status)
    return e.value


#: How the text table words the statuses that are no fault.
_STATUS_CELL = {SignalStatus.IDLE: "idle (no requests)", SignalStatus.LEARNING: "learning"}


def _cell(e: SignalEvaluation | None) -> str:
    """One signal in one column: ``value / target = ratio -> replicas`` for a measured value;
    otherwise its status (:func:`shown_value`)."""
    if e is None:
        return "off"
    value = shown_value(e)
    if isinstance(value, str) or e.ratio is None:
        return _STATUS_CELL.get(e.status, f"INVALID {e.status}")
    cell = f"{value:.4g} / {e.target:.4g} = {e.ratio:.2f} -> {e.desired_replicas}"
    return cell if e.status is SignalStatus.OK else f"{cell} ({e.status})"


def _notes(d: Decision) -> list[str]:
    """The details of the signals that are not ``ok`` (why invalid, what is learned), once."""
    return [
        f"{e.name}: {e.detail}"
        for e in d.signals
        if e.detail and e.status is not SignalStatus.OK and e.status is not SignalStatus.IDLE
    ]


def signal_table(active: Decision, shadow: Decision | None = None) -> str:
    """The text report's table, one layout with or without a shadow policy: desired replicas
    and reason, then one row per signal (its unit in brackets) whose cells read
    value / target = ratio -> replicas it asks for, or the signal's status; a ``shadow``
    column only when the target has a shadow policy. Below it, the details of the signals
    that are not ``ok``, and the shadow's message."""
    decisions = [active] if shadow is None else [active, shadow]
    rows = [["signal", *(["active"] if shadow is None else ["active", "shadow"]), "unit"]]
    rows.append(["desired", *(f"{d.desired_replicas} [{d.reason}]" for d in decisions), ""])
    by_name = [{e.name: e for e in d.signals} for d in decisions]
    for name in dict.fromkeys(e.name for d in decisions for e in d.signals):
        rows.append([str(name), *(_cell(m.get(name)) for m in by_name), signal_unit(active, name)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  " + "  ".join([*(f"{c:<{w}}" for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        for r in rows
    ]
    notes = _notes(active)
    lines += [f"  {n}" for n in notes]
    if shadow is not None:  # a detail both share is said once
        lines += [f"  shadow {n}" for n in _notes(shadow) if n not in notes]
        lines.append(f"  shadow: {shadow.message}")
    return "\n".join(lines) + "\n"


def _json_default(value: object) -> object:
    return str(value)
