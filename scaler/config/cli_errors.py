"""Usage errors of the command line as one line naming the option, the value and what was
expected, as every other error of the command line reads.

typer converts an option's text with pydantic and reports pydantic's wording without the value
(``Invalid value for '--interval' ...: Input should be a valid number, unable to parse string
as a number``; ``Value error, 'yaml' is not one of 'text', 'json'``). :class:`CommandGroup`,
the group class of the ``vllm-scaler`` app, catches the usage errors of its commands and
prints instead::

    vllm-scaler: VLLM_SCALER_CONTROL_INTERVAL_SECONDS (--interval): value 'abc': expected a number
    vllm-scaler: --output: value 'yaml': expected one of text, json
    vllm-scaler: no such option: --intervall (did you mean --interval?); see vllm-scaler run --help
    vllm-scaler: --leader-election=false: a flag takes no value: write --no-leader-election; see
        vllm-scaler run --help

with exit code 2 (a setting is named by its variable and its option, wherever the value came
from). The value is printed through the masking streams like everything else.
:class:`Command` writes a required argument in a usage line as ``POLICY_FILE``, not typer's
``{POLICY_FILE}``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# pydantic and the settings (for the command line's secrets) are imported where they are
# used: `vllm-scaler --help` needs neither.

__all__ = ["Command", "CommandGroup", "describe_bad_parameter"]


def _option_name(err: typer.BadParameter) -> str:
    """The option: a setting's variable and its first long name
    (``VLLM_SCALER_CONTROL_INTERVAL_SECONDS (--interval)``, whether the value came from the
    option or the variable, as the settings' own checks name it), else its first long name or
    the argument's name."""
    param: Any = err.param
    if param is None:
        return "value"
    opts = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")] or list(
        param.opts
    )
    name = opts[0] if opts else str(param.human_readable_name)
    if param.param_type_name == "argument":
        name = str(param.human_readable_name)
    envvar = param.envvar if isinstance(param.envvar, str) else None
    if envvar and param.param_type_name == "option":
        # a setting: named as the settings' own checks name it, from either source
        return f"{envvar} ({name})"
    return name


def _choices(param: Any) -> list[str] | None:
    descriptor = getattr(param, "type_descriptor", None)
    choices = getattr(descriptor, "choices", None)
    if not choices:
        return None
    return [str(getattr(c, "value", c)) for c in choices]


def describe_bad_parameter(err: typer.BadParameter) -> str:
    """``<option>: value <v>: expected <what>`` for a value typer could not convert (the
    value and pydantic's error come from the error's cause)."""
    from pydantic import ValidationError

    from scaler.config.wording import expectation

    name = _option_name(err)
    cause = err.__cause__
    detail = err.message
    value: object = None
    has_value = False
    if isinstance(cause, ValidationError) and cause.errors():
        first = cause.errors()[0]
        value, has_value = first.get("input"), "input" in first
        detail = expectation(first)
    choices = _choices(err.param)
    if choices is not None:
        detail = "expected one of " + ", ".join(choices)
    shown = f"value {value!r}: " if has_value else ""
    return f"{name}: {shown}{detail}"


#: click's UsageError as typer ships it (typer exports only its BadParameter subclass).
_USAGE_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError"
)


#: Arguments that are no value of any option: a command line of only these (and command names)
#: has no secret to register.
_HARMLESS = frozenset({"--help", "--version"})


class CommandGroup(TyperGroup):
    """The app's group: a usage error of any command is one line on stderr, exit code 2.

    The credentials the command line holds are registered before it is parsed
    (:func:`~scaler.config.cli_options.register_argv_secrets`): every usage error, whatever
    argument it echoes, is masked as the rest of the output is.
    """

    def main(self, args: Sequence[str] | None = None, *rest: Any, **kwargs: Any) -> Any:
        """Register the secrets of ``args`` (default: ``sys.argv[1:]``), then run click's main.
        A command line of nothing but help and version flags (and command names) holds no
        secret, and is parsed without the settings' import."""
        given = sys.argv[1:] if args is None else list(args)
        if not all(a in _HARMLESS or a in self.commands for a in given):
            from scaler.config.cli_options import register_argv_secrets

            register_argv_secrets(given)
        return super().main(args, *rest, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a usage error becomes one line (:func:`describe_bad_parameter`
        for a value that could not be converted, the parser's message and the command's
        ``--help`` otherwise)."""
        args = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        command = args[0] if args and args[0] in self.commands else None
        try:
            return super().invoke(ctx)
        except typer.BadParameter as err:
            if type(err) is not typer.BadParameter:  # a missing argument or option
                raise _usage_line(err, command) from None
            typer.echo(f"vllm-scaler: {describe_bad_parameter(err)}", err=True)
            raise typer.Exit(2) from None
        except _USAGE_ERROR as err:
            found = self.get_command(ctx, command) if command else None
            flag = _flag_given_a_value(err, found, args) if found is not None else None
            raise _usage_line(err, command, flag) from None


#: The words a boolean setting's variable takes (pydantic's), as a flag's value is tried.
_TRUE = frozenset({"true", "1", "yes", "on", "y", "t"})
_FALSE = frozenset({"false", "0", "no", "off", "n", "f"})


def _params(command: Any) -> Iterator[Any]:
    """The parameters of ``command`` and of its subcommands (a group's), depth first."""
    yield from command.params
    for sub in getattr(command, "commands", {}).values():
        yield from _params(sub)


def _flag_given_a_value(err: Any, command: Any, args: Sequence[str]) -> str | None:
    """For click's ``option '--x' does not take a value`` on a flag given ``--x=<value>``: the
    spelling that says it (``--leader-election=false: a flag takes no value: write
    --no-leader-election``), from the flag's pair (``--x/--no-x``) and the value as a boolean
    (``true``/``false``, ``1``/``0``, ``yes``/``no``, ``on``/``off``); None for another error."""
    option = getattr(err, "option_name", None)
    if not option or "does not take a value" not in str(err.format_message()):
        return None
    param = next(
        (p for p in _params(command) if option in (*p.opts, *getattr(p, "secondary_opts", ()))),
        None,
    )
    if param is None or not getattr(param, "is_flag", False):
        return None
    on = next((o for o in param.opts if o.startswith("--")), option)
    off = next((o for o in param.secondary_opts if o.startswith("--")), None)
    given = next((a for a in args if a.startswith(option + "=")), None)
    word = given.split("=", 1)[1].strip().lower() if given else ""
    head = f"{given or option}: a flag takes no value"
    if word not in _TRUE | _FALSE:
        return f"{head}: write {on} or {off}" if off else f"{head}: write {on} or leave it out"
    wanted = (word in _TRUE) == (option in param.opts)
    if wanted:
        return f"{head}: write {on}"
    return f"{head}: write {off}" if off else f"{head}: leave {on} out"


def _usage_line(err: Any, command: str | None, message: str | None = None) -> typer.Exit:
    """Print ``vllm-scaler: <message>; see vllm-scaler <command> --help`` (``message``, or the
    error's own); return the Exit to raise."""
    words = [command] if command else []
    if message is None:
        message = str(err.format_message()).rstrip(".")
        message = message[:1].lower() + message[1:]
    help_of = " ".join(["vllm-scaler", *words, "--help"])
    typer.echo(f"vllm-scaler: {message}; see {help_of}", err=True)
    return typer.Exit(2)


class Command(TyperCommand):
    """A command whose usage line names a required argument as ``POLICY_FILE``, the usual
    convention, not typer's ``{POLICY_FILE}`` (which reads as an unfilled placeholder)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line's pieces, braces around required arguments dropped."""
        pieces: list[str] = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]
