"""Commands loaded when they run: ``vllm-scaler --help`` imports no command's dependencies.

:class:`LazyGroup` is the app's click group. It knows each command by a :class:`LazyCommand`
(its name, the function that registers it and the first line of its help) and imports the
command's module only when the command is looked up to run, or for its own ``--help``; the
list of commands is printed from the first lines alone. Usage errors are formatted as
:class:`~scaler.config.cli_errors.CommandGroup` formats them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
import typer.core
import typer.main

from scaler.config.cli_errors import CommandGroup

__all__ = ["LazyCommand", "LazyGroup", "load_command"]


@dataclass(frozen=True, slots=True)
class LazyCommand:
    """One command of the app, before it is imported.

    Attributes:
        name: the command's name (``check-policy``).
        register: ``module:function``; the function takes a :class:`typer.Typer` and adds the
            command (and perhaps others of its module) to it.
        help: the first line of the command's help, for the list of commands (a test keeps
            it equal to the command's own).
        extra: the optional extra the command needs and the modules it brings: without them
            the command prints one line naming the extra and exits 2 (``--help`` works).
    """

    name: str
    register: str
    help: str
    extra: tuple[str, tuple[str, ...]] | None = None


def _needs_extra(
    callback: Callable[..., Any], extra: str, modules: tuple[str, ...]
) -> Callable[..., Any]:
    """``callback``, first checking that ``modules`` are installed: without them (the image
    installs none of the extras) the command prints one line naming the extra and exits 2
    before doing any work, instead of a traceback at the end."""

    @functools.wraps(callback)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for module in modules:
            if importlib.util.find_spec(module) is None:
                from scaler.config.cli_options import fail

                raise fail(f"{module} is missing: pip install 'vllm-scaler[{extra}]'")
        return callback(*args, **kwargs)

    return checked


def load_command(entry: LazyCommand) -> Any:
    """Import ``entry``'s module and build its click command (typer's, from the function's
    registrations on a typer app of its own).

    Raises:
        KeyError: the function registered no command of that name.
    """
    module, _, function = entry.register.partition(":")
    register = getattr(importlib.import_module(module), function)
    sub = typer.Typer(rich_markup_mode=None, add_completion=False)
    register(sub)
    for info in sub.registered_commands:
        assert info.callback is not None
        name = info.name or info.callback.__name__.replace("_", "-")
        if name == entry.name and entry.extra is not None:
            info.callback = _needs_extra(info.callback, *entry.extra)
    command: Any = typer.main.get_command(sub)
    if hasattr(command, "commands"):  # the module registered several: a group of them
        command = command.commands[entry.name]
    elif command.name != entry.name:
        raise KeyError(f"{entry.register} registers {command.name}, not {entry.name}")
    return command


class _Commands(MutableMapping[str, Any]):
    """The group's commands: the loaded ones, and the others by name until looked up."""

    def __init__(self, loaded: Mapping[str, Any], lazy: Mapping[str, LazyCommand]) -> None:
        self._loaded: dict[str, Any] = dict(loaded)
        self._lazy = lazy

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded and name in self._lazy:
            self._loaded[name] = load_command(self._lazy[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._lazy or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._lazy, *self._loaded]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*self._lazy, *self._loaded]))

    def loaded(self, name: str) -> bool:
        """Whether ``name`` has been imported."""
        return name in self._loaded


class LazyGroup(CommandGroup):
    """The app's group: its :attr:`lazy` commands are imported when looked up (see the module
    docstring); the list of commands in ``--help`` needs none of them."""

    #: The commands, in the order ``--help`` lists them (a subclass sets them).
    lazy: ClassVar[Mapping[str, LazyCommand]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands, self.lazy)

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command's name, none imported."""
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The list of commands, each with the first line of its help (from :attr:`lazy` for
        a command not imported yet)."""
        names = [n for n in self.list_commands(ctx) if not self._hidden(n)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            commands: Any = self.commands
            if name in self.lazy and not commands.loaded(name):
                text = _short_help(self.lazy[name].help, limit)
            else:
                text = self.commands[name].get_short_help_str(limit)
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _hidden(self, name: str) -> bool:
        commands: Any = self.commands
        if name in self.lazy and not commands.loaded(name):
            return False
        return bool(getattr(self.commands[name], "hidden", False))


def _short_help(text: str, limit: int) -> str:
    """The short help a command with help ``text`` shows (its first sentence, cut to
    ``limit``), as the command itself computes it once imported."""
    return str(typer.core.TyperCommand(name="-", help=text).get_short_help_str(limit))
