"""A real Prometheus scraping vLLM pods that the test renders: the set-up shared by the tests
that read the simulator's exposition (:mod:`scaler.sim.exposition`) through a real server.

Each pod is its own HTTP ``/metrics`` endpoint on loopback; Prometheus (Debian's binary, in a
temporary folder) finds them through file-based service discovery with the labels
``namespace=llm`` and ``pod=<name>`` and scrapes them every second.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import pytest
from aiohttp import web

from scaler.sim.exposition import CONTENT_TYPE
from scaler.sim.prometheus_server import (
    PrometheusNotInstalledError,
    PrometheusServer,
    find_prometheus_binary,
    wait_for_series,
    write_file_sd,
)

#: The namespace label of every pod.
NAMESPACE = "llm"


@contextlib.asynccontextmanager
async def scraped_pods(
    tmp: Path,
    bodies: Mapping[str, Callable[[], bytes]],
    *,
    rate_window_seconds: float,
    current_pods: int | None = None,
    content_types: Mapping[str, str] | None = None,
    namespaces: Mapping[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    rule_files: Sequence[Path] = (),
    ready_when: str | None = None,
    timeout_seconds: float = 30.0,
) -> AsyncIterator[str]:
    """Serve ``bodies`` (pod name -> its ``/metrics`` body at each scrape) and start
    Prometheus on them; yield its URL once every pod (``current_pods`` of them, when some
    bodies carry old sample timestamps) has a whole ``rate()`` window of
    ``vllm:generation_tokens_total`` samples (a younger series extrapolates short).
    ``content_types``: pod name -> the Content-Type its body is served with (OpenMetrics);
    ``namespaces``: pod name -> its ``namespace`` label (:data:`NAMESPACE` otherwise);
    ``extra_args``: more Prometheus flags (``--query.max-samples=...``);
    ``rule_files``: rule files Prometheus loads; ``ready_when``: a query that must also
    return a series first (a recording rule's output).

    Skips the test where Prometheus is not installed; fails it, with the end of Prometheus'
    log, when the pods are not scraped within ``timeout_seconds``.
    """
    try:
        find_prometheus_binary()
    except PrometheusNotInstalledError as err:
        pytest.skip(str(err))
    runners: list[web.AppRunner] = []
    groups: list[tuple[list[str], dict[str, str]]] = []
    try:
        for name, body in bodies.items():
            kind = (content_types or {}).get(name, CONTENT_TYPE)

            async def metrics(
                _: web.Request, body: Callable[[], bytes] = body, kind: str = kind
            ) -> web.Response:
                return web.Response(body=body(), headers={"Content-Type": kind})

            app = web.Application()
            app.router.add_get("/metrics", metrics)
            runner = web.AppRunner(app)
            await runner.setup()
            runners.append(runner)
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            address = f"127.0.0.1:{runner.addresses[0][1]}"
            namespace = (namespaces or {}).get(name, NAMESPACE)
            groups.append(([address], {"namespace": namespace, "pod": name}))
        sd = tmp / "sd" / "targets.json"
        write_file_sd(sd, groups)
        server = PrometheusServer(
            tmp / "prom",
            scrape_interval_seconds=1.0,
            sd_file=sd,
            rule_files=rule_files,
            extra_args=extra_args,
        )
        async with server as prom:
            try:
                await wait_for_series(
                    prom.url,
                    f"count_over_time(vllm:generation_tokens_total[{rate_window_seconds:g}s])"
                    f" >= {int(rate_window_seconds)}",
                    timeout=timeout_seconds,
                    min_series=len(bodies) if current_pods is None else current_pods,
                )
                if ready_when is not None:
                    await wait_for_series(prom.url, ready_when, timeout=timeout_seconds)
            except TimeoutError:
                pytest.fail("Prometheus never scraped the pods; log:\n" + prom.log_tail())
            yield prom.url
    finally:
        for runner in runners:
            await runner.cleanup()
