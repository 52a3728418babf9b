"""PromQL construction, sample parsing and the HTTP client options (auth, CA, headers)."""

from __future__ import annotations

import math
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from scaler.config.vocabulary import SignalName
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus import (
    BearerTokenFileAuth,
    PrometheusSource,
    build_http_client,
    parse_sample_value,
)
from scaler.sources.promql import (
    QueryKind,
    TtftPart,
    build_query_plan,
    build_ttft_query,
    pods_selector,
    promql_duration,
    promql_string,
)
from tests.support.fakeprom import FakePrometheus, per_pod, snapshot, target
from tests.support.tls import make_certificates, mutual_tls_server_context

KEY = "llm/Deployment/vllm"


def test_promql_duration_is_integer_units() -> None:
    assert promql_duration(60) == "60s"
    assert promql_duration(4.5) == "4500ms"
    assert promql_duration(0.0001) == "1ms"
    with pytest.raises(ValueError):
        promql_duration(0)


def test_promql_string_escapes() -> None:
    assert promql_string('a"b\\c') == '"a\\"b\\\\c"'


def test_query_plan_for_the_default_target_is_pinned() -> None:
    plan = build_query_plan([target()], rate_window_seconds=60)

    ns = 'namespace="llm"'  # per-pod queries: the source picks the target's pods by name
    recorded = "namespace_scaler_pod_group_le:vllm_time_to_first_token_seconds_bucket:rate1m"
    mixed = "namespace:vllm_time_to_first_token_seconds_bucket:mixed_bounds_rate1m"
    # one copy of each series behind an HA Prometheus pair (case 35)
    one = "max without (prometheus_replica, replica, __replica__) "
    assert plan.queries == {
        QueryKind.WAITING: f"label_replace(sum by (namespace, pod) ({one}"
        f'(vllm:num_requests_waiting{{{ns}}})), "scaler_selector", "s0", "", "")',
        # with each pod's sample age and sleep state (groups of their own, s0@age and
        # s0@asleep; their max by pod reads the HA copies once), and the ages of the recorded
        # per-pod throughput rates, per namespace and counter, from the rules' own record of
        # their timestamps (not the recorded rates)
        QueryKind.RUNNING: f"(label_replace(sum by (namespace, pod) ({one}"
        f'(vllm:num_requests_running{{{ns}}})), "scaler_selector", "s0", "", "") or '
        "label_replace(time() - max by (namespace, pod) (timestamp("
        f'vllm:num_requests_running{{{ns}}})), "scaler_selector", "s0@age", "", "")) or '
        "(label_replace(max by (namespace, pod) (1 - vllm:engine_sleep_state"
        f'{{{ns},sleep_state="awake"}}), "scaler_selector", "s0@asleep", "", "") or '
        "label_replace(time() - namespace_scaler_recorded:vllm_rate1m_timestamp_seconds:min"
        f'{{{ns}}}, "scaler_selector", "s0", "", ""))',
        QueryKind.KV_CACHE: "label_replace(max by (namespace, pod, __name__) "
        '({__name__=~"vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc",'
        f'{ns}}}), "scaler_selector", "s0", "", "")',
        QueryKind.TTFT_RATE: f"label_replace(label_replace(sum by (namespace, pod) ({one}"
        f"(rate(vllm:time_to_first_token_seconds_count{{{ns}}}[60s]))), "
        '"scaler_histogram", "classic", "", ""), "scaler_selector", "s0", "", "") or '
        f"(label_replace(label_replace(sum by (namespace, pod) ({one}(histogram_count(rate("
        f"vllm:time_to_first_token_seconds{{{ns}}}[60s])))), "
        '"scaler_histogram", "native", "", ""), "scaler_selector", "s0", "", "") or '
        # the recorded buckets' ages, for the namespaces whose pods share one bucket layout
        f'label_replace(label_replace(time() - timestamp({recorded}{{{ns},le="+Inf"}}) '
        f"and on (namespace) ({mixed}{{{ns}}} == 0), "
        '"scaler_histogram", "recorded", "", ""), "scaler_selector", "s0", "", ""))',
        # the three counters' rates, the prefix-cache hits (current and older name) and the
        # prefill and decode phase sums, or'ed as a balanced tree
        QueryKind.THROUGHPUT: "label_replace((({} or ({} or {})) or (({} or {}) or ({} or {}))), "
        '"scaler_selector", "s0", "", "")'.format(
            *(
                f"label_replace(sum by (namespace, pod) ({one}(rate({m}{{{ns}}}[60s]))), "
                f'"scaler_metric", "{m}", "", "")'
                for m in (
                    "vllm:request_success_total",
                    "vllm:prompt_tokens_total",
                    "vllm:generation_tokens_total",
                    "vllm:prefix_cache_hits_total",
                    "vllm:gpu_prefix_cache_hits_total",
                    "vllm:request_prefill_time_seconds_sum",
                    "vllm:request_decode_time_seconds_sum",
                )
            )
        ),
    }


def test_ttft_query_asks_for_exactly_the_named_pods_raw_native_or_recorded() -> None:
    pods = pods_selector("llm", ["vllm-5d8f-b", "vllm-5d8f-a"])
    # re.escape'd names inside a PromQL string (its backslashes doubled): a set match
    assert pods == r'namespace="llm",pod=~"vllm\\-5d8f\\-a|vllm\\-5d8f\\-b"'
    query = build_ttft_query(
        [
            TtftPart("llm/Deployment/vllm", pods, 0.95),
            TtftPart("llm/StatefulSet/big", r'namespace="llm",pod=~"big\\-0"', 0.5, False, True),
        ],
        {"llm": ["small-7c9d"]},
        rate_window_seconds=30,
    )
    # the bucket rates are summed with their copies behind an HA pair: a quantile does not change
    classic = (
        "label_replace(sum by (le) (rate(vllm:time_to_first_token_seconds_bucket"
        f'{{{pods}}}[30s])), "scaler_target", "llm/Deployment/vllm", "", "")'
    )
    h = r'sum(rate(vllm:time_to_first_token_seconds{namespace="llm",pod=~"big\\-0"}[30s]))'
    native = [
        f'label_replace(label_replace(histogram_quantile(0.5, {h}), "scaler_target", '
        f'"llm/StatefulSet/big", "", ""), "scaler_native", "quantile", "", "")',
        f'label_replace(label_replace(histogram_count({h}), "scaler_target", '
        f'"llm/StatefulSet/big", "", ""), "scaler_native", "count", "", "")',
        "label_replace(label_replace(histogram_fraction(0, scalar(histogram_quantile(0.5, "
        f'{h})), {h}), "scaler_target", "llm/StatefulSet/big", "", ""), "scaler_native", '
        '"fraction", "", "")',
    ]
    recorded = (
        "max by (namespace, scaler_pod_group, le) ("
        "namespace_scaler_pod_group_le:vllm_time_to_first_token_seconds_bucket:rate30s"
        r'{namespace=~"llm",scaler_pod_group=~"small\\-7c9d"})'
    )
    # beside the classic rates, how many histogram series have each bound (mixed layouts)
    count = (
        "label_replace(label_replace(count by (le) (rate(vllm:time_to_first_token_seconds_bucket"
        f'{{{pods}}}[30s])), "scaler_target", "llm/Deployment/vllm", "", ""), "scaler_layout", '
        '"series", "", "")'
    )
    # six parts, a balanced "or": (a or (b or c)) or (d or (e or f))
    assert query == (
        f"({classic} or ({count} or {native[0]})) or ({native[1]} or ({native[2]} or {recorded}))"
    )
    assert build_ttft_query([], {"llm": []}, rate_window_seconds=30) is None


def test_query_plan_shares_groups_between_equal_selectors() -> None:
    a = target("a", prometheus_matchers={"namespace": "llm", "model_name": "m"})
    b = target("b", prometheus_matchers={"model_name": "m", "namespace": "llm"})
    c = target("c")
    plan = build_query_plan([a, b, c], rate_window_seconds=30)
    assert plan.selector_group == {a.key: "s0", b.key: "s0", c.key: "s1"}
    assert plan.queries[QueryKind.WAITING].count("label_replace") == 2
    # per group: classic and native request rates; the default group the recorded ages too
    assert plan.queries[QueryKind.TTFT_RATE].count('"scaler_selector", "s0"') == 2
    assert plan.queries[QueryKind.TTFT_RATE].count('"scaler_selector", "s1"') == 3
    assert "[30s]" in plan.queries[QueryKind.TTFT_RATE]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("3", 3.0, id="integer"),
        pytest.param("0.125", 0.125, id="decimal"),
        pytest.param("1e-05", 1e-05, id="exponent"),
        pytest.param("-2", -2.0, id="negative"),
        pytest.param("+Inf", math.inf, id="+Inf"),
        pytest.param("-Inf", -math.inf, id="-Inf"),
        pytest.param("214748365", 214748365.0, id="above int32 over 10"),
    ],
)
def test_parse_sample_value(raw: str, expected: float) -> None:
    assert parse_sample_value(raw) == expected


def test_parse_sample_value_nan() -> None:
    assert math.isnan(parse_sample_value("NaN"))


@pytest.mark.parametrize(
    "raw", ["nan", "inf", "Infinity", "1_000", " 3", "", "x", 3, None, "1e999"]
)
def test_parse_sample_value_rejects(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_sample_value(raw)


async def test_bearer_token_is_reread_on_every_request(
    fake_prom: FakePrometheus, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    fake_prom.set(waiting=per_pod({"pod-0": "1"}))
    client = build_http_client(
        bearer_token_file=token, ca_file=None, timeout_seconds=5, headers={"X-Scope-OrgID": "t1"}
    )
    async with client:
        source = PrometheusSource(
            client, base_url=fake_prom.url + "/", timeout_seconds=5, rate_window_seconds=60
        )
        await source.read([target()], {KEY: snapshot(["pod-0"])})
        token.write_text("rotated-token")
        await source.read([target()], {KEY: snapshot(["pod-0"])})
    auths = [h.get("Authorization") for h in fake_prom.headers]
    # five per-pod queries each; no TTFT request rate, so no second round
    assert auths == ["Bearer first-token"] * 5 + ["Bearer rotated-token"] * 5
    assert {h.get("X-Scope-OrgID") for h in fake_prom.headers} == {"t1"}
    assert "first-token" not in repr(client.auth) and "rotated" not in repr(client.auth)


async def test_unreadable_token_file_is_transport_not_a_crash(
    fake_prom: FakePrometheus, tmp_path: Path
) -> None:
    async with build_http_client(
        bearer_token_file=tmp_path / "missing", ca_file=None, timeout_seconds=5
    ) as client:
        source = PrometheusSource(
            client, base_url=fake_prom.url, timeout_seconds=5, rate_window_seconds=60
        )
        result = await source.read([target()], {KEY: snapshot(["pod-0"])})
    r = result.readings(KEY)[SignalName.QUEUE_DEPTH]
    assert r.status is SignalStatus.TRANSPORT
    assert r.detail == (
        f"waiting query: request not sent: cannot read bearer token file {tmp_path / 'missing'}: "
        "No such file or directory"
    )
    assert fake_prom.requests == []


async def test_token_file_failing_after_start_names_the_file_never_the_content(
    fake_prom: FakePrometheus, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("good-token")
    fake_prom.set(waiting=per_pod({"pod-0": "1"}))
    async with build_http_client(bearer_token_file=token, ca_file=None, timeout_seconds=5) as c:
        source = PrometheusSource(
            c, base_url=fake_prom.url, timeout_seconds=5, rate_window_seconds=60
        )
        ok = await source.read([target()], {KEY: snapshot(["pod-0"])})
        token.write_bytes(b"\xff\xfeSECRET-half-rotated")  # a rotation caught mid-write
        bad = await source.read([target()], {KEY: snapshot(["pod-0"])})
    assert ok.readings(KEY)[SignalName.QUEUE_DEPTH].value == 1.0
    outcome = bad.queries[QueryKind.WAITING]
    assert outcome.status is SignalStatus.TRANSPORT
    assert outcome.detail == (
        f"request not sent: cannot read bearer token file {token}: the file is not UTF-8 "
        "text; expected a file holding a token"
    )
    assert "SECRET" not in outcome.detail


def test_build_http_client_names_a_bad_ca_file(tmp_path: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ValueError) as err:
        build_http_client(bearer_token_file=None, ca_file=garbage, timeout_seconds=5)
    assert str(err.value) == f"CA file {garbage}: no certificate or crl found"
    with pytest.raises(ValueError) as err:
        build_http_client(bearer_token_file=None, ca_file=tmp_path / "none.pem", timeout_seconds=5)
    assert str(err.value) == f"CA file {tmp_path / 'none.pem'}: No such file or directory"


def test_bearer_auth_repr_hides_token(tmp_path: Path) -> None:
    token = tmp_path / "t"
    token.write_text("s3cret")
    assert "s3cret" not in repr(BearerTokenFileAuth(token))


@pytest.fixture
async def tls_prom(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    """A TLS Prometheus stand-in with a self-signed certificate for 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed (needed to make a test certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    async def handle(request: web.Request) -> web.Response:
        return web.json_response(per_pod({"pod-0": "7"}, scaler_selector="s0"))

    app = web.Application()
    app.router.add_post("/api/v1/query", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}", cert
    finally:
        await runner.cleanup()


async def test_ca_file_verifies_prometheus_tls(tls_prom: tuple[str, Path]) -> None:
    url, cert = tls_prom
    t = target(signals={"kv_cache_usage": {"enabled": False}, "ttft_p95": {"enabled": False}})
    async with build_http_client(bearer_token_file=None, ca_file=cert, timeout_seconds=5) as c:
        result = await PrometheusSource(
            c, base_url=url, timeout_seconds=5, rate_window_seconds=60
        ).read([t], {KEY: snapshot(["pod-0"])})
    assert result.readings(KEY)[SignalName.QUEUE_DEPTH].value == 7.0
    # without the CA the certificate is rejected: a transport failure, never a value
    async with build_http_client(bearer_token_file=None, ca_file=None, timeout_seconds=5) as c:
        result = await PrometheusSource(
            c, base_url=url, timeout_seconds=5, rate_window_seconds=60
        ).read([t], {KEY: snapshot(["pod-0"])})
    assert result.readings(KEY)[SignalName.QUEUE_DEPTH].status is SignalStatus.TRANSPORT


async def test_build_http_client_sets_timeout() -> None:
    async with build_http_client(bearer_token_file=None, ca_file=None, timeout_seconds=3) as c:
        assert c.timeout == httpx.Timeout(3)


@pytest.fixture
async def mtls_prom(tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, Path]]]:
    """A Prometheus stand-in that requires a client certificate signed by its own CA."""
    f = make_certificates(tmp_path)
    ctx = mutual_tls_server_context(f)

    async def handle(request: web.Request) -> web.Response:
        return web.json_response(per_pod({"pod-0": "7"}, scaler_selector="s0"))

    app = web.Application()
    app.router.add_post("/api/v1/query", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx).start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}", f
    finally:
        await runner.cleanup()


async def test_mutual_tls_client_certificate(mtls_prom: tuple[str, dict[str, Path]]) -> None:
    url, f = mtls_prom
    t = target(signals={"kv_cache_usage": {"enabled": False}, "ttft_p95": {"enabled": False}})
    async with build_http_client(
        bearer_token_file=None,
        ca_file=f["ca"],
        timeout_seconds=5,
        client_cert_file=f["cli"],
        client_key_file=f["cli-key"],
    ) as c:
        result = await PrometheusSource(
            c, base_url=url, timeout_seconds=5, rate_window_seconds=60
        ).read([t], {KEY: snapshot(["pod-0"])})
    assert result.readings(KEY)[SignalName.QUEUE_DEPTH].value == 7.0
    # without the client certificate the server refuses the handshake: transport, no value
    async with build_http_client(bearer_token_file=None, ca_file=f["ca"], timeout_seconds=5) as c:
        result = await PrometheusSource(
            c, base_url=url, timeout_seconds=5, rate_window_seconds=60
        ).read([t], {KEY: snapshot(["pod-0"])})
    assert result.readings(KEY)[SignalName.QUEUE_DEPTH].status is SignalStatus.TRANSPORT
