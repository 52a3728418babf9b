"""The embedded default: a real Prometheus, the simulated fleet and ``vllm-scaler run``.

``vllm-scaler sim`` starts, all on loopback:

1. the Kubernetes API stand-in holding the Deployment ``llm/vllm`` (a kubeconfig for it is
   written to the work directory);
2. the simulated fleet, one ``/metrics`` endpoint per ready replica, listed in a file-SD file;
3. Debian's ``prometheus`` scraping them every second;
4. ``vllm-scaler run`` as a separate process, pointed at both through that kubeconfig and the
   Prometheus URL, exactly as in a cluster;

then replays the trace, prints every decision of the controller as it happens, and ends with
a summary and a PNG plot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TextIO

from scaler.sim.engine import ReplicaModel
from scaler.sim.fleet import Fleet, FleetConfig
from scaler.sim.kubeapi import KubeApiServer, KubeStore, write_kubeconfig
from scaler.sim.prometheus_server import PrometheusServer, wait_for_series
from scaler.sim.report import format_summary, plot_run, summarize
from scaler.sim.serving import FleetRuntime
from scaler.sim.trace import Trace

EXAMPLE_POLICY = Path(__file__).resolve().parent.parent / "examples" / "demo-policy.yaml"
TRACES = Path(__file__).resolve().parent / "traces"
NAMED_TRACES = {
    "code": TRACES / "AzureLLMInferenceTrace_code.csv",
    "conv": TRACES / "AzureLLMInferenceTrace_conv.csv",
}


def resolve_trace(name_or_path: str) -> Path:
    """``code``/``conv`` name the bundled Azure traces; anything else is a file path."""
    return NAMED_TRACES.get(name_or_path, Path(name_or_path))


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Options of :func:`run_demo` (times in seconds)."""

    trace: Trace
    workdir: Path
    policy_file: Path = EXAMPLE_POLICY
    model_load_seconds: float = 20.0
    termination_grace_seconds: float = 120.0
    tail_seconds: float = 120.0
    control_interval_seconds: float = 5.0
    scrape_interval_seconds: float = 1.0
    slo_ttft_seconds: float = 2.0
    window_seconds: float = 10.0
    initial_replicas: int = 1
    with_controller: bool = True
    plot: bool = True


_UNITS = {"queue_depth": "", "kv_cache_usage": "", "ttft_p95": "s"}


def format_event(event: dict[str, object], start: float) -> str:
    """One compact line for a JSON log event of the controller (decisions get a table row)."""
    when = event.get("timestamp")
    t = ""
    if isinstance(when, str):
        with contextlib.suppress(ValueError):
            t = f"{datetime.fromisoformat(when).timestamp() - start:+6.0f}s "
    if event.get("event") != "decision":
        rest = {k: v for k, v in event.items() if k not in ("timestamp", "event", "level")}
        return f"{t}{event.get('level', '')}: {event.get('event')} {rest}"
    signals = event.get("signals")
    parts = []
    if isinstance(signals, dict):
        for name, value in signals.items():
            v = f"{value:.2f}{_UNITS.get(name, '')}" if isinstance(value, float) else str(value)
            parts.append(f"{name}={v}")
    change = f"{event.get('current')} -> {event.get('desired')}"
    line = (
        f"{t}replicas {change:<8} {event.get('reason')!s:<34} "
        f"ready {event.get('ready')} starting {event.get('pending')} "
        f"draining {event.get('terminating')} | {' '.join(parts)}"
    )
    if event.get("current") != event.get("desired"):
        line += f"\n        {event.get('message')}"
    return line


async def _pump(stream: asyncio.StreamReader, out: TextIO, start: float) -> None:
    while raw := await stream.readline():
        text = raw.decode(errors="replace").rstrip("\n")
        try:
            event = json.loads(text)
        except ValueError:
            out.write(f"  {text}\n")
        else:
            if isinstance(event, dict) and event.get("event") != "scaled":
                out.write(format_event(event, start) + "\n")
        out.flush()


async def run_demo(opts: DemoOptions, out: TextIO = sys.stdout) -> int:
    """Run the demo to its end; returns 0 on success. Prints progress to ``out``."""
    workdir = opts.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    sd_file = workdir / "file_sd.json"
    token = secrets.token_hex(16)
    clock = time.time
    store = KubeStore(now=clock)
    model = ReplicaModel(model_load_seconds=opts.model_load_seconds)
    fleet = Fleet(
        store,
        FleetConfig(
            model=model,
            termination_grace_seconds=opts.termination_grace_seconds,
            initial_replicas=opts.initial_replicas,
        ),
        now=clock(),
    )
    runtime = FleetRuntime(fleet, sd_file=sd_file, clock=clock)
    kube = KubeApiServer(store, token=token)
    prom = PrometheusServer(
        workdir / "prometheus",
        scrape_interval_seconds=opts.scrape_interval_seconds,
        sd_file=sd_file,
    )
    controller: asyncio.subprocess.Process | None = None
    pump: asyncio.Task[None] | None = None
    stop = asyncio.Event()
    try:
        kube_url = await kube.start()
        kubeconfig = write_kubeconfig(workdir / "kubeconfig", server_url=kube_url, token=token)
        await runtime.start()
        await prom.astart()
        env_file = workdir / "env.sh"
        env_file.write_text(
            f"export VLLM_SCALER_PROMETHEUS_URL={shlex.quote(prom.url)}\n"
            f"export VLLM_SCALER_KUBECONFIG={shlex.quote(str(kubeconfig))}\n"
            f"export VLLM_SCALER_POLICY_FILE={shlex.quote(str(opts.policy_file))}\n",
            encoding="utf-8",
        )
        out.write(
            f"trace       {opts.trace.description}\n"
            f"fleet       Deployment llm/vllm, {opts.initial_replicas} replica(s) at start, "
            f"model load {opts.model_load_seconds:g} s, drain grace "
            f"{opts.termination_grace_seconds:g} s\n"
            f"prometheus  {prom.url} (scrape every {opts.scrape_interval_seconds:g} s)\n"
            f"kube API    {kube_url} (kubeconfig {kubeconfig})\n"
            f"policy      {opts.policy_file}\n"
            f"dry run     in another shell: . {env_file} && vllm-scaler recommend --once\n\n"
        )
        out.flush()
        await wait_for_series(prom.url, "vllm:num_requests_running", timeout=30.0)
        start = clock()
        if opts.with_controller:
            env = {
                **os.environ,
                "VLLM_SCALER_PROMETHEUS_URL": prom.url,
                "VLLM_SCALER_KUBECONFIG": str(kubeconfig),
                "VLLM_SCALER_POLICY_FILE": str(opts.policy_file),
                "VLLM_SCALER_CONTROL_INTERVAL_SECONDS": str(opts.control_interval_seconds),
                "VLLM_SCALER_METRICS_PORT": "0",
                "VLLM_SCALER_LOG_FORMAT": "json",
                "VLLM_SCALER_IN_CLUSTER": "false",
            }
            controller = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "scaler", "run",
                env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
            assert controller.stdout is not None
            out.write("Decisions of vllm-scaler (every control interval):\n")
            pump = asyncio.create_task(_pump(controller.stdout, out, start))
        await runtime.replay(opts.trace, tail_seconds=opts.tail_seconds, stop=stop)
    finally:
        if controller is not None and controller.returncode is None:
            controller.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(controller.wait(), timeout=15)
            if controller.returncode is None:
                controller.kill()
                await controller.wait()
        if pump is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pump, timeout=5)
        await prom.astop()
        await runtime.stop()
        await kube.stop()

    events = tuple(
        (when - start, c.old_replicas, c.new_replicas) for when, c in fleet.scale_changes
    )
    summary = summarize(
        fleet.requests,
        runtime.samples,
        events,
        start=start,
        slo_ttft_seconds=opts.slo_ttft_seconds,
        window_seconds=opts.window_seconds,
    )
    title = f"vllm-scaler demo: {opts.trace.description}"
    out.write("\n" + format_summary(summary, title=title) + "\n")
    if opts.plot:
        png = plot_run(runtime.samples, summary, workdir / "demo.png", title=title)
        out.write(f"plot            {png}\n")
    if controller is not None and controller.returncode not in (0, None):
        out.write(f"controller exited with code {controller.returncode}\n")
        return 1
    return 0
