"""Day-scale request traces drawn from two weeks of production request rates (Alibaba ServeGen).

The ServeGen release (repository alibaba/ServeGen, folder ``data/language/``; Apache License
2.0; Xiang et al., "ServeGen: Workload Characterization and Generation of Large Language Model
Serving in Production", arXiv 2505.09999, 2025) gives, for each client of a production
language-model service, its mean request rate and the coefficient of variation of its
inter-arrival times in every 10-minute window of 14 days (``chunk-<i>-trace.csv``: window
start in seconds since day 1 00:00, rate, CV, the fitted family and its two parameters). A
model's load is the sum over its clients. The project keeps a copy in its shared data beside
the repository (``../shared/traces/servegen/<model>/``); :data:`DEFAULT_DIR` is the first
``shared/traces/servegen`` found beside the repository or a folder above it (a worktree sits
one level deeper).

``servegen:<model>:day<N>`` (``day3``) or ``servegen:<model>:day<N>-<M>`` (``day8-9``) names
days 1-14 of ``m-small`` or ``m-mid`` (or of a folder of such files, given by its path). The
replay is **scaled down**: every client's rate is multiplied by one factor ``p`` chosen so
that the busiest 10-minute window of the chosen days arrives at :data:`PEAK_REQUESTS_PER_SECOND`
(a fleet of a few dozen replicas at the peak; ``rate_scale`` applies on top). Keeping each of
a client's requests with probability ``p`` would leave its arrivals with a coefficient of
variation ``sqrt(p c^2 + 1 - p)`` (a thinned renewal process: the gaps are sums of a
geometric number of the original ones), so each client in each window draws Gamma-distributed
gaps with that CV at ``p`` times its rate; windows without a rate (gaps in the data) have no
arrivals. **Lengths** are not in the release: each request takes the prompt and output
lengths of a request drawn at random from the Azure conversation trace (AzurePublicDataset,
CC BY 4.0, Patel et al., ISCA 2024; bundled), as the release's README suggests.
"""

from __future__ import annotations

import csv
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

from scaler.sim.trace import Trace, build_trace, load_trace

__all__ = [
    "DEFAULT_DIR",
    "PEAK_REQUESTS_PER_SECOND",
    "SERVEGEN_PREFIX",
    "ServegenSpec",
    "parse_servegen",
    "servegen_trace",
    "window_rates",
]

SERVEGEN_PREFIX = "servegen:"


def _default_dir() -> Path:
    root = Path(__file__).resolve().parents[2]
    for above in root.parents:
        candidate = above / "shared" / "traces" / "servegen"
        if candidate.is_dir():
            return candidate
    return root.parent / "shared" / "traces" / "servegen"


#: Where the ServeGen data sits: the project's shared data beside the repository.
DEFAULT_DIR = _default_dir()
#: The busiest 10-minute window of a replay arrives at this rate, requests/s.
PEAK_REQUESTS_PER_SECOND = 48.0
_WINDOW = 600.0
_DAY = 86400.0
_LENGTHS = Path(__file__).resolve().parent / "traces" / "AzureLLMInferenceTrace_conv.csv"
_SPEC = re.compile(r"^servegen:(?P<model>[^:]+):days?(?P<first>\d+)(?:-(?P<last>\d+))?$")


@dataclass(frozen=True, slots=True)
class ServegenSpec:
    """A ``servegen:`` trace name, parsed.

    Attributes:
        model: ``m-small``, ``m-mid`` or a folder of ``chunk-*.csv`` files.
        first_day, last_day: the days replayed, 1-14, inclusive.
    """

    model: str
    first_day: int
    last_day: int

    @property
    def folder(self) -> Path:
        """The folder of the model's client files."""
        path = Path(self.model)
        return path if "/" in self.model else DEFAULT_DIR / self.model

    @property
    def label(self) -> str:
        """``m-small day 3`` or ``m-small days 8-9``."""
        days = (
            f"day {self.first_day}"
            if self.first_day == self.last_day
            else f"days {self.first_day}-{self.last_day}"
        )
        return f"{Path(self.model).name} {days}"


def parse_servegen(spec: str) -> ServegenSpec:
    """Parse ``servegen:<model>:day<N>[-<M>]``.

    Raises:
        ValueError: a name not of that form, or days outside 1-14 or out of order.
    """
    m = _SPEC.match(spec)
    if m is None:
        raise ValueError(
            f"{spec}: expected servegen:<m-small|m-mid|folder>:day<N> or :day<N>-<M> (days 1-14)"
        )
    first = int(m["first"])
    last = int(m["last"]) if m["last"] else first
    if not 1 <= first <= last <= 14:
        raise ValueError(f"{spec}: days {first}-{last}: expected 1 <= first <= last <= 14")
    return ServegenSpec(m["model"], first, last)


@dataclass(frozen=True, slots=True)
class _Window:
    rate: float
    cv: float


def _clients(folder: Path) -> list[dict[int, _Window]]:
    """Per client file: window index -> (rate, CV), windows with a rate only."""
    files = sorted(folder.glob("chunk-*-trace.csv"))
    if not files:
        raise FileNotFoundError(
            f"{folder}: no ServeGen client files (chunk-<i>-trace.csv) there; expected the "
            "folder of a model of the ServeGen release (m-small, m-mid)"
        )
    out = []
    for path in files:
        client: dict[int, _Window] = {}
        with path.open(newline="", encoding="utf-8") as fh:
            for lineno, row in enumerate(csv.reader(fh), start=1):
                if len(row) < 3:
                    raise ValueError(f"{path} line {lineno}: expected start,rate,cv,... ")
                try:
                    start, rate, cv = float(row[0]), float(row[1]), float(row[2])
                except ValueError:
                    raise ValueError(
                        f"{path} line {lineno}: bad numbers {row[:3]!r} (start, rate, cv)"
                    ) from None
                if rate > 0 and math.isfinite(rate):
                    client[int(start // _WINDOW)] = _Window(rate, cv if cv > 0 else 1.0)
        out.append(client)
    return out


def window_rates(spec: ServegenSpec) -> list[float]:
    """The model's total request rate in each 10-minute window of the chosen days, requests/s
    (before scaling)."""
    clients = _clients(spec.folder)
    first = int((spec.first_day - 1) * _DAY // _WINDOW)
    last = int(spec.last_day * _DAY // _WINDOW)
    return [sum(c[w].rate for c in clients if w in c) for w in range(first, last)]


def servegen_trace(
    spec: str,
    *,
    start_seconds: float = 0.0,
    duration_seconds: float | None = None,
    compress: float = 1.0,
    rate_scale: float = 1.0,
    seed: int = 0,
    peak_requests_per_second: float = PEAK_REQUESTS_PER_SECOND,
) -> Trace:
    """The replay ``spec`` names (see the module docstring), windowed and scaled as a file is.

    Raises:
        ValueError: a bad name or bad data; FileNotFoundError: no data in the folder.
    """
    parsed = parse_servegen(spec)
    clients = _clients(parsed.folder)
    first = int((parsed.first_day - 1) * _DAY // _WINDOW)
    last = int(parsed.last_day * _DAY // _WINDOW)
    totals = [sum(c[w].rate for c in clients if w in c) for w in range(first, last)]
    peak = max(totals, default=0.0)
    if peak <= 0:
        raise ValueError(f"{spec}: no requests in {parsed.label}")
    p = min(1.0, peak_requests_per_second / peak)
    rng = random.Random(f"{spec}:{seed}")
    lengths = [
        (r.prompt_tokens, r.output_tokens) for r in load_trace(_LENGTHS, rate_scale=1.0).requests
    ]
    arrivals: list[float] = []
    for client in clients:
        for w in range(first, last):
            win = client.get(w)
            if win is None:
                continue
            rate = p * win.rate
            cv = math.sqrt(p * win.cv**2 + 1 - p)
            shape = 1 / cv**2
            t0 = (w - first) * _WINDOW
            # the first gap from a random phase, so that windows do not start with a burst
            t = t0 + rng.gammavariate(shape, 1 / (shape * rate)) * rng.random()
            while t < t0 + _WINDOW:
                arrivals.append(t)
                t += rng.gammavariate(shape, 1 / (shape * rate))
    arrivals.sort()
    rows = [(t, *lengths[rng.randrange(len(lengths))]) for t in arrivals]
    trace = build_trace(
        rows,
        name=f"servegen {parsed.label} (x{p:.3g} of its clients' rates, peak "
        f"{peak * p:.0f} req/s, lengths from the Azure conv trace, seed {seed})",
        start_seconds=start_seconds,
        duration_seconds=duration_seconds,
        compress=compress,
        rate_scale=rate_scale,
        seed=seed,
        time_unit="s",
        time_unit_note="servegen windows",
        span_seconds=(last - first) * _WINDOW,
    )
    return trace
