"""What both dashboards share: helpers over grafana-foundation-sdk's builders (queries,
time-series panels, overrides, variables), the dashboard frame and the import-time inputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.builders.common import StackingConfig, VizLegendOptions
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as gc
from grafana_foundation_sdk.models import dashboard as gm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from scaler.dashboards.queries import walk_panels

# Every panel reads the datasource that Grafana's import dialog asks for (see _INPUTS).
DS: Final = gm.DataSourceRef(type_val="prometheus", uid="${DS_PROMETHEUS}")
_INPUTS: Final = [
    {
        "name": "DS_PROMETHEUS",
        "label": "Prometheus",
        "description": "The Prometheus that scrapes vLLM and vllm-scaler",
        "type": "datasource",
        "pluginId": "prometheus",
        "pluginName": "Prometheus",
    }
]
_REQUIRES: Final = [
    {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "10.4.0"},
    {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
    {"type": "panel", "id": "timeseries", "name": "Time series", "version": ""},
    {"type": "panel", "id": "table", "name": "Table", "version": ""},
]

# Grafana's rate window: at least four scrape intervals, whatever the panel's resolution.
RATE_INTERVAL: Final = "$__rate_interval"


def prometheus_query(
    ref: str, expr: str, legend: str = "__auto", *, instant: bool = False
) -> gp.Dataquery:
    """A Prometheus query with refId ``ref``: a range query, or an instant one in table format."""
    q = gp.Dataquery().ref_id(ref).expr(expr).legend_format(legend).datasource(DS)
    return q.instant().format(PromQueryFormat.TABLE) if instant else q.range()


def timeseries(
    title: str,
    description: str,
    queries: Sequence[tuple[str, str]],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    bars: bool = False,
) -> gts.Panel:
    """A time-series panel; ``queries`` are ``(expr, legend)`` pairs, refIds A, B, ..."""
    p = (
        gts.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .span(width)
        .height(height)
        .line_width(1)
        .fill_opacity(10 if not bars else 80)
        .legend(
            VizLegendOptions()
            .display_mode(gc.LegendDisplayMode.LIST)
            .placement(gc.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
    )
    for i, (expr, legend) in enumerate(queries):
        p = p.with_target(prometheus_query(chr(ord("A") + i), expr, legend))
    if bars:
        p = (
            p.draw_style(gc.GraphDrawStyle.BARS)
            .stacking(StackingConfig().mode(gc.StackingMode.NORMAL))
            .fill_opacity(80)
        )
    return p


def dashed_lines(names: Sequence[str]) -> list[tuple[str, list[gm.DynamicConfigValue]]]:
    """Overrides that draw the series named ``names`` dashed (for :func:`with_overrides`)."""
    style = {"fill": "dash", "dash": [10, 10]}
    return [(n, [gm.DynamicConfigValue("custom.lineStyle", style)]) for n in names]


def with_overrides(
    p: gts.Panel, overrides: Sequence[tuple[str, list[gm.DynamicConfigValue]]]
) -> gts.Panel:
    """``p`` with ``(series name, properties)`` field overrides added in order."""
    for name, props in overrides:
        p = p.override_by_name(name, props)
    return p


def query_variable(
    name: str, label: str, query: str, *, regex: str = "", multi: bool = True
) -> gd.QueryVariable:
    """A dashboard variable filled by a Prometheus ``query``; ``multi`` ones offer "All"
    (``.*``) and start there. ``regex`` is Grafana's JavaScript regex over the answers."""
    v = (
        gd.QueryVariable(name)
        .label(label)
        .datasource(DS)
        .query({"query": query, "refId": f"{name}-var", "qryType": 1})
        .refresh(gm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(gm.VariableSort.ALPHABETICAL_ASC)
        .multi(multi)
        .include_all(multi)
        .current(gm.VariableOption(selected=True, text="All", value="$__all"))
    )
    if multi:
        v = v.all_value(".*")
    if regex:
        v = v.regex(regex)
    return v


def finish(b: gd.Dashboard) -> dict[str, Any]:
    """Encode, number the panels and add the import-time datasource input."""
    doc: dict[str, Any] = json.loads(json.dumps(b.build(), cls=JSONEncoder))
    for i, panel in enumerate(walk_panels(doc), start=1):
        panel["id"] = i
    doc["id"] = None
    doc["__inputs"] = _INPUTS
    doc["__requires"] = _REQUIRES
    return doc


def target_variable(*, regex: str = "") -> gd.QueryVariable:
    """The ``target`` variable: the targets vllm-scaler reports in the selected namespace
    (``ns/Kind/name``); ``regex`` may turn each into another value."""
    return query_variable(
        "target",
        "Target",
        'label_values(vllm_scaler_current_replicas{target=~"$namespace/.*"}, target)',
        regex=regex,
    )


def model_variable() -> gd.QueryVariable:
    """The ``model`` variable: the models vLLM serves in the selected namespace."""
    return query_variable(
        "model",
        "Model",
        'label_values(vllm:num_requests_running{namespace=~"$namespace"}, model_name)',
    )


def base_dashboard(title: str, uid: str, description: str) -> gd.Dashboard:
    """A dashboard frame: uid, tags, the last hour refreshed every 30 s, shared crosshair."""
    return (
        gd.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["vllm", "vllm-scaler"])
        .editable()
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .tooltip(gm.DashboardCursorSync.CROSSHAIR)
    )
