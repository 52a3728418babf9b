"""Splitting one cycle's answers back per selector group and per target (pure, no I/O).

Every sub-expression of a cycle's query is tagged (:mod:`scaler.sources.promql`): per-pod
series with their selector group, TTFT series with their target. :func:`split_answers` undoes
the tagging. A fault in one series touches only whose series it is: two series for one pod
(or one target), or a malformed series (:class:`~scaler.sources.prometheus.answers.
BadSeries`), become a :class:`SeriesFault` of that pod (or target), which the readings turn
into a status of the targets that own it; every other target reads the answer as usual. A
series that names no group (or no target) cannot be anybody's: it is left out and listed in
``unattributed``, so the pods or targets it might have been read as missing, never as zero.
Shared by the live source and the backtest's replay of history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.answers import Answer, short_detail
from scaler.sources.promql import METRIC_LABEL, SELECTOR_LABEL, TARGET_LABEL, QueryKind

__all__ = ["PodSeries", "SeriesFault", "SplitAnswers", "Unattributed", "split_answers"]


@dataclass(frozen=True, slots=True)
class SeriesFault:
    """Why the series of one pod (or one target) in one answer cannot be used.

    Attributes:
        status: ``duplicate_series`` (two series where the query gives one) or
            ``bad_response`` (a malformed series).
        detail: what was found, with the series' labels.
    """

    status: SignalStatus
    detail: str


@dataclass(slots=True)
class PodSeries:
    """Series of one selector group in one per-pod query, keyed by (namespace, pod).

    ``faults`` holds the pods whose series in this answer cannot be used (see
    :class:`SeriesFault`); their values, if any, stay in ``by_pod`` but must not be read.
    """

    by_pod: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    no_pod_label: int = 0
    faults: dict[tuple[str, str], SeriesFault] = field(default_factory=dict)
    _strays: dict[str, list[str]] | None = None

    @property
    def count(self) -> int:
        """Series in the group (a pod whose only series was malformed counts too)."""
        return len(self.by_pod) + self.no_pod_label + len(self.faults.keys() - self.by_pod.keys())

    def fault(self, namespace: str, pod: str) -> SeriesFault | None:
        """The fault of ``pod``'s series in this answer (with or without a namespace label)."""
        if not self.faults:
            return None
        return self.faults.get((namespace, pod)) or self.faults.get(("", pod))

    def strays(self, known_pods: set[tuple[str, str]], namespace: str) -> list[tuple[str, str]]:
        """Keys of series in ``namespace`` (or without a namespace label) whose pod no
        snapshot lists, sorted.

        Indexed once per cycle and group: each target of the default group then looks its own
        pods up by name and scans only these, instead of every series of every namespace
        (1,000 targets of 8,000 pods would otherwise scan 8 million per query).
        """
        if self._strays is None:
            index: dict[str, list[str]] = {}
            for ns, pod in sorted(self.by_pod):
                if not ns or (ns, pod) not in known_pods:
                    index.setdefault(ns, []).append(pod)
            self._strays = index
        return [("", pod) for pod in self._strays.get("", [])] + [
            (namespace, pod) for pod in self._strays.get(namespace, [])
        ]


def _split_per_pod(answer: Answer, kind: QueryKind) -> tuple[dict[str, PodSeries], list[str]]:
    """Group a per-pod answer by selector group -> (namespace, pod) -> {metric: value}.

    The metric is the series' ``__name__`` (KV cache), its ``scaler_metric`` tag
    (throughput), or else the query kind. Returns the groups and the details of the series
    that name no group.
    """
    groups: dict[str, PodSeries] = {}
    unattributed: list[str] = []
    for labels, value in answer.series:
        gid = labels.get(SELECTOR_LABEL)
        if gid is None:
            unattributed.append(f"a series has no {SELECTOR_LABEL} label: {labels}")
            continue
        grp = groups.setdefault(gid, PodSeries())
        pod = labels.get("pod")
        if not pod:
            grp.no_pod_label += 1
            continue
        # An empty namespace means the series has no namespace label; the source
        # then matches it on the target's namespace (the selector already scoped it).
        metric = labels.get("__name__") or labels.get(METRIC_LABEL) or str(kind)
        key = (labels.get("namespace", ""), pod)
        slot = grp.by_pod.setdefault(key, {})
        if metric in slot:
            detail = f"duplicate series for {metric} of pod {pod}: {labels}"
            grp.faults.setdefault(
                key, SeriesFault(SignalStatus.DUPLICATE_SERIES, short_detail(detail))
            )
            continue
        slot[metric] = value
    for bad in answer.bad:
        gid = bad.labels.get(SELECTOR_LABEL)
        if gid is None:
            unattributed.append(bad.detail)
            continue
        grp = groups.setdefault(gid, PodSeries())
        pod = bad.labels.get("pod")
        if not pod:
            grp.no_pod_label += 1
            continue
        key = (bad.labels.get("namespace", ""), pod)
        grp.faults.setdefault(key, SeriesFault(SignalStatus.BAD_RESPONSE, bad.detail))
    return groups, unattributed


def _split_per_target(answer: Answer) -> tuple[dict[str, float], dict[str, SeriesFault], list[str]]:
    """Map a target-level answer to target key -> value, the faults per target key, and the
    details of the series that name no target."""
    out: dict[str, float] = {}
    faults: dict[str, SeriesFault] = {}
    unattributed: list[str] = []
    for labels, value in answer.series:
        key = labels.get(TARGET_LABEL)
        if key is None:
            unattributed.append(f"a series has no {TARGET_LABEL} label: {labels}")
            continue
        if key in out:
            detail = f"duplicate series for target {key}: {labels}"
            faults.setdefault(key, SeriesFault(SignalStatus.DUPLICATE_SERIES, short_detail(detail)))
            continue
        out[key] = value
    for bad in answer.bad:
        key = bad.labels.get(TARGET_LABEL)
        if key is None:
            unattributed.append(bad.detail)
            continue
        faults.setdefault(key, SeriesFault(SignalStatus.BAD_RESPONSE, bad.detail))
    return out, faults, unattributed


@dataclass(frozen=True, slots=True)
class Unattributed:
    """Series of one answer that name no selector group (or no target): left out.

    Attributes:
        count: how many.
        first: the first one's detail (its labels, or what is malformed).
    """

    count: int
    first: str


@dataclass(frozen=True, slots=True)
class SplitAnswers:
    """One cycle's answers, split.

    Attributes:
        answers: query -> answer, as received.
        pod_groups: per-pod query -> selector group -> its series (and its pods' faults).
        target_series: TTFT query -> target key -> value.
        target_faults: TTFT query -> target key -> why that target's series cannot be used.
        unattributed: query -> the series that name no group or target (left out).
    """

    answers: dict[QueryKind, Answer]
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = field(default_factory=dict)
    target_series: dict[QueryKind, dict[str, float]] = field(default_factory=dict)
    target_faults: dict[QueryKind, dict[str, SeriesFault]] = field(default_factory=dict)
    unattributed: dict[QueryKind, Unattributed] = field(default_factory=dict)


def split_answers(answers: Mapping[QueryKind, Answer]) -> SplitAnswers:
    """Split one cycle's answers: per-pod ones per selector group, TTFT ones per target.

    Pure: ``answers`` is left as it is. A duplicated or malformed series is a fault of its
    pod or target only (see the module docstring); no answer is failed as a whole here.
    """
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = {}
    target_series: dict[QueryKind, dict[str, float]] = {}
    target_faults: dict[QueryKind, dict[str, SeriesFault]] = {}
    unattributed: dict[QueryKind, Unattributed] = {}
    for kind, ans in answers.items():
        if not ans.outcome.ok:
            continue
        if kind.per_pod:
            pod_groups[kind], lost = _split_per_pod(ans, kind)
        elif kind in (QueryKind.TTFT_QUANTILE, QueryKind.TTFT_RATE):
            target_series[kind], faults, lost = _split_per_target(ans)
            if faults:
                target_faults[kind] = faults
        else:
            continue
        if lost:
            unattributed[kind] = Unattributed(len(lost), short_detail(lost[0]))
    return SplitAnswers(dict(answers), pod_groups, target_series, target_faults, unattributed)
