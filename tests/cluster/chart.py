"""The project installed on a cluster with its own Helm chart (Helm's engine, helm-python-sdk),
and the controller run as a process outside the cluster as the chart's Deployment would run
it in a pod: the same environment, the policy from the chart's ConfigMap, and the chart's
ServiceAccount's token from the TokenRequest API (what the kubelet mounts), so the RBAC the
chart ships is what authorizes every call.

The Deployment itself is not applied: its pods would need the image, and kwok's nodes run
no container. Every other object the chart renders is (ServiceAccount, RBAC, ConfigMaps,
Service, PodDisruptionBudget); the Prometheus Operator's kinds are turned off, their CRDs
being absent.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from scaler.sim.controlplane import Cluster
from scaler.sim.prometheus_server import die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "vllm-scaler"

Doc = dict[str, Any]


def render_chart(values: Mapping[str, Any], *, release: str, namespace: str) -> list[Doc]:
    """The chart's objects for ``values`` (ServiceMonitor and PrometheusRule off)."""
    helm = pytest.importorskip("helm_python", reason="helm-python-sdk (dev extra) is missing")
    helm.disable_logging()
    merged = {"serviceMonitor": {"enabled": False}, "prometheusRule": {"enabled": False}, **values}
    with helm.Chart.load(CHART) as chart:
        out = chart.render(merged, name=release, namespace=namespace)
    docs: list[Doc] = []
    for path in sorted(out):
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(out[path]) if d)
    return docs


@dataclass
class Install:
    """The chart installed: its release, namespace and objects, and what a pod would get."""

    cluster: Cluster
    release: str
    namespace: str
    docs: list[Doc]
    workdir: Path
    processes: list[ScalerProcess] = field(default_factory=list)

    def deployment(self) -> Doc:
        return next(d for d in self.docs if d["kind"] == "Deployment")

    @property
    def service_account(self) -> str:
        spec = self.deployment()["spec"]["template"]["spec"]
        return str(spec["serviceAccountName"])

    def policy_text(self) -> str:
        cm = next(
            d for d in self.docs if d["kind"] == "ConfigMap" and "policy.yaml" in d.get("data", {})
        )
        return str(cm["data"]["policy.yaml"])

    def pod_env(self) -> dict[str, str]:
        """The container's environment as the chart sets it (literal values and the
        downward API's namespace)."""
        env: dict[str, str] = {}
        container = self.deployment()["spec"]["template"]["spec"]["containers"][0]
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = str(item["value"])
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == (
                "metadata.namespace"
            ):
                env[item["name"]] = self.namespace
        return env

    def kubeconfig(self) -> Path:
        """A kubeconfig with the chart's ServiceAccount's token (TokenRequest)."""
        return self.cluster.service_account_kubeconfig(
            self.namespace, self.service_account, self.workdir / f"{self.release}-sa.kubeconfig"
        )

    def start(
        self,
        prometheus_url: str,
        *,
        name: str = "replica-0",
        command: tuple[str, ...] = ("run",),
        policy: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ScalerProcess:
        """Run ``python -m scaler <command>`` as the chart's container would, outside the
        cluster: the chart's environment, its policy, its ServiceAccount's token."""
        policy_file = self.workdir / f"{self.release}-{name}-policy.yaml"
        policy_file.write_text(policy if policy is not None else self.policy_text())
        port = free_port()
        process_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("VLLM_SCALER_")},
            **self.pod_env(),
            "POD_NAME": f"{self.release}-{name}",
            "VLLM_SCALER_POLICY_FILE": str(policy_file),
            "VLLM_SCALER_PROMETHEUS_URL": prometheus_url,
            "VLLM_SCALER_IN_CLUSTER": "false",
            "VLLM_SCALER_KUBECONFIG": str(self.kubeconfig()),
            "VLLM_SCALER_METRICS_ADDRESS": "127.0.0.1",
            "VLLM_SCALER_METRICS_PORT": str(port),
            "VLLM_SCALER_LEASE_IDENTITY": f"{self.release}-{name}",
            **(env or {}),
        }
        proc = ScalerProcess(
            name,
            [sys.executable, "-m", "scaler", *command],
            process_env,
            self.workdir / f"{self.release}-{name}.log",
            port,
        )
        self.processes.append(proc)
        return proc

    def uninstall(self) -> None:
        """Stop every process started; delete the cluster-wide objects (the namespaces go
        with their test)."""
        for proc in self.processes:
            proc.stop()
        for doc in self.docs:
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                plural = doc["kind"].lower() + "s"
                self.cluster.request(
                    "DELETE",
                    f"/apis/rbac.authorization.k8s.io/v1/{plural}/{doc['metadata']['name']}",
                    ok=(200, 202, 404),
                )


def install_chart(
    cluster: Cluster, namespace: str, values: Mapping[str, Any], workdir: Path
) -> Install:
    """Render the chart with ``values`` into ``namespace`` (a release of a unique name, since
    its ClusterRole is cluster-wide) and apply everything but the Deployment."""
    release = f"vllm-scaler-{secrets.token_hex(3)}"
    docs = render_chart(values, release=release, namespace=namespace)
    applied = [d for d in docs if d["kind"] != "Deployment"]
    cluster.apply(applied)
    return Install(cluster, release, namespace, docs, workdir)


class ScalerProcess:
    """One ``python -m scaler`` process: its JSON log lines, its /metrics, its signals."""

    def __init__(
        self, name: str, argv: list[str], env: dict[str, str], log_path: Path, port: int
    ) -> None:
        self.name = name
        self.log_path = log_path
        self.port = port
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent(),
        )

    def events(self, event: str | None = None) -> list[Doc]:
        """The JSON log lines so far (of ``event`` only, if given)."""
        lines: list[Doc] = []
        for line in self.log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and (event is None or doc.get("event") == event):
                    lines.append(doc)
        return lines

    def wait_event(self, event: str, *, timeout: float, where: Any = None) -> Doc:
        """The first log line of ``event`` (matching ``where(doc)``), polled until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            for doc in self.events(event):
                if where is None or where(doc):
                    return doc
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name}: no {event!r} log line within {timeout:g} s "
                    f"(exit code {self.proc.poll()}); log tail:\n{self.tail()}"
                )
            time.sleep(0.2)

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def metric(self, name: str, **labels: str) -> float | None:
        """A sample of the process' /metrics (None when absent or not answering)."""
        try:
            text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        except httpx.HTTPError:
            return None
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return None

    def samples(self, name: str) -> list[dict[str, str]]:
        """The label sets of every sample ``name`` whose value is not 0."""
        text = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        return [
            dict(s.labels)
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name and s.value != 0
        ]

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait for the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL (a crashed pod)."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()


@contextlib.contextmanager
def started(proc: ScalerProcess) -> Iterator[ScalerProcess]:
    """Stop ``proc`` when the block ends, whatever happens in it."""
    try:
        yield proc
    finally:
        proc.stop()
