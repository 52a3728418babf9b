"""The ``vllm-scaler`` command line (typer).

Every setting (:class:`scaler.config.settings.Settings`) is an option of ``run`` and an
environment variable ``VLLM_SCALER_<NAME>``; options win. Every command takes
``--output text|json``, and everything any command prints passes through the secret-masking
streams installed before it runs (:mod:`scaler.telemetry.redact`).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from scaler.config.cli_errors import Command, CommandGroup
from scaler.config.cli_options import (
    PROMETHEUS_FIELDS,
    OutputFormat,
    OutputOpt,
    RecommendOutputOpt,
    fail,
    register_environment_secrets,
    settings_options,
    warn_unknown_env_vars,
)
from scaler.config.policy import Policy, PolicyError, load_policy
from scaler.config.settings import Settings, env_name
from scaler.telemetry import redact
from scaler.telemetry.logging import configure_logging

app = typer.Typer(
    name="vllm-scaler",
    cls=CommandGroup,
    help="Autoscaling controller for vLLM inference servers on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: rich's table cuts long option and variable names at 80 columns.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
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
    # Before any command prints: every output of every command passes through the masking
    # streams, and the credentials the environment configures are known to them.
    redact.install()
    register_environment_secrets()


#: The settings ``run`` offers: all of them. ``--output`` is the log format there (the log
#: stream is what ``run`` prints), ``--log-format`` its older name.
RUN_FIELDS = ("policy_file", *(f for f in Settings.model_fields if f != "policy_file"))
RUN_NAMES = {"log_format": ("--output", "-o", "--log-format")}
#: The settings of a dry run: no /metrics endpoint, no Lease (it never writes).
RECOMMEND_FIELDS = (
    "policy_file",
    *PROMETHEUS_FIELDS,
    "control_interval_seconds",
    "kubeconfig",
    "kube_context",
    "in_cluster",
    "log_format",
    "log_level",
)


def _policy(settings: Settings) -> Policy:
    """The policy file of ``settings``, loaded; an invalid or missing one ends the command
    (exit 2) before anything else is printed."""
    try:
        return load_policy(settings.policy_file)
    except PolicyError as err:
        raise fail(str(err)) from None


def _serve(
    settings: Settings, policy: Policy, *, dry_run: bool, once: bool, output: str, check: bool
) -> None:
    from scaler.controller.app import RunOptions, StartupError, serve

    options = RunOptions(
        dry_run=dry_run,
        once=once,
        output=output,  # type: ignore[arg-type]
        check_queries=check,
    )
    try:
        code = asyncio.run(serve(settings, policy, options))
    except StartupError as err:
        raise fail(str(err), err.exit_code) from None
    raise typer.Exit(code)


@app.command()
@settings_options(Settings, RUN_FIELDS, names=RUN_NAMES)
def run(
    settings: Settings,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Decide and export, but never write to the cluster.")
    ] = False,
) -> None:
    """Run the controller loop: read Prometheus, decide, patch the scale subresource.

    What it prints is its log: --output text (one line per event), json (JSON lines) or
    auto (text on a terminal, JSON lines otherwise).
    """
    configure_logging(settings.log_format, settings.log_level)
    _serve(settings, _policy(settings), dry_run=dry_run, once=False, output="log", check=False)


LogFormat = Literal["auto", "json", "text", "console"]


def recommend_log_format(log_format: LogFormat, output: str) -> LogFormat:
    """The log format of ``recommend``: ``--log-format`` when given; else (``auto``) text
    with ``--output text``, so that a text report never has JSON log lines beside it, and
    with ``--output json`` the usual ``auto`` (text on a terminal, JSON lines otherwise)."""
    return "text" if log_format == "auto" and output == "text" else log_format


@app.command()
@settings_options(
    Settings, RECOMMEND_FIELDS, defaults={"log_level": "warning"}, fixed={"metrics_port": 0}
)
def recommend(
    settings: Settings,
    once: Annotated[bool, typer.Option("--once", help="Print one round and exit.")] = False,
    output: RecommendOutputOpt = OutputFormat.TEXT,
) -> None:
    """Dry run: print current and desired replicas, every signal and the reason, per target.

    Reads Prometheus and the cluster with read verbs only; never writes. --output json
    prints a JSON array per round, one object per target (one JSON document with --once).
    """
    configure_logging(recommend_log_format(settings.log_format, str(output)), settings.log_level)
    policy = _policy(settings)  # as run: a policy error comes before anything else
    typer.echo(f"vllm-scaler: {settings.describe_prometheus()}", err=True)
    _serve(settings, policy, dry_run=True, once=once, output=str(output), check=True)


@app.command("check-policy", cls=Command)
def check_policy(
    path: Annotated[
        Path | None,
        typer.Argument(
            metavar="POLICY_FILE",
            help="YAML policy file (default: $VLLM_SCALER_POLICY_FILE, else policy.yaml, as "
            "run and recommend).",
            show_default=False,
        ),
    ] = None,
    output: OutputOpt = OutputFormat.TEXT,
) -> None:
    """Validate a policy file and print the targets it defines: replicas, signals, the
    series the controller reads for each (the selector it sends; then only the series of the
    pods the Kubernetes API lists for the workload count) and the selector of a backtest."""
    from scaler.sources.promql import query_selector, target_selector

    warn_unknown_env_vars()  # as every command that reads the settings' variables
    given_as = "the POLICY_FILE argument"
    if path is None:  # as run and recommend: the variable, else policy.yaml
        variable = env_name("policy_file")
        default = Settings.model_fields["policy_file"].default
        if os.environ.get(variable):
            path, given_as = Path(os.environ[variable]), variable
        else:
            path = default
            given_as = f"the POLICY_FILE argument or {variable} (default: {default})"
    try:
        p = load_policy(path, given_as=given_as)
    except PolicyError as err:
        raise fail(str(err)) from None
    if output is OutputFormat.JSON:
        doc = [
            {
                "target": t.key,
                "min_replicas": t.min_replicas,
                "max_replicas": t.max_replicas,
                "signals": [str(s) for s in t.signals.enabled()],
                "selector": query_selector(t),
                "backtest_selector": target_selector(t),
                "shadow": None
                if t.shadow is None
                else {
                    "min_replicas": t.shadow.min_replicas,
                    "max_replicas": t.shadow.max_replicas,
                    "signals": [str(s) for s in t.shadow.signals.enabled()],
                },
            }
            for t in p.targets
        ]
        typer.echo(json.dumps(doc))
        return
    for t in p.targets:
        typer.echo(
            f"{t.key}: replicas {t.min_replicas}..{t.max_replicas}, signals "
            + ", ".join(str(s) for s in t.signals.enabled())
            + (
                f"; shadow: replicas {t.shadow.min_replicas}..{t.shadow.max_replicas}, signals "
                + ", ".join(str(s) for s in t.shadow.signals.enabled())
                if t.shadow is not None
                else ""
            )
        )
        typer.echo(
            f"  series    {{{query_selector(t)}}}, only those of the pods the Kubernetes API lists for "
            f"{t.workload.kind} {t.workload.namespace}/{t.workload.name} (by exact name)"
        )
        history = "the same selector" if t.prometheus_matchers else "the pod-name pattern"
        typer.echo(f"  backtest  {{{target_selector(t)}}} (history has no pod lists: {history})")


def _demo_bench(**options: Any) -> Any:
    """The bench's side of the demo (imported only when ``sim`` runs)."""
    from scaler.bench.demo import DemoBench

    return DemoBench(**options)


def _register_subcommands() -> None:
    from scaler.backtest.cli import register as register_backtest
    from scaler.bench.cli import register as register_bench
    from scaler.bench.scale import register_scale
    from scaler.dashboards.cli import register as register_dashboards
    from scaler.sim.cli import register as register_sim

    register_sim(app, bench=_demo_bench)
    register_bench(app)
    register_backtest(app)
    register_scale(app)
    register_dashboards(app)


_register_subcommands()

#: Commands that need an optional extra: the extra and the modules it brings.
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sim": ("sim", ("matplotlib",)),
    "bench": ("sim", ("matplotlib",)),
    "backtest": ("backtest", ("prometheus_api_client", "matplotlib")),
    "dashboards": ("dashboards", ("grafana_foundation_sdk", "matplotlib")),
}


def _needs_extra(
    callback: Callable[..., Any], extra: str, modules: tuple[str, ...]
) -> Callable[..., Any]:
    """``callback``, first checking that ``modules`` are installed: without them (the image
    installs none of the extras) the command prints one line naming the extra and exits 2
    before doing any work, instead of a traceback at the end. ``--help`` still works."""

    @functools.wraps(callback)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for module in modules:
            if importlib.util.find_spec(module) is None:
                raise fail(f"{module} is missing: pip install 'vllm-scaler[{extra}]'")
        return callback(*args, **kwargs)

    return checked


def _require_extras() -> None:
    for info in app.registered_commands:
        if info.callback is not None:
            name = info.name or info.callback.__name__.replace("_", "-")
            if name in EXTRAS:
                info.callback = _needs_extra(info.callback, *EXTRAS[name])


_require_extras()


def main() -> None:
    """Console entry point."""
    from scaler.sim.prometheus_server import PrometheusNotInstalledError

    redact.install()  # before anything is printed, usage errors and tracebacks included
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except PrometheusNotInstalledError as err:  # bench-scale where Prometheus is not installed
        typer.echo(f"vllm-scaler: {err}", err=True)
        sys.exit(2)
