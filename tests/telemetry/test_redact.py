"""The one place secrets are masked: which forms of a secret, text written in pieces, and
everything a process prints once the streams are installed (Python's own tracebacks too)."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scaler.config.secrets import (
    mask,
    register_file_secret,
    register_header,
    register_private_key_file,
    register_secret,
    register_url_credentials,
    shortened,
)
from scaler.telemetry.redact import RedactingStream, redacting


@pytest.mark.parametrize(
    ("secret", "printed", "masked"),
    [
        pytest.param("tok/en+1=", "?t=tok%2Fen%2B1%3D&x", "?t=***&x", id="percent-encoded"),
        pytest.param('q"uote\\d', '{"a": "q\\"uote\\\\d"}', '{"a": "***"}', id="JSON-escaped"),
        pytest.param("gr\u00fc\u00dfe-tk", '"gr\\u00fc\\u00dfe-tk"', '"***"', id="JSON-ASCII"),
        pytest.param("n\u00e9e-token", "b'n\\xc3\\xa9e-token'", "b'***'", id="bytes repr"),
    ],
)
def test_a_secret_is_masked_in_the_forms_it_is_printed_in(
    secret: str, printed: str, masked: str
) -> None:
    register_secret(secret)
    assert mask(f"server said {printed}") == f"server said {masked}"


def test_url_user_info_masks_the_password_as_written_decoded_and_as_basic() -> None:
    register_url_credentials(
        "https://alice:p%40ss-w0rd@thanos.example:9090/prom?access_token=qt-77x9"
    )
    basic = base64.b64encode(b"alice:p@ss-w0rd").decode()
    text = f"p%40ss-w0rd p@ss-w0rd Basic {basic} token=qt-77x9 alice"
    assert mask(text) == "*** *** Basic *** token=*** alice"  # the user name is no secret


@pytest.mark.parametrize("userinfo", ["tok3n-Alone-71", "tok3n-Alone-71:"])
def test_a_user_name_without_a_password_is_masked_as_the_credential(userinfo: str) -> None:
    """httpx and requests send it as Basic with an empty password; proxies carry tokens so."""
    register_url_credentials(f"http://{userinfo}@[::1]:9090/")
    basic = base64.b64encode(b"tok3n-Alone-71:").decode()
    assert mask(f"tok3n-Alone-71 Basic {basic}") == "*** Basic ***"


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("carol:bare-pass-81@prom:9090", "bare-pass-81"),
        ("ftp:carol:bare-pass-82@prom", "bare-pass-82"),
        ("prom//carol:bare-pass-83@x", "bare-pass-83"),
        ("http://carol:bare/pass-84@prom:9090/", "bare/pass-84"),
        ("http://carol:bare?pass-85@prom:9090/", "bare?pass-85"),
        ("http://carol:bare#pass-86@prom:9090/", "bare#pass-86"),
    ],
    ids=[
        "no scheme",
        "no slashes",
        "slashes before the user-info",
        "slash in the password",
        "? in the password",
        "# in the password",
    ],
)
def test_the_user_info_of_a_url_without_a_host_part_is_masked(url: str, password: str) -> None:
    """No host part (``user:password@host``): still the credential of whoever wrote it."""
    register_url_credentials(url)
    assert mask(f"<{password}>") == "<***>"  # no other text: other tests mask words too
    assert password not in mask(f"{url} carol:{password}")


def test_header_values_are_masked_but_tenant_ids_are_not() -> None:
    basic = base64.b64encode(b"bob:hdr-pass-31").decode()
    register_header("Authorization", f"Basic {basic}")
    register_header("X-Api-Key", "key-5150-zz")
    register_header("X-Scope-OrgID", "tenant-llm")
    text = f"Basic {basic} / {basic} / bob:hdr-pass-31 / key-5150-zz / tenant-llm"
    assert mask(text) == "*** / *** / *** / *** / tenant-llm"


def test_files_register_their_content_not_their_path(tmp_path: Path) -> None:
    token = tmp_path / "token-file"
    token.write_text("  file-token-8812\n")
    key = tmp_path / "client.key"
    body = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "Zm9vYmFyYmF6cXV4"]
    key.write_text(
        "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END PRIVATE KEY-----\n"
    )
    assert register_file_secret(token) == "file-token-8812"
    register_private_key_file(key)
    assert mask(f"{token}: file-token-8812") == f"{token}: ***"
    assert (
        mask(key.read_text())
        == "-----BEGIN PRIVATE KEY-----\n***\n***\n-----END PRIVATE KEY-----\n"
    )


def test_short_values_are_not_masked() -> None:
    register_secret("ab1")
    assert mask("ab1 stays") == "ab1 stays"


def test_a_text_cut_short_masks_a_secret_before_the_cut() -> None:
    """Cut first, the last characters of a secret would be gone and the rest no longer
    match: it would be printed all but those characters."""
    register_secret("cut-secret-Hq71Zk04mB")
    text = "x" * 280 + " Bearer cut-secret-Hq71Zk04mB " + "y" * 50
    assert shortened(text, 300) == "x" * 280 + " Bearer *** " + "y" * 5 + "..."
    assert shortened("a  b\n c", 300) == "a b c"  # one line; short texts are not cut


def test_a_text_cut_short_never_ends_in_the_start_of_a_secret() -> None:
    """A secret the text does not hold in full (the server cut it) is masked where the cut
    ends in its start; a start shorter than the shortest secret is ordinary text."""
    register_secret("tail-secret-Vb52Wn")
    assert shortened("a" * 285 + "tail-secret-Vb5", 300) == "a" * 285 + "tail-secret-Vb5"
    assert shortened("a" * 290 + "tail-secret-Vb5-cut", 300) == "a" * 290 + "***..."
    assert shortened("a" * 294 + "tail-secret", 300) == "a" * 294 + "tai..."


def test_a_secret_written_in_pieces_is_masked_as_a_whole() -> None:
    register_secret("piece-secret-4471")
    register_secret("piece-secret-4471-longer")
    target = io.StringIO()
    stream = RedactingStream(target)
    for piece in ("Bearer piece-", "secret-", "4471", "-longer and", " piece-"):
        stream.write(piece)
    assert target.getvalue() == "Bearer *** and "  # "piece-" may start a secret: held
    stream.write("wise\n")
    assert target.getvalue() == "Bearer *** and piece-wise\n"
    stream.write("ends with piece-secret-44")
    stream.flush()  # a flush releases what was held, masked as far as it goes
    assert target.getvalue().endswith("ends with piece-secret-44")


def test_redacting_wraps_once_and_answers_as_its_target() -> None:
    target = io.StringIO()
    stream = redacting(target)  # type: ignore[arg-type]
    assert redacting(stream) is stream
    assert not stream.isatty()
    assert stream.encoding == "utf-8"
    assert not hasattr(stream, "buffer")  # bytes would bypass the masking


def test_everything_a_process_prints_after_install_is_masked(tmp_path: Path) -> None:
    """print, warnings, logging, structlog, a thread's and the main thread's tracebacks."""
    secret = "proc-secret-93qk"
    script = textwrap.dedent(
        f"""
        import logging, threading, warnings
        from scaler.telemetry import redact
        from scaler.telemetry.logging import configure_logging
        import structlog
        redact.install()
        redact.register_secret({secret!r})
        print("print", {secret!r})
        warnings.warn("warning " + {secret!r})
        logging.getLogger("lib").warning("stdlib log %s", {secret!r})
        configure_logging("json")
        structlog.get_logger().error("structlog", token={secret!r})
        def boom():
            raise ValueError("thread " + {secret!r})
        t = threading.Thread(target=boom)
        t.start(); t.join()
        raise RuntimeError("main " + {secret!r})
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert secret not in out
    assert "print ***" in done.stdout
    assert "warning ***" in done.stderr
    assert "stdlib log ***" in done.stderr
    assert (
        json.loads(next(ln for ln in done.stderr.splitlines() if "structlog" in ln))["token"]
        == "***"
    )
    assert "ValueError: thread ***" in done.stderr
    assert "RuntimeError: main ***" in done.stderr
