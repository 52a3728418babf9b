"""vllm-scaler: an autoscaling controller for vLLM inference servers on Kubernetes.

Layout (each folder one job):

- ``core/``: the pure decision core (signals and state in, decision out; no I/O).
- ``config/``: process settings (environment) and the YAML scaling policy.
- ``sources/``: reading signals from Prometheus.
- ``actuators/``: reading and writing the Kubernetes ``scale`` subresource.
- ``telemetry/``: our own Prometheus metrics and structured logs.
- ``controller/``: the asyncio loop and the composition root that wires the above.
- ``sim/``: the simulated vLLM fleet and Kubernetes API stand-in (the embedded default).
"""

__version__ = "0.1.0"
