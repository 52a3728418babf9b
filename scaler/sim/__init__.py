"""The simulated cluster (the embedded default): vLLM replicas, a Kubernetes API stand-in,
Prometheus, and the ``vllm-scaler sim`` demo that runs the real controller against them.

- :mod:`.engine`, :mod:`.fleet`: the replica model (continuous batching, KV cache, model
  load, draining) and the fleet that follows ``spec.replicas``.
- :mod:`.exposition`, :mod:`.serving`: each replica's ``/metrics`` in vLLM's format, served
  on loopback under the wall clock.
- :mod:`.kubeapi`: the strict stand-in for the subset of the Kubernetes API the controller
  uses, over real HTTP.
- :mod:`.prometheus_server`: Debian's ``prometheus`` on loopback.
- :mod:`.cluster`: the three started and stopped together; :mod:`.trace`: request traces;
  :mod:`.demo`, :mod:`.report`, :mod:`.cli`: the demo command, its summary and plot.
"""
