"""What a command does with a managed Prometheus' authentication, in a process of its own
(each cloud library reads its environment once): settings from the environment, the client
of every command (:func:`~scaler.sources.prometheus.http.client_for`), instant queries, each
outcome printed as one JSON line, then the start-up line. Every output goes through the
masking streams of the command line.

    python -m tests.sources.cloud_probe QUERIES [FILE TEXT]

QUERIES: how many queries (1 by default); FILE and TEXT: after the first query, FILE is
rewritten with TEXT (a projected token the kubelet rotates while the process runs).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from scaler.config.settings import PrometheusSettings, SettingsError, load_model_settings
from scaler.sources.prometheus.http import client_for, instant_query
from scaler.sources.promql import QueryKind
from scaler.telemetry import redact


async def _main(queries: int, rotate: list[str]) -> int:
    try:
        settings = load_model_settings(PrometheusSettings, {})
    except SettingsError as err:
        print(f"settings: {err}", file=sys.stderr)
        return 2
    print(settings.describe_prometheus(), file=sys.stderr)
    url = str(settings.prometheus_url).rstrip("/") + "/api/v1/query"
    async with client_for(settings) as client:
        for n in range(queries):
            if n == 1 and rotate:
                Path(rotate[0]).write_text(rotate[1])
            answer = await instant_query(
                client, url, QueryKind.WAITING, "vllm:num_requests_waiting", timeout_seconds=10
            )
            out = answer.outcome
            print(
                json.dumps(
                    {
                        "status": str(out.status),
                        "detail": out.detail,
                        "http_status": out.http_status,
                    }
                )
            )
    return 0


if __name__ == "__main__":
    redact.install()
    sys.exit(asyncio.run(_main(int(sys.argv[1]) if len(sys.argv) > 1 else 1, sys.argv[2:4])))
