"""The live loop's decision path run on history: what the controller would have decided at
given times, for comparing with the backtest's replay of the same data.

:class:`AtTime` sends every request with Prometheus' ``time`` parameter, so the live source's
instant queries are evaluated at a past time exactly as a step of a range query is; then
:func:`live_decisions` runs the controller's own path, :class:`~scaler.sources.prometheus.
PrometheusSource` (its instant queries), :func:`~scaler.controller.observe.observe` and
:func:`~scaler.core.decide.decide`, step by step with its own state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import httpx

from scaler.backtest.replay import ReplayStep
from scaler.config.policy import Policy
from scaler.controller.observe import observe
from scaler.core.decide import Decision, decide
from scaler.core.load_time import LoadTimes
from scaler.core.observation import ReplicaCounts, WorkloadSnapshot
from scaler.core.state import TargetState, record_write
from scaler.sources.prometheus import PrometheusSource


class AtTime(httpx.AsyncBaseTransport):
    """Sends every request with ``time=<at>`` added to its URL (Prometheus reads the
    parameter from the URL as from a form body)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.at = 0.0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url.copy_add_param("time", f"{self.at:.3f}")
        moved = httpx.Request(request.method, url, headers=request.headers, stream=request.stream)
        return await self.inner.handle_async_request(moved)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def live_decisions(
    prometheus_url: str,
    policy: Policy,
    steps: Sequence[ReplayStep],
    snapshot_at: Callable[[float], WorkloadSnapshot],
    *,
    model_load_seconds: float,
) -> list[Decision]:
    """What the live loop's path decides at every step of a replay of ``policy``'s one target.

    Each step reads Prometheus at the step's time with the pods ``snapshot_at`` lists then
    (what the Kubernetes API said), and decides on the replay's own replica counts (current:
    the replay's replicas before the step; ready: the replay's ready ones), so that the two
    differ only in how the data was read. The state starts as the replay's: seeded with the
    first step's replicas and ``model_load_seconds`` as the learned model load time.
    """
    (t,) = policy.targets
    transport = AtTime()
    client = httpx.AsyncClient(transport=transport)
    source = PrometheusSource(
        client,
        base_url=prometheus_url,
        timeout_seconds=30,
        rate_window_seconds=policy.rate_window_seconds,
    )
    # the replay starts from the first known actual spec.replicas
    r = next(st.actual_replicas for st in steps if st.actual_replicas is not None)
    state = replace(TargetState.seeded(r, steps[0].at), load_times=LoadTimes((model_load_seconds,)))
    out = []
    try:
        for st in steps:
            transport.at = st.at
            snap = snapshot_at(st.at)
            result = await source.read([t.reading_target()], {t.key: snap})
            seen = observe(t, snap, result.targets[t.key], state)
            counts = ReplicaCounts(r, r, st.policy_ready, starting=r - st.policy_ready)
            decision = decide(
                t,
                replace(seen, replicas=counts),
                state,
                st.at,
                ttft_window_seconds=policy.rate_window_seconds,
            )
            state = decision.state
            if decision.desired_replicas != r:
                state = record_write(
                    state, from_replicas=r, to_replicas=decision.desired_replicas, now=st.at
                )
            r = st.policy_replicas
            out.append(decision)
    finally:
        await client.aclose()
    return out
