"""Request traces for the simulated fleet: load, slice, compress and rate-scale.

The traces in ``/work/shared/traces`` are the Azure LLM inference traces of November 2023
(AzurePublicDataset, CC BY 4.0, published with "Splitwise", Patel et al., ISCA 2024): CSV with
``TIMESTAMP`` (wall clock, no time zone, 7 decimal digits), ``ContextTokens`` and
``GeneratedTokens``. :func:`load_trace` reads them (or any CSV / JSONL of the same shape),
cuts a window, compresses time and scales the request rate, and says so in
:attr:`Trace.description` so that every figure can state what it replayed.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["Trace", "TraceRequest", "load_trace", "per_second_rate"]

# Python's fromisoformat accepts at most 6 fractional digits; the Azure traces carry 7, so
# the fraction is split off and added as a float.
_WALL_CLOCK = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?)(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?$"
)

# Largest jitter (seconds, after compression) between copies of one request when rate_scale > 1.
_MAX_COPY_JITTER_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace.

    Attributes:
        arrival_seconds: arrival time in seconds, relative to the start of the replayed window
            (for an unsliced trace: to the first request of the file), after time compression.
        prompt_tokens: prompt length in tokens.
        output_tokens: tokens generated for the request.
    """

    arrival_seconds: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Trace:
    """A replayable request trace.

    Attributes:
        requests: requests sorted by arrival.
        source: the file name the trace came from.
        description: one human line stating the slice, the time compression and the rate
            scaling, for figure captions and logs.
        duration_seconds: length of the replayed window in seconds (after compression): the
            slice length, or for an unsliced tail of the file up to its last request (which
            then arrives at exactly ``duration_seconds``).
    """

    requests: tuple[TraceRequest, ...]
    source: str
    description: str
    duration_seconds: float

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def mean_rate(self) -> float:
        """Mean arrival rate in requests per second over the window (0 for an empty window)."""
        return len(self.requests) / self.duration_seconds if self.duration_seconds > 0 else 0.0


def _parse_time(value: str, where: str) -> tuple[datetime | None, float]:
    """Parse a timestamp: plain seconds, or wall clock with any number of fraction digits.

    Returns ``(datetime or None, seconds)``: for plain numbers the datetime is None and the
    float is the value; for wall clock the float is the fractional second.
    """
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise ValueError(f"{where}: bad timestamp {value!r} (not a finite number)")
        return None, seconds
    m = _WALL_CLOCK.match(text)
    if m is None:
        raise ValueError(
            f"{where}: bad timestamp {value!r} "
            "(expected seconds or 'YYYY-MM-DD HH:MM:SS[.fraction]')"
        )
    base, fraction, zone = m.groups()
    try:
        stamp = datetime.fromisoformat(base + (zone or ""))
    except ValueError as exc:
        raise ValueError(f"{where}: bad timestamp {value!r} ({exc})") from None
    if stamp.tzinfo is None:
        # No zone in the traces: read as UTC so that DST never shifts relative times.
        stamp = stamp.replace(tzinfo=UTC)
    return stamp, float("0." + fraction) if fraction else 0.0


def _parse_tokens(value: object, where: str) -> int:
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{where}: bad token count {value!r} (expected an integer)") from None
    if not number.is_integer() or number < 0:
        raise ValueError(f"{where}: bad token count {value!r} (expected an integer >= 0)")
    return int(number)


def _rows(path: Path, columns: tuple[str, str, str]) -> Iterator[tuple[int, Mapping[str, object]]]:
    """Yield ``(line number, row)`` from a CSV or JSONL file, checking the columns exist."""
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path} line {lineno}: not valid JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise ValueError(f"{path} line {lineno}: expected a JSON object")
                missing = [c for c in columns if c not in row]
                if missing:
                    raise ValueError(
                        f"{path} line {lineno}: missing column(s) {missing} (keys: {sorted(row)})"
                    )
                yield lineno, row
        return
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in columns if c not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing} (columns: {list(header)})")
        for row in reader:
            # reader.line_num is the physical line just read (header is line 1).
            yield reader.line_num, row


def _fmt(x: float) -> str:
    return f"{x:g}"


def load_trace(
    path: str | Path,
    *,
    time_column: str = "TIMESTAMP",
    prompt_column: str = "ContextTokens",
    output_column: str = "GeneratedTokens",
    start_seconds: float = 0.0,
    duration_seconds: float | None = None,
    compress: float = 1.0,
    rate_scale: float = 1.0,
    seed: int = 0,
) -> Trace:
    """Load a request trace from CSV (or JSONL when the name ends in ``.jsonl``).

    Args:
        path: the trace file.
        time_column: arrival timestamps: wall clock (``2023-11-16 18:17:03.9799600``, any
            number of fraction digits, read as UTC when no zone is given) or plain seconds.
        prompt_column: prompt length in tokens.
        output_column: generated tokens.
        start_seconds: start of the window, seconds after the file's first request (real time).
        duration_seconds: length of the window in real seconds; None = to the end of the file.
        compress: time compression factor (> 0): arrivals are divided by it, so 5 replays a
            window five times faster (and at five times the request rate).
        rate_scale: request-rate multiplier (> 0). Below 1 each request is kept with that
            probability (``random.Random(seed)``); above 1 each request appears
            ``floor(rate_scale)`` or ``floor(rate_scale) + 1`` times (the fraction is spread
            evenly by error diffusion), the extra copies shifted by a small seeded jitter.
        seed: seed for thinning and jitter; same arguments give the same trace.

    Returns:
        The :class:`Trace`, arrivals relative to the window start, in seconds.

    Raises:
        ValueError: naming the file, line, column and value for a missing column or a bad value,
            or for invalid arguments.
    """
    path = Path(path)
    if not compress > 0 or not math.isfinite(compress):
        raise ValueError(f"compress must be a finite number > 0, got {compress!r}")
    if not rate_scale > 0 or not math.isfinite(rate_scale):
        raise ValueError(f"rate_scale must be a finite number > 0, got {rate_scale!r}")
    if start_seconds < 0:
        raise ValueError(f"start_seconds must be >= 0, got {start_seconds!r}")
    if duration_seconds is not None and not duration_seconds > 0:
        raise ValueError(f"duration_seconds must be > 0, got {duration_seconds!r}")

    raw: list[tuple[datetime | None, float, int, int]] = []
    for lineno, row in _rows(path, (time_column, prompt_column, output_column)):
        where = f"{path} line {lineno}"
        stamp, secs = _parse_time(str(row[time_column]), f"{where} column {time_column!r}")
        prompt = _parse_tokens(row[prompt_column], f"{where} column {prompt_column!r}")
        output = _parse_tokens(row[output_column], f"{where} column {output_column!r}")
        if raw and (raw[0][0] is None) != (stamp is None):
            raise ValueError(
                f"{where} column {time_column!r}: timestamp {row[time_column]!r} mixes "
                "wall-clock and plain-seconds formats"
            )
        raw.append((stamp, secs, prompt, output))

    # Relative seconds: subtract datetimes (exact) and add the fractions separately so the
    # 7th decimal digit survives instead of drowning in a 1.7e9 epoch float.
    times: list[float] = []
    if raw:
        first_stamp, first_secs = raw[0][0], raw[0][1]
        for stamp, secs, _, _ in raw:
            if stamp is None or first_stamp is None:
                times.append(secs - first_secs)
            else:
                times.append((stamp - first_stamp).total_seconds() + secs - first_secs)
        t0 = min(times)
        times = [t - t0 for t in times]
    span = max(times) if times else 0.0

    end = start_seconds + duration_seconds if duration_seconds is not None else math.inf
    selected = sorted(
        (t, p, o) for t, (_, _, p, o) in zip(times, raw, strict=True) if start_seconds <= t < end
    )
    window_real = (
        duration_seconds if duration_seconds is not None else max(0.0, span - start_seconds)
    )
    window = window_real / compress
    shifted = [((t - start_seconds) / compress, p, o) for t, p, o in selected]

    rng = random.Random(seed)
    out: list[TraceRequest] = []
    if rate_scale <= 1.0:
        for t, p, o in shifted:
            if rate_scale == 1.0 or rng.random() < rate_scale:
                out.append(TraceRequest(t, p, o))
    else:
        whole = math.floor(rate_scale)
        frac = rate_scale - whole
        # Copies land within a fraction of the mean gap so they do not form visible bursts
        # of exact duplicates, and never leave the window.
        mean_gap = window / len(shifted) if shifted else 0.0
        jitter = min(_MAX_COPY_JITTER_SECONDS, mean_gap)
        # A slice is half-open; an unsliced trace ends at its last request.
        limit = math.nextafter(window, 0.0) if duration_seconds is not None else window
        acc = 0.0
        for t, p, o in shifted:
            copies = whole
            acc += frac
            if acc >= 1.0 - 1e-9:
                copies += 1
                acc -= 1.0
            out.append(TraceRequest(t, p, o))
            for _ in range(copies - 1):
                tj = t + rng.uniform(0.0, jitter)
                tj = min(tj, limit)
                out.append(TraceRequest(tj, p, o))
        out.sort(key=lambda r: r.arrival_seconds)

    stop_real = start_seconds + window_real
    time_text = "real time" if compress == 1.0 else f"time compressed {_fmt(compress)}x"
    description = (
        f"{path.name} minutes {_fmt(round(start_seconds / 60, 2))}-"
        f"{_fmt(round(stop_real / 60, 2))}, {time_text}, rate x{_fmt(rate_scale)}: "
        f"{len(out)} requests over {window:.0f} s"
    )
    return Trace(tuple(out), path.name, description, window)


def per_second_rate(trace: Trace, bucket_seconds: float = 1.0) -> list[float]:
    """Arrival rate in requests per second, one value per ``bucket_seconds`` bucket.

    Bucket ``i`` covers ``[i * bucket_seconds, (i + 1) * bucket_seconds)`` and the buckets
    cover the trace's whole window; meant for plotting the offered load.
    """
    if not bucket_seconds > 0:
        raise ValueError(f"bucket_seconds must be > 0, got {bucket_seconds!r}")
    n = max(1, math.ceil(trace.duration_seconds / bucket_seconds))
    counts = [0] * n
    for r in trace.requests:
        counts[min(n - 1, int(r.arrival_seconds / bucket_seconds))] += 1
    return [c / bucket_seconds for c in counts]
