"""The composition root: the one place that builds clients and wires the loop together.

``run`` and ``recommend`` both come through :func:`serve`; the only difference is the
actuator's ``dry_run`` flag, so a recommendation runs exactly the code the controller runs,
minus every write verb.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

import httpx
import structlog

from scaler.actuators.api_client import ApiServerOrigin, api_server_problem, connect_api
from scaler.actuators.kubernetes import KubeApiError, KubernetesActuator, MissingContextError
from scaler.actuators.lease import LeaseClient
from scaler.actuators.resources import ResourceStatusWriter, ResourceWatch
from scaler.config.policy import Policy, TargetPolicy
from scaler.config.settings import Settings, redact_url
from scaler.controller.leader import LeaderElectionConfig, LeaderElector, default_identity
from scaler.controller.loop import Controller
from scaler.controller.reload import PolicyWatcher
from scaler.controller.report import OutputFormat, print_reports
from scaler.controller.seasonal import HistoryReader, SeasonalRefresher, SeasonalSettings
from scaler.controller.targets import resolve_targets
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import (
    ConfiguredQueryProblem,
    PrometheusSource,
    check_configured_queries,
    check_lookback,
    check_rate_window,
    client_for,
    probe_problem,
    url_hint,
)
from scaler.sources.prometheus.demand_history import HistoryRead, read_demand_history
from scaler.telemetry.health import Heartbeat
from scaler.telemetry.metrics import ScalerMetrics
from scaler.telemetry.server import TelemetryBindError, TelemetryServer

T = TypeVar("T")

#: How long a stopping leader tries to release its Lease (one write); past it, the Lease
#: expires on its own after its duration. Well within a pod's termination grace period.
RELEASE_TIMEOUT_SECONDS = 5.0
#: How long the first cycle waits for the first list of the VLLMAutoscaler resources; past
#: it, the cycles run without them until the list answers (their targets are not yet known,
#: and nothing of them is forgotten meanwhile).
RESOURCES_SYNC_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How :func:`serve` runs.

    Attributes:
        dry_run: never write to the cluster (the ``recommend`` command).
        once: run one cycle and return.
        output: ``log`` (structured logs only), ``text`` or ``json`` (print each round).
        check_queries: at start, fail when a configured signal's query returns no series.
    """

    dry_run: bool = False
    once: bool = False
    output: OutputFormat = "log"
    check_queries: bool = False


class StartupError(RuntimeError):
    """The controller cannot start; the message says why.

    Attributes:
        exit_code: 2 for a configuration error (a file, an address, the kubeconfig: the
            user must change a setting), 1 when the environment is not as expected (a
            Prometheus that cannot be queried, signals without series).
    """

    def __init__(self, message: str, *, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _kube_hint(in_cluster: bool, context: str | None = None) -> str:
    if context is not None and not in_cluster:
        return (
            "set --context NAME (VLLM_SCALER_KUBE_CONTEXT) to one of them, or leave it unset "
            "for the current-context"
        )
    if in_cluster:
        return (
            "run it in a pod, or set --kubeconfig FILE (VLLM_SCALER_KUBECONFIG) and "
            "--no-in-cluster (VLLM_SCALER_IN_CLUSTER=false)"
        )
    return (
        "set --kubeconfig FILE (VLLM_SCALER_KUBECONFIG), or --in-cluster "
        "(VLLM_SCALER_IN_CLUSTER=true) in a pod"
    )


async def serve(
    settings: Settings,
    policy: Policy,
    options: RunOptions,
    *,
    out: TextIO = sys.stdout,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Build the clients, run the loop until SIGTERM/SIGINT (or one cycle), clean up.

    ``clock`` (epoch seconds) is the controller's "now"; ``monotonic`` measures the leader
    election's durations (lease expiry, renew deadline, see
    :mod:`scaler.controller.leader`) and the probes' (:mod:`scaler.telemetry.health`).

    Returns the process exit code: 0 on a clean stop; with ``once``, 1 when a target
    could not be read (the round is printed all the same).

    Raises:
        StartupError: the TLS files or the kubeconfig cannot be loaded, the telemetry
            endpoint cannot listen, or (``check_queries``) Prometheus cannot be queried or a
            configured query returns no series.
    """
    log = structlog.get_logger("vllm_scaler")
    metrics = ScalerMetrics()
    try:
        http = client_for(settings)  # registers its credentials as secrets first
    except (OSError, ValueError) as err:  # ssl.SSLError is an OSError
        raise StartupError(f"cannot load Prometheus TLS files: {err}") from None
    source = PrometheusSource(
        http,
        base_url=str(settings.prometheus_url),
        timeout_seconds=settings.prometheus_timeout_seconds,
        rate_window_seconds=policy.rate_window_seconds,
        replica_labels=policy.replica_labels,
    )
    in_cluster = _in_cluster(settings)
    try:
        api, origin = await connect_api(
            kubeconfig=settings.kubeconfig, in_cluster=in_cluster, context=settings.kube_context
        )
    except Exception as err:
        await http.aclose()
        missing = err.context if isinstance(err, MissingContextError) else None
        hint = _kube_hint(in_cluster, missing)
        raise StartupError(f"cannot load the Kubernetes configuration: {err}; {hint}") from None
    actuator = KubernetesActuator(api, clock=clock, dry_run=options.dry_run)
    elector: LeaderElector | None = None
    if leader_election_enabled(settings) and not options.dry_run:
        elector = LeaderElector(
            LeaderElectionConfig(
                namespace=lease_namespace(settings),
                name=settings.lease_name,
                identity=settings.lease_identity or default_identity(),
                lease_duration_seconds=settings.lease_duration_seconds,
                renew_deadline_seconds=settings.lease_renew_deadline_seconds,
                retry_period_seconds=settings.lease_retry_period_seconds,
            ),
            LeaseClient(api, clock=clock),
            clock=clock,
            monotonic=monotonic,
            metrics=metrics,
        )
    watch: ResourceWatch | None = None
    if settings.watch_resources:
        watch = ResourceWatch(
            api,
            namespaces=settings.resource_namespaces,
            clock=clock,
            absent_retry_seconds=settings.resource_crd_retry_seconds,
        )
    seasonal = SeasonalRefresher(
        _history_reader(http, str(settings.prometheus_url), settings),
        clock=clock,
        settings=SeasonalSettings(interval_seconds=settings.control_interval_seconds),
    )
    controller = Controller(
        policy=policy,
        source=source,
        actuator=actuator,
        metrics=metrics,
        clock=clock,
        leader=elector,
        seasonal=seasonal,
        # A takeover happens within a lease duration; a cycle or two may pass before it.
        resume_max_gap_seconds=settings.lease_duration_seconds
        + 2 * settings.control_interval_seconds,
        resources=watch,
        status=ResourceStatusWriter(api, clock=clock) if watch and not options.dry_run else None,
        api_server=origin.server,
    )
    elector_task: asyncio.Task[None] | None = None
    watch_task: asyncio.Task[None] | None = None
    cycles_done = 0
    heartbeat = Heartbeat(settings.control_interval_seconds, clock=monotonic)
    telemetry: TelemetryServer | None = None
    if settings.metrics_port and not options.once:
        telemetry = TelemetryServer(
            metrics,
            host=settings.metrics_address,
            port=settings.metrics_port,
            live=heartbeat.live,
            ready=heartbeat.ready,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        if telemetry is not None:
            try:
                await telemetry.start()
            except TelemetryBindError as err:
                raise StartupError(str(err)) from None

        async def start_checks() -> bool:
            # the API server answers, before any read of it: one that cannot be reached is
            # named once, with what to check, not as each target's failed read
            await _check_api_server(api, origin, source, settings, fatal=options.check_queries)
            # the resources first: their targets are checked with the file's
            checked = policy
            if watch is not None:
                if options.once:
                    await watch.list_once()
                else:
                    nonlocal watch_task
                    watch_task = asyncio.create_task(watch.run(stop))
                    await watch.wait_synced(RESOURCES_SYNC_TIMEOUT_SECONDS)
                found = resolve_targets(policy.targets, watch.snapshot().items)
                checked = policy.model_copy(update={"targets": [t.policy for t in found.targets]})
            # first: Prometheus answers (a 401 is named as such, not as a missing scrape
            # interval)
            if await _probe_prometheus(source, settings, fatal=options.check_queries):
                # then: every series twice behind an HA pair (read once either way), and a
                # TTFT without data at start names a rate window that is too short
                await report_series_copies(controller, source, checked)
                await _check_rate_window(controller, source, checked)
            if options.check_queries and checked.targets:
                await _check_queries(controller, source, checked, str(settings.prometheus_url))
            if options.once:
                # one cycle (recommend): its seasonal forecast is fitted before it, not after
                await seasonal.prime(checked.targets)
            return True

        if await _unless_stopped(start_checks(), stop) is None:  # SIGTERM while starting
            log.info("stopped", cycles=0)
            return 0
        log.info(
            "started",
            targets=[t.key for t in policy.targets],
            resources=None
            if watch is None
            else {
                "namespaces": list(watch.namespaces) or "all",
                "found": len(watch.snapshot().items),
                "served": watch.snapshot().served,
            },
            dry_run=options.dry_run,
            prometheus=settings.prometheus_summary(),  # header names, file paths: no values
            interval_seconds=settings.control_interval_seconds,
            metrics_port=telemetry.port if telemetry else None,
            leader_election=None
            if elector is None
            else {
                "lease": f"{elector.config.namespace}/{elector.config.name}",
                "identity": elector.identity,
            },
        )
        if elector is not None:
            await elector.try_acquire_or_renew()  # lead from the first cycle when free
            if not options.once:
                elector_task = asyncio.create_task(elector.run(stop))
        code = 0
        # the file is re-read when it changes (a ConfigMap edited in place)
        watcher = (
            None
            if options.once
            else PolicyWatcher(
                settings.policy_file,
                policy,
                on_result=lambda ok: metrics.policy_reload_ok.set(ok),
                resources=settings.watch_resources,
            )
        )
        while not stop.is_set():
            started = time.monotonic()
            change = watcher.check() if watcher is not None else None
            if change is not None:
                controller.use_policy(change.policy, removed=change.removed)
                source.rate_window_seconds = change.policy.rate_window_seconds
            try:
                done = await _unless_stopped(controller.run_cycle(), stop)
                if done is None:  # SIGTERM mid-cycle: its queries and calls are cancelled
                    log.info("cycle_cancelled", reason="stopping")
                    break
                reports = done
            except Exception:  # a bug in one cycle must not become a crash loop...
                # ...nor pass for a completed cycle: counted, and liveness fails once no
                # cycle has completed for several intervals.
                heartbeat.failed()
                metrics.cycle_failures.inc()
                log.exception("cycle_failed", failures_in_a_row=heartbeat.failures_in_a_row)
                reports = []
                code = 1
            else:
                heartbeat.beat()
            cycles_done += 1
            if options.output != "log":
                print_reports(reports, options.output, out)
            if options.once:
                if any(r.decision is None for r in reports):
                    code = 1  # the round is printed; a target that cannot be read fails it
                break
            delay = max(0.0, settings.control_interval_seconds - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)
        log.info("stopped", cycles=cycles_done)
        return code if options.once else 0
    finally:
        stop.set()
        for task in (elector_task, watch_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if elector is not None:
            # Hand over at once instead of letting the other replica wait for expiry; within
            # a bound (an API server that does not answer must not hold the stop up until
            # the kubelet's SIGKILL: the Lease then expires on its own).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(elector.release(), timeout=RELEASE_TIMEOUT_SECONDS)
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        if telemetry is not None:
            await telemetry.stop()
        await seasonal.aclose()
        await http.aclose()
        await api.close()


async def _unless_stopped(work: Coroutine[Any, Any, T], stop: asyncio.Event) -> T | None:
    """``work``'s result, or None when ``stop`` is set first: ``work`` is then cancelled (an
    in-flight Prometheus query waits up to its timeout, several queries and Kubernetes calls
    one after another longer still, past the pod's grace period)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        return None
    return task.result()


_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def leader_election_enabled(settings: Settings) -> bool:
    """Leader election when asked, or by default when running with in-cluster configuration."""
    if settings.leader_election is not None:
        return settings.leader_election
    return _in_cluster(settings)


def lease_namespace(settings: Settings) -> str:
    """The Lease's namespace: the setting, else the pod's namespace, else ``default``."""
    if settings.lease_namespace:
        return settings.lease_namespace
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    with contextlib.suppress(OSError):
        text = _SA_NAMESPACE.read_text(encoding="utf-8").strip()
        if text:
            return text
    return "default"


def _in_cluster(settings: Settings) -> bool:
    """In-cluster configuration when asked, or by default inside a pod without a kubeconfig."""
    if settings.in_cluster is not None:
        return settings.in_cluster
    return settings.kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ


async def _check_queries(
    controller: Controller, source: PrometheusSource, policy: Policy, prometheus_url: str
) -> None:
    """Fail at start, naming each cause, when a configured signal cannot be read.

    Targets that cannot be read are reported first (a missing Deployment also leaves its
    selector without series); then the queries, by cause: Prometheus unreachable, query
    errors, or no series. Target read failures alone do not fail the check: the round
    reports them (and ``recommend --once`` exits 1). A target at 0 replicas is not checked:
    scaling is disabled for it and it has no series to find.
    """
    snapshots = {}
    unreadable: list[str] = []
    for t in policy.targets:
        try:
            snapshots[t.key] = await controller.actuator.read(t.workload, groups=t.groups)
        except KubeApiError as err:
            unreadable.append(f"{t.key}: {err}")
        except Exception as err:
            unreadable.append(f"{t.key}: {type(err).__name__}: {err}")
    # at 0 replicas scaling is disabled; without a selector the pods cannot be told (the
    # round says so): neither has series to find
    parked = {
        key for key, snap in snapshots.items() if snap.spec_replicas <= 0 or not snap.selector
    }
    checked = [t for t in policy.targets if t.key not in parked]
    snapshots = {key: snap for key, snap in snapshots.items() if key not in parked}
    problems = await check_configured_queries(source, checked, snapshots) if checked else []
    if problems:
        raise StartupError(
            format_startup_problems(unreadable, problems, redact_url(prometheus_url)), exit_code=1
        )


async def _check_api_server(
    api: Any,
    origin: ApiServerOrigin,
    source: PrometheusSource,
    settings: Settings,
    *,
    fatal: bool,
) -> None:
    """Ask the Kubernetes API server once at start (:func:`api_server_problem`). One that
    cannot be reached stops ``recommend`` (``fatal``) with that one line, and Prometheus'
    own failure beside it when it cannot be queried either (exit code 1); ``run`` logs it as
    an error and starts all the same (its cycles hold while the reads fail: a controller
    that exits would restart in a loop while the API server is away)."""
    problem = await api_server_problem(api, origin)  # api: the kubernetes-asyncio client
    if problem is None:
        return
    if not fatal:
        structlog.get_logger("vllm_scaler").error(
            "kubernetes_api_unreachable", server=origin.server, message=problem
        )
        return
    outcome = await source.probe()
    if outcome is not None:
        url = redact_url(str(settings.prometheus_url))
        problem += "\n" + probe_problem(outcome, url, settings.prometheus_auth)
    raise StartupError(problem, exit_code=1)


async def _probe_prometheus(source: PrometheusSource, settings: Settings, *, fatal: bool) -> bool:
    """Ask Prometheus one query at start; True when it answered as an API that can be queried.

    A failure is named in one line (:func:`~scaler.sources.prometheus.check.probe_problem`:
    the URL without its password, the HTTP status and the server's message). With ``fatal``
    (``recommend``) an answer that refuses the requests (an HTTP status, or not Prometheus'
    API) stops the start with exit code 1, and an unreachable Prometheus is left to the
    start-up check of the queries, which names each one; otherwise it is logged as an error
    and the loop starts all the same: its cycles hold while the reads fail.
    """
    outcome = await source.probe()
    if outcome is None:
        return True
    message = probe_problem(
        outcome, redact_url(str(settings.prometheus_url)), settings.prometheus_auth
    )
    if fatal:
        if outcome.status in _UNREACHABLE:
            return False  # the query check names every query it hit
        raise StartupError(message, exit_code=1)
    structlog.get_logger("vllm_scaler").error(
        "prometheus_probe_failed",
        url=redact_url(str(settings.prometheus_url)),
        status=str(outcome.status),
        http_status=outcome.http_status,
        message=message,
    )
    return False


async def report_series_copies(
    controller: Controller, source: PrometheusSource, policy: Policy
) -> None:
    """At start: say once whether the targets' series arrive once per replica of an HA
    Prometheus pair (the queries read one copy either way; deduplicating in the query front
    end saves the backend that work), and export how many copies each series has."""
    copies = await source.probe_series_copies(policy.targets)
    if copies is None:
        return
    count = max((len(v) for v in copies.values()), default=1)
    controller.metrics.series_copies.set(count)
    if copies:
        shown = "; ".join(f"{name}: {', '.join(values)}" for name, values in copies.items())
        structlog.get_logger("vllm_scaler").warning(
            "series_copies_collapsed",
            labels=copies,
            copies=count,
            message=f"every vLLM series arrives {count} times, once per Prometheus replica "
            f"({shown}): each is read once (the largest of its copies); deduplicate in the "
            "query front end (Thanos Query's --query.replica-label, Mimir's HA tracker) to "
            "spare the backend the copies, or set replica_labels in the policy if another "
            "label tells them apart",
        )


async def _check_rate_window(
    controller: Controller, source: PrometheusSource, policy: Policy
) -> None:
    """At start: find the pods' scrape interval (exported, and kept by the source so that a
    TTFT without data names the window) and warn, with both numbers and the fix, about a
    rate window shorter than four scrape intervals, and about a backend lookback shorter
    than two (its gauges vanish between scrapes)."""
    log = structlog.get_logger("vllm_scaler")
    metrics = controller.metrics
    metrics.rate_window.set(policy.rate_window_seconds)
    snapshots = {}
    for t in policy.targets:
        with contextlib.suppress(Exception):  # an unreadable target is reported by the round
            snapshots[t.key] = await controller.actuator.read(t.workload, groups=t.groups)
    for problem in await check_rate_window(source, policy.targets, snapshots):
        log.warning(
            "rate_window_too_short",
            target=problem.target,
            rate_window_seconds=problem.rate_window_seconds,
            scrape_interval_seconds=problem.scrape_interval_seconds,
            minimum_seconds=problem.minimum_seconds,
            message=str(problem),
        )
    for key, seconds in source.scrape_intervals.items():
        metrics.scrape_interval.labels(key).set(seconds)
    for short in await check_lookback(source, source.scrape_intervals):
        log.warning(
            "query_lookback_too_short",
            target=short.target,
            lookback_seconds=short.lookback_seconds,
            scrape_interval_seconds=short.scrape_interval_seconds,
            message=str(short),
        )


_UNREACHABLE = frozenset({SignalStatus.TRANSPORT, SignalStatus.TIMEOUT})
_NO_SERIES = frozenset({SignalStatus.EMPTY, SignalStatus.ABSENT})


def format_startup_problems(
    unreadable: list[str], problems: list[ConfiguredQueryProblem], prometheus_url: str
) -> str:
    """The start-up check's message: unreadable targets, then query problems by cause."""
    sections: list[str] = []
    if unreadable:
        sections.append("cannot read targets in Kubernetes:\n  " + "\n  ".join(unreadable))
    down = [p for p in problems if p.status in _UNREACHABLE]
    failed = [p for p in problems if p.status not in _UNREACHABLE | _NO_SERIES]
    empty = [p for p in problems if p.status in _NO_SERIES]
    if down:
        # Every query fails the same way; name each failure once, with the signals it hit.
        by_cause: dict[str, list[str]] = {}
        for p in down:
            by_cause.setdefault(f"{p.status}: {p.detail}", []).append(f"{p.target} {p.signal}")
        # the hints every other command gives (an https:// URL that reached plain http)
        sections.append(
            f"Prometheus at {prometheus_url} is unreachable:\n  "
            + "\n  ".join(
                f"{cause} ({', '.join(who)}){url_hint(prometheus_url, None, cause)}"
                for cause, who in by_cause.items()
            )
        )
    if failed:
        sections.append("Prometheus queries fail:\n  " + "\n  ".join(str(p) for p in failed))
    # one line each, naming the target, the signal and the query that returned nothing
    sections += [str(p) for p in empty]
    return "\n".join(sections)


def _history_reader(http: httpx.AsyncClient, base_url: str, settings: Settings) -> HistoryReader:
    """The seasonal refresher's history reader, bound to the source's HTTP client: 14 days at
    a 10-minute step (:class:`~scaler.controller.seasonal.SeasonalSettings`), each query
    allowed ten times a cycle's timeout (a range query reads 2,017 steps)."""
    defaults = SeasonalSettings()

    async def read(targets: Sequence[TargetPolicy], end: float) -> HistoryRead:
        return await read_demand_history(
            http,
            base_url,
            targets,
            end=end,
            history_seconds=defaults.history_seconds,
            step_seconds=defaults.step_seconds,
            timeout_seconds=10 * settings.prometheus_timeout_seconds,
        )

    return read
