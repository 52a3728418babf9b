"""Scale benchmark: many targets on one real Prometheus, vllm-scaler's plan vs one query per target.

The command line: ``vllm-scaler bench-scale`` (:func:`register_scale`) and
``python -m scaler.bench.scale`` (:func:`main`); options checked, the result printed as text
or JSON (progress on stderr).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence

import typer

from scaler.bench.scale.report import format_result
from scaler.bench.scale.run import run_scale_bench
from scaler.config.cli_options import OutputFormat, OutputOpt
from scaler.config.durations import duration_option
from scaler.config.options import option_errors

__all__ = ["main", "register_scale"]

# option -> (low, low inclusive, high)
_BOUNDS = {
    "--targets": (1.0, True, 100_000.0),
    "--pods": (1.0, True, 1000.0),
    "--namespaces": (1.0, True, 100_000.0),
    "--cycles": (1.0, True, 100_000.0),
    "--per-target-cycles": (0.0, True, 100_000.0),
    "--scrape-interval": (0.0, False, 3600.0),
}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scaler.bench.scale [--targets N] [--pods N] [--cycles N] [--no-ttft]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m scaler.bench.scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--namespaces", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--per-target-cycles", type=int, default=5)
    parser.add_argument("--scrape-interval", type=float, default=15.0)
    parser.add_argument("--no-ttft", action="store_true", help="disable ttft_p95 on every target")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    errors = option_errors(
        _BOUNDS,
        targets=args.targets,
        pods=args.pods,
        namespaces=args.namespaces,
        cycles=args.cycles,
        per_target_cycles=args.per_target_cycles,
        scrape_interval=args.scrape_interval,
    )
    if not errors and args.namespaces > args.targets:
        errors.append(
            f"--namespaces: value {args.namespaces}: expected at most --targets ({args.targets})"
        )
    if errors:
        print("\n".join(f"vllm-scaler: {e}" for e in errors), file=sys.stderr)
        return 2
    _quiet()
    result = asyncio.run(
        run_scale_bench(
            targets=args.targets,
            pods_per_target=args.pods,
            namespaces=args.namespaces,
            cycles=args.cycles,
            per_target_cycles=args.per_target_cycles,
            scrape_interval_seconds=args.scrape_interval,
            ttft=not args.no_ttft,
            progress=True,
        )
    )
    print(json.dumps(result.as_json(), indent=1) if args.json else format_result(result))
    return 0


def register_scale(app: typer.Typer) -> None:
    """Add ``bench-scale`` to the main typer app (``scaler/cli.py``)."""

    @app.command("bench-scale")
    def bench_scale(
        targets: int = typer.Option(1000, help="Targets (Deployments)."),
        pods: int = typer.Option(8, help="Pods per target."),
        namespaces: int = typer.Option(50, help="Namespaces the targets are spread over."),
        cycles: int = typer.Option(20, help="Control cycles with vllm-scaler's query plan."),
        per_target_cycles: int = typer.Option(
            3, help="Cycles with one query per target and signal (0: skip)."
        ),
        scrape_interval: float = typer.Option(
            15.0,
            parser=duration_option,
            metavar="DURATION",
            help="Prometheus scrape interval, a duration (15, 15s).",
        ),
        no_ttft: bool = typer.Option(
            False, "--no-ttft", help="Disable ttft_p95 on every target (queue and KV only)."
        ),
        output: OutputOpt = OutputFormat.TEXT,
    ) -> None:
        """Scale benchmark: many targets on a real Prometheus; queries, cycle time, RSS.

        It starts its own Prometheus on loopback (no credentials: the Prometheus settings do
        not apply); progress goes to stderr, the result to stdout.
        """
        json_output = output is OutputFormat.JSON
        raise typer.Exit(
            main(
                [
                    f"--targets={targets}",
                    f"--pods={pods}",
                    f"--namespaces={namespaces}",
                    f"--cycles={cycles}",
                    f"--per-target-cycles={per_target_cycles}",
                    f"--scrape-interval={scrape_interval}",
                    *(["--no-ttft"] if no_ttft else []),
                    *(["--json"] if json_output else []),
                ]
            )
        )


def _quiet() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
