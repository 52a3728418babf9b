"""The ``vllm-scaler backtest`` command: a policy replayed on real history from Prometheus."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from scaler.config.cli_options import (
    PROMETHEUS_FIELDS,
    OutputFormat,
    OutputOpt,
    fail,
    settings_options,
)
from scaler.config.durations import duration_option
from scaler.config.options import option_errors, plot_option, write_output
from scaler.config.settings import PrometheusSettings
from scaler.config.wording import counted

__all__ = ["DEFAULT_MAX_STEPS", "MAX_STEPS_LIMIT", "register"]

# A step given as a plain number of seconds (15, 15.0).
# The most steps a backtest replays unless --max-steps says more: a week at 15 s is 40,320,
# a day at 1 s 86,400; beyond that a typo (--start now-400d --step 1s) would read and replay
# for many minutes.
DEFAULT_MAX_STEPS = 100_000
# The most --max-steps may allow: a run holds every step of every target until the report,
# about 3 KB a step and target (6 KB at its peak, measured with two pods), so a million steps
# is some 6 GB per target, and 91 range requests of 11,000 points per query; 11.6 days at
# 1 s, 174 days at 15 s.
MAX_STEPS_LIMIT = 1_000_000
#: Where the plot goes without --plot.
DEFAULT_PLOT = "out/backtest/backtest.png"


def _time_option(option: str, text: str, now: float) -> float:
    """``--start`` or ``--end`` in Unix seconds; a bad one ends the command naming it."""
    from scaler.backtest.timeparse import TimeParseError, parse_time

    try:
        return parse_time(text, now=now)
    except TimeParseError as err:
        raise fail(f"{option}: {err}") from None


def register(app: typer.Typer) -> None:
    """Add the ``backtest`` command to the main app."""

    @app.command()
    @settings_options(
        PrometheusSettings,
        PROMETHEUS_FIELDS,
        # A range request reads up to 11,000 points per series: longer than an instant query.
        defaults={"prometheus_timeout_seconds": 60.0},
        names={"prometheus_timeout_seconds": ("--prometheus-timeout-seconds", "--timeout")},
    )
    def backtest(
        settings: PrometheusSettings,
        policy: Annotated[
            Path,
            typer.Option(
                "--policy",
                "--policy-file",
                envvar="VLLM_SCALER_POLICY_FILE",
                help="YAML policy file.",
            ),
        ] = Path("policy.yaml"),
        start: Annotated[
            str,
            typer.Option(
                help="Start: RFC 3339 (2025-05-01T12:00:00Z), now-6h, 6h (ago) or Unix seconds."
            ),
        ] = "now-1h",
        end: Annotated[str, typer.Option(help="End, same forms as --start.")] = "now",
        step: Annotated[
            str,
            typer.Option(
                help="History step = replay control interval, a duration of whole seconds "
                "(15, 15s, 1m, 1.5m)."
            ),
        ] = "15s",
        model_load_seconds: Annotated[
            float | None,
            typer.Option(
                parser=duration_option,
                metavar="DURATION",
                help="Time until a replica the policy adds is ready (a duration), for every "
                "target and shadow (default: the policy's signals.capacity.model_load_seconds; "
                "a shadow that does not set its own takes the policy's).",
                show_default=False,
            ),
        ] = None,
        target: Annotated[
            list[str] | None,
            typer.Option(metavar="NAMESPACE/KIND/NAME", help="Only this target; repeatable."),
        ] = None,
        output: OutputOpt = OutputFormat.TEXT,
        plot: Annotated[
            str | None,
            typer.Option(
                help="Where the plot goes; its extension is the format (.png, .svg, .pdf...).",
                show_default=DEFAULT_PLOT,
            ),
        ] = None,
        no_plot: Annotated[bool, typer.Option("--no-plot", help="Do not draw the plot.")] = False,
        max_points: Annotated[
            int,
            typer.Option(help="Most steps per range request, at most 11000 (Prometheus' limit)."),
        ] = 11_000,
        max_steps: Annotated[
            int,
            typer.Option(
                help="Refuse a range of more steps than this ((--end - --start) / --step + 1); "
                "at most 1000000."
            ),
        ] = DEFAULT_MAX_STEPS,
        progress: Annotated[
            bool,
            typer.Option(
                "--progress/--no-progress",
                help="Progress bar on stderr (default: when stderr is a terminal).",
                show_default=False,
            ),
        ] = sys.stderr.isatty(),
    ) -> None:
        """Replay a policy on real history: read the signals (the controller's own PromQL, as
        range queries) and the actual replicas from Prometheus, and show what the policy would
        have done beside what happened: timeline, scale events, replica-hours, a plot."""
        from scaler.backtest.history import (
            PROMETHEUS_MAX_POINTS,
            HistoryError,
            PrometheusRangeClient,
            make_grid,
        )
        from scaler.backtest.pipeline import NoReplicaHistoryError, run_backtest
        from scaler.backtest.report import format_text, plot_backtest, steps_text, to_json
        from scaler.backtest.timeparse import rfc3339
        from scaler.config.durations import parse_duration
        from scaler.config.policy import PolicyError, load_policy
        from scaler.sources.prometheus.backend import NATIVE_HISTOGRAM_FUNCTIONS
        from scaler.telemetry.logging import configure_logging

        # The live source logs an error per read when a signal is absent; here that would be
        # one line per step. The statuses are counted in the report instead.
        configure_logging("console", level="critical")
        now = time.time()
        t_start = _time_option("--start", start, now)
        t_end = _time_option("--end", end, now)
        # one message for every wrong step, unreadable or not a whole number of seconds
        bad_step = (
            f"--step: value {step!r}: expected a whole number of seconds >= 1, bare or with a "
            "unit s, m, h, d, w or y (15, 15s, 1m, 1h30m)"
        )
        if t_end < t_start:
            raise fail(
                f"--end: value {end!r} ({rfc3339(t_end)}) is before --start {start!r} "
                f"({rfc3339(t_start)}): expected a time after --start"
            )
        try:
            # a bare number is seconds, as Prometheus' own step parameter reads it
            grid = make_grid(t_start, t_end, parse_duration(step))
        except ValueError:  # DurationError is one
            raise fail(bad_step) from None
        errors = option_errors(
            {
                "--model-load-seconds": (0, True, math.inf),
                "--max-points": (1, True, PROMETHEUS_MAX_POINTS),
                "--max-steps": (1, True, MAX_STEPS_LIMIT),
            },
            max_points=max_points,
            max_steps=max_steps,
            # not given: the policy's own (a shadow's, or the policy's when it sets none)
            **({} if model_load_seconds is None else {"model_load_seconds": model_load_seconds}),
        )
        plot_path, plot_error = plot_option(plot, default=DEFAULT_PLOT, no_plot=no_plot)
        errors += [plot_error] if plot_error else []
        if errors:
            raise fail("; ".join(errors))
        if grid.count > max_steps:
            raise fail(
                f"--start {start!r} to --end {end!r} at --step {step!r} is "
                f"{counted(grid.count, 'step', thousands=True)}, "
                f"more than the limit of {max_steps:,}: shorten the range, take a longer --step, "
                f"or raise the limit with --max-steps (up to {MAX_STEPS_LIMIT:,})"
            )
        try:
            pol = load_policy(policy)
        except PolicyError as err:
            raise fail(f"--policy: {err}") from None
        targets = [t for t in pol.targets if not target or t.key in target]
        unknown = sorted(set(target or ()) - {t.key for t in pol.targets})
        if unknown:
            keys = ", ".join(t.key for t in pol.targets)
            raise fail(f"--target {', '.join(unknown)} not in the policy (it has {keys})")

        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        typer.echo(f"vllm-scaler: {settings.describe_prometheus()}", err=True)
        # said up front, terminal or not: a long range takes a while to read and replay
        typer.echo(
            f"vllm-scaler: {steps_text(grid.count)} of {grid.step:g} s from {rfc3339(grid.start)} "
            f"to {rfc3339(grid.end)}",
            err=True,
        )
        client = PrometheusRangeClient(settings)
        bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not progress,
            transient=True,
        )
        task = bar.add_task("reading history (range requests)", total=0)

        class _Hook:
            def add_total(self, requests: int) -> None:
                bar.update(task, total=(bar.tasks[0].total or 0) + requests)

            def advance(self) -> None:
                bar.advance(task)

        no_history: list[NoReplicaHistoryError] = []
        try:
            # asked once, as the controller asks it: the queries are built from the answer
            native = client.native_histograms()
            if not native:
                typer.echo(
                    "vllm-scaler: the backend has no native-histogram functions "
                    f"({', '.join(NATIVE_HISTOGRAM_FUNCTIONS)}): TTFT is read from classic "
                    "histograms only",
                    err=True,
                )
            with bar:
                results = run_backtest(
                    client,
                    pol,
                    targets,
                    grid,
                    model_load_seconds=model_load_seconds,
                    max_points=max_points,
                    progress=_Hook(),
                    on_no_history=no_history.append,
                    native_histograms=native,
                )
        except HistoryError as err:
            raise fail(str(err), 1) from None
        finally:
            client.close()
        # a target without replica history is left out; the others are reported (exit 1)
        for missing in no_history:
            typer.echo(f"vllm-scaler: {missing}", err=True)
        if not results and output is not OutputFormat.JSON:
            raise typer.Exit(1)  # nothing to report; JSON still says which targets failed
        if no_history and results:
            typer.echo(
                f"vllm-scaler: left out {len(no_history)} of {len(targets)} targets "
                f"({', '.join(m.key for m in no_history)}); reporting the others",
                err=True,
            )
        for bt in results:
            for note in bt.notes:
                typer.echo(f"vllm-scaler: {note}", err=True)

        # a plot that cannot be written leaves the results printed, and exit 1
        png, plot_error = (
            (None, None)
            if plot_path is None or not results
            else write_output("--plot", lambda: plot_backtest(results, plot_path))
        )
        if plot_error:
            typer.echo(f"vllm-scaler: {plot_error}", err=True)
        if output is OutputFormat.JSON:
            doc = to_json(
                results,
                start=grid.start,
                end=grid.end,
                step_seconds=grid.step,
                model_load_seconds=model_load_seconds,
                plot=png,
            )
            doc["failed_targets"] = [{"target": e.key, "error": str(e)} for e in no_history]
            typer.echo(json.dumps(doc))
        else:
            typer.echo(format_text(results, step_seconds=grid.step))
            if png is not None:
                typer.echo(f"plot            {png}")
        if plot_error or no_history:
            raise typer.Exit(1)
