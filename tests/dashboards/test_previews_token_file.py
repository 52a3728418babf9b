"""``dashboards --previews`` says a bearer token file that became unreadable mid-run as every
command says a request not sent: the URL, the file and what was expected, never the
token."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaler.cli import app

EMPTY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


class _Rotating(ThreadingHTTPServer):
    """Answers every query with no series; after the first, the token file is rewritten with
    ``rotated`` (a rotation caught mid-write)."""

    def __init__(self, token_file: Path, rotated: bytes) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token_file = token_file
        self.rotated = rotated
        self.authorizations: list[str | None] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Rotating

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.authorizations.append(self.headers.get("Authorization"))
        self.server.token_file.write_bytes(self.server.rotated)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(EMPTY)))
        self.end_headers()
        self.wfile.write(EMPTY)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("tok-Jx81qPz\n")
    return path


@pytest.fixture
def server(token_file: Path) -> Iterator[_Rotating]:
    srv = _Rotating(token_file, b"tok-Jx81qPz\nSECRET-half-rotated\n")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_token_file_unreadable_after_the_start_is_a_request_not_sent(
    server: _Rotating, token_file: Path, tmp_path: Path
) -> None:
    port = server.server_address[1]
    result = CliRunner().invoke(
        app,
        ["dashboards", "--out", str(tmp_path / "d"), "--previews", str(tmp_path / "p"),
         "--minutes", "1", "--prometheus-url", f"http://127.0.0.1:{port}",
         "--prometheus-bearer-token-file", str(token_file)],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    # the first query carried the token; the next was never sent
    assert server.authorizations == ["Bearer tok-Jx81qPz"]
    assert result.stderr.splitlines()[-1] == (
        f"vllm-scaler: previews: Prometheus at http://127.0.0.1:{port}/ cannot be reached: "
        f"transport: request not sent: cannot read bearer token file {token_file}: the file "
        "holds 2 lines; expected one token on one line"
    )
    assert "tok-Jx81qPz" not in result.output and "SECRET" not in result.output
