"""Secrets never reach an output: the one place every byte the command line prints goes through.

:func:`install` replaces ``sys.stdout`` and ``sys.stderr`` with :class:`RedactingStream`\\ s
that mask every registered secret (:mod:`scaler.config.secrets`) before writing. Everything
the process prints uses those two objects: typer/click output and rich's error panels,
``print``, structlog (:func:`scaler.telemetry.logging.configure_logging` writes to the
redacting stderr), the standard library's ``logging`` and ``warnings``, and Python's own
traceback printer (``sys.excepthook``, ``threading.excepthook``, ``sys.unraisablehook``).

Text written in pieces is masked as a whole: a stream keeps back a trailing piece that may be
the start of a secret until the next write (or a flush) shows how it continues.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Iterable
from typing import Any, TextIO

from scaler.config.secrets import held_prefix_start, mask, register_secret

__all__ = ["RedactingStream", "install", "redact", "redacting", "register_secret"]


def redact(value: Any) -> Any:
    """``value`` with every registered secret masked (strings, and inside lists and dicts)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value


class RedactingStream(io.TextIOBase):
    """A text stream that writes to ``target`` with every registered secret masked.

    It answers ``isatty``, ``fileno``, ``encoding`` and ``errors`` as ``target`` does, so
    click and rich treat it as the terminal (or pipe) it stands for. It has no ``buffer``:
    bytes written there would bypass the masking, so click falls back to this text stream.
    """

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self.target = target
        self._held = ""
        self._lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------
    def write(self, s: str) -> int:
        """Mask and write ``s`` (a possible start of a secret at its end is held back)."""
        with self._lock:
            text = self._held + s
            cut = held_prefix_start(text)
            self._held = text[cut:]
            if cut:
                self.target.write(mask(text[:cut]))
        return len(s)

    def writelines(self, lines: Iterable[str]) -> None:  # type: ignore[override]
        """Write each line (masked)."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Write what was held back (masked) and flush ``target``."""
        with self._lock:
            if self._held:
                self.target.write(mask(self._held))
                self._held = ""
        self.target.flush()

    def close(self) -> None:
        """Flush; ``target`` stays open (it belongs to the caller, usually the process)."""
        if not self.closed:
            self.flush()
        super().close()

    # -- what the wrapped stream is -------------------------------------------------------
    def writable(self) -> bool:
        """Always writable."""
        return True

    def isatty(self) -> bool:
        """Whether ``target`` is a terminal."""
        return self.target.isatty()

    def fileno(self) -> int:
        """``target``'s file descriptor (for terminal size queries; writing goes through us)."""
        return self.target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """``target``'s encoding."""
        return getattr(self.target, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        """``target``'s error handler."""
        return getattr(self.target, "errors", None)

    @property
    def name(self) -> Any:
        """``target``'s name (``<stderr>``)."""
        return getattr(self.target, "name", repr(self.target))

    def __repr__(self) -> str:
        return f"RedactingStream({self.target!r})"


def redacting(stream: TextIO) -> TextIO:
    """``stream`` itself if it already masks secrets, else a :class:`RedactingStream` on it."""
    if isinstance(stream, RedactingStream):
        return stream
    return RedactingStream(stream)  # type: ignore[return-value]  # a TextIO by behaviour


def install() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` redacting streams (idempotent).

    Call it first thing in a process (the command line's entry point and its callback do):
    whatever is printed afterwards, by any library or by Python itself, is masked.
    """
    sys.stdout = redacting(sys.stdout)
    sys.stderr = redacting(sys.stderr)
