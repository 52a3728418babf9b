"""The ``vllm-scaler sim`` command: the simulated fleet with a real Prometheus (the demo)."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scaler.config.cli_options import OutputFormat, OutputOpt
from scaler.config.options import MAX_REPLAY_MINUTES, option_errors, output_dir_error
from scaler.sim.catalog import TRACE_CHOICES
from scaler.sim.prometheus_server import PrometheusNotInstalledError, PrometheusStartError
from scaler.sim.routing import ROUTING_HELP, routing_option_error
from scaler.sim.trace import time_unit_option_error
from scaler.sim.trace_options import (
    OutputColumnOpt,
    PromptColumnOpt,
    TimeColumnOpt,
    TimeUnitOpt,
    trace_error_hint,
)

if TYPE_CHECKING:
    from scaler.sim.report import RunSummary


def register(app: typer.Typer) -> None:
    """Add the ``sim`` command to the main app."""

    @app.command()
    def sim(
        trace: Annotated[str, typer.Option(help=f"{TRACE_CHOICES}.")] = "code",
        time_column: TimeColumnOpt = "TIMESTAMP",
        time_unit: TimeUnitOpt = "auto",
        prompt_column: PromptColumnOpt = "ContextTokens",
        output_column: OutputColumnOpt = "GeneratedTokens",
        start_minute: Annotated[float, typer.Option(help="Trace minute to start at.")] = 13.0,
        minutes: Annotated[
            float, typer.Option(help="Trace minutes to replay, at most a week.")
        ] = 6.0,
        compress: Annotated[
            float, typer.Option(help="Time compression of the trace (3 = 3x faster).")
        ] = 3.0,
        rate_scale: Annotated[
            float, typer.Option(help="Scale the request rate (0.5 keeps half).")
        ] = 0.5,
        model_load_seconds: Annotated[
            float, typer.Option(help="Model load time of a new replica.")
        ] = 20.0,
        tail_seconds: Annotated[
            float, typer.Option(help="Seconds to keep running after the trace.")
        ] = 150.0,
        interval: Annotated[float, typer.Option(help="Controller interval, seconds.")] = 5.0,
        slo_ttft_seconds: Annotated[float, typer.Option(help="TTFT target for the summary.")] = 2.0,
        policy: Annotated[
            Path | None, typer.Option(help="Policy file (default: the demo policy).")
        ] = None,
        workdir: Annotated[
            Path, typer.Option(help="Where Prometheus data, kubeconfig and the plot go.")
        ] = Path("out/demo"),
        no_controller: Annotated[
            bool, typer.Option("--no-controller", help="Run only the fleet and Prometheus.")
        ] = False,
        metrics_port: Annotated[
            int | None,
            typer.Option(
                help="Port of the controller's own /metrics on 127.0.0.1, which the "
                "simulated Prometheus scrapes (job vllm-scaler), as run serves it; default: "
                "a free port; 0: not served.",
                show_default=False,
            ),
        ] = None,
        seed: Annotated[int, typer.Option(help="Seed of the rate scaling and the routing.")] = 0,
        routing: Annotated[str, typer.Option(help=ROUTING_HELP)] = "random",
        output: OutputOpt = OutputFormat.TEXT,
    ) -> None:
        """Replay a real trace against a simulated vLLM fleet.

        A real Prometheus scrapes the fleet and the controller runs in the loop as its own
        process, exactly as in a cluster: Prometheus scrapes its own /metrics too
        (--metrics-port). Prints every decision, then a summary and a plot (--output json:
        the decisions on stderr, the summary as one JSON object on stdout).

        Exit codes: 0 when the run completed; 3 when a control cycle of the controller failed
        (the summary counts them); 1 when the controller exited early or Prometheus could not
        start; 2 for invalid options; 128 + N when stopped by signal N.
        """
        from scaler.config.policy import PolicyError, load_policy
        from scaler.sim.catalog import open_trace
        from scaler.sim.demo import (
            EXAMPLE_POLICY,
            DemoOptions,
            WorkdirInUseError,
            fleet_target_error,
            run_demo,
        )
        from scaler.sim.engine import ReplicaModel
        from scaler.sim.trace import summary_line

        errors = check_options(
            start_minute=start_minute,
            minutes=minutes,
            compress=compress,
            rate_scale=rate_scale,
            model_load_seconds=model_load_seconds,
            tail_seconds=tail_seconds,
            interval=interval,
            slo_ttft_seconds=slo_ttft_seconds,
        )
        if metrics_port is not None:
            errors += option_errors({"--metrics-port": (0, True, 65535)}, metrics_port=metrics_port)
        errors += [
            e
            for e in (
                routing_option_error(routing),
                time_unit_option_error(time_unit),
                output_dir_error("--workdir", workdir),
            )
            if e is not None
        ]
        if errors:
            typer.echo("\n".join(f"vllm-scaler: {e}" for e in errors), err=True)
            raise typer.Exit(2)
        # checked as given: resolving first would turn an empty --policy '' into the cwd
        given = EXAMPLE_POLICY if policy is None else policy
        try:
            parsed = load_policy(given, given_as="--policy FILE")
        except PolicyError as err:
            typer.echo(f"vllm-scaler: --policy: {err}", err=True)
            raise typer.Exit(2) from None
        if (why := fleet_target_error(parsed)) is not None:
            typer.echo(f"vllm-scaler: --policy {given}: {why}", err=True)
            raise typer.Exit(2)
        policy_file = given.resolve()
        try:
            t = open_trace(
                trace,
                time_column=time_column,
                prompt_column=prompt_column,
                output_column=output_column,
                time_unit=time_unit,
                start_seconds=start_minute * 60,
                duration_seconds=minutes * 60,
                compress=compress,
                rate_scale=rate_scale,
                seed=seed,
            )
        except (OSError, ValueError) as err:
            typer.echo(f"vllm-scaler: --trace: {err}{trace_error_hint(str(err))}", err=True)
            raise typer.Exit(2) from None
        if not t.requests:
            scaled = f" at rate x{rate_scale:g}" if rate_scale != 1 else ""
            typer.echo(
                f"vllm-scaler: --start-minute/--minutes: no requests in minutes "
                f"{start_minute:g}-{start_minute + minutes:g} of {trace}{scaled}",
                err=True,
            )
            raise typer.Exit(2)
        opts = DemoOptions(
            trace=t,
            workdir=workdir,
            policy_file=policy_file,
            model_load_seconds=model_load_seconds,
            tail_seconds=tail_seconds,
            control_interval_seconds=interval,
            slo_ttft_seconds=slo_ttft_seconds,
            with_controller=not no_controller,
            metrics_port=metrics_port,
            routing=routing,
            seed=seed,
            trace_summary=summary_line(
                t, max_model_len=ReplicaModel().max_model_len, rate_scale=f"x{rate_scale:g}"
            ),
        )
        report = None
        if output is OutputFormat.JSON:
            from scaler.sim.report import summary_json

            def report(summary: RunSummary, plot: Path | None) -> None:
                typer.echo(json.dumps(summary_json(summary, plot)))

        out = sys.stderr if output is OutputFormat.JSON else sys.stdout
        try:
            code = asyncio.run(run_demo(opts, out, report=report))
        except WorkdirInUseError as err:
            typer.echo(f"vllm-scaler: {err}", err=True)
            raise typer.Exit(2) from None
        except (PrometheusNotInstalledError, PrometheusStartError) as err:
            typer.echo(f"vllm-scaler: {err}", err=True)
            raise typer.Exit(1) from None
        raise typer.Exit(code)


#: option -> (lowest, lowest allowed?, highest); each value must be finite as well.
_BOUNDS: dict[str, tuple[float, bool, float]] = {
    "--start-minute": (0.0, True, math.inf),
    "--minutes": (0.0, False, MAX_REPLAY_MINUTES),
    "--compress": (0.0, False, math.inf),
    "--rate-scale": (0.0, False, math.inf),
    "--model-load-seconds": (0.0, True, math.inf),
    "--tail-seconds": (0.0, True, math.inf),
    "--interval": (0.0, False, 3600.0),  # as VLLM_SCALER_CONTROL_INTERVAL_SECONDS
    "--slo-ttft-seconds": (0.0, False, math.inf),
}


def check_options(**values: float) -> list[str]:
    """One error per numeric option of ``sim`` out of its range, naming the option.

    Keyword names are the options' (``rate_scale`` is ``--rate-scale``).
    """
    return option_errors(_BOUNDS, **values)
