"""The ``vllm-scaler sim`` command: the simulated fleet with a real Prometheus (the demo)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from scaler.sim.prometheus_server import PrometheusNotInstalledError, PrometheusStartError


def register(app: typer.Typer) -> None:
    """Add the ``sim`` command to the main app."""

    @app.command()
    def sim(
        trace: Annotated[
            str,
            typer.Option(help="'code' or 'conv' (the bundled Azure traces) or a CSV/JSONL file."),
        ] = "code",
        start_minute: Annotated[float, typer.Option(help="Trace minute to start at.")] = 13.0,
        minutes: Annotated[float, typer.Option(help="Trace minutes to replay.")] = 6.0,
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
        seed: Annotated[int, typer.Option(help="Seed of the rate scaling.")] = 0,
    ) -> None:
        """Replay a real trace against a simulated vLLM fleet, with a real Prometheus and the
        controller in the loop; print every decision, a summary and a plot."""
        from scaler.sim.demo import EXAMPLE_POLICY, DemoOptions, resolve_trace, run_demo
        from scaler.sim.trace import load_trace

        try:
            t = load_trace(
                resolve_trace(trace),
                start_seconds=start_minute * 60,
                duration_seconds=minutes * 60,
                compress=compress,
                rate_scale=rate_scale,
                seed=seed,
            )
        except (OSError, ValueError) as err:
            typer.echo(f"vllm-scaler: --trace: {err}", err=True)
            raise typer.Exit(2) from None
        opts = DemoOptions(
            trace=t,
            workdir=workdir,
            policy_file=(policy or EXAMPLE_POLICY).resolve(),
            model_load_seconds=model_load_seconds,
            tail_seconds=tail_seconds,
            control_interval_seconds=interval,
            slo_ttft_seconds=slo_ttft_seconds,
            with_controller=not no_controller,
        )
        try:
            code = asyncio.run(run_demo(opts))
        except (PrometheusNotInstalledError, PrometheusStartError) as err:
            typer.echo(f"vllm-scaler: {err}", err=True)
            raise typer.Exit(1) from None
        raise typer.Exit(code)
