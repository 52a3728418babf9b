"""Splitting one cycle's answers back per selector group and per target (pure, no I/O).

Every sub-expression of a cycle's query is tagged (:mod:`scaler.sources.promql`): per-pod
series with their selector group, TTFT series with their target. :func:`split_answers` undoes
the tagging; an answer whose tags do not match the query sent becomes a ``bad_response``.
Shared by the live source and the backtest's replay of history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scaler.sources.prometheus.answers import Answer, BadResponse, failed_answer
from scaler.sources.promql import SELECTOR_LABEL, TARGET_LABEL, QueryKind

__all__ = ["PodSeries", "SplitAnswers", "split_answers"]


@dataclass(slots=True)
class PodSeries:
    """Series of one selector group in one per-pod query, keyed by (namespace, pod)."""

    by_pod: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    no_pod_label: int = 0
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
        pod = labels.get("pod")
        if not pod:
            grp.no_pod_label += 1
            continue
        # An empty namespace means the series has no namespace label; the source
        # then matches it on the target's namespace (the selector already scoped it).
        metric = labels.get("__name__", str(kind))
        slot = grp.by_pod.setdefault((labels.get("namespace", ""), pod), {})
        if metric in slot:
            raise BadResponse(f"duplicate series for {labels}")
        slot[metric] = value
    return groups


def _split_per_target(answer: Answer) -> dict[str, float]:
    """Map a target-level answer to target key -> value.

    Raises:
        BadResponse: a series lacks the target tag or a target appears twice.
    """
    out: dict[str, float] = {}
    for labels, value in answer.series:
        key = labels.get(TARGET_LABEL)
        if key is None:
            raise BadResponse(f"a series has no {TARGET_LABEL} label: {labels}")
        if key in out:
            raise BadResponse(f"duplicate series for target {key}")
        out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class SplitAnswers:
    """One cycle's answers, split.

    Attributes:
        answers: query -> answer, with every answer whose shape did not match its query
            replaced by a ``bad_response`` one.
        pod_groups: per-pod query -> selector group -> its series.
        target_series: TTFT query -> target key -> value.
    """

    answers: dict[QueryKind, Answer]
    pod_groups: dict[QueryKind, dict[str, PodSeries]] = field(default_factory=dict)
    target_series: dict[QueryKind, dict[str, float]] = field(default_factory=dict)


def split_answers(answers: Mapping[QueryKind, Answer]) -> SplitAnswers:
    """Split one cycle's answers: per-pod ones per selector group, TTFT ones per target.

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
    target_series: dict[QueryKind, dict[str, float]] = {}
    for kind in (QueryKind.TTFT_QUANTILE, QueryKind.TTFT_RATE):
        t_ans = checked.get(kind)
        if t_ans is None or not t_ans.outcome.ok:
            continue
        try:
            target_series[kind] = _split_per_target(t_ans)
        except BadResponse as err:
            checked[kind] = failed_answer(t_ans, err)
    return SplitAnswers(checked, pod_groups, target_series)
