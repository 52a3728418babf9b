"""The headroom frontier: share within both SLOs against GPU-hours as one policy setting sweeps.

Standing headroom is a user's stated trade: capacity held above what the load needs, paid for
in GPU-hours, buys the requests of bursts no reactive policy can meet. :func:`run_frontier`
runs the vllm-scaler row of the benchmark once per value of a policy setting (by default a
standing-headroom fraction from 0 to 50%), on every routing seed, and :func:`plot_frontier`
draws each value's mean share within both SLOs against its mean GPU-hours, the policy's own
value of the setting marked as the default, beside the hindsight rows when they were
computed.

The setting is named by its dotted path in a target's policy (``signals.capacity.headroom``):
the harness does not know what the setting means, so a policy that gains a standing-headroom
setting sweeps it by name, and any other setting (a target utilization, a scale-down window)
can be swept the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from scaler.bench.figures import RowFigures
from scaler.bench.references import FIXED, HINDSIGHT, REACTIVE, run_references
from scaler.bench.runner import BenchOptions, Prepared, prepare, run_policy
from scaler.config.policy import Policy, TargetPolicy

__all__ = [
    "DEFAULT_HEADROOM_VALUES",
    "Frontier",
    "FrontierPoint",
    "plot_frontier",
    "run_frontier",
    "setting_value",
    "with_setting",
]

#: The standing-headroom fractions swept by default: 0 to 50% in steps of 10%.
DEFAULT_HEADROOM_VALUES: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def _walk(policy: TargetPolicy, setting: str) -> tuple[list[BaseModel], list[str]]:
    parts = setting.split(".")
    models: list[BaseModel] = [policy]
    for i, part in enumerate(parts):
        model = models[-1]
        fields = type(model).model_fields
        if part not in fields:
            where = ".".join(parts[:i]) or "the target policy"
            raise ValueError(
                f"setting {setting!r}: {where} has no field {part!r} (fields: "
                f"{', '.join(sorted(fields))})"
            )
        value = getattr(model, part)
        if i < len(parts) - 1:
            if not isinstance(value, BaseModel):
                raise ValueError(f"setting {setting!r}: {part!r} is a value, not a section")
            models.append(value)
        elif isinstance(value, BaseModel):
            raise ValueError(f"setting {setting!r}: {part!r} is a section, not a value")
    return models, parts


def setting_value(policy: TargetPolicy, setting: str) -> Any:
    """The value of the dotted ``setting`` in ``policy``.

    Raises:
        ValueError: no such setting, naming the fields there are.
    """
    models, parts = _walk(policy, setting)
    return getattr(models[-1], parts[-1])


def with_setting(policy: TargetPolicy, setting: str, value: float) -> TargetPolicy:
    """``policy`` with the dotted ``setting`` set to ``value``, validated as a policy file's.

    Raises:
        ValueError: no such setting, or a value the policy refuses (its message).
    """
    _, parts = _walk(policy, setting)
    data = policy.model_dump()
    node = data
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    try:
        return TargetPolicy.model_validate(data)
    except ValidationError as err:
        raise ValueError(f"setting {setting!r} = {value!r}: {err}") from None


@dataclass(frozen=True, slots=True)
class FrontierPoint:
    """One value of the setting, on every seed.

    Attributes:
        value: the setting's value.
        row: the vllm-scaler row with it.
        default: it is the policy's own value.
    """

    value: float
    row: RowFigures
    default: bool

    @property
    def share(self) -> float:
        """Mean share within both SLOs, 0-1."""
        return self.row.mean("both_request_share")

    @property
    def gpu_hours(self) -> float:
        """Mean GPU-hours."""
        return self.row.mean("gpu_hours")


@dataclass(frozen=True, slots=True)
class Frontier:
    """The sweep on one trace.

    Attributes:
        trace: the trace's description.
        setting: the dotted setting swept.
        points: one per value, in the order given (the default added if not among them).
        references: the hindsight rows (fixed, yardstick, reactive) when computed.
    """

    trace: str
    setting: str
    points: tuple[FrontierPoint, ...]
    references: dict[str, RowFigures]


def _sweep_policy(prep: Prepared, setting: str, value: float) -> Policy:
    targets = [with_setting(t, setting, value) for t in prep.policy.targets]
    return prep.policy.model_copy(update={"targets": targets})


def run_frontier(
    options: BenchOptions,
    setting: str,
    values: Sequence[float] = DEFAULT_HEADROOM_VALUES,
    *,
    progress: Callable[[str], None] | None = None,
) -> Frontier:
    """The vllm-scaler row for each value of ``setting`` (and its default), on every routing
    seed; with ``options.references`` the hindsight rows too.

    Raises:
        ValueError: an unknown setting or a value the policy refuses (before any run), and as
            :func:`~scaler.bench.runner.prepare`.
    """
    prep = prepare(options, progress)
    target = prep.policy.targets[0]
    default = setting_value(target, setting)
    sweep = list(dict.fromkeys([*values, *([default] if isinstance(default, float) else [])]))
    policies = {v: _sweep_policy(prep, setting, v) for v in sweep}  # every value checked first
    jobs = [(v, prep.job("vllm-scaler", seed, policies[v])) for v in sweep for seed in prep.seeds]
    refs = None
    if options.jobs > 1:
        with ProcessPoolExecutor(max_workers=options.jobs) as pool:
            future = (
                pool.submit(run_references, prep.reference_setup()) if options.references else None
            )
            figures = list(pool.map(run_policy, [j for _, j in jobs]))
            refs = future.result() if future is not None else None
    else:
        figures = [run_policy(j) for _, j in jobs]
        refs = run_references(prep.reference_setup()) if options.references else None
    by_value: dict[float, list[Any]] = {}
    for (v, _), f in zip(jobs, figures, strict=True):
        by_value.setdefault(v, []).append(f)
    points = tuple(
        FrontierPoint(v, RowFigures("vllm-scaler", tuple(by_value[v])), v == default) for v in sweep
    )
    references = (
        {n: RowFigures(n, refs.rows[n]) for n in (FIXED, HINDSIGHT, REACTIVE)} if refs else {}
    )
    return Frontier(prep.trace.description, setting, points, references)


def plot_frontier(frontier: Frontier, path: Path) -> Path:
    """PNG: each value's mean share within both SLOs (%) against its mean GPU-hours, joined
    in value order, the default ringed, the hindsight rows as crosses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    pts = sorted(frontier.points, key=lambda p: p.value)
    ax.plot([p.gpu_hours for p in pts], [100 * p.share for p in pts], "-o", color="tab:blue")
    for p in pts:
        ax.annotate(f"{p.value:g}", (p.gpu_hours, 100 * p.share), textcoords="offset points",
                    xytext=(4, 4), fontsize=8)  # fmt: skip
        if p.default:
            ax.scatter([p.gpu_hours], [100 * p.share], s=160, facecolors="none",
                       edgecolors="tab:red", label=f"default ({p.value:g})", zorder=3)  # fmt: skip
    for name, row in frontier.references.items():
        share = row.mean("both_request_share")
        if math.isfinite(share):
            ax.scatter([row.mean("gpu_hours")], [100 * share], marker="x", label=name)
    ax.axhline(99.0, color="tab:gray", ls="--", lw=0.8)
    ax.set_xlabel("GPU-hours (mean over the routing seeds)")
    ax.set_ylabel("requests within both SLOs, % (mean)")
    ax.set_title(f"{frontier.trace}\nvllm-scaler, {frontier.setting} swept", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
