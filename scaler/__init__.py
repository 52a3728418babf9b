"""vllm-scaler: an autoscaling controller for vLLM inference servers on Kubernetes.

Layout (each folder one job), from the top layer down; a layer imports only those below it
(``[tool.importlinter]`` in pyproject.toml):

- ``cli.py``: the ``vllm-scaler`` command line.
- ``bench/``: autoscaling policies compared on real traces in virtual time.
- ``sim/``: the simulated vLLM fleet, Kubernetes API stand-in and Prometheus (the demo);
  ``backtest/``: a policy replayed on Prometheus history.
- ``controller/``: the asyncio loop and the composition root that wires the layers below.
- ``sources/``: reading signals from Prometheus; ``actuators/``: reading and writing the
  Kubernetes ``scale`` subresource.
- ``telemetry/``: our own Prometheus metrics and structured logs.
- ``core/``: the pure decision core (signals and state in, decision out; no I/O).
- ``config/``: the shared vocabulary, the YAML scaling policy and process settings.
"""

__version__ = "0.1.0"
