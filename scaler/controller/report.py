"""The controller's reports: one :class:`TargetReport` per target and cycle, and how
``run``/``recommend`` print them (``--output json`` and ``text``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from scaler.core.decide import Decision
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import TargetReadings

__all__ = ["OutputFormat", "TargetReport", "print_reports", "report_json"]

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
    """

    target: str
    decision: Decision | None
    readings: TargetReadings | None
    action: str
    error: str = ""


def report_json(report: TargetReport) -> dict[str, Any]:
    """The ``recommend --output json`` object of one target (see the README for its fields)."""
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
    out.update(
        current_replicas=d.current_replicas,
        desired_replicas=d.desired_replicas,
        recommended_replicas=d.recommended_replicas,
        reason=str(d.reason),
        message=d.message,
        driving_signal=str(d.driving_signal) if d.driving_signal else None,
        limits=[str(limit) for limit in d.limits],
        replicas={
            "ready": d.replicas.ready,
            "starting": d.replicas.starting,
            "stuck": d.replicas.stuck,
            "terminating": d.replicas.terminating,
        },
        signals=[
            {
                "name": str(e.name),
                "value": e.value,
                "target": e.target,
                "ratio": e.ratio,
                "valid": e.valid,
                "status": str(e.status),
                "desired_replicas": e.desired_replicas,
                "detail": e.detail,
            }
            for e in d.signals
        ],
    )
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
        for e in d.signals:
            value = "-" if e.value is None else f"{e.value:.4g}"
            ratio = "-" if e.ratio is None else f"{e.ratio:.2f}"
            flag = "valid" if e.valid else "INVALID"
            extra = f" ({e.detail})" if e.detail and e.status is not SignalStatus.OK else ""
            out.write(
                f"  {e.name:<15} value {value:>8}  target {e.target:<6g} ratio {ratio:>5}  "
                f"{flag} {e.status}{extra}\n"
            )
    out.flush()


def _json_default(value: object) -> object:
    return str(value)
