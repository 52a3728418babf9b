"""The ``VLLMAutoscaler`` CustomResourceDefinition, generated from the policy's models.

One schema serves the resource and the policy file: the spec's OpenAPI v3 schema is
pydantic's JSON schema of :class:`~scaler.config.policy.TargetPolicy` (every field by its
camelCase name, with its type, bounds, enums, pattern and description), made structural
(references inlined, ``X | None`` as ``X``, JSON Schema's numeric ``exclusiveMinimum`` as
OpenAPI 3.0's flag), with ``workload`` replaced by the HPA's ``scaleTargetRef`` (the
namespace is the resource's own). What spans fields is said by CEL rules
(``x-kubernetes-validations``), each naming its field (``fieldPath``) and what was expected,
as the policy's own checks do: ``kubectl apply`` refuses a bad spec with the same words.

Defaults are the models' own, set where the API server's defaulting means what the model
means; not where writing a value is not the same as leaving it out (a step limit alone is the
whole limit, ``shortenWindowOnSteadyFall`` written while the capacity signal is off is
refused, the shadow's fields default to their own defaults but its model load time to the
active policy's, a LeaderWorkerSet's groups default to the kind's): there the controller
applies the model's default as it does for the file.

:func:`crd` is the whole object; ``scripts/render-manifests.py`` writes it to the chart's
``crds/`` and to ``deploy/base/``, and a test keeps both equal to it.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from pydantic import BaseModel

from scaler.config.policy import (
    KNOWN_API_VERSIONS,
    KNOWN_PLURALS,
    LEADER_WORKER_SET_GROUPS,
    CapacitySignal,
    ScaleDownRules,
    ScaleUpRules,
    ScalingPolicy,
    Signals,
    TargetPolicy,
    TtftSignal,
)
from scaler.config.policy_errors import behavior_hint
from scaler.config.resource import GROUP, KIND, LIST_KIND, PLURAL, SHORT_NAMES, SINGULAR, VERSION
from scaler.config.signal_specs import CapacityUnit, ItlSignal

__all__ = ["CAPACITY_STATUS_UNITS", "crd", "crd_name", "spec_schema", "status_schema"]

Schema = dict[str, Any]

#: Fields (camelCase, relative to a policy: the spec or its shadow) whose default the API
#: server does not fill in: written, they mean something else than left out.
_SET_MATTERS = frozenset(
    {
        "scaleUp.maxReplicasPerPeriod",
        "scaleUp.maxPercentPerPeriod",
        "scaleDown.maxReplicasPerPeriod",
        "scaleDown.maxPercentPerPeriod",
        "scaleDown.shortenWindowOnSteadyFall",
    }
)
#: Subtrees of the spec without any default filled in by the API server.
_NO_DEFAULTS_UNDER = ("shadow", "replicaGroups")
#: The step limits' description: their defaults depend on each other.
_STEP_DEFAULTS = {
    "scaleUp": (ScaleUpRules, "4 replicas or 100%"),
    "scaleDown": (ScaleDownRules, "1 replica"),
}


def crd_name() -> str:
    """``vllmautoscalers.autoscaling.vllm-scaler.io``."""
    return f"{PLURAL}.{GROUP}"


# --------------------------------------------------------------------------- conversion


def _resolve(node: Schema, defs: dict[str, Schema]) -> Schema:
    """``node`` with its ``$ref`` (or ``X | None``'s ``X``) inlined; the node's own
    description and default win over the referenced model's."""
    node = dict(node)
    if "anyOf" in node:
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"a union the CRD schema cannot say: {node}")
        if node.get("default") is None:
            node.pop("default", None)
        node = {**branches[0], **node}
    if "$ref" in node:
        target = defs[node.pop("$ref").rsplit("/", 1)[1]]
        node = {**target, **{k: v for k, v in node.items() if k in ("description", "default")}}
        if "description" not in node or node["description"] == target.get("description"):
            node["description"] = _first_sentence(str(target.get("description") or ""))
    return node


def _first_sentence(text: str) -> str:
    """A model's docstring as a description: its first paragraph, without reST roles."""
    first = text.strip().split("\n\n", 1)[0]
    first = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", first)
    return " ".join(first.replace("``", "").split())


def _structural(node: Schema, defs: dict[str, Schema], path: str) -> Schema:
    """One node of pydantic's JSON schema as a structural OpenAPI v3 schema."""
    node = _resolve(node, defs)
    out: Schema = {}
    kind = node.get("type")
    if kind is not None:
        out["type"] = kind
    if node.get("description"):
        out["description"] = node["description"]
    for key in ("enum", "pattern", "minLength", "maxLength", "minItems", "maxItems"):
        if key in node:
            out[key] = node[key]
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if bound in node:
            out[bound] = node[bound]
        if flag in node:  # JSON Schema's number, OpenAPI 3.0's flag beside the bound
            out[bound] = node[flag]
            out[flag] = True
    if kind == "integer" and out.get("maximum", 0) <= 2**31 - 1:
        out["format"] = "int32"
    if "properties" in node:
        out["properties"] = {
            name: _structural(sub, defs, f"{path}.{name}".lstrip("."))
            for name, sub in node["properties"].items()
        }
        if node.get("required"):
            out["required"] = list(node["required"])
    elif kind == "object":
        values = node.get("additionalProperties")
        if not isinstance(values, dict):
            patterns = node.get("patternProperties") or {}
            values = next(iter(patterns.values()), {"type": "string"})
        out["additionalProperties"] = _structural(values, defs, f"{path}.*")
    if "items" in node:
        out["items"] = _structural(node["items"], defs, f"{path}[]")
    _default(out, node, path)
    return out


def _default(out: Schema, node: Schema, path: str) -> None:
    """The model's default where the API server may fill it in (see the module doc)."""
    relative = path.removeprefix("shadow.")
    if path.split(".", 1)[0] in _NO_DEFAULTS_UNDER or relative in _SET_MATTERS:
        return
    if out.get("type") == "object" and "properties" in out:
        if not out.get("required"):
            out["default"] = {}  # each field's own default is filled in below it
        return
    default = node.get("default")
    if default is not None and not isinstance(default, dict | list):
        out["default"] = default


# --------------------------------------------------------------------------- CEL rules


def _has(path: str) -> str:
    """``has(self.a) && has(self.a.b)`` for ``a.b``."""
    parts = path.split(".")
    return " && ".join(f"has(self.{'.'.join(parts[: i + 1])})" for i in range(len(parts)))


def _get(path: str, default: object) -> str:
    """The value at ``path`` of ``self``, or ``default`` where it is left out (a shadow's
    fields have no defaults filled in)."""
    return f"({_has(path)} ? self.{path} : {_cel(default)})"


def _cel(value: object) -> str:
    """A CEL literal of the field's type: an integer field's default as an int, a number
    field's as a double (CEL compares neither with the other)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value)


def _rule(
    rule: str, message: str, field: str = "", *, expression: bool = False, reason: str = ""
) -> Schema:
    """One ``x-kubernetes-validations`` entry: ``field`` (``.maxReplicas``) is where the
    error is reported (the node itself when empty); ``reason`` its kind
    (``FieldValueRequired``: ``Required value: ...``; default: ``Invalid value: ...``)."""
    out: Schema = {"rule": rule}
    out["messageExpression" if expression else "message"] = message
    if field:
        out["fieldPath"] = field
    if reason:
        out["reason"] = reason
    return out


def _capacity_on(prefix: str = "") -> str:
    """Whether the capacity signal is on: asked for, else whenever TTFT is on."""
    ttft = _get(f"{prefix}signals.ttftP95.enabled", TtftSignal().enabled)
    written = f"{prefix}signals.capacity.enabled"
    return f"({_has(written)} ? self.{written} : {ttft})"


def _policy_rules() -> list[Schema]:
    """The checks of :class:`~scaler.config.policy.ScalingPolicy` across its fields, on a
    policy node (the spec, or its shadow)."""
    d = ScalingPolicy()
    signals = Signals()
    low, high = _get("minReplicas", d.min_replicas), _get("maxReplicas", d.max_replicas)
    some = " || ".join(
        [
            _get("signals.queueDepth.enabled", signals.queue_depth.enabled),
            _get("signals.kvCacheUsage.enabled", signals.kv_cache_usage.enabled),
            _get("signals.ttftP95.enabled", signals.ttft_p95.enabled),
            _get("signals.itlP95.enabled", signals.itl_p95.enabled),
            _capacity_on(),
        ]
    )
    shorten = "scaleDown.shortenWindowOnSteadyFall"
    return [
        _rule(f"{high} >= {low}", "expected a number >= minReplicas", ".maxReplicas"),
        _rule(
            some,
            "every signal off: expected at least one signal enabled (queueDepth, "
            "kvCacheUsage, ttftP95, itlP95, or capacity with ttftP95)",
            ".signals",
        ),
        _rule(
            f"!{_get('signals.itlP95.enabled', signals.itl_p95.enabled)} || "
            "has(self.signals.itlP95.targetSeconds)",
            "expected the model's ITL p95 target on its GPU, in seconds, while itlP95 is "
            "enabled (it has no default)",
            ".signals.itlP95.targetSeconds",
            reason="FieldValueRequired",
        ),
        _rule(
            f"!({_has('signals.capacity.enabled')} && self.signals.capacity.enabled) || "
            f"{_get('signals.ttftP95.enabled', True)}",
            "expected false or unset while ttftP95 is disabled: a replica's capacity is "
            "learned only while TTFT is within its target",
            ".signals.capacity.enabled",
        ),
        _rule(
            f"!({_has(shorten)} && self.{shorten}) || {_capacity_on()}",
            "expected false or unset while the capacity signal is off: the window follows "
            "the capacity signal's forecast of the demand",
            f".{shorten}",
        ),
    ]


def _capacity_rules() -> list[Schema]:
    """The checks of :class:`~scaler.config.policy.CapacitySignal` across its fields."""
    c = CapacitySignal()
    low = _get("minTokensPerSecond", c.min_tokens_per_second)
    high = _get("maxTokensPerSecond", c.max_tokens_per_second)
    return [
        _rule(f"{high} >= {low}", "expected a number >= minTokensPerSecond", ".maxTokensPerSecond"),
        _rule(
            "has(self.seedPromptTokensPerSecond) == has(self.seedGenerationTokensPerSecond)",
            "expected seedPromptTokensPerSecond and seedGenerationTokensPerSecond together: "
            "the seed is a replica's prompt and generated tokens per second at the TTFT "
            "target, both measured on your request mix (0 generated tokens per second only "
            "if it generates none)",
            ".seedGenerationTokensPerSecond",
        ),
    ]


def _target_rules() -> list[Schema]:
    """The checks of :class:`~scaler.config.policy.TargetPolicy` beyond its policy's."""
    groups = sorted(k for k in KNOWN_PLURALS if k == "LeaderWorkerSet")
    latency = [
        _shadow_quantile_rule("ttftP95", TtftSignal().enabled, TtftSignal().quantile, "TTFT"),
        _shadow_quantile_rule("itlP95", ItlSignal().enabled, ItlSignal().quantile, "ITL"),
    ]
    return [
        *latency,
        _rule(
            "!has(self.replicaGroups) || has(self.replicaGroups.groupLabel) || "
            f"self.scaleTargetRef.kind in {json.dumps(groups)}",
            "'expected the pod label that names each pod\\'s group for kind ' + "
            f"self.scaleTargetRef.kind + ' (only {', '.join(groups)} has a default)'",
            ".replicaGroups.groupLabel",
            expression=True,
            reason="FieldValueRequired",
        ),
    ]


def _shadow_quantile_rule(name: str, enabled: bool, quantile: float, short: str) -> Schema:
    """The shadow decides on the active policy's quantile of a latency signal: one query
    reads one quantile per target and signal."""
    active = _get(f"signals.{name}.quantile", quantile)
    theirs = _get(f"shadow.signals.{name}.quantile", quantile)
    on, shadow_on = (
        _get(f"signals.{name}.enabled", enabled),
        _get(f"shadow.signals.{name}.enabled", enabled),
    )
    return _rule(
        f"!has(self.shadow) || !{on} || !{shadow_on} || {theirs} == {active}",
        f"expected the active policy's quantile (signals.{name}.quantile, default "
        f"{quantile:g}): both decide on the same {short} reading",
        f".shadow.signals.{name}.quantile",
    )


def _reference_rules() -> list[Schema]:
    """The checks of the workload reference (:class:`~scaler.config.policy.WorkloadRef`)."""
    kinds = sorted(KNOWN_PLURALS)
    versions = "{" + ", ".join(f"'{k}': '{v}'" for k, v in sorted(KNOWN_API_VERSIONS.items())) + "}"
    return [
        _rule(
            "self.apiVersion.contains('/')",
            '"\'" + self.apiVersion + "\': expected group/version of a named API group '
            "(apps/v1, leaderworkerset.x-k8s.io/v1, ...): vllm-scaler does not scale kinds of "
            "Kubernetes' core group (v1)\"",
            ".apiVersion",
            expression=True,
        ),
        _rule(
            f"has(self.plural) || self.kind in {json.dumps(kinds)}",
            f'"\'" + self.kind + "\': expected one of {", ".join(kinds)}, or plural set to '
            "the resource name of another API's kind (for example inferencepools)\"",
            ".kind",
            expression=True,
        ),
        _rule(
            f"has(self.plural) || !(self.kind in {json.dumps(kinds)}) || "
            f"self.apiVersion == {versions}[self.kind]",
            f'"\'" + self.apiVersion + "\': expected " + {versions}[self.kind] + '
            "' for kind ' + self.kind",
            ".apiVersion",
            expression=True,
        ),
    ]


def _percent_rule() -> Schema:
    return _rule(
        "self == 0.0 || self >= 1.0",
        "expected 0 (off) or a percent >= 1 (a percent, not a 0-1 ratio: 0.5 as a ratio is 50)",
    )


def _ratio_rules(node: Schema) -> None:
    """A 0-1 ratio's upper bound as a rule that says a percent is no ratio."""
    bound = node.pop("maximum")
    strict = node.pop("exclusiveMaximum", False)
    op = "<" if strict else "<="
    node["x-kubernetes-validations"] = [
        _rule(
            f"self {op} {float(bound)!r}",
            f"expected a number {op} {bound:g} (a 0-1 ratio, not a percent: 70% is 0.7)",
        )
    ]


def _walk(node: Schema, visit: Any, path: str = "") -> None:
    """``visit(node, path)`` for ``node`` and each field below it, but a shadow's (a policy
    node of its own)."""
    visit(node, path)
    for name, sub in (node.get("properties") or {}).items():
        if name != "shadow":
            _walk(sub, visit, f"{path}.{name}".lstrip("."))


def _with_rules(policy: Schema) -> None:
    """The rules of a policy node (the spec or its shadow) and of the fields inside it."""
    policy.setdefault("x-kubernetes-validations", []).extend(_policy_rules())
    signals = policy["properties"]["signals"]["properties"]
    signals["capacity"]["x-kubernetes-validations"] = _capacity_rules()

    def visit(node: Schema, path: str) -> None:
        name = path.rsplit(".", 1)[-1]
        if name in ("maxPercentPerPeriod", "maxSurplusPercentPerPeriod"):
            node.setdefault("x-kubernetes-validations", []).append(_percent_rule())
        elif "0-1 ratio" in str(node.get("description")) and "maximum" in node:
            _ratio_rules(node)

    _walk(policy, visit)


def _step_descriptions(policy: Schema) -> None:
    """The step limits' defaults, which depend on each other, in their descriptions."""
    for direction, (_, whole) in _STEP_DEFAULTS.items():
        rules = policy["properties"][direction]["properties"]
        for name in ("maxReplicasPerPeriod", "maxPercentPerPeriod"):
            rules[name]["description"] += (
                f"; default (neither written): {whole} per period; one written alone is "
                "the whole limit (the other is off)"
            )


# --------------------------------------------------------------------------- the schemas


def _refuse_behavior(node: Schema, model: type[BaseModel], at: str) -> None:
    """An HPA's ``behavior`` block, written by habit, refused naming where its parts live
    (:func:`~scaler.config.policy_errors.behavior_hint`): declared for that alone, as any
    object, with a rule that it is absent. Undeclared, a client that validates refuses it as
    an unknown field without a word of where scaleDown lives, and one that does not (a
    GitOps sync, ``--validate=false``) has the server drop it: a spec applied whose
    windows and step limits were silently left at their defaults."""
    node["properties"]["behavior"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "Not a field: refused. The HPA's behavior.scaleUp and scaleDown are "
        "scaleUp and scaleDown here, one level up",
    }
    node["x-kubernetes-validations"].append(
        _rule(
            "!has(self.behavior)",
            behavior_hint(model, at),
            ".behavior",
            reason="FieldValueForbidden",
        )
    )


def spec_schema() -> Schema:
    """The spec's OpenAPI v3 schema: a target of the policy file without its namespace,
    ``scaleTargetRef`` for its workload, with the CEL rules across its fields."""
    raw = TargetPolicy.model_json_schema(by_alias=True)
    defs = raw.get("$defs", {})
    spec = _structural(raw, defs, "")
    properties = spec["properties"]
    workload = properties.pop("workload")
    ref_properties = {k: v for k, v in workload["properties"].items() if k != "namespace"}
    reference: Schema = {
        "type": "object",
        "description": "the scaled workload, as an HPA's scaleTargetRef names it (in the "
        "resource's namespace): any object with a scale subresource; plural for a kind the "
        "controller does not know",
        "properties": ref_properties,
        "required": [k for k in workload["required"] if k != "namespace"],
        "x-kubernetes-validations": _reference_rules(),
    }
    spec["properties"] = {"scaleTargetRef": reference, **properties}
    spec["required"] = ["scaleTargetRef"]
    spec["description"] = (
        "How the workload is scaled: a target of the policy file without its namespace "
        "(docs/policy.md), spelled the same"
    )
    spec.pop("default", None)
    # a matcher's value is never empty (label="" selects the series without the label)
    properties["prometheusMatchers"]["additionalProperties"]["minLength"] = 1
    groups = properties["replicaGroups"]
    groups["description"] += (
        f" A LeaderWorkerSet's default: groupLabel {LEADER_WORKER_SET_GROUPS.group_label}."
    )
    _with_rules(spec)
    _with_rules(properties["shadow"])
    _refuse_behavior(spec, TargetPolicy, "spec")
    _refuse_behavior(properties["shadow"], ScalingPolicy, "spec.shadow")
    _step_descriptions(spec)
    _step_descriptions(properties["shadow"])
    spec["x-kubernetes-validations"].extend(_target_rules())
    return spec


def _condition_schema() -> Schema:
    return {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string", "description": "AbleToScale, ScalingActive, ..."},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string", "description": "CamelCase, one word"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
        },
    }


#: The status's unit of a learned capacity, by the capacity signal's unit
#: (:class:`~scaler.config.signal_specs.CapacityUnit`): what one replica serves at the TTFT
#: target, per second.
CAPACITY_STATUS_UNITS = {u.value: u.rate_unit for u in CapacityUnit}


def status_schema() -> Schema:
    """The status the controller writes (:mod:`scaler.controller.status`)."""
    number = {"type": "number"}
    signal: Schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "queue_depth, kv_cache_usage, ..."},
            "value": {**number, "description": "the signal's value, in its unit"},
            "target": {**number, "description": "its target, in the same unit"},
            "unit": {"type": "string"},
            "status": {"type": "string", "description": "ok, or why it is not usable"},
            "desiredReplicas": {"type": "integer", "format": "int32"},
        },
    }
    return {
        "type": "object",
        "description": "What the controller observed and decided (written by the leader)",
        "properties": {
            "observedGeneration": {
                "type": "integer",
                "format": "int64",
                "description": "the metadata.generation of the spec the status is about",
            },
            "currentReplicas": {"type": "integer", "format": "int32"},
            "desiredReplicas": {"type": "integer", "format": "int32"},
            "lastScaleTime": {
                "type": "string",
                "format": "date-time",
                "description": "when the controller last changed the replicas",
            },
            "reason": {
                "type": "string",
                "description": "the last decision's reason (docs/decisions.md), or why the "
                "resource is not scaled",
            },
            "message": {"type": "string"},
            "drivingSignal": {**signal, "description": "the signal that asks for the most"},
            "signals": {"type": "array", "items": signal},
            "capacity": {
                "type": "object",
                "description": "the capacity signal's estimate of what one replica serves",
                "properties": {
                    "learned": {"type": "boolean"},
                    "perReplica": {
                        **number,
                        "description": "what one replica serves at the TTFT target, in unit",
                    },
                    "unit": {
                        "type": "string",
                        "enum": sorted(CAPACITY_STATUS_UNITS.values()),
                        "description": "seconds of replica work per second (the capacity "
                        "signal's unit work), or weighted tokens per second (weighted_tokens)",
                    },
                    "samples": {"type": "integer", "format": "int32"},
                },
            },
            "modelLoadSeconds": {
                **number,
                "description": "the model load time learned from the replicas' starts (median)",
            },
            "shadow": {
                "type": "object",
                "description": "the shadow policy's recommendation (never written)",
                "properties": {
                    "desiredReplicas": {"type": "integer", "format": "int32"},
                    "reason": {"type": "string"},
                },
            },
            "conditions": {
                "type": "array",
                "items": _condition_schema(),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
        },
    }


#: ``kubectl get vllmautoscalers`` reads like ``kubectl get hpa``.
PRINTER_COLUMNS: list[Schema] = [
    {"name": "Target", "type": "string", "jsonPath": ".spec.scaleTargetRef.name"},
    {"name": "Kind", "type": "string", "jsonPath": ".spec.scaleTargetRef.kind", "priority": 1},
    {"name": "Min", "type": "integer", "jsonPath": ".spec.minReplicas"},
    {"name": "Max", "type": "integer", "jsonPath": ".spec.maxReplicas"},
    {"name": "Current", "type": "integer", "jsonPath": ".status.currentReplicas"},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas"},
    {"name": "Reason", "type": "string", "jsonPath": ".status.reason"},
    {
        "name": "Signal",
        "type": "string",
        "jsonPath": ".status.drivingSignal.name",
        "priority": 1,
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def crd() -> Schema:
    """The CustomResourceDefinition (apiextensions.k8s.io/v1) of ``VLLMAutoscaler``."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": crd_name(),
            "labels": {"app.kubernetes.io/part-of": "vllm-scaler"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": LIST_KIND,
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(PRINTER_COLUMNS),
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "How vllm-scaler scales one workload: its policy "
                            "(spec) and what the controller decided (status)",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }
