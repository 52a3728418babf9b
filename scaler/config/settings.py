"""Process settings from the environment (prefix ``VLLM_SCALER_``) via pydantic-settings.

These say *where* things are and *how often* to run; *what* to scale and how lives in the
policy file (:mod:`scaler.config.policy`).
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AnyHttpUrl,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from scaler.config.secrets import (
    CREDENTIAL_HEADER,
    NON_SECRET_HEADERS,
    hostless_userinfo,
    register_file_secret,
    register_header,
    register_private_key_file,
    register_url_credentials,
    token_in,
)
from scaler.config.vocabulary import DNS_LABEL, DNS_SUBDOMAIN
from scaler.config.wording import expectation

#: The module each managed Prometheus authentication needs (its extra of pyproject.toml).
CLOUD_AUTH_MODULES = {"aws-sigv4": "botocore", "google": "google.auth", "azure": "azure.identity"}

#: Fields whose values may be secrets: never echoed in errors, hidden from ``repr``.
SECRET_FIELDS = frozenset({"prometheus_headers"})
#: A valid HTTP header name (RFC 9110 5.1: a token).
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
#: A header value HTTP clients send (RFC 9110 5.5, ASCII only as httpx encodes it): visible
#: characters with spaces or tabs between them, or nothing.
_HEADER_VALUE = re.compile(r"^(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?$")


def parse_headers(value: object) -> dict[str, str]:
    """Extra HTTP headers from a JSON object (``{"X-Scope-OrgID": "t1"}``) or from
    ``k=v,k=v`` text; a dict passes through.

    Raises:
        ValueError: not one of those forms, an empty or invalid header name, a name given
            twice (HTTP names are case-insensitive: ``X-Key`` and ``x-key`` are one header),
            a line break in a value (header injection), or a value HTTP forbids (whitespace
            around it, a control or non-ASCII character). The message never contains a value.
    """
    items: list[tuple[str, str]]
    if isinstance(value, dict):
        items = [(str(k), str(v)) for k, v in value.items()]
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        if text.startswith("{"):
            try:
                loaded = json.loads(text, object_pairs_hook=list)
            except ValueError:
                raise ValueError("not a valid JSON object") from None
            if not isinstance(loaded, list) or not all(isinstance(v, str) for _, v in loaded):
                raise ValueError("the JSON form must be an object of strings")
            items = [(str(k), v) for k, v in loaded]
        else:
            items = []
            for i, item in enumerate(filter(None, (p.strip() for p in text.split(",")))):
                name, eq, val = item.partition("=")
                if not eq:
                    raise ValueError(f"item {i + 1} is not name=value")
                items.append((name.strip(), val))  # the value as written: whitespace is refused
    else:
        raise ValueError("expected a JSON object or name=value,name=value")
    seen: dict[str, str] = {}
    for name, val in items:
        _check_header(name, val)
        if name.lower() in seen:
            raise ValueError(
                f"header {name!r} is given twice (as {seen[name.lower()]!r} too; header names "
                "are case-insensitive); expected each header once"
            )
        seen[name.lower()] = name
    return dict(items)


def _check_header(name: str, val: str) -> None:
    """ValueError when ``name: val`` is no valid header (the message never holds ``val``)."""
    if not name:
        raise ValueError(
            "a header name is empty; expected name=value with a name of letters, digits "
            "and !#$%&'*+.^_`|~-"
        )
    if not HEADER_NAME.match(name):
        # quoted only up to its first bad character: a curl-style "Authorization: Bearer
        # <token>=" puts the token in the name
        valid = re.match(r"[!#$%&'*+.^_`|~0-9A-Za-z-]*", name)
        shown = valid.group() if valid else ""
        raise ValueError(
            f"invalid header name starting {shown!r}: character {len(shown) + 1} is not "
            "allowed in a name (the rest is not shown); expected name=value with a name of "
            "letters, digits and !#$%&'*+.^_`|~-"
        )
    if "\r" in val or "\n" in val:
        raise ValueError(f"the value of header {name!r} contains a line break")
    if not _HEADER_VALUE.match(val):
        raise ValueError(
            f"the value of header {name!r} {_header_value_fault(val)}; expected printable "
            "ASCII characters, with spaces or tabs only between them"
        )


def _header_value_fault(value: str) -> str:
    """What makes ``value`` no valid header value (never the value itself)."""
    if value != value.strip(" \t"):
        return "begins or ends with whitespace"
    if any(not c.isascii() for c in value):
        return "holds a non-ASCII character"
    return "holds a control character"


_SUBDOMAIN = re.compile(DNS_SUBDOMAIN)
_LABEL = re.compile(DNS_LABEL)


def _name_fault(value: str, most: int) -> str:
    if len(value) > most:
        return f"{len(value)} characters"
    return "empty" if not value else "not a valid name"


def _check_name(value: str, pattern: re.Pattern[str], most: int, expected: str) -> str:
    if len(value) > most or not pattern.match(value):
        raise ValueError(
            f"{_name_fault(value, most)}; expected {expected}, starting and ending with a "
            "letter or digit"
        )
    return value


def check_dns_subdomain(value: str) -> str:
    """``value`` if it is a valid Kubernetes object name (a DNS subdomain), else ValueError
    saying what is expected (the API server would answer 422 Invalid)."""
    expected = (
        "a DNS subdomain (RFC 1123): at most 253 characters, lowercase letters, digits, '-' and '.'"
    )
    return _check_name(value, _SUBDOMAIN, 253, expected)


def check_dns_label(value: str) -> str:
    """``value`` if it is a valid namespace name (a DNS label), else ValueError."""
    expected = "a DNS label (RFC 1123): at most 63 characters, lowercase letters, digits and '-'"
    return _check_name(value, _LABEL, 63, expected)


def _given_path(value: object, expected: str) -> object:
    """An empty variable would be the current directory (Path("") is "."), reported as
    "is a directory": say it is empty instead."""
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"the value is empty; expected {expected}")
    return value


def _check_readable_file(path: Path, expected: str) -> bytes:
    """The content of ``path``, or ValueError saying why it is not a readable ``expected``.

    The message never contains the content (a token or a key).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"no such file; expected {expected}") from None
    except IsADirectoryError:
        raise ValueError(f"is a directory; expected {expected}") from None
    except OSError as err:
        raise ValueError(f"cannot be read ({err.strerror or err}); expected {expected}") from None
    return data


def _ssl_reason(err: ssl.SSLError) -> str:
    return str(err.reason or err.strerror or err).replace("_", " ").lower()


class EncryptedKeyError(ValueError):
    """A client key asks for a passphrase: refused (see :func:`load_client_certificate`)."""

    def __init__(self) -> None:
        super().__init__("the key is encrypted (a passphrase); expected an unencrypted PEM key")


def _no_passphrase() -> bytes:
    raise EncryptedKeyError


def load_client_certificate(ctx: ssl.SSLContext, cert: Path, key: Path | None) -> None:
    """Load a client certificate and its key (``None``: in the certificate's file) into ``ctx``.

    An encrypted key is refused, never prompted for: without a ``password`` callable OpenSSL
    asks on the terminal (waiting forever, or failing with EINVAL on a closed stdin).

    Raises:
        EncryptedKeyError: the key is encrypted.
        OSError: a file cannot be read, or holds no usable certificate or key (ssl.SSLError).
    """
    ctx.load_cert_chain(str(cert), str(key) if key is not None else None, password=_no_passphrase)


def _client_key_fault(cert: Path, key: Path | None) -> str | None:
    """What is wrong with the private key of the client certificate ``cert`` (in ``key``, or
    in ``cert``'s own file for ``None``), or None when the pair loads."""
    if key is not None and b"PRIVATE KEY-----" not in _check_readable_file(key, "a PEM key"):
        return "the file holds no PEM private key"
    try:
        load_client_certificate(ssl.create_default_context(), cert, key)
    except EncryptedKeyError as err:
        return str(err).partition(";")[0]
    except ssl.SSLError as err:
        if err.reason == "KEY_VALUES_MISMATCH":
            return "the key does not match the certificate"
        if err.reason is None:  # OpenSSL's "PEM lib": a garbled or truncated PEM block
            return "the key is not a readable PEM private key"
        return _ssl_reason(err)
    except OSError as err:
        return f"cannot be loaded ({err.strerror or err})"
    return None


class PrometheusSettings(BaseSettings):
    """How to reach Prometheus: the one client configuration of every command that reads it.

    ``run``, ``recommend``, ``backtest`` and ``dashboards --previews`` take these fields (as
    ``VLLM_SCALER_PROMETHEUS_*`` variables or the same-named options) and build their clients
    from them: httpx for the controller and the previews
    (:func:`scaler.sources.prometheus.http.client_for`), a requests session for
    prometheus-api-client in the backtest. Files are checked here, at start; the token file
    is re-read on every request. :meth:`prometheus_summary` says what is used, never a value.
    """

    # no nan or inf: "nan" compared with a bound would read as out of range
    model_config = SettingsConfigDict(
        env_prefix="VLLM_SCALER_", extra="ignore", frozen=True, allow_inf_nan=False
    )

    prometheus_url: AnyHttpUrl = Field(
        default=AnyHttpUrl("http://localhost:9090"),
        description="Base URL of the Prometheus HTTP API (Thanos, Mimir, VictoriaMetrics too); "
        "a password in it is sent as HTTP Basic authentication.",
    )
    prometheus_bearer_token_file: Path | None = Field(
        default=None, description="File holding a bearer token; re-read on every request."
    )
    prometheus_ca_file: Path | None = Field(
        default=None, description="PEM CA bundle to verify Prometheus' TLS certificate."
    )
    prometheus_client_cert_file: Path | None = Field(
        default=None,
        description="PEM client certificate for mutual TLS with Prometheus (may hold the key).",
    )
    prometheus_client_key_file: Path | None = Field(
        default=None, description="PEM private key of the client certificate."
    )
    prometheus_headers: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        repr=False,
        description="Extra headers on every Prometheus request, as JSON or name=value,... "
        "(e.g. X-Scope-OrgID=tenant for Thanos/Mimir); values are never printed.",
    )
    prometheus_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Timeout of each Prometheus query, seconds."
    )
    prometheus_cloud_auth: Literal["none", "aws-sigv4", "google", "azure"] = Field(
        default="none",
        description="A managed Prometheus' authentication: aws-sigv4 (Amazon Managed Service "
        "for Prometheus: SigV4 with botocore's credentials, the pod's web identity on EKS), "
        "google (Google Cloud Managed Service for Prometheus: google-auth's default "
        "credentials, workload identity on GKE) or azure (Azure Monitor: azure-identity, "
        "workload identity on AKS). Needs the extra of that name (pip install "
        "'vllm-scaler[aws]', ...).",
    )
    prometheus_aws_region: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]+$",
        description="Region of the SigV4 signature (the workspace's). Default: from the URL "
        "(aps-workspaces.<region>.amazonaws.com), else AWS_REGION or AWS_DEFAULT_REGION.",
    )
    prometheus_aws_service: str = Field(
        default="aps",
        pattern=r"^[a-z0-9-]+$",
        description="Signing name of the SigV4 signature (aps: Amazon Managed Service for "
        "Prometheus).",
    )
    prometheus_cloud_auth_scope: str | None = Field(
        default=None,
        description="OAuth scope of the google or azure token. Default: "
        "https://www.googleapis.com/auth/monitoring.read (google), "
        "https://prometheus.monitor.azure.com/.default (azure).",
    )

    @field_validator("prometheus_headers", mode="before")
    @classmethod
    def _headers(cls, value: object) -> dict[str, str]:
        return parse_headers(value)

    @field_validator("prometheus_bearer_token_file", mode="before")
    @classmethod
    def _token_file_given(cls, value: object) -> object:
        return _given_path(value, "the path of a file holding a token")

    @field_validator("prometheus_ca_file", mode="before")
    @classmethod
    def _ca_file_given(cls, value: object) -> object:
        return _given_path(value, "the path of a PEM CA bundle")

    @field_validator("prometheus_client_cert_file", "prometheus_client_key_file", mode="before")
    @classmethod
    def _client_files_given(cls, value: object) -> object:
        return _given_path(value, "the path of a PEM file")

    @field_validator("prometheus_bearer_token_file")
    @classmethod
    def _token_file(cls, value: Path | None) -> Path | None:
        # Checked once at start; the clients re-read it on every request (rotation).
        if value is not None:
            token_in(_check_readable_file(value, "a file holding a token"))
        return value

    @field_validator("prometheus_ca_file")
    @classmethod
    def _ca_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            _check_readable_file(value, "a PEM CA bundle")
            try:
                ssl.create_default_context(cafile=str(value))
            except ssl.SSLError as err:
                raise ValueError(f"{_ssl_reason(err)}; expected a PEM CA bundle") from None
        return value

    @field_validator("prometheus_client_cert_file")
    @classmethod
    def _client_cert_file(cls, value: Path | None) -> Path | None:
        if value is not None and b"-----BEGIN CERTIFICATE-----" not in _check_readable_file(
            value, "a PEM client certificate"
        ):
            raise ValueError("no PEM certificate in the file; expected a PEM client certificate")
        return value

    @field_validator("prometheus_client_key_file")
    @classmethod
    def _client_key_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return value
        _check_readable_file(value, "a PEM private key")
        cert = info.data.get("prometheus_client_cert_file")
        fault = _client_key_fault(cert, value) if cert is not None else None
        if fault is not None:
            raise ValueError(f"{fault}; expected an unencrypted PEM private key matching {cert}")
        return value

    @model_validator(mode="after")
    def _client_certificate(self) -> Self:
        key, cert = self.prometheus_client_key_file, self.prometheus_client_cert_file
        if key is not None and cert is None:
            raise ValueError(
                f"{_setting('prometheus_client_key_file')}: value {str(key)!r}: expected "
                f"{_setting('prometheus_client_cert_file')} too: the key is the private key of a "
                "client certificate, and is sent only with it"
            )
        fault = _client_key_fault(cert, None) if cert is not None and key is None else None
        if cert is not None and fault is not None:
            found = (
                "the file holds no private key"
                if b"PRIVATE KEY-----" not in _check_readable_file(cert, "a PEM certificate")
                else fault.replace("the key", "its private key", 1)
            )
            raise ValueError(
                f"{_setting('prometheus_client_cert_file')}: value {str(cert)!r}: {found} "
                f"and {_setting('prometheus_client_key_file')} is not set; expected the "
                f"private key in {_setting('prometheus_client_key_file')}, or a PEM "
                "certificate file followed by its unencrypted private key"
            )
        return self

    def prometheus_sigv4_region(self) -> str | None:
        """The region SigV4 signs for: ``prometheus_aws_region``, else the region in an
        Amazon Managed Service for Prometheus URL (``aps-workspaces.us-east-1.amazonaws.com``),
        else ``AWS_REGION`` or ``AWS_DEFAULT_REGION``; None when none says."""
        if self.prometheus_aws_region:
            return self.prometheus_aws_region
        found = re.search(r"\.([a-z]{2}(?:-[a-z]+)+-[0-9]+)\.amazonaws\.com(?:\.cn)?$",
                          self.prometheus_url.host or "")  # fmt: skip
        if found:
            return found.group(1)
        return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None

    @model_validator(mode="after")
    def _cloud_auth(self) -> Self:
        kind = self.prometheus_cloud_auth
        given = {
            "prometheus_aws_region": self.prometheus_aws_region is not None and kind != "aws-sigv4",
            "prometheus_aws_service": self.prometheus_aws_service != "aps" and kind != "aws-sigv4",
            "prometheus_cloud_auth_scope": self.prometheus_cloud_auth_scope is not None
            and kind not in ("google", "azure"),
        }
        for field, stray in given.items():
            if stray:
                raise ValueError(
                    f"{_setting(field)} is set with {_setting('prometheus_cloud_auth')} "
                    f"{kind!r}: expected it only with "
                    + ("aws-sigv4" if "aws" in field else "google or azure")
                )
        if kind == "aws-sigv4" and self.prometheus_sigv4_region() is None:
            raise ValueError(
                f"{_setting('prometheus_cloud_auth')} aws-sigv4: no region: expected "
                f"{_setting('prometheus_aws_region')} (the workspace's region), a URL of "
                "aps-workspaces.<region>.amazonaws.com, or AWS_REGION"
            )
        module = CLOUD_AUTH_MODULES.get(kind)
        if module is not None and not _installed(module):
            extra = "aws" if kind == "aws-sigv4" else kind
            raise ValueError(
                f"{_setting('prometheus_cloud_auth')} {kind}: {module} is not installed: "
                f"pip install 'vllm-scaler[{extra}]' (the controller image with the cloud "
                "extras is the tag with the -cloud suffix)"
            )
        return self

    @model_validator(mode="after")
    def _one_authentication(self) -> Self:
        # Prometheus' own scrape and remote configs refuse more than one of basic_auth,
        # authorization and bearer_token_file; here one would silently replace another
        # (httpx drops the URL's user-info when a token is set).
        given = [name for name, used in self._authentications().items() if used]
        if len(given) > 1:
            raise ValueError(
                f"{' and '.join(given)} are set together; expected one authentication "
                "for Prometheus requests: keep one of them"
            )
        return self

    def _authentications(self) -> dict[str, bool]:
        """Each way a request may authenticate, named by its setting, and whether it is set."""
        url = self.prometheus_url
        return {
            f"{env_name('prometheus_url')} (--prometheus-url) user-info (HTTP Basic "
            "authentication)": bool(url.username) or url.password is not None,
            f"{env_name('prometheus_bearer_token_file')} (--prometheus-bearer-token-file)": (
                self.prometheus_bearer_token_file is not None
            ),
            f"an Authorization header in {env_name('prometheus_headers')} "
            "(--prometheus-headers)": any(
                name.lower() == "authorization" for name in self.prometheus_headers
            ),
            _setting("prometheus_cloud_auth") + f" {self.prometheus_cloud_auth}": (
                self.prometheus_cloud_auth != "none"
            ),
        }

    @property
    def prometheus_auth(self) -> str:
        """How requests authenticate, without any value: ``bearer token file``, ``basic
        (user-info in the URL)``, ``Authorization header``, the names of the other credential
        headers (``header X-Api-Key``: a name of :data:`CREDENTIAL_HEADER`; a header neither
        credential nor tenant id, such as ``K``, is not named here, though masked), joined by
        ``and``; or ``none`` (a client certificate is named apart, in
        :meth:`prometheus_summary`)."""
        return " and ".join(self._auth_kinds()) or "none"

    def _auth_kinds(self, *, token_file_path: bool = False) -> list[str]:
        """The kinds of :attr:`prometheus_auth`, in its order, never a value; with
        ``token_file_path`` the bearer token file's path follows its kind (for
        :meth:`describe_prometheus`)."""
        kinds = []
        token_file = self.prometheus_bearer_token_file
        if token_file is not None:
            path = f" {token_file} (re-read on every request)" if token_file_path else ""
            kinds.append(f"bearer token file{path}")
        if any(name.lower() == "authorization" for name in self.prometheus_headers):
            kinds.append("Authorization header")
        if self.prometheus_url.username or self.prometheus_url.password is not None:
            kinds.append("basic (user-info in the URL)")
        if self.prometheus_cloud_auth == "aws-sigv4":
            kinds.append(
                f"aws-sigv4 (region {self.prometheus_sigv4_region()}, "
                f"service {self.prometheus_aws_service})"
            )
        elif self.prometheus_cloud_auth != "none":
            kinds.append(f"{self.prometheus_cloud_auth} (workload identity or default credentials)")
        others = sorted(
            name
            for name in self.prometheus_headers
            if name.strip().lower() != "authorization" and CREDENTIAL_HEADER.search(name)
        )
        if others:
            kinds.append(f"header{'s' if len(others) > 1 else ''} {', '.join(others)}")
        return kinds

    def prometheus_summary(self) -> dict[str, object]:
        """What the Prometheus clients use, safe to print: the URL with its credential masked, the
        kind of authentication, the token file's path, header names (never values), the CA
        and client certificate files, the timeout."""
        return {
            "url": redact_url(str(self.prometheus_url)),
            "auth": self.prometheus_auth,
            "bearer_token_file": _path(self.prometheus_bearer_token_file),
            "headers": sorted(self.prometheus_headers),
            "ca_file": _path(self.prometheus_ca_file),
            "client_cert_file": _path(self.prometheus_client_cert_file),
            "client_key_file": _path(self.prometheus_client_key_file),
            "timeout_seconds": self.prometheus_timeout_seconds,
        }

    def describe_prometheus(self) -> str:
        """:meth:`prometheus_summary` as one line: ``prometheus URL (auth ..., headers ...,
        CA ..., client certificate ..., timeout 10s)``."""
        s = self.prometheus_summary()
        auth = " and ".join(self._auth_kinds(token_file_path=True)) or "none"
        cert = s["client_cert_file"] or "none"
        if s["client_key_file"]:
            cert = f"{cert} (key {s['client_key_file']})"
        headers = ", ".join(map(_header_shown, sorted(self.prometheus_headers))) or "none"
        return (
            f"prometheus {s['url']} (auth: {auth}; headers: {headers}; "
            f"CA: {s['ca_file'] or 'system'}; client certificate: {cert}; "
            f"timeout {self.prometheus_timeout_seconds:g}s)"
        )

    def register_prometheus_secrets(self) -> None:
        """Mask every credential these settings hold in everything the process prints: the
        URL's password (and its Basic form), header values (not tenant ids), the token
        file's content (the clients register each re-read token too), the client key."""
        register_url_credentials(str(self.prometheus_url))
        for name, value in self.prometheus_headers.items():
            register_header(name, value)
        if self.prometheus_bearer_token_file is not None:
            register_file_secret(self.prometheus_bearer_token_file)
        for pem in (self.prometheus_client_key_file, self.prometheus_client_cert_file):
            if pem is not None:
                register_private_key_file(pem)


class Settings(PrometheusSettings):
    """Settings of one vllm-scaler process (``run`` and ``recommend``).

    Every field can be set as ``VLLM_SCALER_<FIELD>`` (upper case) or as a command-line
    option of the same name. Units are in the names.
    """

    policy_file: Path = Field(
        default=Path("policy.yaml"), description="YAML policy file that lists the targets."
    )
    control_interval_seconds: float = Field(
        default=15.0, gt=0, le=3600, description="Seconds between control cycles."
    )
    metrics_port: int = Field(
        default=9100, ge=0, le=65535, description="Port of /metrics, /healthz, /readyz (0: off)."
    )
    metrics_address: str = Field(default="0.0.0.0", description="Address /metrics binds to.")
    log_format: Literal["auto", "json", "text", "console"] = Field(
        default="auto",
        description=(
            "auto: text on a terminal, JSON lines otherwise, and always text beside "
            "recommend --output text (console is text)."
        ),
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Least severe log level printed."
    )
    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig file; default: in-cluster, then ~/.kube/config."
    )
    kube_context: str | None = Field(default=None, description="kubeconfig context to use.")
    in_cluster: bool | None = Field(
        default=None,
        description="Use the pod's service account. Default: yes when running in a pod.",
    )
    leader_election: bool | None = Field(
        default=None,
        description="Only the holder of a Lease writes; others run read-only and take over. "
        "Default: on in a cluster (in-cluster configuration), off elsewhere; never in dry run.",
    )
    lease_namespace: str | None = Field(
        default=None,
        description="Namespace of the Lease. Default: the pod's namespace "
        "(POD_NAMESPACE or the service account's), else 'default'.",
    )
    lease_name: str = Field(default="vllm-scaler", description="Name of the Lease.")
    lease_identity: str | None = Field(
        default=None, description="holderIdentity. Default: pod name (or hostname) + random."
    )
    lease_duration_seconds: float = Field(
        default=15.0, gt=0, le=3600, description="A holder silent this long may be replaced."
    )
    lease_renew_deadline_seconds: float = Field(
        default=10.0, gt=0, le=3600, description="A leader that cannot renew this long stops."
    )
    lease_retry_period_seconds: float = Field(
        default=2.0, gt=0, le=600, description="Seconds between acquire/renew attempts."
    )
    watch_resources: bool = Field(
        default=False,
        description="Also scale the VLLMAutoscaler resources of the cluster (watched: a "
        "change takes effect without a restart); the policy file is then optional.",
    )
    resource_namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="The namespaces whose VLLMAutoscalers are watched, comma-separated (RBAC "
        "scoped to namespaces needs the list). Default: all.",
    )
    resource_crd_retry_seconds: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="Seconds between looks for the VLLMAutoscaler CRD while the API does not "
        "serve it (a CRD installed after the controller started is then picked up).",
    )

    @field_validator("resource_namespaces", mode="before")
    @classmethod
    def _namespaces(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            return [check_dns_label(str(v)) for v in value]
        return value

    @field_validator("policy_file", mode="before")
    @classmethod
    def _policy_file_given(cls, value: object) -> object:
        return _given_path(value, "the path of a YAML policy file")

    @field_validator("lease_name")
    @classmethod
    def _lease_name(cls, value: str) -> str:
        return check_dns_subdomain(value)

    @field_validator("lease_namespace")
    @classmethod
    def _lease_namespace(cls, value: str | None) -> str | None:
        return None if value is None else check_dns_label(value)

    @model_validator(mode="after")
    def _lease_timings(self) -> Self:
        if not (
            self.lease_retry_period_seconds
            < self.lease_renew_deadline_seconds
            < self.lease_duration_seconds
        ):
            shown = ", ".join(
                f"{_setting(field)} {getattr(self, field):g}"
                for field in (
                    "lease_retry_period_seconds",
                    "lease_renew_deadline_seconds",
                    "lease_duration_seconds",
                )
            )
            raise ValueError(f"{shown}: expected retry period < renew deadline < lease duration")
        return self


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported (its parent package missing counts as not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _header_shown(name: str) -> str:
    """A header's name as the start-up line lists it: ``K (value masked)``, or the name
    alone for a tenant id (``X-Scope-OrgID``), whose value is printed."""
    return name if name.strip().lower() in NON_SECRET_HEADERS else f"{name} (value masked)"


def _path(value: Path | None) -> str | None:
    return None if value is None else str(value)


def redact_url(url: str) -> str:
    """``url`` with its user-info's credential masked (safe to print): ``user:***@host``
    for a password, ``***@host`` for a user name alone (sent as Basic with an empty
    password, it is how some proxies carry a token). The host and port stay as written (an
    IPv6 address in its brackets). A value without a host part that holds an ``@`` (no
    scheme: ``user:pw@host``), or whose ``@`` comes after the host part (a password holding
    ``/``, ``?`` or ``#`` ends the host part early), may still hold user-info: everything
    between the first ``//`` (or the start) and the last ``@`` is masked (``***@host``; an
    ``@`` in a path or query is masked the same way, on the safe side).

    Raises:
        ValueError: ``url`` cannot be split (unbalanced IPv6 brackets).
    """
    parts = urlsplit(url)
    span = hostless_userinfo(url) if "@" not in parts.netloc else None
    if span is not None:
        return f"{url[: span[0]]}***{url[span[1] :]}"
    userinfo, _, host = parts.netloc.rpartition("@")  # the host holds no "@"; a password may
    user, _, password = userinfo.partition(":")
    if password:
        shown = f"{user}:***"
    elif user:
        shown = "***"
    else:
        return url
    return urlunsplit(parts._replace(netloc=f"{shown}@{host}"))


S = TypeVar("S", bound=PrometheusSettings)


class SettingsError(ValueError):
    """Invalid process settings: one line per invalid value, naming the variable (and its
    option), the value and what was expected:
    ``VLLM_SCALER_CONTROL_INTERVAL_SECONDS (--interval): value -1.0: expected a number > 0``."""


ENV_PREFIX = "VLLM_SCALER_"


def env_name(field: str) -> str:
    """The environment variable of a field: ``metrics_port`` -> ``VLLM_SCALER_METRICS_PORT``."""
    return ENV_PREFIX + field.upper()


def _setting(field: str) -> str:
    """A setting as errors name it: its variable and its option,
    ``VLLM_SCALER_PROMETHEUS_CLIENT_KEY_FILE (--prometheus-client-key-file)``."""
    return f"{env_name(field)} (--{field.replace('_', '-')})"


def unknown_env_vars(environ: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """``VLLM_SCALER_*`` variables that are no setting, each with the closest known name
    (None when no setting is close).

    Settings ignore them, so a misspelt variable would silently change nothing; the
    command line warns about each one at start.
    """
    env = os.environ if environ is None else environ
    known = [env_name(f) for f in Settings.model_fields]
    out = []
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX) or name.upper() in known:
            continue
        out.append((name, _closest(name.upper(), known)))
    return out


def _closest(name: str, known: list[str]) -> str | None:
    """The known name closest to ``name``, compared without the prefix. The score of a
    candidate is the larger of the share of ``name``'s words that match one of its words (a
    word matches a word difflib finds at least 0.8 alike: ``INTERVALL`` matches
    ``INTERVAL``) and how alike both are without their underscores (``KUBE_CONFIG`` and
    ``KUBECONFIG``); ties go to the most alike as a whole, then to the shortest. None when
    no candidate scores 0.6."""
    bare = name.removeprefix(ENV_PREFIX)
    words = [w for w in bare.split("_") if w]

    def alike(a: str, b: str) -> float:
        return difflib.SequenceMatcher(None, a, b).ratio()

    def score(candidate: str) -> float:
        theirs = candidate.removeprefix(ENV_PREFIX)
        hits = sum(max(alike(w, t) for t in theirs.split("_")) >= 0.8 for w in words)
        compact = alike(bare.replace("_", ""), theirs.replace("_", ""))
        return max(hits / max(len(words), 1), compact)

    best = max(known, key=lambda k: (score(k), alike(bare, k.removeprefix(ENV_PREFIX)), -len(k)))
    return best if score(best) >= 0.6 else None


def _shown(value: object, field: str) -> str:
    if field == "prometheus_url" and isinstance(value, str):
        try:
            value = redact_url(value)
        except ValueError:  # unbalanced IPv6 brackets: the user-info cannot be told apart
            return "<redacted>"
    if isinstance(value, float) and not isinstance(value, bool):
        return f"{value:g}"  # an option's 0 arrives as 0.0: shown as it was written
    return repr(str(value)) if isinstance(value, Path) else repr(value)


def _url_password_hint(error: Mapping[str, Any], field: str) -> str | None:
    """What a Prometheus URL that does not parse needs when the cause is its password: one
    holding ``/``, ``?`` or ``#`` ends the host part early (``http://u:Pa/ss@host`` has the
    host ``u`` and the port ``Pa``), so the parser's reason (``invalid port number``) would
    mislead. None for any other error."""
    value = error.get("input")
    if (
        field != "prometheus_url"
        or error.get("type") != "url_parsing"
        or not isinstance(value, str)
    ):
        return None
    try:
        early = "://" in value and "@" not in urlsplit(value).netloc
    except ValueError:  # unbalanced IPv6 brackets
        return None
    span = hostless_userinfo(value) if early else None
    userinfo = value[span[0] : span[1]] if span is not None else ""
    if ":" not in userinfo or not any(c in userinfo for c in "/?#"):
        return None
    return (
        "expected a URL such as http://user:password@prometheus:9090: a password holding "
        "'/', '?' or '#' must be percent-encoded (%2F, %3F, %23)"
    )


def load_settings(option_names: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Read :class:`Settings` from the environment, with command-line ``overrides`` taking
    precedence (see :func:`load_model_settings`).

    Raises:
        SettingsError: a value is invalid.
    """
    return load_model_settings(Settings, overrides, option_names)


def load_model_settings(
    model: type[S],
    overrides: Mapping[str, object],
    option_names: Mapping[str, str] | None = None,
) -> S:
    """Read settings of ``model`` (:class:`Settings` or :class:`PrometheusSettings`) from the
    environment, with command-line ``overrides`` taking precedence.

    ``None`` overrides are ignored (an option that was not given). ``option_names`` maps a
    field to its command-line option (``control_interval_seconds`` -> ``--interval``);
    errors name it next to the environment variable.

    Raises:
        SettingsError: a value is invalid.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    options = option_names or {}
    try:
        return model(**given)  # type: ignore[arg-type]
    except ValidationError as err:
        lines = []
        for e in err.errors():
            field = ".".join(str(p) for p in e["loc"])
            msg = _url_password_hint(e, field) or expectation(e)
            if not field:  # a check across fields: its message names them and their values
                lines.append(msg)
                continue
            shown = "<redacted>" if field in SECRET_FIELDS else _shown(e.get("input"), field)
            option = f" ({options[field]})" if field in options else ""
            lines.append(f"{env_name(field)}{option}: value {shown}: {msg}")
        raise SettingsError("\n".join(lines)) from None
