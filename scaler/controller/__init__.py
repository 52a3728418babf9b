"""The live controller: the asyncio loop and the composition root that wires it.

- :mod:`.app`: the composition root (``run`` and ``recommend``): builds the clients, the
  source, the actuator, leader election and telemetry, and runs the loop.
- :mod:`.loop`: one control cycle: read, decide, plan the writes, apply them, export.
- :mod:`.records`: what the cycle remembers of each target, one record per target.
- :mod:`.lease_state`: the decision state that survives a failover, on the Lease.
- :mod:`.events_due`: which Events of a target are due (once, then again on a change).
- :mod:`.plan`: the writes of one target and cycle, as a value; :mod:`.apply`: the one
  place that writes them.
- :mod:`.overrides`: other autoscalers, pause and pin over the core's decision (pure).
- :mod:`.exports`: the metrics and the decision log of each decision.
- :mod:`.report`: the per-target reports and how ``--output json``/``text`` print them.
- :mod:`.leader`: leader election on a Lease; :mod:`.fence`: every write checked on it.

Above :mod:`scaler.sources` and :mod:`scaler.actuators`.
"""
