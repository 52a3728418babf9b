"""What a simulated run shows: a summary of service and cost, and a plot of it over time."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.sim.engine import SimRequest
from scaler.sim.fleet import FleetSample

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` (0-1) percentile by the nearest-rank method; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class WindowTtft:
    """TTFT p95 of the requests that arrived in one window (seconds since the start)."""

    start: float
    requests: int
    ttft_p95_seconds: float


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Service and cost of one simulated run.

    Attributes:
        requests: requests that arrived.
        served: requests that finished normally.
        rejected: requests refused at submission (longer than the replica's
            ``max_model_len``, as vLLM's API server refuses them).
        cut: requests cut by a scale-down (a pod killed at the end of its grace period).
        unfinished: requests still in flight or queued when the run ended.
        ttft_p50_seconds, ttft_p95_seconds, ttft_p99_seconds: over requests that got a first
            token; NaN when none did.

    ``served + rejected + cut + unfinished == requests``.
        slo_ttft_seconds: the TTFT target.
        within_slo_ratio: share of requests whose TTFT met the target (0-1); requests without
            a first token count as misses.
        windows_within_slo_ratio: share of windows whose TTFT p95 met the target (0-1).
        window_seconds: the window length.
        replica_minutes: pod-minutes, from creation to deletion (loading and draining count).
        peak_replicas: the largest ``spec.replicas``.
        scale_events: ``(seconds since start, from, to)`` of every change of ``spec.replicas``.
        failed_cycles: control cycles of the controller that ended with an exception or
            could not read or scale the target (``cycle_failed``, ``target_read_failed``,
            ``scale_failed`` in its log); None when no controller ran.
        comparison: the same slice under each approach (:class:`SliceRow`), the live run
            first; empty when nothing was compared.
    """

    requests: int
    served: int
    rejected: int
    cut: int
    unfinished: int
    ttft_p50_seconds: float
    ttft_p95_seconds: float
    ttft_p99_seconds: float
    slo_ttft_seconds: float
    within_slo_ratio: float
    windows_within_slo_ratio: float
    window_seconds: float
    replica_minutes: float
    peak_replicas: int
    scale_events: tuple[tuple[float, int, int], ...]
    windows: tuple[WindowTtft, ...]
    failed_cycles: int | None = None
    comparison: tuple[SliceRow, ...] = ()


def summarize(
    requests: Sequence[SimRequest],
    samples: Sequence[FleetSample],
    scale_events: Sequence[tuple[float, int, int]],
    *,
    start: float,
    slo_ttft_seconds: float,
    window_seconds: float,
) -> RunSummary:
    """Summarize a run; request times are on the clock, ``start`` is the replay start."""
    ttfts = [r.ttft for r in requests if r.ttft is not None]
    within = sum(1 for r in requests if r.ttft is not None and r.ttft <= slo_ttft_seconds)
    by_window: dict[int, list[float]] = {}
    for r in requests:
        w = int((r.arrival - start) // window_seconds)
        # A request with no first token by the end counts as infinitely slow.
        by_window.setdefault(w, []).append(r.ttft if r.ttft is not None else math.inf)
    windows = tuple(
        WindowTtft(w * window_seconds, len(v), percentile(v, 0.95))
        for w, v in sorted(by_window.items())
    )
    ok_windows = sum(1 for w in windows if w.ttft_p95_seconds <= slo_ttft_seconds)
    minutes = 0.0
    for a, b in itertools.pairwise(samples):
        minutes += (a.ready + a.starting + a.terminating) * (b.t - a.t) / 60
    return RunSummary(
        requests=len(requests),
        served=sum(1 for r in requests if r.done),
        rejected=sum(1 for r in requests if r.rejected),
        cut=sum(1 for r in requests if r.cut),
        unfinished=sum(1 for r in requests if r.finished_at is None),
        ttft_p50_seconds=percentile(ttfts, 0.50),
        ttft_p95_seconds=percentile(ttfts, 0.95),
        ttft_p99_seconds=percentile(ttfts, 0.99),
        slo_ttft_seconds=slo_ttft_seconds,
        within_slo_ratio=within / len(requests) if requests else math.nan,
        windows_within_slo_ratio=ok_windows / len(windows) if windows else math.nan,
        window_seconds=window_seconds,
        replica_minutes=minutes,
        peak_replicas=max((s.spec_replicas for s in samples), default=0),
        scale_events=tuple(scale_events),
        windows=windows,
    )


@dataclass(frozen=True, slots=True)
class SliceRow:
    """One approach on the demo's slice, its figures over the slice alone (replica-minutes,
    peak and scale events until the trace's end; TTFT of every request of the slice), so
    that a live run and a replay with different tails compare.

    Attributes:
        label: the approach (``vllm-scaler (this run, live)``, ``KEDA + HPA ... (replay)``).
        summary: :func:`summarize` of the approach over the slice.
    """

    label: str
    summary: RunSummary


def slice_row(
    label: str,
    requests: Sequence[SimRequest],
    samples: Sequence[FleetSample],
    scale_events: Sequence[tuple[float, int, int]],
    *,
    start: float,
    duration_seconds: float,
    slo_ttft_seconds: float,
    window_seconds: float,
) -> SliceRow:
    """The :class:`SliceRow` of a run: :func:`summarize` with the samples and scale events
    of the slice (``t <= duration_seconds``) only."""
    summary = summarize(
        requests,
        [x for x in samples if x.t <= duration_seconds],
        [e for e in scale_events if e[0] <= duration_seconds],
        start=start,
        slo_ttft_seconds=slo_ttft_seconds,
        window_seconds=window_seconds,
    )
    return SliceRow(label, summary)


def format_comparison(rows: Sequence[SliceRow], *, duration_seconds: float) -> str:
    """The comparison table: one line per approach, share of requests within the TTFT target,
    TTFT p95, replica-minutes, peak replicas and scale events over the slice."""
    width = max(len(r.label) for r in rows)
    slo = rows[0].summary.slo_ttft_seconds if rows else 0.0
    lines = [
        f"== the same slice under each approach (over the slice's {duration_seconds:.0f} s, no "
        "tail: replica-minutes stop at its end; the replays run the same requests, replica "
        "model, routing, seed and starting fleet in virtual time)",
        f"{'':{width}}  within {slo:g} s  TTFT p95  replica-min  peak  scale events (up, down)",
    ]
    for row in rows:
        s = row.summary
        ups = sum(1 for _, a, b in s.scale_events if b > a)
        lines.append(
            f"{row.label:{width}}  {_num(100 * s.within_slo_ratio, '8.1f', '%')}  "
            f"{_num(s.ttft_p95_seconds, '6.2f', ' s')}  {s.replica_minutes:11.1f}  "
            f"{s.peak_replicas:4d}  {len(s.scale_events):3d} ({ups}, {len(s.scale_events) - ups})"
        )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Baseline:
    """Another approach drawn beside the run: its label, samples and summary."""

    label: str
    samples: tuple[FleetSample, ...]
    summary: RunSummary


def _num(value: float, spec: str, unit: str = "") -> str:
    """``value`` formatted with ``spec`` and ``unit``; ``n/a`` for NaN (nothing to measure)."""
    return "n/a" if math.isnan(value) else f"{value:{spec}}{unit}"


def format_summary(s: RunSummary, *, title: str) -> str:
    """A readable multi-line summary (``n/a`` where there was nothing to measure)."""
    events = ", ".join(f"{t:.0f}s {a}->{b}" for t, a, b in s.scale_events) or "none"
    ups = sum(1 for _, a, b in s.scale_events if b > a)
    downs = sum(1 for _, a, b in s.scale_events if b < a)
    return "\n".join(
        [
            f"== {title}",
            f"requests        {s.requests} arrived, {s.served} served, {s.rejected} rejected "
            f"(too long), {s.cut} cut by scale-down, {s.unfinished} unfinished",
            f"TTFT            p50 {_num(s.ttft_p50_seconds, '.2f', ' s')}, "
            f"p95 {_num(s.ttft_p95_seconds, '.2f', ' s')}, "
            f"p99 {_num(s.ttft_p99_seconds, '.2f', ' s')} (target {s.slo_ttft_seconds:g} s)",
            f"within target   {_num(100 * s.within_slo_ratio, '.1f', '%')} of requests; "
            f"{_num(100 * s.windows_within_slo_ratio, '.0f', '%')} of "
            f"{s.window_seconds:g}-second windows had TTFT p95 within target",
            f"replicas        peak {s.peak_replicas}, {s.replica_minutes:.1f} replica-minutes "
            "over the run, its tail after the last arrival included (loading and draining "
            "included)",
            f"scale events    {len(s.scale_events)} ({ups} up, {downs} down): {events}",
        ]
        + (
            []
            if s.failed_cycles is None
            else [
                f"failed cycles   {s.failed_cycles} (control cycles that ended with an "
                "exception or could not read or scale the target: cycle_failed, "
                "target_read_failed, scale_failed in the controller's log)"
            ]
        )
    )


def summary_json(s: RunSummary, plot: Path | None) -> dict[str, Any]:
    """The summary as ``sim --output json`` prints it: every field of :class:`RunSummary`
    (NaN and infinite values as null), scale events as objects, and the plot's path."""

    def finite(value: float) -> float | None:
        return value if math.isfinite(value) else None

    doc: dict[str, Any] = {
        name: finite(value) if isinstance(value, float) else value
        for name in RunSummary.__dataclass_fields__
        if not isinstance(value := getattr(s, name), tuple)
    }
    doc["comparison"] = [
        {
            "label": row.label,
            **{
                k: v
                for k, v in summary_json(row.summary, None).items()
                if k not in ("windows", "plot", "comparison")
            },
        }
        for row in s.comparison
    ]
    doc["scale_events"] = [
        {"seconds": t, "from_replicas": a, "to_replicas": b} for t, a, b in s.scale_events
    ]
    doc["windows"] = [
        {
            "start_seconds": w.start,
            "requests": w.requests,
            "ttft_p95_seconds": finite(w.ttft_p95_seconds),
        }
        for w in s.windows
    ]
    doc["plot"] = None if plot is None else str(plot)
    return doc


def ttft_line(summary: RunSummary) -> tuple[list[float], list[float]]:
    """The TTFT p95 line of the plot: one point per window mid-point from the first window
    to the last, NaN for a window without requests so that the line breaks there instead of
    joining across it. Values are capped at 1000 s (no first token is infinitely slow)."""
    if not summary.windows:
        return [], []
    w = summary.window_seconds
    by_start = {round(x.start / w): x.ttft_p95_seconds for x in summary.windows}
    first, last = min(by_start), max(by_start)
    xs = [i * w + w / 2 for i in range(first, last + 1)]
    ys = [min(by_start.get(i, math.nan), 1e3) for i in range(first, last + 1)]
    return xs, ys


def plot_figure(
    samples: Sequence[FleetSample],
    summary: RunSummary,
    *,
    title: str,
    shadow: Sequence[tuple[float, int]] = (),
    baselines: Sequence[Baseline] = (),
) -> Figure:
    """The figure :func:`plot_run` saves: arrivals, replicas, TTFT p95 per window vs target.
    With ``shadow`` (``(seconds since start, desired replicas)`` of a shadow policy), the
    replicas panel shows what the shadow would have asked for, as a thin dashed line with
    markers drawn under "desired (spec)", so both stay visible where they are equal. Each of
    ``baselines`` (another approach on the same slice) adds its desired replicas and its TTFT
    p95 per window, in its own colour.

    Legends sit above their panel, outside the plotting area, so they never hide data.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    above: dict[str, Any] = {"loc": "lower left", "bbox_to_anchor": (0.0, 1.0), "fontsize": 8}
    t = [s.t for s in samples]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    fig.suptitle(title, fontsize=10)
    ax1.plot(t, [s.arrivals for s in samples], color="tab:gray", lw=0.8, label="arrivals/s")
    ax1b = ax1.twinx()
    ax1b.plot(t, [s.waiting for s in samples], color="tab:red", lw=1, label="waiting (queue)")
    ax1.set_ylabel("requests/s")
    ax1b.set_ylabel("waiting")
    lines = ax1.get_lines() + ax1b.get_lines()
    ax1.legend(lines, [ln.get_label() for ln in lines], ncol=2, frameon=False, **above)
    # Fixed colours: the default cycle gave "ready" the shadow's orange.
    ax2.step(
        t,
        [s.spec_replicas for s in samples],
        where="post",
        label="desired (spec)",
        lw=1.5,
        color="tab:blue",
        zorder=3,  # on top: the shadow often equals it and must not hide it
    )
    ax2.step(t, [s.ready for s in samples], where="post", label="ready", lw=1.2, color="tab:cyan")
    ax2.step(
        t,
        [s.ready + s.starting for s in samples],
        where="post",
        ls=":",
        label="ready + starting",
        color="tab:cyan",
    )
    if shadow:
        ax2.step(
            [p[0] for p in shadow],
            [p[1] for p in shadow],
            where="post",
            ls="--",
            lw=0.9,
            color="black",
            marker="o",
            ms=3,
            markevery=max(1, len(shadow) // 40),
            zorder=2,
            label="shadow policy (desired)",
        )
    colours = ("tab:orange", "tab:brown", "tab:pink")
    for baseline, colour in zip(baselines, colours, strict=False):
        ax2.step(
            [x.t for x in baseline.samples],
            [x.spec_replicas for x in baseline.samples],
            where="post",
            lw=1.1,
            color=colour,
            label=f"{baseline.label}: desired",
        )
    for when, a, b in summary.scale_events:
        ax2.axvline(when, color="tab:green" if b > a else "tab:purple", alpha=0.3, lw=0.8)
    ax2.set_ylabel("replicas")
    ax2.legend(ncol=3, frameon=False, **above)
    wt, wp = ttft_line(summary)
    ax3.plot(wt, wp, marker="o", ms=3, label=f"TTFT p95 per {summary.window_seconds:g} s window")
    for baseline, colour in zip(baselines, colours, strict=False):
        bt, bp = ttft_line(baseline.summary)
        ax3.plot(bt, bp, marker=".", ms=3, lw=0.9, color=colour, label=baseline.label)
    ax3.axhline(summary.slo_ttft_seconds, color="tab:red", ls="--", label="target")
    ax3.set_yscale("log")
    ax3.set_ylabel("seconds")
    ax3.set_xlabel("seconds since start")
    ax3.legend(ncol=2, frameon=False, **above)
    fig.tight_layout()
    return fig


def plot_run(
    samples: Sequence[FleetSample],
    summary: RunSummary,
    path: Path,
    *,
    title: str,
    shadow: Sequence[tuple[float, int]] = (),
    baselines: Sequence[Baseline] = (),
) -> Path:
    """Write a PNG with three panels: arrivals, replicas (and a shadow policy's desired
    replicas, if given), TTFT p95 per window vs target; ``baselines`` as :func:`plot_figure`."""
    import matplotlib.pyplot as plt

    fig = plot_figure(samples, summary, title=title, shadow=shadow, baselines=baselines)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
