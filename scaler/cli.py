"""The ``vllm-scaler`` command line (typer).

Every option of ``run`` and ``recommend`` can also be set as an environment variable
``VLLM_SCALER_<NAME>`` (see :class:`scaler.config.settings.Settings`); options win.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from scaler.config.policy import PolicyError, load_policy
from scaler.config.settings import (
    Settings,
    SettingsError,
    env_name,
    load_settings,
    unknown_env_vars,
)
from scaler.telemetry.logging import configure_logging

app = typer.Typer(
    name="vllm-scaler",
    help="Autoscaling controller for vLLM inference servers on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: rich's table cuts long option and variable names at 80 columns.
    rich_markup_mode=None,
)

#: Settings field -> its command-line option (errors name both).
OPTION_NAMES = {
    "policy_file": "--policy",
    "prometheus_url": "--prometheus-url",
    "control_interval_seconds": "--interval",
    "metrics_port": "--metrics-port",
    "metrics_address": "--metrics-address",
    "kubeconfig": "--kubeconfig",
    "kube_context": "--context",
    "in_cluster": "--in-cluster",
    "log_format": "--log-format",
    "prometheus_bearer_token_file": "--prometheus-bearer-token-file",
    "prometheus_ca_file": "--prometheus-ca-file",
    "prometheus_timeout_seconds": "--prometheus-timeout-seconds",
}


#: Options of run/recommend that are no setting (and so have no environment variable).
_OPTION_ONLY = {
    "VLLM_SCALER_OUTPUT": "--output",
    "VLLM_SCALER_ONCE": "--once",
    "VLLM_SCALER_DRY_RUN": "--dry-run",
}


def _setting(field: str, help: str, *names: str, default: str | None = None) -> Any:
    """An option that is the settings field ``field``: same environment variable, same default.

    The option reads ``VLLM_SCALER_<FIELD>`` itself, so ``--help`` shows the variable and
    an invalid value is reported against both.
    """
    if default is None:
        value = Settings.model_fields[field].default
        default = "" if value is None else str(value)
    return typer.Option(
        *(names or (OPTION_NAMES[field],)),
        help=help,
        envvar=env_name(field),
        show_envvar=True,
        show_default=default or False,
    )


PolicyOpt = Annotated[
    Path | None, _setting("policy_file", "YAML policy file.", "--policy", "--policy-file")
]
PromOpt = Annotated[str | None, _setting("prometheus_url", "Prometheus base URL.")]
IntervalOpt = Annotated[
    float | None,
    _setting(
        "control_interval_seconds",
        "Seconds between cycles.",
        "--interval",
        "--control-interval-seconds",
    ),
]
KubeconfigOpt = Annotated[
    Path | None,
    _setting("kubeconfig", "kubeconfig file.", default="in-cluster in a pod, else ~/.kube/config"),
]
ContextOpt = Annotated[
    str | None, _setting("kube_context", "kubeconfig context.", default="current-context")
]
InClusterOpt = Annotated[
    bool | None,
    _setting(
        "in_cluster",
        "Use the pod's service account.",
        "--in-cluster/--no-in-cluster",
        default="yes in a pod without --kubeconfig",
    ),
]
LogFormatOpt = Annotated[str | None, _setting("log_format", "auto, json or console.")]
TokenOpt = Annotated[
    Path | None,
    _setting(
        "prometheus_bearer_token_file",
        "File with a bearer token for Prometheus (re-read each query).",
    ),
]
CaOpt = Annotated[Path | None, _setting("prometheus_ca_file", "PEM CA bundle for Prometheus' TLS.")]
TimeoutOpt = Annotated[
    float | None, _setting("prometheus_timeout_seconds", "Prometheus query timeout, seconds.")
]


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"vllm-scaler: {message}", err=True)
    return typer.Exit(code)


def _settings(**given: object) -> Settings:
    for name, closest in unknown_env_vars():
        option = _OPTION_ONLY.get(name.upper())
        note = f"; {option} is a command-line option only" if option else ""
        typer.echo(
            f"vllm-scaler: warning: unknown environment variable {name} is ignored "
            f"(closest setting: {closest}{note})",
            err=True,
        )
    try:
        return load_settings(OPTION_NAMES, **given)
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
        raise _fail(str(err), err.exit_code) from None
    raise typer.Exit(code)


@app.command()
def run(
    policy: PolicyOpt = None,
    prometheus_url: PromOpt = None,
    interval: IntervalOpt = None,
    metrics_port: Annotated[
        int | None, _setting("metrics_port", "Port of /metrics, /healthz, /readyz (0: off).")
    ] = None,
    metrics_address: Annotated[
        str | None, _setting("metrics_address", "Address /metrics listens on.")
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
        metrics_port=metrics_port, metrics_address=metrics_address, kubeconfig=kubeconfig,
        kube_context=context, in_cluster=in_cluster, log_format=log_format,
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
    from scaler.sources.promql import target_selector

    try:
        p = load_policy(path)
    except PolicyError as err:
        raise _fail(str(err)) from None
    for t in p.targets:
        typer.echo(
            f"{t.key}: replicas {t.min_replicas}..{t.max_replicas}, signals "
            + ", ".join(str(s) for s in t.signals.enabled())
            + f", selector {{{target_selector(t)}}}"
        )


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def dashboards(ctx: typer.Context) -> None:
    """Generate the Grafana dashboards' JSON (--out DIR, --check, --previews DIR; see --help)."""
    try:
        from scaler.dashboards import main as dashboards_main
    except ImportError as err:
        raise _fail(f"{err.name} is missing: pip install 'vllm-scaler[dashboards]'") from None
    raise typer.Exit(dashboards_main(ctx.args))


def _register_subcommands() -> None:
    from scaler.backtest.cli import register as register_backtest
    from scaler.bench.cli import register as register_bench
    from scaler.bench.scale import register_scale
    from scaler.sim.cli import register as register_sim

    register_sim(app)
    register_bench(app)
    register_backtest(app)
    register_scale(app)


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
                raise _fail(f"{module} is missing: pip install 'vllm-scaler[{extra}]'")
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

    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except PrometheusNotInstalledError as err:  # bench-scale where Prometheus is not installed
        typer.echo(f"vllm-scaler: {err}", err=True)
        sys.exit(2)


OutputChoice = Literal["table", "json"]
