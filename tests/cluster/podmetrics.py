"""The vLLM ``/metrics`` of the kwok pods, under the real pods' names.

kwok's pods run no container, so nothing of theirs can answer a scrape. :class:`PodMetrics`
stands in for the vLLM server of each pod: it follows the pods of one namespace through the
API, and for every pod kwok reports Running (a real vLLM answers ``/metrics`` once its model
is loaded, which is when its readiness probe passes) it serves the simulated replica's
exposition (:class:`~scaler.sim.exposition.VllmMetrics`) on a loopback port, until the pod is
gone. A file-SD file lists those endpoints with the labels a PodMonitor gives (``namespace``,
``pod``), so a real Prometheus scrapes each pod under its real name; a pod's load is what
the test sets (:meth:`PodMetrics.set_load`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from scaler.sim.controlplane import Cluster
from scaler.sim.exposition import CONTENT_TYPE, VllmMetrics
from scaler.sim.prometheus_server import write_file_sd


@dataclass(frozen=True, slots=True)
class Load:
    """What one pod's vLLM reports: requests queued and in the running batch, KV-cache use."""

    waiting: int = 0
    running: int = 0
    kv_cache_usage: float = 0.0
    #: tokens the pod generates between two scrapes (its counter moves: a live engine, not
    #: a frozen one, for the checks that read the token counters)
    generated_per_scrape: int = 0


class _Endpoint:
    def __init__(
        self, metrics: VllmMetrics, on_scrape: Callable[[VllmMetrics], None] | None = None
    ) -> None:
        self.metrics = metrics
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if on_scrape is not None:
                    on_scrape(owner.metrics)
                body = owner.metrics.render()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _running(pod: dict[str, Any]) -> bool:
    return ((pod.get("status") or {}).get("phase")) == "Running"


class PodMetrics:
    """Serve the vLLM metrics of ``namespace``'s Running pods and list them for Prometheus.

    Args:
        cluster: where the pods are.
        namespace: whose pods.
        sd_file: the file-SD file to keep up to date (Prometheus reads it every second).
        default: the load of a pod without one of its own.
    """

    def __init__(
        self, cluster: Cluster, namespace: str, sd_file: Path, *, default: Load = Load()
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.sd_file = sd_file
        self.default = default
        self._loads: dict[str, Load] = {}
        self._endpoints: dict[str, _Endpoint] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._listed: tuple[tuple[str, str], ...] | None = None
        self.error: BaseException | None = None

    def set_load(self, pod: str | None, load: Load) -> None:
        """Set one pod's load (None: the default of every pod without its own)."""
        with self._lock:
            if pod is None:
                self.default = load
            else:
                self._loads[pod] = load
            for name, endpoint in self._endpoints.items():
                self._apply(name, endpoint.metrics)

    def served(self) -> set[str]:
        """The pods whose metrics are served now."""
        with self._lock:
            return set(self._endpoints)

    def _apply(self, pod: str, metrics: VllmMetrics) -> None:
        load = self._loads.get(pod, self.default)
        metrics.num_requests_waiting = load.waiting
        metrics.num_requests_running = load.running
        metrics.kv_cache_usage = load.kv_cache_usage

    def _scraped(self, pod: str) -> Callable[[VllmMetrics], None]:
        def tick(metrics: VllmMetrics) -> None:
            with self._lock:
                metrics.generation_tokens += self._loads.get(pod, self.default).generated_per_scrape

        return tick

    def start(self) -> PodMetrics:
        """Start following the pods (a thread polling the API every 0.25 s)."""
        self._sync()
        self._thread.start()
        return self

    def _follow(self) -> None:
        while not self._stop.wait(0.25):
            try:
                self._sync()
            except Exception as err:  # kept for the test to see
                self.error = err

    def _sync(self) -> None:
        pods = {p["metadata"]["name"]: p for p in self.cluster.pods(self.namespace) if _running(p)}
        with self._lock:
            for name in set(self._endpoints) - set(pods):
                self._endpoints.pop(name).close()
            for name in set(pods) - set(self._endpoints):
                endpoint = _Endpoint(VllmMetrics(), on_scrape=self._scraped(name))
                self._apply(name, endpoint.metrics)
                self._endpoints[name] = endpoint
            listed = tuple(sorted((n, e.address) for n, e in self._endpoints.items()))
        if listed != self._listed:
            write_file_sd(
                self.sd_file,
                [
                    ([address], {"namespace": self.namespace, "pod": name})
                    for name, address in listed
                ],
            )
            self._listed = listed

    def stop(self) -> None:
        """Stop following, close every endpoint and empty the file-SD file."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for endpoint in self._endpoints.values():
                endpoint.close()
            self._endpoints.clear()
        with contextlib.suppress(OSError):
            self.sd_file.unlink()

    def wait_served(self, pods: set[str], *, timeout: float = 30.0) -> None:
        """Wait until exactly ``pods`` are served."""
        deadline = time.monotonic() + timeout
        while self.served() != pods:
            if time.monotonic() > deadline:
                raise TimeoutError(f"served {sorted(self.served())}, expected {sorted(pods)}")
            time.sleep(0.1)
