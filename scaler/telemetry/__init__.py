"""vllm-scaler's own telemetry: Prometheus metrics, the ``/metrics`` endpoint, structured logs.

- :mod:`.metrics`: every ``vllm_scaler_*`` metric and how a decision is exported.
- :mod:`.server`: ``/metrics``, ``/healthz`` and ``/readyz``.
- :mod:`.logging`: structlog set-up; :mod:`.redact`: the masking stdout/stderr every
  output of every command passes through.
"""
