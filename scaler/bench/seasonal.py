"""The seasonal forecast's goals on day-scale replays: its accuracy against the same hour
yesterday, and vllm-scaler with and without it.

``python -m scaler.bench.seasonal --trace servegen:m-small:day8`` (or ``synthetic:daily-bursts``)
prints one row per trace: the forecast's MAPE and the seasonal naive forecast's over the
replayed windows (each forecast as the controller would have had it: refitted hourly on the
history before the refit only, read one model load plus one control interval ahead), how
often it was in use, then vllm-scaler's share of requests within the TTFT SLO and GPU-hours
with and without it, per day, and the time per simulated day.

**History.** The controller reads its history from Prometheus
(:mod:`scaler.sources.prometheus.demand_history`). The bench gives it the history a Prometheus
would hold: for a ServeGen replay the same days' 10-minute windows (``servegen:<m>:day8``
trains on days 1-7, thinned by the replay's own factor and rate scale), in the capacity
signal's demand units through its own ``demand_of`` at the replay's mean prompt and output
lengths; ServeGen gives each window's mean rate only, so a window's peak minute is its mean
there. For ``synthetic:daily-bursts`` the shape's rate (it repeats daily: seven days before the
replay, then the replay's days), each window's peak one-minute mean.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaler.bench.controllers import VllmScalerController
from scaler.bench.figures import PolicyFigures
from scaler.bench.references import Yardstick, find_yardstick
from scaler.bench.runner import BenchOptions, Prepared, default_policy, prepare, run_policy
from scaler.config.policy import TargetPolicy
from scaler.core.capacity import demand_of, priced_policy
from scaler.core.observation import PodLoad, ThroughputReading
from scaler.core.seasonal import (
    DAY_SECONDS,
    SeasonalForecast,
    SeasonalSchedule,
    mape,
    replay_seasonal,
)
from scaler.core.signals import SignalStatus
from scaler.core.sizing import horizon_seconds
from scaler.sim.servegen import PEAK_REQUESTS_PER_SECOND, parse_servegen, window_rates
from scaler.sim.synthetic import daily_bursts_rate

__all__ = ["PricedSchedule", "SeasonalGoal", "history_of", "main", "run_seasonal_goal"]

STEP_SECONDS = 600.0
REFIT_SECONDS = 3600.0
#: Days of history before a synthetic replay (as the first ServeGen week).
SYNTHETIC_HISTORY_DAYS = 7


def _mean_lengths(prep: Prepared) -> tuple[float, float]:
    """The replay's mean prompt and output tokens per request."""
    reqs = prep.trace.requests
    prompt = math.fsum(r.prompt_tokens for r in reqs) / len(reqs)
    output = math.fsum(r.output_tokens for r in reqs) / len(reqs)
    return prompt, output


def _per_request(policy: TargetPolicy, prep: Prepared) -> float:
    """The capacity signal's demand of one request per second at the replay's mean lengths,
    at the policy's profile prices."""
    load = PodLoad(1.0, *_mean_lengths(prep))
    return demand_of(policy, ThroughputReading(SignalStatus.OK, {"all": load}))[0]


class PricedSchedule:
    """A :class:`~scaler.core.seasonal.SeasonalSchedule` fitted on requests/s, its forecast
    priced at each read with the prices the live capacity signal uses then
    (:func:`~scaler.core.capacity.priced_policy` of the controller's state), so that the
    forecast's demand and the learned capacity per replica are in the same unit.

    The bench's history has one request mix (the replay's mean lengths), so pricing the
    path is exact; pricing it once with the profile's prices (as this bench did) asked for
    about four times the replicas once the price fit had moved decode from the profile's
    3.5e-4 s/token to about 9e-5 (``servegen:m-small:day9``). The controller itself prices
    the history at each hourly refit, so until the next refit after the prices move its
    forecast is in the prices of the refit before.

    Args:
        schedule: the fits, in requests/s.
        policy: the target's policy (its profile prices are the fallback before any state).
        prompt_tokens, output_tokens: the history's mean lengths per request.
    """

    def __init__(
        self,
        schedule: SeasonalSchedule,
        policy: TargetPolicy,
        prompt_tokens: float,
        output_tokens: float,
    ) -> None:
        self.schedule = schedule
        self.policy = policy
        self.load = PodLoad(1.0, prompt_tokens, output_tokens)
        self.controller: VllmScalerController | None = None

    def __call__(self, now: float) -> SeasonalForecast | None:
        """The fit at ``now`` (:class:`~scaler.core.seasonal.SeasonalSchedule`), its path in
        the capacity signal's demand at the controller's prices now."""
        fit = self.schedule(now)
        if fit is None or not fit.path:
            return fit
        state = self.controller.state if self.controller is not None else None
        priced = priced_policy(self.policy, state.capacity if state is not None else None)
        unit = demand_of(priced, ThroughputReading(SignalStatus.OK, {"all": self.load}))[0]
        return replace(fit, path=tuple(v * unit for v in fit.path))


def history_of(trace: str, unit: float) -> tuple[list[float | None], int]:
    """``(demand per 10-minute window, index of the replay's first window)`` (see the module
    docstring); ``unit`` is the demand of one request per second."""
    if trace.startswith("servegen:"):
        spec = parse_servegen(trace)
        whole = replace(spec, first_day=1)
        rates = window_rates(whole)
        replayed = rates[(spec.first_day - 1) * 144 :]
        p = min(1.0, PEAK_REQUESTS_PER_SECOND / max(replayed))
        # a window without a rate is a gap in the data, not an idle service
        return [r * p * unit if r > 0 else None for r in rates], (spec.first_day - 1) * 144
    if trace == "synthetic:daily-bursts":
        return _bursts_history(unit), SYNTHETIC_HISTORY_DAYS * 144
    raise ValueError(f"{trace}: expected servegen:<model>:day<N>[-<M>] or synthetic:daily-bursts")


def _bursts_history(unit: float, seed: int = 1) -> list[float | None]:
    """``daily-bursts``' history: Poisson arrivals at the shape's rate (seven days before the
    replay, then its two), each 10-minute window's busiest minute, per second, times
    ``unit``. Drawn, not the rate itself: a Prometheus holds counts, and a noiseless history
    would make the same hour yesterday exact."""
    rng = random.Random(f"daily-bursts-history:{seed}")
    days = SYNTHETIC_HISTORY_DAYS + 2
    minutes = [0] * (days * 1440)
    peak = 10.0
    t = 0.0
    offset = SYNTHETIC_HISTORY_DAYS * DAY_SECONDS
    while True:
        t += rng.expovariate(peak)
        if t >= days * DAY_SECONDS:
            break
        if rng.random() * peak <= daily_bursts_rate(t - offset):
            minutes[int(t // 60)] += 1
    return [max(minutes[w * 10 : w * 10 + 10]) / 60 * unit for w in range(days * 144)]


@dataclass(frozen=True, slots=True)
class SeasonalGoal:
    """One trace's figures (see the module docstring)."""

    trace: str
    days: float
    mape: float
    naive_mape: float
    windows_in_use: int
    windows: int
    notes: tuple[str, ...]
    without: PolicyFigures | None
    with_forecast: PolicyFigures | None
    seconds_per_day: tuple[float, float]
    cpu_seconds_per_day: tuple[float, float] = (math.nan, math.nan)
    #: the optimal load-paying reference on the same window and seed (None: not computed)
    yardstick: Yardstick | None = None
    #: its cost: ``(seconds, CPU seconds)`` of the whole search
    yardstick_seconds: tuple[float, float] = (math.nan, math.nan)


def run_seasonal_goal(
    trace: str,
    *,
    simulate: bool = True,
    seed: int = 0,
    start_seconds: float = 0.0,
    duration_seconds: float | None = None,
    optimal: bool = False,
) -> SeasonalGoal:
    """The forecast's accuracy on ``trace``'s replayed windows, and (``simulate``) the replay
    with and without it on routing seed ``seed``, of the window from ``start_seconds``
    (a multiple of 10 minutes) for ``duration_seconds`` (None: to the end); with
    ``optimal`` (and ``simulate``) also the optimal load-paying reference of that window
    (:func:`~scaler.bench.references.find_yardstick`, the benchmark's yardstick, on the same
    seed), and its cost: about 30 replays of the window, most of it."""
    # the replays are scaled already (ServeGen to its peak, the shape as it is)
    options = BenchOptions(
        trace=trace,
        routing_seeds=1,
        references=False,
        seed=seed,
        rate_scale=1.0,
        start_seconds=start_seconds,
        duration_seconds=duration_seconds,
    )
    prep = prepare(options) if simulate else None
    policy = (prep.policy if prep is not None else default_policy()).targets[0]
    rate_window = (prep.policy if prep is not None else default_policy()).rate_window_seconds
    # MAPE is relative: without a replay any unit does
    unit = _per_request(policy, prep) * prep.scale if prep is not None else 1.0
    values, origin = history_of(trace, unit)
    origin += round(start_seconds / STEP_SECONDS)
    if duration_seconds is not None:
        values = values[: origin + math.ceil(duration_seconds / STEP_SECONDS)]
    horizon = (
        horizon_seconds(policy, options.model_load_seconds, rate_window)
        + options.control_interval_seconds
    )
    replayed = replay_seasonal(
        values, STEP_SECONDS, origin, horizon_seconds=horizon, refit_seconds=REFIT_SECONDS
    )
    ours, naive, actual = [], [], []
    for j, (value, _fit) in zip(range(origin, len(values)), replayed, strict=False):
        a, n = values[j], values[j - 144]
        if value is None or a is None or n is None:
            continue
        ours.append(value)
        naive.append(n)
        actual.append(a)
    m, windows = mape(ours, actual)
    mn, _ = mape(naive, actual)
    notes = tuple(dict.fromkeys(f.note.split(" (")[0].split(":")[0] for _, f in replayed))
    days = (len(values) - origin) * STEP_SECONDS / DAY_SECONDS
    without = with_fc = None
    per_day = cpu_per_day = (math.nan, math.nan)
    if prep is not None:
        job = prep.job("vllm-scaler", prep.seeds[0])
        t0, c0 = time.monotonic(), time.process_time()
        without = run_policy(job)
        t1, c1 = time.monotonic(), time.process_time()
        # requests/s of the replay (its rate scale in), priced at each read
        per_second = [v / unit * prep.scale if v is not None else None for v in values]
        schedule = PricedSchedule(
            SeasonalSchedule(per_second, origin, horizon, options.control_interval_seconds),
            job.policy.targets[0],
            *_mean_lengths(prep),
        )
        controller = VllmScalerController(
            job.policy.targets[0],
            rate_window_seconds=job.policy.rate_window_seconds,
            interval_seconds=job.interval_seconds,
            seasonal=schedule,
        )
        schedule.controller = controller
        with_fc = run_policy(job, controller)
        t2, c2 = time.monotonic(), time.process_time()
        per_day = ((t1 - t0) / days, (t2 - t1) / days)
        # the process's CPU: on a shared machine the wall time is mostly the others' load
        cpu_per_day = ((c1 - c0) / days, (c2 - c1) / days)
    yardstick, yardstick_seconds = None, (math.nan, math.nan)
    if prep is not None and optimal:
        t0, c0 = time.monotonic(), time.process_time()
        yardstick = find_yardstick(prep.reference_setup())
        yardstick_seconds = (time.monotonic() - t0, time.process_time() - c0)
    return SeasonalGoal(
        trace, days, m, mn, windows, len(replayed), notes, without, with_fc, per_day, cpu_per_day,
        yardstick, yardstick_seconds,
    )  # fmt: skip


def plot_day(trace: str, path: str) -> None:
    """Draw one replayed day of ``trace``: the actual demand per 10-minute window, the seasonal
    forecast as the controller would have had it (refitted hourly on the windows before, read
    a model load and a control interval ahead; absent where it was off) and the same hour
    yesterday, in requests/s (the demand over one request's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policy = default_policy()
    target = policy.targets[0]
    horizon = horizon_seconds(target, 120.0, policy.rate_window_seconds) + 15.0
    values, origin = history_of(trace, 1.0)
    replayed = replay_seasonal(
        values, STEP_SECONDS, origin, horizon_seconds=horizon, refit_seconds=REFIT_SECONDS
    )
    hours = [(j - origin + 1) * STEP_SECONDS / 3600 for j in range(origin, len(values))]
    nan = float("nan")
    actual = [v if v is not None else nan for v in values[origin:]]
    naive = [v if v is not None else nan for v in values[origin - 144 : len(values) - 144]]
    ours = [v if v is not None else nan for v, _ in replayed]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot(hours, actual, label="actual demand", color="black", linewidth=1.5)
    ax.plot(hours, naive, label="same hour yesterday", color="tab:gray", linestyle="--")
    ax.plot(hours, ours, label="seasonal forecast (as it was then)", color="tab:blue")
    ax.set_xlabel("hour of the replayed day")
    ax.set_ylabel("requests/s of the replay, per 10-minute window")
    ax.set_title(f"{trace}: the seasonal forecast against the same hour yesterday")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _share(f: PolicyFigures | None, half: int | None = None) -> str:
    if f is None:
        return "-"
    if half is None:
        return (
            f"{f.slo_request_share:.2%} within the TTFT SLO ({f.both_request_share:.2%} both) / "
            f"{f.gpu_hours:.1f} GPU-h"
        )
    h = f.halves[half]
    return f"{h.slo_request_share:.2%} / {h.gpu_hours:.1f} GPU-h"


def main(argv: Sequence[str] | None = None) -> None:
    """Print the goals of each ``--trace`` (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", required=True)
    parser.add_argument("--no-simulate", action="store_true", help="the forecast's MAPE only")
    parser.add_argument("--plot", help="draw the first --trace's replayed windows to this PNG")
    parser.add_argument("--start-hour", type=float, default=0.0, help="replay from this hour")
    parser.add_argument("--hours", type=float, default=None, help="replay this many hours")
    parser.add_argument(
        "--optimal",
        action="store_true",
        help="also the optimal load-paying reference (about 30 replays of the window)",
    )
    args = parser.parse_args(argv)
    if args.plot:
        plot_day(args.trace[0], args.plot)
        return
    for trace in args.trace:
        g = run_seasonal_goal(
            trace,
            simulate=not args.no_simulate,
            start_seconds=args.start_hour * 3600,
            duration_seconds=args.hours * 3600 if args.hours is not None else None,
            optimal=args.optimal,
        )
        lower = 1 - g.mape / g.naive_mape if g.naive_mape > 0 else math.nan
        print(f"{g.trace} ({g.days:g} days)")
        print(
            f"  MAPE ours {g.mape:.1%} vs same hour yesterday {g.naive_mape:.1%} "
            f"({lower:.0%} lower) over {g.windows_in_use} of {g.windows} windows in use"
        )
        print(f"  fits: {'; '.join(g.notes)}")
        if g.without is not None:
            print(f"  without: {_share(g.without)}; with: {_share(g.with_forecast)}")
            if g.days > 1.5:
                for half in (0, 1):
                    print(
                        f"  day {half + 1}: without {_share(g.without, half)}; with "
                        f"{_share(g.with_forecast, half)}"
                    )
            print(
                f"  seconds per simulated day: without {g.seconds_per_day[0]:.0f}, with "
                f"{g.seconds_per_day[1]:.0f} (CPU: {g.cpu_seconds_per_day[0]:.0f}, "
                f"{g.cpu_seconds_per_day[1]:.0f})"
            )
        if g.yardstick is not None and g.without is not None and g.with_forecast is not None:
            best = g.yardstick.optimal.best
            check = g.yardstick.optimal.check
            print(
                f"  optimal load-paying reference: {best.cost:.1f} GPU-h at {best.share:.2%} "
                f"within both SLOs ({g.yardstick.optimal.label}; the check's cheapest saves "
                f"{check.saving:.1%}); without / reference {g.without.gpu_hours / best.cost:.2f}x, "
                f"with / reference {g.with_forecast.gpu_hours / best.cost:.2f}x"
            )
            print(
                f"  the reference took {g.yardstick.optimal.replays} replays and the search of "
                f"{g.yardstick.instant.trials} minute trials: {g.yardstick_seconds[0]:.0f} s "
                f"(CPU {g.yardstick_seconds[1]:.0f} s) for {g.days * 24:g} hours"
            )


if __name__ == "__main__":
    main()
