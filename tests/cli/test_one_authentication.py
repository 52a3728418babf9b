"""One authentication per Prometheus client: the URL's user-info (Basic), the bearer token file
and an ``Authorization`` header exclude each other, as in Prometheus' own configuration.

Two of them set together would make one silently replace the other (the token wins over the
URL's password in httpx); every command that reads Prometheus refuses the combination at start,
exit code 2, naming both settings and never a value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaler.cli import app
from scaler.config.settings import SettingsError, load_settings

PASSWORD = "pw-SECRET-7731"
TOKEN = "tok-SECRET-9917"
HEADER_TOKEN = "hdr-SECRET-5521"
URL_SETTING = "VLLM_SCALER_PROMETHEUS_URL (--prometheus-url) user-info (HTTP Basic authentication)"
TOKEN_SETTING = "VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE (--prometheus-bearer-token-file)"
HEADER_SETTING = "an Authorization header in VLLM_SCALER_PROMETHEUS_HEADERS (--prometheus-headers)"
EXPECTED = "are set together; expected one authentication for Prometheus requests: keep one of them"

COMMANDS = [
    pytest.param(["run"], id="run"),
    pytest.param(["recommend", "--once"], id="recommend"),
    pytest.param(["backtest", "--start", "now-1h", "--no-plot", "--no-progress"], id="backtest"),
    pytest.param(["dashboards", "--out", "{tmp}/d", "--previews", "{tmp}/p"], id="dashboards"),
]


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_basic_auth_with_a_token_file(
    command: list[str], tmp_path: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE", str(token_file))
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    url = f"http://scaler:{PASSWORD}@127.0.0.1:9/"
    result = CliRunner().invoke(app, [*args, "--prometheus-url", url])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("vllm-scaler: ") and result.output.count("\n") == 1
    assert f"{URL_SETTING} and {TOKEN_SETTING} {EXPECTED}" in result.output
    for secret in (PASSWORD, TOKEN):
        assert secret not in result.output
    assert not (tmp_path / "d").exists()  # nothing ran


@pytest.mark.parametrize(
    ("url", "headers", "use_token", "named"),
    [
        pytest.param(
            "http://u@prom:9090", None, True, [URL_SETTING, TOKEN_SETTING], id="user only + token"
        ),
        pytest.param(
            f"http://u:{PASSWORD}@prom:9090",
            f"Authorization=Bearer {HEADER_TOKEN}",
            False,
            [URL_SETTING, HEADER_SETTING],
            id="password + header",
        ),
        pytest.param(
            "http://prom:9090",
            f'{{"authorization": "Bearer {HEADER_TOKEN}", "X-Scope-OrgID": "t"}}',
            True,
            [TOKEN_SETTING, HEADER_SETTING],
            id="token + header (any case)",
        ),
        pytest.param(
            f"http://u:{PASSWORD}@prom:9090",
            f"Authorization=Bearer {HEADER_TOKEN}",
            True,
            [URL_SETTING, TOKEN_SETTING, HEADER_SETTING],
            id="all three",
        ),
    ],
)
def test_any_two_authentications_are_refused(
    url: str, headers: str | None, use_token: bool, named: list[str], token_file: Path
) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(
            prometheus_url=url,
            prometheus_headers=headers,
            prometheus_bearer_token_file=token_file if use_token else None,
        )
    assert str(err.value) == f"{' and '.join(named)} {EXPECTED}"
    for secret in (PASSWORD, TOKEN, HEADER_TOKEN):
        assert secret not in str(err.value)


@pytest.mark.parametrize(
    ("url", "headers", "use_token", "auth"),
    [
        pytest.param(f"http://u:{PASSWORD}@prom:9090", None, False, "basic (user-info in the URL)"),
        pytest.param("http://prom:9090", None, True, "bearer token file"),
        pytest.param("http://prom:9090", "Authorization=Basic abcd", False, "Authorization header"),
        pytest.param("http://prom:9090", "X-Scope-OrgID=t", False, "none"),
        # a credential header other than Authorization: named (its value never)
        pytest.param(
            "http://prom:9090",
            f"X-Api-Key={HEADER_TOKEN},X-Scope-OrgID=t",
            False,
            "header X-Api-Key",
        ),
        pytest.param(
            "http://prom:9090",
            "X-Api-Key=a,X-Auth=b,K=c",
            True,
            "bearer token file and headers X-Api-Key, X-Auth",
        ),
        # neither a credential's name nor a tenant's: masked, but no authentication claimed
        pytest.param("http://prom:9090", "X-Scope-OrgID=team-a,K=V", False, "none"),
    ],
)
def test_one_authentication_alone_is_accepted(
    url: str, headers: str | None, use_token: bool, auth: str, token_file: Path
) -> None:
    settings = load_settings(
        prometheus_url=url,
        prometheus_headers=headers,
        prometheus_bearer_token_file=token_file if use_token else None,
    )
    assert settings.prometheus_auth == auth


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_token_given_where_its_file_belongs_is_never_echoed(
    command: list[str], how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token itself passed as the token file's path is no file: refused, exit code 2,
    naming the setting, and the value masked (it may be the token)."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    if how == "option":
        args += ["--prometheus-bearer-token-file", TOKEN]
    else:
        monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE", TOKEN)
    result = CliRunner().invoke(app, [*args, "--prometheus-url", "http://127.0.0.1:9/"])
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"vllm-scaler: {TOKEN_SETTING}: value masked (it names no file and no path into an "
        "existing directory, so it may be the token itself given where its path belongs): no "
        "such file; expected a file holding a token\n"
    )
    assert TOKEN not in result.output
    assert not (tmp_path / "d").exists()  # nothing ran


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_token_file_path_with_a_typo_is_named(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path into a directory that exists is a path, not a token: the error shows it, so
    that a typo in a mounted file's name can be seen."""
    typo = tmp_path / "tokn"
    args = ["recommend", "--once", "--prometheus-url", "http://127.0.0.1:9/"]
    if how == "option":
        args += ["--prometheus-bearer-token-file", str(typo)]
    else:
        monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE", str(typo))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"vllm-scaler: {TOKEN_SETTING}: value '{typo}': no such file; expected a file holding "
        "a token\n"
    )
