"""What the demo prints: each controller event only when it says something new, the same slice
under each approach over the slice alone, the capacity seed written into the policy, and the
documentation blocks a run fills."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from scaler.cli import app
from scaler.config.policy import load_policy
from scaler.sim.demo import EXAMPLE_POLICY, ChangesOnly, pump_controller_log, seeded_policy
from scaler.sim.demo_docs import doc_blocks, missing_doc_blocks, write_doc_blocks
from scaler.sim.engine import SimRequest
from scaler.sim.fleet import FleetSample
from scaler.sim.report import format_comparison, slice_row, summarize, summary_json
from tests.support.policies import case_target_doc


def _decision(**changes: Any) -> dict[str, Any]:
    event = {
        "event": "decision",
        "level": "info",
        "target": "llm/Deployment/vllm",
        "timestamp": "2026-01-01T00:00:05+00:00",
        "current": 4,
        "desired": 4,
        "reason": "within_tolerance",
        "ready": 4,
        "starting": 0,
        "terminating": 0,
        "signals": {"queue_depth": 0.25, "ttft_p95": 0.4, "capacity": 12400.0},
        "message": "m",
    }
    return {**event, **changes}


async def test_a_fact_repeated_every_cycle_is_printed_once_until_it_changes() -> None:
    chosen = {"event": "scale_down_pods_chosen", "level": "info", "target": "llm/Deployment/vllm"}
    events = [
        {**chosen, "pods": ["a", "b"], "timestamp": "2026-01-01T00:00:05+00:00"},
        {
            **chosen,
            "pods": ["a", "b"],
            "in_flight": [3.0],
            "timestamp": "2026-01-01T00:00:10+00:00",
        },
        {**chosen, "pods": ["a"], "timestamp": "2026-01-01T00:00:15+00:00"},
        _decision(),
        _decision(signals={"queue_depth": 0.5, "ttft_p95": 0.6, "capacity": 12900.0}),
        _decision(reason="stabilized"),
        _decision(reason="stabilized", ready=3, starting=1),
        _decision(reason="stabilized", ready=3, starting=1, signals={"capacity": "learning"}),
        _decision(reason="stabilized", ready=3, starting=1, signals={"capacity": "learning"}),
    ]
    stream = asyncio.StreamReader()
    for event in events:
        stream.feed_data((json.dumps(event) + "\n").encode())
    stream.feed_eof()
    out = io.StringIO()
    await pump_controller_log(stream, out, 1767225600.0)
    lines = out.getvalue().splitlines()
    assert [line.split()[1] if "replicas" not in line else "decision" for line in lines] == [
        "info:", "info:", "decision", "decision", "decision", "decision",
    ]  # fmt: skip
    assert "pods=a,b" in lines[0] and "pods=a" in lines[1] and "pods=a," not in lines[1]
    assert "queue_depth=0.25" in lines[2]  # the second decision moved only values
    assert "stabilized" in lines[3] and "ready 3 starting 1" in lines[4]
    assert lines[5].endswith("capacity=learning")


def test_each_target_has_its_own_last_facts() -> None:
    changes = ChangesOnly()
    a, b = _decision(), _decision(target="llm/Deployment/other")
    assert changes.wants(a) and changes.wants(b)
    assert not changes.wants(a) and not changes.wants(b)
    assert changes.wants(_decision(shadow_desired=3))


def _samples(pods: list[int]) -> list[FleetSample]:
    return [
        FleetSample(t=float(t), arrivals=1, spec_replicas=n, ready=n, starting=0, terminating=0,
                    waiting=0, running=0)
        for t, n in enumerate(pods)
    ]  # fmt: skip


def _served(arrival: float, ttft: float) -> SimRequest:
    r = SimRequest(0, arrival, 10, 1, first_token_at=arrival + ttft, finished_at=arrival + ttft)
    r.tokens_generated = 1
    return r


def test_a_row_counts_replicas_and_scale_events_over_the_slice_alone() -> None:
    """A live run's tail and a replay's differ in length: past the slice's end nothing counts,
    but every request of the slice does."""
    samples = _samples([2] * 61 + [8] * 60)  # 2 replicas for the slice's minute, 8 after
    requests = [_served(1.0, 0.5), _served(2.0, 3.0)]
    events = [(30.0, 2, 2), (90.0, 2, 8)]
    row = slice_row(
        "r", requests, samples, events,
        start=0.0, duration_seconds=60.0, slo_ttft_seconds=2.0, window_seconds=10.0,
    )  # fmt: skip
    assert row.summary.replica_minutes == pytest.approx(2.0)
    assert row.summary.peak_replicas == 2
    assert row.summary.scale_events == ((30.0, 2, 2),)
    assert row.summary.within_slo_ratio == 0.5
    whole = summarize(
        requests, samples, events, start=0.0, slo_ttft_seconds=2.0, window_seconds=10.0
    )
    assert whole.replica_minutes > 9


def test_the_comparison_has_one_line_per_approach_and_goes_into_the_json() -> None:
    rows = [
        slice_row(label, [_served(1.0, ttft)], _samples([n] * 61), [(5.0, 1, n)],
                  start=0.0, duration_seconds=60.0, slo_ttft_seconds=2.0, window_seconds=10.0)
        for label, ttft, n in (("ours", 0.5, 3), ("KEDA + HPA (replay)", 9.0, 8))
    ]  # fmt: skip
    text = format_comparison(rows, duration_seconds=60.0).splitlines()
    assert text[0].startswith(
        "== the same slice under each approach (over the slice's 60 s, no tail"
    )
    assert "within 2 s" in text[1]
    assert text[2].split() == ["ours", "100.0%", "0.50", "s", "3.0", "3", "1", "(1,", "0)"]
    assert text[3].split()[:6] == ["KEDA", "+", "HPA", "(replay)", "0.0%", "9.00"]
    live = summarize([], [], (), start=0.0, slo_ttft_seconds=2.0, window_seconds=10.0)
    doc = summary_json(type(live)(**{**{f: getattr(live, f) for f in live.__dataclass_fields__},
                                     "comparison": tuple(rows)}), None)  # fmt: skip
    assert [r["label"] for r in doc["comparison"]] == ["ours", "KEDA + HPA (replay)"]
    assert doc["comparison"][1]["within_slo_ratio"] == 0.0
    assert doc["comparison"][0]["replica_minutes"] == pytest.approx(3.0)


# ----------------------------------------------------------------- the capacity seed


class _Seed:
    prompt_tokens_per_second = 4620.0
    generation_tokens_per_second = 626.0
    requests_per_second = 3.46


def test_the_profile_seed_goes_into_a_copy_of_the_policy(tmp_path: Path) -> None:
    dest = tmp_path / "seeded.yaml"
    written = seeded_policy(EXAMPLE_POLICY, load_policy(EXAMPLE_POLICY), _Seed(), dest)
    assert written == dest
    seeded, given = load_policy(dest).targets[0], load_policy(EXAMPLE_POLICY).targets[0]
    assert seeded.signals.capacity.seed_prompt_tokens_per_second == 4620.0
    assert seeded.signals.capacity.seed_generation_tokens_per_second == 626.0
    # everything else as given, the shadow too
    assert seeded.model_copy(update={"signals": given.signals}) == given
    assert EXAMPLE_POLICY.read_text(encoding="utf-8") != dest.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "capacity",
    [
        pytest.param({"enabled": False}, id="capacity off"),
        pytest.param(
            {"seed_prompt_tokens_per_second": 100, "seed_generation_tokens_per_second": 10},
            id="seeded already",
        ),
    ],
)
def test_a_policy_without_the_signal_or_with_its_own_seed_is_left_as_it_is(
    tmp_path: Path, capacity: dict[str, Any]
) -> None:
    doc = case_target_doc()
    doc.setdefault("signals", {})["capacity"] = capacity
    source = tmp_path / "policy.yaml"
    source.write_text(yaml.safe_dump({"targets": [doc]}), encoding="utf-8")
    dest = tmp_path / "seeded.yaml"
    assert seeded_policy(source, load_policy(source), _Seed(), dest) is None
    assert not dest.exists()


# ------------------------------------------------------------------- the docs' blocks

PRINTED = """read conv.csv: 10 requests
trace       conv minutes 16-28
prometheus  http://127.0.0.1:41234 (scrape every 1 s)
kube API    http://127.0.0.1:41235 (kubeconfig /tmp/x/kubeconfig)
policy      /tmp/x/policy-seeded.yaml
dry run     in another shell: . /tmp/x/env.sh && vllm-scaler recommend --once

Decisions of vllm-scaler (a line when the decision, the fleet or a signal's status changes):
    +3s info: started targets=llm/Deployment/vllm prometheus.url=http://127.0.0.1:54247/
   +13s replicas 3 -> 3   demand_covered

== vllm-scaler demo: conv
requests        10 arrived
plot            /tmp/x/demo.png

== the same slice under each approach
ours  100.0%
"""


def test_the_blocks_keep_the_header_with_this_machines_ports_and_paths_written_out() -> None:
    blocks = doc_blocks(PRINTED, workdir=Path("/tmp/x"))
    transcript = blocks["transcript"]
    assert transcript.splitlines()[:8] == [
        "read conv.csv: 10 requests",
        "trace       conv minutes 16-28",
        "prometheus  http://127.0.0.1:<port> (scrape every 1 s)",
        "kube API    http://127.0.0.1:<port> (kubeconfig out/demo/kubeconfig)",
        "policy      out/demo/policy-seeded.yaml",
        "dry run     in another shell: . out/demo/env.sh && vllm-scaler recommend --once",
        "",
        "Decisions of vllm-scaler (a line when the decision, the fleet or a signal's status "
        "changes):",
    ]
    started = "    +3s info: started targets=llm/Deployment/vllm prometheus.url=http://127.0.0.1:"
    assert started + "<port>/" in transcript
    assert "41234" not in transcript and "54247" not in transcript and "/tmp/x" not in transcript
    assert blocks["summary"].startswith("== vllm-scaler demo: conv\nrequests        10 arrived")
    assert blocks["summary"].endswith("ours  100.0%")
    assert "Decisions" not in blocks["summary"] and "plot " not in blocks["summary"]


#: The header lines the demo prints before its decisions, in order (scaler/sim/demo.py).
HEADER = ("trace", "fleet", "prometheus", "kube API", "policy", "capacity", "metrics", "dry run")


def test_the_demo_page_shows_the_header_and_the_section_title_the_run_prints() -> None:
    """docs/demo.md's transcript has every header line the run writes, in its order, and the
    decisions' title in its words (each read from scaler/sim/demo.py's source)."""
    import inspect

    from scaler.sim import demo

    source = inspect.getsource(demo)
    for label in HEADER:
        assert f'"{label:<12}' in source or f'f"{label:<12}' in source, label
    title = re.search(r'"(Decisions of vllm-scaler [^"]*)"\s*"([^"]*)"', source)
    assert title is not None
    page = (Path(__file__).resolve().parents[2] / "docs" / "demo.md").read_text(encoding="utf-8")
    transcript = page.split("<!-- demo-transcript -->", 1)[1].split("<!-- /demo-transcript -->")[0]
    line = (title[1] + title[2]).removesuffix("\\n")
    head, decisions, _ = transcript.partition(line + "\n")
    assert decisions, f"docs/demo.md's transcript lacks the line {line!r}"
    labelled = (x for x in head.splitlines() if re.match(r"^\w[\w ]{10} \S", x))
    labels = [x[:12].rstrip() for x in labelled]
    assert labels == list(HEADER)


def test_a_block_is_replaced_between_its_markers_and_nothing_else_is() -> None:
    text = "# Title\n\nbefore\n<!-- demo-summary -->\nold\n<!-- /demo-summary -->\nafter\n"
    once = write_doc_blocks(text, {"summary": "new 1", "transcript": "t"})
    assert once == (
        "# Title\n\nbefore\n<!-- demo-summary -->\n```text\nnew 1\n```\n<!-- /demo-summary -->"
        "\nafter\n"
    )
    assert write_doc_blocks(once, {"summary": "new 2"}).count("new") == 1
    assert missing_doc_blocks(text) is None
    assert missing_doc_blocks("no markers") == (
        "expected a file holding <!-- demo-summary --> ... <!-- /demo-summary --> or "
        "<!-- demo-transcript --> ... <!-- /demo-transcript -->"
    )


def test_the_readme_and_the_demo_page_hold_the_blocks_the_demo_fills() -> None:
    root = Path(__file__).resolve().parents[2]
    assert missing_doc_blocks((root / "README.md").read_text(encoding="utf-8")) is None
    page = (root / "docs" / "demo.md").read_text(encoding="utf-8")
    assert "<!-- demo-transcript -->" in page and missing_doc_blocks(page) is None


def test_a_file_without_the_blocks_is_refused_before_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def started(*_: Any, **__: Any) -> int:
        raise AssertionError("the demo was started")

    monkeypatch.setattr("scaler.sim.demo.run_demo", started)
    plain = tmp_path / "notes.md"
    plain.write_text("# notes\n", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["sim", "--workdir", str(tmp_path / "w"), "--write-summary", str(plain)]
    )
    assert result.exit_code == 2
    assert f"--write-summary: value '{plain}': expected a file holding <!-- demo-summary -->" in (
        result.stderr
    )
    result = CliRunner().invoke(
        app, ["sim", "--workdir", str(tmp_path / "w"), "--write-summary", str(tmp_path / "nope")]
    )
    assert result.exit_code == 2
    assert "expected a readable Markdown file (No such file or directory)" in result.stderr
