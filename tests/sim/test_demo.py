"""The ``sim`` command around the demo: options checked up front, the work directory's lock
and reset, ``env.sh``, stopping on signals or an early controller exit, the summary and the plot.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from scaler.cli import app
from scaler.config.policy import load_policy
from scaler.sim.demo import (
    EXAMPLE_POLICY,
    WorkdirInUseError,
    fleet_target_error,
    lock_workdir,
    reset_workdir,
    until_stopped,
    watch_controller,
    write_env_file,
)
from scaler.sim.engine import ReplicaEngine, ReplicaModel, SimRequest
from scaler.sim.fleet import FleetSample
from scaler.sim.prometheus_server import die_with_parent
from scaler.sim.report import (
    SliceRow,
    format_comparison,
    format_summary,
    plot_figure,
    summarize,
    ttft_line,
)
from tests.support.policies import case_target_doc
from tests.support.processes import assert_child_ends_with_its_parent

# ------------------------------------------------------------- options, before anything


@pytest.fixture
def no_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting the demo fails the test: every check must come before it."""

    async def started(*_: Any, **__: Any) -> int:
        raise AssertionError("the demo was started")

    monkeypatch.setattr("scaler.sim.demo.run_demo", started)


def _sim(*args: str) -> Any:
    return CliRunner().invoke(app, ["sim", *args])


@pytest.mark.usefixtures("no_demo")
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--interval", "0"], "--interval: value 0: expected a number > 0 and <= 3600"),
        (["--model-load-seconds", "-5"], "--model-load-seconds: value -5: expected a number >= 0"),
        (["--rate-scale", "-1"], "--rate-scale: value -1: expected a number > 0"),
        (["--compress", "0"], "--compress: value 0: expected a number > 0"),
        (["--minutes", "0"], "--minutes: value 0: expected a number > 0 and <= 10080"),
        # a week, as bench: a longer replay would run for days
        (["--minutes", "10081"], "--minutes: value 10081: expected a number > 0 and <= 10080"),
        (["--minutes", "1e308"], "--minutes: value 1e+308: expected a number > 0 and <= 10080"),
        (["--start-minute", "-1"], "--start-minute: value -1: expected a number >= 0"),
        (["--tail-seconds", "nan"], "--tail-seconds: value nan: expected a finite number >= 0"),
        (["--slo-ttft-seconds", "0"], "--slo-ttft-seconds: value 0: expected a number > 0"),
        (
            ["--metrics-port", "70000"],
            "--metrics-port: value 70000: expected a number >= 0 and <= 65535",
        ),
    ],
)
def test_each_numeric_option_is_checked_up_front_naming_itself(args: list[str], error: str) -> None:
    result = _sim(*args)
    assert result.exit_code == 2
    assert result.output == f"vllm-scaler: {error}\n"


@pytest.mark.usefixtures("no_demo")
def test_an_empty_policy_option_says_it_is_empty() -> None:
    """It was made absolute before the check, so '' read as the working directory."""
    result = _sim("--policy", "")
    assert result.exit_code == 2
    assert result.output == (
        "vllm-scaler: --policy: .: the path is empty (or '.', the current directory); "
        "expected the path of a YAML policy file given as --policy FILE\n"
    )


@pytest.mark.usefixtures("no_demo")
def test_every_bad_option_is_reported_at_once() -> None:
    result = _sim("--compress", "0", "--minutes", "0")
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "vllm-scaler: --minutes: value 0: expected a number > 0 and <= 10080",
        "vllm-scaler: --compress: value 0: expected a number > 0",
    ]


@pytest.mark.usefixtures("no_demo")
def test_an_invalid_policy_is_refused_up_front(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("targets: []\n", encoding="utf-8")
    result = _sim("--policy", str(bad))
    assert result.exit_code == 2
    assert result.output.startswith(f"vllm-scaler: --policy: invalid policy\n  {bad}: targets")


@pytest.mark.usefixtures("no_demo")
def test_a_policy_whose_target_is_not_the_fleet_is_refused_up_front(tmp_path: Path) -> None:
    """Its controller could never read its target: every cycle would fail."""
    other = tmp_path / "other.yaml"
    other.write_text(
        yaml.safe_dump(
            {
                "targets": [
                    case_target_doc(),
                    case_target_doc(
                        workload={
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "namespace": "llm",
                            "name": "vllm-llama-8b",
                        }
                    ),
                ]
            }
        ),
        encoding="utf-8",
    )
    result = _sim("--policy", str(other))
    assert result.exit_code == 2
    assert result.output == (
        f"vllm-scaler: --policy {other}: target llm/Deployment/vllm-llama-8b of the policy is "
        "not the simulated fleet's workload Deployment llm/vllm (apps/v1): give the policy one "
        "target whose workload is {apiVersion: apps/v1, kind: Deployment, namespace: llm, "
        "name: vllm} (bench --policy runs a policy's first target whatever its workload)\n"
    )


def test_the_shipped_policies_name_the_fleet_or_are_refused() -> None:
    assert fleet_target_error(load_policy(EXAMPLE_POLICY)) is None
    shipped = load_policy(Path(__file__).parents[2] / "deploy" / "base" / "policy.yaml")
    assert fleet_target_error(shipped) == (
        "target llm/Deployment/vllm-llama-8b of the policy is not the simulated fleet's "
        "workload Deployment llm/vllm (apps/v1): give the policy one target whose workload is "
        "{apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm} (bench --policy "
        "runs a policy's first target whatever its workload)"
    )


def test_a_trace_file_with_its_own_column_names_is_read_as_bench_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("at,in,out\n0,10,5\n1,20,6\n2,30,7\n", encoding="utf-8")
    seen: list[Any] = []

    async def started(opts: Any, *_: Any, **__: Any) -> int:
        seen.append(opts.trace)
        return 0

    monkeypatch.setattr("scaler.sim.demo.run_demo", started)
    columns = ["--time-column", "at", "--prompt-column", "in", "--output-column", "out"]
    args = ["--trace", str(trace), "--start-minute", "0", "--rate-scale", "1", "--compress", "1"]
    result = _sim(*args, *columns)
    assert result.exit_code == 0, result.output
    assert [(r.prompt_tokens, r.output_tokens) for r in seen[0].requests] == [
        (10, 5),
        (20, 6),
        (30, 7),
    ]
    # without them, the columns are named as bench names them
    result = _sim(*args)
    assert result.exit_code == 2
    assert result.output == (
        f"vllm-scaler: --trace: {trace}: missing column(s) ['TIMESTAMP', 'ContextTokens', "
        "'GeneratedTokens'] (columns: ['at', 'in', 'out']) (name them with --time-column, "
        "--prompt-column, --output-column)\n"
    )


@pytest.mark.usefixtures("no_demo")
def test_a_directory_as_trace_is_refused_as_a_directory(tmp_path: Path) -> None:
    result = _sim("--trace", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.startswith(
        f"vllm-scaler: --trace: {tmp_path}: is a directory, not a trace file (expected 'code'"
    )


@pytest.mark.usefixtures("no_demo")
def test_a_slice_without_requests_is_refused_up_front(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,5\n30,10,5\n", encoding="utf-8")
    result = _sim("--trace", str(trace), "--start-minute", "5", "--minutes", "2")
    assert result.exit_code == 2
    assert result.output == (
        f"vllm-scaler: --start-minute/--minutes: no requests in minutes 5-7 of {trace} "
        "at rate x0.6\n"
    )


def test_a_workdir_in_use_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def started(*_: Any, **__: Any) -> int:
        raise AssertionError("the demo was started")

    monkeypatch.setattr("scaler.sim.demo._run_locked", started)  # after the lock is taken
    (tmp_path / "demo.png").write_bytes(b"the other run's")
    with lock_workdir(tmp_path):
        result = _sim("--workdir", str(tmp_path))
    assert result.exit_code == 2
    assert result.output == (
        f"vllm-scaler: workdir {tmp_path} is in use by another vllm-scaler sim "
        f"(pid {os.getpid()}); use --workdir\n"
    )
    assert (tmp_path / "demo.png").exists()  # nothing of the other run was touched


def test_sim_help_text_reads_as_sentences() -> None:
    result = CliRunner().invoke(app, ["sim", "--help"], terminal_width=80)
    flat = " ".join(result.output.split())
    assert "Replay a real trace against a simulated vLLM fleet, beside KEDA. A real Prometheus" in (
        flat
    )
    assert "the / controller" not in flat


# ------------------------------------------------------------ work directory and env.sh


def test_lock_is_exclusive_names_the_holder_and_is_released(tmp_path: Path) -> None:
    with lock_workdir(tmp_path):
        assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(WorkdirInUseError) as err, lock_workdir(tmp_path):
            pass
        assert str(err.value) == (
            f"workdir {tmp_path} is in use by another vllm-scaler sim (pid {os.getpid()}); "
            "use --workdir"
        )
    with lock_workdir(tmp_path):  # released on exit
        pass


def test_reset_removes_the_old_tsdb_scrape_targets_and_plot_only(tmp_path: Path) -> None:
    chunk = tmp_path / "prometheus" / "data" / "01HX" / "chunks" / "000001"
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(b"old series")
    (tmp_path / "sd").mkdir()
    (tmp_path / "sd" / "controller.json").write_text('[{"targets": ["127.0.0.1:1"]}]')
    (tmp_path / "demo.png").write_bytes(b"png")
    (tmp_path / "kubeconfig").write_text("kept")
    reset_workdir(tmp_path)
    assert not (tmp_path / "prometheus").exists()
    assert not (tmp_path / "sd").exists()
    assert not (tmp_path / "demo.png").exists()
    assert (tmp_path / "kubeconfig").read_text() == "kept"
    reset_workdir(tmp_path)  # nothing to remove is fine


def test_env_file_puts_this_interpreters_bin_first_so_the_printed_command_works(
    tmp_path: Path,
) -> None:
    env_file = write_env_file(
        tmp_path / "env.sh",
        prometheus_url="http://127.0.0.1:1234",
        kubeconfig=tmp_path / "kubeconfig",
        policy=tmp_path / "policy.yaml",
    )
    bindir = Path(sys.executable).parent
    script = f'. "{env_file}" && command -v vllm-scaler && vllm-scaler --help >/dev/null'
    done = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(bindir / "vllm-scaler")
    text = env_file.read_text()
    assert "export VLLM_SCALER_PROMETHEUS_URL=http://127.0.0.1:1234\n" in text
    assert text.endswith("\n") and len(text.splitlines()) == 4  # a complete last line


# ---------------------------------------------------------------- stopping the demo


async def test_until_stopped_cancels_what_it_waits_for() -> None:
    stop = asyncio.Event()
    never = asyncio.get_running_loop().create_future()
    stop.set()
    assert await until_stopped(never, stop) == (False, None)
    assert never.cancelled()
    assert await until_stopped(asyncio.sleep(0, result=7), asyncio.Event()) == (True, 7)


async def _controller(code: int) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        f"print('invalid settings'); raise SystemExit({code})",
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    out = StringIO()

    async def pump(stream: asyncio.StreamReader = proc.stdout) -> None:
        while line := await stream.readline():
            out.write("  " + line.decode())

    task = asyncio.create_task(pump())
    task.out = out  # type: ignore[attr-defined]
    return proc, task


async def test_a_controller_exiting_early_stops_the_replay_and_says_so_after_its_output() -> None:
    proc, pump = await _controller(2)
    stop = asyncio.Event()
    out: StringIO = pump.out  # type: ignore[attr-defined]
    assert await watch_controller(proc, pump, stop, out) == 2
    assert stop.is_set()
    assert out.getvalue() == (
        "  invalid settings\ncontroller exited early with code 2: stopping the replay\n"
    )


async def test_a_controller_stopped_by_the_demo_is_no_early_exit() -> None:
    proc, pump = await _controller(0)
    stop = asyncio.Event()
    stop.set()
    out: StringIO = pump.out  # type: ignore[attr-defined]
    assert await watch_controller(proc, pump, stop, out) is None
    assert "early" not in out.getvalue()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_a_child_started_with_die_with_parent_dies_when_the_parent_is_killed() -> None:
    parent_code = (
        "import subprocess, sys\n"
        "from scaler.sim.prometheus_server import die_with_parent\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],\n"
        "                         preexec_fn=die_with_parent())\n"
        "print(child.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    assert_child_ends_with_its_parent(parent_code)


def test_die_with_parent_applies_only_on_the_main_thread() -> None:
    import threading

    assert die_with_parent() is not None or not sys.platform.startswith("linux")
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(die_with_parent()))
    worker.start()
    worker.join()
    assert seen == [None]


# ------------------------------------------------------------------ summary and plot


def _run_requests() -> list[SimRequest]:
    engine = ReplicaEngine(ReplicaModel(max_model_len=4096, kv_cache_blocks=512))
    served = SimRequest(1, 0.0, 100, 5)
    too_long = SimRequest(2, 0.0, 5000, 5)  # prompt + output > max_model_len
    engine.submit(served, 0.0)
    engine.submit(too_long, 0.0)
    engine.advance_to(60.0)
    return [served, too_long]


def test_summary_counts_rejected_requests_so_the_counts_add_up() -> None:
    requests = _run_requests()
    s = summarize(requests, [], (), start=0.0, slo_ttft_seconds=2.0, window_seconds=10.0)
    assert (s.requests, s.served, s.rejected, s.cut, s.unfinished) == (2, 1, 1, 0, 0)
    assert s.served + s.rejected + s.cut + s.unfinished == s.requests
    text = format_summary(s, title="t")
    assert "requests        2 arrived, 1 served, 1 rejected (too long), 0 cut by scale-down, " in (
        text
    )


def test_the_summary_and_the_table_say_which_replica_minutes_are_whose() -> None:
    # the live run's summary counts its tail after the slice (19.3), the table stops at the
    # slice's end (16.8): each says which, so the two figures of one run are not a mismatch
    s = summarize([], [], (), start=0.0, slo_ttft_seconds=2.0, window_seconds=10.0)
    [replicas] = [x for x in format_summary(s, title="t").splitlines() if x.startswith("replicas")]
    assert "replica-minutes over the run, its tail after the last arrival included" in replicas
    title = format_comparison([SliceRow("live", s)], duration_seconds=240).splitlines()[0]
    assert title.startswith(
        "== the same slice under each approach (over the slice's 240 s, no tail: "
        "replica-minutes stop at its end;"
    )


def test_summary_without_ttft_values_prints_n_a() -> None:
    s = summarize([], [], (), start=0.0, slo_ttft_seconds=2.0, window_seconds=10.0)
    assert math.isnan(s.ttft_p95_seconds)
    text = format_summary(s, title="t")
    assert "TTFT            p50 n/a, p95 n/a, p99 n/a (target 2 s)" in text
    assert "within target   n/a of requests; n/a of 10-second windows" in text
    assert "nan" not in text


def _requests_at(arrivals: list[float], ttft: float) -> list[SimRequest]:
    out = []
    for i, t in enumerate(arrivals):
        r = SimRequest(i, t, 10, 1, first_token_at=t + ttft, finished_at=t + ttft)
        r.tokens_generated = 1
        out.append(r)
    return out


def test_the_ttft_line_breaks_on_windows_without_requests() -> None:
    s = summarize(
        _requests_at([1.0, 12.0, 45.0], ttft=0.5),
        [],
        (),
        start=0.0,
        slo_ttft_seconds=2.0,
        window_seconds=10.0,
    )
    xs, ys = ttft_line(s)
    assert xs == [5.0, 15.0, 25.0, 35.0, 45.0]
    assert ys[:2] == [0.5, 0.5] and ys[4] == 0.5
    assert math.isnan(ys[2]) and math.isnan(ys[3])


def test_legends_do_not_cover_plotted_data() -> None:
    import matplotlib.pyplot as plt

    samples = [
        FleetSample(t=float(t), arrivals=5, spec_replicas=1 + t // 20, ready=1, starting=0,
               terminating=0, waiting=50 - t, running=3)
        for t in range(60)
    ]  # fmt: skip
    s = summarize(
        _requests_at([float(t) for t in range(60)], ttft=5.0),
        samples,
        (),
        start=0.0,
        slo_ttft_seconds=2.0,
        window_seconds=10.0,
    )
    fig = plot_figure(samples, s, title="t")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        checked = 0
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box = legend.get_window_extent(renderer)
            for line in ax.get_lines():
                for x, y in line.get_xydata():  # type: ignore[union-attr]
                    if math.isnan(y):
                        continue
                    px, py = ax.transData.transform((x, y))
                    assert not box.contains(px, py), (line.get_label(), x, y)
                    checked += 1
        assert checked > 100
    finally:
        plt.close(fig)


def test_the_shadow_policy_gets_its_own_line_and_words() -> None:
    """Decision events that carry a shadow policy's recommendation become the plot's dashed
    shadow line, and the printed decision names it."""
    from scaler.sim.demo import format_event, shadow_point

    start = 1_700_000_000.0
    event: dict[str, object] = {
        "event": "decision",
        "timestamp": "2023-11-14T22:13:40+00:00",  # start + 20 s
        "current": 2,
        "desired": 2,
        "reason": "within_tolerance",
        "signals": {},
        "shadow_desired": 3,
        "shadow_reason": "scale_up",
    }
    assert shadow_point(event, start) == (20.0, 3)
    assert format_event(event, start).endswith("| shadow 3 [scale_up]")
    assert shadow_point({**event, "event": "scaled"}, start) is None
    assert shadow_point({k: v for k, v in event.items() if k != "shadow_desired"}, start) is None

    samples = [
        FleetSample(t=float(t), arrivals=5, spec_replicas=2, ready=2, starting=0, terminating=0,
               waiting=0, running=3)
        for t in range(60)
    ]  # fmt: skip
    s = summarize([], samples, (), start=0.0, slo_ttft_seconds=2.0, window_seconds=10.0)
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    fig = plot_figure(samples, s, title="t", shadow=[(0.0, 2), (20.0, 3), (40.0, 2)])
    try:
        lines = {ln.get_label(): ln for ln in fig.axes[1].get_lines()}  # the replicas panel
        line = lines["shadow policy (desired)"]
        assert line.get_linestyle() == "--"
        assert 3 in list(line.get_ydata())  # type: ignore[arg-type]
        # every replicas line tells apart from the others by colour or style, and the
        # shadow's colour is no other line's
        looks = [(to_hex(ln.get_color()), ln.get_linestyle()) for ln in lines.values()]
        assert len(set(looks)) == len(looks), looks
        others = {to_hex(ln.get_color()) for ln in lines.values() if ln is not line}
        assert to_hex(line.get_color()) not in others, others
        # where the two are equal, the desired line is drawn over the thinner shadow and
        # the shadow still shows through its markers
        desired = lines["desired (spec)"]
        assert desired.get_zorder() > line.get_zorder()
        assert desired.get_linewidth() > line.get_linewidth()
        assert line.get_marker() == "o"
    finally:
        plt.close(fig)
