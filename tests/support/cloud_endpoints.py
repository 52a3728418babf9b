"""Local stand-ins of what a managed Prometheus' authentication talks to, each checking what
it is sent: a Prometheus query API that verifies the request's signature or token, AWS STS
(AssumeRoleWithWebIdentity), the GCE metadata server of GKE's workload identity, and the
Microsoft Entra token endpoint of Azure's workload identity. Threads of http.server on
127.0.0.1; no network beyond loopback."""

from __future__ import annotations

import json
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    """One request an endpoint received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}

    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}


Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Endpoint:
    """An HTTP endpoint whose ``answer`` replies to each request; ``seen`` records them."""

    answer: Callable[[Seen], Reply]
    tls: ssl.SSLContext | None = None
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    @contextmanager
    def serving(self) -> Iterator[Endpoint]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                )
                endpoint.seen.append(seen)
                status, headers, body = endpoint.answer(seen)
                self.send_response(status)
                for k, v in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reply

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        scheme = "https" if self.tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


def _json(status: int, doc: object, **headers: str) -> Reply:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(doc).encode()


def prometheus_api(check: Callable[[Seen], str | None]) -> Endpoint:
    """A query API answering an empty vector to each request ``check`` accepts (None), and
    403 with ``check``'s complaint otherwise (a server that echoes what it refused)."""

    def answer(seen: Seen) -> Reply:
        problem = check(seen)
        if problem is not None:
            return _json(403, {"status": "error", "errorType": "forbidden", "error": problem})
        return _json(200, {"status": "success", "data": {"resultType": "vector", "result": []}})

    return Endpoint(answer)


@dataclass
class Issued:
    access_key: str
    secret_key: str
    session_token: str


class FakeSts:
    """AWS STS's AssumeRoleWithWebIdentity (the query protocol botocore's web identity
    provider speaks): accepts the role ``role_arn`` for the token currently in
    ``token_file``, and issues new credentials on each call, valid ``lifetime_seconds``."""

    def __init__(self, role_arn: str, token_file: Path, lifetime_seconds: float = 3600) -> None:
        self.role_arn = role_arn
        self.token_file = token_file
        self.lifetime_seconds = lifetime_seconds
        self.issued: dict[str, Issued] = {}
        self.tokens: list[str] = []
        self.endpoint = Endpoint(self._answer)

    def _answer(self, seen: Seen) -> Reply:
        form = seen.form()
        token = form.get("WebIdentityToken", "")
        self.tokens.append(token)
        if (
            form.get("Action") != "AssumeRoleWithWebIdentity"
            or form.get("RoleArn") != self.role_arn
            or token.strip() != self.token_file.read_text().strip()
        ):
            body = (
                "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
                f"<Message>Token {token} is not valid for {form.get('RoleArn')}</Message>"
                "</Error><RequestId>1</RequestId></ErrorResponse>"
            )
            return 400, {"Content-Type": "text/xml"}, body.encode()
        n = len(self.issued) + 1
        creds = Issued(f"ASIATEST{n:08d}", secrets.token_urlsafe(30), secrets.token_urlsafe(60))
        self.issued[creds.access_key] = creds
        expires = datetime.fromtimestamp(time.time() + self.lifetime_seconds, UTC)
        body = f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>{creds.access_key}</AccessKeyId>
      <SecretAccessKey>{creds.secret_key}</SecretAccessKey>
      <SessionToken>{creds.session_token}</SessionToken>
      <Expiration>{expires.strftime("%Y-%m-%dT%H:%M:%SZ")}</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>system:serviceaccount:vllm-scaler:vllm-scaler</SubjectFromWebIdentityToken>
    <AssumedRoleUser>
      <Arn>{self.role_arn}/vllm-scaler</Arn>
      <AssumedRoleId>AROATEST:vllm-scaler</AssumedRoleId>
    </AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"""
        return 200, {"Content-Type": "text/xml"}, body.encode()


def sigv4_problem(seen: Seen, issued: dict[str, Issued], region: str, service: str) -> str | None:
    """What is wrong with a request's AWS Signature Version 4, recomputed with botocore's own
    signer from the credentials STS issued (None when it is right): the scope (access key,
    date, region, service), the session token, the signed headers and the signature."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = seen.headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return f"not a SigV4 Authorization header: {auth}"
    parts = dict(p.strip().split("=", 1) for p in auth.removeprefix("AWS4-HMAC-SHA256 ").split(","))
    access_key, date, got_region, got_service, terminal = parts["Credential"].split("/")
    creds = issued.get(access_key)
    if creds is None:
        return f"unknown access key {access_key}"
    stamp = seen.headers.get("x-amz-date", "")
    if (date, got_region, got_service, terminal) != (stamp[:8], region, service, "aws4_request"):
        return f"wrong credential scope {parts['Credential']}"
    if seen.headers.get("x-amz-security-token") != creds.session_token:
        return "wrong or missing X-Amz-Security-Token"
    signed = parts["SignedHeaders"].split(";")
    if not {"host", "x-amz-date", "x-amz-security-token"} <= set(signed):
        return f"signed headers {signed}"
    host = seen.headers["host"]
    request = AWSRequest(
        method=seen.method,
        url=f"http://{host}{seen.path}",
        data=seen.body,
        headers={h: seen.headers[h] for h in signed},
    )
    request.context["timestamp"] = stamp
    signer = SigV4Auth(
        Credentials(creds.access_key, creds.secret_key, creds.session_token), service, region
    )
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    if expected != parts["Signature"]:
        return f"signature mismatch for {auth}"
    return None


class FakeGceMetadata:
    """The GCE metadata server as GKE's workload identity serves it: the ping, the project,
    the service account and its access token (a new one per call), each only with
    ``Metadata-Flavor: Google``."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.scopes: list[str] = []
        self.endpoint = Endpoint(self._answer)

    def _answer(self, seen: Seen) -> Reply:
        flavor = {"Metadata-Flavor": "Google"}
        if seen.headers.get("metadata-flavor") != "Google":
            return 403, {}, b"Missing Metadata-Flavor: Google"
        path = urlsplit(seen.path).path
        account = "/computeMetadata/v1/instance/service-accounts/default/"
        if path in ("", "/"):
            return 200, flavor, b""
        if path == "/computeMetadata/v1/project/project-id":
            return 200, {**flavor, "Content-Type": "text/plain"}, b"test-project"
        if path == account:
            doc = {"aliases": ["default"], "email": "scaler@test-project.iam.gserviceaccount.com",
                   "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}  # fmt: skip
            return _json(200, doc, **flavor)
        if path == account + "token":
            self.scopes.append(seen.query().get("scopes", ""))
            token = "ya29." + secrets.token_urlsafe(40)
            self.tokens.append(token)
            return _json(
                200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}, **flavor
            )
        return 404, flavor, b"not found"


class FakeEntra:
    """Microsoft Entra ID's token endpoint for a workload identity: a client credentials grant
    whose client assertion is one of the ``accepted`` federated tokens (the service-account
    tokens the federation trusts), for ``tenant`` and ``client_id`` (TLS: azure-identity takes
    https authorities only)."""

    def __init__(
        self, tenant: str, client_id: str, accepted: set[str], tls: ssl.SSLContext
    ) -> None:
        self.tenant = tenant
        self.client_id = client_id
        self.accepted = accepted
        self.tokens: list[str] = []
        self.scopes: list[str] = []
        self.endpoint = Endpoint(self._answer, tls=tls)

    def _answer(self, seen: Seen) -> Reply:
        form = seen.form()
        if (
            seen.method != "POST"
            or urlsplit(seen.path).path != f"/{self.tenant}/oauth2/v2.0/token"
            or form.get("grant_type") != "client_credentials"
            or form.get("client_id") != self.client_id
            or form.get("client_assertion_type")
            != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            or form.get("client_assertion", "").strip() not in self.accepted
        ):
            return _json(
                401,
                {
                    "error": "invalid_client",
                    "error_description": "AADSTS700024: assertion "
                    f"{form.get('client_assertion')} refused",
                },
            )
        self.scopes.append(form.get("scope", ""))
        token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + secrets.token_urlsafe(60)
        self.tokens.append(token)
        return _json(
            200,
            {
                "token_type": "Bearer",
                "expires_in": 3599,
                "ext_expires_in": 3599,
                "access_token": token,
            },
        )
