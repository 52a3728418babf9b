"""What the demo (``vllm-scaler sim``) takes from the bench: a profile seed for the capacity
signal, the fleet to start from, and the same slice replayed under KEDA.

The demo runs vllm-scaler live (a real Prometheus, the controller as its own process, the
simulated fleet on the wall clock). Beside it, the bench replays the same requests in virtual
time through its loop (:mod:`scaler.bench.simulate`: the same replica model, routing and
seed, an emulated Prometheus scraping at the demo's interval): vllm-scaler with the demo's
policy, and KEDA's Prometheus trigger on queue depth driving an HPA, the setup the
vLLM-on-Kubernetes guides give, with its periods shortened as the demo's policy is. So the
summary compares like with like (replay with replay), and the live run beside its replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scaler.bench.capacity import accepted, minute_need, probe_capacity
from scaler.bench.controllers import KedaHpaController, VllmScalerController
from scaler.bench.hpa import HpaBehavior, HpaRules, HpaScaler
from scaler.bench.simulate import Controller, RunRecord, simulate
from scaler.config.policy import Policy
from scaler.sim.engine import ReplicaModel
from scaler.sim.trace import Trace
from scaler.telemetry.logging import silenced

__all__ = [
    "KEDA_LABEL",
    "CapacitySeed",
    "DemoBench",
    "Replay",
    "keda_controller",
    "profile_seed",
    "starting_replicas",
]

#: The KEDA row's label in the demo's summary.
KEDA_LABEL = "KEDA + HPA on queue depth (replay)"


@dataclass(frozen=True, slots=True)
class CapacitySeed:
    """A replica's throughput at the TTFT target on a trace's mix: the policy's seeds.

    Attributes:
        prompt_tokens_per_second, generation_tokens_per_second: the seeds.
        requests_per_second: the rate one replica serves at the target (the probe's).
    """

    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    requests_per_second: float


def profile_seed(trace: Trace, model: ReplicaModel, slo_ttft_seconds: float) -> CapacitySeed:
    """The capacity seed a profile of one replica gives on ``trace``'s request mix.

    As ``vllm bench serve`` measures a server: one replica, the trace's accepted requests in
    order at a steady rate, the highest rate whose TTFT p95 is within ``slo_ttft_seconds``
    (:func:`~scaler.bench.capacity.probe_capacity`), as prompt and generated tokens per second
    (that rate times the mix's mean prompt and output lengths).
    """
    capacity = probe_capacity(trace, model, slo_ttft_seconds)
    mix = accepted(trace.requests, model) or list(trace.requests)
    n = max(1, len(mix))
    prompt = sum(r.prompt_tokens for r in mix) / n
    output = sum(r.output_tokens for r in mix) / n
    return CapacitySeed(
        prompt_tokens_per_second=round(capacity.rate * prompt),
        generation_tokens_per_second=round(capacity.rate * output),
        requests_per_second=capacity.rate,
    )


def starting_replicas(
    trace: Trace, model: ReplicaModel, slo_ttft_seconds: float, *, routing: str, seed: int
) -> int:
    """The replicas the first minute of ``trace`` needs, ready and empty from its start, to
    keep 99% of its requests within the SLO (:func:`~scaler.bench.capacity.minute_need`), as
    the bench starts every policy from the fleet its hindsight schedule's first minute has."""
    first = [r for r in trace.requests if r.arrival_seconds < 60.0]
    return minute_need(first, model, slo_ttft_seconds, routing=routing, seed=seed)


def keda_controller(
    *, max_replicas: int, interval_seconds: float, scale_down_window_seconds: float
) -> KedaHpaController:
    """KEDA's Prometheus trigger (``sum(vllm:num_requests_waiting)``, threshold 5,
    AverageValue) driving an HPA whose sync and scale-up/scale-down policy periods are
    ``interval_seconds`` (HPA: 15 s) and whose scale-down window is
    ``scale_down_window_seconds`` (HPA: 300 s): the HPA's behaviour with its times shortened
    as the demo's policy shortens vllm-scaler's."""
    period = interval_seconds
    behavior = HpaBehavior(
        scale_up=HpaRules(0.0, 4, 100.0, period),
        scale_down=HpaRules(scale_down_window_seconds, 0, 100.0, period),
    )
    keda = KedaHpaController(max_replicas=max_replicas, sync_seconds=round(interval_seconds))
    keda.hpa = HpaScaler(1, max_replicas, behavior)
    keda.name = KEDA_LABEL
    return keda


@dataclass(frozen=True, slots=True)
class Replay:
    """One replayed row: its label and the run (requests, one sample a second, scale events)."""

    label: str
    run: RunRecord


@dataclass(frozen=True, slots=True)
class DemoBench:
    """The bench's side of the demo for one slice.

    Attributes:
        model: the replica model (the demo's model load time).
        slo_ttft_seconds: the TTFT target.
        routing, seed: as the live fleet's.
        scrape_interval_seconds: the demo Prometheus' scrape interval (a whole second).
        interval_seconds: the controller's interval.
    """

    model: ReplicaModel
    slo_ttft_seconds: float
    routing: str
    seed: int
    scrape_interval_seconds: int
    interval_seconds: float

    def seed_for(self, trace: Trace) -> CapacitySeed:
        """:func:`profile_seed` of ``trace``."""
        return profile_seed(trace, self.model, self.slo_ttft_seconds)

    def starting_replicas(self, trace: Trace) -> int:
        """:func:`starting_replicas` of ``trace``."""
        return starting_replicas(
            trace, self.model, self.slo_ttft_seconds, routing=self.routing, seed=self.seed
        )

    def replays(self, trace: Trace, policy: Policy, initial_replicas: int) -> Sequence[Replay]:
        """vllm-scaler with ``policy`` (its first target) and KEDA on ``trace``, each from
        ``initial_replicas``, in virtual time. KEDA's maximum is the policy's, its scale-down
        window the policy's (the demo's shortened window) and its periods the interval."""
        target = policy.targets[0]
        interval = max(1, round(self.interval_seconds))
        controllers: list[tuple[str, Controller]] = [
            (
                "vllm-scaler (replay)",
                VllmScalerController(
                    target,
                    rate_window_seconds=policy.rate_window_seconds,
                    interval_seconds=interval,
                ),
            ),
            (
                KEDA_LABEL,
                keda_controller(
                    max_replicas=target.max_replicas,
                    interval_seconds=interval,
                    scale_down_window_seconds=target.scale_down.stabilization_window_seconds,
                ),
            ),
        ]
        out = []
        with silenced():  # the replay's source logs as the controller does
            for label, controller in controllers:
                run = simulate(
                    trace,
                    controller,
                    model=self.model,
                    initial_replicas=initial_replicas,
                    scrape_interval_seconds=self.scrape_interval_seconds,
                    seed=self.seed,
                    routing=self.routing,
                )
                out.append(Replay(label, run))
        return out
