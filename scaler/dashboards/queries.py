"""Reading a dashboard's PromQL back (tests and previews): every panel and annotation query,
Grafana's variable substitution, the variables' options as Grafana would resolve them and the
values it selects when the dashboard opens.

Works on the JSON alone: nothing here needs grafana-foundation-sdk.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx


@dataclass(frozen=True, slots=True)
class PanelQuery:
    """One PromQL query of a dashboard (``panel`` is the panel title or ``annotation: name``)."""

    dashboard: str
    panel: str
    ref_id: str
    expr: str
    instant: bool


def walk_panels(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in doc.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # panels of collapsed rows


def panel_queries(doc: Mapping[str, Any]) -> list[PanelQuery]:
    """Every panel target's PromQL in ``doc`` (rows and collapsed rows included)."""
    out = []
    for panel in walk_panels(doc):
        for t in panel.get("targets", []):
            out.append(
                PanelQuery(
                    dashboard=str(doc["uid"]),
                    panel=str(panel.get("title", "")),
                    ref_id=str(t.get("refId", "")),
                    expr=str(t["expr"]),
                    instant=bool(t.get("instant", False)),
                )
            )
    return out


def annotation_queries(doc: Mapping[str, Any]) -> list[PanelQuery]:
    """The PromQL of ``doc``'s annotations (evaluated as range queries by Grafana)."""
    return [
        PanelQuery(str(doc["uid"]), f"annotation: {a['name']}", "", str(a["expr"]), False)
        for a in (doc.get("annotations") or {}).get("list", [])
        if a.get("expr")
    ]


# A multi-value variable's value when "All" is selected (Grafana's placeholder).
ALL: Final = "$__all"
_VAR_RE: Final = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_REGEX_SPECIAL: Final = re.compile(r"([\\^$*+?.()|{}\[\]])")
DEFAULT_BUILTINS: Final[Mapping[str, str]] = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
}


def substitute(
    expr: str,
    values: Mapping[str, str],
    *,
    builtins: Mapping[str, str] = DEFAULT_BUILTINS,
    regex_escaped: Sequence[str] = ("target", "model"),
    all_values: Mapping[str, str] | None = None,
) -> str:
    """Replace Grafana variables in ``expr`` as Grafana's Prometheus datasource would.

    Args:
        expr: a panel or variable query.
        values: one value per dashboard variable (``namespace``, ``target``, ``model``);
            :data:`ALL` for "All".
        builtins: ``$__rate_interval`` and friends.
        regex_escaped: multi-value variables; Grafana escapes regex characters in their
            values (``.`` becomes ``\\\\.`` inside a PromQL string).
        all_values: what "All" stands for, per variable (see :func:`all_values`); ``.*``
            where missing.
    """

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name in builtins:
            return builtins[name]
        if name not in values:
            return m.group(0)
        value = values[name]
        if value == ALL:
            return (all_values or {}).get(name, ".*")
        return _REGEX_SPECIAL.sub(r"\\\\\1", value) if name in regex_escaped else value

    return _VAR_RE.sub(repl, expr)


_LABEL_VALUES: Final = re.compile(r"^label_values\((?:(?P<sel>.+),\s*)?(?P<label>\w+)\)$")
_QUERY_RESULT: Final = re.compile(r"^query_result\((?P<expr>.+)\)$", re.S)


def _js_regex(regex: str) -> re.Pattern[str] | None:
    # Grafana variable regexes are JavaScript literals (/.../flags) with (?<name>) groups.
    if not regex:
        return None
    body = regex[1 : regex.rindex("/")] if regex.startswith("/") else regex
    return re.compile(body.replace("(?<", "(?P<").replace("\\/", "/"))


def _apply_regex_texts(pattern: re.Pattern[str] | None, values: Sequence[str]) -> dict[str, str]:
    """Each option's value and the text Grafana shows for it, ordered by value: the regex's
    ``value`` group (else its first group, else the match) and its ``text`` group (else the
    value), as Grafana's variable regex gives them."""
    out: dict[str, str] = {}
    for v in values:
        if pattern is None:
            out.setdefault(v, v)
            continue
        m = pattern.search(v)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("value") is not None:
            value = groups["value"]
        elif m.groups():
            value = m.group(1)
        else:
            value = m.group(0)
        out.setdefault(value, groups.get("text") or value)
    return dict(sorted(out.items()))


def _apply_regex(pattern: re.Pattern[str] | None, values: Sequence[str]) -> list[str]:
    return list(_apply_regex_texts(pattern, values))


def _query_result_text(series: Mapping[str, Any]) -> str:
    """One series of an instant query as Grafana's ``query_result()`` variable lists it, for
    the variable's regex: ``name{label="value",...} value timestamp_ms``."""
    labels = {k: v for k, v in series["metric"].items() if k != "__name__"}
    pairs = ",".join(f'{k}="{v}"' for k, v in labels.items())
    ts, value = series["value"]
    return f"{series['metric'].get('__name__', '')}{{{pairs}}} {value} {round(float(ts) * 1000)}"


def resolve_variables(
    prometheus_url: str,
    doc: Mapping[str, Any],
    *,
    start: float,
    end: float,
    client: httpx.Client | None = None,
) -> dict[str, list[str]]:
    """Run ``doc``'s variable queries as Grafana would; every query variable's options (their
    values), in order (:func:`resolve_variable_texts` for the texts shown)."""
    texts = resolve_variable_texts(prometheus_url, doc, start=start, end=end, client=client)
    return {name: list(found) for name, found in texts.items()}


def resolve_variable_texts(
    prometheus_url: str,
    doc: Mapping[str, Any],
    *,
    start: float,
    end: float,
    client: httpx.Client | None = None,
) -> dict[str, dict[str, str]]:
    """Run ``doc``'s variable queries as Grafana would; every query variable's options, in
    order, each value with the text Grafana shows for it (``${name:text}``).

    Each query sees the variables before it as Grafana selects them when the dashboard opens
    (:func:`selected_values`). ``label_values(sel, label)``
    becomes ``/api/v1/label/<label>/values?match[]=sel``; ``query_result(expr)`` an instant
    query at ``end`` (``$__range`` the whole ``start``..``end``), each series written as
    Grafana writes it; the variable's regex (with its ``text``/``value`` capture groups) is
    applied to the answer.

    Raises:
        ValueError: a variable query of another form.
        httpx.HTTPError: a query without an answer, or with an HTTP error.
    """
    own = client or httpx.Client(timeout=10.0)
    chosen: dict[str, str] = {}
    options: dict[str, dict[str, str]] = {}
    builtins = {**DEFAULT_BUILTINS, "__range": f"{max(1, round(end - start))}s"}
    try:
        for var in doc.get("templating", {}).get("list", []):
            if var.get("type") != "query":
                continue  # the datasource: the server asked is the one chosen
            raw = var.get("query")
            query = str(raw.get("query") if isinstance(raw, dict) else raw)
            alls = all_values(doc, {k: list(v) for k, v in options.items()})
            query = substitute(query, chosen, builtins=builtins, all_values=alls).strip()
            m = _LABEL_VALUES.match(query)
            qr = _QUERY_RESULT.match(query)
            if m is not None:
                params: dict[str, str | float] = {"start": start, "end": end}
                if m.group("sel"):
                    params["match[]"] = m.group("sel")
                resp = own.get(
                    f"{prometheus_url}/api/v1/label/{m.group('label')}/values", params=params
                )
                resp.raise_for_status()
                answers = [str(a) for a in resp.json()["data"]]
            elif qr is not None:
                resp = own.post(
                    f"{prometheus_url}/api/v1/query", data={"query": qr["expr"], "time": end}
                )
                resp.raise_for_status()
                answers = [_query_result_text(r) for r in resp.json()["data"]["result"]]
            else:
                raise ValueError(f"unsupported variable query {query!r}")
            found = _apply_regex_texts(_js_regex(str(var.get("regex", ""))), answers)
            options[str(var["name"])] = found
            chosen[str(var["name"])] = _selected(var, list(found))
    finally:
        if client is None:
            own.close()
    return options


def _selected(var: Mapping[str, Any], found: Sequence[str]) -> str:
    current = str((var.get("current") or {}).get("value", ""))
    if var.get("includeAll") and current == ALL:
        return ALL  # "All" stays selected whatever the query finds
    if current in found:
        return current
    return found[0] if found else ""


def selected_values(doc: Mapping[str, Any], options: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """The value of each query variable when Grafana opens ``doc``: the saved selection if it
    is still an option (:data:`ALL` stays "All", whatever the options), else the first option,
    else empty. ``options`` is :func:`resolve_variables`' answer."""
    return {
        str(v["name"]): _selected(v, options.get(str(v["name"]), []))
        for v in doc.get("templating", {}).get("list", [])
        if v.get("type") == "query"
    }


def all_values(doc: Mapping[str, Any], options: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """What "All" stands for in each multi-value variable of ``doc``: its custom all value, or
    the regex alternation of its options (Grafana's default)."""
    out: dict[str, str] = {}
    for v in doc.get("templating", {}).get("list", []):
        if v.get("includeAll"):
            escaped = [_REGEX_SPECIAL.sub(r"\\\\\1", o) for o in options.get(str(v["name"]), [])]
            out[str(v["name"])] = v.get("allValue") or "(" + "|".join(escaped) + ")"
    return out
