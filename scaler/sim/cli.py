"""The ``vllm-scaler sim`` command: the simulated fleet with a real Prometheus (the demo)."""

from __future__ import annotations

import asyncio
import io
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO, cast

import typer

from scaler.config.cli_options import OutputFormat, OutputOpt
from scaler.config.durations import duration_option
from scaler.config.options import MAX_REPLAY_MINUTES, option_errors, output_dir_error
from scaler.sim.catalog import TRACE_CHOICES
from scaler.sim.demo_docs import doc_blocks, missing_doc_blocks, write_doc_blocks
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
    from scaler.sim.demo import SliceBench
    from scaler.sim.report import RunSummary


#: Builds the bench's side of the demo (:class:`scaler.bench.demo.DemoBench`) from the run's
#: replica model, TTFT target, routing, seed, scrape interval and control interval.
BenchFactory = Callable[..., "SliceBench"]


def register(app: typer.Typer, bench: BenchFactory | None = None) -> None:
    """Add the ``sim`` command to the main app; ``bench`` joins in the bench's side of the
    demo (the profile seed, the starting fleet, the replays beside the live run)."""

    @app.command()
    def sim(
        trace: Annotated[str, typer.Option(help=f"{TRACE_CHOICES}.")] = "conv",
        time_column: TimeColumnOpt = "TIMESTAMP",
        time_unit: TimeUnitOpt = "auto",
        prompt_column: PromptColumnOpt = "ContextTokens",
        output_column: OutputColumnOpt = "GeneratedTokens",
        start_minute: Annotated[float, typer.Option(help="Trace minute to start at.")] = 16.0,
        minutes: Annotated[
            float, typer.Option(help="Trace minutes to replay, at most a week.")
        ] = 12.0,
        compress: Annotated[
            float, typer.Option(help="Time compression of the trace (3 = 3x faster).")
        ] = 3.0,
        rate_scale: Annotated[
            float, typer.Option(help="Scale the request rate (0.5 keeps half).")
        ] = 0.6,
        model_load_seconds: Annotated[
            float, _duration("Model load time of a new replica (a duration: 20, 20s, 1m).")
        ] = 20.0,
        tail_seconds: Annotated[
            float, _duration("How long to keep running after the trace (a duration).")
        ] = 30.0,
        interval: Annotated[float, _duration("Controller interval (a duration: 5, 5s).")] = 5.0,
        slo_ttft_seconds: Annotated[
            float, _duration("TTFT target for the summary (a duration: 2, 2s, 500ms).")
        ] = 2.0,
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
        initial_replicas: Annotated[
            int | None,
            typer.Option(
                help="Replicas at the start; default: what the slice's first minute needs "
                "(ready and empty, 99% of its requests within the TTFT target).",
                show_default=False,
            ),
        ] = None,
        profile_seed: Annotated[
            bool,
            typer.Option(
                help="Seed the capacity signal from a profile of one replica on the slice's "
                "mix, when the policy has no seed (--no-profile-seed: it learns from nothing).",
            ),
        ] = True,
        no_compare: Annotated[
            bool,
            typer.Option(
                "--no-compare",
                help="Leave out the replays of the same slice (vllm-scaler and KEDA, in "
                "virtual time) beside the live run.",
            ),
        ] = False,
        write_summary: Annotated[
            list[Path] | None,
            typer.Option(
                metavar="FILE",
                help="After the run, put its summary (and its decisions) into this Markdown "
                "file's demo-summary (demo-transcript) block; may be given more than once.",
                show_default=False,
            ),
        ] = None,
        seed: Annotated[int, typer.Option(help="Seed of the rate scaling and the routing.")] = 0,
        routing: Annotated[str, typer.Option(help=ROUTING_HELP)] = "random",
        kube: Annotated[
            str,
            typer.Option(
                help="The Kubernetes side: stand-in (the API stand-in, the fleet plays the "
                "ReplicaSet; starts at once) or real (kube-apiserver, controller-manager, "
                "scheduler and kwok started here: a real ReplicaSet makes the pods, kwok makes "
                "each Ready after the model load; needs Go to build them on first use, about "
                "10-30 minutes, then seconds).",
            ),
        ] = "stand-in",
        output: OutputOpt = OutputFormat.TEXT,
    ) -> None:
        """Replay a real trace against a simulated vLLM fleet, beside KEDA.

        A real Prometheus scrapes the fleet and the controller runs in the loop as its own
        process, exactly as in a cluster: Prometheus scrapes its own /metrics too
        (--metrics-port). Prints each decision that changed something, then a summary, the
        same slice replayed in virtual time under vllm-scaler and under KEDA (--no-compare
        leaves that out), and a plot (--output json: the decisions on stderr, the summary as
        one JSON object on stdout).

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
        for doc in write_summary or []:
            try:
                why = missing_doc_blocks(doc.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as err:
                why = f"expected a readable Markdown file ({getattr(err, 'strerror', None) or err})"
            if why:
                errors.append(f"--write-summary: value {str(doc)!r}: {why}")
        if initial_replicas is not None:
            errors += option_errors(
                {"--initial-replicas": (1, True, 1000)}, initial_replicas=initial_replicas
            )
        if kube not in ("stand-in", "real"):
            errors.append(f"--kube: value {kube!r}: expected stand-in or real")
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
        model = ReplicaModel(model_load_seconds=model_load_seconds)
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
            initial_replicas=initial_replicas,
            profile_seed=profile_seed,
            compare=not no_compare,
            kube=kube,
            bench=None
            if bench is None
            else bench(
                model=model,
                slo_ttft_seconds=slo_ttft_seconds,
                routing=routing,
                seed=seed,
                scrape_interval_seconds=1,
                interval_seconds=interval,
            ),
        )
        report = None
        if output is OutputFormat.JSON:
            from scaler.sim.report import summary_json

            def report(summary: RunSummary, plot: Path | None) -> None:
                typer.echo(json.dumps(summary_json(summary, plot)))

        out: TextIO = sys.stderr if output is OutputFormat.JSON else sys.stdout
        printed = _Recorded(out)
        try:
            # run_demo writes and flushes only, as _Recorded does
            code = asyncio.run(run_demo(opts, cast(TextIO, printed), report=report))
        except WorkdirInUseError as err:
            typer.echo(f"vllm-scaler: {err}", err=True)
            raise typer.Exit(2) from None
        except (PrometheusNotInstalledError, PrometheusStartError) as err:
            typer.echo(f"vllm-scaler: {err}", err=True)
            raise typer.Exit(1) from None
        except RuntimeError as err:
            from scaler.sim.controlplane import BuildError, ComponentError, GoNotFoundError

            if not isinstance(err, GoNotFoundError | BuildError | ComponentError):
                raise
            typer.echo(f"vllm-scaler: --kube real: {err}", err=True)
            raise typer.Exit(1) from None
        if write_summary and code == 0:
            blocks = doc_blocks(printed.text(), workdir=workdir)
            for doc in write_summary:
                doc.write_text(
                    write_doc_blocks(doc.read_text(encoding="utf-8"), blocks), encoding="utf-8"
                )
                typer.echo(f"vllm-scaler: wrote the run's summary into {doc}", err=True)
        raise typer.Exit(code)


class _Recorded(io.TextIOBase):
    """A text stream that writes through to ``out`` and keeps a copy of what was written."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._parts: list[str] = []

    def write(self, text: str) -> int:
        self._parts.append(text)
        return self._out.write(text)

    def flush(self) -> None:
        self._out.flush()

    def text(self) -> str:
        """Everything written so far."""
        return "".join(self._parts)


def _duration(help_text: str) -> Any:
    """A seconds option in the command line's one duration grammar."""
    return typer.Option(parser=duration_option, metavar="DURATION", help=help_text)


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
