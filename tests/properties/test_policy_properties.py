"""Property-based tests of the policy parser: any document gives a Policy or a PolicyError
whose message names the field; never another exception."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config.policy import Policy, PolicyError, parse_policy

VALID: dict[str, Any] = {
    "rate_window_seconds": 60,
    "targets": [
        {
            "workload": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "namespace": "llm",
                "name": "vllm",
            },
            "prometheus_matchers": {"namespace": "llm", "model_name": "m"},
            "min_replicas": 1,
            "max_replicas": 10,
            "signals": {
                "queue_depth": {"enabled": True, "target_per_replica": 10},
                "kv_cache_usage": {"target_ratio": 0.8},
                "ttft_p95": {"target_seconds": 2.0, "quantile": 0.95},
            },
            "tolerance": {"scale_up": 0.1, "scale_down": 0.1},
            "scale_up": {
                "stabilization_window_seconds": 0,
                "max_replicas_per_period": 4,
                "max_percent_per_period": 100,
                "period_seconds": 60,
            },
            "scale_down": {
                "stabilization_window_seconds": 300,
                "max_replicas_per_period": 1,
                "period_seconds": 60,
            },
            "model_load_timeout_seconds": 600,
        }
    ],
}


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(VALID)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _check_error(err: PolicyError, named: str | None = None) -> None:
    text = str(err)
    assert text.startswith("invalid policy\n")
    lines = text.splitlines()[1:]
    assert lines and all(line.strip().startswith("<policy>: ") for line in lines)
    if named is not None:
        assert named in text or repr(named) in text, (named, text)


@settings(max_examples=400, deadline=None)
@given(path=st.sampled_from(PATHS), value=json_values)
def test_any_field_value_gives_a_policy_or_an_error_naming_the_field(
    path: tuple[Any, ...], value: Any
) -> None:
    doc = copy.deepcopy(VALID)
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    try:
        policy = parse_policy(doc)
    except PolicyError as err:
        key = next((p for p in reversed(path) if isinstance(p, str)), "targets")
        _check_error(err, key)
        return
    assert isinstance(policy, Policy)
    t = policy.targets[0]
    assert 1 <= t.min_replicas <= t.max_replicas
    assert t.signals.enabled()


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(PATHS))
def test_a_missing_field_gives_a_policy_or_an_error_naming_it(path: tuple[Any, ...]) -> None:
    doc = copy.deepcopy(VALID)
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    try:
        parse_policy(doc)
    except PolicyError as err:
        _check_error(err)


@settings(max_examples=300, deadline=None)
@given(doc=json_values)
def test_any_document_gives_a_policy_or_a_policy_error(doc: Any) -> None:
    try:
        parse_policy(doc)
    except PolicyError as err:
        _check_error(err)


@settings(max_examples=200, deadline=None)
@given(extra=st.text(min_size=1, max_size=12).filter(lambda k: k not in VALID["targets"][0]))
def test_unknown_fields_are_named(extra: str) -> None:
    doc = copy.deepcopy(VALID)
    doc["targets"][0][extra] = 1
    try:
        parse_policy(doc)
    except PolicyError as err:
        _check_error(err, extra)
    else:
        raise AssertionError(f"unknown field {extra!r} accepted")
