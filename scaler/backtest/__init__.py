"""Backtest a policy on real history: what it would have done beside what happened.

``vllm-scaler backtest`` reads the history of the controller's own queries and of the target's
replica counts from Prometheus (:mod:`.history`), turns every step into the readings the live
source would have produced (:mod:`.classify`), replays them through the decision core
(:mod:`.replay`) and reports a timeline, scale events, replica-hours and a plot (:mod:`.report`).
:mod:`.pipeline` joins the reading, the classification and the replay (no I/O choices of its
own). Time arguments are parsed, and times printed, by :mod:`.timeparse`; the command is in
:mod:`.cli`.
"""
