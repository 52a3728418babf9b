"""The live controller: the asyncio loop and the composition root that wires it.

- :mod:`.app`: the composition root (``run`` and ``recommend``): builds the clients, the
  source, the actuator, leader election and telemetry, and runs the loop.
- :mod:`.loop`: one control cycle: read, decide, plan the writes, apply them, export.
- :mod:`.overrides`: other autoscalers, pause and pin over the core's decision (pure).
- :mod:`.plan`: the writes of one target and cycle, as a value.
- :mod:`.report`: the per-target reports and how ``--output json``/``text`` print them.
- :mod:`.leader`: leader election on a Lease.

Above :mod:`scaler.sources` and :mod:`scaler.actuators`.
"""
