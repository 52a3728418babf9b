"""The pure decision core: signals and state in, a decision with its reason out.

No I/O, no asyncio, no clock reads; it imports only :mod:`scaler.config`. The live loop, the
backtest and the benchmarks all decide through it.

- :mod:`.decide`: one target's decision as named phases, after the Kubernetes HPA:
  :mod:`.guards` (the recommendation and the guards that hold, a hold as a
  :class:`~scaler.core.reasons.Hold`), then :mod:`.phases` (stabilize, the learning floor,
  step limit, clamp, outside writer), each returning a :class:`~scaler.core.reasons.Phase`.
- :mod:`.latency`: every latency SLO of a target (TTFT, ITL) against its reading.
- :mod:`.evaluation`: one signal's proportional rule with the tolerance band.
- :mod:`.capacity`: the capacity signal (demand, capacity learned online, the replicas the
  forecast needs); :mod:`.forecast`: the demand forecast over the model-load horizon;
  :mod:`.load_time`: the model load time learned from pod starts.
- :mod:`.messages`: the decision's reason and its sentence with the numbers.
- :mod:`.signals`: the readings a source hands to the core, with their statuses.
- :mod:`.observation`: replica counts and pods of a target (ready, starting, stuck,
  terminating).
- :mod:`.state`: what a target's decisions remember from cycle to cycle, and its encoding.
- :mod:`.reasons`: the fixed vocabulary of decision reasons and limits.
- :mod:`.drain`: which pods a scale-down should remove (pod-deletion-cost).
"""
