"""The bench options of the sizing work: the ITL SLO, routing seeds, one maximum, the headroom
frontier, block hashes; bad values name the option (exit 2), good ones reach the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaler.cli import app


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--slo-itl-seconds", "0"], "--slo-itl-seconds: value 0: expected a number > 0",
            id="itl",
        ),
        pytest.param(
            ["--routing-seeds", "0"], "--routing-seeds: value 0: expected a number >= 1",
            id="seeds",
        ),
        pytest.param(
            ["--max-replicas", "0"], "--max-replicas: value 0: expected a number >= 1", id="max"
        ),
        pytest.param(
            ["--frontier", "signals.capacity.headroom", "--frontier-values", "0,x"],
            "--frontier-values: expected numbers separated by commas, got '0,x'",
            id="frontier-values",
        ),
    ],
)  # fmt: skip
def test_bad_values_name_the_option(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["bench", "--no-plot", *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_an_unknown_setting_to_sweep_names_the_fields_there_are() -> None:
    result = CliRunner().invoke(
        app,
        ["bench", "--trace", "synthetic:flash", "--minutes", "3", "--rate-scale", "1",
         "--no-plot", "--frontier", "signals.capacity.standing_headroom_ratio", "--jobs", "1"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    said = result.stderr.replace("\n", " ")
    assert (
        "--frontier: setting 'signals.capacity.standing_headroom_ratio': signals.capacity has no "
        in (said)
    )
    assert "field 'standing_headroom_ratio' (fields: " in said


def test_the_json_carries_both_slos_the_seeds_and_the_maximum(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["bench", "--trace", "conv", "--start-minute", "10", "--minutes", "3",
         "--rate-scale", "1", "--no-plot", "--output", "json", "--jobs", "1",
         "--routing-seeds", "2", "--max-replicas", "6", "--slo-itl-seconds", "0.05"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["routing_seeds"] == [0, 1] and doc["max_replicas"] == 6
    assert doc["slo_itl_seconds"] == 0.05 and not doc["max_replicas_derived"]
    row = next(p for p in doc["policies"] if p["name"] == "vllm-scaler")
    assert len(row["both_request_share"]["per_seed"]) == 2
    assert row["both_request_share"]["mean"] <= row["slo_request_share"]["mean"]
    assert all(p["peak_replicas"] <= 6 for p in doc["policies"])
    near = doc["optimal"]["near_minimal"]
    assert near["threshold"] == 0.03 and near["candidates_replayed_on_every_seed"] >= 1
