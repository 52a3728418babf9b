"""The kubernetes-asyncio client: in-cluster service account or kubeconfig, credentials masked.

:func:`build_api_client` is called once, by the composition root; every API call of the
actuators goes through the client it returns. :func:`connect_api` returns with it where its
API server came from (:class:`ApiServerOrigin`), and :func:`api_server_problem` asks that
server once at start: an unreachable one is one message naming its URL (user-info masked, no
credential) and what to check, the kubeconfig's context or the pod's ServiceAccount.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config.config_exception import ConfigException

from scaler.actuators.errors import ApiFailure, classify_error, connect_failure_reason
from scaler.config.policy_errors import describe_yaml_error
from scaler.config.secrets import MASK, register_url_credentials
from scaler.config.settings import redact_url
from scaler.telemetry.redact import register_secret

__all__ = [
    "ApiServerOrigin",
    "KubeConfigError",
    "MissingContextError",
    "api_server_problem",
    "build_api_client",
    "connect_api",
]


class KubeConfigError(RuntimeError):
    """No usable cluster configuration (message names the file or the in-cluster source)."""


class MissingContextError(KubeConfigError):
    """The kubeconfig has no context of the name asked for (``context``); the message names
    the contexts it has."""

    def __init__(self, message: str, *, context: str) -> None:
        super().__init__(message)
        self.context = context


@dataclass(frozen=True, slots=True)
class ApiServerOrigin:
    """Where a client's API server came from, for messages: never a credential.

    Attributes:
        server: the API server's URL, user-info masked.
        kubeconfig: the kubeconfig file(s) read (``:``-joined); None in a cluster.
        context: the kubeconfig context used (None in a cluster, or when unnamed).
    """

    server: str
    kubeconfig: str | None = None
    context: str | None = None

    @property
    def in_cluster(self) -> bool:
        """The pod's in-cluster ServiceAccount configuration, not a kubeconfig."""
        return self.kubeconfig is None

    def what_to_check(self) -> str:
        """What a person checks when this server cannot be reached: the kubeconfig's context
        (and how to choose another, or to run in a pod), or the pod's ServiceAccount
        configuration and its way to the API server."""
        if self.in_cluster:
            return (
                "(the pod's in-cluster ServiceAccount configuration); check that the pod can "
                "reach the API server (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, "
                "a NetworkPolicy on its egress) and that its ServiceAccount token is mounted "
                "(automountServiceAccountToken)"
            )
        context = f"context {self.context!r}" if self.context else "the current context"
        kubectl = f"kubectl --kubeconfig {self.kubeconfig}"
        if self.context:
            kubectl += f" --context {self.context}"
        return (
            f"({context} of kubeconfig {self.kubeconfig}); check that it is the cluster "
            "meant (another: --context NAME, VLLM_SCALER_KUBE_CONTEXT) and that the cluster is "
            f"up ({kubectl} cluster-info), or, in a pod, use its ServiceAccount (--in-cluster, "
            "VLLM_SCALER_IN_CLUSTER=true)"
        )


#: How long the start-up question to the API server may take.
PROBE_TIMEOUT_SECONDS = 10.0


async def api_server_problem(
    api: ApiClient, origin: ApiServerOrigin, *, timeout_seconds: float = PROBE_TIMEOUT_SECONDS
) -> str | None:
    """Ask the API server its version (``GET /version``, which every authenticated and
    anonymous client may read) once; a server that cannot be reached is named in one line.

    Returns:
        None when the server answered (any HTTP status: a refused credential or verb is
        named by the calls that meet it); else ``the Kubernetes API server at <url> cannot
        be reached: <reason> (<origin>); check ...`` (:meth:`ApiServerOrigin.what_to_check`),
        the URL's user-info masked and no credential in it.
    """
    try:
        await client.VersionApi(api).get_code(_request_timeout=timeout_seconds)
    except Exception as exc:
        failure = classify_error(exc)
        if failure is None:
            raise
        if failure.outcome is not ApiFailure.TRANSPORT:
            return None
        return (
            f"the Kubernetes API server at {origin.server} cannot be reached: "
            f"{_unreachable_reason(exc, timeout_seconds)} {origin.what_to_check()}"
        )
    return None


def _unreachable_reason(exc: BaseException, timeout_seconds: float) -> str:
    """Why a connection failed, in the system's words (``connection refused``, ``the host
    name does not resolve``, ``TLS: certificate verify failed``), without aiohttp's
    connection key (``ssl:default``)."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return (
            f"TLS: {exc.certificate_error}; the cluster's certificate-authority-data (or, in a "
            "pod, the ServiceAccount's ca.crt) must be the CA that signed the server's "
            "certificate"
        )
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"TLS: {exc.os_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return connect_failure_reason(exc)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"no answer within {timeout_seconds:g}s"
    return str(exc) or type(exc).__name__


async def build_api_client(
    *, kubeconfig: Path | None, in_cluster: bool, context: str | None = None
) -> ApiClient:
    """A kubernetes-asyncio ``ApiClient``: :func:`connect_api`'s client (the same arguments
    and errors)."""
    api, _ = await connect_api(kubeconfig=kubeconfig, in_cluster=in_cluster, context=context)
    return api


async def connect_api(
    *, kubeconfig: Path | None, in_cluster: bool, context: str | None = None
) -> tuple[ApiClient, ApiServerOrigin]:
    """Build a kubernetes-asyncio ``ApiClient`` and say where its API server came from.

    Args:
        kubeconfig: kubeconfig file; None follows kubectl's rules (``$KUBECONFIG``, a
            ``:``-separated list that is merged, else ``~/.kube/config``).
        in_cluster: use the pod's service account (token + CA under
            ``/var/run/secrets/kubernetes.io/serviceaccount``); ``kubeconfig`` is ignored.
        context: kubeconfig context; None uses ``current-context``.

    Returns:
        An ApiClient the caller must ``await client.close()``, and its
        :class:`ApiServerOrigin`.

    Raises:
        MissingContextError: ``context`` is not one of the kubeconfig's contexts.
        KubeConfigError: the configuration is missing or invalid.
    """
    cfg = client.Configuration()
    if in_cluster:
        if "KUBERNETES_SERVICE_HOST" not in os.environ:
            raise KubeConfigError(
                "in-cluster configuration asked for, but KUBERNETES_SERVICE_HOST is not set "
                "(not running in a pod)"
            )
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except ConfigException as err:
            raise KubeConfigError(f"in-cluster configuration: {err}") from None
        _register_credentials(cfg)
        return ApiClient(configuration=cfg), ApiServerOrigin(_shown_url(cfg.host))
    source = _kubeconfig_source(kubeconfig)
    contexts: list[str] = []
    for path in source.split(os.pathsep):
        contexts += _check_kubeconfig_shape(Path(path))
    if context is not None and context not in contexts:
        # The library's "Expected object with name ... in contexts list" names no choice.
        have = ", ".join(contexts) if contexts else "none"
        raise MissingContextError(
            f"kubeconfig {source}: context {context!r} is not in it (its contexts: {have})",
            context=context,
        )
    try:
        # persist_config=False: never write refreshed credentials back to the user's file.
        loader = await config.load_kube_config(
            config_file=source, context=context, client_configuration=cfg, persist_config=False
        )
    except (ConfigException, OSError, ValueError, TypeError) as err:
        raise KubeConfigError(f"kubeconfig {source}: {err}") from None
    _register_credentials(cfg)
    _refuse_server_userinfo(source, cfg.host, loader.current_context)
    current = loader.current_context if isinstance(loader.current_context, dict) else {}
    name = current.get("name")
    origin = ApiServerOrigin(
        _shown_url(cfg.host), kubeconfig=source, context=name if isinstance(name, str) else None
    )
    return ApiClient(configuration=cfg), origin


def _shown_url(server: object) -> str:
    """The API server's URL as a message shows it: user-info masked."""
    if not isinstance(server, str):
        return MASK
    try:
        return redact_url(server)
    except ValueError:  # unbalanced IPv6 brackets: the user-info cannot be told apart
        return MASK


def _refuse_server_userinfo(source: str, server: object, current: Any) -> None:
    """Refuse a cluster ``server`` URL that carries user-info (``https://user:pw@host``).

    aiohttp would fail every request when the user has a token too ("Cannot combine
    AUTHORIZATION header with ... credentials encoded in URL"), and send the user-info as
    Basic authentication otherwise, a way no kubeconfig documents: its credentials belong in
    the user entry. The URL is shown with its user-info masked (never the password); an
    ``@`` anywhere in it counts, as :func:`~scaler.config.settings.redact_url` masks it so.

    Raises:
        KubeConfigError: naming the kubeconfig, the cluster and context, and ``server``.
    """
    if not isinstance(server, str) or "@" not in server:
        return
    shown = _shown_url(server)
    entry = current if isinstance(current, dict) else {}
    ctx = entry.get("context")
    cluster = ctx.get("cluster") if isinstance(ctx, dict) else None
    raise KubeConfigError(
        f"kubeconfig {source}: cluster {cluster!r} (context {entry.get('name')!r}): server: "
        f"value {shown!r} holds user-info; expected a URL without credentials: they belong "
        "in the kubeconfig's user entry, not in the server URL"
    )


def _register_credentials(cfg: client.Configuration) -> None:
    """Mask the cluster credentials in every log line, also after a token refresh.

    An error body that echoes the request's Authorization header (some proxies do) would
    otherwise put the service-account token into a log line. User-info in the server's URL
    (a user name alone too: a proxy's token) is masked as well.
    """

    def register(c: Any) -> None:
        host = getattr(c, "host", None)
        if isinstance(host, str):
            register_url_credentials(host)
        for value in (getattr(c, "api_key", None) or {}).values():
            if isinstance(value, str):
                register_secret(value.removeprefix("Bearer ").strip())
        password = getattr(c, "password", None)
        if isinstance(password, str):
            register_secret(password)

    register(cfg)
    hook: Any = cfg.refresh_api_key_hook
    if hook is None:
        return

    async def refresh_and_register(c: Any) -> None:
        result = hook(c)
        if asyncio.iscoroutine(result):
            await result
        register(c)

    cfg.refresh_api_key_hook = refresh_and_register


def _check_kubeconfig_shape(path: Path) -> list[str]:
    """Refuse a kubeconfig that is not YAML or not a mapping, naming the file; return the
    names of its contexts.

    The library would fail on it with a Python-internal message (``list indices must be
    integers``). A scalar is named by its kind only: a file given by mistake may be a token.

    Raises:
        KubeConfigError: the file cannot be read, is not YAML, or is no mapping.
    """
    expected = "expected a kubeconfig: a mapping with clusters, contexts and users"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else "not UTF-8 text"
        raise KubeConfigError(f"kubeconfig {path}: cannot be read ({why})") from None
    except yaml.YAMLError as err:
        raise KubeConfigError(
            f"kubeconfig {path}: not valid YAML {describe_yaml_error(err)}"
        ) from None
    if not isinstance(data, dict):
        holds = "is empty" if data is None else f"holds a {_kind(data)}"
        raise KubeConfigError(f"kubeconfig {path}: the file {holds}; {expected}")
    entries = data.get("contexts")
    if not isinstance(entries, list):
        return []
    return [str(e["name"]) for e in entries if isinstance(e, dict) and "name" in e]


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    return "number" if isinstance(value, int | float) else type(value).__name__


def _kubeconfig_source(kubeconfig: Path | None) -> str:
    """The kubeconfig file(s) to load (``:``-joined), checked to exist.

    Read ``$KUBECONFIG`` now, not at import time as kubernetes_asyncio's default does; the
    library would only log "Config not found" for a missing file and fail later with an
    unrelated message.

    Raises:
        KubeConfigError: the file (or every file of ``$KUBECONFIG``) is missing.
    """
    if kubeconfig is not None:
        path = kubeconfig.expanduser()
        if not path.is_file():
            why = "is a directory" if path.is_dir() else "no such file"
            raise KubeConfigError(f"kubeconfig {kubeconfig}: {why}")
        return str(path)
    env = os.environ.get("KUBECONFIG", "")
    if env:
        listed = [p for p in env.split(os.pathsep) if p]
        found = [str(Path(p).expanduser()) for p in listed if Path(p).expanduser().is_file()]
        if not found:
            raise KubeConfigError(f"kubeconfig from $KUBECONFIG ({env}): no such file")
        return os.pathsep.join(found)
    default = Path("~/.kube/config").expanduser()
    if not default.is_file():
        raise KubeConfigError(
            f"no kubeconfig ({default} does not exist, $KUBECONFIG is not set) and not in a "
            "cluster (KUBERNETES_SERVICE_HOST is not set)"
        )
    return str(default)
