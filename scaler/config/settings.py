"""Process settings from the environment (prefix ``VLLM_SCALER_``) via pydantic-settings.

These say *where* things are and *how often* to run; *what* to scale and how lives in the
policy file (:mod:`scaler.config.policy`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AnyHttpUrl, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Settings of one vllm-scaler process.

    Every field can be set as ``VLLM_SCALER_<FIELD>`` (upper case) or as a command-line
    option of the same name. Units are in the names.
    """

    model_config = SettingsConfigDict(env_prefix="VLLM_SCALER_", extra="ignore", frozen=True)

    policy_file: Path = Field(
        default=Path("policy.yaml"), description="YAML policy file that lists the targets."
    )
    prometheus_url: AnyHttpUrl = Field(
        default=AnyHttpUrl("http://localhost:9090"),
        description="Base URL of the Prometheus HTTP API (Thanos, Mimir, VictoriaMetrics too).",
    )
    prometheus_bearer_token_file: Path | None = Field(
        default=None, description="File holding a bearer token; re-read on every request."
    )
    prometheus_ca_file: Path | None = Field(
        default=None, description="PEM CA bundle to verify Prometheus' TLS certificate."
    )
    prometheus_timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Timeout of each Prometheus query."
    )
    control_interval_seconds: float = Field(
        default=15.0, gt=0, le=3600, description="Seconds between control cycles."
    )
    metrics_port: int = Field(
        default=9100, ge=0, le=65535, description="Port of our own /metrics (0: off)."
    )
    metrics_address: str = Field(default="0.0.0.0", description="Address /metrics binds to.")
    log_format: Literal["auto", "json", "console"] = Field(
        default="auto", description="auto: console on a terminal, JSON lines otherwise."
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    kubeconfig: Path | None = Field(
        default=None, description="kubeconfig file; default: in-cluster, then ~/.kube/config."
    )
    kube_context: str | None = Field(default=None, description="kubeconfig context to use.")
    in_cluster: bool | None = Field(
        default=None,
        description="Use the pod's service account. Default: yes when running in a pod.",
    )


class SettingsError(ValueError):
    """Invalid process settings; the message names the variable, the value and what was expected."""


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment, with command-line ``overrides`` taking precedence.

    ``None`` overrides are ignored (an option that was not given).

    Raises:
        SettingsError: a value is invalid.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as err:
        lines = []
        for e in err.errors():
            field = ".".join(str(p) for p in e["loc"])
            lines.append(
                f"VLLM_SCALER_{field.upper()} (--{field.replace('_', '-')}): "
                f"value {e.get('input')!r}: {e['msg']}"
            )
        raise SettingsError("invalid settings\n  " + "\n  ".join(lines)) from None
