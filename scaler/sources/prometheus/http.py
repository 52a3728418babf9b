"""HTTP to Prometheus: the client (TLS, bearer token, headers, a managed Prometheus'
authentication: :mod:`~scaler.sources.prometheus.cloud_auth`) and one instant query.

:func:`client_for` (async) and :func:`sync_client_for` build the httpx clients of every command
from one :class:`~scaler.config.settings.PrometheusSettings` (the backtest's requests session
takes the same settings and :func:`read_bearer_token`); :func:`instant_query` sends one query
as a POST form body and turns every transport, HTTP and API fault into a named
:class:`~scaler.sources.prometheus.answers.QueryOutcome` status (it never raises for them).
Secrets (the token at each read, a password in the URL) are registered for masking before use.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from scaler.config.secrets import register_secret, register_url_credentials, token_in
from scaler.config.settings import (
    EncryptedKeyError,
    PrometheusSettings,
    load_client_certificate,
    redact_url,
)
from scaler.core.signals import SignalStatus
from scaler.sources.prometheus.answers import (
    Answer,
    BadResponse,
    QueryOutcome,
    answer_problem,
    decode_json,
    parse_vector,
    paused_gc,
    short_detail,
)
from scaler.sources.promql import QueryKind, promql_duration

__all__ = [
    "BearerTokenFileAuth",
    "TokenFileError",
    "build_http_client",
    "client_for",
    "instant_query",
    "query_body",
    "read_bearer_token",
    "register_url_credentials",
    "request_problem",
    "sync_client_for",
    "url_hint",
]


class TokenFileError(OSError):
    """The bearer token file cannot be read; the message names the file, never the token."""


class BearerTokenFileAuth(httpx.Auth):
    """``Authorization: Bearer <token>`` with the token re-read from a file on every request.

    Re-reading picks up rotated tokens (projected service-account tokens rotate hourly).
    The token is never logged and not part of ``repr``.

    Raises (from the request):
        TokenFileError: the file cannot be read; :class:`PrometheusSource` reports
            ``transport`` with a detail naming the file (never its content).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"BearerTokenFileAuth(path={str(self.path)!r})"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {read_bearer_token(self.path)}"
        yield request


def read_bearer_token(path: Path) -> str:
    """The token in ``path`` (stripped), registered as a secret before it is used.

    Raises:
        TokenFileError: the file cannot be read, or holds no single token
            (:func:`~scaler.config.secrets.token_in`: not UTF-8, empty, several lines,
            whitespace inside); the message names the file and the reason, never the content.
    """
    try:
        data = path.read_bytes()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise TokenFileError(f"cannot read bearer token file {path}: {reason}") from None
    try:
        token = token_in(data)
    except ValueError as err:
        raise TokenFileError(f"cannot read bearer token file {path}: {err}") from None
    register_secret(token)
    return token


def build_http_client(
    *,
    bearer_token_file: Path | None,
    ca_file: Path | None,
    timeout_seconds: float,
    headers: Mapping[str, str] | None = None,
    client_cert_file: Path | None = None,
    client_key_file: Path | None = None,
) -> httpx.AsyncClient:
    """Build the async HTTP client :class:`PrometheusSource` uses, from explicit parts
    (commands use :func:`client_for`, which takes them from the settings).

    Args:
        bearer_token_file: file holding a bearer token, re-read at each request; None for
            no authentication.
        ca_file: PEM bundle to verify Prometheus' TLS certificate; None for system CAs.
        timeout_seconds: per-request timeout (connect, read, write, pool).
        headers: extra headers on every request (for example ``X-Scope-OrgID`` for a
            multi-tenant Thanos/Mimir front end).
        client_cert_file: PEM client certificate for mutual TLS (it may also hold the key).
        client_key_file: PEM key of the client certificate, when in a separate file.

    The caller owns the client and closes it (``await client.aclose()``).

    Raises:
        ValueError: a CA or client certificate file cannot be loaded (at start); the
            message names the file and the reason. :class:`~scaler.config.settings.Settings`
            checks the same files first, naming the setting.
    """
    return httpx.AsyncClient(
        **_client_options(
            bearer_token_file=bearer_token_file,
            ca_file=ca_file,
            timeout_seconds=timeout_seconds,
            headers=headers,
            client_cert_file=client_cert_file,
            client_key_file=client_key_file,
        )
    )


def client_for(settings: PrometheusSettings) -> httpx.AsyncClient:
    """The async httpx client of ``settings`` (token file, CA, client certificate, headers,
    timeout), its credentials registered as secrets. Raises ValueError as
    :func:`build_http_client`."""
    settings.register_prometheus_secrets()
    return httpx.AsyncClient(**_settings_options(settings))


def sync_client_for(settings: PrometheusSettings) -> httpx.Client:
    """The blocking httpx client of ``settings``: the same configuration as :func:`client_for`."""
    settings.register_prometheus_secrets()
    return httpx.Client(**_settings_options(settings))


def _settings_options(settings: PrometheusSettings) -> dict[str, Any]:
    from scaler.sources.prometheus.cloud_auth import cloud_auth_for  # its extra: when asked

    options = _client_options(
        bearer_token_file=settings.prometheus_bearer_token_file,
        ca_file=settings.prometheus_ca_file,
        timeout_seconds=settings.prometheus_timeout_seconds,
        headers=settings.prometheus_headers,
        client_cert_file=settings.prometheus_client_cert_file,
        client_key_file=settings.prometheus_client_key_file,
    )
    cloud = cloud_auth_for(settings)
    if cloud is not None:  # the settings allow no other authentication beside it
        options["auth"] = cloud
    return options


def _client_options(
    *,
    bearer_token_file: Path | None,
    ca_file: Path | None,
    timeout_seconds: float,
    headers: Mapping[str, str] | None,
    client_cert_file: Path | None,
    client_key_file: Path | None,
) -> dict[str, Any]:
    """Keyword arguments of ``httpx.Client``/``httpx.AsyncClient`` (the same for both)."""
    verify: ssl.SSLContext | bool = True
    if ca_file is not None or client_cert_file is not None:
        try:
            ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
        except OSError as err:  # ssl.SSLError is an OSError
            raise ValueError(f"CA file {ca_file}: {_os_reason(err)}") from None
        if client_cert_file is not None:
            files = f"{client_cert_file}" + (f" / {client_key_file}" if client_key_file else "")
            try:
                load_client_certificate(ctx, client_cert_file, client_key_file)
            except EncryptedKeyError as err:
                raise ValueError(f"client certificate {files}: {err}") from None
            except OSError as err:
                raise ValueError(f"client certificate {files}: {_os_reason(err)}") from None
        verify = ctx
    auth = BearerTokenFileAuth(bearer_token_file) if bearer_token_file is not None else None
    return {
        "auth": auth,
        "verify": verify,
        "timeout": httpx.Timeout(timeout_seconds),
        "headers": dict(headers or {}),
        "follow_redirects": False,
    }


def _os_reason(err: OSError) -> str:
    if isinstance(err, ssl.SSLError):
        return str(err.reason or err).replace("_", " ").lower()
    return err.strerror or str(err)


async def instant_query(
    client: httpx.AsyncClient, url: str, kind: QueryKind, promql: str, *, timeout_seconds: float
) -> Answer:
    """Run one instant query (``POST url`` with ``query`` and ``timeout`` form fields).

    Args:
        client: the HTTP client (see :func:`build_http_client`).
        url: the query endpoint, ``<base>/api/v1/query``.
        kind: which query of the cycle this is.
        promql: the expression.
        timeout_seconds: deadline of the whole exchange (also sent to Prometheus).

    Returns:
        An :class:`~scaler.sources.prometheus.answers.Answer`; never raises for network or
        Prometheus faults (each is the outcome's status).
    """
    start = time.monotonic()
    body, failed = await query_body(
        client, url, kind, promql, timeout_seconds=timeout_seconds, start=start
    )
    if failed is not None:
        return Answer(failed, [])
    try:
        with paused_gc():
            series, bad, warnings = parse_vector(body)
    except BadResponse as err:
        return Answer(
            QueryOutcome(
                kind,
                SignalStatus.BAD_RESPONSE,
                detail=short_detail(str(err)),
                duration_seconds=time.monotonic() - start,
                query=promql,
                http_status=200,
            ),
            [],
        )
    return Answer(
        QueryOutcome(
            kind,
            SignalStatus.OK,
            series=len(series),
            duration_seconds=time.monotonic() - start,
            query=promql,
            warnings=warnings,
            http_status=200,
        ),
        series,
        tuple(bad),
    )


def request_problem(err: Exception, timeout_seconds: float) -> tuple[SignalStatus, str]:
    """Why a request to Prometheus got no answer, the same for every command: ``timeout`` (no
    answer within ``timeout_seconds``) or ``transport`` with the error in a few words (the
    connection or TLS failed, too many redirects, an invalid URL; ``request not sent`` when
    the token file or another local file could not be read).

    Args:
        err: what the request raised: an ``httpx.HTTPError`` or an ``OSError`` (asyncio's
            ``TimeoutError`` and :class:`TokenFileError` included).
        timeout_seconds: the client's timeout, named in the detail of a timeout.
    """
    if isinstance(err, TimeoutError | httpx.TimeoutException):  # before OSError: it is one
        return SignalStatus.TIMEOUT, f"no answer within {timeout_seconds}s"
    if isinstance(err, TokenFileError):
        return SignalStatus.TRANSPORT, f"request not sent: {err}"
    if isinstance(err, OSError):
        return SignalStatus.TRANSPORT, f"request not sent: {err.strerror or err}"
    return SignalStatus.TRANSPORT, f"{type(err).__name__}: {err}"


def url_hint(url: str, http_status: int | None, detail: str) -> str:
    """``"; <what to change in the URL>"`` for two mistakes of the Prometheus URL, else ''.

    A 404 from a URL whose path holds ``/api/v1`` (the API path is added to the base URL, so
    ``.../api/v1/api/v1/query`` was asked): give the base URL. A TLS ``wrong version number``
    from an ``https://`` URL (the server answered the handshake in plain text): the server
    may speak plain http. ``url`` is the Prometheus URL; the hint echoes it with its
    user-info masked (:func:`~scaler.config.settings.redact_url`, idempotent: callers may
    pass it masked already), never a password or token.

    Raises:
        ValueError: ``url`` cannot be split (unbalanced IPv6 brackets).
    """
    parts = urlsplit(redact_url(url))
    if http_status == 404 and "/api/v1" in parts.path:
        path = parts.path.split("/api/v1", 1)[0]
        base = urlunsplit(parts._replace(path=path, query="", fragment=""))
        return f"; the URL's path holds /api/v1, which is added to it: give the base URL ({base})"
    if parts.scheme == "https" and "wrong version number" in detail.lower().replace("_", " "):
        return f"; the server may speak plain http: try {urlunsplit(parts._replace(scheme='http'))}"
    return ""


async def query_body(
    client: httpx.AsyncClient,
    url: str,
    kind: QueryKind,
    promql: str,
    *,
    timeout_seconds: float,
    start: float | None = None,
) -> tuple[dict[str, Any], None] | tuple[None, QueryOutcome]:
    """Send one instant query (as :func:`instant_query`) and return the body of a successful
    answer, or the failed outcome: transport, timeout, HTTP status (with the server's
    message, :func:`~scaler.sources.prometheus.answers.error_answer_detail`), Prometheus'
    own error, or a body that is not the API's. Never raises for those."""
    start = time.monotonic() if start is None else start

    def fail(
        status: SignalStatus, detail: str, http_status: int | None = None
    ) -> tuple[None, QueryOutcome]:
        # Not logged here: the outcome carries the detail, and the controller logs one
        # ``query_failed`` event per failed query.
        outcome = QueryOutcome(
            kind,
            status,
            detail=short_detail(detail),
            duration_seconds=time.monotonic() - start,
            query=promql,
            http_status=http_status,
        )
        return None, outcome

    try:
        # httpx timeouts are per operation; asyncio.timeout bounds the whole exchange
        # (a server trickling bytes would otherwise never time out).
        async with asyncio.timeout(timeout_seconds):
            resp = await client.post(
                url,
                data={"query": promql, "timeout": promql_duration(timeout_seconds)},
                timeout=timeout_seconds,
            )
    except (OSError, httpx.HTTPError) as err:  # asyncio's TimeoutError is an OSError
        return fail(*request_problem(err, timeout_seconds))

    try:
        body: Any = decode_json(resp.content)
    except ValueError:
        body = None
    problem = answer_problem(resp.status_code, body, lambda: resp.text)
    if problem is not None:
        return fail(*problem, resp.status_code)
    return body, None
