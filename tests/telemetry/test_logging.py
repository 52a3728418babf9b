"""The text log for people: every field as ``key=value``, never a Python dict or list."""

from __future__ import annotations

import json

import pytest
import structlog

from scaler.cli.controller import LogFormat, recommend_log_format
from scaler.telemetry.logging import configure_logging, flatten_fields, format_fields

STARTED = {
    "targets": ["llm/Deployment/vllm", "llm/Deployment/big"],
    "dry_run": False,
    "prometheus": {
        "url": "http://prom:9090",
        "auth": "none",
        "headers": [],
        "ca_file": None,
        "timeout_seconds": 10.0,
    },
    "interval_seconds": 15.0,
    "metrics_port": None,
    "leader_election": {"lease": "vllm-scaler/vllm-scaler", "identity": "pod-a_12"},
}


@pytest.fixture
def restore_structlog() -> object:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def test_the_started_line_reads_key_value_in_text(
    capsys: pytest.CaptureFixture[str], restore_structlog: object
) -> None:
    configure_logging("text", "info")
    structlog.get_logger("vllm_scaler").info("started", **STARTED)
    line = capsys.readouterr().err.strip()
    assert "{" not in line and "[" not in line.split("]", 1)[1]  # no dict, no list repr
    fields = line.split("started", 1)[1].split()
    assert fields == [
        "dry_run=false",
        "interval_seconds=15.0",
        "leader_election.identity=pod-a_12",
        "leader_election.lease=vllm-scaler/vllm-scaler",
        "metrics_port=none",
        "prometheus.auth=none",
        "prometheus.ca_file=none",
        "prometheus.headers=none",
        "prometheus.timeout_seconds=10.0",
        "prometheus.url=http://prom:9090",
        "targets=llm/Deployment/vllm,llm/Deployment/big",
    ]


def test_json_lines_keep_the_nesting(
    capsys: pytest.CaptureFixture[str], restore_structlog: object
) -> None:
    configure_logging("json", "info")
    structlog.get_logger("vllm_scaler").info("started", **STARTED)
    event = json.loads(capsys.readouterr().err)
    assert event["prometheus"] == STARTED["prometheus"]
    assert event["targets"] == STARTED["targets"]
    assert event["metrics_port"] is None


def test_an_exception_keeps_its_traceback_in_text(
    capsys: pytest.CaptureFixture[str], restore_structlog: object
) -> None:
    configure_logging("text", "info")
    try:
        raise RuntimeError("boom in the cycle")
    except RuntimeError:
        structlog.get_logger("vllm_scaler").exception("cycle_failed", cycle={"n": 3})
    err = capsys.readouterr().err
    assert "cycle_failed" in err and "cycle.n=3" in err
    assert "Traceback (most recent call last)" in err
    assert "RuntimeError: boom in the cycle" in err


def test_format_fields_is_one_logfmt_line() -> None:
    assert flatten_fields({"a": {"b": {"c": 1}}, "e": {}, "s": {"y", "x"}}) == {
        "a.b.c": 1,
        "e": "none",
        "s": "x,y",
    }
    assert format_fields(
        {"event_count": 2, "ok": True, "detail": 'HTTP 401 "denied"', "who": ["a", None]}
    ) == ('event_count=2 ok=true detail="HTTP 401 \\"denied\\"" who=a,none')


@pytest.mark.parametrize(
    ("log_format", "output", "expected"),
    [
        ("auto", "text", "text"),  # a text report never gets JSON log lines beside it
        ("auto", "json", "auto"),  # text on a terminal, JSON lines otherwise
        ("json", "text", "json"),  # --log-format given: kept
        ("console", "json", "console"),
    ],
)
def test_recommend_log_format_follows_a_text_output_unless_given(
    log_format: LogFormat, output: str, expected: str
) -> None:
    assert recommend_log_format(log_format, output) == expected
