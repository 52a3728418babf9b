"""Error messages of the policy file, in the project's words rather than pydantic's or PyYAML's.

Each message names the file, the field path, the value and what was expected:

- a check across fields (a model validator) says what it checks, without pydantic's
  ``Value error,`` prefix or the mapping it was given (``value dict``);
- an unknown field names the fields its section takes, and the closest one (difflib),
  never its value;
- a YAML syntax error names the file, the line and the column (1-based), not
  ``"<unicode string>"``.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Sequence
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from scaler.config.kinds import KNOWN_API_VERSIONS
from scaler.config.wording import (
    expectation,
    in_seconds,
    percent_hint,
    seconds_expectation,
    unit_hint,
)

__all__ = [
    "as_written",
    "describe_document",
    "describe_yaml_error",
    "field_path",
    "validation_lines",
]


def field_path(loc: Sequence[int | str]) -> str:
    """``("targets", 0, "signals")`` -> ``targets[0].signals``; ``()`` -> ``(top level)``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not part.isidentifier():  # an odd key (spaces, control characters): quoted
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


# A number written with a unit (2000ms, 2s, 80%), where the field takes a plain number.
_WITH_UNIT = re.compile(r"^\s*[-+]?[\d.]+\s*[a-zA-Z%]+\s*$")
#: The errors of a value that is no number where a number is expected.
_NOT_A_NUMBER = frozenset({"float_parsing", "float_type", "int_parsing", "int_type"})


def _shown(value: object) -> str:
    """A value as a message shows it: scalars as written, containers by kind."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list" if value else "[] (an empty list)"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]  # as YAML writes them
    return repr(value)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (``X``, ``X | None``, ``list[X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType, list):
        for arg in get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _section(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model of the section at ``loc`` (list indices skipped), or None when the path
    leaves the models (a free mapping such as ``prometheus_matchers``)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = next(
            (f for n, f in current.model_fields.items() if part in (n, f.alias)),
            None,
        )
        current = None if field is None else _model_in(field.annotation)
    return current


def _field_names(model: type[BaseModel], camel: bool = True) -> list[str]:
    """The keys a section takes, as the file spells them: the camelCase aliases
    (``apiVersion``, ``minReplicas``), or the snake_case names where the file writes those
    (a name with an explicit alias of its own, ``apiVersion``, keeps it)."""
    return [
        f.alias if f.alias and (camel or not _generated(f)) else n
        for n, f in model.model_fields.items()
    ]


def _generated(field: FieldInfo) -> bool:
    """The field's alias is the camelCase the models' alias generator gave its name (not an
    alias of its own, as ``apiVersion``, which both spellings use)."""
    return field.alias is not None and field.alias_priority != 2


def _spelled_names(model: type[BaseModel]) -> dict[str, str]:
    """Every snake_case field name of ``model`` and the models inside it that has a
    different camelCase alias -> that alias."""
    out: dict[str, str] = {}
    seen: set[type[BaseModel]] = set()

    def walk(m: type[BaseModel]) -> None:
        seen.add(m)
        for name, f in m.model_fields.items():
            if f.alias and f.alias != name and _generated(f):
                out[name] = f.alias
            inner = _model_in(f.annotation)
            if inner is not None and inner not in seen:
                walk(inner)

    walk(model)
    if "workload" in {n for m in seen for n in m.model_fields}:
        out["scale_target_ref"] = "scaleTargetRef"  # a target in the resource's form
    return out


def _camel_written(model: type[BaseModel], document: object) -> bool:
    """Whether ``document`` spells the fields of ``model`` in camelCase rather than in
    snake_case (the most keys of either; snake_case, the first releases' spelling, when it
    has as many of both)."""
    names = _spelled_names(model)
    aliases = set(names.values())
    counts = [0, 0]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in names:
                    counts[0] += 1
                elif key in aliases:
                    counts[1] += 1
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(document)
    return counts[1] > counts[0]


def _respelled(text: str, names: dict[str, str]) -> str:
    """``text`` (a field path, ``scale_up.max_percent_per_period``) with each snake_case
    field name in camelCase."""
    return ".".join(names.get(part, part) for part in text.split("."))


def as_written(loc: Sequence[int | str], document: object) -> tuple[int | str, ...]:
    """``loc`` as the document wrote it: a target given in the resource's form
    (``namespace`` and ``scaleTargetRef``) has its ``workload`` errors at
    ``scaleTargetRef`` (and the workload's namespace at ``namespace``)."""
    out: list[int | str] = []
    current = document
    parts = list(loc)
    i = 0
    while i < len(parts):
        part = parts[i]
        if (
            part == "workload"
            and isinstance(current, dict)
            and "workload" not in current
            and any(k in current for k in ("scaleTargetRef", "scale_target_ref", "namespace"))
        ):
            if parts[i + 1 : i + 2] == ["namespace"]:
                return (*out, "namespace")
            key = next((k for k in ("scaleTargetRef", "scale_target_ref") if k in current), None)
            out.append(key or "scaleTargetRef")
            current = current.get(key) if key else None
            i += 1
            continue
        out.append(part)
        if isinstance(part, int) and isinstance(current, list) and 0 <= part < len(current):
            current = current[part]
        elif isinstance(part, str) and isinstance(current, dict):
            current = current.get(part)
        else:
            current = None
        i += 1
    return tuple(out)


#: Keys of a target that its shadow (a :class:`~scaler.config.policy.ScalingPolicy`) does not
#: take: it shares the first two with the target, and a shadow has no shadow.
_OF_THE_TARGET_ONLY = ("workload", "prometheus_matchers", "shadow")


def _unknown_field(
    model: type[BaseModel],
    loc: Sequence[int | str],
    camel: bool = True,
    shown: Sequence[int | str] | None = None,
) -> str:
    section = _section(model, loc[:-1])
    if section is None:
        return "unknown field"
    allowed = _field_names(section, camel)
    if camel and "workload" in allowed:  # the resource's form of a target
        at = allowed.index("workload")
        allowed[at : at + 1] = ["namespace", "scaleTargetRef", "workload"]
    name = str(loc[-1])
    where = field_path((shown if shown is not None else loc)[:-1])
    if loc[-2:-1] == ("shadow",) and _snake(name) in _OF_THE_TARGET_ONLY:
        why = (
            "only a target has a shadow"
            if name == "shadow"
            else "it decides on the target's workload and series"
        )
        return f"a shadow has no {name} of its own: {why} ({where} takes {', '.join(allowed)})"
    hpa = _hpa_hint(section, name, shown if shown is not None else loc, camel)
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = hpa or (f"; did you mean {close[0]}?" if close else "")
    where = "the top level" if where == "(top level)" else where
    return f"unknown field{hint} ({where} takes {', '.join(allowed)})"


def _spelled(model: type[BaseModel], camel: bool) -> dict[str, str]:
    """Each field's name -> its key as the file spells it (:func:`_field_names`)."""
    return dict(zip(model.model_fields, _field_names(model, camel), strict=True))


def _hpa_hint(section: type[BaseModel], name: str, loc: Sequence[int | str], camel: bool) -> str:
    """Where an HPA ``behavior`` field lives here, for a key written as an HPA writes it:
    ``behavior`` (:func:`behavior_hint`), and in a direction's rules ``policies``,
    ``selectPolicy`` and ``tolerance``; empty for any other key. ``loc`` is the key's path
    as written."""
    fields = _spelled(section, camel)
    if name == "behavior" and {"scale_up", "scale_down", "tolerance"} <= fields.keys():
        return f": {behavior_hint(section, field_path(loc[:-1]), camel)}"
    if "max_replicas_per_period" not in fields or len(loc) < 2:
        return ""
    if name == "policies":
        return (
            f": the HPA's policies list is {_steps(fields)} here, each period the larger "
            "change applying (as the HPA's selectPolicy Max)"
        )
    if name in ("selectPolicy", "select_policy"):
        replicas, percent = fields["max_replicas_per_period"], fields["max_percent_per_period"]
        return (
            f": the larger change of {replicas} and {percent} always applies here, as the "
            "HPA's selectPolicy Max (there is no Min or Disabled)"
        )
    if name == "tolerance":
        target = field_path(loc[:-2])
        target = "" if target == "(top level)" else f"{target}."
        tolerance = _spelled(section, camel).get("tolerance", "tolerance")
        return f": the tolerance is {target}{tolerance}.{loc[-2]} here (a 0-1 ratio)"
    return ""


def behavior_hint(section: type[BaseModel], at: str, camel: bool = True) -> str:
    """Where the parts of an HPA's ``behavior`` block live in ``section`` (a target's or a
    shadow's policy) at path ``at`` (``targets[0]``, ``spec``; ``(top level)``): its
    ``scaleUp`` and ``scaleDown`` are the section's own, one level up, their policies the
    step limits, their tolerance the section's ``tolerance``. Spelled as the file spells
    its keys (``camel``); the CRD refuses ``spec.behavior`` with it too
    (:mod:`scaler.config.crd`)."""
    fields = _spelled(section, camel)
    prefix = "" if at == "(top level)" else f"{at}."
    up, down, tol = fields["scale_up"], fields["scale_down"], fields["tolerance"]
    rules = _section(section, ("scale_down",))
    steps = _spelled(rules, camel) if rules is not None else {}
    window = steps.get("stabilization_window_seconds", "stabilizationWindowSeconds")
    return (
        f"the HPA's behavior.scaleUp and behavior.scaleDown are {prefix}{up} and "
        f"{prefix}{down} here, without a behavior block ({window} as the HPA's; its policies "
        f"as {_steps(steps)}; its tolerance as {prefix}{tol}.{up} and .{down})"
    )


def _steps(fields: dict[str, str]) -> str:
    """An HPA ``policies`` list in this project's words."""
    replicas = fields.get("max_replicas_per_period", "maxReplicasPerPeriod")
    percent = fields.get("max_percent_per_period", "maxPercentPerPeriod")
    period = fields.get("period_seconds", "periodSeconds")
    return f"{replicas} (a Pods policy's value), {percent} (a Percent policy's) and {period}"


#: A check's message about one of the fields it compares: ``field.path: value V: expected
#: ...``; the path is relative to the section the check was given (a model validator's, or a
#: mapping field's), or, from the check of a single value, to the section of that value.
_FIELD_MESSAGE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*): value ")


#: What :func:`_given_at` returns for a key the document leaves out, and for a path it cannot
#: follow (a part that is no mapping or list).
_LEFT_OUT, _NO_PATH = object(), object()


def _given_at(document: object, loc: Sequence[int | str]) -> object:
    """The value at ``loc`` of ``document`` as given (either spelling of each key):
    :data:`_LEFT_OUT` when a key on the way is not in it, :data:`_NO_PATH` when a part is no
    mapping or list."""
    current = document
    for part in as_written(loc, document):
        if isinstance(part, int) and isinstance(current, list) and 0 <= part < len(current):
            current = current[part]
        elif isinstance(part, str) and isinstance(current, dict):
            key = next((k for k in (part, _camel(part), _snake(part)) if k in current), None)
            if key is None:
                return _LEFT_OUT
            current = current[key]
        else:
            return _NO_PATH
    return current


def _left_out(document: object, loc: Sequence[int | str]) -> bool:
    """The field at ``loc`` is not in ``document`` (the data as given, in either spelling):
    its value is the default. False when the path cannot be followed (a part that is no
    mapping or list)."""
    return _given_at(document, loc) is _LEFT_OUT


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), name)


#: The bound of a check that a field is not below another of its section
#: (``expected a number >= min_replicas (12)``).
_SIBLING_BOUND = re.compile(r"expected a number >= ([A-Za-z_]+) \(([^)]*)\)")
#: A snake_case name in a message (``itl_p95``, ``target_seconds``).
_SNAKE_NAME = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def _spelled_path(
    path: Sequence[int | str], document: object, names: dict[str, str]
) -> tuple[int | str, ...]:
    """``path`` with each field the document leaves out in its spelling (``names``: snake_case
    -> camelCase for a camelCase file); the keys it wrote stay as written."""
    out: list[int | str] = []
    current = document
    for part in path:
        written = isinstance(current, dict) and part in current
        out.append(part if written or isinstance(part, int) else names.get(part, part))
        if isinstance(part, int) and isinstance(current, list) and 0 <= part < len(current):
            current = current[part]
        elif isinstance(current, dict):
            current = current.get(part)
        else:
            current = None
    return tuple(out)


def _document_order(path: Sequence[int | str], document: object) -> tuple[int, ...]:
    """Where ``path`` is in the document: per level the place of its key among the mapping's
    keys (in the order the file wrote them; a key it leaves out after them) or its list
    index, so errors sort as the file reads."""
    out: list[int] = []
    current = document
    for part in path:
        if isinstance(current, dict):
            keys = list(current)
            out.append(keys.index(part) if part in keys else len(keys))
            current = current.get(part)
        elif isinstance(current, list) and isinstance(part, int):
            out.append(part)
            current = current[part] if 0 <= part < len(current) else None
        else:
            break
    return tuple(out)


def _default_noted(message: str, document: object, loc: Sequence[int | str]) -> str:
    """``value V: expected ...`` as ``value V (the default): expected ...`` when the field at
    ``loc`` was left out of the document, and ``>= min_x (1)`` as ``>= min_x (1, the
    default)`` when the field it was compared with was: a check across fields compared a
    value the user never wrote (``max_replicas`` 10 below a given ``min_replicas``)."""
    if document is None or not message.startswith("value "):
        return message
    bound = _SIBLING_BOUND.search(message)
    if bound and _left_out(document, (*loc[:-1], bound.group(1))):
        noted = f"expected a number >= {bound.group(1)} ({bound.group(2)}, the default)"
        message = message[: bound.start()] + noted + message[bound.end() :]
    if not _left_out(document, loc):
        return message
    value, sep, rest = message.partition(": ")
    return f"{value} (the default){sep}{rest}"


def validation_lines(
    err: ValidationError, model: type[BaseModel], source: str, document: object = None
) -> list[str]:
    """One line per error of ``err`` (a validation of ``model``):
    ``source: field.path: value 'x': expected ...``.

    ``document`` (the data validated, optional): a value of a field it leaves out, which a
    check across fields compared, reads ``value 10 (the default): expected ...``.

    Checks across fields (model validators) read ``source: field.path: <what they check>``,
    or, when their message starts with a field of the section (``quantile: value 0.99:
    expected ...``), ``source: section.quantile: value 0.99: expected ...``; an unknown field
    reads ``source: path: unknown field; did you mean min_replicas? (targets[0] takes
    workload, ...)``, its value never quoted.
    """
    lines: list[str] = []
    orders: list[tuple[int, ...]] = []  # one per line: where the file has its field
    camel = _camel_written(model, document)
    names = _spelled_names(model) if camel else {}

    def written(path: Sequence[int | str]) -> str:
        shown = as_written(path, document)
        orders.append(_document_order(shown, document))
        return f"{source}: {field_path(_spelled_path(shown, document, names))}"

    for e in err.errors():
        loc = tuple(e["loc"])
        where = written(loc)
        kind = e["type"]
        value = e.get("input")
        if kind == "missing":
            lines.append(f"{where}: required field missing{_missing_hint(loc, document)}")
            continue
        if kind == "extra_forbidden":
            # named, never quoted: a key that is no field may hold anything (a password)
            shown = as_written(loc, document)
            lines.append(f"{where}: {_unknown_field(model, loc, camel, shown)}")
            continue
        field = _FIELD_MESSAGE.match(expectation(e)) if kind == "value_error" else None
        mapping = isinstance(value, dict | BaseModel)
        if kind in ("value_error", "assertion_error") and (mapping or field):
            # a check across fields: its message names the fields and values it compared,
            # relative to the mapping it was given, or to the section of the field it checks
            msg = expectation(e)
            if field:
                section = loc if mapping else loc[:-1]
                msg = msg.removeprefix(f"{field.group(1)}: ")
                path = (*section, *_respelled(field.group(1), names).split("."))
                orders.pop()
                where = written(path)
                msg = _default_noted(msg, document, path)
            if names:
                msg = _SIBLING_BOUND.sub(
                    lambda m: f"expected a number >= {names.get(m[1], m[1])} ({m[2]})", msg
                )
            lines.append(f"{where}: {msg}")
            continue
        if kind == "duplicate_target":  # names the entries itself
            lines.append(f"{where}: {e['msg']}")
            continue
        if loc[-1:] == ("[key]",):  # a key of a free mapping: pydantic's loc is (..., key, "[key]")
            orders.pop()
            where = written(loc[:-2])
            lines.append(f"{where}: key {_shown(value)}: {expectation(e)}")
            continue
        description = _description(model, loc)
        hint = percent_hint(description, value)
        expected = expectation(e)
        name = str(loc[-1]) if loc else ""
        if kind in _NOT_A_NUMBER and in_seconds(name):
            # a duration as text ("30s", "2m"): the number of seconds to write instead
            expected, hint = seconds_expectation(value), ""
        elif (
            kind in ("float_parsing", "float_type")
            and isinstance(value, str)
            and _WITH_UNIT.match(value)
        ):
            hint = unit_hint(name, description, value)
        if (
            kind == "too_short"
            and (e.get("ctx") or {}).get("min_length") == 1
            and name.endswith("s")
        ):
            expected = f"expected at least one {name.removesuffix('s')}"  # targets: a target
        message = _default_noted(f"value {_shown(value)}: {expected}{hint}", document, loc)
        if names:
            message = _SIBLING_BOUND.sub(
                lambda m: f"expected a number >= {names.get(m[1], m[1])} ({m[2]})", message
            )
        lines.append(f"{where}: {message}")
    if names:  # a camelCase file: the names in the messages spelled as it spells them
        lines = [_respelled_message(line, source, names) for line in lines]
    # in the file's order (pydantic lists a model's own checks after its fields' errors)
    return [line for _, line in sorted(zip(orders, lines, strict=True), key=lambda x: x[0])]


def _respelled_message(line: str, source: str, names: dict[str, str]) -> str:
    """``line``'s message (after its field path) with each snake_case field name in the
    camelCase spelling of the file (``while itl_p95 is enabled`` -> ``itlP95``)."""
    where, sep, message = line.removeprefix(f"{source}: ").partition(": ")
    spelled = _SNAKE_NAME.sub(lambda m: names.get(m[0], m[0]), message)
    return f"{source}: {where}{sep}{spelled}"


def _missing_hint(loc: Sequence[int | str], document: object) -> str:
    """What to write for a missing ``apiVersion`` of a scale target: its kind's
    (``; write apiVersion: apps/v1, the API of kind Deployment``), or where to find it for a
    kind of another API; ``""`` for another field."""
    if not loc or loc[-1] not in ("apiVersion", "api_version"):
        return ""
    kind = _given_at(document, (*loc[:-1], "kind"))
    if not isinstance(kind, str) or not kind:
        return ""
    known = KNOWN_API_VERSIONS.get(kind)
    if known is not None:
        return f"; write apiVersion: {known}, the API of kind {kind}"
    return f"; expected the group/version of kind {kind}'s API, as `kubectl api-resources` lists it"


def _description(model: type[BaseModel], loc: Sequence[int | str]) -> str | None:
    """The description of the field at ``loc`` (None outside the models)."""
    section = _section(model, loc[:-1]) if loc else None
    if section is None:
        return None
    field = next(
        (f for n, f in section.model_fields.items() if loc[-1] in (n, f.alias)),
        None,
    )
    return None if field is None else field.description


def describe_yaml_error(err: yaml.YAMLError) -> str:
    """A YAML error as ``at line L, column C: <problem> (<context> at line L2, column C2)``,
    1-based, without PyYAML's ``in "<unicode string>"`` and source excerpts."""
    if not isinstance(err, yaml.MarkedYAMLError):
        return ": " + str(err).split("\n", 1)[0]
    mark = err.problem_mark or err.context_mark
    problem = err.problem or err.context or "invalid YAML"
    where = f"at line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ": "
    context = ""
    if err.context and err.problem and err.context_mark is not None:
        at = err.context_mark
        context = f" ({err.context} at line {at.line + 1}, column {at.column + 1})"
    return f"{where}{problem}{context}"


def describe_document(data: object) -> str:
    """What a YAML document that is no mapping holds, for ``expected a mapping`` messages."""
    if data is None:
        return "the file is empty"
    # Never the value itself: a file handed over by mistake may be a token or a password.
    if isinstance(data, str):
        return f"the file holds a string of {len(data)} characters"
    if isinstance(data, bool):
        return "the file holds true or false"
    if isinstance(data, int | float):
        return "the file holds a number"
    return f"the file holds {_shown(data)}"
