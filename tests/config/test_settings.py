"""Process settings: environment, overrides and clear errors."""

from __future__ import annotations

import pytest

from scaler.config.settings import SettingsError, load_settings


def test_environment_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_URL", "http://prom:9090")
    monkeypatch.setenv("VLLM_SCALER_CONTROL_INTERVAL_SECONDS", "30")
    s = load_settings(control_interval_seconds=5.0, metrics_port=None)
    assert str(s.prometheus_url) == "http://prom:9090/"
    assert s.control_interval_seconds == 5.0  # the option wins over the environment
    assert s.metrics_port == 9100  # None means "not given"


def test_invalid_value_names_variable_value_and_expectation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_SCALER_CONTROL_INTERVAL_SECONDS", "soon")
    with pytest.raises(SettingsError) as err:
        load_settings()
    text = str(err.value)
    assert "VLLM_SCALER_CONTROL_INTERVAL_SECONDS" in text
    assert "'soon'" in text
    assert "valid number" in text


def test_negative_interval_is_refused() -> None:
    with pytest.raises(SettingsError, match="greater than 0"):
        load_settings(control_interval_seconds=-1.0)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"X-Scope-OrgID": "t1"}', {"X-Scope-OrgID": "t1"}),
        ("X-Scope-OrgID=t1, X-Other = two", {"X-Scope-OrgID": "t1", "X-Other": "two"}),
        ("", {}),
    ],
)
def test_prometheus_headers_json_or_pairs(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: dict[str, str]
) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", raw)
    s = load_settings()
    assert s.prometheus_headers == expected
    assert "t1" not in repr(s)  # values never in the settings' repr


@pytest.mark.parametrize("raw", ["no-equals-sign", "bad name=secret-value", "{not json"])
def test_invalid_headers_never_echo_the_value(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", raw)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "VLLM_SCALER_PROMETHEUS_HEADERS" in str(err.value)
    assert "secret-value" not in str(err.value) and "<redacted>" in str(err.value)


def test_lease_timings_must_nest() -> None:
    s = load_settings()
    assert (s.lease_retry_period_seconds, s.lease_renew_deadline_seconds) == (2.0, 10.0)
    assert (s.lease_duration_seconds, s.lease_name, s.leader_election) == (
        15.0,
        "vllm-scaler",
        None,
    )
    with pytest.raises(SettingsError, match="retry period < renew deadline < lease duration"):
        load_settings(lease_renew_deadline_seconds=20.0)


def test_leader_election_default_follows_in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from scaler.controller.app import leader_election_enabled, lease_namespace

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert leader_election_enabled(load_settings()) is False
    assert leader_election_enabled(load_settings(in_cluster=True)) is True
    assert leader_election_enabled(load_settings(in_cluster=True, leader_election=False)) is False
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    assert lease_namespace(load_settings()) == "ops"
    assert lease_namespace(load_settings(lease_namespace="x")) == "x"
