"""The command line's shared options: every setting as an option, and one output convention.

:func:`settings_options` gives a typer command one option per field of a settings model
(``--prometheus-url``, ``--prometheus-bearer-token-file``...), each also read from its
``VLLM_SCALER_<FIELD>`` variable, with the field's description as help; the command receives
the validated settings. ``run`` takes every :class:`~scaler.config.settings.Settings` field,
``recommend`` those of a dry run, ``backtest`` and ``dashboards`` the
:class:`~scaler.config.settings.PrometheusSettings` ones: one Prometheus client configuration
for every command. :data:`OutputOpt` is ``--output text|json`` (``-o``) of every command.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import types
from collections.abc import Callable, Collection, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer
from pydantic.fields import FieldInfo

from scaler.config.durations import DURATION_FORMS, duration_option
from scaler.config.secrets import (
    register_file_secret,
    register_header,
    register_private_key_file,
    register_secret,
    register_url_credentials,
)
from scaler.config.settings import (
    HEADER_NAME,
    PrometheusSettings,
    SettingsError,
    env_name,
    load_model_settings,
    parse_headers,
    unknown_env_vars,
)

__all__ = [
    "OPTION_NAMES",
    "OPTION_ONLY",
    "PROMETHEUS_FIELDS",
    "OutputFormat",
    "OutputOpt",
    "RecommendOutputOpt",
    "fail",
    "load_command_settings",
    "option_names",
    "register_argv_secrets",
    "register_configured_secrets",
    "register_environment_secrets",
    "settings_options",
    "warn_unknown_env_vars",
]

F = TypeVar("F", bound=Callable[..., Any])


class OutputFormat(StrEnum):
    """What a command prints on stdout: text for people, or one JSON document (``run``:
    JSON log lines)."""

    TEXT = "text"
    JSON = "json"


OutputOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        help="text (for people) or json (one JSON document on stdout; messages on stderr).",
    ),
]

#: ``recommend``'s: it prints a round at each interval until stopped, one document a round.
RecommendOutputOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--output",
        "-o",
        case_sensitive=False,
        help="text (for people) or json: a JSON array per round (one object per target), "
        "one array after another until stopped; with --once, one array, one JSON document. "
        "Messages on stderr.",
    ),
]

#: Settings field -> its options, where they are not simply ``--field-name``.
OPTION_NAMES: dict[str, tuple[str, ...]] = {
    "policy_file": ("--policy", "--policy-file"),
    "control_interval_seconds": ("--interval", "--control-interval-seconds"),
    "kube_context": ("--context", "--kube-context"),
    "in_cluster": ("--in-cluster/--no-in-cluster",),
    "leader_election": ("--leader-election/--no-leader-election",),
}

#: What ``--help`` shows as the default of a field whose default is "decide at run time".
#: The field's description then says no default of its own (:func:`_help` cuts it): help
#: states a default once.
SHOWN_DEFAULTS = {
    "kubeconfig": "in-cluster in a pod, else ~/.kube/config",
    "kube_context": "current-context",
    "in_cluster": "yes in a pod without --kubeconfig",
    "leader_election": "on with in-cluster configuration, off elsewhere; never in a dry run",
    "lease_namespace": "the pod's namespace (POD_NAMESPACE or the service account's), "
    "else 'default'",
    "lease_identity": "pod name (or hostname) + random suffix",
    "resource_namespaces": "all",
}
#: A description's own statement of its default ("...; default: x." or "... Default: x.").
_DESCRIBED_DEFAULT = re.compile(r"(?:;\s*|\.\s+)[Dd]efault:.*$", re.DOTALL)

#: The fields of the one Prometheus client configuration.
PROMETHEUS_FIELDS: tuple[str, ...] = tuple(PrometheusSettings.model_fields)

#: ``VLLM_SCALER_*`` names people try that are options only (the unknown-variable warning).
OPTION_ONLY = {
    "VLLM_SCALER_OUTPUT": "--output",
    "VLLM_SCALER_ONCE": "--once",
    "VLLM_SCALER_DRY_RUN": "--dry-run",
}


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``vllm-scaler: <message>`` on stderr; return the ``typer.Exit`` to raise.

    Each line of ``message`` that starts a new error (not indented) gets the prefix, so that
    two errors never read as one; indented lines are the details of the error above them.
    """
    lines = [
        line if line[:1].isspace() else f"vllm-scaler: {line}"
        for line in message.splitlines() or [""]
    ]
    typer.echo("\n".join(lines), err=True)
    return typer.Exit(code)


def option_names(field: str, names: Mapping[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """The command-line options of settings field ``field`` (the first is its name)."""
    return {**OPTION_NAMES, **(names or {})}.get(field, ("--" + field.replace("_", "-"),))


def _option_type(field: FieldInfo) -> Any:
    """The type typer parses the option as; pydantic validates the value afterwards."""
    annotation: Any = field.annotation
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    if annotation in (bool, int, float, Path):
        return annotation
    return str  # URLs, Literal choices, header lists: validated (and explained) by pydantic


def is_duration(name: str, field: FieldInfo) -> bool:
    """A settings field whose value is seconds (``*_seconds``, a number): its option and
    variable take the command line's duration grammar (:mod:`scaler.config.durations`)."""
    return name.endswith("_seconds") and _option_type(field) is float


def _help(name: str, field: FieldInfo) -> str:
    text = field.description or ""
    if name in SHOWN_DEFAULTS:
        text = _DESCRIBED_DEFAULT.sub(".", text)
    annotation: Any = field.annotation
    if get_origin(annotation) is Literal:
        text += " One of: " + ", ".join(str(a) for a in get_args(annotation)) + "."
    return text


def _shown_default(name: str, field: FieldInfo, default: object) -> str | bool:
    if default is not None:
        return str(default) if default not in ({}, []) else False
    if name in SHOWN_DEFAULTS:
        return SHOWN_DEFAULTS[name]
    value = field.get_default(call_default_factory=True)
    if value is None or value == {}:
        return False
    return str(value)


#: Why a setting's value is masked whole, by the value: filled as the value is registered,
#: so that an error about it says it was masked on purpose and why (instead of ``'***'``).
MASKED_WHY: dict[str, str] = {}

#: The reason of a token-file setting masked whole.
TOKEN_FILE_MASKED = (
    "it names no file and no path into an existing directory, so it may be the token itself "
    "given where its path belongs"
)


def explain_masked(message: str) -> str:
    """``message`` with each ``value '<v>'`` of a value masked whole (:data:`MASKED_WHY`)
    written as ``value masked (<why>)``: the output masks the value anyway, and ``'***'``
    alone reads as a bug."""
    for value, why in MASKED_WHY.items():
        message = message.replace(f"value {value!r}", f"value masked ({why})")
    return message


def register_configured_secrets(values: Mapping[str, object]) -> None:
    """Register the credentials in raw settings values (before validation, so that an error
    message about them is masked too): the URL's password, header values, the content of
    the bearer token file and of a client key. ``values`` maps field names to what an option
    or variable holds; anything unreadable or invalid is skipped (validation reports it)."""
    url = values.get("prometheus_url")
    if isinstance(url, str):
        register_url_credentials(url)
    headers = values.get("prometheus_headers")
    if isinstance(headers, str | dict):
        try:
            parsed = parse_headers(headers)
        except ValueError:  # invalid: every value that can be told apart is still masked
            parsed = _header_items(headers)
        for name, value in parsed.items():
            register_header(name, value)
    token = values.get("prometheus_bearer_token_file")
    if isinstance(token, str | Path) and str(token):
        path = Path(token)
        if path.is_file():
            register_file_secret(path)
        elif "/" not in str(token) or not path.parent.is_dir():
            # no file, and no path into a directory that exists: perhaps the token itself,
            # given where its path belongs (a path with a typo in its file name stays shown)
            register_secret(str(token))
            MASKED_WHY[str(token)] = TOKEN_FILE_MASKED
    for key in ("prometheus_client_key_file", "prometheus_client_cert_file"):
        pem = values.get(key)
        if isinstance(pem, str | Path) and str(pem):
            register_private_key_file(Path(pem))


def _header_items(headers: str | dict[Any, Any]) -> dict[str, str]:
    """The name/value pairs of a header setting that :func:`parse_headers` refuses, as far
    as they can be told apart (a JSON object's strings, else ``name=value`` items)."""
    if isinstance(headers, dict):
        return {str(k): str(v) for k, v in headers.items()}
    text = headers.strip()
    if text.startswith("{"):
        try:
            loaded = json.loads(text)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            return {str(k): str(v) for k, v in loaded.items()}
        register_secret(text)  # no pairs to tell apart: the whole value is the secret
        return {}
    items = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        items[name.strip()] = value
    return items


#: A URL with user-info (``scheme://user:password@host``), wherever it stands on a command line.
_URL_WITH_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@")


def register_argv_secrets(args: Sequence[str]) -> None:
    """Register the credentials a command line holds, before it is parsed: a usage error
    (an extra argument, a value of another option that cannot be converted) may echo them.

    Masked: the values of the Prometheus options (as :func:`register_configured_secrets`
    does for the environment, whether written ``--option value`` or ``--option=value``), the
    user-info of any argument that is a URL, and the arguments that follow a credential
    header's value without an option between them (``--prometheus-headers Authorization=Bearer
    <token>`` unquoted puts the token in an argument of its own).
    """
    by_option = {
        name: field
        for field in PROMETHEUS_FIELDS
        for option in option_names(field)
        for name in option.split("/")
    }
    values: dict[str, object] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if _URL_WITH_USERINFO.match(arg):
            register_url_credentials(arg)
        name, eq, inline = arg.partition("=")
        field = by_option.get(name) if arg.startswith("--") else None
        i += 1
        if field is None:
            continue
        if not eq:
            if i >= len(args):
                break
            inline, i = args[i], i + 1
        if field == "prometheus_headers":
            following = []
            while i < len(args) and not args[i].startswith("-"):
                following.append(args[i])
                i += 1
            inline = _joined_headers(inline, following)
        values[field] = inline
    register_configured_secrets(values)


#: Authorization schemes (HTTP's registry, and common API-key ones): words, not secrets.
_AUTH_SCHEMES = frozenset({"basic", "bearer", "digest", "negotiate", "token", "apikey"})


def _joined_headers(value: str, following: Sequence[str]) -> str:
    """A header option's value with the arguments that followed it unquoted: a ``name=value``
    argument is one more header, any other one continues the value before it (``Bearer``
    then the token)."""
    if value.lstrip().startswith("{"):
        for arg in following:  # the shell split the object: which words are values is unknown
            if arg.strip("{}:,\"'").lower() not in _AUTH_SCHEMES:
                register_secret(arg)
        return " ".join([value, *following])
    text = value
    for arg in following:
        name, eq, _ = arg.partition("=")
        text += f",{arg}" if eq and HEADER_NAME.match(name) else f" {arg}"
    return text


def register_environment_secrets(environ: Mapping[str, str] | None = None) -> None:
    """:func:`register_configured_secrets` of the ``VLLM_SCALER_PROMETHEUS_*`` variables:
    every command masks what the environment configures, whether it reads it or not."""
    env = os.environ if environ is None else environ
    register_configured_secrets(
        {f: env[env_name(f)] for f in PROMETHEUS_FIELDS if env.get(env_name(f))}
    )


def warn_unknown_env_vars() -> None:
    """Print a warning on stderr for each ``VLLM_SCALER_*`` variable that is no setting
    (settings ignore it: a misspelt name would silently change nothing), with the closest
    setting, or the option it names when it is an option only."""
    for name, closest in unknown_env_vars():
        option = OPTION_ONLY.get(name.upper())
        if option:  # no setting is meant: the option is
            hint = f"{option} is a command-line option only, with no variable"
        elif closest:
            hint = f"closest setting: {closest}"
        else:
            hint = "no setting is close; see --help for every variable"
        typer.echo(
            f"vllm-scaler: warning: unknown environment variable {name} is ignored ({hint})",
            err=True,
        )


def load_command_settings(
    model: type[PrometheusSettings],
    values: Mapping[str, object],
    names: Mapping[str, tuple[str, ...]] | None = None,
) -> Any:
    """Warn about unknown ``VLLM_SCALER_*`` variables (:func:`warn_unknown_env_vars`),
    register the credentials in
    ``values``, and validate them (with the environment) as ``model``.

    Raises:
        typer.Exit: code 2 after printing the error, which names the variable, the option,
            the value (never a secret one) and what was expected.
    """
    warn_unknown_env_vars()
    register_configured_secrets(values)
    shown = {f: option_names(f, names)[0].split("/")[0] for f in model.model_fields}
    try:
        return load_model_settings(model, values, shown)
    except SettingsError as err:
        *first, last = explain_masked(str(err)).splitlines()
        for line in first:  # one line per invalid value, each as the last
            typer.echo(f"vllm-scaler: {line}", err=True)
        raise fail(last) from None


def settings_options(
    model: type[PrometheusSettings],
    fields: Collection[str],
    *,
    defaults: Mapping[str, object] | None = None,
    fixed: Mapping[str, object] | None = None,
    names: Mapping[str, tuple[str, ...]] | None = None,
    deprecated: Mapping[str, tuple[tuple[str, ...], str]] | None = None,
) -> Callable[[F], F]:
    """Decorate a typer command so that it takes ``fields`` of ``model`` as options.

    The command declares a ``settings`` parameter; the decorator replaces it by one option
    per field (same environment variable as the setting, the field's description as help)
    and passes the validated settings in.

    Args:
        model: :class:`~scaler.config.settings.Settings` or ``PrometheusSettings``.
        fields: the fields this command offers as options, in ``--help`` order.
        defaults: this command's own defaults, used when neither option nor variable is set
            (``backtest`` waits longer for a range query than the controller for an instant
            one).
        fixed: values the command imposes (``recommend`` never serves ``/metrics``).
        names: option names that differ from :data:`OPTION_NAMES` for this command.
        deprecated: field -> (older option names, warning): hidden options that still set
            the field (over its variable) and print the warning on stderr when used.
    """
    own_defaults = dict(defaults or {})
    imposed = dict(fixed or {})

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != "settings"]
        added = []
        for name in fields:
            info = model.model_fields[name]
            duration = is_duration(name, info)
            option = typer.Option(
                *option_names(name, names),
                help=_help(name, info) + (f" A duration: {DURATION_FORMS}." if duration else ""),
                envvar=env_name(name),
                show_envvar=True,
                show_default=_shown_default(name, info, own_defaults.get(name)),
                parser=duration_option if duration else None,
                metavar="DURATION" if duration else None,
            )
            added.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Annotated[_option_type(info) | None, option],
                )
            )
        for name, (old_names, _) in (deprecated or {}).items():
            info = model.model_fields[name]
            added.append(
                inspect.Parameter(
                    f"{name}__deprecated",
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Annotated[
                        _option_type(info) | None, typer.Option(*old_names, hidden=True)
                    ],
                )
            )
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in kept] + added

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in fields}
            for name, (_, warning) in (deprecated or {}).items():
                old = kwargs.pop(f"{name}__deprecated")
                if old is None:
                    continue
                typer.echo(f"vllm-scaler: warning: {warning}", err=True)
                given[name] = old  # an option, so over the variable
            values = {**own_defaults, **{k: v for k, v in given.items() if v is not None}}
            settings = load_command_settings(model, {**values, **imposed}, names)
            return func(settings=settings, **kwargs)

        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate
