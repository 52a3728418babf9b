"""The controller's commands: ``run``, ``recommend`` (a dry run), ``check-policy`` and
``as-resources``.

Every setting (:class:`scaler.config.settings.Settings`) is an option of ``run`` and an
environment variable ``VLLM_SCALER_<NAME>``; options win. ``--output``/``-o`` is the report's
format, as on every command; ``run`` has no report, and its log format is ``--log-format``
(``run --output``, its older name, still works and says so).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from scaler.config.cli_errors import Command
from scaler.config.cli_options import (
    PROMETHEUS_FIELDS,
    OutputFormat,
    OutputOpt,
    RecommendOutputOpt,
    fail,
    settings_options,
    warn_unknown_env_vars,
)
from scaler.config.settings import Settings, env_name

if TYPE_CHECKING:
    from scaler.config.policy import Policy

__all__ = ["RECOMMEND_FIELDS", "RUN_FIELDS", "LogFormat", "recommend_log_format", "register"]


#: The settings ``run`` offers: all of them.
RUN_FIELDS = ("policy_file", *(f for f in Settings.model_fields if f != "policy_file"))
#: ``run``'s older names of its log format: ``--output``/``-o``, which every other command
#: uses for its report's format.
RUN_DEPRECATED = {
    "log_format": (
        ("--output", "-o"),
        "run --output/-o is the older name of --log-format (everywhere else --output is a "
        "report's format); use --log-format",
    )
}
#: The settings of a dry run: no /metrics endpoint, no Lease (it never writes).
RECOMMEND_FIELDS = (
    "policy_file",
    *PROMETHEUS_FIELDS,
    "control_interval_seconds",
    "kubeconfig",
    "kube_context",
    "in_cluster",
    "watch_resources",
    "resource_namespaces",
    "resource_crd_retry_seconds",
    "log_format",
    "log_level",
)


def _policy(settings: Settings) -> Policy:
    """The policy file of ``settings``, loaded; an invalid or missing one ends the command
    (exit 2) before anything else is printed. With ``watch_resources`` the file is optional
    (the resources' targets, or none yet): a file not given and not at its default path is
    no file, and a file may list no target."""
    from scaler.config.policy import Policy, PolicyError, load_policy

    resources = settings.watch_resources
    given = "policy_file" in settings.model_fields_set
    if resources and not given and not settings.policy_file.exists():
        return Policy.without_targets()
    try:
        return load_policy(settings.policy_file, resources=resources)
    except PolicyError as err:
        raise fail(str(err)) from None


def _serve(
    settings: Settings, policy: Policy, *, dry_run: bool, once: bool, output: str, check: bool
) -> None:
    import asyncio

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


@settings_options(Settings, RUN_FIELDS, deprecated=RUN_DEPRECATED)
def run(
    settings: Settings,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Decide and export, but never write to the cluster.")
    ] = False,
) -> None:
    """Run the controller loop: read Prometheus, decide, patch the scale subresource.

    What it prints is its log: --log-format text (one line per event), json (JSON lines) or
    auto (text on a terminal, JSON lines otherwise).
    """
    from scaler.telemetry.logging import configure_logging

    configure_logging(settings.log_format, settings.log_level)
    _serve(settings, _policy(settings), dry_run=dry_run, once=False, output="log", check=False)


LogFormat = Literal["auto", "json", "text", "console"]


def recommend_log_format(log_format: LogFormat, output: str) -> LogFormat:
    """The log format of ``recommend``: ``--log-format`` when given; else (``auto``) text
    with ``--output text``, so that a text report never has JSON log lines beside it, and
    with ``--output json`` the usual ``auto`` (text on a terminal, JSON lines otherwise)."""
    return "text" if log_format == "auto" and output == "text" else log_format


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
    from scaler.telemetry.logging import configure_logging

    configure_logging(recommend_log_format(settings.log_format, str(output)), settings.log_level)
    policy = _policy(settings)  # as run: a policy error comes before anything else
    typer.echo(f"vllm-scaler: {settings.describe_prometheus()}", err=True)
    _serve(settings, policy, dry_run=True, once=once, output=str(output), check=True)


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
    pods the Kubernetes API lists for the workload count) and the selector of a backtest.

    A file of VLLMAutoscaler resources (one, several after ---, or a List) is validated as
    the controller validates each resource, its errors named by spec. paths."""
    from scaler.config.policy import (
        PolicyError,
        load_policy,
        read_policy_text,
        yaml_documents,
    )
    from scaler.config.resource import resources_in
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
        text = read_policy_text(path, given_as=given_as)
        try:
            documents = yaml_documents(text, str(path))
        except PolicyError:
            documents = []  # load_policy says what is wrong, as of any policy file
        # a file of VLLMAutoscaler resources, else a policy file
        found = resources_in(documents, str(path))
        targets = found if found is not None else load_policy(path, given_as=given_as).targets
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
            for t in targets
        ]
        typer.echo(json.dumps(doc))
        return
    for t in targets:
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


def policy_to_resources(
    path: Annotated[
        Path,
        typer.Argument(metavar="POLICY_FILE", help="YAML policy file.", show_default=False),
    ],
    output: OutputOpt = OutputFormat.TEXT,
) -> None:
    """Print the VLLMAutoscaler resources of a policy file's targets, one per target in its
    workload's namespace and named after it (kubectl apply -f - takes them): the fields each
    target writes, spelled as the resource spells them; the defaults it leaves out stay out.

    What the file sets for every target (rate_window_seconds, the replica labels) is not a
    resource's: it stays in the controller's policy file (or its defaults). --output json
    prints a v1 List.
    """
    import yaml

    from scaler.config.policy import PolicyError, load_policy
    from scaler.config.resource import resource_of

    warn_unknown_env_vars()
    try:
        p = load_policy(path, given_as="the POLICY_FILE argument")
    except PolicyError as err:
        raise fail(str(err)) from None
    resources = [resource_of(t) for t in p.targets]
    if output is OutputFormat.JSON:
        typer.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": resources}))
        return
    typer.echo(f"# The VLLMAutoscaler resources of {path} (vllm-scaler as-resources)")
    typer.echo(yaml.safe_dump_all(resources, sort_keys=False, explicit_start=True), nl=False)


def register(app: typer.Typer) -> None:
    """Add ``run``, ``recommend``, ``check-policy`` and ``as-resources`` to ``app``."""
    app.command()(run)
    app.command()(recommend)
    app.command("check-policy", cls=Command)(check_policy)
    app.command("as-resources", cls=Command)(policy_to_resources)
