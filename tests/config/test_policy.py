"""The policy file: defaults, selectors and errors that name file, field, value, expectation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scaler.config.policy import PolicyError, load_policy, parse_policy
from scaler.config.vocabulary import SignalName
from scaler.sources.promql import target_selector

WORKLOAD = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "llm", "name": "vllm"}


def test_defaults_and_selector() -> None:
    t = parse_policy({"targets": [{"workload": WORKLOAD}]}).targets[0]
    assert (t.min_replicas, t.max_replicas) == (1, 10)
    assert t.signals.enabled() == (
        SignalName.QUEUE_DEPTH,
        SignalName.KV_CACHE_USAGE,
        SignalName.TTFT_P95,
        SignalName.CAPACITY,  # on by default whenever TTFT is
    )
    assert t.scale_down.stabilization_window_seconds == 300
    # scale-up fires at 0.7 x 1.1 = 0.77 KV-cache usage, before vLLM runs out of free blocks
    assert t.signals.kv_cache_usage.target_ratio == 0.7
    assert (t.signals.queue_depth.target_per_replica, t.signals.ttft_p95.target_seconds) == (
        10.0,
        2.0,
    )
    assert target_selector(t) == 'namespace="llm",pod=~"vllm-[a-z0-9]+-[a-z0-9]+"'
    assert t.workload.resource == "deployments" and t.workload.group == "apps"


def test_statefulset_and_custom_matchers() -> None:
    sts = {**WORKLOAD, "kind": "StatefulSet", "name": "big"}
    t = parse_policy({"targets": [{"workload": sts}]}).targets[0]
    assert target_selector(t) == 'namespace="llm",pod=~"big-[0-9]+"'
    t = parse_policy(
        {"targets": [{"workload": WORKLOAD, "prometheus_matchers": {"job": 'a"b'}}]}
    ).targets[0]
    assert target_selector(t) == 'job="a\\"b"'


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        pytest.param({"min_replicas": 0}, "targets[0].min_replicas: value 0", id="min_replicas 0"),
        pytest.param(
            {"max_replicas": 2, "min_replicas": 3},
            "targets[0].max_replicas: value 2: expected a number >= min_replicas (3)",
            id="max below min",
        ),
        pytest.param(
            {"signals": {"kv_cache_usage": {"target_ratio": 80}}},
            "target_ratio: value 80",
            id="KV target as a percent",
        ),
        pytest.param(
            {"tolerance": {"scale_up": -0.1}},
            "tolerance.scale_up: value -0.1",
            id="negative tolerance",
        ),
        pytest.param(
            {"scale_down": {"stabilization_window_seconds": 7200, "max_replicas_per_period": 1}},
            "scale_down.stabilization_window_seconds: value 7200",
            id="window over an hour",
        ),
        pytest.param(
            {"scale_down": {"max_surplus_percent_per_period": 150}},
            "scale_down.max_surplus_percent_per_period: value 150: expected a number <= 100",
            id="surplus share over 100%",
        ),
        pytest.param(
            {"max_replica": 4},
            "targets[0].max_replica: unknown field; did you mean max_replicas?",
            id="unknown field",
        ),
        pytest.param(
            {
                "signals": {
                    n: {"enabled": False} for n in ("queue_depth", "kv_cache_usage", "ttft_p95")
                }
            },
            "targets[0].signals: value every signal off: expected at least one signal enabled",
            id="every signal off",
        ),
        pytest.param(
            {"signals": {"ttft_p95": {"enabled": False}, "capacity": {"enabled": True}}},
            "signals.capacity.enabled: value true: expected false or unset while ttft_p95 is "
            "disabled",
            id="capacity without TTFT",
        ),
        pytest.param(
            {"signals": {"capacity": {"target_utilization": 85}}},
            "signals.capacity.target_utilization: value 85: expected a number <= 1 (a 0-1 "
            "ratio, not a percent: 85% is 0.85)",
            id="utilization as a percent",
        ),
        pytest.param(
            {"signals": {"capacity": {"seed_generation_tokens_per_second": 300.0}}},
            "signals.capacity.seed_generation_tokens_per_second: value 300: expected "
            "seed_prompt_tokens_per_second too",
            id="generation seed alone",
        ),
        pytest.param(
            {"signals": {"capacity": {"seed_prompt_tokens_per_second": 5000.0}}},
            "signals.capacity.seed_prompt_tokens_per_second: value 5000: expected "
            "seed_generation_tokens_per_second too",
            id="prompt seed alone",
        ),
        pytest.param(
            {"shadow": {"shadow": {}}},
            "targets[0].shadow.shadow: a shadow has no shadow of its own: only "
            "a target has a shadow (targets[0].shadow takes min_replicas,",
            id="nested shadow",
        ),
        pytest.param(
            {"shadow": {"workload": WORKLOAD}},
            "targets[0].shadow.workload: a shadow has no workload of its own: "
            "it decides on the target's workload and series",
            id="workload in a shadow",
        ),
        pytest.param(
            {"signals": {"capacity": {"min_tokens_per_second": 5.0, "max_tokens_per_second": 1.0}}},
            "signals.capacity.max_tokens_per_second: value 1.0: expected a number >= "
            "min_tokens_per_second (5)",
            id="capacity bounds reversed",
        ),
        pytest.param(
            {"scale_up": {"max_percent_per_period": 0.5}},
            "targets[0].scale_up.max_percent_per_period: value 0.5: expected 0 (off) or a "
            "percent >= 1 (a percent, not a 0-1 ratio: 0.5 as a ratio is 50)",
            id="a ratio for a percent",
        ),
        pytest.param(
            {"max_replicas": 100000000000000000000000},
            "targets[0].max_replicas: value 100000000000000000000000: expected a number <= "
            "2147483647",
            id="replicas beyond int32",
        ),
        pytest.param(
            {"min_replicas": 2**31, "max_replicas": 2**31},
            "targets[0].min_replicas: value 2147483648: expected a number <= 2147483647",
            id="min replicas beyond int32",
        ),
        pytest.param(
            {"scale_up": {"max_replicas_per_period": 2**31}},
            "targets[0].scale_up.max_replicas_per_period: value 2147483648: expected a number "
            "<= 2147483647",
            id="step beyond int32",
        ),
        pytest.param(
            {"model_load_timeout_seconds": float("inf")},
            "targets[0].model_load_timeout_seconds: value inf: expected a finite number",
            id="infinite timeout",
        ),
        pytest.param(
            {"signals": {"ttft_p95": {"target_seconds": float("inf")}}},
            "targets[0].signals.ttft_p95.target_seconds: value inf: expected a finite number",
            id="infinite TTFT target",
        ),
        pytest.param(
            {"signals": {"capacity": {"max_tokens_per_second": float("inf")}}},
            "targets[0].signals.capacity.max_tokens_per_second: value inf: expected a finite "
            "number",
            id="infinite capacity bound",
        ),
        pytest.param(
            {"scale_down": {"max_surplus_percent_per_period": 0.25}},
            "targets[0].scale_down.max_surplus_percent_per_period: value 0.25: expected 0 (off) "
            "or a percent >= 1 (a percent, not a 0-1 ratio: 0.25 as a ratio is 25)",
            id="a ratio for the surplus percent",
        ),
        pytest.param(
            {"scale_down": {"max_percent_per_period": 0.5}},
            "targets[0].scale_down.max_percent_per_period: value 0.5: expected 0 (off) or a "
            "percent >= 1 (a percent, not a 0-1 ratio: 0.5 as a ratio is 50)",
            id="a ratio for the scale-down percent",
        ),
        pytest.param(
            {"prometheus_matchers": {"model_name": ""}},
            "targets[0].prometheus_matchers.model_name: value '': expected a label value (an "
            "empty matcher selects the series that do not have the label)",
            id="empty matcher",
        ),
        # a check across fields that compared a default says so
        pytest.param(
            {"min_replicas": 12},
            "targets[0].max_replicas: value 10 (the default): expected a number >= "
            "min_replicas (12)",
            id="max_replicas",
        ),
        pytest.param(
            {"shadow": {"min_replicas": 12}},
            "targets[0].shadow.max_replicas: value 10 (the default): expected a number >= "
            "min_replicas (12)",
            id="a shadow's max_replicas",
        ),
        pytest.param(
            {"signals": {"ttft_p95": {"quantile": 0.9}}, "shadow": {}},
            "targets[0].shadow.signals.ttft_p95.quantile: value 0.95 (the default): expected "
            "the active policy's quantile (0.9): both decide on the same TTFT reading",
            id="a shadow's TTFT quantile",
        ),
        pytest.param(
            {"signals": {"capacity": {"max_tokens_per_second": 0.5}}},
            "targets[0].signals.capacity.max_tokens_per_second: value 0.5: expected a number "
            ">= min_tokens_per_second (1, the default)",
            id="below a default bound",
        ),
    ],
)
def test_invalid_fields_are_named(target: dict[str, object], expected: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy({"targets": [{"workload": WORKLOAD, **target}]}, source="p.yaml")
    assert expected in str(err.value)
    assert "p.yaml: targets[0]" in str(err.value)


def test_unknown_kind_needs_a_plural() -> None:
    with pytest.raises(PolicyError, match="or 'plural' set to the resource name"):
        parse_policy({"targets": [{"workload": {**WORKLOAD, "kind": "InferencePool"}}]})
    t = parse_policy(
        {"targets": [{"workload": {**WORKLOAD, "kind": "InferencePool", "plural": "pools"}}]}
    ).targets[0]
    assert t.workload.resource == "pools"


def test_duplicate_targets_are_refused() -> None:
    with pytest.raises(PolicyError, match="listed twice"):
        parse_policy({"targets": [{"workload": WORKLOAD}, {"workload": WORKLOAD}]})


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets: [\n")
    with pytest.raises(PolicyError, match="not valid YAML"):
        load_policy(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n")
    with pytest.raises(PolicyError) as err:
        load_policy(listy)
    assert str(err.value) == f"{listy}: the file holds a list; expected a mapping with 'targets'"


def test_shipped_demo_policy_is_valid() -> None:
    path = Path(__file__).resolve().parents[2] / "scaler" / "examples" / "demo-policy.yaml"
    assert load_policy(path).targets[0].key == "llm/Deployment/vllm"


def _target(**extra: object) -> dict[str, object]:
    workload = {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "llm", "name": "v"}
    return {"targets": [{"workload": workload, **extra}]}


def test_a_partial_scaling_block_keeps_the_other_defaults() -> None:
    t = parse_policy(
        _target(scale_down={"stabilization_window_seconds": 600}, scale_up={"period_seconds": 30})
    ).targets[0]
    assert (t.scale_down.stabilization_window_seconds, t.scale_down.max_replicas_per_period) == (
        600,
        1,
    )
    assert t.scale_down.period_seconds == 60
    assert (t.scale_up.stabilization_window_seconds, t.scale_up.period_seconds) == (0, 30)
    assert (t.scale_up.max_replicas_per_period, t.scale_up.max_percent_per_period) == (4, 100)


def test_one_step_limit_given_means_exactly_that_limit() -> None:
    # as an HPA's policies list: setting one limit does not keep the other's default
    t = parse_policy(_target(scale_up={"max_replicas_per_period": 2})).targets[0]
    assert (t.scale_up.max_replicas_per_period, t.scale_up.max_percent_per_period) == (2, 0)
    t = parse_policy(_target(scale_up={"max_percent_per_period": 50})).targets[0]
    assert (t.scale_up.max_replicas_per_period, t.scale_up.max_percent_per_period) == (1, 50)


def test_the_capacity_scale_down_rules_default_on_their_own() -> None:
    # a limit of the capacity signal, not one of the HPA pair: setting those keeps it at 25
    t = parse_policy(_target(scale_down={"max_replicas_per_period": 2})).targets[0]
    assert t.scale_down.max_surplus_percent_per_period == 25
    t = parse_policy(_target(scale_down={"max_surplus_percent_per_period": 0})).targets[0]
    assert (t.scale_down.max_replicas_per_period, t.scale_down.max_surplus_percent_per_period) == (
        1,
        0,
    )
    # likewise the window's shortening on a steady fall: on unless switched off
    assert t.scale_down.shorten_window_on_steady_fall is True
    off = {"shorten_window_on_steady_fall": False}
    t = parse_policy(_target(scale_down=off)).targets[0]
    assert (t.scale_down.shorten_window_on_steady_fall, t.scale_down.max_replicas_per_period) == (
        False,
        1,
    )


@pytest.mark.parametrize(
    ("signals", "field"),
    [
        pytest.param(
            {"queue_depth": {"target_per_replica": True}}, "target_per_replica", id="true as 1"
        ),
        pytest.param({"queue_depth": {"enabled": "yes"}}, "enabled", id="'yes' as true"),
        pytest.param(
            {"kv_cache_usage": {"target_ratio": "0.8"}}, "target_ratio", id="'0.8' as 0.8"
        ),
    ],
)
def test_wrong_types_are_not_coerced(signals: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError, match=field):
        parse_policy(_target(signals=signals), source="p.yaml")


def test_a_missing_field_and_a_percent_for_a_ratio_say_so() -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy({"targets": [{"workload": {"kind": "Deployment"}}]}, source="p.yaml")
    assert "p.yaml: targets[0].workload.apiVersion: required field missing" in str(err.value)
    with pytest.raises(PolicyError) as err:
        parse_policy(_target(signals={"kv_cache_usage": {"target_ratio": 80}}), source="p.yaml")
    assert "(a 0-1 ratio, not a percent: 80% is 0.8)" in str(err.value)


def _message(tmp_path: Path, text: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    return str(err.value).replace(str(path), "p.yaml")


DEPLOYMENT = "{apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    min_replicas: 9\n    max_replicas: 8\n",
            "invalid policy\n  p.yaml: targets[0].max_replicas: value 8: expected a number >= "
            "min_replicas (9)",
            id="across-fields",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n  - workload: {DEPLOYMENT}\n",
            "invalid policy\n  p.yaml: targets[1].workload: target llm/Deployment/vllm is listed "
            "twice (targets[0] and targets[1]); expected each workload once",
            id="duplicate-target",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    min_replica: 2\n",
            "invalid policy\n  p.yaml: targets[0].min_replica: unknown field; did you "
            "mean min_replicas? (targets[0] takes min_replicas, max_replicas, signals, tolerance, "
            "scale_up, scale_down, model_load_timeout_seconds, workload, prometheus_matchers, "
            "shadow, replica_groups)",
            id="unknown-field",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    signals: {{ttft_p99: {{}}}}\n",
            "invalid policy\n  p.yaml: targets[0].signals.ttft_p99: unknown "
            "field; did you mean ttft_p95? (targets[0].signals takes queue_depth, "
            "kv_cache_usage, ttft_p95, itl_p95, capacity)",
            id="unknown-section",
        ),
        pytest.param(
            f"rate_window: 30\ntargets:\n  - workload: {DEPLOYMENT}\n",
            "invalid policy\n  p.yaml: rate_window: unknown field; did you mean "
            "rate_window_seconds? (the top level takes rate_window_seconds, replica_labels, "
            "targets)",
            id="unknown-top-level",
        ),
        pytest.param(
            "targets:\n  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, "
            "name: vllm, x: 1}\n",
            "invalid policy\n  p.yaml: targets[0].workload.x: unknown field "
            "(targets[0].workload takes apiVersion, kind, namespace, name, plural)",
            id="unknown-nothing-close",
        ),
        pytest.param(
            f"password: hunter2SECRET\ntargets:\n  - workload: {DEPLOYMENT}\n"
            "    extra_key: exSECRET\n",
            # in the file's order: the top-level key first, as it is written first
            "invalid policy\n  p.yaml: "
            "password: unknown field (the top level takes rate_window_seconds, replica_labels, "
            "targets)\n  p.yaml: targets[0].extra_key: unknown field (targets[0] takes "
            "min_replicas, max_replicas, signals, tolerance, scale_up, scale_down, "
            "model_load_timeout_seconds, workload, prometheus_matchers, shadow, "
            "replica_groups)",
            id="unknown-field-value-never-quoted",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    tolerance: 3\n",
            "invalid policy\n  p.yaml: targets[0].tolerance: value 3: expected a mapping",
            id="scalar-for-a-section",
        ),
        pytest.param(
            "targets:\n  - workload: [\n  x: 1\n",
            "p.yaml: not valid YAML at line 4, column 1: expected ',' or ']', but got "
            "'<stream end>' (while parsing a flow sequence at line 2, column 15)",
            id="yaml-syntax",
        ),
        pytest.param(
            "targets:\n  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: a, "
            "name: b}\n    max_replicas: 4\n    min_replicas: 1\n    max_replicas: 40\n",
            "p.yaml: not valid YAML at line 5, column 5: duplicate key 'max_replicas' (first "
            "given at line 3); expected each key once in a mapping",
            id="duplicate-key",
        ),
        pytest.param(
            "targets: []\nrate_window_seconds: 30\ntargets: []\n",
            "p.yaml: not valid YAML at line 3, column 1: duplicate key 'targets' (first "
            "given at line 1); expected each key once in a mapping",
            id="duplicate-top-level-key",
        ),
        pytest.param(
            "", "p.yaml: the file is empty; expected a mapping with 'targets'", id="empty"
        ),
        pytest.param(
            "supersecrettoken987\n",
            "p.yaml: the file holds a string of 19 characters; expected a mapping with 'targets'",
            id="scalar",
        ),
    ],
)
def test_policy_errors_name_file_field_value_and_expectation(
    tmp_path: Path, text: str, message: str
) -> None:
    assert _message(tmp_path, text) == message


def test_a_shadow_is_a_complete_second_policy_of_the_same_workload() -> None:
    """Fields the shadow does not set take their defaults (not the active policy's values); it
    scales the same workload, read through the same series."""
    policy = parse_policy(
        {
            "targets": [
                {
                    "workload": WORKLOAD,
                    "max_replicas": 20,
                    "prometheus_matchers": {"namespace": "llm", "model_name": "m"},
                    "signals": {"queue_depth": {"enabled": False}},
                    "shadow": {"signals": {"capacity": {"enabled": True}}},
                }
            ]
        }
    )
    t = policy.targets[0]
    shadow = t.shadow_target()
    assert shadow is not None
    assert shadow.workload == t.workload and shadow.prometheus_matchers == t.prometheus_matchers
    assert shadow.max_replicas == 10 and shadow.shadow is None
    assert shadow.signals.enabled() == ("queue_depth", "kv_cache_usage", "ttft_p95", "capacity")
    assert t.signals.enabled() == ("kv_cache_usage", "ttft_p95", "capacity")
    # the source reads what either decides on (capacity needs no query of its own)
    assert t.reading_target().signals.queried() == shadow.signals.queried()
    assert t.reading_target().signals.queue_depth == shadow.signals.queue_depth
    plain = parse_policy({"targets": [{"workload": WORKLOAD}]}).targets[0]
    assert plain.shadow_target() is None and plain.reading_target() is plain


@pytest.mark.parametrize(
    ("signals", "off"),
    [
        pytest.param(
            {"capacity": {"enabled": False}}, "signals.capacity.enabled is false", id="off"
        ),
        pytest.param(
            {"ttft_p95": {"enabled": False}},
            "signals.capacity is off with signals.ttft_p95",
            id="off with ttft",
        ),
    ],
)
def test_shortening_the_window_needs_the_capacity_signal(signals: dict[str, Any], off: str) -> None:
    down = {"shorten_window_on_steady_fall": True}
    with pytest.raises(PolicyError) as err:
        parse_policy(
            {"targets": [{"workload": WORKLOAD, "signals": signals, "scale_down": down}]},
            source="p.yaml",
        )
    assert str(err.value).splitlines()[1:] == [
        "  p.yaml: targets[0].scale_down.shorten_window_on_steady_fall: value true: expected "
        f"false or unset while {off}: the window follows the capacity signal's forecast of "
        "the demand"
    ]
    # unset (the default) or false: accepted; with capacity on, true is accepted
    for accepted in (
        {"signals": signals},
        {"signals": signals, "scale_down": {"shorten_window_on_steady_fall": False}},
        {"scale_down": down},
    ):
        assert parse_policy({"targets": [{"workload": WORKLOAD, **accepted}]}).targets


def test_a_shadow_takes_the_active_model_load_time_unless_it_sets_its_own() -> None:
    """The model load time is the workload's: a shadow that does not set it (here one that
    turns capacity off) assumes the active policy's, not the field's 120 s default."""

    def shadow_load(shadow: dict[str, Any]) -> float:
        target = {
            "workload": WORKLOAD,
            "signals": {"capacity": {"model_load_seconds": 20}},
            "shadow": shadow,
        }
        found = parse_policy({"targets": [target]}).targets[0].shadow_target()
        assert found is not None
        return found.signals.capacity.model_load_seconds

    assert shadow_load({"signals": {"capacity": {"enabled": False}}}) == 20.0
    assert shadow_load({}) == 20.0
    assert shadow_load({"signals": {"capacity": {"model_load_seconds": 45}}}) == 45.0
    # set to the default explicitly: the shadow's own, 120 s
    assert shadow_load({"signals": {"capacity": {"model_load_seconds": 120}}}) == 120.0


def test_a_shadow_reads_the_active_ttft_quantile() -> None:
    """One TTFT query per target: a shadow on another quantile is refused with both values."""
    with pytest.raises(
        PolicyError,
        match=r"targets\[0\]\.shadow\.signals\.ttft_p95\.quantile: value 0\.99: expected "
        r"the active policy's quantile \(0\.95\)",
    ):
        parse_policy(
            {
                "targets": [
                    {"workload": WORKLOAD, "shadow": {"signals": {"ttft_p95": {"quantile": 0.99}}}}
                ]
            }
        )


def test_every_error_of_the_file_in_one_pass(tmp_path: Path) -> None:
    # field errors, checks across fields (of a target and of its shadow) and a duplicate
    # target, all reported at once rather than one round after another
    text = (
        f"targets:\n  - workload: {DEPLOYMENT}\n    min_replicas: 10\n    max_replicas: 2\n"
        "    replcia: 3\n    shadow: {min_replicas: 5, max_replicas: 3}\n"
        f"  - workload: {DEPLOYMENT}\n"
    )
    lines = _message(tmp_path, text).splitlines()[1:]
    # in the file's order, a check across fields at the field it names
    assert [line.split(": ")[1] for line in lines] == [
        "targets[0].max_replicas",
        "targets[0].replcia",
        "targets[0].shadow.max_replicas",
        "targets[1].workload",
    ]
    assert lines[2].endswith("value 3: expected a number >= min_replicas (5)")
    assert "(targets[0] and targets[1])" in lines[3]


def test_capacity_and_shadow_checks_across_fields_beside_their_field_errors(
    tmp_path: Path,
) -> None:
    """A check across fields of the capacity signal or a shadow is reported in the same pass
    as the section's field errors whenever the fields it compares are valid."""
    workload = "{apiVersion: apps/v1, kind: Deployment, namespace: llm, name: %s}"
    text = (
        f"targets:\n  - workload: {workload % 'a'}\n"
        "    signals:\n      ttft_p95: {enabled: false}\n"
        "      capacity: {enabled: true, target_utilization: 85, "
        "seed_prompt_tokens_per_second: 5000, min_tokens_per_second: 5, "
        "max_tokens_per_second: 1}\n"
        f"  - workload: {workload % 'b'}\n"
        "    shadow: {max_replicas: 0, signals: {ttft_p95: {quantile: 0.99}}}\n"
        f"  - workload: {workload % 'c'}\n"
        "    shadow: {min_replicas: 0, signals: {queue_depth: {enabled: false}, "
        "kv_cache_usage: {enabled: false}, ttft_p95: {enabled: false}}}\n"
        # a shadow TTFT block that is itself invalid is not compared with the active one
        f"  - workload: {workload % 'd'}\n"
        "    signals: {ttft_p95: {quantile: 0.9}}\n    shadow: {signals: {ttft_p95: 3}}\n"
    )
    capacity = "p.yaml: targets[0].signals.capacity"
    assert _message(tmp_path, text).splitlines()[1:] == [
        f"  {capacity}.enabled: value true: expected false or unset while ttft_p95 is "
        "disabled: a replica's capacity is learned only while TTFT is within its target",
        f"  {capacity}.target_utilization: value 85: expected a number <= 1 (a 0-1 ratio, "
        "not a percent: 85% is 0.85)",
        f"  {capacity}.seed_prompt_tokens_per_second: value 5000: expected "
        "seed_generation_tokens_per_second too: the seed is a replica's prompt and generated "
        "tokens per second at the TTFT target, both measured on your request mix (0 generated "
        "tokens per second only if it generates none)",
        f"  {capacity}.max_tokens_per_second: value 1: expected a number >= "
        "min_tokens_per_second (5)",
        "  p.yaml: targets[1].shadow.max_replicas: value 0: expected a number >= 1",
        "  p.yaml: targets[1].shadow.signals.ttft_p95.quantile: value 0.99: expected the active "
        "policy's quantile (0.95): both decide on the same TTFT reading",
        "  p.yaml: targets[2].shadow.min_replicas: value 0: expected a number >= 1",
        "  p.yaml: targets[2].shadow.signals: value every signal off: expected at least one "
        "signal enabled (queue_depth, kv_cache_usage, ttft_p95, itl_p95, or capacity with "
        "ttft_p95)",
        "  p.yaml: targets[3].shadow.signals.ttft_p95: value 3: expected a mapping",
    ]


def test_capacity_checks_across_fields_see_the_defaults() -> None:
    """The checks across fields see the defaults of the fields not given."""
    with pytest.raises(PolicyError) as err:
        parse_policy(_target(signals={"capacity": {"min_tokens_per_second": 2e7}}), source="p.yaml")
    assert str(err.value).splitlines()[1:] == [
        "  p.yaml: targets[0].signals.capacity.max_tokens_per_second: value 10000000.0 "
        "(the default): expected a number >= min_tokens_per_second (2e+07)"
    ]
    both = {"seed_prompt_tokens_per_second": 5000.0, "seed_generation_tokens_per_second": 0.0}
    seeded = parse_policy(_target(signals={"capacity": both})).targets[0].signals.capacity
    # seconds of work: 5000 prompt tokens/s at the default cost of a computed prompt token
    assert seeded.seed_tokens_per_second == 5000.0 * seeded.cost.prefill_seconds_per_token


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "targets: []\n",
            "invalid policy\n  p.yaml: targets: value [] (an empty list): expected at least one "
            "target",
            id="no-targets",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    signals: {{ttft_p95: {{quantile: 95}}}}\n",
            "invalid policy\n  p.yaml: targets[0].signals.ttft_p95.quantile: value 95: expected "
            "a number < 1 (a 0-1 ratio, not a percent: 95% is 0.95)",
            id="quantile-as-a-percent",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    tolerance: {{scale_up: 10}}\n",
            "invalid policy\n  p.yaml: targets[0].tolerance.scale_up: value 10: expected a "
            "number < 1 (a 0-1 ratio, not a percent: 10% is 0.1)",
            id="tolerance-as-a-percent",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    tolerance: {{scale_up: 10%}}\n",
            "invalid policy\n  p.yaml: targets[0].tolerance.scale_up: value '10%': expected a "
            "number (a 0-1 ratio, not a percent: 10% is 0.1)",
            id="tolerance-with-a-percent-sign",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    tolerance: {{scale_up: 1.5}}\n",
            "invalid policy\n  p.yaml: targets[0].tolerance.scale_up: value 1.5: expected a "
            "number < 1 (a 0-1 ratio: the band above a value/target ratio of 1, not the ratio "
            "itself: to scale up above 1.5 times the target, 0.5)",
            id="tolerance-as-the-ratio",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    signals: {{ttft_p95: {{quantile: 1.5}}}}\n",
            "invalid policy\n  p.yaml: targets[0].signals.ttft_p95.quantile: value 1.5: expected "
            "a number < 1 (a 0-1 ratio)",
            id="quantile-above-1-is-no-percent",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    tolerance: {{scale_down: 2}}\n",
            "invalid policy\n  p.yaml: targets[0].tolerance.scale_down: value 2: expected a "
            "number < 1 (a 0-1 ratio)",
            id="tolerance-of-2-is-no-percent",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n"
            "    signals: {queue_depth: {target_per_replica: 5req}}\n",
            "invalid policy\n  p.yaml: targets[0].signals.queue_depth.target_per_replica: value "
            "'5req': expected a number (a plain number: waiting requests per replica)",
            id="number-with-a-unit-not-in-the-name",
        ),
        pytest.param(
            "targets:\n  - workload: {apiVersion: apps/v1, kind: deployment, namespace: llm, "
            "name: vllm}\n",
            "invalid policy\n  p.yaml: targets[0].workload.kind: value 'deployment': expected one "
            "of Deployment, LeaderWorkerSet, ReplicaSet, Rollout, StatefulSet; did you mean "
            "Deployment? (a kind of another API also needs 'plural', its resource name)",
            id="kind-in-lower-case",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n    min_replicas: true\n",
            "invalid policy\n  p.yaml: targets[0].min_replicas: value true: expected a whole "
            "number",
            id="yaml-boolean",
        ),
        pytest.param(
            f"targets:\n  - workload: {DEPLOYMENT}\n"
            "    signals: {ttft_p95: {target_seconds: 2000ms}}\n",
            "invalid policy\n  p.yaml: targets[0].signals.ttft_p95.target_seconds: value "
            "'2000ms': expected a number of seconds; write 2",
            id="number-with-a-unit",
        ),
        pytest.param(
            "targets:\n  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, "
            "name: Vllm_x}\n",
            "invalid policy\n  p.yaml: targets[0].workload.name: value 'Vllm_x': expected a "
            "Kubernetes name: lowercase letters, digits, '-' and '.', starting and ending with a "
            "letter or digit",
            id="name-in-words",
        ),
        pytest.param(
            "targets:\n  - workload: {apiVersion: apps/v2, kind: Deployment, namespace: llm, "
            "name: vllm}\n",
            "invalid policy\n  p.yaml: targets[0].workload.apiVersion: value 'apps/v2': expected "
            "apps/v1 for kind Deployment",
            id="wrong-api-version",
        ),
        pytest.param(
            "targets:\n  - workload: {apiVersion: apps/v1, kind: Deploymnet, namespace: llm, "
            "name: vllm}\n",
            "invalid policy\n  p.yaml: targets[0].workload.kind: value 'Deploymnet': expected one "
            "of Deployment, LeaderWorkerSet, ReplicaSet, Rollout, StatefulSet; did you mean "
            "Deployment? (a kind of another API also needs 'plural', its resource name)",
            id="kind-typo",
        ),
    ],
)
def test_value_wording(tmp_path: Path, text: str, message: str) -> None:
    assert _message(tmp_path, text) == message


def test_a_yaml_1_2_float_is_a_number(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(f"targets:\n  - workload: {DEPLOYMENT}\n    model_load_timeout_seconds: 1e3\n")
    assert load_policy(path).targets[0].model_load_timeout_seconds == 1e3


def test_a_missing_policy_file_names_the_option_and_variable(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy(tmp_path / "policy.yaml")
    assert str(err.value) == (
        f"{tmp_path / 'policy.yaml'}: cannot read policy file: No such file or directory; "
        "expected a readable file given as --policy FILE (VLLM_SCALER_POLICY_FILE)"
    )


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(
            {"rate_window_seconds": 1e12},
            "rate_window_seconds: value 1000000000000.0: expected a number <= 86400",
            id="rate window",
        ),
        pytest.param(
            {"targets": [{"model_load_timeout_seconds": 1e15}]},
            "targets[0].model_load_timeout_seconds: value 1000000000000000.0: expected a number "
            "<= 86400",
            id="model load timeout",
        ),
        pytest.param(
            {"targets": [{"shadow": {"model_load_timeout_seconds": 86401}}]},
            "targets[0].shadow.model_load_timeout_seconds: value 86401: expected a number <= 86400",
            id="shadow's model load timeout",
        ),
        pytest.param(
            {"targets": [{"signals": {"ttft_p95": {"target_seconds": 1e6}}}]},
            "targets[0].signals.ttft_p95.target_seconds: value 1000000.0: expected a number "
            "<= 3600",
            id="TTFT target",
        ),
        pytest.param(
            {"targets": [{"signals": {"queue_depth": {"target_per_replica": 1e9}}}]},
            "targets[0].signals.queue_depth.target_per_replica: value 1000000000.0: expected a "
            "number <= 10000",
            id="queue depth target",
        ),
        *(
            pytest.param(
                {"targets": [{"signals": {"capacity": {field: 1e12}}}]},
                f"targets[0].signals.capacity.{field}: value 1000000000000.0: expected a number "
                "<= 1e+09",
                id=field,
            )
            for field in (
                "seed_prompt_tokens_per_second",
                "seed_generation_tokens_per_second",
                "min_tokens_per_second",
                "max_tokens_per_second",
            )
        ),
    ],
)
def test_every_number_of_a_policy_has_an_upper_bound(
    document: dict[str, object], expected: str
) -> None:
    """A value far beyond any real setting is refused by the policy check, not by the
    controller later (Prometheus refuses a rate window of 1e12 s as out of range)."""
    targets = document.get("targets", [{}])
    assert isinstance(targets, list)
    full = {**document, "targets": [{"workload": WORKLOAD, **t} for t in targets]}
    with pytest.raises(PolicyError) as err:
        parse_policy(full, source="p.yaml")
    assert f"p.yaml: {expected}" in str(err.value)


def test_the_upper_bounds_themselves_are_accepted() -> None:
    policy = parse_policy(
        {
            "rate_window_seconds": 86400,
            "targets": [
                {
                    "workload": WORKLOAD,
                    "model_load_timeout_seconds": 86400,
                    "signals": {
                        "ttft_p95": {"target_seconds": 3600},
                        "queue_depth": {"target_per_replica": 10000},
                        "capacity": {"max_tokens_per_second": 1e9},
                    },
                }
            ],
        }
    )
    assert policy.rate_window_seconds == 86400
    assert policy.targets[0].model_load_timeout_seconds == 86400


def test_a_kind_typo_and_both_matcher_errors_beside_the_other_field_errors(
    tmp_path: Path,
) -> None:
    """One pass lists every error: the kind typo beside an invalid namespace, an invalid
    label name beside an empty matcher value, and a wrong apiVersion beside an invalid name;
    a label name is named as the key of its mapping."""
    text = (
        "targets:\n"
        "  - workload: {apiVersion: apps/v1, kind: Deploymnet, namespace: LLM_bad, name: vllm}\n"
        '    prometheus_matchers: {"bad label": x, pod: ""}\n'
        "  - workload: {apiVersion: apps/v2, kind: Deployment, namespace: llm, name: Bad_Name}\n"
    )
    lines = _message(tmp_path, text).splitlines()[1:]
    assert lines == [  # in the file's order: kind is written before namespace
        "  p.yaml: targets[0].workload.kind: value 'Deploymnet': expected one of Deployment, "
        "LeaderWorkerSet, ReplicaSet, Rollout, StatefulSet; did you mean Deployment? (a kind of "
        "another API also needs 'plural', its resource name)",
        "  p.yaml: targets[0].workload.namespace: value 'LLM_bad': expected a Kubernetes name: "
        "lowercase letters, digits and '-', starting and ending with a letter or digit",
        "  p.yaml: targets[0].prometheus_matchers: key 'bad label': expected a Prometheus label "
        "name: letters, digits and '_', not starting with a digit",
        "  p.yaml: targets[0].prometheus_matchers.pod: value '': expected a label value (an "
        "empty matcher selects the series that do not have the label)",
        "  p.yaml: targets[1].workload.apiVersion: value 'apps/v2': expected apps/v1 for kind "
        "Deployment",
        "  p.yaml: targets[1].workload.name: value 'Bad_Name': expected a Kubernetes name: "
        "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
    ]


@pytest.mark.parametrize("name", ["a..b", "a.-b", "a-.b", ".a"])
def test_a_workload_name_is_a_dns_subdomain_label_by_label(tmp_path: Path, name: str) -> None:
    """Each dot-separated part of a workload name is a DNS label, as the API server and the
    settings' Lease name check have it (a name the API server refuses is refused here)."""
    text = (
        "targets:\n"
        f"  - workload: {{apiVersion: apps/v1, kind: Deployment, namespace: llm, name: '{name}'}}\n"
    )
    assert _message(tmp_path, text).splitlines()[1:] == [
        f"  p.yaml: targets[0].workload.name: value '{name}': expected a Kubernetes name: "
        "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
    ]


def test_replica_labels_are_written_as_a_yaml_list(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "replica_labels: [prometheus_replica, cluster_replica]\n"
        "targets:\n- workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm,"
        " name: vllm}\n",
        encoding="utf-8",
    )
    assert load_policy(path).replica_labels == ("prometheus_replica", "cluster_replica")
    with pytest.raises(PolicyError, match=r"replica_labels\[0\]: value 7: expected text"):
        parse_policy({"replica_labels": [7], "targets": [{"workload": WORKLOAD}]})


STEPS = (
    "maxReplicasPerPeriod (a Pods policy's value), maxPercentPerPeriod (a Percent policy's) "
    "and periodSeconds"
)
TARGET_TAKES = (
    "(targets[0] takes minReplicas, maxReplicas, signals, tolerance, scaleUp, scaleDown, "
    "modelLoadTimeoutSeconds, namespace, scaleTargetRef, workload, prometheusMatchers, shadow, "
    "replicaGroups)"
)
SCALE_DOWN_TAKES = (
    "(targets[0].scaleDown takes stabilizationWindowSeconds, maxReplicasPerPeriod, "
    "maxPercentPerPeriod, periodSeconds, maxSurplusPercentPerPeriod, shortenWindowOnSteadyFall)"
)
REF = "{apiVersion: apps/v1, kind: Deployment, name: vllm}"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        pytest.param(
            "behavior:\n      scaleDown:\n        stabilizationWindowSeconds: 600\n",
            "targets[0].behavior: unknown field: the HPA's behavior.scaleUp and "
            "behavior.scaleDown are targets[0].scaleUp and targets[0].scaleDown here, without "
            f"a behavior block (stabilizationWindowSeconds as the HPA's; its policies as {STEPS}; "
            f"its tolerance as targets[0].tolerance.scaleUp and .scaleDown) {TARGET_TAKES}",
            id="behavior.scaleDown",
        ),
        pytest.param(
            "scaleDown:\n      policies: [{type: Pods, value: 1, periodSeconds: 60}]\n",
            f"targets[0].scaleDown.policies: unknown field: the HPA's policies list is {STEPS} "
            "here, each period the larger change applying (as the HPA's selectPolicy Max) "
            f"{SCALE_DOWN_TAKES}",
            id="a direction's policies list",
        ),
        pytest.param(
            "scaleDown:\n      selectPolicy: Max\n",
            "targets[0].scaleDown.selectPolicy: unknown field: the larger change of "
            "maxReplicasPerPeriod and maxPercentPerPeriod always applies here, as the HPA's "
            f"selectPolicy Max (there is no Min or Disabled) {SCALE_DOWN_TAKES}",
            id="selectPolicy",
        ),
        pytest.param(
            "scaleDown:\n      tolerance: 0.2\n",
            "targets[0].scaleDown.tolerance: unknown field: the tolerance is "
            f"targets[0].tolerance.scaleDown here (a 0-1 ratio) {SCALE_DOWN_TAKES}",
            id="a direction's tolerance",
        ),
    ],
)
def test_an_hpa_behavior_field_is_named_with_where_it_lives(
    tmp_path: Path, block: str, message: str
) -> None:
    text = f"targets:\n  - namespace: llm\n    scaleTargetRef: {REF}\n    {block}"
    assert _message(tmp_path, text) == f"invalid policy\n  p.yaml: {message}"


def test_an_hpa_behavior_block_of_a_shadow_or_in_snake_case_is_named_in_its_terms(
    tmp_path: Path,
) -> None:
    text = (
        f"targets:\n  - workload: {DEPLOYMENT}\n    max_replicas: 4\n"
        "    shadow:\n      behavior: {scale_down: {}}\n"
    )
    message = _message(tmp_path, text)
    assert message.startswith(
        "invalid policy\n  p.yaml: targets[0].shadow.behavior: unknown field: the HPA's "
        "behavior.scaleUp and behavior.scaleDown are targets[0].shadow.scale_up and "
        "targets[0].shadow.scale_down here, without a behavior block "
        "(stabilization_window_seconds as the HPA's; its policies as max_replicas_per_period "
    )
    assert "its tolerance as targets[0].shadow.tolerance.scale_up and .scale_down)" in message
    # a key of no HPA meaning keeps the nearest-name hint
    text = f"targets:\n  - workload: {DEPLOYMENT}\n    scale_down:\n      period: 1\n"
    assert _message(tmp_path, text).startswith(
        "invalid policy\n  p.yaml: targets[0].scale_down.period: unknown field; did you mean "
        "period_seconds? (targets[0].scale_down takes "
    )


def test_errors_read_in_the_files_order_and_a_camel_case_file_sees_its_own_spelling(
    tmp_path: Path,
) -> None:
    """pydantic lists a model's own fields first and unknown keys after; the lines follow the
    file instead (a typo at the top written first is listed first), and in a camelCase file
    a field it left out and the names in a message are spelled in camelCase too."""
    text = (
        "rateWindowSecond: 30\n"
        "targets:\n"
        f"  - workload: {DEPLOYMENT}\n"
        "    minReplica: 2\n"
        "    maxReplicas: 8\n"
        "    signals:\n"
        "      itlP95: {enabled: true}\n"
        "    scaleDown: {stabilizationWindowSeconds: 300, maxPercentPerPeriod: 0.5}\n"
    )
    lines = _message(tmp_path, text).splitlines()[1:]
    assert [line.split(": ")[1] for line in lines] == [
        "rateWindowSecond",
        "targets[0].minReplica",
        "targets[0].signals.itlP95.targetSeconds",
        "targets[0].scaleDown.maxPercentPerPeriod",
    ]
    assert "expected a number of seconds while itlP95 is enabled" in lines[2]
    assert "_" not in lines[2].split("(it has no default")[0]
