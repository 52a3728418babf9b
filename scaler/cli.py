"""The ``vllm-scaler`` command line (typer).

Every option of ``run`` and ``recommend`` can also be set as an environment variable
``VLLM_SCALER_<NAME>`` (see :class:`scaler.config.settings.Settings`); options win.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from scaler.config.policy import PolicyError, load_policy
from scaler.config.settings import Settings, SettingsError, load_settings
from scaler.telemetry.logging import configure_logging

app = typer.Typer(
    name="vllm-scaler",
    help="Autoscaling controller for vLLM inference servers on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

PolicyOpt = Annotated[
    Path | None, typer.Option("--policy", "--policy-file", help="YAML policy file.")
]
PromOpt = Annotated[str | None, typer.Option(help="Prometheus base URL.")]
IntervalOpt = Annotated[
    float | None,
    typer.Option("--interval", "--control-interval-seconds", help="Seconds between cycles."),
]
KubeconfigOpt = Annotated[
    Path | None, typer.Option(help="kubeconfig file (default: in-cluster or ~/.kube/config).")
]
ContextOpt = Annotated[str | None, typer.Option("--context", help="kubeconfig context.")]
InClusterOpt = Annotated[
    bool | None, typer.Option("--in-cluster/--no-in-cluster", help="Use the pod's service account.")
]
LogFormatOpt = Annotated[str | None, typer.Option(help="auto, json or console.")]
TokenOpt = Annotated[
    Path | None, typer.Option(help="File with a bearer token for Prometheus (re-read each query).")
]
CaOpt = Annotated[Path | None, typer.Option(help="PEM CA bundle for Prometheus' TLS.")]
TimeoutOpt = Annotated[float | None, typer.Option(help="Prometheus query timeout, seconds.")]


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"vllm-scaler: {message}", err=True)
    return typer.Exit(code)


def _settings(**given: object) -> Settings:
    try:
        return load_settings(**given)
    except SettingsError as err:
        raise _fail(str(err)) from None


def _serve(settings: Settings, *, dry_run: bool, once: bool, output: str, check: bool) -> None:
    from scaler.controller.app import RunOptions, StartupError, serve

    try:
        policy = load_policy(settings.policy_file)
    except PolicyError as err:
        raise _fail(str(err)) from None
    options = RunOptions(
        dry_run=dry_run,
        once=once,
        output=output,  # type: ignore[arg-type]
        check_queries=check,
    )
    try:
        code = asyncio.run(serve(settings, policy, options))
    except StartupError as err:
        raise _fail(str(err), 1) from None
    raise typer.Exit(code)


@app.command()
def run(
    policy: PolicyOpt = None,
    prometheus_url: PromOpt = None,
    interval: IntervalOpt = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Port of /metrics, /healthz, /readyz (0: off).")
    ] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    in_cluster: InClusterOpt = None,
    log_format: LogFormatOpt = None,
    prometheus_bearer_token_file: TokenOpt = None,
    prometheus_ca_file: CaOpt = None,
    prometheus_timeout_seconds: TimeoutOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Decide and export, but never write to the cluster.")
    ] = False,
) -> None:
    """Run the controller loop: read Prometheus, decide, patch the scale subresource."""
    s = _settings(
        policy_file=policy, prometheus_url=prometheus_url, control_interval_seconds=interval,
        metrics_port=metrics_port, kubeconfig=kubeconfig, kube_context=context,
        in_cluster=in_cluster, log_format=log_format,
        prometheus_bearer_token_file=prometheus_bearer_token_file,
        prometheus_ca_file=prometheus_ca_file, prometheus_timeout_seconds=prometheus_timeout_seconds,
    )  # fmt: skip
    configure_logging(s.log_format, s.log_level)
    _serve(s, dry_run=dry_run, once=False, output="log", check=False)


@app.command()
def recommend(
    policy: PolicyOpt = None,
    prometheus_url: PromOpt = None,
    once: Annotated[bool, typer.Option("--once", help="Print one round and exit.")] = False,
    output: Annotated[
        str,
        typer.Option("--output", "-o", help="table or json (a JSON array, one object per target)."),
    ] = "table",
    interval: IntervalOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    in_cluster: InClusterOpt = None,
    log_format: LogFormatOpt = None,
    prometheus_bearer_token_file: TokenOpt = None,
    prometheus_ca_file: CaOpt = None,
    prometheus_timeout_seconds: TimeoutOpt = None,
) -> None:
    """Dry run: print current and desired replicas, every signal and the reason, per target.

    Reads Prometheus and the cluster with read verbs only; never writes.
    """
    if output not in ("table", "json"):
        raise _fail(f"--output: value {output!r}: expected 'table' or 'json'")
    s = _settings(
        policy_file=policy, prometheus_url=prometheus_url, control_interval_seconds=interval,
        metrics_port=0, kubeconfig=kubeconfig, kube_context=context, in_cluster=in_cluster,
        log_format=log_format, log_level="warning",
        prometheus_bearer_token_file=prometheus_bearer_token_file,
        prometheus_ca_file=prometheus_ca_file, prometheus_timeout_seconds=prometheus_timeout_seconds,
    )  # fmt: skip
    configure_logging(s.log_format, s.log_level)
    _serve(s, dry_run=True, once=once, output=output, check=True)


@app.command("check-policy")
def check_policy(path: Annotated[Path, typer.Argument(help="YAML policy file.")]) -> None:
    """Validate a policy file and print the targets it defines."""
    try:
        p = load_policy(path)
    except PolicyError as err:
        raise _fail(str(err)) from None
    for t in p.targets:
        typer.echo(
            f"{t.key}: replicas {t.min_replicas}..{t.max_replicas}, signals "
            + ", ".join(str(s) for s in t.signals.enabled())
            + f", selector {{{t.promql_selector()}}}"
        )


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def dashboards(ctx: typer.Context) -> None:
    """Generate the Grafana dashboards' JSON (--out DIR, --check, --previews DIR; see --help)."""
    try:
        from scaler.telemetry.dashboards import main as dashboards_main
    except ImportError as err:
        raise _fail(f"{err.name} is missing: pip install 'vllm-scaler[dashboards]'") from None
    raise typer.Exit(dashboards_main(ctx.args))


def _register_subcommands() -> None:
    from scaler.bench.cli import register as register_bench
    from scaler.sim.cli import register as register_sim

    register_sim(app)
    register_bench(app)


_register_subcommands()


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


OutputChoice = Literal["table", "json"]
