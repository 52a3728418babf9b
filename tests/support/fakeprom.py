"""Helpers for the Prometheus source tests: a fake Prometheus HTTP API on loopback.

The fake is a real aiohttp server speaking the ``/api/v1/query`` protocol (POST form body).
It picks a canned answer per query by the metric name in the ``query`` field, and tags the
series the way the source's ``label_replace`` would (``scaler_selector`` / ``scaler_target``
taken from the query, ``scaler_histogram="classic"`` on the TTFT request rates), so case
inputs can be written in the cases' ``R[pod-0:"3"]`` shorthand. :class:`Ttft` stands for a
TTFT histogram on every scraped pod when a test only cares about the quantile it yields.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from scaler.config.policy import TargetPolicy, WorkloadRef
from scaler.core.observation import PodInfo, WorkloadSnapshot
from scaler.sources.prometheus import PrometheusSource
from scaler.sources.prometheus.backend import NATIVE_HISTOGRAM_PROBE
from scaler.sources.promql import (
    GENERATION_TOKENS_METRIC,
    HISTOGRAM_LABEL,
    METRIC_LABEL,
    POD_GROUP_LABEL,
    PROMPT_TOKENS_METRIC,
    REQUESTS_METRIC,
    SELECTOR_LABEL,
    TARGET_LABEL,
    HistogramKind,
    QueryKind,
    pod_group,
)
from scaler.sources.quantile import bucket_quantile

TS = 1718000000

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
#: The real-world cases, each beside the tests that check it (``tests/cases/NN-name.md``).
CASES = Path(__file__).resolve().parents[1] / "cases"


def case_file(name: str) -> Path:
    """Path of the case a test implements, ``tests/cases/<name>`` (documentation: never read,
    never skipped; the case's input is written out in the test itself, and
    ``tests/cases/test_index.py`` checks that the case names the test)."""
    return CASES / name


def sample(pod: str | None, value: str, **labels: str) -> dict[str, Any]:
    """``pod-0:"3"`` of the cases: one vector sample (no pod label when ``pod`` is None)."""
    metric = dict(labels)
    if pod is not None:
        metric["pod"] = pod
    return {"metric": metric, "value": [TS, value]}


def R(*series: dict[str, Any]) -> dict[str, Any]:
    """``R[...]``: a successful vector answer."""
    return {"status": "success", "data": {"resultType": "vector", "result": list(series)}}


def per_pod(values: Mapping[str, str], **labels: str) -> dict[str, Any]:
    """An answer with one sample per pod."""
    return R(*(sample(p, v, **labels) for p, v in values.items()))


def kv(values: Mapping[str, str], name: str = "vllm:kv_cache_usage_perc") -> dict[str, Any]:
    """A KV-cache answer: the query keeps ``__name__``."""
    return per_pod(values, __name__=name)


def rates(values: Mapping[str, tuple[str, str, str] | str]) -> dict[str, Any]:
    """A throughput answer: per pod, the rates of finished requests, prompt tokens and
    generated tokens (``"0"`` for all three: a pod that produced no token)."""
    series = []
    for pod, triple in values.items():
        per = (triple, triple, triple) if isinstance(triple, str) else triple
        for metric, value in zip(
            (REQUESTS_METRIC, PROMPT_TOKENS_METRIC, GENERATION_TOKENS_METRIC), per, strict=True
        ):
            series.append(sample(pod, value, **{METRIC_LABEL: metric}))
    return R(*series)


@dataclass
class Reply:
    """A canned HTTP answer: JSON (dict) or raw text, with a status code."""

    body: dict[str, Any] | str
    status: int = 200
    stall: bool = False  # never answer (until the test ends)


@dataclass
class Ttft:
    """A TTFT histogram on every scraped pod, for tests that only care about its quantile.

    Round one (``ttft_rate``) answers ``rate`` first tokens per second spread evenly over the
    pods of the ``running`` answer; round two (``ttft_buckets``) answers bucket rates whose
    0.95 quantile is exactly ``p95`` (``le=p95``: 0.95 x rate, ``+Inf``: rate), or, for
    ``"NaN"``, a ``+Inf`` bucket alone (a broken histogram: NaN while requests flow).
    """

    p95: str
    rate: str


def histograms(h: Histograms) -> dict[str, Histograms]:
    """Both TTFT rounds answered from the pods' histograms."""
    return {"ttft_rate": h, "ttft_buckets": h}


def ttft_answers(p95: str, rate: str = "4") -> dict[str, Ttft]:
    """Both TTFT rounds answered by one :class:`Ttft` (``ttft_answers("NaN", "0")``: idle)."""
    answer = Ttft(p95, rate)
    return {"ttft_rate": answer, "ttft_buckets": answer}


def query_timed_out() -> Reply:
    """Prometheus' answer to a query it gave up evaluating (HTTP 503, ``errorType:
    timeout``), as case 05 quotes it."""
    return Reply(
        {
            "status": "error",
            "errorType": "timeout",
            "error": "query timed out in expression evaluation",
        },
        status=503,
    )


#: An answer given for each pod of a fleet: one value for every pod (``"2"``), a value per
#: pod (``{"pod-0": "3"}``), or a whole answer as it is (``R(sample("pod-0", "NaN"))``, ``R()``).
PerPod = str | Mapping[str, str] | dict[str, Any]


def _per_pod_answer(
    given: PerPod, names: list[str], answer: Callable[[Mapping[str, str]], dict[str, Any]]
) -> dict[str, Any]:
    if isinstance(given, str):
        return answer(dict.fromkeys(names, given))
    if "status" in given:  # a whole answer (R(...), a Reply's body)
        return dict(given)
    return answer(given)


def fleet(
    pod_names: Iterable[str],
    *,
    waiting: PerPod,
    kv_cache: PerPod,
    running: PerPod = "1",
    ttft: tuple[str, str] | Mapping[str, Any] = ("NaN", "0"),
    kv_metric: str = "vllm:kv_cache_usage_perc",
) -> dict[str, Any]:
    """The answers of scraped vLLM pods ``pod_names``: ``waiting`` and ``running`` requests,
    KV cache usage ``kv_cache`` (a 0-1 ratio, under the gauge's name ``kv_metric``: the
    older ``vllm:gpu_cache_usage_perc`` of a vLLM before 0.9.2; :data:`PerPod` each), and the
    TTFT rounds:
    ``(p95, rate)`` for :func:`ttft_answers` (default ``("NaN", "0")``: idle), or the TTFT
    queries' answers as they are (``{"ttft_rate": Ttft(...), "ttft_buckets": Reply(...)}``,
    :func:`histograms`, ``{}`` for none)."""
    names = list(pod_names)
    rounds = ttft_answers(*ttft) if isinstance(ttft, tuple) else dict(ttft)
    return {
        "waiting": _per_pod_answer(waiting, names, per_pod),
        "running": _per_pod_answer(running, names, per_pod),
        "kv_cache": _per_pod_answer(kv_cache, names, lambda v: kv(v, name=kv_metric)),
        **rounds,
    }


def idle_without_ttft(pod_names: Iterable[str]) -> dict[str, Any]:
    """Answers of idle pods whose queue and KV-cache series exist and that have no TTFT
    histogram (the TTFT queries answer no series: ``absent`` once the pods have been ready
    a rate window, ``warming_up`` before)."""
    return fleet(pod_names, waiting="0", running="0", kv_cache="0", ttft={})


def uniform_answers(
    pod_names: Iterable[str],
    *,
    waiting: str,
    running: str,
    kv_cache: str,
    ttft_p95: str,
    ttft_rate: str,
) -> dict[str, Any]:
    """Answers of pods that all read the same: ``waiting`` and ``running`` requests each, KV
    cache usage ``kv_cache`` (a 0-1 ratio) each, and a TTFT p95 of ``ttft_p95`` seconds at
    ``ttft_rate`` first tokens per second over them all (:func:`ttft_answers`; ``"NaN"`` at
    ``"0"``: idle)."""
    return fleet(
        pod_names, waiting=waiting, running=running, kv_cache=kv_cache, ttft=(ttft_p95, ttft_rate)
    )


def _fmt(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _promql_unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), text)


_CLASSIC_PART = re.compile(
    r"(?P<agg>sum|count) by \(le\) \(\(?rate\(vllm:[\w:]+?_bucket\{(?P<sel>[^}]*)\}\[[^\]]*\]\)"
    r'.*?, "scaler_target", "(?P<key>(?:[^"\\]|\\.)*)", "", ""\)(?P<layout>, "scaler_layout")?'
)
_NATIVE_PART = re.compile(
    r"histogram_quantile\((?P<q>[0-9.e+-]+), sum\(rate\(vllm:time_to_first_token_seconds"
    r'\{(?P<sel>[^}]*)\}\[[^\]]*\]\)\)\), "scaler_target", "(?P<key>(?:[^"\\]|\\.)*)"'
)
_RECORDED_PART = re.compile(
    r'_bucket:rate\w+\{namespace=~"(?P<ns>(?:[^"\\]|\\.)*)",'
    r'scaler_pod_group=~"(?P<groups>(?:[^"\\]|\\.)*)"\}'
)
_MATCHER = re.compile(r'(\w+)(=~|=)"((?:[^"\\]|\\.)*)"')


def _selects(selector: str, labels: Mapping[str, str]) -> bool:
    """Whether a PromQL selector body (``=`` and ``=~`` matchers) picks ``labels``."""
    for name, op, raw in _MATCHER.findall(selector):
        value, got = _promql_unescape(raw), labels.get(name, "")
        if (op == "=" and got != value) or (op == "=~" and not re.fullmatch(value, got)):
            return False
    return True


@dataclass
class Histograms:
    """Each pod's TTFT histogram, answered as Prometheus answers both TTFT rounds.

    ``buckets``: pod -> {le: rate of that cumulative bucket over the window}; the pod's
    request rate is its ``+Inf`` rate. Round one answers every pod's request rate, tagged
    ``classic`` (``native``: ``native``), and with ``recorded`` the age (5 s) of each pod
    group's recorded buckets. Round two sums the buckets of exactly the pods each
    sub-expression's selector picks (its pod alternation, matched as Prometheus matches a
    regex), and of the pods of each recorded group it names; for a native histogram it
    answers, as Prometheus would, the quantile (with the classic interpolation), the count
    and the fraction of observations up to the quantile. ``edit``, when set, changes each
    round's series before they are sent (called with ``"ttft_rate"`` or ``"ttft_buckets"``
    and the answer's ``result`` list): a broken series for the blast-radius tests.
    """

    buckets: dict[str, dict[str, float]]
    native: bool = False
    recorded: bool = False
    namespace: str = "llm"
    edit: Callable[[str, list[dict[str, Any]]], None] | None = None

    def _edited(self, name: str, answer: dict[str, Any]) -> dict[str, Any]:
        if self.edit is not None:
            self.edit(name, answer["data"]["result"])
        return answer

    def _labels(self, pod: str) -> dict[str, str]:
        return {"namespace": self.namespace, "pod": pod}

    def first_round(self, gid: str) -> dict[str, Any]:
        kind = "native" if self.native else "classic"
        out = [
            sample(pod, _fmt(b["+Inf"]), namespace=self.namespace, scaler_selector=gid,
                   scaler_histogram=kind)
            for pod, b in self.buckets.items()
        ]  # fmt: skip
        if self.recorded and not self.native:
            for group in sorted({pod_group(p) for p in self.buckets}):
                labels = {"namespace": self.namespace, "scaler_pod_group": group}
                out.append(
                    sample(None, "5", **labels, scaler_selector=gid, scaler_histogram="recorded")
                )
        return self._edited("ttft_rate", R(*out))

    def _sum(self, pods: list[str]) -> dict[str, float]:
        total: dict[str, float] = {}
        for pod in pods:
            for le, rate in self.buckets[pod].items():
                total[le] = total.get(le, 0.0) + rate
        return total

    def second_round(self, query: str) -> dict[str, Any]:
        out: list[dict[str, Any]] = []
        for m in _CLASSIC_PART.finditer(query):
            picked = [p for p in self.buckets if _selects(m["sel"], self._labels(p))]
            key = _promql_unescape(m["key"])
            if m["agg"] == "count":  # how many of the picked histograms have each bound
                counts: dict[str, int] = {}
                for pod in picked:
                    for le in self.buckets[pod]:
                        counts[le] = counts.get(le, 0) + 1
                for le, n in counts.items():
                    out.append(
                        sample(None, str(n), scaler_target=key, le=le, scaler_layout="series")
                    )
                continue
            for le, rate in self._sum(picked).items():
                out.append(sample(None, _fmt(rate), scaler_target=key, le=le))
        for m in _NATIVE_PART.finditer(query):
            picked = [p for p in self.buckets if _selects(m["sel"], self._labels(p))]
            if not picked:
                continue
            total = self._sum(picked)
            q = float(m["q"])
            est = bucket_quantile(q, [(float(le), r) for le, r in total.items()])
            fraction = 1 - est.above_top if est.lower_bound else q
            key = _promql_unescape(m["key"])
            for part, value in (
                ("quantile", est.value),
                ("count", total["+Inf"]),
                ("fraction", fraction),
            ):
                out.append(sample(None, _fmt(value), scaler_target=key, scaler_native=part))
        for m in _RECORDED_PART.finditer(query):
            groups = set(_promql_unescape(m["groups"]).replace("\\", "").split("|"))
            for g in sorted(groups):
                pods = [p for p in self.buckets if pod_group(p) == g]
                for le, rate in self._sum(pods).items():
                    out.append(
                        sample(None, _fmt(rate), namespace=self.namespace, scaler_pod_group=g,
                               le=le)
                    )  # fmt: skip
        return self._edited("ttft_buckets", R(*out))


NATIVE_PROBE = NATIVE_HISTOGRAM_PROBE

_KIND_BY_METRIC: list[tuple[str, QueryKind]] = [
    ("time_to_first_token_seconds_count", QueryKind.TTFT_RATE),
    ("time_to_first_token_seconds", QueryKind.TTFT_BUCKETS),
    ("num_requests_waiting", QueryKind.WAITING),
    ("num_requests_running", QueryKind.RUNNING),
    ("kv_cache_usage_perc", QueryKind.KV_CACHE),
    ("generation_tokens_total", QueryKind.THROUGHPUT),
]
_TAG_RE = re.compile(r'"(scaler_selector|scaler_target)", "((?:[^"\\]|\\.)*)"')


def kind_of(query: str) -> QueryKind:
    for needle, kind in _KIND_BY_METRIC:
        if needle in query:
            return kind
    raise AssertionError(f"unexpected query {query!r}")


@dataclass
class FakePrometheus:
    """A fake Prometheus API. Set ``answers[kind]``; unset kinds answer ``R[]``."""

    answers: dict[QueryKind, dict[str, Any] | Reply | Ttft | Histograms] = field(
        default_factory=dict
    )
    requests: list[dict[str, str]] = field(default_factory=list)
    headers: list[Mapping[str, str]] = field(default_factory=list)
    url: str = ""
    release: asyncio.Event = field(default_factory=asyncio.Event)
    #: the start-up probe of the scrape interval (a range vector of running): pod -> the
    #: timestamps of its samples; none by default (the interval stays unknown)
    scrape_times: dict[str, list[float]] = field(default_factory=dict)
    #: times the source asked whether native-histogram functions exist (once per source)
    probes: int = 0
    #: False: answer that probe as VictoriaMetrics does (unknown function)
    native_functions: bool = True
    #: the cycle's queries being answered now, and the most of them at any one time (under
    #: the ``fake_prom`` fixture a stalled query leaves when its client gives up on it)
    in_flight: list[QueryKind] = field(default_factory=list)
    peak_in_flight: list[QueryKind] = field(default_factory=list)

    def set(self, **answers: dict[str, Any] | Reply | Ttft | Histograms) -> None:
        for name, ans in answers.items():
            self.answers[QueryKind(name)] = ans

    def kinds_asked(self) -> list[QueryKind]:
        return [kind_of(r["query"]) for r in self.requests]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        fields = {k: str(v) for k, v in form.items()}
        self.requests.append(fields)
        self.headers.append(dict(request.headers))
        query = fields.get("query", "")
        if query == NATIVE_PROBE:  # the source's one-time question: native histograms known?
            self.requests.pop()  # not one of the cycle's queries
            self.headers.pop()
            self.probes += 1
            if self.native_functions:
                return web.json_response(R())
            error = f'unknown func "histogram_count" in query={query!r}'  # VictoriaMetrics
            return web.json_response(
                {"status": "error", "errorType": "422", "error": error}, status=422
            )
        if query.startswith("count by (") and "vllm:num_requests_running{" in query:
            self.requests.pop()  # the start-up question: every series once per replica?
            self.headers.pop()
            return web.json_response(R())
        if query.startswith("vllm:num_requests_running{") and query.endswith("]"):
            self.requests.pop()  # the start-up probe of the scrape interval
            self.headers.pop()
            return web.json_response(self._matrix())
        kind = kind_of(query)
        self.in_flight.append(kind)
        if len(self.in_flight) > len(self.peak_in_flight):
            self.peak_in_flight = list(self.in_flight)
        try:
            return await self._answer(kind, query)
        finally:  # answered, or cancelled when the client closed the connection
            self.in_flight.remove(kind)

    async def _answer(self, kind: QueryKind, query: str) -> web.StreamResponse:
        reply = self.answers.get(kind, R())
        if isinstance(reply, Ttft):
            reply = self._ttft(reply, kind)
        elif isinstance(reply, Histograms):
            if kind is QueryKind.TTFT_RATE:
                gid = _TAG_RE.search(query)
                reply = reply.first_round(gid.group(2) if gid else "s0")
            else:
                reply = reply.second_round(query)
        if not isinstance(reply, Reply):
            reply = Reply(reply)
        if reply.stall:
            await self.release.wait()
        if isinstance(reply.body, str):
            return web.Response(status=reply.status, text=reply.body)
        body = _tagged(reply.body, query)
        if kind is QueryKind.TTFT_RATE:
            body = _classic(body)
        return web.json_response(body, status=reply.status)

    def _matrix(self) -> dict[str, Any]:
        result = [
            {"metric": {"namespace": "llm", "pod": pod}, "values": [[t, "1"] for t in times]}
            for pod, times in self.scrape_times.items()
        ]
        return {"status": "success", "data": {"resultType": "matrix", "result": result}}

    def _ttft(self, ttft: Ttft, kind: QueryKind) -> dict[str, Any]:
        if kind is QueryKind.TTFT_RATE:
            running = self.answers.get(QueryKind.RUNNING)
            body = running.body if isinstance(running, Reply) else running
            if not isinstance(body, dict):
                return R()
            found = [i["metric"].get("pod") for i in body["data"]["result"]]
            scraped = [p for p in found if p]
            each = repr(float(ttft.rate) / len(scraped)) if scraped else ttft.rate
            return R(*(sample(p, each) for p in scraped))
        if ttft.p95 == "NaN":
            return R(sample(None, ttft.rate, le="+Inf"))
        share = repr(0.95 * float(ttft.rate))
        return R(sample(None, share, le=ttft.p95), sample(None, ttft.rate, le="+Inf"))


def _classic(body: dict[str, Any]) -> dict[str, Any]:
    """Request-rate series without a representation tag are the classic histogram's."""
    data = body.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        return body
    for item in data["result"]:
        metric = item.get("metric") if isinstance(item, dict) else None
        if isinstance(metric, dict):
            metric.setdefault(HISTOGRAM_LABEL, str(HistogramKind.CLASSIC))
    return body


def _tagged(body: dict[str, Any], query: str) -> dict[str, Any]:
    """Add the label_replace tag of the query's first sub-expression to untagged series."""
    m = _TAG_RE.search(query)
    data = body.get("data")
    if m is None or not isinstance(data, dict) or not isinstance(data.get("result"), list):
        return body
    label, value = m.group(1), m.group(2).replace("$$", "$")
    body = json.loads(json.dumps(body))
    for item in body["data"]["result"]:
        metric = item.get("metric") if isinstance(item, dict) else None
        tagged = {SELECTOR_LABEL, TARGET_LABEL, POD_GROUP_LABEL}
        if isinstance(metric, dict) and not tagged & metric.keys():
            metric[label] = value
    return body


@pytest.fixture
async def fake_prom() -> AsyncIterator[FakePrometheus]:
    fake = FakePrometheus()
    app = web.Application()
    app.router.add_post("/api/v1/query", fake.handle)
    # a handler is cancelled when its client closes the connection (a query given up on its
    # timeout), so that ``in_flight`` holds only the queries still awaited
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        fake.release.set()  # let stalled handlers finish so cleanup is quick
        await runner.cleanup()


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def make_source(
    http_client: httpx.AsyncClient, fake_prom: FakePrometheus
) -> Callable[..., PrometheusSource]:
    def make(timeout_seconds: float = 5.0, base_url: str | None = None) -> PrometheusSource:
        return PrometheusSource(
            http_client,
            base_url=base_url or fake_prom.url,
            timeout_seconds=timeout_seconds,
            rate_window_seconds=60,
        )

    return make


def target(name: str = "vllm", namespace: str = "llm", **kwargs: Any) -> TargetPolicy:
    """The cases' default target, ``Deployment llm/vllm``."""
    return TargetPolicy(
        workload=WorkloadRef(
            api_version="apps/v1", kind="Deployment", namespace=namespace, name=name
        ),
        **kwargs,
    )


def snapshot(
    ready: Iterable[str],
    *,
    terminating: Iterable[str] = (),
    not_ready: Iterable[str] = (),
    namespace: str = "llm",
) -> WorkloadSnapshot:
    pods = [PodInfo(p, ready=True, terminating=False, age_seconds=3600) for p in ready]
    pods += [PodInfo(p, ready=True, terminating=True, age_seconds=3600) for p in terminating]
    pods += [PodInfo(p, ready=False, terminating=False, age_seconds=30) for p in not_ready]
    return WorkloadSnapshot(
        namespace=namespace,
        spec_replicas=len(pods),
        status_replicas=len(pods),
        selector="app=vllm",
        resource_version="1",
        pods=tuple(pods),
    )


def pods(n: int) -> list[str]:
    return [f"pod-{i}" for i in range(n)]
