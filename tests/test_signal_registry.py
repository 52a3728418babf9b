"""The registry of signal specifications (scaler/config/signal_specs.py) is the one place a
signal is declared: every layer's per-signal parts follow it, and nothing names a signal the
registry does not hold."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from scaler.config.signal_specs import SPECS, SignalName, Signals, Sizing, histogram_specs
from scaler.dashboards.decisions import SIGNALS
from scaler.sources.promql import (
    MAIN_RULES,
    SIGNAL_QUERY,
    QueryKind,
    histogram_recording_rules,
)

ROOT = Path(__file__).resolve().parents[1]


def test_every_signal_has_one_spec_and_one_policy_block_in_the_registrys_order() -> None:
    assert [s.name for s in SPECS] == list(SignalName)
    assert list(Signals.model_fields) == [str(s.name) for s in SPECS]
    for s in SPECS:
        block = Signals().block(s.name)
        assert s.target_field in type(block).model_fields, s.name
        assert (s.reads is None) == (s.sizing is Sizing.DERIVED), s.name
        if s.default_with is not None:
            assert s.default_with in SignalName, s.name


def test_every_queried_signal_has_its_query_kinds() -> None:
    for s in SPECS:
        if s.gauge is not None:
            assert SIGNAL_QUERY[s.name] is QueryKind(s.gauge.query)
            assert QueryKind(s.gauge.query).per_pod
        if s.histogram is not None:
            assert QueryKind(s.histogram.rate_query).per_pod
            assert not QueryKind(s.histogram.buckets_query).per_pod
            assert SIGNAL_QUERY[s.name] is QueryKind(s.histogram.buckets_query)
    assert set(SIGNAL_QUERY) == {s.name for s in SPECS if s.reads is not None}
    assert {s.name for s in histogram_specs()} <= set(SIGNAL_QUERY)


def test_every_signal_has_its_panel_on_the_committed_decisions_dashboard() -> None:
    doc = json.loads((ROOT / "dashboards" / "vllm-scaler-decisions.json").read_text("utf-8"))
    titles = [p.get("title", "") for p in doc["panels"]]
    assert [name for name, _, _ in SIGNALS] == [str(s.name) for s in SPECS]
    for s in SPECS:
        assert f"{s.panel.title} ($target)" in titles, s.name


def test_every_signal_alert_is_in_the_shipped_rules() -> None:
    for s in SPECS:
        if s.alert is None:
            continue
        rules_file = "vllm-scaler.rules.yaml"
        doc = yaml.safe_load((ROOT / "deploy" / "rules" / rules_file).read_text("utf-8"))
        alerts = {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}
        assert s.alert.name in alerts, s.name
        # the shipped summary names the VLLMAutoscaler after the target (the alert's label)
        shipped = " ".join(alerts[s.alert.name]["annotations"]["summary"].split()).replace(
            "{{ with $labels.resource }} (VLLMAutoscaler {{ . }}){{ end }}", ""
        )
        assert shipped == s.alert.summary
        assert f'signal="{s.name}"' in alerts[s.alert.name]["expr"], s.alert.name


def test_every_histogram_specs_recording_rules_are_in_its_rules_file() -> None:
    """The main file holds TTFT's (with the throughput rules: test_recording_rules); a signal
    off by default has its own file, loaded where a target enables it."""
    for s in histogram_specs():
        assert s.histogram is not None
        doc = yaml.safe_load((ROOT / "deploy" / "rules" / s.histogram.rules).read_text("utf-8"))
        recorded = [r for g in doc["groups"] for r in g["rules"] if "record" in r]
        expected = histogram_recording_rules(s.histogram, 60)
        if s.histogram.rules == MAIN_RULES:
            assert recorded[: len(expected)] == expected, s.name
        else:
            assert recorded == expected, s.name
