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
