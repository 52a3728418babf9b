"""A new user's first policy: a duration written as text (``30s``) where the field takes a
number of seconds, and a scale target without its ``apiVersion``. Each error names the field,
the value given and what to write instead, in the policy file's spelling and in the
resource's (``VLLMAutoscaler``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scaler.config.policy import PolicyError, load_policy
from scaler.config.resource import API_VERSION, KIND, target_of

DEPLOYMENT = "{apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}"


def _lines(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError) as err:
        load_policy(path)
    head, *lines = str(err.value).replace(str(path), "p.yaml").splitlines()
    assert head == "invalid policy"
    return [line.strip() for line in lines]


@pytest.mark.parametrize(
    ("field", "written", "message"),
    [
        pytest.param(
            "scale_down: {stabilization_window_seconds: 5m}",
            "scale_down.stabilization_window_seconds",
            "value '5m': expected a number of seconds; write 300",
            id="minutes",
        ),
        pytest.param(
            "scale_up: {period_seconds: 30s}",
            "scale_up.period_seconds",
            "value '30s': expected a number of seconds; write 30",
            id="seconds",
        ),
        pytest.param(
            "scale_down: {period_seconds: 1.5m}",
            "scale_down.period_seconds",
            "value '1.5m': expected a number of seconds; write 90",
            id="decimal-minutes",
        ),
        pytest.param(
            "model_load_timeout_seconds: 1h30m",
            "model_load_timeout_seconds",
            "value '1h30m': expected a number of seconds; write 5400",
            id="hours-and-minutes",
        ),
        pytest.param(
            "signals: {ttft_p95: {target_seconds: 500ms}}",
            "signals.ttft_p95.target_seconds",
            "value '500ms': expected a number of seconds; write 0.5",
            id="milliseconds",
        ),
        pytest.param(
            "signals: {capacity: {model_load_seconds: '20'}}",
            "signals.capacity.model_load_seconds",
            "value '20': expected a number of seconds, without quotes; write 20",
            id="a-number-in-quotes",
        ),
        pytest.param(
            "scale_up: {period_seconds: soon}",
            "scale_up.period_seconds",
            "value 'soon': expected a number of seconds, such as 30",
            id="no-duration",
        ),
        pytest.param(
            "scale_up: {period_seconds: true}",
            "scale_up.period_seconds",
            "value true: expected a number of seconds, such as 30",
            id="a-flag",
        ),
    ],
)
def test_a_duration_as_text_names_the_number_of_seconds_to_write(
    tmp_path: Path, field: str, written: str, message: str
) -> None:
    text = f"targets:\n  - workload: {DEPLOYMENT}\n    {field}\n"
    assert _lines(tmp_path, text) == [f"p.yaml: targets[0].{written}: {message}"]


def test_the_rate_window_and_a_shadows_windows_too(tmp_path: Path) -> None:
    text = (
        "rate_window_seconds: 2m\n"
        f"targets:\n  - workload: {DEPLOYMENT}\n"
        "    shadow: {scale_down: {stabilization_window_seconds: 10m}}\n"
    )
    assert _lines(tmp_path, text) == [
        "p.yaml: rate_window_seconds: value '2m': expected a number of seconds; write 120",
        "p.yaml: targets[0].shadow.scale_down.stabilization_window_seconds: value '10m': "
        "expected a number of seconds; write 600",
    ]


def test_a_number_of_seconds_out_of_range_keeps_its_bound(tmp_path: Path) -> None:
    text = f"targets:\n  - workload: {DEPLOYMENT}\n    scale_up: {{period_seconds: 0}}\n"
    [line] = _lines(tmp_path, text)
    assert line.startswith("p.yaml: targets[0].scale_up.period_seconds: value 0: expected a number")
    assert "seconds" not in line.partition("value 0: ")[2]  # a number already: no conversion


def _resource_lines(spec: dict[str, Any]) -> list[str]:
    obj = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": spec,
    }
    with pytest.raises(PolicyError) as err:
        target_of(obj)
    head, *lines = str(err.value).splitlines()
    assert head == f"invalid {KIND} llm/vllm"
    return [line.strip() for line in lines]


def test_the_resources_spelling_names_the_field_as_hpa_does() -> None:
    spec = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
        "scaleDown": {"stabilizationWindowSeconds": "5m"},
        "modelLoadTimeoutSeconds": "10m",
    }
    assert _resource_lines(spec) == [
        "spec.scaleDown.stabilizationWindowSeconds: value '5m': expected a number of seconds; "
        "write 300",
        "spec.modelLoadTimeoutSeconds: value '10m': expected a number of seconds; write 600",
    ]


#: The kinds people scale most, and the apiVersion each is served at.
API_OF_KIND = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
}


@pytest.mark.parametrize("kind", list(API_OF_KIND))
def test_a_scale_target_without_api_version_names_its_kinds(tmp_path: Path, kind: str) -> None:
    expected = API_OF_KIND[kind]
    text = f"targets:\n  - workload: {{kind: {kind}, namespace: llm, name: vllm}}\n"
    assert _lines(tmp_path, text) == [
        f"p.yaml: targets[0].workload.apiVersion: required field missing; write apiVersion: "
        f"{expected}, the API of kind {kind}"
    ]
    assert _resource_lines({"scaleTargetRef": {"kind": kind, "name": "vllm"}}) == [
        f"spec.scaleTargetRef.apiVersion: required field missing; write apiVersion: {expected}, "
        f"the API of kind {kind}"
    ]


def test_a_kind_of_another_api_without_api_version_says_where_to_find_it(
    tmp_path: Path,
) -> None:
    text = (
        "targets:\n  - workload: {kind: InferencePool, plural: inferencepools, namespace: llm, "
        "name: vllm}\n"
    )
    assert _lines(tmp_path, text) == [
        "p.yaml: targets[0].workload.apiVersion: required field missing; expected the "
        "group/version of kind InferencePool's API, as `kubectl api-resources` lists it"
    ]


def test_without_a_kind_the_missing_api_version_is_only_missing(tmp_path: Path) -> None:
    text = "targets:\n  - workload: {namespace: llm, name: vllm}\n"
    assert _lines(tmp_path, text) == [
        "p.yaml: targets[0].workload.apiVersion: required field missing",
        "p.yaml: targets[0].workload.kind: required field missing",
    ]
