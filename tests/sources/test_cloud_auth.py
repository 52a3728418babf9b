"""Managed Prometheus authentication through the client of every command, each against local
stand-ins that check what they are sent (tests/support/cloud_endpoints.py): AWS SigV4 with
the pod's web identity (STS AssumeRoleWithWebIdentity, the signature recomputed server-side
by botocore's own signer), Google workload identity (the GCE metadata server), Azure
workload identity (the Entra token endpoint). Each run is a process of its own
(tests/sources/cloud_probe.py: every cloud library reads its environment once), with the
masking streams of the command line: no credential in any output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scaler.config.settings import PrometheusSettings, SettingsError, load_model_settings
from tests.support.cloud_endpoints import (
    FakeEntra,
    FakeGceMetadata,
    FakeSts,
    Seen,
    prometheus_api,
    sigv4_problem,
)
from tests.support.tls import make_certificates

ROOT = Path(__file__).resolve().parents[2]
ROLE = "arn:aws:iam::123456789012:role/vllm-scaler"
REGION = "eu-west-1"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The probe's environment: this one without any cloud's or vllm-scaler's variables, a
    home of its own (no ~/.aws, no gcloud configuration), plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "GOOGLE_", "GCE_", "AZURE_", "VLLM_SCALER_", "CLOUDSDK_"))
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        CLOUDSDK_CONFIG=str(home / "gcloud"),
        AWS_CONFIG_FILE=str(home / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "none"),
        AWS_EC2_METADATA_DISABLED="true",
        PYTHONPATH=str(ROOT),
        **extra,
    )
    return env


def _probe(
    env: dict[str, str], queries: int = 1, rotate: tuple[Path, str] | None = None
) -> tuple[list[dict[str, Any]], str]:
    """Run the probe; ``rotate``: the file rewritten with the text after the first query."""
    extra = [str(rotate[0]), rotate[1]] if rotate else []
    out = subprocess.run(
        [sys.executable, "-m", "tests.sources.cloud_probe", str(queries), *extra],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    return lines, out.stdout + out.stderr


def _leaks(output: str, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s and s in output]


# --- AWS SigV4 ----------------------------------------------------------------------------


def _aws(tmp_path: Path, sts: FakeSts, prom_url: str, role: str = ROLE) -> dict[str, str]:
    """IRSA's variables (the role, the projected token) as EKS' webhook sets them, with STS's
    endpoint at the stand-in."""
    return _env(
        tmp_path,
        VLLM_SCALER_PROMETHEUS_URL=prom_url + "/workspaces/ws-1234",
        VLLM_SCALER_PROMETHEUS_CLOUD_AUTH="aws-sigv4",
        VLLM_SCALER_PROMETHEUS_AWS_REGION=REGION,
        AWS_ROLE_ARN=role,
        AWS_WEB_IDENTITY_TOKEN_FILE=str(sts.token_file),
        AWS_ENDPOINT_URL_STS=sts.endpoint.url,
        AWS_REGION=REGION,
    )


def test_aws_sigv4_with_the_pods_web_identity(tmp_path: Path) -> None:
    """The web identity token is exchanged at STS for the role; each query is signed for
    (region, aps) with those credentials, as botocore's own signer computes it server-side;
    a rotated token file is exchanged again once the credentials near their end."""
    pytest.importorskip("botocore")
    token_file = tmp_path / "token"
    token_file.write_text("eyJhbGciOiJSUzI1NiJ9.web-identity-one.sig\n")
    # credentials valid 5 minutes: inside botocore's refresh window, fetched for each query
    sts = FakeSts(ROLE, token_file, lifetime_seconds=300)
    prom = prometheus_api(lambda seen: sigv4_problem(seen, sts.issued, REGION, "aps"))
    rotated = "eyJhbGciOiJSUzI1NiJ9.web-identity-two.sig\n"
    with sts.endpoint.serving(), prom.serving():
        env = _aws(tmp_path, sts, prom.url)
        lines, output = _probe(env, queries=3, rotate=(token_file, rotated))
    assert [line["status"] for line in lines] == ["ok", "ok", "ok"], output
    assert [t.strip() for t in sts.tokens] == [
        "eyJhbGciOiJSUzI1NiJ9.web-identity-one.sig",
        rotated.strip(),
        rotated.strip(),
    ]  # one exchange per query (each nearly expired), the rotated token from the second on
    queries = [s for s in prom.seen if s.path.endswith("/api/v1/query")]
    assert len(queries) == 3
    assert len({s.headers["x-amz-security-token"] for s in queries}) == 3
    assert all(s.headers["x-amz-security-token"] for s in queries)
    assert "auth: aws-sigv4 (region eu-west-1, service aps)" in output
    secrets = [c.secret_key for c in sts.issued.values()]
    secrets += [c.session_token for c in sts.issued.values()] + sts.tokens
    assert _leaks(output, secrets) == []


def test_aws_sigv4_refused_and_unsigned_answers_say_why_without_a_credential(
    tmp_path: Path,
) -> None:
    """STS refusing the token (it echoes it back) stops the query before it is sent; a
    Prometheus that refuses the signature (echoing the header) is a 403: neither output holds
    the token, the secret key, the session token or the signature."""
    pytest.importorskip("botocore")
    token_file = tmp_path / "token"
    token_file.write_text("eyJhbGciOiJSUzI1NiJ9.accepted.sig\n")
    sts = FakeSts(ROLE, token_file)
    refuse = prometheus_api(lambda seen: f"bad signature: {seen.headers.get('authorization')}")
    with sts.endpoint.serving(), refuse.serving():
        wrong = _aws(tmp_path, sts, refuse.url, role=ROLE + "-other")
        (refused_by_sts,), output = _probe(wrong)
        (refused_by_prom,), output2 = _probe(_aws(tmp_path, sts, refuse.url))
    assert refused_by_sts["status"] == "transport", output
    assert refused_by_sts["detail"].startswith(
        "request not sent: aws-sigv4: cannot get AWS credentials: "
    ), output
    assert "InvalidIdentityToken" in output
    assert (refused_by_prom["status"], refused_by_prom["http_status"]) == ("query_error", 403)
    assert "bad signature: AWS4-HMAC-SHA256 Credential=ASIATEST" in output2
    signatures = [
        s.headers["authorization"].rpartition("Signature=")[2] for s in refuse.seen if s.headers
    ]
    secrets = [c.secret_key for c in sts.issued.values()]
    secrets += [c.session_token for c in sts.issued.values()] + sts.tokens + signatures
    assert _leaks(output + output2, secrets) == []


# --- Google -------------------------------------------------------------------------------


def test_google_workload_identity_from_the_metadata_server(tmp_path: Path) -> None:
    """google-auth finds the (stand-in) GKE metadata server, asks it for a token of the
    monitoring.read scope, and every query carries it; the token is fetched once for two
    queries (valid an hour) and never printed."""
    pytest.importorskip("google.auth")
    metadata = FakeGceMetadata()

    def check(seen: Seen) -> str | None:
        auth = seen.headers.get("authorization", "")
        if auth.removeprefix("Bearer ") not in metadata.tokens:
            return f"unknown token in {auth}"
        return None

    prom = prometheus_api(check)
    with metadata.endpoint.serving(), prom.serving():
        host = metadata.endpoint.url.removeprefix("http://")
        env = _env(
            tmp_path,
            VLLM_SCALER_PROMETHEUS_URL=prom.url
            + "/v1/projects/test-project/location/global/prometheus",
            VLLM_SCALER_PROMETHEUS_CLOUD_AUTH="google",
            GCE_METADATA_HOST=host,
            GCE_METADATA_IP=host,
        )
        lines, output = _probe(env, queries=2)
    assert [line["status"] for line in lines] == ["ok", "ok"], output
    assert len(metadata.tokens) == 1
    assert metadata.scopes == ["https://www.googleapis.com/auth/monitoring.read"]
    assert "auth: google (workload identity or default credentials)" in output
    assert _leaks(output, metadata.tokens) == []


# --- Azure --------------------------------------------------------------------------------


def test_azure_workload_identity_at_the_entra_token_endpoint(tmp_path: Path) -> None:
    """azure-identity's workload identity sends the federated token (the projected
    service-account token of the webhook) as the client assertion, for the Azure Monitor
    scope; every query carries the Entra token, which no output shows, nor the assertion."""
    pytest.importorskip("azure.identity")
    certs = make_certificates(tmp_path)
    import ssl

    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(certs["srv"], certs["srv-key"])
    federated = tmp_path / "azure-identity-token"
    federated.write_text("eyJhbGciOiJSUzI1NiJ9.federated-service-account.sig")
    entra = FakeEntra("tenant-1", "client-1", {federated.read_text()}, tls)

    def check(seen: Seen) -> str | None:
        auth = seen.headers.get("authorization", "")
        return None if auth.removeprefix("Bearer ") in entra.tokens else f"refused {auth}"

    prom = prometheus_api(check)
    with entra.endpoint.serving(), prom.serving():
        env = _env(
            tmp_path,
            VLLM_SCALER_PROMETHEUS_URL=prom.url,
            VLLM_SCALER_PROMETHEUS_CLOUD_AUTH="azure",
            AZURE_AUTHORITY_HOST=entra.endpoint.url,
            AZURE_TENANT_ID="tenant-1",
            AZURE_CLIENT_ID="client-1",
            AZURE_FEDERATED_TOKEN_FILE=str(federated),
            REQUESTS_CA_BUNDLE=str(certs["ca"]),
        )
        lines, output = _probe(env, queries=2)
        federated.write_text("eyJhbGciOiJSUzI1NiJ9.not-the-webhooks.sig")
        (refused,), output2 = _probe(env)
    assert [line["status"] for line in lines] == ["ok", "ok"], output
    assert entra.scopes[0] == "https://prometheus.monitor.azure.com/.default"
    assert len(entra.tokens) == 1  # kept for two queries: valid an hour
    assert refused["status"] == "transport"
    assert refused["detail"].startswith("request not sent: azure: cannot get an access token")
    assert "AADSTS700024" in output2
    assertions = [
        "eyJhbGciOiJSUzI1NiJ9.federated-service-account.sig",
        "eyJhbGciOiJSUzI1NiJ9.not-the-webhooks.sig",
    ]
    assert _leaks(output + output2, entra.tokens + assertions) == []


# --- settings -----------------------------------------------------------------------------


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> PrometheusSettings:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_model_settings(PrometheusSettings, {})


def test_the_sigv4_region_comes_from_the_setting_the_url_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("botocore")
    amp = "https://aps-workspaces.ap-southeast-2.amazonaws.com/workspaces/ws-1"
    by_url = _settings(
        monkeypatch,
        VLLM_SCALER_PROMETHEUS_URL=amp,
        VLLM_SCALER_PROMETHEUS_CLOUD_AUTH="aws-sigv4",
    )
    assert by_url.prometheus_sigv4_region() == "ap-southeast-2"
    assert by_url.prometheus_summary()["auth"] == "aws-sigv4 (region ap-southeast-2, service aps)"
    by_env = _settings(
        monkeypatch,
        VLLM_SCALER_PROMETHEUS_URL="https://amp-proxy.internal/",
        VLLM_SCALER_PROMETHEUS_CLOUD_AUTH="aws-sigv4",
        AWS_REGION="us-west-2",
    )
    assert by_env.prometheus_sigv4_region() == "us-west-2"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"VLLM_SCALER_PROMETHEUS_URL": "https://amp-proxy.internal/",
             "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH": "aws-sigv4"},
            "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH (--prometheus-cloud-auth) aws-sigv4: no region: "
            "expected VLLM_SCALER_PROMETHEUS_AWS_REGION (--prometheus-aws-region)",
            id="no-region",
        ),
        pytest.param(
            {"VLLM_SCALER_PROMETHEUS_AWS_REGION": "us-east-1"},
            "VLLM_SCALER_PROMETHEUS_AWS_REGION (--prometheus-aws-region) is set with "
            "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH (--prometheus-cloud-auth) 'none': expected it "
            "only with aws-sigv4",
            id="region-without-sigv4",
        ),
        pytest.param(
            {"VLLM_SCALER_PROMETHEUS_CLOUD_AUTH": "aws-sigv4",
             "VLLM_SCALER_PROMETHEUS_AWS_REGION": "us-east-1",
             "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH_SCOPE": "x"},
            "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH_SCOPE (--prometheus-cloud-auth-scope) is set with "
            "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH (--prometheus-cloud-auth) 'aws-sigv4'",
            id="scope-with-sigv4",
        ),
        pytest.param(
            {"VLLM_SCALER_PROMETHEUS_CLOUD_AUTH": "gcp"},
            "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH: value 'gcp': expected one of",
            id="unknown-kind",
        ),
        pytest.param(
            {"VLLM_SCALER_PROMETHEUS_CLOUD_AUTH": "google",
             "VLLM_SCALER_PROMETHEUS_URL": "http://user:Passw0rdCloud@prom:9090"},
            "are set together; expected one authentication",
            id="two-authentications",
        ),
    ],
)  # fmt: skip
def test_cloud_auth_settings_are_checked_at_start(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    pytest.importorskip("botocore")
    pytest.importorskip("google.auth")
    with pytest.raises(SettingsError) as err:
        _settings(monkeypatch, **env)
    assert message in str(err.value)
    assert "Passw0rdCloud" not in str(err.value)


def test_a_cloud_auth_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the image without the cloud extras: the module cannot be found."""
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(SettingsError) as err:
        _settings(monkeypatch, VLLM_SCALER_PROMETHEUS_CLOUD_AUTH="azure")
    assert (
        "VLLM_SCALER_PROMETHEUS_CLOUD_AUTH (--prometheus-cloud-auth) azure: azure.identity is "
        "not installed: pip install 'vllm-scaler[azure]'"
    ) in str(err.value)


def test_the_backtest_session_carries_the_same_authentication(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The backtest's requests session (prometheus-api-client) is authenticated by the same
    signer as the controller's httpx client, over the exact method, URL and body it sends; a
    signer that cannot get credentials stops the range query with the reason."""
    pytest.importorskip("prometheus_api_client")
    pytest.importorskip("google.auth")
    from scaler.backtest.history import HistoryError, PrometheusRangeClient
    from scaler.sources.prometheus import cloud_auth

    class Stub:
        name = "google"
        fail = False

        def __init__(self) -> None:
            self.signed: list[tuple[str, str]] = []

        def headers(self, method: str, url: str, headers: Any, body: bytes) -> dict[str, str]:
            if self.fail:
                raise cloud_auth.CloudAuthError("google: cannot get an access token: offline")
            self.signed.append((method, url))
            return {"Authorization": "Bearer stub-token-for-the-backtest"}

    stub = Stub()
    monkeypatch.setattr(cloud_auth, "signer_for", lambda settings: stub)
    prom = prometheus_api(
        lambda seen: (
            None
            if seen.headers.get("authorization") == "Bearer stub-token-for-the-backtest"
            else "unauthenticated"
        )
    )
    with prom.serving():
        settings = _settings(
            monkeypatch,
            VLLM_SCALER_PROMETHEUS_URL=prom.url,
            VLLM_SCALER_PROMETHEUS_CLOUD_AUTH="google",
        )
        client = PrometheusRangeClient(settings)
        assert client("vllm:num_requests_waiting", 0, 600, 60) == []
        stub.fail = True
        with pytest.raises(HistoryError) as err:
            client("vllm:num_requests_waiting", 0, 600, 60)
        client.close()
    assert str(err.value) == "request not sent: google: cannot get an access token: offline"
    ((method, url),) = stub.signed
    assert method == "GET" and "/api/v1/query_range?" in url and "step=60" in url
