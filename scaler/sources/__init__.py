"""Reading the signals: the PromQL vllm-scaler sends and the Prometheus source that sends it.

- :mod:`.promql`: the cycle's queries (at most six whatever the number of targets), label
  escaping and each target's selector.
- :mod:`.prometheus`: HTTP and auth, answer parsing, splitting answers per target, the
  per-target readings and the start-up check.

Above :mod:`scaler.core` (it hands readings to it), beside :mod:`scaler.actuators`.
"""
