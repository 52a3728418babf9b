"""Where a trace comes from: a bundled trace, a synthetic shape, a day-scale replay, or a file.

``--trace`` of ``sim`` and ``bench`` accepts ``code`` and ``conv`` (the bundled Azure traces),
``synthetic:<shape>`` (:mod:`scaler.sim.synthetic`), ``servegen:<model>:day<N>[-<M>]``
(day-scale replays drawn from ServeGen's production rates, :mod:`scaler.sim.servegen`) or the
path of a CSV/JSONL file.
"""

from __future__ import annotations

from pathlib import Path

from scaler.sim.servegen import SERVEGEN_PREFIX, servegen_trace
from scaler.sim.synthetic import SHAPES, synthetic_trace
from scaler.sim.trace import Trace, load_trace

__all__ = ["NAMED_TRACES", "SYNTHETIC_PREFIX", "TRACE_CHOICES", "open_trace", "trace_label"]

TRACES = Path(__file__).resolve().parent / "traces"
NAMED_TRACES = {
    "code": TRACES / "AzureLLMInferenceTrace_code.csv",
    "conv": TRACES / "AzureLLMInferenceTrace_conv.csv",
}
SYNTHETIC_PREFIX = "synthetic:"
#: What ``--trace`` accepts, for help texts and errors.
TRACE_CHOICES = (
    "'code' or 'conv' (the bundled Azure traces), "
    + ", ".join(f"'{SYNTHETIC_PREFIX}{n}'" for n in SHAPES)
    + f", '{SERVEGEN_PREFIX}m-small|m-mid:day<N>[-<M>]' (day-scale replays)"
    + " or a CSV/JSONL file"
)


def trace_label(spec: str) -> str:
    """A short name for file names: ``code``, ``synthetic-flash``, or the file's stem."""
    if spec in NAMED_TRACES:
        return spec
    if spec.startswith(SYNTHETIC_PREFIX):
        return "synthetic-" + spec[len(SYNTHETIC_PREFIX) :]
    if spec.startswith(SERVEGEN_PREFIX):
        return "servegen-" + "-".join(Path(part).name for part in spec.split(":")[1:])
    return Path(spec).stem


def open_trace(
    spec: str,
    *,
    time_column: str = "TIMESTAMP",
    prompt_column: str = "ContextTokens",
    output_column: str = "GeneratedTokens",
    time_unit: str = "auto",
    start_seconds: float = 0.0,
    duration_seconds: float | None = None,
    compress: float = 1.0,
    rate_scale: float = 1.0,
    seed: int = 0,
    hash_column: str | None = None,
    hash_block_tokens: int = 512,
) -> Trace:
    """Load the trace ``spec`` names (see the module docstring); arguments as
    :func:`~scaler.sim.trace.load_trace` (columns, unit and hashes apply to files only).

    Raises:
        FileNotFoundError: ``spec`` names no bundled trace, no shape and no file.
        IsADirectoryError: ``spec`` names a directory.
        ValueError: a bad file, an unknown shape, or invalid arguments.
    """
    window = {
        "start_seconds": start_seconds,
        "duration_seconds": duration_seconds,
        "compress": compress,
        "rate_scale": rate_scale,
        "seed": seed,
    }
    if spec.startswith(SYNTHETIC_PREFIX):
        return synthetic_trace(spec[len(SYNTHETIC_PREFIX) :], **window)  # type: ignore[arg-type]
    if spec.startswith(SERVEGEN_PREFIX):
        return servegen_trace(spec, **window)  # type: ignore[arg-type]
    path = NAMED_TRACES.get(spec, Path(spec))
    if path.is_dir():
        raise IsADirectoryError(
            f"{spec}: is a directory, not a trace file (expected {TRACE_CHOICES})"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{spec}: no such file (expected {TRACE_CHOICES})")
    return load_trace(
        path,
        time_column=time_column,
        prompt_column=prompt_column,
        output_column=output_column,
        time_unit=time_unit,
        hash_column=hash_column,
        hash_block_tokens=hash_block_tokens,
        **window,  # type: ignore[arg-type]
    )
