"""The backtest's range client against a Prometheus that answers errors, over real HTTP.

An error answer is reported at once with its HTTP status and the server's message, as the
controller reports it (``HTTP 500 Internal Server Error: ...``, or Prometheus' own
``errorType: error (HTTP 500)``), never as "cannot reach" after retries; only answers that
say "try again" (429, 502, 503, 504) are retried.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from requests.adapters import Retry
from typer.testing import CliRunner

import scaler.backtest.history as history
from scaler.backtest.history import HistoryError, PrometheusRangeClient
from scaler.cli import app
from scaler.config.settings import PrometheusSettings

SUCCESS = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next (status, body) of ``answers`` (the last repeats)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers: list[tuple[int, bytes]] = []
        self.requests = 0
        self.paths: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Scripted

    def do_GET(self) -> None:
        server = self.server
        status, body = server.answers[min(server.requests, len(server.answers) - 1)]
        server.requests += 1
        server.paths.append(self.path)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # the previews query with POST

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def prom() -> Iterator[Scripted]:
    server = Scripted()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped retry policy without its waits (no time passes in the tests)."""
    monkeypatch.setattr(history, "RETRY", history.RETRY.new(backoff_factor=0))


@pytest.mark.parametrize(
    ("status", "body", "detail"),
    [
        pytest.param(
            500, b"boom: disk full", "HTTP 500 Internal Server Error: boom: disk full", id="plain"
        ),
        pytest.param(
            500,
            b'{"status":"error","errorType":"internal","error":"storage is closed"}',
            "internal: storage is closed (HTTP 500)",
            id="Prometheus' error",
        ),
        pytest.param(
            401,
            b"denied",
            "HTTP 401 Unauthorized: denied; Prometheus (or the proxy in front of it) did not "
            "accept the credentials, or got none (authentication: none); none were sent: set "
            "--prometheus-bearer-token-file (VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE) or "
            "--prometheus-headers (VLLM_SCALER_PROMETHEUS_HEADERS), or user-info in "
            "--prometheus-url",
            id="401",
        ),
        pytest.param(
            403,
            b"forbidden",
            "HTTP 403 Forbidden: forbidden; the credentials were accepted but may not query",
            id="403",
        ),
        pytest.param(
            422,
            b'{"status":"error","errorType":"execution","error":"too many samples"}',
            "execution: too many samples (HTTP 422)",
            id="422",
        ),
    ],
)
def test_an_error_answer_is_named_at_once(
    prom: Scripted, no_backoff: None, status: int, body: bytes, detail: str
) -> None:
    prom.answers = [(status, body)]
    client = PrometheusRangeClient(PrometheusSettings(prometheus_url=prom.url))
    try:
        with pytest.raises(HistoryError) as err:
            client("up", 0.0, 60.0, 15.0)
    finally:
        client.close()
    assert str(err.value).startswith(f"Prometheus at {prom.url} refused the query: {detail}")
    assert prom.requests == 1  # not retried


def test_a_try_again_answer_is_retried_then_named(prom: Scripted, no_backoff: None) -> None:
    prom.answers = [(503, b"overloaded"), (502, b"bad gateway"), (200, SUCCESS)]
    client = PrometheusRangeClient(PrometheusSettings(prometheus_url=prom.url))
    try:
        assert client("up", 0.0, 60.0, 15.0) == []
        assert prom.requests == 3
        prom.answers, prom.requests = [(503, b"still overloaded")], 0
        with pytest.raises(HistoryError) as err:
            client("up", 0.0, 60.0, 15.0)
    finally:
        client.close()
    assert prom.requests == 4  # the request and three retries
    assert str(err.value) == (
        f"Prometheus at {prom.url} refused the query: HTTP 503 Service Unavailable: "
        "still overloaded"
    )


@pytest.mark.parametrize("step", [15.0, 1_036_801.0])
def test_the_step_is_sent_to_the_second(prom: Scripted, step: float) -> None:
    """A step of 12 days and 1 second (seven digits) is sent whole, not rounded to six
    significant digits (1.0368e+06): Prometheus would evaluate off the grid."""
    prom.answers = [(200, SUCCESS)]
    client = PrometheusRangeClient(PrometheusSettings(prometheus_url=prom.url))
    try:
        assert client("up", 0.0, 2 * step, step) == []
    finally:
        client.close()
    (path,) = prom.paths
    assert parse_qs(urlsplit(path).query)["step"] == [f"{step:.0f}"]


def test_the_retry_policy() -> None:
    assert isinstance(history.RETRY, Retry)
    assert (history.RETRY.total, history.RETRY.backoff_factor) == (3, 0.5)
    assert set(history.RETRY.status_forcelist or ()) == {429, 502, 503, 504}
    assert history.RETRY.raise_on_status is False


def test_backtest_against_a_prometheus_answering_500(prom: Scripted, tmp_path: Path) -> None:
    prom.answers = [(500, b"boom: disk full")]
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "targets:\n"
        "  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}\n"
    )
    result = CliRunner().invoke(
        app,
        ["backtest", "--prometheus-url", prom.url, "--policy", str(policy), "--start", "now-1h",
         "--no-plot", "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert (
        f"Prometheus at {prom.url} refused the query: HTTP 500 Internal Server Error: "
        "boom: disk full; query " in result.output
    )
    assert "cannot reach" not in result.output and "Max retries" not in result.output
    assert prom.requests == 1


def test_an_unreachable_prometheus_is_one_line_naming_the_url_without_credentials(
    tmp_path: Path,
) -> None:
    """As ``recommend`` says it: the URL without its password and the cause in a few words,
    not urllib3's "HTTPConnectionPool(...): Max retries exceeded ..."; no query named (every
    query would fail the same way)."""
    server = Scripted()  # bound, then closed: nothing listens on the port
    port = server.server_address[1]
    server.server_close()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "targets:\n"
        "  - workload: {apiVersion: apps/v1, kind: Deployment, namespace: llm, name: vllm}\n"
    )
    url = f"http://scaler:s3cret-pw@127.0.0.1:{port}"
    result = CliRunner().invoke(
        app,
        ["backtest", "--prometheus-url", url, "--policy", str(policy), "--start", "now-1h",
         "--no-plot", "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == (
        f"vllm-scaler: Prometheus at http://scaler:***@127.0.0.1:{port} cannot be reached: "
        "transport: Connection refused"
    )
    assert "s3cret-pw" not in result.output and "Max retries" not in result.output


def _range_error(url: str) -> str:
    """The error of one range query to ``url``."""
    client = PrometheusRangeClient(PrometheusSettings(prometheus_url=url))
    try:
        with pytest.raises(HistoryError) as err:
            client("up", 0.0, 60.0, 15.0)
    finally:
        client.close()
    return str(err.value)


def _error_with_password(prom: Scripted) -> str:
    """The error of one range query to ``prom`` with a password in the URL."""
    return _range_error(prom.url.replace("//", "//u:pw-9Qz@"))


def _previews_error(url: str, tmp_path: Path) -> str:
    result = CliRunner().invoke(
        app,
        ["dashboards", "--out", str(tmp_path / "d"), "--previews", str(tmp_path / "p"),
         "--prometheus-url", url],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    return str(result.stderr.splitlines()[-1])


WELCOME = b"<html><head><title>Welcome to nginx!</title></head></html>"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        pytest.param(WELCOME, WELCOME.decode(), id="html"),
        pytest.param(b'{"ok": true}', "a JSON body without data.result", id="other-json"),
    ],
)
def test_a_server_that_is_not_prometheus_is_said_to_be_reached(
    prom: Scripted, body: bytes, said: str
) -> None:
    """As ``recommend`` says it: reached, but not Prometheus' API (not "cannot be reached")."""
    prom.answers = [(200, body)]
    err = _error_with_password(prom)
    assert err == (
        f"Prometheus at {prom.url.replace('//', '//u:***@')} does not answer as Prometheus' "
        f"HTTP API: bad_response: not a Prometheus API answer: {said} (check the URL and its "
        "path prefix)"
    )


def test_previews_say_the_same_of_a_server_that_is_not_prometheus(
    prom: Scripted, tmp_path: Path
) -> None:
    prom.answers = [(200, WELCOME)]
    url = prom.url.replace("//", "//x:pw-9Qz@")
    assert _previews_error(url, tmp_path) == (
        f"vllm-scaler: previews: Prometheus at {prom.url.replace('//', '//x:***@')}/ does not "
        "answer as Prometheus' HTTP API: bad_response: not a Prometheus API answer: "
        f"{WELCOME.decode()} (check the URL and its path prefix)"
    )


def test_previews_name_an_http_error_with_its_reason_phrase(prom: Scripted, tmp_path: Path) -> None:
    prom.answers = [(501, b"Unsupported method ('POST')")]
    assert _previews_error(f"{prom.url}/prom", tmp_path) == (
        f"vllm-scaler: previews: Prometheus at {prom.url}/prom answered HTTP 501 Not "
        "Implemented: Unsupported method ('POST')"
    )


def test_a_refusal_names_the_credentials_actually_sent(prom: Scripted, no_backoff: None) -> None:
    prom.answers = [(401, b"denied")]
    err = _error_with_password(prom)
    assert err.endswith(
        "(authentication: basic (user-info in the URL)); check --prometheus-url's user-info "
        "(VLLM_SCALER_PROMETHEUS_URL)"
    )
    assert "pw-9Qz" not in err


def test_a_404_under_api_v1_hints_the_base_url(
    prom: Scripted, no_backoff: None, tmp_path: Path
) -> None:
    """The URL is Prometheus' base URL: one with /api/v1 gets /api/v1/api/v1/query, a 404."""
    prom.answers = [(404, b"404 page not found")]
    hint = f"; the URL's path holds /api/v1, which is added to it: give the base URL ({prom.url})"
    assert _range_error(f"{prom.url}/api/v1").endswith(f"404 page not found{hint}")
    previews = _previews_error(f"{prom.url}/api/v1", tmp_path)
    assert previews.endswith(f"404 page not found{hint}"), previews
    # another 404 gets no hint
    assert _range_error(f"{prom.url}/prom").endswith("HTTP 404 Not Found: 404 page not found")


def test_https_to_a_plain_http_server_hints_http(
    prom: Scripted, no_backoff: None, tmp_path: Path
) -> None:
    url = prom.url.replace("http://", "https://")
    hint = f"; the server may speak plain http: try {prom.url}"
    assert _range_error(url).endswith(f"wrong version number{hint}")
    previews = _previews_error(url, tmp_path)
    assert "WRONG_VERSION_NUMBER" in previews and previews.endswith(f"{hint}/"), previews
