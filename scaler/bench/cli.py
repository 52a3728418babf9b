"""The ``vllm-scaler bench`` command: autoscaling policies against hindsight references on one
trace, in virtual time."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Annotated

import typer

from scaler.config.cli_options import OutputFormat, OutputOpt
from scaler.config.durations import duration_option
from scaler.config.options import (
    MAX_REPLAY_MINUTES,
    option_errors,
    plot_option,
    write_output,
)
from scaler.config.policy import PolicyError, load_policy
from scaler.sim.catalog import TRACE_CHOICES, trace_label
from scaler.sim.routing import ROUTING_HELP, routing_option_error
from scaler.sim.trace import time_unit_option_error
from scaler.sim.trace_options import (
    OutputColumnOpt,
    PromptColumnOpt,
    TimeColumnOpt,
    TimeUnitOpt,
    trace_error_hint,
)


def _quiet_logs() -> None:
    # The production source logs every absent or invalid signal; thousands of virtual cycles
    # would bury the table, and the figures already say what happened.
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))


# option -> (low, low inclusive, high): what each numeric option of ``bench`` accepts. The
# replay ticks once per virtual second: a week is the longest window taken (a longer one ran
# for days, or overflowed on its per-second tables).
_BOUNDS = {
    "--slo-ttft-seconds": (0.0, False, 3600.0),
    "--slo-ttft": (0.0, False, 3600.0),  # the older name of --slo-ttft-seconds
    "--model-load-seconds": (0.0, True, 86400.0),
    "--min-peak-replicas": (1.0, True, 1000.0),
    "--jobs": (0.0, True, 64.0),
    "--start-minute": (0.0, True, math.inf),
    "--minutes": (0.0, False, MAX_REPLAY_MINUTES),
    "--rate-scale": (0.0, False, 1000.0),
    "--slo-itl-seconds": (0.0, False, 60.0),
    "--routing-seeds": (1.0, True, 20.0),
    "--max-replicas": (1.0, True, 10000.0),
    "--hash-block-tokens": (1.0, True, 1e6),
}


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to the main app."""

    @app.command()
    def bench(
        ctx: typer.Context,
        trace: Annotated[str, typer.Option(help=f"{TRACE_CHOICES}.")] = "code",
        rate_scale: Annotated[
            str,
            typer.Option(
                help="Request-rate multiplier, or 'auto' (peak needs --min-peak-replicas)."
            ),
        ] = "auto",
        min_peak_replicas: Annotated[
            int,
            typer.Option(
                help="With --rate-scale auto: replicas the busiest minutes need (each started "
                "empty, keeping 99% within the SLO)."
            ),
        ] = 8,
        slo_ttft_seconds: Annotated[
            float,
            typer.Option(
                parser=duration_option,
                metavar="DURATION",
                help="TTFT SLO, a duration (2, 2s, 500ms; goal: 99% of requests within it).",
            ),
        ] = 2.0,
        # the option's older name, as sim's is --slo-ttft-seconds: kept for scripts, not shown
        slo_ttft: Annotated[
            float | None, typer.Option("--slo-ttft", hidden=True, parser=duration_option)
        ] = None,
        slo_itl_seconds: Annotated[
            float,
            typer.Option(
                parser=duration_option,
                metavar="DURATION",
                help="ITL SLO on each request's mean inter-token latency, a duration (0.1, "
                "100ms; goal: 99% of requests within both SLOs).",
            ),
        ] = 0.1,
        routing_seeds: Annotated[
            int,
            typer.Option(
                help="Routing seeds every row runs on (--seed, --seed + 1, ...): shares are "
                "reported as their mean and spread."
            ),
        ] = 3,
        max_replicas: Annotated[
            int | None,
            typer.Option(
                help="Every row's maximum (default: twice what the busiest minutes need).",
                show_default=False,
            ),
        ] = None,
        model_load_seconds: Annotated[
            float,
            typer.Option(
                parser=duration_option,
                metavar="DURATION",
                help="Time from pod creation to Ready, a duration (120, 2m).",
            ),
        ] = 120.0,
        policy: Annotated[
            Path | None,
            typer.Option(
                help="vllm-scaler policy file (first target; default: shipped defaults, max 32)."
            ),
        ] = None,
        time_column: TimeColumnOpt = "TIMESTAMP",
        time_unit: TimeUnitOpt = "auto",
        prompt_column: PromptColumnOpt = "ContextTokens",
        output_column: OutputColumnOpt = "GeneratedTokens",
        hash_column: Annotated[
            str | None,
            typer.Option(
                help="Column of each prompt's block hashes (a trace file's, e.g. Mooncake's "
                "hash_ids): the replicas' prefix caches look them up.",
                show_default=False,
            ),
        ] = None,
        hash_block_tokens: Annotated[
            int, typer.Option(help="With --hash-column: prompt tokens per hash.")
        ] = 512,
        start_minute: Annotated[float, typer.Option(help="Trace minute to start at.")] = 0.0,
        minutes: Annotated[
            float | None,
            typer.Option(help="Trace minutes to replay, at most a week (default: all)."),
        ] = None,
        seed: Annotated[
            int, typer.Option(help="Seed of the rate scaling, synthetic shapes and routing.")
        ] = 0,
        routing: Annotated[str, typer.Option(help=ROUTING_HELP)] = "random",
        keda_cached_metrics: Annotated[
            bool,
            typer.Option(
                "--keda-cached-metrics",
                help="KEDA baseline with useCachedMetrics: the HPA reads KEDA's last 30 s poll "
                "(default: a fresh query on every HPA sync, as KEDA runs by default).",
            ),
        ] = False,
        jobs: Annotated[
            int,
            typer.Option(
                help="Processes to simulate in (default, 0: up to 2 CPUs).", show_default=False
            ),
        ] = 0,
        plot: Annotated[
            str | None,
            typer.Option(
                help="Where the plot goes; its extension is the format (.png, .svg, .pdf...) "
                "(default: out/bench/<trace>-bench.png).",
                show_default=False,
            ),
        ] = None,
        no_plot: Annotated[bool, typer.Option("--no-plot", help="Do not draw the plot.")] = False,
        frontier: Annotated[
            str | None,
            typer.Option(
                help="Sweep this policy setting (dotted path in a target's policy, e.g. a "
                "standing-headroom fraction) for vllm-scaler and plot the share within both "
                "SLOs against GPU-hours, instead of the table.",
                show_default=False,
            ),
        ] = None,
        frontier_values: Annotated[
            str,
            typer.Option(help="With --frontier: the values, comma-separated."),
        ] = "0,0.1,0.2,0.3,0.4,0.5",
        output: OutputOpt = OutputFormat.TEXT,
    ) -> None:
        """Compare vllm-scaler with KEDA, HPA-on-KV-cache and a KPA-style policy, against the
        cheapest fixed fleet, hindsight schedules and a lower bound, on a trace in virtual time
        with the same replica model and routing; print the figures and write a plot."""
        from scaler.bench.report import as_json, format_table, plot_bench
        from scaler.bench.runner import BenchOptions, RateScaleError, run_bench

        scale: float | None = None
        if rate_scale != "auto":
            try:
                scale = float(rate_scale)
            except ValueError:
                typer.echo(
                    f"vllm-scaler: --rate-scale: expected a number or 'auto', got {rate_scale!r}",
                    err=True,
                )
                raise typer.Exit(2) from None
        source = ctx.get_parameter_source("slo_ttft_seconds")
        if slo_ttft is not None and source is not None and source.name != "DEFAULT":
            typer.echo(
                f"vllm-scaler: --slo-ttft: value {slo_ttft:g}: expected either --slo-ttft-seconds "
                "or its older name --slo-ttft, not both",
                err=True,
            )
            raise typer.Exit(2)
        # an error names the option as given: the older name's says --slo-ttft
        slo_option = "slo_ttft" if slo_ttft is not None else "slo_ttft_seconds"
        slo_seconds = slo_ttft if slo_ttft is not None else slo_ttft_seconds
        errors = option_errors(
            _BOUNDS,
            **{slo_option: slo_seconds},
            model_load_seconds=model_load_seconds,
            min_peak_replicas=min_peak_replicas,
            jobs=jobs,
            start_minute=start_minute,
            slo_itl_seconds=slo_itl_seconds,
            routing_seeds=routing_seeds,
            hash_block_tokens=hash_block_tokens,
            **({"max_replicas": max_replicas} if max_replicas is not None else {}),
            **({"rate_scale": scale} if scale is not None else {}),
            **({"minutes": minutes} if minutes is not None else {}),
        )
        errors += [
            e
            for e in (routing_option_error(routing), time_unit_option_error(time_unit))
            if e is not None
        ]
        kind = "frontier" if frontier is not None else "bench"
        png_path, plot_error = plot_option(
            plot, default=f"out/bench/{trace_label(trace)}-{kind}.png", no_plot=no_plot
        )
        sweep: list[float] = []
        if frontier is not None:
            try:
                sweep = [float(v) for v in frontier_values.split(",") if v.strip()]
            except ValueError:
                errors.append(
                    f"--frontier-values: expected numbers separated by commas, got "
                    f"{frontier_values!r}"
                )
            if not sweep and not errors:
                errors.append("--frontier-values: expected at least one value")
        errors += [plot_error] if plot_error else []
        if errors:
            typer.echo("\n".join(f"vllm-scaler: {e}" for e in errors), err=True)
            raise typer.Exit(2)
        loaded = None
        if policy is not None:
            try:
                loaded = load_policy(policy, given_as="--policy FILE")
            except PolicyError as err:
                typer.echo(f"vllm-scaler: --policy: {err}", err=True)
                raise typer.Exit(2) from None
        options = BenchOptions(
            trace=trace,
            time_column=time_column,
            time_unit=time_unit,
            prompt_column=prompt_column,
            output_column=output_column,
            hash_column=hash_column,
            hash_block_tokens=hash_block_tokens,
            start_seconds=start_minute * 60,
            duration_seconds=minutes * 60 if minutes is not None else None,
            rate_scale=scale,
            min_peak_replicas=min_peak_replicas,
            slo_ttft_seconds=slo_seconds,
            model_load_seconds=model_load_seconds,
            policy=loaded,
            policy_source=f"policy {policy}" if policy is not None else "shipped default policy",
            seed=seed,
            slo_itl_seconds=slo_itl_seconds,
            routing_seeds=routing_seeds,
            max_replicas=max_replicas,
            jobs=jobs if jobs > 0 else max(1, min(2, os.cpu_count() or 1)),
            routing=routing,
            keda_cached_metrics=keda_cached_metrics,
        )
        _quiet_logs()
        if frontier is not None:
            _run_frontier(options, frontier, sweep, png_path, output)
            return
        try:
            # What was read and the rate scale go to stderr before the long part; the table
            # repeats the summary line.
            result = run_bench(options, progress=lambda line: typer.echo(line, err=True))
        except RateScaleError as err:
            typer.echo(f"vllm-scaler: --rate-scale {rate_scale}: {err}", err=True)
            raise typer.Exit(2) from None
        except (OSError, ValueError) as err:
            typer.echo(f"vllm-scaler: --trace: {err}{trace_error_hint(str(err))}", err=True)
            raise typer.Exit(2) from None
        # a plot that cannot be written leaves the results printed, and exit 1
        png, plot_error = (
            (None, None)
            if png_path is None
            else write_output("--plot", lambda: plot_bench(result, png_path))
        )
        if plot_error:
            typer.echo(f"vllm-scaler: {plot_error}", err=True)
        if output == "json":
            typer.echo(json.dumps(as_json(result, png), indent=2))
        else:
            typer.echo(format_table(result, png))
        if plot_error:
            raise typer.Exit(1)


def _run_frontier(
    options: object, setting: str, values: list[float], png: Path | None, output: str
) -> None:
    """``bench --frontier``: the sweep, its points printed (text or JSON) and plotted."""
    from scaler.bench.frontier import plot_frontier, run_frontier
    from scaler.bench.runner import BenchOptions, RateScaleError

    assert isinstance(options, BenchOptions)
    try:
        result = run_frontier(
            options, setting, values, progress=lambda line: typer.echo(line, err=True)
        )
    except RateScaleError as err:
        typer.echo(f"vllm-scaler: --rate-scale: {err}", err=True)
        raise typer.Exit(2) from None
    except ValueError as err:
        typer.echo(f"vllm-scaler: --frontier: {err}", err=True)
        raise typer.Exit(2) from None
    except OSError as err:
        typer.echo(f"vllm-scaler: --trace: {err}", err=True)
        raise typer.Exit(2) from None
    written, plot_error = (
        (None, None) if png is None else write_output("--plot", lambda: plot_frontier(result, png))
    )
    points = [
        {
            "value": p.value,
            "default": p.default,
            "both_request_share": p.share,
            "both_request_share_spread": p.row.spread("both_request_share"),
            "gpu_hours": p.gpu_hours,
        }
        for p in result.points
    ]
    if output == "json":
        doc = {
            "trace": result.trace,
            "setting": result.setting,
            "points": points,
            "plot": str(written) if written is not None else None,
        }
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(f"trace       {result.trace}")
        typer.echo(f"frontier    vllm-scaler, {result.setting} swept")
        for pt in points:
            mark = " (default)" if pt["default"] else ""
            typer.echo(
                f"  {pt['value']:>8g}{mark:<10} {100 * pt['both_request_share']:6.2f}% within "
                f"both SLOs, {pt['gpu_hours']:.2f} GPU-h"
            )
        for name, row in result.references.items():
            typer.echo(
                f"  {name:<18} {100 * row.mean('both_request_share'):6.2f}% within both SLOs, "
                f"{row.mean('gpu_hours'):.2f} GPU-h"
            )
        if written is not None:
            typer.echo(f"plot        {written}")
    if plot_error:
        typer.echo(f"vllm-scaler: {plot_error}", err=True)
        raise typer.Exit(1)
