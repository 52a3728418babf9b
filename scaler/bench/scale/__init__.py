"""Scale benchmark: many targets on one real Prometheus, vllm-scaler's plan vs one query per target.

``vllm-scaler bench-scale`` (or ``python -m scaler.bench.scale``) starts, on loopback:

- an exposition server in a child process serving one static vLLM ``/metrics`` page per pod at
  ``/metrics/<namespace>/<pod>`` (queue, running, KV cache, a TTFT histogram whose counters
  grow with time so ``rate()`` is non-zero), for ``targets x pods`` pods;
- Debian's ``prometheus`` scraping every pod through file-based service discovery (one SD
  target per pod: the same address, its own ``__metrics_path__``, and ``namespace``/``pod``
  labels as Kubernetes discovery gives them).

Once every pod is scraped, it runs control cycles three ways, one after the other, against the
same Prometheus:

- **vllm-scaler, raw**: :class:`~scaler.sources.prometheus.PrometheusSource` (the production
  query plan, at most six queries whatever the number of targets) then
  :func:`~scaler.core.decide.decide` for every target, with no recording rule loaded: TTFT
  from the raw bucket series of each target's pods;
- **per-target** (the KEDA model: one ScaledObject trigger per target and signal): each
  target's own queries (the same PromQL built for that target alone), sent with bounded
  concurrency, then the same decisions;
- **vllm-scaler, recording rules**: the TTFT recording rule of ``deploy/rules`` loaded (a
  Prometheus reload), then the same cycles, which read its per-pod-group bucket rates.

The rule's own cost is reported beside the cycles (Prometheus' rule group evaluation duration
and interval), and Prometheus' CPU seconds per cycle for each approach, so that a saving is
not merely moved into the rule evaluation; the machine's load average too.

A cycle here is the Prometheus side plus the decisions; the Kubernetes reads (informer-style
snapshots of each Deployment and its pods) are built once and handed in, since their cost
does not depend on the query plan. Reported per approach: queries per cycle, cycle duration
p50 and p95, the controller's own CPU seconds per cycle, Prometheus' CPU seconds per cycle,
the load average at its start, this process' RSS growth; per query, the series answered,
the time waited for it and Prometheus' own timings of it (``stats=all``); for the run, the
peak RSS of this process and of Prometheus.

The modules: :mod:`.fleet` (the simulated pods and their expositions), :mod:`.cycles` (the
cycles of each approach), :mod:`.server` (Prometheus' side: the rule, its own CPU and query
stats), :mod:`.report` (the figures, as text or JSON), :mod:`.run` (the whole run) and
:mod:`.cli` (the command).
"""

from scaler.bench.scale.cli import main, register_scale
from scaler.bench.scale.report import QueryFigures, ScaleFigures, ScaleResult, format_result
from scaler.bench.scale.run import run_scale_bench
from scaler.bench.scale.server import RECORDING_GROUP

__all__ = [
    "RECORDING_GROUP",
    "QueryFigures",
    "ScaleFigures",
    "ScaleResult",
    "format_result",
    "main",
    "register_scale",
    "run_scale_bench",
]
