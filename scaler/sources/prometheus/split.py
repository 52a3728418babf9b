"""Splitting one cycle's answers back per selector group and per target (pure, no I/O).

Every sub-expression of a cycle's query is tagged (:mod:`scaler.sources.promql`): per-pod
series with their selector group, TTFT series with their target (or, read from the recording
rules, with their namespace and pod group). :func:`split_answers` undoes the tagging. A fault
in one series touches only whose series it is: two series for one pod, one target's bucket
or one recorded group's bucket, or a malformed series (:class:`~scaler.sources.prometheus.
answers.BadSeries`), become a :class:`SeriesFault` of that pod, target or group, which the
readings turn into a status of the targets that own it; every other target reads the answer
as usual. A series that names no group, target or pod group cannot be anybody's: it is left
out and listed in ``unattributed``, so the pods or targets it might have been read as
missing, never as zero. Shared by the live source and the backtest's replay of history.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.answers import Answer, parse_sample_value, short_detail
from scaler.sources.promql import (
    HISTOGRAM_LABEL,
    LAYOUT_LABEL,
    METRIC_LABEL,
    NAME_LABEL,
    NATIVE_PART_LABEL,
    POD_GROUP_LABEL,
    RECORDED_LABEL,
    SELECTOR_LABEL,
    TARGET_LABEL,
    THROUGHPUT_METRICS,
    HistogramKind,
    NativePart,
    QueryKind,
)

__all__ = [
    "PodSeries",
    "SeriesFault",
    "SplitAnswers",
    "TtftSeries",
    "Unattributed",
    "merge_splits",
    "recorded_throughput_namespaces",
    "split_answers",
    "split_ttft",
    "with_ttft",
]


@dataclass(frozen=True, slots=True)
class SeriesFault:
    """Why the series of one pod (or one target, or one recorded pod group) in one answer
    cannot be used.

    Attributes:
        status: ``duplicate_series`` (two series where the query gives one) or
            ``bad_response`` (a malformed series).
        detail: what was found, with the series' labels.
    """

    status: SignalStatus
    detail: str


def _duplicate(detail: str) -> SeriesFault:
    return SeriesFault(SignalStatus.DUPLICATE_SERIES, short_detail(detail))


def _malformed(detail: str) -> SeriesFault:
    return SeriesFault(SignalStatus.BAD_RESPONSE, short_detail(detail))


@dataclass(slots=True)
class PodSeries:
    """Series of one selector group in one per-pod query, keyed by (namespace, pod).

    ``faults`` holds the pods whose series in this answer cannot be used (see
    :class:`SeriesFault`); their values, if any, stay in ``by_pod`` but must not be read.
    """

    by_pod: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    no_pod_label: int = 0
    faults: dict[tuple[str, str], SeriesFault] = field(default_factory=dict)
    #: ``ttft_rate`` only: (namespace, pod group) -> age of its recorded buckets, seconds.
    recorded: dict[tuple[str, str], float] = field(default_factory=dict)
    #: ``running`` only: (namespace, counter) -> age of the recorded per-pod rates, seconds.
    throughput_ages: dict[tuple[str, str], float] = field(default_factory=dict)
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

    The metric is the TTFT request rate's histogram representation (``scaler_histogram``),
    else the series' ``__name__`` (KV cache), its ``scaler_metric`` tag (throughput), or the
    query kind. The recorded groups' ages (``scaler_histogram="recorded"``) go to
    :attr:`PodSeries.recorded`, the recorded throughput rates' ages (``scaler_recorded``)
    to :attr:`PodSeries.throughput_ages`. Returns the groups and the details of the series that name
    no group.
    """
    groups: dict[str, PodSeries] = {}
    unattributed: list[str] = []
    named = str(kind)
    recorded = HistogramKind.RECORDED.value
    # One pass over 10^4-10^5 series a cycle: plain dict look-ups, no object per series.
    for labels, value in answer.series:
        gid = labels.get(SELECTOR_LABEL)
        if gid is None:
            unattributed.append(f"a series has no {SELECTOR_LABEL} label: {labels}")
            continue
        grp = groups.get(gid)
        if grp is None:
            grp = groups[gid] = PodSeries()
        histogram = labels.get(HISTOGRAM_LABEL)
        if histogram == recorded:
            group = (labels.get("namespace", ""), labels.get(POD_GROUP_LABEL, ""))
            # two ages for one group (two rule evaluators): the older one is the one to trust
            grp.recorded[group] = max(value, grp.recorded.get(group, value))
            continue
        pod = labels.get("pod")
        if not pod:
            counter = labels.get(RECORDED_LABEL)
            if counter is None:
                grp.no_pod_label += 1
            else:  # two ages for one namespace (two rule evaluators): trust the older
                at = (labels.get("namespace", ""), counter)
                grp.throughput_ages[at] = max(value, grp.throughput_ages.get(at, value))
            continue
        # An empty namespace means the series has no namespace label; the source
        # then matches it on the target's namespace (the selector already scoped it).
        metric = histogram or labels.get("__name__") or labels.get(METRIC_LABEL) or named
        key = (labels.get("namespace", ""), pod)
        slot = grp.by_pod.get(key)
        if slot is None:
            grp.by_pod[key] = {metric: value}
        elif metric in slot:
            grp.faults.setdefault(
                key, _duplicate(f"duplicate series for {metric} of pod {pod}: {labels}")
            )
        else:
            slot[metric] = value
    for bad in answer.bad:
        gid = bad.labels.get(SELECTOR_LABEL)
        if gid is None:
            unattributed.append(bad.detail)
            continue
        grp = groups.setdefault(gid, PodSeries())
        if bad.labels.get(HISTOGRAM_LABEL) == HistogramKind.RECORDED:
            continue  # an unreadable age: that group is not known fresh, read raw instead
        pod = bad.labels.get("pod")
        if not pod:
            if RECORDED_LABEL not in bad.labels:  # an unreadable age: read raw instead
                grp.no_pod_label += 1
            continue
        key = (bad.labels.get("namespace", ""), pod)
        grp.faults.setdefault(key, SeriesFault(SignalStatus.BAD_RESPONSE, bad.detail))
    return groups, unattributed


@dataclass(slots=True)
class TtftSeries:
    """A latency histogram's buckets answer (``ttft_buckets``, ``itl_buckets``), split.

    Attributes:
        buckets: target key -> ``le`` -> bucket rate (classic histograms, raw).
        counts: target key -> ``le`` -> how many histogram series have that bound (the
            ``scaler_layout`` series beside the rates; fewer than at ``+Inf``: mixed layouts).
        native: target key -> :class:`~scaler.sources.promql.NativePart` -> value.
        groups: (namespace, pod group) -> ``le`` -> bucket rate (the recording rule).
        faults: target key -> why its series cannot be used (a duplicate ``le``, a malformed
            series...): that target only takes the fault's status.
        group_faults: (namespace, pod group) -> why its recorded buckets cannot be used: the
            targets that read that group take the fault's status.
    """

    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    counts: dict[str, dict[float, float]] = field(default_factory=dict)
    native: dict[str, dict[NativePart, float]] = field(default_factory=dict)
    groups: dict[tuple[str, str], dict[float, float]] = field(default_factory=dict)
    faults: dict[str, SeriesFault] = field(default_factory=dict)
    group_faults: dict[tuple[str, str], SeriesFault] = field(default_factory=dict)


def _le(labels: Mapping[str, str], seen: dict[str | None, float | None]) -> float | None:
    """The bucket's upper bound, or None when the ``le`` label is missing or not a number.

    ``seen`` keeps each ``le`` string's bound: an answer of 23,000 buckets has a few dozen
    distinct ones, parsed once each."""
    raw = labels.get("le")
    if raw in seen:
        return seen[raw]
    try:
        bound = parse_sample_value(raw)
    except ValueError:
        bound = math.nan
    le = None if math.isnan(bound) else bound
    seen[raw] = le
    return le


def _native_part(value: str) -> NativePart | None:
    try:
        return NativePart(value)
    except ValueError:
        return None


def split_ttft(answer: Answer) -> tuple[TtftSeries, list[str]]:
    """Split a histogram's buckets answer (``ttft_buckets``, ``itl_buckets``) per target and
    per recorded group.

    Returns:
        The split series, and the details of the series that name neither a target nor a
        recorded pod group (left out). Never raises: a duplicated or malformed series is a
        fault of its target or group only.
    """
    out = TtftSeries()
    parts: dict[tuple[str, bool, str], dict[float, float]] = {}
    unattributed: list[str] = []
    bounds: dict[str | None, float | None] = {}
    for labels, value in answer.series:
        key = labels.get(TARGET_LABEL)
        if key is None:
            if POD_GROUP_LABEL not in labels:
                unattributed.append(
                    f"a series has neither {TARGET_LABEL} nor {POD_GROUP_LABEL}: {labels}"
                )
                continue
            group = (labels.get("namespace", ""), labels[POD_GROUP_LABEL])
            le = _le(labels, bounds)
            slot = out.groups.setdefault(group, {})
            if le is None:
                out.group_faults.setdefault(
                    group, _malformed(f"a recorded bucket has no valid le label: {labels}")
                )
            elif le in slot:
                out.group_faults.setdefault(
                    group, _duplicate(f"duplicate recorded bucket {labels}")
                )
            else:
                slot[le] = value
            continue
        part = labels.get(NATIVE_PART_LABEL)
        if part is not None:
            native = out.native.setdefault(key, {})
            name = _native_part(part)
            if name is None:
                out.faults.setdefault(key, _malformed(f"unknown {NATIVE_PART_LABEL} in {labels}"))
            elif name in native:
                out.faults.setdefault(key, _duplicate(f"duplicate {part} series: {labels}"))
            else:
                native[name] = value
            continue
        # each name of the histogram is its own part (scaler_name: an older one), added up below
        named = (key, LAYOUT_LABEL in labels, labels.get(NAME_LABEL, ""))
        buckets = parts.setdefault(named, {})
        le = _le(labels, bounds)
        if le is None:
            out.faults.setdefault(key, _malformed(f"a bucket has no valid le label: {labels}"))
        elif le in buckets:
            out.faults.setdefault(key, _duplicate(f"duplicate bucket le={labels['le']}: {labels}"))
        else:
            buckets[le] = value
    for (key, layout, _name), rates in sorted(parts.items()):
        total = (out.counts if layout else out.buckets).setdefault(key, {})
        for le, value in rates.items():
            total[le] = total.get(le, 0.0) + value
    for bad in answer.bad:
        key = bad.labels.get(TARGET_LABEL)
        if key is not None:
            out.faults.setdefault(key, SeriesFault(SignalStatus.BAD_RESPONSE, bad.detail))
        elif POD_GROUP_LABEL in bad.labels:
            group = (bad.labels.get("namespace", ""), bad.labels[POD_GROUP_LABEL])
            out.group_faults.setdefault(group, SeriesFault(SignalStatus.BAD_RESPONSE, bad.detail))
        else:
            unattributed.append(bad.detail)
    return out, unattributed


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
        buckets: a histogram's buckets query -> its answer split per target and recorded
            group (its faults included); a query not sent or failed is not in it.
        unattributed: query -> the series that name no group or target (left out).
    """

    answers: dict[QueryKind, Answer]
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = field(default_factory=dict)
    buckets: dict[QueryKind, TtftSeries] = field(default_factory=dict)
    unattributed: dict[QueryKind, Unattributed] = field(default_factory=dict)

    @property
    def ttft(self) -> TtftSeries | None:
        """The ``ttft_buckets`` answer, split (None when it was not sent or failed)."""
        return self.buckets.get(QueryKind.TTFT_BUCKETS)


def _unattributed(lost: list[str]) -> Unattributed:
    return Unattributed(len(lost), short_detail(lost[0]))


def split_answers(answers: Mapping[QueryKind, Answer]) -> SplitAnswers:
    """Split one cycle's answers: per-pod ones per selector group, TTFT per target.

    Pure: ``answers`` is left as it is. A duplicated or malformed series is a fault of its
    pod, target or recorded group only (see the module docstring); no answer is failed as a
    whole here.
    """
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = {}
    unattributed: dict[QueryKind, Unattributed] = {}
    for kind, ans in answers.items():
        if not (kind.per_pod and ans.outcome.ok):
            continue
        pod_groups[kind], lost = _split_per_pod(ans, kind)
        if lost:
            unattributed[kind] = _unattributed(lost)
    split = SplitAnswers(dict(answers), pod_groups, unattributed=unattributed)
    for kind, ans in answers.items():
        if not kind.per_pod:
            split = with_ttft(split, ans, kind)
    return split


def merge_splits(parts: Sequence[SplitAnswers]) -> SplitAnswers:
    """One :class:`SplitAnswers` of answers split one by one as each came in
    (:func:`split_answers`, :func:`with_ttft`): their answers, per-pod groups and left-out
    series together, and the TTFT split of the one that has it."""
    answers: dict[QueryKind, Answer] = {}
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = {}
    unattributed: dict[QueryKind, Unattributed] = {}
    buckets: dict[QueryKind, TtftSeries] = {}
    for part in parts:
        answers.update(part.answers)
        pod_groups.update(part.pod_groups)
        unattributed.update(part.unattributed)
        buckets.update(part.buckets)
    return SplitAnswers(answers, pod_groups, buckets, unattributed)


def with_ttft(
    split: SplitAnswers, answer: Answer, kind: QueryKind = QueryKind.TTFT_BUCKETS
) -> SplitAnswers:
    """``split`` with a histogram's second-round answer (``kind``: ``ttft_buckets`` unless
    said) added (and split)."""
    answers = {**split.answers, kind: answer}
    unattributed = dict(split.unattributed)
    buckets = {k: v for k, v in split.buckets.items() if k is not kind}
    if answer.outcome.ok:
        buckets[kind], lost = split_ttft(answer)
        if lost:
            unattributed[kind] = _unattributed(lost)
    return SplitAnswers(answers, split.pod_groups, buckets, unattributed)


def recorded_throughput_namespaces(
    running: PodSeries | None, namespaces: Sequence[str], rate_window_seconds: float
) -> list[str]:
    """The namespaces whose pods' throughput the recording rules hold, fresh: every counter
    of :data:`~scaler.sources.promql.THROUGHPUT_METRICS` recorded at most one rate window
    ago (the ages the ``running`` answer carries). Others are read raw."""
    if running is None or not running.throughput_ages:
        return []
    ages = running.throughput_ages
    return [
        ns
        for ns in namespaces
        if all(ages.get((ns, c), math.inf) <= rate_window_seconds for c in THROUGHPUT_METRICS)
    ]
