"""Checks of command-line options before any long work: one clear error per option out of
range, and output paths that cannot be written."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = [
    "MAX_REPLAY_MINUTES",
    "Bounds",
    "option_errors",
    "output_dir_error",
    "output_file_error",
    "plot_file_error",
    "plot_formats",
    "plot_option",
    "write_output",
]

#: option ("--rate-scale") -> (low, whether low is allowed, high)
Bounds = Mapping[str, tuple[float, bool, float]]

#: The longest ``--minutes`` a trace replay (``sim``, ``bench``) takes: a week. A longer one
#: runs for days (``bench`` ticks once per virtual second, ``sim`` in compressed real time).
MAX_REPLAY_MINUTES = 7 * 24 * 60.0


def option_errors(bounds: Bounds, **values: float) -> list[str]:
    """One error per option whose value is out of its range (or NaN/inf), naming the option.

    Keyword names are the options' (``rate_scale`` is ``--rate-scale``); each must be in
    ``bounds``. Returns ``[]`` when every value is in range.
    """
    errors = []
    for key, value in values.items():
        option = "--" + key.replace("_", "-")
        low, inclusive, high = bounds[option]
        ok = math.isfinite(value) and (value >= low if inclusive else value > low) and value <= high
        if not ok:
            finite = "a finite number" if not math.isfinite(value) else "a number"
            expected = f"{finite} {'>=' if inclusive else '>'} {_number(low)}"
            if math.isfinite(high):
                expected += f" and <= {_number(high)}"
            errors.append(f"{option}: value {_number(value)}: expected {expected}")
    return errors


def _number(x: float) -> str:
    """``x`` as given when whole (1000001, not 1e+06, which would read as the limit itself)."""
    if isinstance(x, int):
        return str(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:g}"


def _dir_problem(path: Path) -> str | None:
    """What keeps ``path`` from being a writable directory (created here when missing, then
    tested by creating and removing a file in it)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        nearest = path.absolute()
        while not nearest.is_file() and nearest != nearest.parent:
            nearest = nearest.parent
        return f"{nearest} is a file"
    except OSError as err:
        return f"{path} cannot be created ({err.strerror or err})"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    # os.access says yes to root everywhere, and to folders like /proc that take no new file:
    # only creating one tells
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        return f"{path} is not writable (a file cannot be created in it: {err.strerror or err})"
    return None


def output_dir_error(option: str, path: Path) -> str | None:
    """None when ``path`` is a writable directory (created when missing); else one line naming
    the option, the value and what is in the way. Checked up front, so that a long run does
    not end on a traceback with its results lost."""
    problem = _dir_problem(path)
    return (
        None
        if problem is None
        else f"{option}: value '{path}': expected a writable directory, but {problem}"
    )


def output_file_error(option: str, path: Path) -> str | None:
    """:func:`output_dir_error` for a file's directory (created when missing), and an error
    when ``path`` itself is a directory."""
    problem = "it is a directory" if path.is_dir() else _dir_problem(path.parent)
    return (
        None
        if problem is None
        else f"{option}: value '{path}': expected a writable file path, but {problem}"
    )


#: The formats named first when a plot's file name is refused (the others follow, sorted).
_USUAL_PLOT_FORMATS = ("png", "svg", "pdf")


def plot_formats() -> tuple[str, ...]:
    """The file name extensions (without the dot) matplotlib writes a figure in, as its Agg
    canvas, which the plots are drawn on, lists them: png, svg and pdf first."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    known = set(FigureCanvasAgg.get_supported_filetypes())
    usual = [f for f in _USUAL_PLOT_FORMATS if f in known]
    return (*usual, *sorted(known - set(usual)))


def plot_file_error(option: str, given: str) -> str | None:
    """None when ``given`` (the option's text as typed) names a plot that can be written: a
    file name whose extension is a format matplotlib knows (it chooses the format by the
    extension, and without one writes ``<name>.png`` beside the path printed), not a
    directory, in a writable directory (:func:`output_file_error`). Else one line naming the
    option, the value and what was expected."""
    path = Path(given)
    formats = plot_formats()
    expected = "a file name ending in one of " + ", ".join(f".{f}" for f in formats)
    if given.endswith(("/", os.sep)) or path.is_dir():
        return f"{option}: value {given!r}: expected {expected}, but it names a directory"
    if path.suffix.removeprefix(".").lower() not in formats:
        return f"{option}: value {given!r}: expected {expected}"
    return output_file_error(option, path)


def plot_option(plot: str | None, *, default: str, no_plot: bool) -> tuple[Path | None, str | None]:
    """The plot file of a command's ``--plot`` (``default`` when not given) and
    ``--no-plot``: the path to write (None with ``--no-plot``) and the error that refuses
    the options (:func:`plot_file_error`; both options given), None when they are fine."""
    if no_plot:
        conflict = f"--plot: value {plot!r}: expected either --plot or --no-plot, not both"
        return None, None if plot is None else conflict
    given = default if plot is None else plot
    return Path(given), plot_file_error("--plot", given)


def write_output(option: str, write: Callable[[], Path]) -> tuple[Path | None, str | None]:
    """Call ``write`` (which writes a file and returns its path); when it fails, ``None`` and
    one line naming the option, so that the caller still prints the results it computed.

    Any exception is such a failure (a full disk, and as well an error of the library that
    draws the file), said on one line: its first, without a traceback.
    """
    try:
        return write(), None
    except OSError as err:
        return None, f"{option}: {err}"
    except Exception as err:  # whatever failed, the results are still printed
        first = str(err).strip().splitlines()[:1]
        return None, f"{option}: {type(err).__name__}: {first[0] if first else 'failed'}"
