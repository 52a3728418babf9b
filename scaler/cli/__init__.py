"""The ``vllm-scaler`` command line (typer).

Each command is imported when it runs or its ``--help`` is asked for (:mod:`.lazy`): the
list below is all ``vllm-scaler --help`` needs. Every command takes ``--output text|json``
(``-o``) for what it reports, and everything any command prints passes through the
secret-masking streams installed before it runs (:mod:`scaler.telemetry.redact`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import typer

from scaler.cli.lazy import LazyCommand, LazyGroup

__all__ = ["COMMANDS", "EXTRAS", "app", "main"]

#: The commands, in the order ``--help`` lists them, with the first line of each one's help.
COMMANDS = (
    LazyCommand(
        "run",
        "scaler.cli.controller:register",
        "Run the controller loop: read Prometheus, decide, patch the scale subresource.",
    ),
    LazyCommand(
        "recommend",
        "scaler.cli.controller:register",
        "Dry run: print current and desired replicas, every signal and the reason, per target.",
    ),
    LazyCommand(
        "check-policy",
        "scaler.cli.controller:register",
        "Validate a policy file and print the targets it defines: replicas, signals, the "
        "series the controller reads for each (the selector it sends; then only the series of "
        "the pods the Kubernetes API lists for the workload count) and the selector of a "
        "backtest.",
    ),
    LazyCommand(
        "as-resources",
        "scaler.cli.controller:register",
        "Print the VLLMAutoscaler resources of a policy file's targets, one per target in its "
        "workload's namespace and named after it (kubectl apply -f - takes them): the fields "
        "each target writes, spelled as the resource spells them; the defaults it leaves out "
        "stay out.",
    ),
    LazyCommand(
        "sim",
        "scaler.cli:_register_sim",
        "Replay a real trace against a simulated vLLM fleet, beside KEDA.",
        ("sim", ("matplotlib",)),
    ),
    LazyCommand(
        "bench",
        "scaler.bench.cli:register",
        "Compare vllm-scaler with KEDA, HPA-on-KV-cache and a KPA-style policy, against the "
        "cheapest fixed fleet, hindsight schedules and a lower bound, on a trace in virtual "
        "time with the same replica model and routing; print the figures and write a plot.",
        ("sim", ("matplotlib",)),
    ),
    LazyCommand(
        "backtest",
        "scaler.backtest.cli:register",
        "Replay a policy on real history: read the signals (the controller's own PromQL, as "
        "range queries) and the actual replicas from Prometheus, and show what the policy "
        "would have done beside what happened: timeline, scale events, replica-hours, a plot.",
        ("backtest", ("prometheus_api_client", "matplotlib")),
    ),
    LazyCommand(
        "bench-scale",
        "scaler.bench.scale:register_scale",
        "Scale benchmark: many targets on a real Prometheus; queries, cycle time, RSS.",
    ),
    LazyCommand(
        "dashboards",
        "scaler.dashboards.cli:register",
        "Generate the Grafana dashboards' JSON (and, with --previews, PNG previews).",
        ("dashboards", ("grafana_foundation_sdk", "matplotlib")),
    ),
)

#: Commands that need an optional extra: the extra and the modules it brings.
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    c.name: c.extra for c in COMMANDS if c.extra is not None
}


class _Group(LazyGroup):
    lazy: ClassVar[Mapping[str, LazyCommand]] = {c.name: c for c in COMMANDS}


app = typer.Typer(
    name="vllm-scaler",
    cls=_Group,
    help="Autoscaling controller for vLLM inference servers on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: rich's table cuts long option and variable names at 80 columns.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        import importlib.metadata

        typer.echo(f"vllm-scaler {importlib.metadata.version('vllm-scaler')}")
        raise typer.Exit()


@app.callback()
def _every_command(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Autoscaling controller for vLLM inference servers on Kubernetes."""
    from scaler.config.cli_options import register_environment_secrets
    from scaler.telemetry import redact

    # Before any command prints: every output of every command passes through the masking
    # streams, and the credentials the environment configures are known to them.
    redact.install()
    register_environment_secrets()


def _demo_bench(**options: Any) -> Any:
    """The bench's side of the demo (imported only when ``sim`` runs)."""
    from scaler.bench.demo import DemoBench

    return DemoBench(**options)


def _register_sim(sub: typer.Typer) -> None:
    """``sim``, joined with the bench's side of the demo (the sim layer is below the bench)."""
    from scaler.sim.cli import register

    register(sub, bench=_demo_bench)


def main() -> None:
    """Console entry point."""
    from scaler.telemetry import redact

    redact.install()  # before anything is printed, usage errors and tracebacks included
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:
        from scaler.sim.prometheus_server import PrometheusNotInstalledError

        if not isinstance(err, PrometheusNotInstalledError):  # bench-scale without Prometheus
            raise
        typer.echo(f"vllm-scaler: {err}", err=True)
        sys.exit(2)
