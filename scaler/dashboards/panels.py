"""What both dashboards share: helpers over grafana-foundation-sdk's builders (queries,
time-series and heatmap panels, thresholds, overrides, variables), the dashboard frame and the
import-time inputs and requirements."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Sequence
from typing import Any, Final

from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import heatmap as ghm
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.builders.common import (
    GraphThresholdsStyleConfig,
    StackingConfig,
    VizLegendOptions,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as gc
from grafana_foundation_sdk.models import dashboard as gm
from grafana_foundation_sdk.models import heatmap as ghm_models
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from scaler.dashboards.queries import walk_panels

# Every panel, variable query and annotation reads the datasource chosen in the ``datasource``
# variable (a Prometheus; VictoriaMetrics, Thanos and Mimir answer as one). Its default is
# the datasource Grafana's import dialog asks for (DS_PROMETHEUS in __inputs): the import
# replaces that placeholder, so the imported dashboard opens on the chosen datasource and
# can still be switched to another one.
DATASOURCE_VARIABLE: Final = "datasource"
DS: Final = gm.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}")
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
# The SDK's version is "<build>!<Grafana version>": the Grafana whose dashboard schema it
# writes (schemaVersion 41 is what Grafana 11.6 writes), so the dashboards require that one.
GRAFANA_VERSION: Final = importlib.metadata.version("grafana-foundation-sdk").split("!")[-1]
_PANEL_NAMES: Final = {
    "heatmap": "Heatmap",
    "table": "Table",
    "timeseries": "Time series",
}

# Grafana's rate window: at least four scrape intervals, whatever the panel's resolution.
RATE_INTERVAL: Final = "$__rate_interval"


def prometheus_query(
    ref: str,
    expr: str,
    legend: str = "__auto",
    *,
    instant: bool = False,
    fmt: PromQueryFormat | None = None,
) -> gp.Dataquery:
    """A Prometheus query with refId ``ref``: a range query, or an instant one in table format;
    ``fmt`` overrides the format (``heatmap`` for histogram buckets)."""
    q = gp.Dataquery().ref_id(ref).expr(expr).legend_format(legend).datasource(DS)
    q = q.instant().format(PromQueryFormat.TABLE) if instant else q.range()
    return q.format(fmt) if fmt is not None else q


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


def with_threshold_from(p: gts.Panel, expr: str, name: str, *, ref: str = "T") -> gts.Panel:
    """``p`` with a dashed red threshold line at the last value of ``expr``.

    Grafana thresholds are static numbers; a value that lives in the data (a configured
    target) reaches them through the "Config from query results" transformation
    (``configFromData``): the query ``ref`` (legend ``name``) is not drawn, its last value
    becomes the first threshold step.
    """
    return (
        p.with_target(prometheus_query(ref, expr, name))
        .thresholds(
            gd.ThresholdsConfig()
            .mode(gm.ThresholdsMode.ABSOLUTE)
            .steps([gm.Threshold(value=None, color="transparent")])
        )
        .thresholds_style(GraphThresholdsStyleConfig().mode(gc.GraphThresholdsStyleMode.DASHED))
        .with_transformation(
            gm.DataTransformerConfig(
                id_val="configFromData",
                options={
                    "configRefId": ref,
                    "mappings": [
                        {
                            "fieldName": name,
                            "handlerKey": "threshold1",
                            "reducerId": "lastNotNull",
                            "handlerArguments": {"threshold": {"color": "red"}},
                        }
                    ],
                },
            )
        )
    )


def heatmap(
    title: str, description: str, expr: str, *, y_label: str, width: int = 12, height: int = 8
) -> ghm.Panel:
    """A heatmap of a histogram's buckets: ``expr`` must be ``sum by (le) (...)`` of a
    ``_bucket`` series; Grafana turns the cumulative ``le`` series into one row per bucket
    (format ``heatmap``, nothing calculated)."""
    return (
        ghm.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .span(width)
        .height(height)
        .calculate(False)
        .with_target(prometheus_query("A", expr, "{{le}}", fmt=PromQueryFormat.HEATMAP))
        .color(
            ghm.HeatmapColorOptions()
            .mode(ghm_models.HeatmapColorMode.SCHEME)
            .scheme("Spectral")
            .scale(ghm_models.HeatmapColorScale.EXPONENTIAL)
            .exponent(0.5)
            .steps(64)
        )
        .rows_frame(ghm.RowsHeatmapOptions().layout(gc.HeatmapCellLayout.LE).value("req/s"))
        .y_axis(ghm.YAxisConfig().axis_label(y_label).unit("short"))
        .cell_values(ghm.CellValues().unit("reqps"))
        .show_legend()
    )


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


def datasource_variable() -> gd.DatasourceVariable:
    """The ``datasource`` variable: any Prometheus-type datasource, by default the one the
    import dialog was given (``${DS_PROMETHEUS}``, replaced at import)."""
    return (
        gd.DatasourceVariable(DATASOURCE_VARIABLE)
        .label("Data source")
        .type("prometheus")
        .current(gm.VariableOption(selected=True, text="Prometheus", value="${DS_PROMETHEUS}"))
    )


def requires(doc: dict[str, Any]) -> list[dict[str, str]]:
    """``__requires`` for ``doc``: the Grafana whose schema it is written in, the Prometheus
    datasource plugin and every panel type it uses."""
    types = sorted({p["type"] for p in walk_panels(doc) if p["type"] != "row"})
    unknown = [t for t in types if t not in _PANEL_NAMES]
    if unknown:
        raise ValueError(f"panel types without a __requires name: {unknown}")
    return [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": GRAFANA_VERSION},
        {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
        *({"type": "panel", "id": t, "name": _PANEL_NAMES[t], "version": ""} for t in types),
    ]


def finish(b: gd.Dashboard) -> dict[str, Any]:
    """Encode, number the panels and add the import-time datasource input and requirements."""
    doc: dict[str, Any] = json.loads(json.dumps(b.build(), cls=JSONEncoder))
    for i, panel in enumerate(walk_panels(doc), start=1):
        panel["id"] = i
    doc["id"] = None
    doc["__inputs"] = _INPUTS
    doc["__requires"] = requires(doc)
    return doc


def resource_named(expr: str) -> str:
    """``expr`` (series with ``target`` and ``resource`` labels, one per target, as
    vllm_scaler_target_info has them) with ``resource`` in words: "VLLMAutoscaler ns/name",
    or "policy file" where it is empty."""
    return (
        f'label_replace(label_replace({expr}, "resource", "VLLMAutoscaler $1", "resource", '
        '"(.+)"), "resource", "policy file", "resource", "")'
    )


#: The ``target`` variable's regex over :func:`target_variable`'s answer: the value is the
#: target (``ns/Kind/name``), its text the target with its resource.
TARGET_REGEX: Final = '/display="(?<text>[^"]*)".*target="(?<value>[^"]*)"/'
#: The same, with the workload name (``name`` of ``ns/Kind/name``) as the value.
WORKLOAD_REGEX: Final = '/display="(?<text>[^"]*)".*target="[^/"]*/[^/"]*/(?<value>[^"]*)"/'


def target_variable(
    *, selector: str = 'target=~"$namespace/.*"', regex: str = TARGET_REGEX
) -> gd.QueryVariable:
    """The ``target`` variable: the targets vllm-scaler reported over the dashboard's range
    (vllm_scaler_target_info{``selector``}, one per target whichever controller replica
    exports it), each shown with the VLLMAutoscaler that defines it
    (``llm/Deployment/vllm-llama-8b (VLLMAutoscaler llm/vllm-llama-8b)``, or ``(policy
    file)``): a ``query_result`` whose ``display`` label is that text, ``regex`` (Grafana's
    ``text`` and ``value`` groups) picks it and the value. ``${target:text}`` names both in a
    repeated row's title."""
    info = (
        "max by (target, resource) "
        f"(max_over_time(vllm_scaler_target_info{{{selector}}}[$__range]))"
    )
    display = (
        f'label_replace(label_join({resource_named(info)}, "display", " (", "target", '
        '"resource"), "display", "$1)", "display", "(.+)")'
    )
    return query_variable("target", "Target", f"query_result({display})", regex=regex)


def model_variable() -> gd.QueryVariable:
    """The ``model`` variable: the models vLLM serves in the selected namespace."""
    return query_variable(
        "model",
        "Model",
        'label_values(vllm:num_requests_running{namespace=~"$namespace"}, model_name)',
    )


def base_dashboard(title: str, uid: str, description: str) -> gd.Dashboard:
    """A dashboard frame: uid, tags, the last hour refreshed every 30 s, shared crosshair, and
    the ``datasource`` variable first."""
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
        .with_variable(datasource_variable())
    )
