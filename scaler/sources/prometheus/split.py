"""Splitting one cycle's answers back per selector group and per target (pure, no I/O).

Every sub-expression of a cycle's query is tagged (:mod:`scaler.sources.promql`): per-pod
series with their selector group, TTFT series with their target (or, read from the recording
rules, with their namespace and pod group). :func:`split_answers` undoes the tagging; an
answer whose tags do not match the query sent becomes a ``bad_response``. Shared by the live
source and the backtest's replay of history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.sources.prometheus.answers import (
    Answer,
    BadResponse,
    failed_answer,
    parse_sample_value,
)
from scaler.sources.promql import (
    HISTOGRAM_LABEL,
    NATIVE_PART_LABEL,
    POD_GROUP_LABEL,
    SELECTOR_LABEL,
    TARGET_LABEL,
    HistogramKind,
    NativePart,
    QueryKind,
)

__all__ = ["PodSeries", "SplitAnswers", "TtftSeries", "split_answers", "split_ttft", "with_ttft"]


@dataclass(slots=True)
class PodSeries:
    """Series of one selector group in one per-pod query, keyed by (namespace, pod)."""

    by_pod: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    no_pod_label: int = 0
    #: ``ttft_rate`` only: (namespace, pod group) -> age of its recorded buckets, seconds.
    recorded: dict[tuple[str, str], float] = field(default_factory=dict)
    _strays: dict[str, list[str]] | None = None

    @property
    def count(self) -> int:
        return len(self.by_pod) + self.no_pod_label

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


def _split_per_pod(answer: Answer, kind: QueryKind) -> dict[str, PodSeries]:
    """Group a per-pod answer by selector group -> (namespace, pod) -> {metric: value}.

    Raises:
        BadResponse: a series lacks the group tag or is duplicated (the answer does not
            match the query that was sent).
    """
    groups: dict[str, PodSeries] = {}
    for labels, value in answer.series:
        gid = labels.get(SELECTOR_LABEL)
        if gid is None:
            raise BadResponse(f"a series has no {SELECTOR_LABEL} label: {labels}")
        grp = groups.setdefault(gid, PodSeries())
        histogram = labels.get(HISTOGRAM_LABEL)
        if histogram == HistogramKind.RECORDED:
            grp.recorded[(labels.get("namespace", ""), labels.get(POD_GROUP_LABEL, ""))] = value
            continue
        pod = labels.get("pod")
        if not pod:
            grp.no_pod_label += 1
            continue
        # An empty namespace means the series has no namespace label; the source
        # then matches it on the target's namespace (the selector already scoped it).
        # The TTFT request rate is keyed by the histogram's representation, gauges by name.
        metric = histogram or labels.get("__name__", str(kind))
        slot = grp.by_pod.setdefault((labels.get("namespace", ""), pod), {})
        if metric in slot:
            raise BadResponse(f"duplicate series for {labels}")
        slot[metric] = value
    return groups


@dataclass(slots=True)
class TtftSeries:
    """The ``ttft_buckets`` answer, split.

    Attributes:
        buckets: target key -> ``le`` -> bucket rate (classic histograms, raw).
        native: target key -> :class:`~scaler.sources.promql.NativePart` -> value.
        groups: (namespace, pod group) -> ``le`` -> bucket rate (the recording rule).
        broken: target key -> why its series do not match the query (a duplicate ``le``...):
            that target only is ``bad_response``.
    """

    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    native: dict[str, dict[NativePart, float]] = field(default_factory=dict)
    groups: dict[tuple[str, str], dict[float, float]] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)


def _le(labels: dict[str, str]) -> float:
    try:
        return parse_sample_value(labels.get("le"))
    except ValueError:
        raise BadResponse(f"a bucket series has no valid le label: {labels}") from None


def split_ttft(answer: Answer) -> TtftSeries:
    """Split the ``ttft_buckets`` answer per target and per recorded group.

    Raises:
        BadResponse: a series carries no tag of the query (the answer is not this query's).
    """
    out = TtftSeries()
    for labels, value in answer.series:
        key = labels.get(TARGET_LABEL)
        if key is None:
            if POD_GROUP_LABEL not in labels:
                raise BadResponse(f"a series has neither {TARGET_LABEL} nor {POD_GROUP_LABEL}")
            group = (labels.get("namespace", ""), labels[POD_GROUP_LABEL])
            le = _le(labels)
            slot = out.groups.setdefault(group, {})
            if le in slot:
                raise BadResponse(f"duplicate recorded bucket {labels}")
            slot[le] = value
            continue
        part = labels.get(NATIVE_PART_LABEL)
        try:
            if part is not None:
                native = out.native.setdefault(key, {})
                name = NativePart(part)
                if name in native:
                    raise BadResponse(f"duplicate {part} series")
                native[name] = value
                continue
            buckets = out.buckets.setdefault(key, {})
            le = _le(labels)
            if le in buckets:
                raise BadResponse(f"duplicate bucket le={labels.get('le')}")
            buckets[le] = value
        except (BadResponse, ValueError) as err:
            out.broken.setdefault(key, str(err))
    return out


@dataclass(frozen=True, slots=True)
class SplitAnswers:
    """One cycle's answers, split.

    Attributes:
        answers: query -> answer, with every answer whose shape did not match its query
            replaced by a ``bad_response`` one.
        pod_groups: per-pod query -> selector group -> its series.
        ttft: the ``ttft_buckets`` answer split per target (None when it was not sent or
            failed).
    """

    answers: dict[QueryKind, Answer]
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = field(default_factory=dict)
    ttft: TtftSeries | None = None


def split_answers(answers: Mapping[QueryKind, Answer]) -> SplitAnswers:
    """Split one cycle's answers: per-pod ones per selector group, TTFT per target.

    Pure: ``answers`` is left as it is; an answer whose shape does not match its query is
    ``bad_response`` in the result's ``answers``.
    """
    checked = dict(answers)
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = {}
    for kind, ans in answers.items():
        if not (kind.per_pod and ans.outcome.ok):
            continue
        try:
            pod_groups[kind] = _split_per_pod(ans, kind)
        except BadResponse as err:
            checked[kind] = failed_answer(ans, err)
    split = SplitAnswers(checked, pod_groups)
    t_ans = checked.get(QueryKind.TTFT_BUCKETS)
    return split if t_ans is None else with_ttft(split, t_ans)


def with_ttft(split: SplitAnswers, answer: Answer) -> SplitAnswers:
    """``split`` with the second round's ``ttft_buckets`` answer added (and split)."""
    answers = {**split.answers, QueryKind.TTFT_BUCKETS: answer}
    ttft: TtftSeries | None = None
    if answer.outcome.ok:
        try:
            ttft = split_ttft(answer)
        except BadResponse as err:
            answers[QueryKind.TTFT_BUCKETS] = failed_answer(answer, err)
    return SplitAnswers(answers, split.pod_groups, ttft)
