"""``url_hint`` masks the user-info of the URL it echoes, whatever its caller passes."""

from __future__ import annotations

import pytest

from scaler.sources.prometheus import url_hint

WRONG_VERSION = "ConnectError: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1000)"


@pytest.mark.parametrize(
    ("url", "secret", "shown"),
    [
        pytest.param(
            "http://viewer:pw-Hq83k@prom:9090/api/v1", "pw-Hq83k", "http://viewer:***@prom:9090",
            id="password",
        ),
        pytest.param(
            "http://tok-7Rv2c@prom:9090/prom/api/v1/", "tok-7Rv2c", "http://***@prom:9090/prom",
            id="token-only-user",
        ),
        pytest.param(
            "http://viewer:pw/Hq?83k@prom:9090/api/v1", "pw/Hq?83k", "http://***@prom:9090",
            id="password-with-slash",
        ),
        pytest.param(
            "http://viewer:***@prom:9090/api/v1", "", "http://viewer:***@prom:9090",
            id="already-masked",
        ),
    ],
)  # fmt: skip
def test_the_base_url_hint_masks_the_user_info(url: str, secret: str, shown: str) -> None:
    hint = url_hint(url, 404, "HTTP 404 Not Found: 404 page not found")
    assert hint == (
        f"; the URL's path holds /api/v1, which is added to it: give the base URL ({shown})"
    )
    assert not secret or secret not in hint


@pytest.mark.parametrize(
    ("url", "secret", "shown"),
    [
        pytest.param("https://viewer:pw-Hq83k@prom:9090", "pw-Hq83k", "http://viewer:***@prom:9090",
                     id="password"),
        pytest.param("https://tok-7Rv2c@prom:9090/", "tok-7Rv2c", "http://***@prom:9090/",
                     id="token-only-user"),
    ],
)  # fmt: skip
def test_the_plain_http_hint_masks_the_user_info(url: str, secret: str, shown: str) -> None:
    hint = url_hint(url, None, WRONG_VERSION)
    assert hint == f"; the server may speak plain http: try {shown}"
    assert secret not in hint


def test_no_hint_for_other_failures() -> None:
    assert url_hint("http://viewer:pw-Hq83k@prom:9090/prom", 404, "not found") == ""
    assert url_hint("https://tok-7Rv2c@prom:9090", None, "ConnectError: refused") == ""
