"""Managed Prometheus authentication: AWS SigV4, Google and Azure workload identity.

One :class:`RequestSigner` per setting of ``prometheus_cloud_auth``
(:class:`~scaler.config.settings.PrometheusSettings`), as KEDA's Prometheus scaler offers:

- ``aws-sigv4``: each request signed with AWS Signature Version 4 by botocore
  (``SigV4Auth``), for Amazon Managed Service for Prometheus (service ``aps``). Credentials
  come from botocore's default chain: on EKS the pod's web identity (IRSA's
  ``AWS_ROLE_ARN`` and ``AWS_WEB_IDENTITY_TOKEN_FILE``, exchanged with STS
  AssumeRoleWithWebIdentity) or EKS Pod Identity, on a laptop the AWS profile; refreshed by
  botocore before they expire.
- ``google``: ``Authorization: Bearer`` with an OAuth access token from google-auth's
  application default credentials: on GKE the metadata server of workload identity, on a
  laptop ``gcloud auth application-default login``; for Google Cloud Managed Service for
  Prometheus (scope ``monitoring.read``).
- ``azure``: ``Authorization: Bearer`` with a Microsoft Entra token from azure-identity:
  workload identity (``AZURE_FEDERATED_TOKEN_FILE``, ``AZURE_CLIENT_ID``, ``AZURE_TENANT_ID``,
  ``AZURE_AUTHORITY_HOST``, set by the workload identity webhook) where it is configured,
  else ``DefaultAzureCredential`` (the Azure CLI on a laptop, a managed identity); for Azure
  Monitor managed service for Prometheus (scope ``https://prometheus.monitor.azure.com/.default``).

Each is an optional extra (``aws``, ``google``, ``azure``; ``cloud`` for all three), imported
only when chosen. Every credential obtained (access token, session token, secret key, the
federated token read from its file, the signature) is registered as a secret before it is
used, so no output shows it. Obtaining credentials blocks (an STS, metadata or Entra call):
:class:`CloudAuth` does it in a worker thread for the async client.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx

from scaler.config.secrets import register_file_secret, register_secret, shortened
from scaler.config.settings import PrometheusSettings

__all__ = [
    "AwsSigV4Signer",
    "AzureSigner",
    "CloudAuth",
    "CloudAuthError",
    "GoogleSigner",
    "RequestSigner",
    "cloud_auth_for",
    "requests_auth_for",
    "signer_for",
]

#: A token is fetched again when it expires within this many seconds.
REFRESH_MARGIN_SECONDS = 300.0


class CloudAuthError(OSError):
    """Credentials for a managed Prometheus could not be obtained: the message names the
    provider and the reason (masked, cut short), never a credential. An ``OSError``, so that
    a query reports it as ``transport``: "request not sent"."""


class RequestSigner(Protocol):
    """Adds a cloud's authentication to one HTTP request."""

    name: str

    def headers(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        """The headers to set on the request (``Authorization`` and the like).

        Args:
            method: the HTTP method (``POST``).
            url: the full URL, query string included.
            headers: the request's headers (the signer reads ``Content-Type``).
            body: the request body, as sent (SigV4 signs its hash).

        Raises:
            CloudAuthError: no credentials could be obtained.
        """
        ...


def _failed(provider: str, what: str, err: BaseException) -> CloudAuthError:
    reason = shortened(f"{type(err).__name__}: {err}", 300)
    return CloudAuthError(f"{provider}: cannot get {what}: {reason}")


def _register_token_file(variable: str) -> None:
    """Mask the projected token a cloud's library reads from the file named by ``variable``
    (a Kubernetes service-account token that the cloud exchanges for its own)."""
    path = os.environ.get(variable)
    if path:
        register_file_secret(Path(path))


class AwsSigV4Signer:
    """AWS Signature Version 4 over each request, with botocore's signer and credentials.

    Args:
        region: the signature's region (the workspace's).
        service: the signing name (``aps`` for Amazon Managed Service for Prometheus).
    """

    name = "aws-sigv4"

    def __init__(self, region: str, service: str) -> None:
        import botocore.session

        self.region = region
        self.service = service
        self._session = botocore.session.get_session()
        self._credentials: Any = None
        self._lock = threading.Lock()

    def headers(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        _register_token_file("AWS_WEB_IDENTITY_TOKEN_FILE")
        try:
            with self._lock:  # one refresh at a time (botocore's own lock is per object)
                if self._credentials is None:
                    self._credentials = self._session.get_credentials()
                if self._credentials is None:
                    raise LookupError(
                        "no credentials in botocore's chain (on EKS: the ServiceAccount's "
                        "eks.amazonaws.com/role-arn annotation, or an EKS Pod Identity association)"
                    )
                frozen = self._credentials.get_frozen_credentials()
        except Exception as err:
            raise _failed(self.name, "AWS credentials", err) from None
        register_secret(frozen.secret_key)
        if frozen.token:
            register_secret(frozen.token)
        # signed: the host (botocore adds it from the URL), the date and the body's type
        signed = {k: v for k, v in headers.items() if k.lower() == "content-type"}
        request = AWSRequest(method=method, url=url, data=body, headers=signed)
        SigV4Auth(frozen, self.service, self.region).add_auth(request)
        out = {k: str(v) for k, v in request.headers.items() if k.lower() != "content-type"}
        signature = out.get("Authorization", "").rpartition("Signature=")[2]
        register_secret(signature)
        return out


class _TokenSigner:
    """``Authorization: Bearer <token>`` with a token kept until it nearly expires."""

    name = ""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._token = ""
        self._expires = 0.0
        self._lock = threading.Lock()

    def _fetch(self) -> tuple[str, float]:
        """A new token and the Unix time it expires at."""
        raise NotImplementedError

    def headers(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> dict[str, str]:
        with self._lock:
            if not self._token or self._expires - self._clock() < REFRESH_MARGIN_SECONDS:
                try:
                    token, expires = self._fetch()
                except Exception as err:
                    raise _failed(self.name, "an access token", err) from None
                register_secret(token)
                self._token, self._expires = token, expires
            return {"Authorization": f"Bearer {self._token}"}


class GoogleSigner(_TokenSigner):
    """An OAuth access token from google-auth's application default credentials (on GKE,
    workload identity's metadata server), for ``scopes``."""

    name = "google"

    def __init__(self, scopes: list[str], clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self.scopes = scopes
        self._credentials: Any = None

    def _fetch(self) -> tuple[str, float]:
        import google.auth
        import google.auth.transport.urllib3
        import urllib3

        request = google.auth.transport.urllib3.Request(urllib3.PoolManager())  # type: ignore[no-untyped-call]
        if self._credentials is None:
            _register_token_file("GOOGLE_APPLICATION_CREDENTIALS")
            self._credentials, _ = google.auth.default(scopes=self.scopes, request=request)
        self._credentials.refresh(request)
        expiry = self._credentials.expiry  # naive UTC
        expires = (
            expiry.replace(tzinfo=datetime.UTC).timestamp()
            if expiry is not None
            else self._clock() + 3600
        )
        return str(self._credentials.token), expires


class AzureSigner(_TokenSigner):
    """A Microsoft Entra token from azure-identity for ``scope``: workload identity where its
    variables are set, else ``DefaultAzureCredential``."""

    name = "azure"

    def __init__(self, scope: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self.scope = scope
        self._credential: Any = None

    def _fetch(self) -> tuple[str, float]:
        from azure.identity import DefaultAzureCredential, WorkloadIdentityCredential

        _register_token_file("AZURE_FEDERATED_TOKEN_FILE")
        if self._credential is None:
            if os.environ.get("AZURE_FEDERATED_TOKEN_FILE"):
                self._credential = WorkloadIdentityCredential()
            else:
                self._credential = DefaultAzureCredential()
        token = self._credential.get_token(self.scope)
        return str(token.token), float(token.expires_on)


#: The default OAuth scope of each token provider.
DEFAULT_SCOPES = {
    "google": "https://www.googleapis.com/auth/monitoring.read",
    "azure": "https://prometheus.monitor.azure.com/.default",
}


def signer_for(settings: PrometheusSettings) -> RequestSigner | None:
    """The signer ``settings.prometheus_cloud_auth`` asks for (None for ``none``).

    Raises:
        ImportError: the provider's extra is not installed (the settings check it at start).
    """
    kind = settings.prometheus_cloud_auth
    if kind == "aws-sigv4":
        region = settings.prometheus_sigv4_region()
        assert region is not None  # the settings refuse aws-sigv4 without one
        return AwsSigV4Signer(region, settings.prometheus_aws_service)
    scope = settings.prometheus_cloud_auth_scope or DEFAULT_SCOPES.get(kind, "")
    if kind == "google":
        return GoogleSigner([scope])
    if kind == "azure":
        return AzureSigner(scope)
    return None


class CloudAuth(httpx.Auth):
    """httpx authentication by a :class:`RequestSigner`: the signer's headers on each request
    (the body is read first: SigV4 signs it); in a worker thread for the async client, where
    obtaining credentials would block the event loop."""

    requires_request_body = True

    def __init__(self, signer: RequestSigner) -> None:
        self.signer = signer

    def __repr__(self) -> str:
        return f"CloudAuth({self.signer.name})"

    def _sign(self, request: httpx.Request) -> None:
        added = self.signer.headers(
            request.method, str(request.url), dict(request.headers), request.content
        )
        request.headers.update(added)

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        self._sign(request)
        yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await asyncio.to_thread(self._sign, request)
        yield request


def cloud_auth_for(settings: PrometheusSettings) -> CloudAuth | None:
    """The httpx authentication of ``settings``' managed Prometheus, or None."""
    signer = signer_for(settings)
    return CloudAuth(signer) if signer is not None else None


def requests_auth_for(settings: PrometheusSettings) -> Callable[[Any], Any] | None:
    """The same authentication for a requests session (the backtest's prometheus-api-client):
    a callable ``auth`` that sets the signer's headers on each prepared request; None for
    ``none``."""
    signer = signer_for(settings)
    if signer is None:
        return None

    def sign(request: Any) -> Any:
        body = request.body or b""
        data = body.encode() if isinstance(body, str) else bytes(body)
        request.headers.update(
            signer.headers(request.method, request.url, dict(request.headers), data)
        )
        return request

    return sign
