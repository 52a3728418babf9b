"""Request traces for the simulated fleet: load, slice, compress and rate-scale.

The bundled traces in ``scaler/sim/traces`` are the Azure LLM inference traces of November 2023
(AzurePublicDataset, CC BY 4.0, published with "Splitwise", Patel et al., ISCA 2024): CSV with
``TIMESTAMP`` (wall clock, no time zone, 7 decimal digits), ``ContextTokens`` and
``GeneratedTokens``. :func:`load_trace` reads them (or any CSV / JSONL of the same shape),
cuts a window, compresses time and scales the request rate, and says so in
:attr:`Trace.description` so that every figure can state what it replayed.

Time units. Wall-clock timestamps carry their unit. Plain numbers are read in ``time_unit``
(``s``, ``ms``, ``us`` or ``ns``); ``auto`` (the default) decides from the values and says how
in :attr:`Trace.time_unit_note`:

- Unix epoch timestamps are recognised by their magnitude (2001-2286: 1e9-1e10 seconds,
  1e12-1e13 ms, 1e15-1e16 us, 1e18-1e19 ns);
- otherwise (times relative to some start) they are seconds, unless their span read as seconds
  exceeds :data:`AUTO_MAX_SPAN_SECONDS` (2 days): then the first of ms, us, ns that brings the
  span under it (a one-hour trace in milliseconds spans 3.6e6, 41.7 days read as seconds).

Prefix caching. A file may carry the hashes of each prompt's blocks (Mooncake's traces:
``hash_ids``, one hash per 512 prompt tokens, chained so that equal hashes mean an equal
prefix; ``hash_column`` names the column, a JSON list or integers separated by spaces): the
replicas' prefix caches look them up. A trace without them can state a hit rate
(:func:`with_prefix_hits`): each request's prompt then finds that share of its tokens cached.

Plausibility. A file whose timestamps span more than :data:`MAX_SPAN_SECONDS` (7 days), or
whose mean rate exceeds :data:`MAX_MEAN_RATE` (5,000 requests/s, the span being > 0), is
refused with the reason: such a file is almost always read in the wrong unit.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from scaler.config.wording import counted
from scaler.sim.engine import SimRequest

__all__ = [
    "AUTO_MAX_SPAN_SECONDS",
    "MAX_MEAN_RATE",
    "MAX_SPAN_SECONDS",
    "TIME_UNITS",
    "TIME_UNIT_HELP",
    "SleepEvent",
    "Trace",
    "TraceRequest",
    "build_trace",
    "load_trace",
    "parse_hashes",
    "per_second_rate",
    "rejected_count",
    "summary_line",
    "time_unit_option_error",
    "to_sim_request",
    "with_prefix_hits",
]

#: Seconds per unit of a plain-number timestamp.
TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: ``auto`` reads relative timestamps as seconds while their span stays under this, seconds.
AUTO_MAX_SPAN_SECONDS = 2 * 86400.0
#: Longest span a trace file may have, seconds.
MAX_SPAN_SECONDS = 7 * 86400.0
#: Highest mean arrival rate a trace file may have, requests/s.
MAX_MEAN_RATE = 5000.0
#: Help of the ``--time-unit`` option of ``sim`` and ``bench``.
TIME_UNIT_HELP = (
    "Unit of plain-number timestamps: s, ms, us, ns, or auto (detected from their range; the "
    "run prints what it read)."
)
# Unix epoch magnitudes (2001-09-09 to 2286-11-20) per unit.
_EPOCH_RANGES = (("s", 1e9, 1e10), ("ms", 1e12, 1e13), ("us", 1e15, 1e16), ("ns", 1e18, 1e19))

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
        cached_tokens: the stated prefix-cache hit of its prompt, tokens (0: none stated).
        block_hashes: the hashes of its prompt's blocks (empty: none given), each
            :attr:`Trace.hash_block_tokens` tokens.
    """

    arrival_seconds: float
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    block_hashes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SleepEvent:
    """An operator (or a model actuator, llm-d's fast model actuation) puts replicas to sleep
    or wakes them.

    Attributes:
        seconds: when, on the replay clock.
        replicas: how many (the first Ready, awake pods by name; to wake: sleeping ones).
        level: the sleep level (1 or 2), or 0 to wake them up.
    """

    seconds: float
    replicas: int
    level: int


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
        time_unit: how the time column was read: ``wall clock``, ``s``, ``ms``, ``us``, ``ns``
            (``s`` for synthetic traces).
        time_unit_note: how the unit was decided (given, or detected and why).
        file_span_seconds: span of the whole file's timestamps, seconds (before slicing).
        step_seconds: for a synthetic shape with a load step, when the step starts, seconds
            on the replay clock (None otherwise).
        hash_block_tokens: tokens per block hash of the requests' ``block_hashes``.
        shifts: when the request mix, the cache-hit rate or the replicas asleep change,
            seconds on the replay clock, each with what changed (for the capacity figures).
        sleep_events: replicas put to sleep and woken during the replay.
    """

    requests: tuple[TraceRequest, ...]
    source: str
    description: str
    duration_seconds: float
    time_unit: str = "s"
    time_unit_note: str = "given"
    file_span_seconds: float = 0.0
    step_seconds: float | None = None
    hash_block_tokens: int = 0
    shifts: tuple[tuple[float, str], ...] = ()
    sleep_events: tuple[SleepEvent, ...] = ()

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


def _rows(
    path: Path, columns: tuple[str, str, str], hash_column: str | None = None
) -> Iterator[tuple[int, Mapping[str, object]]]:
    """Yield ``(line number, row)`` from a CSV or JSONL file, checking the columns exist.

    Read as UTF-8 with an optional byte-order mark (``utf-8-sig``: Excel writes one before
    the header). Raises ``ValueError`` naming the file when it is not UTF-8 text."""
    wanted = columns if hash_column is None else (*columns, hash_column)
    try:
        yield from _read_rows(path, wanted)
    except UnicodeDecodeError as err:
        byte = err.object[err.start : err.start + 1].hex()
        raise ValueError(
            f"{path}: not UTF-8 text (byte 0x{byte}: {err.reason}); expected a CSV or JSONL trace"
        ) from None


def _read_rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, Mapping[str, object]]]:
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8-sig") as fh:
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
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames:  # no line, or blank ones only
            raise ValueError(
                f"{path}: the file is empty (expected a CSV header with the columns "
                f"{list(columns)}, then one request per line)"
            )
        header = reader.fieldnames
        missing = [c for c in columns if c not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing} (columns: {list(header)})")
        for row in reader:
            # reader.line_num is the physical line just read (header is line 1).
            short = [c for c in columns if row.get(c) is None]  # a row with fewer fields
            if short:
                fields = sum(1 for v in row.values() if v is not None)
                raise ValueError(
                    f"{path} line {reader.line_num}: missing column(s) {short} on this line "
                    f"(it has {fields} of the header's {len(header)} fields)"
                )
            yield reader.line_num, row


def parse_hashes(value: object, where: str) -> tuple[int, ...]:
    """A prompt's block hashes: a JSON list of integers (JSONL, or a CSV cell holding one) or
    integers separated by spaces or commas; empty for an empty cell.

    Raises:
        ValueError: naming ``where`` and the value, when it is not a list of integers.
    """
    items: list[object]
    if isinstance(value, list):
        items = list(value)
    else:
        text = str(value).strip()
        if text.startswith("["):
            try:
                loaded = json.loads(text)
            except json.JSONDecodeError:
                loaded = None
            if not isinstance(loaded, list):
                raise ValueError(f"{where}: bad block hashes {value!r} (expected a JSON list)")
            items = loaded
        else:
            items = [x for x in re.split(r"[\s,]+", text) if x]
    out: list[int] = []
    for x in items:
        number: int | None = None
        if isinstance(x, int) and not isinstance(x, bool):
            number = x
        elif isinstance(x, float) and x.is_integer():
            number = int(x)
        elif isinstance(x, str) and re.fullmatch(r"-?\d+", x.strip()):
            number = int(x.strip())
        if number is None:
            raise ValueError(f"{where}: bad block hash {x!r} in {value!r} (expected integers)")
        out.append(number)
    return tuple(out)


def _fmt(x: float) -> str:
    return f"{x:g}"


def time_unit_option_error(value: str) -> str | None:
    """The error line for a ``--time-unit`` value that names no unit, else None."""
    if value == "auto" or value in TIME_UNITS:
        return None
    return f"--time-unit: expected one of auto, {', '.join(TIME_UNITS)}, got {value!r}"


def _detect_unit(values: list[float]) -> tuple[str, str]:
    """The unit of plain-number timestamps (see the module docstring) and why."""
    if not values:
        return "s", "detected: no timestamps"
    top = max(abs(v) for v in values)
    for unit, low, high in _EPOCH_RANGES:
        if low <= top < high:
            return unit, f"detected: Unix epoch in {unit}"
    span = max(values) - min(values)
    if span <= AUTO_MAX_SPAN_SECONDS:
        return "s", f"detected: span {_fmt(span)} read as seconds is {_span_text(span)}"
    for unit in ("ms", "us", "ns"):
        if span * TIME_UNITS[unit] <= AUTO_MAX_SPAN_SECONDS:
            return unit, (
                f"detected: span {_fmt(span)} read as seconds would be {_span_text(span)}"
            )
    return "ns", f"detected: span {_fmt(span)} is too long for any unit"


def _span_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _check_plausible(path: Path, span: float, count: int, unit: str) -> None:
    hint = (
        " (wall-clock timestamps)"
        if unit == "wall clock"
        else f" (timestamps read in {unit}; give --time-unit if that is wrong)"
    )
    if span > MAX_SPAN_SECONDS:
        raise ValueError(
            f"{path}: implausible trace: its timestamps span {_span_text(span)}, more than "
            f"{_span_text(MAX_SPAN_SECONDS)}{hint}"
        )
    if count > 1 and span <= 0:
        raise ValueError(f"{path}: implausible trace: all {count} requests at the same time")
    if count > 1 and count / span > MAX_MEAN_RATE:
        raise ValueError(
            f"{path}: implausible trace: {count} requests in {_span_text(span)}, a mean of "
            f"{count / span:,.0f} requests/s, more than {MAX_MEAN_RATE:,.0f}{hint}"
        )


def load_trace(
    path: str | Path,
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
    """Load a request trace from CSV (or JSONL when the name ends in ``.jsonl``).

    Args:
        path: the trace file.
        time_column: arrival timestamps: wall clock (``2023-11-16 18:17:03.9799600``, any
            number of fraction digits, read as UTC when no zone is given) or plain numbers.
        prompt_column: prompt length in tokens.
        output_column: generated tokens.
        time_unit: unit of plain-number timestamps: ``s``, ``ms``, ``us``, ``ns`` or ``auto``
            (detected, see the module docstring); ignored for wall-clock timestamps.
        start_seconds: start of the window, seconds after the file's first request (real time).
        duration_seconds: length of the window in real seconds; None = to the end of the file.
        compress: time compression factor (> 0): arrivals are divided by it, so 5 replays a
            window five times faster (and at five times the request rate).
        rate_scale: request-rate multiplier (> 0), see :func:`build_trace`.
        seed: seed for thinning and jitter; same arguments give the same trace.
        hash_column: the column with each prompt's block hashes (see the module docstring),
            or None.
        hash_block_tokens: prompt tokens per hash (Mooncake: 512).

    Returns:
        The :class:`Trace`, arrivals relative to the window start, in seconds.

    Raises:
        ValueError: naming the file, line, column and value for a missing column or a bad value,
            an implausible span or rate (with the unit it was read in), or invalid arguments.
    """
    path = Path(path)
    if time_unit != "auto" and time_unit not in TIME_UNITS:
        raise ValueError(
            f"time_unit: expected one of auto, {', '.join(TIME_UNITS)}, got {time_unit!r}"
        )
    _check_window(compress, rate_scale, start_seconds, duration_seconds)

    if hash_block_tokens < 1:
        raise ValueError(f"hash_block_tokens: expected >= 1, got {hash_block_tokens!r}")
    raw: list[tuple[datetime | None, float, int, int]] = []
    hashes: list[tuple[int, ...]] = []
    columns = (time_column, prompt_column, output_column)
    for lineno, row in _rows(path, columns, hash_column):
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
        if hash_column is not None:
            hashes.append(parse_hashes(row[hash_column], f"{where} column {hash_column!r}"))

    # Relative seconds: subtract datetimes (exact) and add the fractions separately so the
    # 7th decimal digit survives instead of drowning in a 1.7e9 epoch float.
    times: list[float] = []
    unit, note = "wall clock", "timestamps with a date"
    if raw and raw[0][0] is None:
        if time_unit == "auto":
            unit, note = _detect_unit([secs for _, secs, _, _ in raw])
        else:
            unit, note = time_unit, "given"
    elif time_unit not in ("auto", "s"):
        note = f"timestamps with a date; --time-unit {time_unit} ignored"
    scale = TIME_UNITS.get(unit, 1.0)
    if raw:
        first_stamp, first_secs = raw[0][0], raw[0][1]
        for stamp, secs, _, _ in raw:
            if stamp is None or first_stamp is None:
                times.append((secs - first_secs) * scale)
            else:
                times.append((stamp - first_stamp).total_seconds() + secs - first_secs)
        t0 = min(times)
        times = [t - t0 for t in times]
    span = max(times) if times else 0.0
    _check_plausible(path, span, len(times), unit)
    order = sorted(range(len(raw)), key=lambda i: (times[i], raw[i][2], raw[i][3]))
    rows = [(times[i], raw[i][2], raw[i][3]) for i in order]
    return build_trace(
        rows,
        hashes=[hashes[i] for i in order] if hash_column is not None else None,
        hash_block_tokens=hash_block_tokens if hash_column is not None else 0,
        name=path.name,
        start_seconds=start_seconds,
        duration_seconds=duration_seconds,
        compress=compress,
        rate_scale=rate_scale,
        seed=seed,
        time_unit=unit,
        time_unit_note=note,
    )


def _check_window(
    compress: float, rate_scale: float, start_seconds: float, duration_seconds: float | None
) -> None:
    if not compress > 0 or not math.isfinite(compress):
        raise ValueError(f"compress must be a finite number > 0, got {compress!r}")
    if not rate_scale > 0 or not math.isfinite(rate_scale):
        raise ValueError(f"rate_scale must be a finite number > 0, got {rate_scale!r}")
    if start_seconds < 0:
        raise ValueError(f"start_seconds must be >= 0, got {start_seconds!r}")
    if duration_seconds is not None and not duration_seconds > 0:
        raise ValueError(f"duration_seconds must be > 0, got {duration_seconds!r}")


def build_trace(
    rows: Sequence[tuple[float, int, int]],
    *,
    name: str,
    hashes: Sequence[tuple[int, ...]] | None = None,
    hash_block_tokens: int = 0,
    start_seconds: float = 0.0,
    duration_seconds: float | None = None,
    compress: float = 1.0,
    rate_scale: float = 1.0,
    seed: int = 0,
    time_unit: str = "s",
    time_unit_note: str = "given",
    span_seconds: float | None = None,
    step_seconds: float | None = None,
) -> Trace:
    """A :class:`Trace` from ``(arrival seconds from 0, prompt tokens, output tokens)`` rows,
    sorted by arrival: cut the window, compress time and scale the rate.

    Args:
        rows: the requests of the whole source.
        name: the source's name for :attr:`Trace.description`.
        hashes: each row's prompt block hashes (aligned with ``rows``), or None.
        hash_block_tokens: prompt tokens per hash.
        start_seconds, duration_seconds, compress, seed: as :func:`load_trace`.
        rate_scale: below 1 each request is kept with that probability
            (``random.Random(seed)``); above 1 each request appears ``floor(rate_scale)`` or
            ``floor(rate_scale) + 1`` times (the fraction is spread evenly by error diffusion),
            the extra copies shifted by a small seeded jitter.
        time_unit, time_unit_note: how the source's times were read.
        span_seconds: the source's span (default: the last arrival).
        step_seconds: a load step of the source, seconds from its start (moved to the replay
            clock with the window and the compression).

    Raises:
        ValueError: invalid arguments.
    """
    _check_window(compress, rate_scale, start_seconds, duration_seconds)
    span = span_seconds if span_seconds is not None else (rows[-1][0] if rows else 0.0)
    end = start_seconds + duration_seconds if duration_seconds is not None else math.inf
    none: tuple[int, ...] = ()
    selected = [
        (t, p, o, hashes[i] if hashes is not None else none)
        for i, (t, p, o) in enumerate(rows)
        if start_seconds <= t < end
    ]
    window_real = (
        duration_seconds if duration_seconds is not None else max(0.0, span - start_seconds)
    )
    window = window_real / compress
    shifted = [((t - start_seconds) / compress, p, o, h) for t, p, o, h in selected]

    rng = random.Random(seed)
    out: list[TraceRequest] = []
    if rate_scale <= 1.0:
        for t, p, o, h in shifted:
            if rate_scale == 1.0 or rng.random() < rate_scale:
                out.append(TraceRequest(t, p, o, block_hashes=h))
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
        for t, p, o, h in shifted:
            copies = whole
            acc += frac
            if acc >= 1.0 - 1e-9:
                copies += 1
                acc -= 1.0
            out.append(TraceRequest(t, p, o, block_hashes=h))
            for _ in range(copies - 1):
                tj = t + rng.uniform(0.0, jitter)
                tj = min(tj, limit)
                # a copy is the same prompt again: the same blocks
                out.append(TraceRequest(tj, p, o, block_hashes=h))
        out.sort(key=lambda r: r.arrival_seconds)

    stop_real = start_seconds + window_real
    time_text = "real time" if compress == 1.0 else f"time compressed {_fmt(compress)}x"
    description = (
        f"{name} minutes {_fmt(round(start_seconds / 60, 2))}-"
        f"{_fmt(round(stop_real / 60, 2))}, {time_text}, rate x{_fmt(rate_scale)}: "
        f"{counted(len(out), 'request')} over {window:.0f} s"
    )
    step = None
    if step_seconds is not None and start_seconds <= step_seconds < stop_real:
        step = (step_seconds - start_seconds) / compress
    return Trace(
        tuple(out),
        name,
        description,
        window,
        time_unit=time_unit,
        time_unit_note=time_unit_note,
        file_span_seconds=span,
        step_seconds=step,
        hash_block_tokens=hash_block_tokens if hashes is not None else 0,
    )


def with_prefix_hits(
    trace: Trace,
    points: Sequence[tuple[float, float]],
    *,
    start_seconds: float = 0.0,
    compress: float = 1.0,
) -> Trace:
    """``trace`` with a stated prefix-cache hit rate: each request's ``cached_tokens`` is
    the rate at its arrival times its prompt (rounded down; the engine keeps whole blocks).

    Args:
        trace: the trace (requests with block hashes keep them: the hashes win).
        points: ``(seconds, share 0-1)``, piecewise constant from each point on, on the
            source's clock (before the first point: the first share).
        start_seconds, compress: the window the trace was cut with, to map its replay clock
            back to the source's.

    Raises:
        ValueError: no points, or a share outside [0, 1].
    """
    if not points:
        raise ValueError("points: expected at least one (seconds, share)")
    ordered = sorted(points)
    for _, share in ordered:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"prefix hit share: expected 0-1, got {share!r}")

    def share_at(t: float) -> float:
        out = ordered[0][1]
        for at, value in ordered:
            if at <= t:
                out = value
        return out

    requests = tuple(
        TraceRequest(
            r.arrival_seconds,
            r.prompt_tokens,
            r.output_tokens,
            math.floor(share_at(start_seconds + r.arrival_seconds * compress) * r.prompt_tokens),
            r.block_hashes,
        )
        for r in trace.requests
    )
    stated = ", ".join(f"{100 * share:g}% from {_fmt(at / 60)} min" for at, share in ordered)
    return replace(
        trace, requests=requests, description=f"{trace.description}; prefix hits {stated}"
    )


def to_sim_request(trace: Trace, index: int, arrival: float) -> SimRequest:
    """The engine's request for ``trace.requests[index]`` arriving at ``arrival`` seconds."""
    r = trace.requests[index]
    return SimRequest(
        index,
        arrival,
        r.prompt_tokens,
        r.output_tokens,
        cached_tokens=r.cached_tokens,
        block_hashes=r.block_hashes,
        hash_block_tokens=trace.hash_block_tokens,
    )


def rejected_count(trace: Trace, max_model_len: int) -> int:
    """Requests vLLM refuses at once: prompt + output (at least 1) above ``max_model_len``."""
    return sum(
        1 for r in trace.requests if r.prompt_tokens + max(1, r.output_tokens) > max_model_len
    )


def summary_line(trace: Trace, *, max_model_len: int, rate_scale: str) -> str:
    """One line on what was read: source, requests, duration, time unit, rejected, rate scale.

    Args:
        trace: the trace as replayed.
        max_model_len: the replicas' context limit, tokens.
        rate_scale: how to show the rate scale (e.g. ``x2 (auto)``).
    """
    unit = trace.time_unit if trace.time_unit == "wall clock" else f"time unit {trace.time_unit}"
    return (
        f"read {trace.source}: {counted(len(trace), 'request')} over "
        f"{_span_text(trace.duration_seconds)} (file span "
        f"{_span_text(trace.file_span_seconds)}, {unit}, {trace.time_unit_note}), "
        f"{rejected_count(trace, max_model_len)} rejected (prompt + output > "
        f"{max_model_len} tokens), rate scale {rate_scale}"
    )


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
