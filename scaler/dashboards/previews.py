"""PNG previews of the dashboards, drawn with matplotlib from the same queries against a
Prometheus (the pictures in ``docs/dashboards/``), as Grafana shows them when the dashboard
opens: each variable as Grafana selects it ("All" where the dashboard saved "All"), repeated
rows once per value, heatmaps of histogram buckets, thresholds taken from query results."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from scaler.core.signals import SignalStatus
from scaler.dashboards.build import build_dashboards
from scaler.dashboards.queries import (
    ALL,
    DEFAULT_BUILTINS,
    all_values,
    annotation_queries,
    resolve_variable_texts,
    selected_values,
    substitute,
)
from scaler.sources.prometheus import AnswerError, answer_problem


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
    all_values: Mapping[str, str]
    options: Mapping[str, list[str]]
    texts: Mapping[str, Mapping[str, str]]  # per variable: each value's text

    def with_value(self, name: str, value: str) -> _Reader:
        """The same reader with variable ``name`` set to ``value`` (a repeated row's copy)."""
        return dataclasses.replace(self, values={**self.values, name: value})

    def range(self, expr: str) -> list[dict[str, Any]]:
        """The series of a range query."""
        return self._ask(
            "query_range", expr, {"start": self.start, "end": self.end, "step": self.step}
        )

    def instant(self, expr: str) -> list[dict[str, Any]]:
        """The samples of an instant query at ``end``."""
        return self._ask("query", expr, {"time": self.end})

    def _ask(self, api: str, expr: str, params: Mapping[str, float]) -> list[dict[str, Any]]:
        expr = substitute(expr, self.values, builtins=self.builtins, all_values=self.all_values)
        return query_result(self.client, self.url, api, {"query": expr, **params})


def query_result(
    client: httpx.Client, url: str, api: str, data: Mapping[str, str | float]
) -> list[dict[str, Any]]:
    """``data.result`` of a query (``api``: ``query`` or ``query_range``) of the Prometheus at
    ``url``.

    Raises:
        AnswerError: the answer is an HTTP error, Prometheus' own error (the query named) or
            not Prometheus' API (:func:`~scaler.sources.prometheus.answer_problem`).
        httpx.HTTPError: no answer (transport, timeout).
    """
    resp = client.post(f"{url}/api/v1/{api}", data=data)
    try:
        body = resp.json()
    except ValueError:
        body = None
    problem = answer_problem(resp.status_code, body, lambda: resp.text)
    if problem is not None:
        status, detail = problem
        if status is SignalStatus.QUERY_ERROR:
            detail += f"; query {data.get('query')}"
        raise AnswerError(status, detail, resp.status_code)
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
    client: httpx.Client | None = None,  # the caller's (token, TLS, headers); else a plain one
) -> list[Path]:
    """Draw each dashboard with matplotlib from the same queries, one PNG per dashboard.

    Variables take the values Grafana selects when the dashboard opens (the saved "All", else
    the first option their own queries find); time series and heatmaps are range queries over
    ``start``..``end`` (default: the last 10 minutes), tables instant queries at ``end``.

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
    with contextlib.nullcontext(client) if client else httpx.Client(timeout=30.0) as client:
        for name, doc in build_dashboards().items():
            texts = resolve_variable_texts(prometheus_url, doc, start=start, end=end, client=client)
            options = {name: list(found) for name, found in texts.items()}
            values = selected_values(doc, options)
            alls = all_values(doc, options)
            with plt.style.context("dark_background"):
                reader = _Reader(
                    client, prometheus_url, values, builtins, start, end, step, alls, options, texts
                )
                fig = _draw_dashboard(doc, reader)
                path = out_dir / (Path(name).stem + ".png")
                fig.savefig(path, dpi=80, facecolor=fig.get_facecolor())
                plt.close(fig)
            written.append(path)
    return written


def _layout(doc: Mapping[str, Any], prom: _Reader) -> list[tuple[dict[str, Any], _Reader, int]]:
    """Every panel with the reader it is drawn with and its top row, rows repeated as Grafana
    repeats them: once per selected value of the row's variable (every option for "All"),
    the copies stacked and what follows moved down."""
    out: list[tuple[dict[str, Any], _Reader, int]] = []
    sections: list[list[dict[str, Any]]] = [[]]
    for panel in doc["panels"]:
        if panel["type"] == "row":
            sections.append([])
        sections[-1].append(panel)
    shift = 0
    for section in sections:
        if not section:
            continue
        head = section[0]
        var = head.get("repeat") if head["type"] == "row" else None
        readers = [prom]
        if var:
            value = prom.values.get(var, "")
            chosen = prom.options.get(var, []) if value == ALL else [value] if value else []
            readers = [prom.with_value(var, v) for v in chosen] or [prom]
        top = min(p["gridPos"]["y"] for p in section)
        height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in section) - top
        for i, reader in enumerate(readers):
            out.extend((p, reader, p["gridPos"]["y"] + shift + i * height) for p in section)
        shift += (len(readers) - 1) * height
    return out


def _draw_dashboard(doc: Mapping[str, Any], prom: _Reader) -> Any:
    import matplotlib.pyplot as plt

    placed = _layout(doc, prom)
    rows = max(y + p["gridPos"]["h"] for p, _, y in placed) + 2
    fig = plt.figure(figsize=(20, rows * 0.38), facecolor="#111217")
    # a variable whose query found nothing says so, not an empty "name="
    shown = {k: ("All" if v == ALL else v or "(none found)") for k, v in prom.values.items()}
    title = f"{doc['title']}   " + "   ".join(f"{k}={v}" for k, v in shown.items())
    fig.text(0.01, 1 - 0.9 / rows, title, fontsize=14, weight="bold", color="white")
    events = _annotation_times(doc, prom)
    for panel, reader, y in placed:
        g = panel["gridPos"]
        left, width = g["x"] / 24, g["w"] / 24
        bottom, height = 1 - (y + 2 + g["h"]) / rows, g["h"] / rows
        if panel["type"] == "row":
            label = _display(panel["title"], reader.values, reader.texts)
            fig.text(left + 0.005, bottom + height / 2, label, fontsize=12, color="#ccccdc")
            continue
        # Room on the left for the tick labels, as Grafana keeps inside the panel.
        ax = fig.add_axes((left + 0.035, bottom + 0.16 * height, width - 0.045, height * 0.72))
        ax.set_facecolor("#181b1f")
        ax.set_title(_display(panel["title"], reader.values, reader.texts), fontsize=10, loc="left")
        if panel["type"] == "table":
            _draw_table(ax, panel, reader)
        elif panel["type"] == "heatmap":
            _draw_heatmap(ax, panel, reader)
        else:
            _draw_timeseries(ax, panel, reader)
            for t in events:
                ax.axvline(t - reader.start, color="orange", linestyle=":", linewidth=1)
    return fig


def _display(text: str, values: Mapping[str, str], texts: Mapping[str, Mapping[str, str]]) -> str:
    """A title with its variables replaced as text (no regex escaping, "All" for All);
    ``${name:text}`` by the text Grafana shows for the value (``texts``: per variable)."""

    def shown_text(m: re.Match[str]) -> str:
        value = values.get(m[1])
        if value is None:
            return m[0]
        return "All" if value == ALL else texts.get(m[1], {}).get(value, value)

    text = re.sub(r"\$\{(\w+):text\}", shown_text, text)
    shown = {k: ("All" if v == ALL else v) for k, v in values.items()}
    return substitute(text, shown, regex_escaped=())


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
    thresholds: list[tuple[float, str, str]] = []  # (value, color, label)
    config = {
        str(t["options"]["configRefId"]): t["options"]["mappings"]
        for t in panel.get("transformations", [])
        if t["id"] == "configFromData"
    }
    for t in panel.get("targets", []):
        if t["refId"] in config:
            # Not drawn: its last value becomes a threshold (Grafana's configFromData).
            for mapping in config[t["refId"]]:
                for series in prom.range(t["expr"]):
                    color = mapping.get("handlerArguments", {}).get("threshold", {}).get("color")
                    last = float(series["values"][-1][1])
                    thresholds.append((last, color or "red", str(mapping["fieldName"])))
            continue
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
    for value, color, label in thresholds:
        ax.axhline(value, color=color, linestyle="--", linewidth=1.2, label=f"{label} {value:g}")
    _format_axis(ax, str(defaults.get("unit", "")))
    if lines:
        ax.legend(fontsize=7, loc="upper left", ncol=2, framealpha=0.7)
    else:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes)


def _draw_heatmap(ax: Any, panel: Mapping[str, Any], prom: _Reader) -> None:
    # Format "heatmap": one cumulative series per "le"; Grafana draws each bucket (its count
    # minus the bucket below) as one row of cells, bounds as the row labels.
    series = prom.range(panel["targets"][0]["expr"])
    cumulative = sorted(
        ((float(s["metric"]["le"]), s) for s in series if "le" in s["metric"]),
        key=lambda pair: pair[0],
    )
    ax.set_xlabel("seconds", fontsize=8)
    if not cumulative:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes)
        return
    times = sorted({float(ts) for _, s in cumulative for ts, _ in s["values"]})
    at = {t: i for i, t in enumerate(times)}
    grid = [[0.0] * len(times) for _ in cumulative]
    for row, (_, s) in enumerate(cumulative):
        for ts, v in s["values"]:
            grid[row][at[float(ts)]] = float(v) if math.isfinite(float(v)) else 0.0
    buckets = [
        [max(0.0, c - (grid[r - 1][i] if r else 0.0)) for i, c in enumerate(grid[r])]
        for r in range(len(grid))
    ]
    # Rows that never held a request are left out, as Grafana hides empty buckets at the ends.
    used = [r for r, row in enumerate(buckets) if any(row)] or [0]
    lo, hi = used[0], used[-1] + 1
    xs = [t - prom.start for t in times]
    edges = [*xs, xs[-1] + prom.step]
    mesh = ax.pcolormesh(
        edges, range(hi - lo + 1), buckets[lo:hi], cmap="Spectral_r", shading="flat"
    )
    labels = ["+Inf" if math.isinf(le) else f"{le:g}" for le, _ in cumulative[lo:hi]]
    ax.set_yticks([i + 0.5 for i in range(hi - lo)], labels, fontsize=7)
    y_label = panel.get("options", {}).get("yAxis", {}).get("axisLabel", "")
    ax.set_ylabel(y_label, fontsize=8)
    ax.tick_params(labelsize=8)
    ax.figure.colorbar(mesh, ax=ax, pad=0.01).ax.tick_params(labelsize=7)


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
