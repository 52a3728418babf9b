"""Process settings: environment, overrides and clear errors."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from scaler.config.settings import (
    PrometheusSettings,
    SettingsError,
    load_settings,
    redact_url,
    unknown_env_vars,
)
from scaler.sources.prometheus.http import build_http_client


def test_environment_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_URL", "http://prom:9090")
    monkeypatch.setenv("VLLM_SCALER_CONTROL_INTERVAL_SECONDS", "30")
    s = load_settings(control_interval_seconds=5.0, metrics_port=None)
    assert str(s.prometheus_url) == "http://prom:9090/"
    assert s.control_interval_seconds == 5.0  # the option wins over the environment
    assert s.metrics_port == 9100  # None means "not given"


def test_invalid_value_names_variable_value_and_expectation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_SCALER_CONTROL_INTERVAL_SECONDS", "soon")
    with pytest.raises(SettingsError) as err:
        load_settings()
    text = str(err.value)
    assert "VLLM_SCALER_CONTROL_INTERVAL_SECONDS" in text
    assert "'soon'" in text
    assert text == ("VLLM_SCALER_CONTROL_INTERVAL_SECONDS: value 'soon': expected a number")


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_policy_file_variable_says_it_is_empty(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("VLLM_SCALER_POLICY_FILE", value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert _one_line(err) == (
        f"VLLM_SCALER_POLICY_FILE: value {value!r}: the value is empty; expected the path of "
        "a YAML policy file"
    )


def test_negative_interval_is_refused() -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(control_interval_seconds=-1.0)
    assert _one_line(err) == (
        "VLLM_SCALER_CONTROL_INTERVAL_SECONDS: value -1: expected a number > 0"
    )


def test_several_invalid_values_are_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SCALER_LOG_LEVEL", "loud")
    with pytest.raises(SettingsError) as err:
        load_settings(metrics_port=70000, lease_duration_seconds=1.0)
    assert str(err.value).splitlines() == [
        "VLLM_SCALER_METRICS_PORT: value 70000: expected a number <= 65535",
        "VLLM_SCALER_LOG_LEVEL: value 'loud': expected one of 'debug', 'info', 'warning', 'error'",
    ]
    monkeypatch.delenv("VLLM_SCALER_LOG_LEVEL")
    with pytest.raises(SettingsError) as err:
        load_settings(lease_duration_seconds=1.0)
    assert _one_line(err) == (
        "VLLM_SCALER_LEASE_RETRY_PERIOD_SECONDS (--lease-retry-period-seconds) 2, "
        "VLLM_SCALER_LEASE_RENEW_DEADLINE_SECONDS (--lease-renew-deadline-seconds) 10, "
        "VLLM_SCALER_LEASE_DURATION_SECONDS (--lease-duration-seconds) 1: expected retry "
        "period < renew deadline < lease duration"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param('{"X-Scope-OrgID": "t1"}', {"X-Scope-OrgID": "t1"}, id="JSON"),
        pytest.param(
            "X-Scope-OrgID=t1, X-Other=two",
            {"X-Scope-OrgID": "t1", "X-Other": "two"},
            id="K=V pairs",
        ),
        pytest.param("", {}, id="empty"),
    ],
)
def test_prometheus_headers_json_or_pairs(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: dict[str, str]
) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", raw)
    s = load_settings()
    assert s.prometheus_headers == expected
    assert "t1" not in repr(s)  # values never in the settings' repr


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("no-equals-sign", id="no equals sign"),
        pytest.param("bad name=secret-value", id="space in a header name"),
        pytest.param("{not json", id="broken JSON"),
    ],
)
def test_invalid_headers_never_echo_the_value(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", raw)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "VLLM_SCALER_PROMETHEUS_HEADERS" in str(err.value)
    assert "secret-value" not in str(err.value) and "<redacted>" in str(err.value)


def test_a_header_name_holding_a_credential_is_shown_only_up_to_its_first_bad_character(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A curl-style ``Authorization: Bearer <token>`` whose base64 ends in ``=``: everything
    before that ``=`` reads as the header's name."""
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", "Authorization: Bearer dG9rZW5zZWNyZXQ=")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == (
        "VLLM_SCALER_PROMETHEUS_HEADERS: value <redacted>: invalid header name starting "
        "'Authorization': character 14 is not allowed in a name (the rest is not shown); "
        "expected name=value with a name of letters, digits and !#$%&'*+.^_`|~-"
    )


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        pytest.param('{"X-Api-Key": " hv-secret-1"}', "begins or ends with whitespace", id="lead"),
        pytest.param('{"X-Api-Key": "hv-secret-1\\t"}', "begins or ends with whitespace", id="tab"),
        pytest.param("X-Api-Key= hv-secret-1", "begins or ends with whitespace", id="pair lead"),
        pytest.param('{"X-Api-Key": "hv-\\u0000secret"}', "a control character", id="NUL"),
        pytest.param("X-Api-Key=hv-\x7fsecret", "a control character", id="DEL"),
        pytest.param('{"X-Api-Key": "hv-s\\u00e9cret"}', "a non-ASCII character", id="non-ASCII"),
    ],
)
def test_a_header_value_http_forbids_is_refused_at_load_naming_the_header_only(
    monkeypatch: pytest.MonkeyPatch, raw: str, why: str
) -> None:
    """httpx and requests would refuse it on the first request ("InvalidHeader")."""
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", raw)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == (
        "VLLM_SCALER_PROMETHEUS_HEADERS: value <redacted>: the value of header 'X-Api-Key' "
        f"{'holds ' if 'character' in why else ''}{why}; expected printable ASCII characters, "
        "with spaces or tabs only between them"
    )
    assert "hv-" not in str(err.value)


def test_an_empty_header_value_and_inner_spaces_are_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", '{"X-A": "", "X-B": "a b\\tc"}')
    assert load_settings().prometheus_headers == {"X-A": "", "X-B": "a b\tc"}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("https://user:pw@thanos:9090/x", "https://user:***@thanos:9090/x", id="pw"),
        # a user name alone is sent as Basic with an empty password: proxies carry tokens so
        pytest.param("http://tok3nSECRET@host:9090", "http://***@host:9090", id="user alone"),
        pytest.param("http://tok3nSECRET:@host:9090", "http://***@host:9090", id="empty pw"),
        pytest.param("http://:pw-only@host/", "http://:***@host/", id="password alone"),
        pytest.param("http://u:p@ss@host:1/", "http://u:***@host:1/", id="raw @ in password"),
        pytest.param("http://u:pw@[::1]:9090/", "http://u:***@[::1]:9090/", id="IPv6"),
        # "/", "?" or "#" in a password end the host part before its "@"
        pytest.param("http://alice:pa/ss@host:1/", "http://***@host:1/", id="slash in password"),
        pytest.param("http://alice:pa?ss@host:1/", "http://***@host:1/", id="? in password"),
        pytest.param("http://alice:pa#ss@host:1/", "http://***@host:1/", id="# in password"),
        pytest.param("http://tok/en+x=@host/", "http://***@host/", id="slash in a token"),
        pytest.param(
            "http://tok3nSECRET@[fe80::1%25eth0]/", "http://***@[fe80::1%25eth0]/", id="IPv6 zone"
        ),
        pytest.param(
            "http://u:pw@Prom.Example:99999/",
            "http://u:***@Prom.Example:99999/",
            id="host and port as written",
        ),
        pytest.param("http://prom:9090", "http://prom:9090", id="no user-info"),
        pytest.param("http://[::1]:9090", "http://[::1]:9090", id="IPv6 no user-info"),
    ],
)
def test_redact_url_masks_any_user_info_and_keeps_the_host_as_written(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_url_with_a_user_name_alone_is_never_echoed_in_a_settings_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_URL", "ftp://tok3nSECRET@prom:9090")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "tok3nSECRET" not in str(err.value)
    assert "'ftp://***@prom:9090'" in str(err.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:pw-77x@[::1]:99999", "'http://u:***@[::1]:99999'"),
        ("http://tok3nSECRET@[::1", "<redacted>"),
        ("u:pw-77x@127.0.0.1:1", "'***@127.0.0.1:1'"),
        ("tok3nSECRET@prom:9090", "'***@prom:9090'"),
        ("ftp:u:pw-77x@a@prom//x", "'***@prom//x'"),
        ("prom//u:pw-77x@a@prom", "'prom//***@prom'"),
    ],
    ids=[
        "invalid port",
        "unbalanced bracket",
        "no scheme",
        "no scheme, user alone",
        "no slashes, @ in password",
        "slashes before the user-info",
    ],
)
def test_an_invalid_url_is_shown_with_its_credential_masked(
    monkeypatch: pytest.MonkeyPatch, url: str, shown: str
) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_URL", url)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert f"VLLM_SCALER_PROMETHEUS_URL: value {shown}: " in str(err.value)
    assert "pw-77x" not in str(err.value) and "tok3nSECRET" not in str(err.value)


@pytest.mark.parametrize("password", ["Pa/ssW0rdLeak", "Pa?ssW0rdLeak", "Pa#ssW0rdLeak"])
def test_a_password_that_ends_the_host_part_early_is_told_to_be_percent_encoded(
    monkeypatch: pytest.MonkeyPatch, password: str
) -> None:
    """``/``, ``?`` or ``#`` end the host part: the parser's own reason (an invalid port
    number, ``Pa``) would send the user looking at the port."""
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_URL", f"http://admin:{password}@127.0.0.1:1")
    with pytest.raises(SettingsError) as err:
        load_settings(option_names={"prometheus_url": "--prometheus-url"})
    assert str(err.value) == (
        "VLLM_SCALER_PROMETHEUS_URL (--prometheus-url): value 'http://***@127.0.0.1:1': "
        "expected a URL such as http://user:password@prometheus:9090: a password holding "
        "'/', '?' or '#' must be percent-encoded (%2F, %3F, %23)"
    )
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_URL", "http://admin:PassW0rdLeak@127.0.0.1:x")
    with pytest.raises(SettingsError, match=r"http://prometheus:9090 \(invalid port number\)$"):
        load_settings()  # a port that is no number is still the port's fault


def test_lease_timings_must_nest() -> None:
    s = load_settings()
    assert (s.lease_retry_period_seconds, s.lease_renew_deadline_seconds) == (2.0, 10.0)
    assert (s.lease_duration_seconds, s.lease_name, s.leader_election) == (
        15.0,
        "vllm-scaler",
        None,
    )
    with pytest.raises(SettingsError) as err:
        load_settings(lease_renew_deadline_seconds=20.0)
    assert str(err.value) == (
        "VLLM_SCALER_LEASE_RETRY_PERIOD_SECONDS (--lease-retry-period-seconds) 2, "
        "VLLM_SCALER_LEASE_RENEW_DEADLINE_SECONDS (--lease-renew-deadline-seconds) 20, "
        "VLLM_SCALER_LEASE_DURATION_SECONDS (--lease-duration-seconds) 15: expected retry "
        "period < renew deadline < lease duration"
    )


def test_leader_election_default_follows_in_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from scaler.controller.app import leader_election_enabled, lease_namespace

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert leader_election_enabled(load_settings()) is False
    assert leader_election_enabled(load_settings(in_cluster=True)) is True
    assert leader_election_enabled(load_settings(in_cluster=True, leader_election=False)) is False
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    assert lease_namespace(load_settings()) == "ops"
    assert lease_namespace(load_settings(lease_namespace="x")) == "x"


# ----------------------------------------------------------- files checked at start


def _one_line(err: pytest.ExceptionInfo[SettingsError]) -> str:
    lines = str(err.value).splitlines()
    assert len(lines) == 1, str(err.value)
    return lines[0]


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        pytest.param("prometheus_ca_file", "a PEM CA bundle", id="CA file"),
        pytest.param("prometheus_bearer_token_file", "a file holding a token", id="token file"),
        pytest.param(
            "prometheus_client_cert_file", "a PEM client certificate", id="client certificate"
        ),
    ],
)
def test_missing_file_names_variable_option_value_and_expectation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, field: str, expected: str
) -> None:
    missing = tmp_path / "nonexistent"
    monkeypatch.setenv(f"VLLM_SCALER_{field.upper()}", str(missing))
    with pytest.raises(SettingsError) as err:
        load_settings({field: "--" + field.replace("_", "-")})
    assert _one_line(err) == (
        f"VLLM_SCALER_{field.upper()} (--{field.replace('_', '-')}): value '{missing}': "
        f"no such file; expected {expected}"
    )


def test_option_path_is_shown_as_text_and_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(prometheus_ca_file=tmp_path)  # as typer passes it: a Path
    assert _one_line(err) == (
        f"VLLM_SCALER_PROMETHEUS_CA_FILE: value '{tmp_path}': is a directory; "
        "expected a PEM CA bundle"
    )


def test_garbage_ca_file_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("hello\n")
    with pytest.raises(SettingsError) as err:
        load_settings(prometheus_ca_file=garbage)
    assert _one_line(err) == (
        f"VLLM_SCALER_PROMETHEUS_CA_FILE: value '{garbage}': no certificate or crl found; "
        "expected a PEM CA bundle"
    )


def test_token_file_is_checked_at_start_but_never_echoed(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok-SECRET\n")
    assert load_settings(prometheus_bearer_token_file=token).prometheus_bearer_token_file == token
    token.write_text("  \n")
    with pytest.raises(SettingsError) as err:
        load_settings(prometheus_bearer_token_file=token)
    assert _one_line(err).endswith("the file is empty; expected a file holding a token")
    token.unlink()
    token.mkdir()
    with pytest.raises(SettingsError, match="is a directory; expected a file holding a token"):
        load_settings(prometheus_bearer_token_file=token)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            b"tok-SECRET-1\ntok-SECRET-2\n",
            "the file holds 2 lines; expected one token on one line",
            id="several lines",
        ),
        pytest.param(
            b"\xff\xfetok-SECRET",
            "the file is not UTF-8 text; expected a file holding a token",
            id="not UTF-8",
        ),
        pytest.param(
            b"tok-SECRET part2\n",
            "the token holds whitespace; expected one token without spaces",
            id="whitespace inside",
        ),
    ],
)
def test_token_file_that_holds_no_single_token_is_a_settings_error(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    token = tmp_path / "token"
    token.write_bytes(content)
    with pytest.raises(SettingsError) as err:
        load_settings(prometheus_bearer_token_file=token)
    assert _one_line(err) == (
        f"VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE: value '{token}': {expected}"
    )
    assert "SECRET" not in str(err.value)


def _openssl_key(tmp_path: Path, name: str, *args: str) -> tuple[Path, Path]:
    """A self-signed certificate and its key, made with ``args`` (``-nodes``, ``-passout``)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed (needed to make a test certificate)")
    cert, key = tmp_path / f"{name}-cert.pem", tmp_path / f"{name}-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", *args, "-days", "1",
         "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def cert_and_key(tmp_path: Path) -> tuple[Path, Path]:
    return _openssl_key(tmp_path, "client", "-nodes")


def test_client_certificate_and_key_are_loaded_at_start(
    tmp_path: Path, cert_and_key: tuple[Path, Path]
) -> None:
    cert, key = cert_and_key
    s = load_settings(
        prometheus_ca_file=cert, prometheus_client_cert_file=cert, prometheus_client_key_file=key
    )
    assert (s.prometheus_client_cert_file, s.prometheus_client_key_file) == (cert, key)
    with pytest.raises(SettingsError) as err:
        load_settings(prometheus_client_cert_file=cert, prometheus_client_key_file=cert)
    assert _one_line(err) == (
        f"VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE: value '{cert}': the file holds no PEM "
        f"private key; expected an unencrypted PEM private key matching {cert}"
    )
    with pytest.raises(SettingsError) as err:  # the key is neither in the file nor given
        load_settings(prometheus_client_cert_file=cert)
    assert _one_line(err) == (
        f"VLLM_SCALER_PROMETHEUS_CLIENT_CERT_FILE (--prometheus-client-cert-file): value "
        f"'{cert}': the file holds no private key and VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE "
        "(--prometheus-client-key-file) is not set; expected the private key in "
        "VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE (--prometheus-client-key-file), or a PEM "
        "certificate file followed by its unencrypted private key"
    )
    with pytest.raises(SettingsError) as err:  # a key without its certificate
        load_settings(prometheus_client_key_file=key)
    assert _one_line(err) == (
        f"VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE (--prometheus-client-key-file): value '{key}': "
        "expected VLLM_SCALER_PROMETHEUS_CLIENT_CERT_FILE (--prometheus-client-cert-file) too: "
        "the key is the private key of a client certificate, and is sent only with it"
    )
    with pytest.raises(SettingsError, match="no such file; expected a PEM private key"):
        load_settings(prometheus_client_cert_file=cert, prometheus_client_key_file=tmp_path / "k")


def test_an_encrypted_client_key_is_refused_without_a_prompt(tmp_path: Path) -> None:
    """OpenSSL would ask for the passphrase on the terminal (or fail with EINVAL)."""
    cert, key = _openssl_key(tmp_path, "enc", "-passout", "pass:x1234")
    with pytest.raises(SettingsError) as err:
        load_settings(prometheus_client_cert_file=cert, prometheus_client_key_file=key)
    assert _one_line(err) == (
        f"VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE: value '{key}': the key is encrypted (a "
        f"passphrase); expected an unencrypted PEM private key matching {cert}"
    )
    both = tmp_path / "both.pem"
    both.write_bytes(cert.read_bytes() + key.read_bytes())
    with pytest.raises(SettingsError) as err:
        load_settings(prometheus_client_cert_file=both)
    assert _one_line(err).startswith(
        f"VLLM_SCALER_PROMETHEUS_CLIENT_CERT_FILE (--prometheus-client-cert-file): value "
        f"'{both}': its private key is encrypted (a passphrase) and "
    )
    with pytest.raises(ValueError) as built:  # the client built without the settings' check
        build_http_client(
            bearer_token_file=None, ca_file=None, timeout_seconds=1,
            client_cert_file=cert, client_key_file=key,
        )  # fmt: skip
    assert str(built.value) == (
        f"client certificate {cert} / {key}: the key is encrypted (a passphrase); expected an "
        "unencrypted PEM key"
    )


def test_a_garbled_or_foreign_client_key_says_what_was_expected(
    tmp_path: Path, cert_and_key: tuple[Path, Path]
) -> None:
    cert, key = cert_and_key
    cut = tmp_path / "cut.pem"
    cut.write_bytes(key.read_bytes()[:500])  # truncated: OpenSSL says "PEM lib"
    _, other = _openssl_key(tmp_path, "other", "-nodes")
    faults = {cut: "is not a readable PEM private key", other: "does not match the certificate"}
    for bad, fault in faults.items():
        with pytest.raises(SettingsError) as err:
            load_settings(prometheus_client_cert_file=cert, prometheus_client_key_file=bad)
        assert _one_line(err) == (
            f"VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE: value '{bad}': the key {fault}; expected "
            f"an unencrypted PEM private key matching {cert}"
        )


def test_unknown_variables_are_named_with_the_closest_setting() -> None:
    env = {
        "VLLM_SCALER_INTERVALL": "5",
        "VLLM_SCALER_KUBE_CONFIG": "kc",
        "VLLM_SCALER_PROMETHEUS_TOKEN_FILE": "t",
        "VLLM_SCALER_DRY_RUN": "1",
        "VLLM_SCALER_FOO": "1",
        "VLLM_SCALER_OUTPUT": "json",
        "VLLM_SCALER_INTERVAL": "5",
        "VLLM_SCALER_POLICY": "p.yaml",
        "VLLM_SCALER_PROMETEUS_URL": "http://x",
        "VLLM_SCALER_METRICS_PORT": "9100",  # known
        "OTHER": "x",
    }
    found = dict(unknown_env_vars(env))
    assert found["VLLM_SCALER_INTERVALL"] == "VLLM_SCALER_CONTROL_INTERVAL_SECONDS"
    assert found["VLLM_SCALER_KUBE_CONFIG"] == "VLLM_SCALER_KUBECONFIG"
    assert found["VLLM_SCALER_PROMETHEUS_TOKEN_FILE"] == "VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE"
    # no setting is close to these: no guess (the command line names the options instead)
    assert found["VLLM_SCALER_DRY_RUN"] is found["VLLM_SCALER_FOO"] is None
    assert found["VLLM_SCALER_OUTPUT"] is None
    assert set(found) - {
        "VLLM_SCALER_INTERVALL",
        "VLLM_SCALER_KUBE_CONFIG",
        "VLLM_SCALER_PROMETHEUS_TOKEN_FILE",
        "VLLM_SCALER_DRY_RUN",
        "VLLM_SCALER_FOO",
    } == {
        "VLLM_SCALER_OUTPUT",
        "VLLM_SCALER_INTERVAL",
        "VLLM_SCALER_POLICY",
        "VLLM_SCALER_PROMETEUS_URL",
    }
    assert found["VLLM_SCALER_INTERVAL"] == "VLLM_SCALER_CONTROL_INTERVAL_SECONDS"
    assert found["VLLM_SCALER_POLICY"] == "VLLM_SCALER_POLICY_FILE"
    assert found["VLLM_SCALER_PROMETEUS_URL"] == "VLLM_SCALER_PROMETHEUS_URL"


def test_the_start_up_line_puts_the_token_file_after_its_kind(tmp_path: Path) -> None:
    token = tmp_path / "tok"
    token.write_text("s3cret")
    s = PrometheusSettings(
        prometheus_url="http://prom:9090",
        prometheus_bearer_token_file=token,
        prometheus_headers={"X-Api-Key": "k-8812"},
    )
    assert s.describe_prometheus().startswith(
        f"prometheus http://prom:9090/ (auth: bearer token file {token} (re-read on every "
        "request) and header X-Api-Key; headers: X-Api-Key (value masked); "
    )


def test_a_header_that_is_no_known_credential_is_not_named_as_authentication() -> None:
    """The documentation's own example, ``X-Scope-OrgID=team-a,K=V``: ``K`` is masked (it might be
    a credential) but not claimed as authentication; the tenant id's value is printed."""
    s = PrometheusSettings(
        prometheus_url="http://prom:9090", prometheus_headers="X-Scope-OrgID=team-a,K=V"
    )
    assert s.prometheus_auth == "none"
    assert s.describe_prometheus() == (
        "prometheus http://prom:9090/ (auth: none; headers: K (value masked), X-Scope-OrgID; "
        "CA: system; client certificate: none; timeout 10s)"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            "X-Key=v,,=",
            "a header name is empty; expected name=value with a name of letters, digits and "
            "!#$%&'*+.^_`|~-",
            id="empty name",
        ),
        pytest.param(
            "X-Key=hv-secret-1,x-key=hv-secret-2",
            "header 'x-key' is given twice (as 'X-Key' too; header names are case-insensitive); "
            "expected each header once",
            id="names differing in case",
        ),
        pytest.param(
            '{"X-Key": "hv-secret-1", "X-Key": "hv-secret-2"}',
            "header 'X-Key' is given twice (as 'X-Key' too; header names are case-insensitive); "
            "expected each header once",
            id="a JSON key twice",
        ),
    ],
)
def test_an_empty_or_repeated_header_name_says_so(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: str
) -> None:
    monkeypatch.setenv("VLLM_SCALER_PROMETHEUS_HEADERS", raw)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == f"VLLM_SCALER_PROMETHEUS_HEADERS: value <redacted>: {expected}"


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_a_number_setting_that_is_not_finite_says_so(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("VLLM_SCALER_CONTROL_INTERVAL_SECONDS", raw)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert str(err.value) == (
        f"VLLM_SCALER_CONTROL_INTERVAL_SECONDS: value '{raw}': expected a finite number"
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        pytest.param(
            "VLLM_SCALER_LEASE_NAME",
            "Bad_Name",
            "not a valid name; expected a DNS subdomain (RFC 1123): at most 253 characters, "
            "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
            id="name-characters",
        ),
        pytest.param(
            "VLLM_SCALER_LEASE_NAME",
            "a" * 300,
            "300 characters; expected a DNS subdomain (RFC 1123): at most 253 characters, "
            "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
            id="name-too-long",
        ),
        pytest.param(
            "VLLM_SCALER_LEASE_NAME",
            "",
            "empty; expected a DNS subdomain (RFC 1123): at most 253 characters, "
            "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
            id="name-empty",
        ),
        pytest.param(
            "VLLM_SCALER_LEASE_NAMESPACE",
            "Bad_NS",
            "not a valid name; expected a DNS label (RFC 1123): at most 63 characters, "
            "lowercase letters, digits and '-', starting and ending with a letter or digit",
            id="namespace-characters",
        ),
        pytest.param(
            "VLLM_SCALER_LEASE_NAMESPACE",
            "team.a",
            "not a valid name; expected a DNS label (RFC 1123): at most 63 characters, "
            "lowercase letters, digits and '-', starting and ending with a letter or digit",
            id="namespace-with-a-dot",
        ),
        pytest.param(
            "VLLM_SCALER_LEASE_NAMESPACE",
            "n" * 64,
            "64 characters; expected a DNS label (RFC 1123): at most 63 characters, "
            "lowercase letters, digits and '-', starting and ending with a letter or digit",
            id="namespace-too-long",
        ),
    ],
)
def test_an_invalid_lease_name_or_namespace_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    """The API server would refuse the Lease (422 Invalid) on every attempt: a follower
    forever. Refused when the settings are read instead, naming the variable and value."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert _one_line(err) == f"{variable}: value {value!r}: {message}"


def test_valid_lease_names_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    longest = ".".join(["a" * 63] * 4)[:253]
    for name in ("vllm-scaler", "team-a.vllm-scaler", "0", longest):
        monkeypatch.setenv("VLLM_SCALER_LEASE_NAME", name)
        assert load_settings().lease_name == name
    monkeypatch.setenv("VLLM_SCALER_LEASE_NAMESPACE", "n" * 63)
    assert load_settings().lease_namespace == "n" * 63


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        ("VLLM_SCALER_PROMETHEUS_BEARER_TOKEN_FILE", "the path of a file holding a token"),
        ("VLLM_SCALER_PROMETHEUS_CA_FILE", "the path of a PEM CA bundle"),
        ("VLLM_SCALER_PROMETHEUS_CLIENT_CERT_FILE", "the path of a PEM file"),
        ("VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE", "the path of a PEM file"),
    ],
)
def test_an_empty_file_variable_says_it_is_empty(
    monkeypatch: pytest.MonkeyPatch, variable: str, expected: str
) -> None:
    """Not "is a directory" (Path("") is the current directory)."""
    monkeypatch.setenv(variable, "")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert f"{variable}: value '': the value is empty; expected {expected}" in str(err.value)
