"""vllm-scaler's own Prometheus metrics (prometheus-client), on a registry we own.

All names start with ``vllm_scaler_``; per-target series carry ``target`` (``ns/Kind/name``).
The dashboards in ``dashboards/`` and the alerts in ``deploy/`` read exactly these names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics import MetricWrapperBase

from scaler import __version__
from scaler.config.signal_specs import SPECS
from scaler.core.decide import Decision
from scaler.core.reasons import Reason
from scaler.core.signals import SignalStatus

_CYCLE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ScalerMetrics:
    """Holds every metric vllm-scaler exports; one instance per process (or per test)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        if registry is None:
            registry = CollectorRegistry()
            # The standard process_* (RSS, CPU, open fds), python_gc_* and python_info series
            # every Python exporter has, so memory and CPU can be watched over weeks.
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)
        self.registry = registry
        r = self.registry
        t = ["target"]
        self.current_replicas = Gauge(
            "vllm_scaler_current_replicas",
            "spec.replicas of the target's scale subresource.",
            t,
            registry=r,
        )
        self.desired_replicas = Gauge(
            "vllm_scaler_desired_replicas", "Replicas the last decision asked for.", t, registry=r
        )
        self.recommended_replicas = Gauge(
            "vllm_scaler_recommended_replicas",
            "Replicas the signals asked for, before stabilization, step limits and min/max.",
            t,
            registry=r,
        )
        self.ready_replicas = Gauge(
            "vllm_scaler_ready_replicas", "Live pods whose Ready condition is True.", t, registry=r
        )
        # Starting replicas; the metric keeps its first name (see scaler.core.reasons).
        self.starting_replicas = Gauge(
            "vllm_scaler_pending_replicas",
            "Replicas asked for that are not ready yet and younger than the model load timeout.",
            t,
            registry=r,
        )
        self.stuck_replicas = Gauge(
            "vllm_scaler_stuck_replicas",
            "Pods not ready and older than the model load timeout (e.g. Pending for lack of GPUs).",
            t,
            registry=r,
        )
        self.terminating_replicas = Gauge(
            "vllm_scaler_terminating_replicas", "Pods draining after a scale-down.", t, registry=r
        )
        self.unschedulable_replicas = Gauge(
            "vllm_scaler_unschedulable_replicas",
            "Pods the scheduler has not placed (PodScheduled False: waiting for a node).",
            t,
            registry=r,
        )
        self.sleeping_replicas = Gauge(
            "vllm_scaler_sleeping_replicas",
            "Ready pods whose vLLM engine is in sleep mode: serving nothing until woken.",
            t,
            registry=r,
        )
        self.finished_pods = Gauge(
            "vllm_scaler_finished_pods",
            "Pods in a terminal phase (Failed, Succeeded: evicted, exited), not counted as "
            "replicas.",
            t,
            registry=r,
        )
        self.min_replicas = Gauge("vllm_scaler_min_replicas", "Policy min replicas.", t, registry=r)
        self.max_replicas = Gauge("vllm_scaler_max_replicas", "Policy max replicas.", t, registry=r)
        ts = ["target", "signal"]
        self.signal_value = Gauge(
            "vllm_scaler_signal_value",
            "Signal value in its target's unit: "
            + ", ".join(f"{s.name} {s.help}" for s in SPECS)
            + ". NaN when invalid.",
            ts,
            registry=r,
        )
        self.signal_target = Gauge(
            "vllm_scaler_signal_target",
            "Configured target of the signal, same unit (the capacity signal's usable "
            "capacity per replica; absent while it is learning).",
            ts,
            registry=r,
        )
        self.signal_ratio = Gauge(
            "vllm_scaler_signal_ratio",
            "Signal value divided by its target. NaN when invalid.",
            ts,
            registry=r,
        )
        self.signal_valid = Gauge(
            "vllm_scaler_signal_valid",
            "1 when the signal could drive a scale-up this cycle.",
            ts,
            registry=r,
        )
        self.signal_status = Gauge(
            "vllm_scaler_signal_status",
            "1 for the signal's status this cycle (ok, idle, partial, empty, absent, nan, ...).",
            ["target", "signal", "status"],
            registry=r,
        )
        self.tolerance = Gauge(
            "vllm_scaler_tolerance_ratio",
            "Tolerance band around a ratio of 1, by direction.",
            ["target", "direction"],
            registry=r,
        )
        self.pods_missing_metrics = Gauge(
            "vllm_scaler_pods_missing_metrics",
            "Ready pods with no vLLM series for a per-pod signal.",
            ts,
            registry=r,
        )
        self.decisions = Counter(
            "vllm_scaler_decisions", "Decisions by reason.", ["target", "reason"], registry=r
        )
        self.last_reason = Gauge(
            "vllm_scaler_last_decision_reason",
            "1 for the reason of the target's latest decision.",
            ["target", "reason"],
            registry=r,
        )
        self.scale_actions = Counter(
            "vllm_scaler_scale_actions",
            "Writes of spec.replicas that succeeded, by direction.",
            ["target", "direction"],
            registry=r,
        )
        self.scale_failures = Counter(
            "vllm_scaler_scale_failures",
            "Writes of spec.replicas that failed, by outcome.",
            ["target", "outcome"],
            registry=r,
        )
        self.outside_writes = Counter(
            "vllm_scaler_outside_writes",
            "Outside changes of spec.replicas: each distinct value another writer set over the "
            "one we last wrote, counted once however many cycles it stays.",
            t,
            registry=r,
        )
        self.target_errors = Counter(
            "vllm_scaler_target_read_errors",
            "Cycles in which a target's scale subresource or pods could not be read.",
            ["target", "outcome"],
            registry=r,
        )
        self.query_errors = Counter(
            "vllm_scaler_query_errors",
            "Signals that could not be used, per target and cycle, by signal and reason "
            "(transport, timeout, query_error, empty, absent, nan, inf, partial, ...).",
            ["signal", "reason"],
            registry=r,
        )
        self.query_failures = Counter(
            "vllm_scaler_query_failures",
            "PromQL queries that failed as a whole, by query and reason.",
            ["query", "reason"],
            registry=r,
        )
        self.queries = Counter(
            "vllm_scaler_queries", "PromQL queries sent to Prometheus.", registry=r
        )
        self.selector_missing = Gauge(
            "vllm_scaler_scale_selector_missing",
            "1 while the target's scale subresource answers no status.selector: its pods "
            "cannot be told, so nothing is read or written (the HPA: SelectorRequired).",
            t,
            registry=r,
        )
        self.foreign_pods = Gauge(
            "vllm_scaler_foreign_pods",
            "Pods the target's selector picks that another workload owns (their "
            "ownerReferences lead there): left out of its signals and counts.",
            t,
            registry=r,
        )
        self.shared_pods = Gauge(
            "vllm_scaler_shared_pods",
            "Pods the target's selector picks that another target's does too, with no owner "
            "to tell: counted for neither, and the target does not scale down meanwhile.",
            t,
            registry=r,
        )
        self.series_copies = Gauge(
            "vllm_scaler_series_copies",
            "Copies of each vLLM series the backend answers, found at start: 2 behind an HA "
            "Prometheus pair without deduplication (the copies differ only in a replica label "
            "and are read once), 1 otherwise.",
            registry=r,
        )
        self.partial_answers = Counter(
            "vllm_scaler_partial_answers",
            "Successful answers the backend flagged as possibly incomplete (warnings of a Thanos "
            "or Mimir partial response, VictoriaMetrics' isPartial), by query: the signals read "
            "from them are partial (scale-up only, no scale-down).",
            ["query"],
            registry=r,
        )
        self.last_query_success = Gauge(
            "vllm_scaler_last_successful_query_timestamp_seconds",
            "Unix time of the last successful query, or of the last cycle in which it was not "
            "due (not sent: nothing needed it), per query; the signal label holds the query "
            "(waiting, running, kv_cache, each latency histogram's rate and buckets queries "
            "such as ttft_rate and ttft_buckets, throughput). Starts at the process' start, so "
            "its age is how long a due query has failed.",
            ["signal"],
            registry=r,
        )
        self.stale_series_dropped = Counter(
            "vllm_scaler_stale_series_dropped",
            "Series dropped because their pod is not live and ready (deleted or terminating).",
            t,
            registry=r,
        )
        self.frozen_pods = Gauge(
            "vllm_scaler_frozen_pods",
            "Ready pods whose queue, running and KV-cache values stopped moving (bit-identical "
            "over several polls while they produced no token): left out of the signals, and "
            "scale-down waits.",
            t,
            registry=r,
        )
        self.hung_pods = Gauge(
            "vllm_scaler_hung_pods",
            "Ready pods whose queue does not drain while they produce no token (a hung "
            "engine): their queue is not counted as load, and scale-down waits.",
            t,
            registry=r,
        )
        self.unattributed_series = Counter(
            "vllm_scaler_unattributed_series",
            "Series of a query's answer left out because they named no selector group or "
            "target (a proxy or a backend that mangles labels).",
            ["query"],
            registry=r,
        )
        self.kv_metric = Gauge(
            "vllm_scaler_kv_cache_metric_info",
            "1 for the vLLM KV-cache metric name found for the target.",
            ["target", "metric"],
            registry=r,
        )
        self.ttft_histogram = Gauge(
            "vllm_scaler_ttft_histogram_info",
            "1 for how the target's TTFT histogram was read: representation (classic buckets "
            "or native histogram) and query (raw series, the recording rules' per-group "
            "buckets, or none while the target is idle).",
            ["target", "representation", "query"],
            registry=r,
        )
        self.histogram_info = Gauge(
            "vllm_scaler_histogram_info",
            "1 for how each latency signal's histogram of the target was read: the metric "
            "(the current name, or an older one its pods still export), representation "
            "(classic buckets or native histogram) and query (raw series, the recording "
            "rules' per-group buckets, or none while the target is idle).",
            ["target", "signal", "metric", "representation", "query"],
            registry=r,
        )
        self.mixed_layouts = Gauge(
            "vllm_scaler_histogram_mixed_layouts",
            "1 while the target's pods have histograms with different bucket bounds (a "
            "rollout across a bucket change, two vLLM versions): the signal's quantile is "
            "read on the bounds every pod has, never summed per le across layouts.",
            ts,
            registry=r,
        )
        self.top_bucket_too_low = Gauge(
            "vllm_scaler_histogram_top_bucket_too_low",
            "1 while the signal's quantile lies beyond its histogram's top finite bucket: the "
            "value read is only a lower bound (status saturated); raise the top bucket.",
            ts,
            registry=r,
        )
        self.scrape_interval = Gauge(
            "vllm_scaler_scrape_interval_seconds",
            "Scrape interval of the target's pods, found at start from their samples' "
            "timestamps (rate windows need at least 4 of them).",
            t,
            registry=r,
        )
        self.rate_window = Gauge(
            "vllm_scaler_rate_window_seconds",
            "The policy's rate() window of the TTFT queries.",
            registry=r,
        )
        self.cycle_duration = Histogram(
            "vllm_scaler_cycle_duration_seconds",
            "Duration of one control cycle.",
            buckets=_CYCLE_BUCKETS,
            registry=r,
        )
        self.cycles = Counter(
            "vllm_scaler_cycles",
            "Control cycles completed (the failed ones are vllm_scaler_cycle_failures_total).",
            registry=r,
        )
        self.cycle_failures = Counter(
            "vllm_scaler_cycle_failures",
            "Control cycles that ended with an exception (cycle_failed in the log): nothing "
            "was decided or written in them; liveness fails when no cycle completes for three "
            "control intervals.",
            registry=r,
        )
        self.policy_reload_ok = Gauge(
            "vllm_scaler_policy_last_reload_successful",
            "1 while the policy file's content is the policy running; 0 after a changed file "
            "was refused (policy_reload_failed in the log names the field), until it is fixed.",
            registry=r,
        )
        self.policy_reload_ok.set(1)
        self.last_cycle = Gauge(
            "vllm_scaler_last_cycle_timestamp_seconds",
            "Unix time the last cycle ended.",
            registry=r,
        )
        self.dry_run = Gauge(
            "vllm_scaler_dry_run", "1 when this process never writes to the cluster.", registry=r
        )
        self.leader = Gauge(
            "vllm_scaler_leader",
            "1 while this replica holds the leader Lease and may write (always 1 without "
            "leader election, 0 in dry run).",
            registry=r,
        )
        self.conflict = Gauge(
            "vllm_scaler_conflict",
            "1 while another autoscaler (HorizontalPodAutoscaler or KEDA ScaledObject, "
            "owner=Kind/name) targets the workload; vllm-scaler then only recommends.",
            ["target", "owner"],
            registry=r,
        )
        self.paused = Gauge(
            "vllm_scaler_paused",
            "1 while the workload carries vllm-scaler.io/paused=true (or an invalid pin).",
            t,
            registry=r,
        )
        self.scaling_disabled = Gauge(
            "vllm_scaler_scaling_disabled",
            "1 while the target's spec.replicas is 0 (parked by a person or an idler): scaling "
            "is disabled and nothing is written, as for the HPA.",
            t,
            registry=r,
        )
        self.pinned_replicas = Gauge(
            "vllm_scaler_pinned_replicas",
            "Replicas pinned by the workload's vllm-scaler.io/pinned-replicas annotation "
            "(no series when not pinned).",
            t,
            registry=r,
        )
        self.refused_writes = Counter(
            "vllm_scaler_refused_writes",
            "Changes of spec.replicas the decision asked for but that were not written, by "
            "reason (conflict, paused, not_leader).",
            ["target", "reason"],
            registry=r,
        )
        self.pods_annotated = Counter(
            "vllm_scaler_pod_deletion_cost_patches",
            "Pods annotated with controller.kubernetes.io/pod-deletion-cost before a scale-down.",
            t,
            registry=r,
        )
        self.removal_order_ignored = Counter(
            "vllm_scaler_scale_down_order_ignored",
            "Scale-downs whose workload controller removed other pods than the ones "
            "vllm-scaler ranked to go by pod-deletion-cost (the PodDeletionCost feature gate "
            "off, a controller that ignores the annotation).",
            t,
            registry=r,
        )
        self.removal_survivors = Gauge(
            "vllm_scaler_scale_down_survivor",
            "1 for each pod ranked to go by the target's last scale-down that its workload "
            "controller kept (removing others instead); cleared by the next scale-down that "
            "removes the pods ranked to go.",
            ["target", "pod"],
            registry=r,
        )
        self.state_writes = Counter(
            "vllm_scaler_state_writes",
            "Writes of the persisted decision state to the Lease, by outcome "
            "(written, failed, too_large).",
            ["outcome"],
            registry=r,
        )
        # The capacity signal (scaler.core.capacity): weighted tokens/s are prompt tokens plus
        # the policy's generation_token_weight times generated tokens.
        self.demand = Gauge(
            "vllm_scaler_demand_tokens_per_second",
            "Demand the ready replicas served over the rate window, in the capacity signal's unit "
            "(seconds of replica work per second with unit work, the default; weighted tokens/s "
            "with unit weighted_tokens; the name predates the work unit).",
            t,
            registry=r,
        )
        self.forecast_demand = Gauge(
            "vllm_scaler_forecast_demand_tokens_per_second",
            "Demand the fleet is sized for, in the capacity signal's unit (work s/s by default): "
            "the forecast over the model-load horizon with burstiness headroom, plus the "
            "waiting work.",
            t,
            registry=r,
        )
        self.capacity = Gauge(
            "vllm_scaler_capacity_tokens_per_second",
            "Learned capacity of one replica at the TTFT target, in the capacity signal's unit "
            "(work s/s by default).",
            t,
            registry=r,
        )
        self.capacity_samples = Gauge(
            "vllm_scaler_capacity_samples",
            "Samples the learned capacity rests on (a seed counts as several).",
            t,
            registry=r,
        )
        self.price_factor = Gauge(
            "vllm_scaler_capacity_price_factor_ratio",
            "The online fit's scale of the capacity cost profile's prices (part prefill or "
            "decode; 1: the profile as given).",
            [*t, "part"],
            registry=r,
        )
        self.utilization = Gauge(
            "vllm_scaler_capacity_utilization_ratio",
            "Demand over what the ready replicas serve at the learned capacity (0-1+ ratio).",
            t,
            registry=r,
        )
        self.model_load = Gauge(
            "vllm_scaler_model_load_seconds",
            "Model load time learned from the target's own pods (creation, or a container "
            "restart, to Ready; median of "
            "recent starts).",
            t,
            registry=r,
        )
        # The seasonal forecast (scaler.core.seasonal), in the capacity signal's demand unit.
        self.seasonal_forecast = Gauge(
            "vllm_scaler_seasonal_forecast_demand",
            "The seasonal forecast's peak demand over its horizon, in the unit of "
            "vllm_scaler_demand_* (NaN: off, stale or no capacity estimate).",
            t,
            registry=r,
        )
        self.seasonal_horizon = Gauge(
            "vllm_scaler_seasonal_forecast_horizon_seconds",
            "How far ahead the seasonal forecast is read: model load plus a control interval.",
            t,
            registry=r,
        )
        self.seasonal_mape = Gauge(
            "vllm_scaler_seasonal_forecast_mape_ratio",
            "The seasonal model's out-of-sample mean absolute percentage error (0.07 is 7%).",
            t,
            registry=r,
        )
        self.seasonal_naive_mape = Gauge(
            "vllm_scaler_seasonal_naive_mape_ratio",
            "The same-hour-yesterday forecast's MAPE over the same held-out days.",
            t,
            registry=r,
        )
        self.seasonal_in_use = Gauge(
            "vllm_scaler_seasonal_forecast_in_use",
            "1 while the seasonal forecast beats the same hour yesterday and may add replicas.",
            t,
            registry=r,
        )
        self.shadow_desired_replicas = Gauge(
            "vllm_scaler_shadow_desired_replicas",
            "Replicas the target's shadow policy would ask for (never written).",
            t,
            registry=r,
        )
        self.shadow_last_reason = Gauge(
            "vllm_scaler_shadow_last_decision_reason",
            "1 for the reason of the shadow policy's last decision, 0 for the others.",
            ["target", "reason"],
            registry=r,
        )
        self.target_info = Gauge(
            "vllm_scaler_target_info",
            "1 per target: where its policy comes from (source: policy_file or resource) and "
            "the VLLMAutoscaler that defines it (resource: namespace/name, empty for the "
            "policy file's).",
            ["target", "source", "resource"],
            registry=r,
        )
        self.status_writes = Counter(
            "vllm_scaler_status_writes_total",
            "Writes of a VLLMAutoscaler's status, by outcome (written, failed): at most one per "
            "change of what it shows.",
            ["outcome"],
            registry=r,
        )
        self.resource_refused = Gauge(
            "vllm_scaler_resource_refused",
            "1 per VLLMAutoscaler the controller does not scale, with why (reason: "
            "invalid_spec, ambiguous_target).",
            ["resource", "reason"],
            registry=r,
        )
        Info("vllm_scaler_build", "Build information.", registry=r).info({"version": __version__})

    def remove_target(self, target: str) -> None:
        """Drop every series of ``target`` (a target the policy no longer lists)."""
        for metric in vars(self).values():
            names = getattr(metric, "_labelnames", ())
            if not isinstance(metric, MetricWrapperBase) or "target" not in names:
                continue
            at = names.index("target")
            gone = {
                values
                for family in metric.collect()
                for sample in family.samples
                if sample.labels.get("target") == target
                and len(values := tuple(sample.labels.get(n, "") for n in names)) == len(names)
            }
            for values in gone:
                if values[at] == target:
                    metric.remove(*values)

    def forget_target(self, target: str) -> None:
        """Drop every series of a target that is gone (its resource was deleted)."""
        self.remove_target(target)

    def remove_signals(self, target: str, signals: Iterable[str]) -> None:
        """Drop a target's per-signal series (its signals are not read while disabled)."""
        gauges = (
            self.signal_value,
            self.signal_target,
            self.signal_ratio,
            self.signal_valid,
            self.pods_missing_metrics,
        )
        for name in signals:
            for gauge in gauges:
                with contextlib.suppress(KeyError):
                    gauge.remove(target, name)
            for status in SignalStatus:
                with contextlib.suppress(KeyError):
                    self.signal_status.remove(target, name, status)

    def record_decision(
        self,
        target: str,
        decision: Decision,
        *,
        min_replicas: int,
        max_replicas: int,
        tolerance_up: float,
        tolerance_down: float,
        pods_known: bool = True,
    ) -> None:
        """Export one decision's replica counts, signals and reason. ``pods_known`` False:
        the target's pods cannot be told (no selector), so the counts of ready, starting,
        stuck and terminating replicas have no series (not 0, which would read as none
        ready)."""
        c = decision.replicas
        self.current_replicas.labels(target).set(c.current)
        self.desired_replicas.labels(target).set(decision.desired_replicas)
        self.recommended_replicas.labels(target).set(decision.recommended_replicas)
        pod_counts = (
            (self.ready_replicas, c.ready),
            (self.starting_replicas, c.starting),
            (self.stuck_replicas, c.stuck),
            (self.terminating_replicas, c.terminating),
            (self.unschedulable_replicas, c.unschedulable),
            (self.finished_pods, c.finished),
            (self.sleeping_replicas, c.sleeping),
        )
        for gauge, value in pod_counts:
            if pods_known:
                gauge.labels(target).set(value)
            else:
                with contextlib.suppress(KeyError):
                    gauge.remove(target)
        self.min_replicas.labels(target).set(min_replicas)
        self.max_replicas.labels(target).set(max_replicas)
        self.tolerance.labels(target, "up").set(tolerance_up)
        self.tolerance.labels(target, "down").set(tolerance_down)
        for e in decision.signals:
            nan = float("nan")
            self.signal_value.labels(target, e.name).set(e.value if e.value is not None else nan)
            if e.status is SignalStatus.LEARNING:
                # no target yet: no sample (a 0 would draw a target line at 0)
                with contextlib.suppress(KeyError):
                    self.signal_target.remove(target, e.name)
            else:
                self.signal_target.labels(target, e.name).set(e.target)
            self.signal_ratio.labels(target, e.name).set(e.ratio if e.ratio is not None else nan)
            self.signal_valid.labels(target, e.name).set(1 if e.valid else 0)
            for status in SignalStatus:
                self.signal_status.labels(target, e.name, status).set(
                    1 if status is e.status else 0
                )
        self.decisions.labels(target, decision.reason).inc()
        for reason in Reason:
            self.last_reason.labels(target, reason).set(1 if reason is decision.reason else 0)
        self.record_capacity(target, decision)

    def record_capacity(self, target: str, decision: Decision) -> None:
        """Export what the capacity signal saw (NaN for what it does not know; nothing when
        the signal is off) and the learned model load time."""
        nan = float("nan")
        load = decision.state.load_times.median_seconds
        self.model_load.labels(target).set(load if load is not None else nan)
        view = decision.capacity
        if view is None:
            return
        for gauge, value in (
            (self.demand, view.demand_tokens_per_second),
            (self.forecast_demand, view.forecast_tokens_per_second),
            (self.capacity, view.capacity_tokens_per_second),
            (self.utilization, view.utilization),
        ):
            gauge.labels(target).set(value if value is not None else nan)
        self.capacity_samples.labels(target).set(view.samples)
        self.price_factor.labels(target, "prefill").set(view.prefill_factor)
        self.price_factor.labels(target, "decode").set(view.decode_factor)
        self.record_seasonal(target, decision)

    def record_seasonal(self, target: str, decision: Decision) -> None:
        """Export the seasonal forecast: its value, horizon, out-of-sample errors, in use."""
        nan = float("nan")
        ask = decision.seasonal
        fit = ask.forecast if ask is not None else None
        if ask is None or fit is None:
            return
        check = fit.check
        self.seasonal_forecast.labels(target).set(ask.demand if ask.demand is not None else nan)
        self.seasonal_horizon.labels(target).set(ask.horizon_seconds)
        self.seasonal_mape.labels(target).set(check.mape if check is not None else nan)
        self.seasonal_naive_mape.labels(target).set(check.naive_mape if check is not None else nan)
        self.seasonal_in_use.labels(target).set(1 if fit.in_use else 0)

    def record_shadow(self, target: str, decision: Decision) -> None:
        """Export the shadow policy's recommendation and reason."""
        self.shadow_desired_replicas.labels(target).set(decision.desired_replicas)
        for reason in Reason:
            self.shadow_last_reason.labels(target, reason).set(
                1 if reason is decision.reason else 0
            )
