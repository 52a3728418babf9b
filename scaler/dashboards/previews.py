"""PNG previews of the dashboards, drawn with matplotlib from the same queries against a
Prometheus (the pictures in ``docs/dashboards/``)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from scaler.dashboards.build import build_dashboards
from scaler.dashboards.queries import (
    DEFAULT_BUILTINS,
    annotation_queries,
    resolve_variables,
    substitute,
)


@dataclass(frozen=True, slots=True)
class _Reader:
    """How a preview reads one dashboard: its queries with the variables' ``values`` and the
    ``builtins`` substituted, asked of the Prometheus at ``url`` over ``start``..``end``
    (epoch seconds) every ``step`` seconds; instant queries (tables) at ``end``."""

    client: httpx.Client
    url: str
    values: Mapping[str, str]
    builtins: Mapping[str, str]
    start: float
    end: float
    step: float

    def range(self, expr: str) -> list[dict[str, Any]]:
        """The series of a range query."""
        return self._ask(
            "query_range", expr, {"start": self.start, "end": self.end, "step": self.step}
        )

    def instant(self, expr: str) -> list[dict[str, Any]]:
        """The samples of an instant query at ``end``."""
        return self._ask("query", expr, {"time": self.end})

    def _ask(self, api: str, expr: str, params: Mapping[str, float]) -> list[dict[str, Any]]:
        expr = substitute(expr, self.values, builtins=self.builtins)
        resp = self.client.post(f"{self.url}/api/v1/{api}", data={"query": expr, **params})
        body = resp.json()
        if body.get("status") != "success":
            raise RuntimeError(f"query failed: {expr!r}: {body.get('error', resp.text[:300])}")
        return list(body["data"]["result"])


def _legend_text(fmt: str, labels: Mapping[str, str]) -> str:
    if fmt in ("", "__auto"):
        return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()


def render_previews(
    prometheus_url: str,
    out_dir: Path,
    *,
    start: float | None = None,
    end: float | None = None,
    step: float = 2.0,
    builtins: Mapping[str, str] = DEFAULT_BUILTINS,
) -> list[Path]:
    """Draw each dashboard with matplotlib from the same queries, one PNG per dashboard.

    Variables take the first value their own queries find (as Grafana's default would be
    with a single target); time series are range queries over ``start``..``end`` (default:
    the last 10 minutes), tables instant queries at ``end``.

    Returns:
        The PNG paths written into ``out_dir`` (``<dashboard file name>.png``).
    """
    import matplotlib

    matplotlib.use("Agg")  # headless: tests and CI have no display
    import matplotlib.pyplot as plt

    end = end if end is not None else time.time()
    start = start if start is not None else end - 600
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with httpx.Client(timeout=30.0) as client:
        for name, doc in build_dashboards().items():
            options = resolve_variables(prometheus_url, doc, start=start, end=end, client=client)
            values = {k: v[0] for k, v in options.items() if v}
            with plt.style.context("dark_background"):
                reader = _Reader(client, prometheus_url, values, builtins, start, end, step)
                fig = _draw_dashboard(doc, reader)
                path = out_dir / (Path(name).stem + ".png")
                fig.savefig(path, dpi=80, facecolor=fig.get_facecolor())
                plt.close(fig)
            written.append(path)
    return written


def _draw_dashboard(doc: Mapping[str, Any], prom: _Reader) -> Any:
    import matplotlib.pyplot as plt

    panels = list(doc["panels"])
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) + 2
    fig = plt.figure(figsize=(20, rows * 0.38), facecolor="#111217")
    title = f"{doc['title']}   " + "   ".join(f"{k}={v}" for k, v in prom.values.items())
    fig.text(0.01, 1 - 0.9 / rows, title, fontsize=14, weight="bold", color="white")
    events = _annotation_times(doc, prom)
    for panel in panels:
        g = panel["gridPos"]
        left, width = g["x"] / 24, g["w"] / 24
        bottom, height = 1 - (g["y"] + 2 + g["h"]) / rows, g["h"] / rows
        if panel["type"] == "row":
            label = _display(panel["title"], prom.values)
            fig.text(left + 0.005, bottom + height / 2, label, fontsize=12, color="#ccccdc")
            continue
        # Room on the left for the tick labels, as Grafana keeps inside the panel.
        ax = fig.add_axes((left + 0.035, bottom + 0.16 * height, width - 0.045, height * 0.72))
        ax.set_facecolor("#181b1f")
        ax.set_title(_display(panel["title"], prom.values), fontsize=10, loc="left")
        if panel["type"] == "table":
            _draw_table(ax, panel, prom)
        else:
            _draw_timeseries(ax, panel, prom)
            for t in events:
                ax.axvline(t - prom.start, color="orange", linestyle=":", linewidth=1)
    return fig


def _display(text: str, values: Mapping[str, str]) -> str:
    """A title with its variables replaced as text (no regex escaping)."""
    return substitute(text, values, regex_escaped=())


def _annotation_times(doc: Mapping[str, Any], prom: _Reader) -> list[float]:
    # Grafana draws a region per run of points; the preview marks where each run begins.
    times: list[float] = []
    for q in annotation_queries(doc):
        for series in prom.range(q.expr):
            prev = -math.inf
            for ts, _ in series["values"]:
                if float(ts) - prev > 1.5 * prom.step:
                    times.append(float(ts))
                prev = float(ts)
    return times


_COLORS: Final = {"green": "#73bf69", "dark-green": "#37872d"}


def _format_axis(ax: Any, unit: str) -> None:
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    if unit == "percentunit":
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    elif unit == "s":
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} s"))
    elif unit in ("reqps", "ops"):
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}/s"))
    ax.tick_params(labelsize=8)
    ax.set_xlabel("seconds", fontsize=8)
    ax.grid(color="#2c3235", linewidth=0.5)


def _draw_timeseries(ax: Any, panel: Mapping[str, Any], prom: _Reader) -> None:
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    custom = defaults.get("custom", {})
    overrides: dict[str, dict[str, Any]] = {}
    for o in panel.get("fieldConfig", {}).get("overrides", []):
        if o["matcher"]["id"] == "byName":
            props = overrides.setdefault(o["matcher"]["options"], {})
            props.update({p["id"]: p.get("value") for p in o["properties"]})
    lines: dict[str, tuple[list[float], list[float]]] = {}
    for t in panel.get("targets", []):
        for series in prom.range(t["expr"]):
            label = _legend_text(t.get("legendFormat", ""), series["metric"])
            xs = [float(ts) - prom.start for ts, _ in series["values"]]
            ys = [float(v) for _, v in series["values"]]
            lines[label] = (xs, ys)
    if custom.get("drawStyle") == "bars":
        grid = sorted({x for xs, _ in lines.values() for x in xs})
        stacks = [
            [dict(zip(xs, ys, strict=True)).get(x, 0.0) for x in grid] for xs, ys in lines.values()
        ]
        if grid:
            ax.stackplot(grid, stacks, labels=list(lines), step="post", alpha=0.85)
    else:
        for label, (xs, ys) in lines.items():
            props = overrides.get(label, {})
            dashed = (props.get("custom.lineStyle") or {}).get("fill") == "dash"
            color = (props.get("color") or {}).get("fixedColor")
            ax.plot(
                xs,
                ys,
                label=label,
                linestyle="--" if dashed else "-",
                linewidth=props.get("custom.lineWidth") or 1.2,
                color=_COLORS.get(color or ""),
            )
            below = props.get("custom.fillBelowTo")
            if below in lines:
                lx, ly = lines[str(below)]
                if lx == xs:
                    ax.fill_between(xs, ly, ys, color="#73bf69", alpha=0.15)
    _format_axis(ax, str(defaults.get("unit", "")))
    if lines:
        ax.legend(fontsize=7, loc="upper left", ncol=2, framealpha=0.3)
    else:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes)


def _draw_table(ax: Any, panel: Mapping[str, Any], prom: _Reader) -> None:
    # Mirrors the panel's merge + organize transformations: one row per target.
    organize: dict[str, Any] = next(
        (t["options"] for t in panel.get("transformations", []) if t["id"] == "organize"), {}
    )
    rename = organize.get("renameByName", {})
    rows: dict[str, dict[str, str]] = {}
    columns = ["target"]
    for t in panel.get("targets", []):
        column = rename.get(f"Value #{t['refId']}")
        for s in prom.instant(t["expr"]):
            row = rows.setdefault(s["metric"].get("target", ""), {})
            for k, v in s["metric"].items():
                row[k] = v
                if k not in columns:
                    columns.append(k)
            if column:
                row[column] = f"{float(s['value'][1]):g}"
        if column and column not in columns:
            columns.append(column)
    ax.axis("off")
    if not rows:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes)
        return
    cells = [[r.get(c, "") for c in columns] for _, r in sorted(rows.items())]
    tbl = ax.table(cellText=cells, colLabels=columns, loc="upper center", cellLoc="left")
    tbl.auto_set_font_size(False)
    tbl.set_fontsize(10)
    tbl.scale(1, 1.6)
    for cell in tbl.get_celld().values():
        cell.set_facecolor("#181b1f")
        cell.set_edgecolor("#2c3235")
        cell.get_text().set_color("white")
