"""The seasonal forecasts, refitted off the control loop's hot path.

At start and then every ``refit_seconds`` (hourly), :class:`SeasonalRefresher` reads up to 14
days of every target's demand (batched range queries,
:func:`~scaler.sources.prometheus.demand_history.read_demand_history`) and fits each
target's seasonal model (:func:`scaler.core.seasonal.fit_seasonal`, about 0.2 s of CPU per
target) in a thread executor, so a cycle never waits for a fit: the loop calls
:meth:`SeasonalRefresher.poke` every cycle, which starts a refresh when one is due and
returns at once, and reads :meth:`SeasonalRefresher.forecast` per target (the last fit, or
None before the first). A
history that cannot be read (an outage, a query error) leaves a target's last fit in place,
never a zero forecast; the fit's own path runs out an hour and a horizon after its last
window, so a forecast that could not be refreshed for that long stops asking for anything.
The clock is injected (the loop's): a refresh is due ``refit_seconds`` after the last one
started, or sooner (at least ``min_refit_seconds`` after it) when a target's prices have moved:
the history is priced with the prices the live capacity signal uses at the refit
(:func:`scaler.core.capacity.priced_policy`), so a fit priced with the profile's while the
price fit moved decode to a quarter of it would ask for several times the replicas for up to
an hour; a change of a price by more than :data:`REPRICE_RATIO` since the target's last fit
makes the refresh due.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

import structlog

from scaler.config.policy import TargetPolicy
from scaler.core.seasonal import DAY_SECONDS, SeasonalForecast, fit_seasonal
from scaler.sources.prometheus.demand_history import DemandHistory, HistoryRead

__all__ = ["REPRICE_RATIO", "HistoryReader", "SeasonalRefresher", "SeasonalSettings"]

#: A price (prefill, decode or decode per context token) that moved by more than this factor
#: since a target's last fit makes a refit due (the demand it forecasts is in those prices).
REPRICE_RATIO = 1.1

#: Reads every target's demand history ending at the given time (epoch seconds).
HistoryReader = Callable[[Sequence[TargetPolicy], float], Awaitable[HistoryRead]]


@dataclass(frozen=True, slots=True)
class SeasonalSettings:
    """How the seasonal forecasts are refreshed.

    Attributes:
        refit_seconds: the period between refits, seconds (hourly).
        min_refit_seconds: the least time between refits when a target's prices moved,
            seconds (a 14-day read per refit).
        history_seconds: the most history read, seconds (14 days, as AWS predictive scaling).
        step_seconds: the history's step, seconds (10 minutes).
        interval_seconds: the control interval, added to the horizon (one model load plus one
            control interval ahead).
    """

    refit_seconds: float = 3600.0
    min_refit_seconds: float = 300.0
    history_seconds: float = 14 * DAY_SECONDS
    step_seconds: float = 600.0
    interval_seconds: float = 15.0


def _prices_of(target: TargetPolicy) -> tuple[float, float, float]:
    """The prices a target's demand is priced with (seconds per token)."""
    cost = target.signals.capacity.cost
    return (
        cost.prefill_seconds_per_token,
        cost.decode_seconds_per_token,
        cost.decode_seconds_per_context_token,
    )


def _fit(
    history: DemandHistory, horizon_seconds: float, settings: SeasonalSettings
) -> SeasonalForecast:
    fit = fit_seasonal(
        history.values,
        history.step_seconds,
        history.end_at,
        horizon_seconds=horizon_seconds,
        ahead_seconds=settings.refit_seconds + horizon_seconds + history.step_seconds,
        refit_seconds=settings.refit_seconds,
    )
    return replace(fit, interval_seconds=settings.interval_seconds)


class SeasonalRefresher:
    """Keeps each target's last seasonal forecast, refitted in the background.

    Args:
        read_history: reads every target's history (the composition root binds it to the
            source's HTTP client).
        clock: epoch seconds (the loop's clock).
        settings: the refresh period, history and step.
        executor: where fits run (a one-thread pool by default: fits are CPU-bound and must
            not starve the loop).
    """

    def __init__(
        self,
        read_history: HistoryReader,
        *,
        clock: Callable[[], float],
        settings: SeasonalSettings | None = None,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self._read = read_history
        self._clock = clock
        self.settings = settings or SeasonalSettings()
        self._executor = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="seasonal-fit"
        )
        self._own_executor = executor is None
        self._forecasts: dict[str, SeasonalForecast] = {}
        self._prices: dict[str, tuple[float, float, float]] = {}  # each target's at its fit
        self._started_at: float | None = None
        self._task: asyncio.Task[None] | None = None
        self.errors: tuple[str, ...] = ()
        self.log = structlog.get_logger("vllm_scaler")

    def forecast(self, key: str) -> SeasonalForecast | None:
        """The target's last fit (None before its first)."""
        return self._forecasts.get(key)

    def due(self, targets: Sequence[TargetPolicy] = ()) -> bool:
        """A refresh is due: none started yet, or the last started ``refit_seconds`` ago (or
        ``min_refit_seconds`` ago when one of ``targets`` has prices that moved by more than
        :data:`REPRICE_RATIO` since its last fit) and is done."""
        if self._task is not None and not self._task.done():
            return False
        if self._started_at is None:
            return True
        since = self._clock() - self._started_at
        if since >= self.settings.refit_seconds:
            return True
        return since >= self.settings.min_refit_seconds and any(self._repriced(t) for t in targets)

    def _repriced(self, target: TargetPolicy) -> bool:
        fitted = self._prices.get(target.key)
        if fitted is None:
            return False
        now = _prices_of(target)
        return any(max(a, b) > REPRICE_RATIO * min(a, b) for a, b in zip(fitted, now, strict=True))

    def poke(self, targets: Sequence[TargetPolicy]) -> asyncio.Task[None] | None:
        """Start a refresh of ``targets`` when one is due (the running task, else None);
        returns at once."""
        if not targets or not self.due(targets):
            return None
        self._started_at = self._clock()
        self._task = asyncio.get_running_loop().create_task(self.refresh(list(targets)))
        return self._task

    async def prime(self, targets: Sequence[TargetPolicy]) -> None:
        """Refresh now and wait for it (before a single cycle, as ``recommend`` runs)."""
        self._started_at = self._clock()
        await self.refresh(targets)

    async def refresh(self, targets: Sequence[TargetPolicy]) -> None:
        """Read the history and refit every target whose history was read; the others keep
        their last fit. Never raises for I/O or fit failures (each is logged)."""
        capacity_targets = [t for t in targets if t.signals.capacity_enabled]
        if not capacity_targets:
            return
        try:
            read = await self._read(capacity_targets, self._clock())
        except Exception as err:  # a reader's bug must not end the loop's task
            read = HistoryRead({}, (f"demand history: {type(err).__name__}: {err}",))
        self.errors = read.errors
        for e in read.errors:
            self.log.warning("seasonal_history_failed", error=e, kept="the last fit")
        loop = asyncio.get_running_loop()
        for t in capacity_targets:
            history = read.histories.get(t.key)
            if history is None:
                continue
            horizon = t.signals.capacity.model_load_seconds + self.settings.interval_seconds
            try:
                fit = await loop.run_in_executor(
                    self._executor, _fit, history, horizon, self.settings
                )
            except Exception as err:  # a numerical failure keeps the last fit
                self.log.warning("seasonal_fit_failed", target=t.key, error=str(err))
                continue
            old = self._forecasts.get(t.key)
            if old is None or old.in_use != fit.in_use:
                self.log.info("seasonal_forecast", target=t.key, in_use=fit.in_use, note=fit.note)
            self._forecasts[t.key] = fit
            self._prices[t.key] = _prices_of(t)

    async def aclose(self) -> None:
        """Cancel a running refresh and stop the executor this refresher made."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
