"""How ``run`` and ``recommend`` fail at start and on unreadable targets: one clear message
naming the cause, the exit code of its class (2: configuration, 1: environment), never a
traceback; and one log line per failed query.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from typer.testing import CliRunner

from scaler.cli import app
from scaler.cli.controller import RECOMMEND_FIELDS, RUN_FIELDS
from scaler.config.cli_options import option_names
from scaler.config.settings import Settings, env_name
from scaler.controller.app import RunOptions, StartupError, serve
from scaler.sim.kubeapi import write_kubeconfig
from scaler.sources.promql import QueryKind, build_query_plan
from tests.support.controller_harness import (
    KEY,
    Harness,
    HarnessFactory,
    captured_logs,
    case_policy,
)
from tests.support.fakeprom import Reply, Ttft, idle_without_ttft, pods, uniform_answers

MISSING = "llm/Deployment/missing"
POLICY_YAML = (
    "targets:\n  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}\n"
)


def _settings(h: Harness) -> Settings:
    return Settings(
        prometheus_url=h.prom.url,
        kubeconfig=h.kubeconfig,
        in_cluster=False,
        metrics_port=0,
        prometheus_timeout_seconds=5,
    )


def _two_targets() -> Any:
    """``llm/vllm`` (exists) and ``llm/missing`` (no such Deployment)."""
    policy = case_policy()
    missing = case_policy(
        workload={
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "llm",
            "name": "missing",
        }
    )
    return policy.model_copy(update={"targets": (*policy.targets, *missing.targets)})


def _all_signals(h: Harness) -> None:
    # the harness' pods, and one named as the "missing" Deployment's would be: a name is no
    # identity, so it is not the missing target's
    two = [*pods(2), "missing-5c4d9-aaaaa"]
    h.fake.set(
        **uniform_answers(
            two,
            waiting="1",
            running="1",
            kv_cache="0.5",
            ttft_p95="1.0",
            ttft_rate="2",
        )
    )


async def test_recommend_once_prints_the_round_and_exits_1_when_a_target_cannot_be_read(
    make_harness: HarnessFactory,
) -> None:
    missing_only = case_policy(
        workload={
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "llm",
            "name": "missing",
        }
    )
    h = await make_harness(replicas=2, ready=pods(2), policy=missing_only)
    _all_signals(h)  # every query has series: the start-up check passes
    out = StringIO()
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=True)
    code = await serve(_settings(h), h.policy, options, out=out, clock=h.clock)
    assert code == 1
    [obj] = json.loads(out.getvalue())  # the round is printed all the same
    assert (obj["target"], obj["reason"], obj["action"]) == (
        MISSING,
        "target_read_failed",
        "read_failed",
    )
    assert obj["message"].startswith("deployments.apps")
    assert "not found" in obj["message"]


async def test_recommend_once_exits_0_when_every_target_is_read(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(replicas=2, ready=pods(2))
    _all_signals(h)
    options = RunOptions(dry_run=True, once=True, output="text", check_queries=True)
    out = StringIO()
    assert await serve(_settings(h), h.policy, options, out=out, clock=h.clock) == 0
    assert out.getvalue().startswith(f"{KEY}: current 2 -> desired ")


async def test_start_up_check_reports_the_unreadable_target_before_missing_series(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(replicas=2, ready=pods(2), policy=_two_targets())  # all answers R[]
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=True)
    with pytest.raises(StartupError) as err:
        await serve(_settings(h), h.policy, options, out=StringIO(), clock=h.clock)
    lines = str(err.value).splitlines()
    assert lines[0] == "cannot read targets in Kubernetes:"
    assert lines[1].startswith(f"  {MISSING}: not_found: ")
    # the readable target has no series, one line per signal; the unreadable one has no pods
    # to attribute any to
    assert lines[2].startswith(
        f"{KEY}: signal queue_depth has no series (empty): none of its 2 pods (selector "
        "app=vllm in namespace llm) has vLLM series; the query that returned nothing: "
    )
    assert f"{MISSING} queue_depth" not in str(err.value)
    assert err.value.exit_code == 1


#: Idle pods whose queue and KV-cache series exist, without any TTFT histogram.
NO_TTFT = idle_without_ttft(pods(2))
TTFT_ABSENT = (
    "neither vllm:time_to_first_token_seconds_bucket / vllm:time_to_first_token_seconds_count "
    "(classic histogram) nor vllm:time_to_first_token_seconds (native histogram) has series "
    "over the 60s rate window for the 2 ready pods, although their vllm:num_requests_running "
    "series exist"
)


def _ttft_rate_query(h: Harness) -> str:
    """The TTFT rate query the start-up check sends for the harness' one target."""
    plan = build_query_plan(h.policy.targets, rate_window_seconds=h.policy.rate_window_seconds)
    return plan.queries[QueryKind.TTFT_RATE]


async def test_a_signal_absent_at_start_is_said_once_naming_target_signal_and_query(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(replicas=2, ready=pods(2), answers=NO_TTFT)
    options = RunOptions(dry_run=True, once=True, output="text", check_queries=True)
    with captured_logs() as logs, pytest.raises(StartupError) as err:
        await serve(_settings(h), h.policy, options, out=StringIO(), clock=h.clock)
    assert str(err.value) == (
        f"{KEY}: signal ttft_p95 has no series (absent): {TTFT_ABSENT}; the query that "
        f"returned nothing: {_ttft_rate_query(h)}"
    )
    assert err.value.exit_code == 1
    assert [e["event"] for e in logs if e["log_level"] == "error"] == []  # not a second time


async def test_a_signal_absent_in_a_cycle_is_logged_with_the_query_that_returned_nothing(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(replicas=2, ready=pods(2), answers=NO_TTFT)
    with captured_logs() as logs:
        await h.cycle()
    [absent] = [
        e for e in logs if e["event"] == "signal absent while the target's pods are scraped"
    ]
    assert (absent["target"], absent["signal"], absent["detail"]) == (KEY, "ttft_p95", TTFT_ABSENT)
    assert absent["query"] == _ttft_rate_query(h)


async def test_run_names_an_unreachable_api_server_once_and_starts_all_the_same(
    make_harness: HarnessFactory, tmp_path: Path
) -> None:
    """A controller that exits while the API server is away restarts in a loop: ``run`` logs
    the server it cannot reach, with what to check, and its cycles hold."""
    h = await make_harness(replicas=2, ready=pods(2))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        server = f"http://127.0.0.1:{s.getsockname()[1]}"
    kubeconfig = write_kubeconfig(tmp_path / "away", server_url=server, token="t-away")
    settings = _settings(h).model_copy(update={"kubeconfig": kubeconfig})
    options = RunOptions(dry_run=True, once=True, output="log", check_queries=False)
    with captured_logs() as logs:
        code = await serve(settings, h.policy, options, out=StringIO(), clock=h.clock)
    assert code == 1  # the one cycle could not read its target
    [unreachable] = [e for e in logs if e["event"] == "kubernetes_api_unreachable"]
    assert unreachable["server"] == server
    assert unreachable["message"].startswith(
        f"the Kubernetes API server at {server} cannot be reached: connection refused (context "
        f"'sim' of kubeconfig {kubeconfig}); check that it is the cluster meant "
    )
    events = [e["event"] for e in logs]
    assert events.index("kubernetes_api_unreachable") < events.index("started")  # said at start


async def test_start_up_check_with_prometheus_down_says_unreachable_not_no_series(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(replicas=2, ready=pods(2))
    url = h.prom.url
    await h.prom.stop()  # connection refused
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=True)
    with pytest.raises(StartupError) as err:
        await serve(_settings(h), h.policy, options, out=StringIO(), clock=h.clock)
    text = str(err.value)
    header, *causes = text.splitlines()
    assert header == f"Prometheus at {url}/ is unreachable:"
    assert len(causes) == 1  # one transport failure, named once
    assert causes[0].startswith("  transport: ConnectError: ")
    assert causes[0].endswith(f"({KEY} queue_depth, {KEY} kv_cache_usage, {KEY} ttft_p95)")
    assert "no series" not in text
    assert err.value.exit_code == 1


async def test_start_up_check_names_a_query_error_as_such(make_harness: HarnessFactory) -> None:
    h = await make_harness(replicas=2, ready=pods(2))
    _all_signals(h)
    h.fake.set(
        kv_cache=Reply({"status": "error", "errorType": "bad_data", "error": "parse error"}, 400)
    )
    options = RunOptions(dry_run=True, once=True, output="json", check_queries=True)
    with pytest.raises(StartupError) as err:
        await serve(_settings(h), h.policy, options, out=StringIO(), clock=h.clock)
    lines = str(err.value).splitlines()
    assert lines[0] == "Prometheus queries fail:"
    assert lines[1].startswith(f"  {KEY} kv_cache_usage: query_error: bad_data: parse error")
    assert len(lines) == 2


async def test_a_failed_query_is_logged_once_with_kind_reason_and_detail(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(replicas=2, ready=pods(2))
    _all_signals(h)
    h.fake.set(
        ttft_rate=Ttft("1.0", "4"),
        ttft_buckets=Reply(
            {"status": "error", "errorType": "timeout", "error": "query timed out"}, status=503
        ),
    )
    with captured_logs() as logs:
        await h.cycle()
    failures = [e for e in logs if "fail" in str(e["event"]) and "query" in str(e["event"])]
    assert [(e["event"], e["query"], e["reason"]) for e in failures] == [
        ("query_failed", "ttft_buckets", "query_error")
    ]
    assert failures[0]["detail"] == "timeout: query timed out (HTTP 503)"


# ------------------------------------------------------------------ the command line


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``run``/``recommend`` configure structlog to print to the runner's stderr, which is
    closed after the call; later tests must log to the configuration they had."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_YAML, encoding="utf-8")
    # A kubeconfig that loads; nothing listens there, and nothing must be asked.
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", server_url="http://127.0.0.1:9", token="t"
    )
    return {"policy": policy, "kubeconfig": kubeconfig}


def _invoke(args: list[str], **env: str) -> Any:
    return CliRunner().invoke(app, args, env={"KUBERNETES_SERVICE_HOST": None, **env})


def _single_error(result: Any) -> str:
    # Besides warnings, recommend names the Prometheus client configuration at start.
    skip = ("vllm-scaler: warning", "vllm-scaler: prometheus ")
    lines = [ln for ln in result.output.splitlines() if not ln.startswith(skip)]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return str(lines[0])


def test_run_with_a_metrics_address_that_does_not_resolve_exits_2(
    files: dict[str, Path],
) -> None:
    result = _invoke(
        ["run", "--policy", str(files["policy"]), "--kubeconfig", str(files["kubeconfig"])],
        VLLM_SCALER_METRICS_ADDRESS="999.1.1.1",
    )
    assert result.exit_code == 2
    assert _single_error(result).startswith(
        "vllm-scaler: VLLM_SCALER_METRICS_ADDRESS (--metrics-address): value '999.1.1.1': "
        "cannot listen on it ("
    )


def test_run_with_the_metrics_port_in_use_exits_2(files: dict[str, Path]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = _invoke(
            [
                "run", "--policy", str(files["policy"]), "--kubeconfig", str(files["kubeconfig"]),
                "--metrics-address", "127.0.0.1", "--metrics-port", str(port),
            ]
        )  # fmt: skip
    assert result.exit_code == 2
    assert _single_error(result) == (
        f"vllm-scaler: VLLM_SCALER_METRICS_PORT (--metrics-port): value {port}: cannot listen "
        f"on 127.0.0.1:{port} (Address already in use); choose a free port, or 0 to turn the "
        "endpoint off"
    )


def test_run_with_a_missing_ca_file_exits_2_naming_it(files: dict[str, Path]) -> None:
    result = _invoke(
        ["run", "--policy", str(files["policy"]), "--prometheus-ca-file", "/nonexistent"]
    )
    assert result.exit_code == 2
    assert result.output == (
        "vllm-scaler: VLLM_SCALER_PROMETHEUS_CA_FILE (--prometheus-ca-file): value '/nonexistent': "
        "no such file; expected a PEM CA bundle\n"
    )


def test_run_with_a_missing_kubeconfig_exits_2_with_one_line(files: dict[str, Path]) -> None:
    result = _invoke(["run", "--policy", str(files["policy"]), "--kubeconfig", "/nonexistent"])
    assert result.exit_code == 2
    line = _single_error(result)
    assert line.startswith(
        "vllm-scaler: cannot load the Kubernetes configuration: kubeconfig /nonexistent: "
        "no such file; set --kubeconfig FILE (VLLM_SCALER_KUBECONFIG)"
    )
    assert "Config not found" not in result.output and "current-context" not in result.output


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        pytest.param("- a\n", "the file holds a list", id="list"),
        pytest.param("tok-SECRET-123\n", "the file holds a string", id="scalar"),
        pytest.param("", "the file is empty", id="empty"),
    ],
)
def test_a_kubeconfig_that_is_no_mapping_is_named_with_what_it_holds(
    files: dict[str, Path], tmp_path: Path, content: str, problem: str
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(content)
    result = _invoke(["run", "--policy", str(files["policy"]), "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 2
    assert _single_error(result).startswith(
        f"vllm-scaler: cannot load the Kubernetes configuration: kubeconfig {kubeconfig}: "
        f"{problem}; expected a kubeconfig: a mapping with clusters, contexts and users; "
    )
    assert "SECRET" not in result.output


@pytest.mark.parametrize("command", ["run", "recommend"])
@pytest.mark.parametrize("token", [True, False], ids=["with-token", "userinfo-only"])
def test_a_server_url_with_userinfo_exits_2_with_one_line_and_no_password(
    files: dict[str, Path], tmp_path: Path, command: str, token: bool
) -> None:
    # Found by a user trial: every cycle failed with aiohttp's traceback ("Cannot combine
    # AUTHORIZATION header with AUTH argument or credentials encoded in URL").
    kubeconfig = write_kubeconfig(
        tmp_path / "kc2", server_url="https://admin:pw-S3CRET@127.0.0.1:9", token="tok-abcdef"
    )
    if not token:
        doc = yaml.safe_load(kubeconfig.read_text())
        doc["users"][0]["user"] = {}
        kubeconfig.write_text(yaml.safe_dump(doc))
    once = ["--once"] if command == "recommend" else []  # run refuses it before its loop
    result = _invoke(
        [command, *once, "--policy", str(files["policy"]), "--kubeconfig", str(kubeconfig)]
    )
    assert result.exit_code == 2, result.output
    assert _single_error(result) == (
        f"vllm-scaler: cannot load the Kubernetes configuration: kubeconfig {kubeconfig}: "
        "cluster 'sim' (context 'sim'): server: value 'https://admin:***@127.0.0.1:9' holds "
        "user-info; expected a URL without credentials: they belong in the kubeconfig's user "
        "entry, not in the server URL; set --kubeconfig FILE (VLLM_SCALER_KUBECONFIG), or "
        "--in-cluster (VLLM_SCALER_IN_CLUSTER=true) in a pod"
    )
    assert "S3CRET" not in result.output and "cycle_failed" not in result.output


def test_a_kubeconfig_that_is_no_yaml_names_the_line(
    files: dict[str, Path], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("clusters: [\n")
    result = _invoke(["run", "--policy", str(files["policy"]), "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 2
    assert _single_error(result).startswith(
        f"vllm-scaler: cannot load the Kubernetes configuration: kubeconfig {kubeconfig}: "
        "not valid YAML at line 2, column 1: "
    )


def test_recommend_without_any_kubeconfig_says_in_cluster_was_not_possible(
    files: dict[str, Path], tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        app,
        ["recommend", "--policy", str(files["policy"]), "--once"],
        env={"HOME": str(tmp_path), "KUBECONFIG": None, "KUBERNETES_SERVICE_HOST": None},
    )
    assert result.exit_code == 2
    assert _single_error(result) == (
        f"vllm-scaler: cannot load the Kubernetes configuration: no kubeconfig "
        f"({tmp_path}/.kube/config does not exist, $KUBECONFIG is not set) and not in a "
        "cluster (KUBERNETES_SERVICE_HOST is not set); set --kubeconfig FILE "
        "(VLLM_SCALER_KUBECONFIG), or --in-cluster (VLLM_SCALER_IN_CLUSTER=true) in a pod"
    )


def test_unknown_variables_are_warned_about_at_start(files: dict[str, Path]) -> None:
    result = _invoke(
        ["recommend", "--policy", str(files["policy"]), "--kubeconfig", "/nonexistent"],
        VLLM_SCALER_INTERVAL="5",
        VLLM_SCALER_OUTPUT="json",
    )
    warnings = [ln for ln in result.output.splitlines() if "warning" in ln]
    assert warnings == [
        "vllm-scaler: warning: unknown environment variable VLLM_SCALER_INTERVAL is ignored "
        "(closest setting: VLLM_SCALER_CONTROL_INTERVAL_SECONDS)",
        "vllm-scaler: warning: unknown environment variable VLLM_SCALER_OUTPUT is ignored "
        "(--output is a command-line option only, with no variable)",
    ]


@pytest.mark.parametrize(
    ("command", "fields", "names"),
    [
        pytest.param("run", RUN_FIELDS, {}, id="run"),
        pytest.param("recommend", RECOMMEND_FIELDS, {}, id="recommend"),
    ],
)
def test_help_shows_every_options_variable_and_default_within_80_columns(
    command: str, fields: tuple[str, ...], names: dict[str, tuple[str, ...]]
) -> None:
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=80)
    assert result.exit_code == 0
    text = result.output
    assert max(len(line) for line in text.splitlines()) <= 80
    flat = " ".join(text.split())
    for field in fields:
        option = option_names(field, names)[0].split("/")[0]
        assert re.search(rf"(  |, ){option}[ ,/]", text), option  # never cut
        assert env_name(field) in flat, field
    assert "VLLM_SCALER_CONTROL_INTERVAL_SECONDS; default: (15.0)" in flat
    assert "default: (http://localhost:9090/)" in flat


def test_an_option_and_its_variable_are_one_setting(files: dict[str, Path]) -> None:
    result = _invoke(
        ["run", "--policy", str(files["policy"])], VLLM_SCALER_CONTROL_INTERVAL_SECONDS="soon"
    )
    assert result.exit_code == 2
    assert result.output == (
        "vllm-scaler: VLLM_SCALER_CONTROL_INTERVAL_SECONDS (--interval): value 'soon': "
        "expected a duration: seconds (90) or a number with a unit ms, s, m, h, d, w or y "
        "(90s, 5m, 1.5m, 1h30m)\n"
    )


def test_an_unknown_context_names_the_option_and_the_contexts(files: dict[str, Path]) -> None:
    kubeconfig = files["kubeconfig"]
    args = ["recommend", "--once", "--policy", str(files["policy"])]
    result = _invoke([*args, "--kubeconfig", str(kubeconfig), "--context", "nope"])
    assert result.exit_code == 2
    names = ", ".join(c["name"] for c in yaml.safe_load(kubeconfig.read_text())["contexts"])
    assert _single_error(result) == (
        f"vllm-scaler: cannot load the Kubernetes configuration: kubeconfig {kubeconfig}: "
        f"context 'nope' is not in it (its contexts: {names}); set --context NAME "
        "(VLLM_SCALER_KUBE_CONTEXT) to one of them, or leave it unset for the current-context"
    )


def test_an_https_url_that_reached_plain_http_says_so_as_every_command_does() -> None:
    from scaler.config.vocabulary import SignalName
    from scaler.controller.app import format_startup_problems
    from scaler.core.signals import SignalStatus
    from scaler.sources.prometheus import ConfiguredQueryProblem

    detail = "ConnectError: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1000)"
    problems = [
        ConfiguredQueryProblem(KEY, signal, SignalStatus.TRANSPORT, "q", detail)
        for signal in (SignalName.QUEUE_DEPTH, SignalName.TTFT_P95)
    ]
    text = format_startup_problems([], problems, "https://127.0.0.1:9090")
    assert text.splitlines() == [
        "Prometheus at https://127.0.0.1:9090 is unreachable:",
        f"  transport: {detail} ({KEY} queue_depth, {KEY} ttft_p95); the server may speak "
        "plain http: try http://127.0.0.1:9090",
    ]
