"""PrometheusSource against a REAL Prometheus scraping fake vLLM pods.

Fake pods serve ``/metrics`` in vLLM's exposition format (``engine`` and ``model_name``
labels, ``vllm:`` names, the V1 TTFT buckets). Prometheus (Debian's 2.42, then Prometheus 3
built from its module: every test runs on both) finds them
through a file-SD file that attaches ``namespace`` and ``pod`` labels, scrapes every second,
and the source reads them with the exact PromQL it uses in production.

Prometheus 2.42 applies discovered targets only every 5 s, so one server (and fleet) serves
the whole module; the test that edits the SD file runs last and restores it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from scaler.config.policy import TargetPolicy, WorkloadRef
from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sim.prometheus_server import PrometheusServer, wait_for_series, write_file_sd
from scaler.sources.prometheus import DropReason, PrometheusSource, check_configured_queries
from tests.support.fakeprom import snapshot
from tests.support.prometheus_versions import PROMETHEUS_VERSIONS, prometheus_binary

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5,
                7.5, 10, 20, 40, 80, 160, 640, 2560]  # fmt: skip
RATE_WINDOW = 4.0
Q, KV, TTFT = SignalName.QUEUE_DEPTH, SignalName.KV_CACHE_USAGE, SignalName.TTFT_P95


@dataclass
class FakeVllmPod:
    """One vLLM pod's /metrics. Per engine: waiting, running and KV gauges.

    ``ttft_per_scrape`` observations of 0.3 s are added at each scrape (0 = idle).
    """

    name: str
    waiting: dict[str, float]
    kv: dict[str, float] = field(default_factory=dict)
    kv_name: str | None = "vllm:kv_cache_usage_perc"
    ttft_per_scrape: int = 0
    ttft_count: int = 5
    port: int = 0

    def exposition(self) -> str:
        self.ttft_count += self.ttft_per_scrape
        lines = []
        for metric, values in (
            ("vllm:num_requests_waiting", self.waiting),
            ("vllm:num_requests_running", dict.fromkeys(self.waiting, 1.0)),
            (self.kv_name, self.kv),
        ):
            if metric is None:
                continue
            lines += [f"# HELP {metric} gauge of the fake pod", f"# TYPE {metric} gauge"]
            lines += [f'{metric}{{engine="{e}",model_name="m"}} {v}' for e, v in values.items()]
        h = "vllm:time_to_first_token_seconds"
        lines += [
            f"# HELP {h} Histogram of time to first token in seconds.",
            f"# TYPE {h} histogram",
        ]
        for le in [*TTFT_BUCKETS, math.inf]:
            count = self.ttft_count if le >= 0.3 else 0
            le_s = "+Inf" if le == math.inf else repr(float(le))
            lines.append(f'{h}_bucket{{engine="0",le="{le_s}",model_name="m"}} {count}.0')
        lines.append(f'{h}_count{{engine="0",model_name="m"}} {self.ttft_count}.0')
        lines.append(f'{h}_sum{{engine="0",model_name="m"}} {0.3 * self.ttft_count}')
        return "\n".join(lines) + "\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fleet() -> AsyncIterator[list[FakeVllmPod]]:
    pods = [
        # target vllm-a: two engines on pod 0; busy TTFT
        FakeVllmPod("vllm-a-0", {"0": 3, "1": 2}, kv={"0": 0.5, "1": 0.25}, ttft_per_scrape=10),
        FakeVllmPod("vllm-a-1", {"0": 4}, kv={"0": 0.1}, ttft_per_scrape=10),
        # terminating pod of vllm-a, still scraped: its series must be dropped
        FakeVllmPod("vllm-a-2", {"0": 30}, kv={"0": 0.99}, ttft_per_scrape=10),
        # target vllm-b: an older vLLM with the old KV name, idle
        FakeVllmPod("vllm-b-0", {"0": 0}, kv={"0": 0.3}, kv_name="vllm:gpu_cache_usage_perc"),
        # target vllm-c: no KV gauge at all
        FakeVllmPod("vllm-c-0", {"0": 1}, kv_name=None),
    ]
    runners = []
    for pod in pods:

        async def metrics(_: web.Request, pod: FakeVllmPod = pod) -> web.Response:
            return web.Response(text=pod.exposition(), content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        pod.port = runner.addresses[0][1]
        runners.append(runner)
    try:
        yield pods
    finally:
        for runner in runners:
            await runner.cleanup()


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=PROMETHEUS_VERSIONS)
async def prometheus(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fleet: list[FakeVllmPod],
) -> AsyncIterator[PrometheusServer]:
    binary = prometheus_binary(request.param)
    tmp_path = tmp_path_factory.mktemp("prometheus")
    sd = tmp_path / "sd" / "targets.json"
    write_file_sd(sd, sd_groups(fleet))
    server = PrometheusServer(
        tmp_path / "prom", scrape_interval_seconds=1.0, sd_file=sd, binary=binary
    )
    async with server:
        try:
            # rate() needs two samples of every pod in the window
            await wait_for_series(
                server.url,
                f"rate(vllm:time_to_first_token_seconds_count[{RATE_WINDOW:g}s])",
                timeout=30,
                min_series=len(fleet),
            )
        except TimeoutError:
            pytest.fail("Prometheus never scraped the fleet; log:\n" + server.log_tail())
        yield server


def sd_groups(pods: list[FakeVllmPod]) -> list[tuple[list[str], dict[str, str]]]:
    return [([f"127.0.0.1:{p.port}"], {"namespace": "llm", "pod": p.name}) for p in pods]


def sts(name: str) -> TargetPolicy:
    return TargetPolicy(
        workload=WorkloadRef(api_version="apps/v1", kind="StatefulSet", namespace="llm", name=name)
    )


async def test_real_prometheus_readings_and_constant_query_count(
    prometheus: PrometheusServer,
) -> None:
    sent: list[str] = []

    async def count(request: httpx.Request) -> None:
        sent.append(request.url.path)

    a, b, c, d, e = (sts(n) for n in ("vllm-a", "vllm-b", "vllm-c", "vllm-d", "vllm-e"))
    snaps = {
        a.key: snapshot(["vllm-a-0", "vllm-a-1"], terminating=["vllm-a-2"]),
        b.key: snapshot(["vllm-b-0"]),
        c.key: snapshot(["vllm-c-0"]),
        d.key: snapshot(["vllm-d-0"]),  # ready in Kubernetes, never scraped
        e.key: snapshot([]),
    }
    async with httpx.AsyncClient(event_hooks={"request": [count]}) as client:
        source = PrometheusSource(
            client, base_url=prometheus.url, timeout_seconds=5, rate_window_seconds=RATE_WINDOW
        )
        one = await source.read([a], snaps)
        sent_for_one = len(sent) - 1  # the first read asks once whether native histograms exist
        assert source.native_histograms is True
        sent.clear()
        five = await source.read([a, b, c, d, e], snaps)
        sent_for_five = len(sent)

    log = prometheus.log_tail()
    assert sent_for_one == sent_for_five == 6, log
    assert set(sent) == {"/api/v1/query"}
    assert all(o.ok for o in five.queries.values()), five.queries

    for result in (one, five):
        ra = result.readings(a.key)
        assert ra[Q].status is SignalStatus.OK, ra[Q]
        assert ra[Q].value == 9.0  # (3 + 2) + 4; the terminating pod's 30 is dropped
        assert ra[KV].status is SignalStatus.OK
        assert math.isclose(ra[KV].value or 0, 0.6)  # max over engines 0.5, plus 0.1
        assert ra[KV].source_metric == "vllm:kv_cache_usage_perc"
        assert ra[TTFT].status is SignalStatus.OK, ra[TTFT]
        # all observations in the (0.25, 0.5] bucket: 0.25 + 0.25 * 0.95
        assert math.isclose(ra[TTFT].value or 0, 0.4875, rel_tol=1e-9)
        dropped = {(x.pod, x.reason) for x in result.targets[a.key].dropped}
        assert dropped == {("vllm-a-2", DropReason.TERMINATING)}

    rb = five.readings(b.key)
    assert rb[Q].status is SignalStatus.OK and rb[Q].value == 0.0
    assert rb[KV].status is SignalStatus.OK and rb[KV].value == 0.3
    assert five.targets[b.key].kv_metric == "vllm:gpu_cache_usage_perc"
    assert rb[TTFT].status is SignalStatus.IDLE, rb[TTFT]

    rc = five.readings(c.key)
    assert rc[Q].value == 1.0
    assert rc[KV].status is SignalStatus.ABSENT

    for key in (d.key,):
        assert {r.status for r in five.readings(key).values()} == {SignalStatus.EMPTY}
    re_ = five.readings(e.key)
    assert re_[Q].detail == re_[KV].detail == "no ready pods"


async def test_real_prometheus_dry_run_check(prometheus: PrometheusServer) -> None:
    a, c, d = sts("vllm-a"), sts("vllm-c"), sts("vllm-d")
    async with httpx.AsyncClient() as client:
        source = PrometheusSource(
            client, base_url=prometheus.url, timeout_seconds=5, rate_window_seconds=RATE_WINDOW
        )
        snaps = {
            a.key: snapshot(["vllm-a-0", "vllm-a-1"]),
            c.key: snapshot(["vllm-c-0"]),
            d.key: snapshot(["vllm-d-0"]),  # listed, never scraped
        }
        problems = await check_configured_queries(source, [a, c, d], snaps)
    got = {(p.target, p.signal, p.status) for p in problems}
    assert got == {
        (c.key, KV, SignalStatus.ABSENT),
        (d.key, Q, SignalStatus.EMPTY),
        (d.key, KV, SignalStatus.EMPTY),
        (d.key, TTFT, SignalStatus.EMPTY),
    }


async def test_real_prometheus_series_of_removed_target_goes_stale(
    prometheus: PrometheusServer, fleet: list[FakeVllmPod]
) -> None:
    """Removing a pod from discovery ends its series (stale markers), visible to the source.

    Runs last in the module: it edits the SD file (and restores it).
    """
    a = sts("vllm-a")
    write_file_sd(prometheus.sd_file, sd_groups([p for p in fleet if p.name != "vllm-a-1"]))
    try:
        await wait_for_series(
            prometheus.url, 'absent(vllm:num_requests_running{pod="vllm-a-1"})', timeout=20
        )
        async with httpx.AsyncClient() as client:
            source = PrometheusSource(
                client, base_url=prometheus.url, timeout_seconds=5, rate_window_seconds=RATE_WINDOW
            )
            result = await source.read([a], {a.key: snapshot(["vllm-a-0", "vllm-a-1"])})
    finally:
        write_file_sd(prometheus.sd_file, sd_groups(fleet))
    r = result.readings(a.key)[Q]
    assert r.status is SignalStatus.PARTIAL
    assert (r.value, r.pods_with_data, r.pods_missing) == (5.0, 1, 1)
    assert result.targets[a.key].pods_unscraped == {"vllm-a-1"}
