"""The policy and settings reference, generated from their models (never written twice).

``scripts/render-reference.py`` (through ``docs/hooks.py``) writes :func:`policy_reference` and
:func:`settings_reference` into ``docs/policy.md`` and ``docs/settings.md``, so that every field of
:class:`~scaler.config.policy.Policy` and :class:`~scaler.config.settings.Settings` is
documented from its own type, default, bounds and description. :func:`policy_field_paths`
lists every field of the policy file, for the test that the reference covers them all.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from scaler.config.cli_options import SHOWN_DEFAULTS, option_names
from scaler.config.policy import Policy, ScalingPolicy, TargetPolicy
from scaler.config.settings import PrometheusSettings, Settings, env_name

__all__ = [
    "PolicySection",
    "default_policy_yaml",
    "policy_field_paths",
    "policy_reference",
    "policy_sections",
    "settings_reference",
]

#: The workload of the example a default policy needs (a target has no default workload).
EXAMPLE_WORKLOAD = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "namespace": "llm",
    "name": "vllm",
}


@dataclass(frozen=True, slots=True)
class PolicySection:
    """One model of the policy file at its place: ``path`` as the YAML reads it
    (``targets[].signals.ttft_p95``; empty for the file's top level)."""

    path: str
    model: type[BaseModel]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X``, ``X | None``, ``list[X]``)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _field_name(name: str, field: FieldInfo) -> str:
    return field.alias or name


def policy_sections() -> list[PolicySection]:
    """Every model of the policy file, depth first, each once: the shadow, a
    :class:`~scaler.config.policy.ScalingPolicy` whose fields are a target's, is not walked
    again."""
    out: list[PolicySection] = []
    seen: set[type[BaseModel]] = set()

    def walk(path: str, model: type[BaseModel]) -> None:
        out.append(PolicySection(path, model))
        seen.add(model)
        for name, field in model.model_fields.items():
            for inner in _models_in(field.annotation):
                if inner in seen or (model is TargetPolicy and inner is ScalingPolicy):
                    continue
                suffix = "[]" if get_origin(field.annotation) is list else ""
                child = f"{path}.{_field_name(name, field)}{suffix}".lstrip(".")
                walk(child, inner)

    walk("", Policy)
    return out


def policy_field_paths() -> list[str]:
    """The path of every field of the policy file (``targets[].min_replicas``...)."""
    return [
        f"{s.path}.{_field_name(n, f)}".lstrip(".")
        for s in policy_sections()
        for n, f in s.model.model_fields.items()
    ]


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        parts = [_type_name(a) for a in get_args(annotation) if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in get_args(annotation) else "")
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(annotation))
    if origin is list:
        return "list of " + _type_name(get_args(annotation)[0])
    if origin is dict:
        return "mapping"
    if get_origin(annotation) is not None and get_args(annotation):  # Annotated[...]
        return _type_name(get_args(annotation)[0])
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return "mapping"
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _yaml_value(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(below)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"`{int(value)}`"
    return f"`{value}`"


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.get_default(call_default_factory=True)
    return _yaml_value(value)


_BOUNDS = (
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Ge, "ge", ">= {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.Le, "le", "<= {}"),
    (annotated_types.MinLen, "min_length", "at least {} long"),
    (annotated_types.MaxLen, "max_length", "at most {} characters"),
)


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}".replace(",", " ") if abs(value) >= 1e4 else str(int(value))
    if isinstance(value, int) and abs(value) >= 1e4:
        return f"{value:,}".replace(",", " ")
    return str(value)


def _allowed(field: FieldInfo) -> str:
    """What the field accepts beyond its type: its bounds and pattern, from its metadata."""
    parts = []
    for item in field.metadata:
        for kind, attr, text in _BOUNDS:
            if isinstance(item, kind):
                parts.append(text.format(_number(getattr(item, attr))))
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            parts.append(f"`{pattern}`")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _doc(model: type[BaseModel]) -> str:
    """A model's docstring as Markdown prose: reST literals as code spans."""
    text = inspect.cleandoc(model.__doc__ or "")
    text = re.sub(r":(?:mod|func|class|meth):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def default_policy_yaml() -> str:
    """A policy file of one target (:data:`EXAMPLE_WORKLOAD`) with every default written out:
    what a file that sets nothing but its workload means."""
    policy = Policy.model_validate({"targets": [{"workload": EXAMPLE_WORKLOAD}]})
    doc = policy.model_dump(mode="json", by_alias=True, exclude={"targets": {0: {"shadow"}}})
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def policy_reference() -> str:
    """The policy file's reference in Markdown: the defaults as a file, then one section per
    model of the file (its docstring, and a table of its fields: type, default, what it
    accepts, meaning)."""
    lines = [
        "## Defaults",
        "",
        "A policy that names only its workload means this (every other value is a default):",
        "",
        "```yaml",
        default_policy_yaml().rstrip(),
        "```",
        "",
    ]
    for section in policy_sections():
        title = f"`{section.path}`" if section.path else "The file"
        lines += [f"## {title}", "", _doc(section.model), ""]
        if section.model is TargetPolicy:
            lines += [
                "`shadow` is a complete second policy for the same workload: it takes every "
                "field of a target below but `workload`, `prometheus_matchers` and `shadow`, "
                "each with its own default (see [Shadow policy](shadow.md)).",
                "",
            ]
        lines += [
            "| field | type | default | accepts | meaning |",
            "|---|---|---|---|---|",
        ]
        for name, field in section.model.model_fields.items():
            lines.append(
                f"| `{_field_name(name, field)}` | {_type_name(field.annotation)} | "
                f"{_default(field)} | {_cell(_allowed(field))} | {_cell(field.description or '')} |"
            )
        lines.append("")
    return "\n".join(lines)


def _settings_groups() -> Iterator[tuple[str, type[PrometheusSettings], Sequence[str]]]:
    yield "Prometheus client", PrometheusSettings, tuple(PrometheusSettings.model_fields)
    own = tuple(f for f in Settings.model_fields if f not in PrometheusSettings.model_fields)
    yield "Controller", Settings, own


def settings_reference(commands: Mapping[str, Sequence[str]]) -> str:
    """The settings' reference in Markdown: per setting its variable, its options, the
    commands that take it, its default and its description.

    Args:
        commands: field name -> the commands that offer it as an option (the build reads
            them from the command line itself); a field no command offers says so.
    """
    lines: list[str] = []
    for title, model, fields in _settings_groups():
        lines += [
            f"## {title}",
            "",
            "| variable | option | commands | default | meaning |",
            "|---|---|---|---|---|",
        ]
        for name in fields:
            field = model.model_fields[name]
            options = " ".join(f"`{o}`" for o in option_names(name))
            default = SHOWN_DEFAULTS.get(name)
            shown = _cell(default) if default else _default(field)
            if shown == "`{}`":
                shown = "none"
            if shown == "`null`":
                shown = "none"
            used = ", ".join(f"`{c}`" for c in commands.get(name, ())) or "none"
            lines.append(
                f"| `{env_name(name)}` | {options} | {used} | {shown} | "
                f"{_cell(field.description or '')} |"
            )
        lines.append("")
    return "\n".join(lines)
