"""The embedded default: a real Prometheus, the simulated fleet and ``vllm-scaler run``.

``vllm-scaler sim`` starts, all on loopback:

1. the Kubernetes API stand-in holding the Deployment ``llm/vllm`` (a kubeconfig for it is
   written to the work directory);
2. the simulated fleet, one ``/metrics`` endpoint per ready replica, listed in a file-SD file;
3. Debian's ``prometheus`` scraping them every second;
4. ``vllm-scaler run`` as a separate process, pointed at both through that kubeconfig and the
   Prometheus URL, exactly as in a cluster; it serves its own ``/metrics`` (``vllm_scaler_*``)
   on loopback as ``run`` does, and Prometheus scrapes them (job ``vllm-scaler``);

then replays the trace, prints every decision of the controller as it happens, and ends with
a summary and a PNG plot.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import fcntl
import json
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO, TypeVar

import yaml

from scaler.config.policy import Policy, load_policy
from scaler.sim.catalog import NAMED_TRACES as NAMED_TRACES  # re-exported for callers
from scaler.sim.cluster import CONTROLLER_JOB, SimCluster
from scaler.sim.engine import ReplicaModel, SimRequest
from scaler.sim.fleet import FleetConfig, FleetSample
from scaler.sim.prometheus_server import die_with_parent, free_port, wait_for_series
from scaler.sim.report import (
    Baseline,
    RunSummary,
    SliceRow,
    format_comparison,
    format_summary,
    plot_run,
    slice_row,
    summarize,
)
from scaler.sim.trace import Trace
from scaler.telemetry.logging import format_fields

if TYPE_CHECKING:  # the real control plane is imported only when it is asked for
    from scaler.sim.controlplane import Cluster
    from scaler.sim.kube_real import RealKubeCluster

EXAMPLE_POLICY = Path(__file__).resolve().parent.parent / "examples" / "demo-policy.yaml"


_T = TypeVar("_T")

#: The simulated fleet's workload, as a policy's ``workload`` names it.
FLEET_WORKLOAD = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "namespace": FleetConfig().namespace,
    "name": FleetConfig().name,
}


def fleet_target_error(policy: Policy) -> str | None:
    """Why ``policy`` cannot run against the simulated fleet, or None when it can.

    The fleet is one workload (:data:`FLEET_WORKLOAD`); every other target of a policy could
    never be read, and each of its control cycles would fail. The error names the targets
    that are not the fleet, the fleet and how to fix the file.
    """
    fleet = FLEET_WORKLOAD
    others = [
        t.key
        for t in policy.targets
        if (t.workload.api_version, t.workload.kind, t.workload.namespace, t.workload.name)
        != (fleet["apiVersion"], fleet["kind"], fleet["namespace"], fleet["name"])
    ]
    if not others:
        return None
    noun = "target" if len(others) == 1 else "targets"
    return (
        f"{noun} {', '.join(others)} of the policy {'is' if len(others) == 1 else 'are'} not "
        f"the simulated fleet's workload {fleet['kind']} {fleet['namespace']}/{fleet['name']} "
        f"({fleet['apiVersion']}): give the policy one target whose workload is "
        f"{{apiVersion: {fleet['apiVersion']}, kind: {fleet['kind']}, namespace: "
        f"{fleet['namespace']}, name: {fleet['name']}}} (bench --policy runs a policy's first "
        "target whatever its workload)"
    )


#: Signals that stop the demo like Ctrl-C: the replay ends, everything started is cleaned up
#: and the summary of what ran is printed.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class CapacitySeedLike(Protocol):
    """A profile's capacity seed (:class:`scaler.bench.demo.CapacitySeed`)."""

    @property
    def prompt_tokens_per_second(self) -> float: ...
    @property
    def generation_tokens_per_second(self) -> float: ...
    @property
    def requests_per_second(self) -> float: ...


class ReplayRun(Protocol):
    """What a replayed run recorded (:class:`scaler.bench.simulate.RunRecord`)."""

    @property
    def requests(self) -> Sequence[SimRequest]: ...
    @property
    def samples(self) -> Sequence[FleetSample]: ...
    @property
    def scale_events(self) -> Sequence[tuple[float, int, int]]: ...


class Replayed(Protocol):
    """One replayed row (:class:`scaler.bench.demo.Replay`)."""

    @property
    def label(self) -> str: ...
    @property
    def run(self) -> ReplayRun: ...


class SliceBench(Protocol):
    """The bench's side of the demo (:class:`scaler.bench.demo.DemoBench`): the command line
    joins it in, as this layer is below the bench's."""

    def seed_for(self, trace: Trace) -> CapacitySeedLike:
        """A profile of one replica on ``trace``'s mix, as capacity seeds."""
        ...

    def starting_replicas(self, trace: Trace) -> int:
        """The replicas the first minute of ``trace`` needs."""
        ...

    def replays(self, trace: Trace, policy: Policy, initial_replicas: int) -> Sequence[Replayed]:
        """``trace`` replayed in virtual time: vllm-scaler with ``policy``, and KEDA."""
        ...


class WorkdirInUseError(RuntimeError):
    """Another ``vllm-scaler sim`` holds the work directory's lock."""


@contextlib.contextmanager
def lock_workdir(workdir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``workdir`` (``fcntl.flock`` of ``<workdir>/.lock``).

    The lock dies with the process, so a killed run never leaves a stale lock behind. The
    holder writes its pid into the file so that the refusal can name it.

    Raises:
        WorkdirInUseError: another process holds it (non-blocking).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            raise WorkdirInUseError(
                f"workdir {workdir} is in use by another vllm-scaler sim (pid {holder}); "
                "use --workdir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def reset_workdir(workdir: Path) -> None:
    """Remove what an earlier run left that would leak into this one.

    Prometheus starts on a fresh TSDB (an interrupted run's series, with the same pod
    names, would otherwise be scaled on), and an old plot is removed so that a run that
    ends early cannot be mistaken for one that drew it. The scrape targets go too (an earlier
    controller's ``/metrics`` port would be scraped as down).
    """
    shutil.rmtree(workdir / "prometheus", ignore_errors=True)
    shutil.rmtree(workdir / "sd", ignore_errors=True)
    (workdir / "demo.png").unlink(missing_ok=True)


def write_env_file(path: Path, *, prometheus_url: str, kubeconfig: Path, policy: Path) -> Path:
    """Write the ``env.sh`` a dry run from another shell sources.

    It puts this interpreter's ``bin`` directory (the venv's, where ``vllm-scaler`` lives)
    first on ``PATH``, so ``. env.sh && vllm-scaler recommend --once`` works as printed.
    """
    bindir = Path(sys.executable).parent  # not resolved: a venv's python is a symlink
    path.write_text(
        f'export PATH={shlex.quote(str(bindir))}:"$PATH"\n'
        f"export VLLM_SCALER_PROMETHEUS_URL={shlex.quote(prometheus_url)}\n"
        f"export VLLM_SCALER_KUBECONFIG={shlex.quote(str(kubeconfig))}\n"
        f"export VLLM_SCALER_POLICY_FILE={shlex.quote(str(policy))}\n",
        encoding="utf-8",
    )
    return path


#: The Prometheus client settings that belong to a real Prometheus, not to the demo's own.
_FOREIGN_PROMETHEUS = tuple(
    f"VLLM_SCALER_PROMETHEUS_{name}"
    for name in ("BEARER_TOKEN_FILE", "CA_FILE", "CLIENT_CERT_FILE", "CLIENT_KEY_FILE", "HEADERS")
)


def controller_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the demo's controller starts with: ours without the credentials and
    TLS files of a real Prometheus (the demo's Prometheus is a local one that needs none, and
    a token is never sent to it). Other ``VLLM_SCALER_*`` settings pass on."""
    return {k: v for k, v in environ.items() if k.upper() not in _FOREIGN_PROMETHEUS}


async def until_stopped(aw: Awaitable[_T], stop: asyncio.Event) -> tuple[bool, _T | None]:
    """Await ``aw`` unless ``stop`` is set first (then ``aw`` is cancelled).

    Returns:
        ``(True, result)`` when ``aw`` finished, ``(False, None)`` when stopped.
    """
    task = asyncio.ensure_future(aw)
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait((task, stopper), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if task.done():
        return True, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False, None


async def watch_controller(
    proc: asyncio.subprocess.Process,
    pump: asyncio.Task[None] | None,
    stop: asyncio.Event,
    out: TextIO,
) -> int | None:
    """Wait for the controller process; if it exits before ``stop``, say so and set ``stop``.

    Its output is pumped first, so its last words (the reason it exited) come before ours.

    Returns:
        The exit code when the controller exited early (before ``stop``), else None.
    """
    if pump is not None:
        with contextlib.suppress(Exception):
            await pump
    code = await proc.wait()
    if not stop.is_set():
        out.write(f"controller exited early with code {code}: stopping the replay\n")
        out.flush()
        stop.set()
        return code
    return None


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Options of :func:`run_demo` (times in seconds).

    ``metrics_port``: where the controller serves its own ``/metrics`` on 127.0.0.1 (None: a
    free port; 0: not served, as ``run``'s ``metrics_port`` 0).

    ``bench``: the bench's side (a profile seed, the starting fleet, the replays beside the
    live run when ``compare``); None runs the live demo alone. ``profile_seed``: seed the
    capacity signal of the policy's target from the bench's profile when the policy has no
    seed. ``initial_replicas`` None: what the slice's first minute needs (the bench's
    estimate; 1 without a bench).
    """

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
    initial_replicas: int | None = None
    with_controller: bool = True
    metrics_port: int | None = None
    plot: bool = True
    routing: str = "random"
    seed: int = 0
    trace_summary: str = ""
    bench: SliceBench | None = None
    profile_seed: bool = True
    compare: bool = True
    #: ``stand-in`` (the API stand-in, the fleet playing the ReplicaSet) or ``real`` (a real
    #: control plane: :class:`~scaler.sim.kube_real.RealKubeCluster`)
    kube: str = "stand-in"
    #: with ``kube="real"``, a cluster to run on instead of starting a control plane
    kube_cluster: Cluster | None = None


_UNITS = {"queue_depth": "", "kv_cache_usage": "", "ttft_p95": "s"}


def _tokens(x: float) -> str:
    return f"{x / 1e3:.3g}k" if x >= 1e3 else f"{x:.3g}"


def format_event(event: dict[str, object], start: float, capacity_unit: str = "tok/s") -> str:
    """One compact line for a JSON log event of the controller (decisions get a table row);
    ``capacity_unit``: the capacity signal's unit (``CapacitySignal.unit_text``)."""
    when = event.get("timestamp")
    t = ""
    if isinstance(when, str):
        with contextlib.suppress(ValueError):
            t = f"{datetime.fromisoformat(when).timestamp() - start:+6.0f}s "
    if event.get("event") != "decision":
        rest = {k: v for k, v in event.items() if k not in ("timestamp", "event", "level")}
        return f"{t}{event.get('level', '')}: {event.get('event')} {format_fields(rest)}"
    signals = event.get("signals")
    parts = []
    targets = event.get("signal_targets")
    targets = targets if isinstance(targets, dict) else {}
    if isinstance(signals, dict):
        for name, value in signals.items():
            target = targets.get(name)
            if name == "capacity" and isinstance(value, float | int):
                # its value is the forecast demand per replica, not the capacity
                shown = f"demand={_tokens(value)}/replica"
                if isinstance(target, float | int):
                    shown += f" target={_tokens(target)}"
                parts.append(f"{shown} {capacity_unit}")
                continue
            v = f"{value:.2f}{_UNITS.get(name, '')}" if isinstance(value, float) else str(value)
            parts.append(f"{name}={v}")
    change = f"{event.get('current')} -> {event.get('desired')}"
    line = (
        f"{t}replicas {change:<8} {event.get('reason')!s:<34} "
        f"ready {event.get('ready')} starting {event.get('starting')} "
        f"draining {event.get('terminating')} | {' '.join(parts)}"
    )
    if "shadow_desired" in event:
        line += f" | shadow {event.get('shadow_desired')} [{event.get('shadow_reason')}]"
    if event.get("current") != event.get("desired"):
        line += f"\n        {event.get('message')}"
    return line


def shadow_point(event: dict[str, object], start: float) -> tuple[float, int] | None:
    """``(seconds since start, shadow desired replicas)`` of a decision event that carries a
    shadow policy's recommendation, else None."""
    when, desired = event.get("timestamp"), event.get("shadow_desired")
    if event.get("event") != "decision" or not isinstance(when, str):
        return None
    if not isinstance(desired, int):
        return None
    try:
        return datetime.fromisoformat(when).timestamp() - start, desired
    except ValueError:
        return None


#: The fields of a decision event that make it worth a line again: what was decided, on which
#: fleet, and what the shadow would write (signal values move every cycle and are shown on
#: those lines).
_DECISION_FACTS = (
    "current",
    "desired",
    "reason",
    "ready",
    "starting",
    "terminating",
    "shadow_desired",
)


#: Fields of the other events that are measurements of the moment, not facts (the requests
#: in flight of the pods a held scale-down chose move every cycle).
_MEASURED_FIELDS = ("timestamp", "in_flight")


def event_facts(event: Mapping[str, object]) -> tuple[object, ...]:
    """What an event says beside when: a decision's :data:`_DECISION_FACTS` and its signals'
    statuses (``learning``, ``idle``...; not their values), any other event's fields but its
    :data:`_MEASURED_FIELDS`."""
    if event.get("event") == "decision":
        signals = event.get("signals")
        statuses = (
            tuple(sorted((k, v) for k, v in signals.items() if isinstance(v, str)))
            if isinstance(signals, dict)
            else ()
        )
        return (*(event.get(k) for k in _DECISION_FACTS), statuses)
    return tuple(
        sorted(
            (k, json.dumps(v, sort_keys=True, default=str))
            for k, v in event.items()
            if k not in _MEASURED_FIELDS
        )
    )


class ChangesOnly:
    """Which of the controller's events to print: each event (per target) the first time, then
    only when its facts (:func:`event_facts`) change, so that a fact repeated every cycle (the
    pods a held scale-down chose, a decision to hold at the same count) is printed once."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[object, ...]] = {}

    def wants(self, event: Mapping[str, object]) -> bool:
        """True when ``event`` says something its last printed one did not."""
        key = (str(event.get("event")), str(event.get("target", "")))
        facts = event_facts(event)
        if self._last.get(key) == facts:
            return False
        self._last[key] = facts
        return True


async def pump_controller_log(
    stream: asyncio.StreamReader,
    out: TextIO,
    start: float,
    seen: collections.Counter[str] | None = None,
    shadow: list[tuple[float, int]] | None = None,
    capacity_unit: str = "tok/s",
) -> None:
    """Print the controller's JSON log lines as :func:`format_event` lines (other lines
    indented as they are), each event only when it says something new (:class:`ChangesOnly`),
    count each event name in ``seen`` (``cycle_failed``...) and collect the shadow policy's
    recommendations in ``shadow`` (:func:`shadow_point`)."""
    changes = ChangesOnly()
    while raw := await stream.readline():
        text = raw.decode(errors="replace").rstrip("\n")
        try:
            event = json.loads(text)
        except ValueError:
            out.write(f"  {text}\n")
        else:
            if isinstance(event, dict):
                if seen is not None:
                    seen[str(event.get("event"))] += 1
                if event.get("event") != "scaled" and changes.wants(event):
                    out.write(format_event(event, start, capacity_unit) + "\n")
                point = shadow_point(event, start)
                if point is not None and shadow is not None:
                    shadow.append(point)
        out.flush()


#: ``sim``'s exit code when a control cycle of the controller failed (``cycle_failed``).
FAILED_CYCLES_EXIT_CODE = 3

#: The controller's log events of a failed control cycle: one that ended with an exception,
#: or could not read or scale its target (the demo runs one target, so one event is one
#: cycle).
FAILED_CYCLE_EVENTS = ("cycle_failed", "target_read_failed", "scale_failed")


def count_failed_cycles(seen: Mapping[str, int]) -> int:
    """The failed control cycles among the controller's log events counted by name."""
    return sum(seen.get(name, 0) for name in FAILED_CYCLE_EVENTS)


def demo_exit_code(
    *,
    stop_signal: int | None,
    early_exit_code: int | None,
    controller_exit_code: int | None,
    failed_cycles: int | None,
) -> tuple[int, str]:
    """The demo's exit code and the line that explains it (empty for 0), most serious first:
    128 + a stop signal's number; 1 when the controller exited early or with an error;
    :data:`FAILED_CYCLES_EXIT_CODE` when one of its control cycles failed; else 0."""
    if stop_signal is not None:
        return 128 + stop_signal, ""
    if early_exit_code is not None:
        return 1, f"controller exited early with code {early_exit_code}; the run ended without it"
    if controller_exit_code not in (0, None):
        return 1, f"controller exited with code {controller_exit_code}"
    if failed_cycles:
        return FAILED_CYCLES_EXIT_CODE, (
            f"{failed_cycles} control cycle(s) of the controller failed "
            f"({', '.join(FAILED_CYCLE_EVENTS)} above): "
            f"exit code {FAILED_CYCLES_EXIT_CODE}"
        )
    return 0, ""


#: Receives the run's summary and the plot's path (None when none was drawn).
SummaryReport = Callable[[RunSummary, Path | None], None]


async def run_demo(
    opts: DemoOptions, out: TextIO | None = None, *, report: SummaryReport | None = None
) -> int:
    """Run the demo to its end; returns 0 on success. Prints progress to ``out`` (default:
    stdout), and hands the summary to ``report`` too when given (``--output json``).

    SIGINT, SIGTERM and SIGHUP stop the replay; everything started is stopped and the
    summary of what ran is printed (the exit code is then 128 + the signal's number). A
    controller that exits early stops the replay too (exit code 1). A control cycle of the
    controller that failed is counted in the summary and makes the exit code
    :data:`FAILED_CYCLES_EXIT_CODE` (see :func:`demo_exit_code`).

    Raises:
        WorkdirInUseError: another ``vllm-scaler sim`` runs on the same work directory.
    """
    workdir = opts.workdir.resolve()
    with lock_workdir(workdir):
        reset_workdir(workdir)
        return await _run_locked(opts, workdir, out or sys.stdout, report)


def seeded_policy(source: Path, policy: Policy, seed: CapacitySeedLike, dest: Path) -> Path | None:
    """Write the policy file ``source`` to ``dest`` with its first target's capacity seeds set
    to ``seed``; None (nothing written) when that target's capacity signal is off or the file
    seeds it already. ``policy`` is ``source`` loaded.

    Raises:
        PolicyError: the seeded file is no valid policy (a seed out of its bounds).
    """
    target = policy.targets[0]
    if not target.signals.capacity_enabled or target.signals.capacity.seed_tokens_per_second:
        return None
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    first = doc["targets"][0]
    signals = first["signals"] = first.get("signals") or {}
    capacity = signals["capacity"] = signals.get("capacity") or {}
    capacity["seed_prompt_tokens_per_second"] = seed.prompt_tokens_per_second
    capacity["seed_generation_tokens_per_second"] = seed.generation_tokens_per_second
    capacity["seed_requests_per_second"] = seed.requests_per_second
    dest.write_text(
        f"# {source} with the capacity seeds of a profile of one simulated replica on the\n"
        "# demo's request mix, written by vllm-scaler sim for its controller.\n"
        + yaml.safe_dump(doc, sort_keys=False),
        encoding="utf-8",
    )
    load_policy(dest, given_as="the seeded policy")
    return dest


def _tokens_per_second(x: float) -> str:
    return f"{x / 1e3:.3g}k" if x >= 1e3 else f"{x:.3g}"


def seed_line(seed: CapacitySeedLike, slo_ttft_seconds: float) -> str:
    """The header line that says the capacity signal starts from a profile, and which."""
    return (
        f"capacity    seeded from a profile of one replica on this slice's mix (as vllm bench "
        f"serve measures one): {_tokens_per_second(seed.prompt_tokens_per_second)} prompt + "
        f"{_tokens_per_second(seed.generation_tokens_per_second)} generated tokens/s at TTFT "
        f"p95 <= {slo_ttft_seconds:g} s ({seed.requests_per_second:.2f} requests/s); it learns "
        "on from there (--no-profile-seed: from nothing)"
    )


async def _run_locked(
    opts: DemoOptions, workdir: Path, out: TextIO, report: SummaryReport | None = None
) -> int:
    clock = time.time
    policy = load_policy(opts.policy_file)
    initial = opts.initial_replicas
    if initial is None:
        initial = opts.bench.starting_replicas(opts.trace) if opts.bench is not None else 1
    policy_file, seeding = opts.policy_file, ""
    if opts.bench is not None and opts.profile_seed:
        seed = opts.bench.seed_for(opts.trace)
        written = seeded_policy(opts.policy_file, policy, seed, workdir / "policy-seeded.yaml")
        if written is not None:
            policy_file, policy = written, load_policy(written)
            seeding = seed_line(seed, opts.slo_ttft_seconds) + "\n"
    unit = policy.targets[0].signals.capacity.unit_text if policy.targets else "tok/s"
    fleet_config = FleetConfig(
        model=ReplicaModel(model_load_seconds=opts.model_load_seconds),
        termination_grace_seconds=opts.termination_grace_seconds,
        initial_replicas=initial,
        routing=opts.routing,
        seed=opts.seed,
    )
    cluster: SimCluster | RealKubeCluster
    if opts.kube == "real":
        from scaler.sim.kube_real import RealKubeCluster

        cluster = RealKubeCluster(
            workdir,
            fleet_config,
            scrape_interval_seconds=opts.scrape_interval_seconds,
            clock=clock,
            cluster=opts.kube_cluster,
        )
    else:
        cluster = SimCluster(
            workdir, fleet_config, scrape_interval_seconds=opts.scrape_interval_seconds,
            clock=clock,
        )  # fmt: skip
    fleet, runtime, prom = cluster.fleet, cluster.runtime, cluster.prometheus
    shadow: list[tuple[float, int]] = []  # the shadow policy's recommendations, if it has one
    controller: asyncio.subprocess.Process | None = None
    pump: asyncio.Task[None] | None = None
    seen: collections.Counter[str] = collections.Counter()  # the controller's events by name
    watcher: asyncio.Task[int | None] | None = None
    stop = asyncio.Event()
    received: list[signal.Signals] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if not received:
            out.write(f"\n{sig.name}: stopping the replay and cleaning up\n")
            out.flush()
        received.append(sig)
        stop.set()

    for sig in STOP_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig)
    start = clock()
    try:
        await until_stopped(cluster.start(), stop)
        kubeconfig = cluster.kubeconfig
        if stop.is_set():
            return 128 + received[0] if received else 1
        env_file = write_env_file(
            workdir / "env.sh",
            prometheus_url=prom.url,
            kubeconfig=kubeconfig,
            policy=policy_file,
        )
        metrics_port = 0
        if opts.with_controller and opts.metrics_port != 0:
            metrics_port = opts.metrics_port or free_port()
            cluster.scrape_controller(metrics_port)
        if opts.trace_summary:
            out.write(opts.trace_summary + "\n")
        out.write(
            f"trace       {opts.trace.description}\n"
            f"fleet       Deployment llm/vllm, {initial} replica(s) at start"
            + (" (what the slice's first minute needs)" if opts.initial_replicas is None else "")
            + ", "
            f"model load {opts.model_load_seconds:g} s, drain grace "
            f"{opts.termination_grace_seconds:g} s, routing {opts.routing}\n"
            f"prometheus  {prom.url} (scrape every {opts.scrape_interval_seconds:g} s)\n"
            f"kube API    {cluster.describe()}\n"
            f"policy      {policy_file}\n"
            + seeding
            + (
                f"metrics     http://127.0.0.1:{metrics_port}/metrics (the controller's "
                f"vllm_scaler_* series; Prometheus scrapes them as job {CONTROLLER_JOB})\n"
                if metrics_port
                else ""
            )
            + f"dry run     in another shell: . {shlex.quote(str(env_file))} && "
            "vllm-scaler recommend --once\n\n"
        )
        out.flush()
        await until_stopped(
            wait_for_series(prom.url, "vllm:num_requests_running", timeout=30.0), stop
        )
        start = clock()
        if opts.with_controller and not stop.is_set():
            env = {
                **controller_environment(os.environ),
                "VLLM_SCALER_PROMETHEUS_URL": prom.url,
                "VLLM_SCALER_KUBECONFIG": str(kubeconfig),
                "VLLM_SCALER_POLICY_FILE": str(policy_file),
                "VLLM_SCALER_CONTROL_INTERVAL_SECONDS": str(opts.control_interval_seconds),
                "VLLM_SCALER_METRICS_PORT": str(metrics_port),
                "VLLM_SCALER_METRICS_ADDRESS": "127.0.0.1",
                "VLLM_SCALER_LOG_FORMAT": "json",
                "VLLM_SCALER_IN_CLUSTER": "false",
            }
            controller = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "scaler", "run",
                env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                preexec_fn=die_with_parent(),  # gone with us even if we are killed hard
            )  # fmt: skip
            assert controller.stdout is not None
            out.write(
                "Decisions of vllm-scaler (a line when the decision, the fleet or a signal's "
                "status changes):\n"
            )
            pump = asyncio.create_task(
                pump_controller_log(controller.stdout, out, start, seen, shadow, capacity_unit=unit)
            )
            watcher = asyncio.create_task(watch_controller(controller, pump, stop, out))
        if not stop.is_set():
            await runtime.replay(opts.trace, tail_seconds=opts.tail_seconds, stop=stop)
    finally:
        stop.set()  # from here on, a controller exit is ours, not an early one
        if controller is not None and controller.returncode is None:
            controller.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(controller.wait(), timeout=15)
            if controller.returncode is None:
                controller.kill()
                await controller.wait()
        for task in (pump, watcher):
            if task is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, timeout=5)
        await cluster.stop()
        for sig in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)

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
    if controller is not None:
        summary = dataclasses.replace(summary, failed_cycles=count_failed_cycles(seen))
    title = f"vllm-scaler demo: {opts.trace.description}, routing {opts.routing}"
    out.write("\n" + format_summary(summary, title=title) + "\n")
    baselines: list[Baseline] = []
    compared = opts.bench is not None and opts.compare and controller is not None
    if compared and runtime.samples and not received:
        rows, baselines = await _compare(
            opts, policy, initial, summary, fleet.requests, runtime.samples, start
        )
        summary = dataclasses.replace(summary, comparison=tuple(rows))
        out.write(
            "\n" + format_comparison(rows, duration_seconds=opts.trace.duration_seconds) + "\n"
        )
    png: Path | None = None
    if opts.plot and runtime.samples:
        png = plot_run(
            runtime.samples,
            summary,
            workdir / "demo.png",
            title=title,
            shadow=shadow,
            baselines=baselines,
        )
        out.write(f"plot            {png}\n")
    if report is not None:
        report(summary, png)
    code, why = demo_exit_code(
        stop_signal=received[0] if received else None,
        early_exit_code=watcher.result()
        if watcher is not None and watcher.done() and not watcher.cancelled()
        else None,
        controller_exit_code=None if controller is None else controller.returncode,
        failed_cycles=summary.failed_cycles,
    )
    if why:
        out.write(why + "\n")
    return code


#: The live run's row in the comparison.
LIVE_LABEL = "vllm-scaler (this run, live)"


async def _compare(
    opts: DemoOptions,
    policy: Policy,
    initial_replicas: int,
    live: RunSummary,
    requests: Sequence[SimRequest],
    samples: Sequence[FleetSample],
    start: float,
) -> tuple[list[SliceRow], list[Baseline]]:
    """The live run beside the bench's replays of the same slice: one :class:`SliceRow`
    each (over the slice), and the replays other than vllm-scaler's as plot baselines."""
    assert opts.bench is not None
    duration, slo = opts.trace.duration_seconds, opts.slo_ttft_seconds
    rows = [
        slice_row(
            LIVE_LABEL,
            requests,
            samples,
            live.scale_events,
            start=start,
            duration_seconds=duration,
            slo_ttft_seconds=slo,
            window_seconds=opts.window_seconds,
        )
    ]
    baselines = []
    # in a thread: the bench's controller runs its own event loop
    replays = await asyncio.to_thread(opts.bench.replays, opts.trace, policy, initial_replicas)
    for replay in replays:
        run = replay.run
        row = slice_row(
            replay.label,
            run.requests,
            run.samples,
            run.scale_events,
            start=0.0,
            duration_seconds=duration,
            slo_ttft_seconds=slo,
            window_seconds=opts.window_seconds,
        )
        rows.append(row)
        if not replay.label.startswith("vllm-scaler"):
            baselines.append(Baseline(replay.label, tuple(run.samples), row.summary))
    return rows, baselines
