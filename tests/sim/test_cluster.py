"""SimCluster: stop is safe whatever started (the demo stops it after an interrupted start)."""

from __future__ import annotations

from pathlib import Path

from scaler.sim.cluster import SimCluster
from scaler.sim.engine import ReplicaModel
from scaler.sim.fleet import FleetConfig


async def test_stop_before_start_and_twice_is_a_no_op(tmp_path: Path) -> None:
    cluster = SimCluster(
        tmp_path, FleetConfig(model=ReplicaModel(model_load_seconds=1.0)), clock=lambda: 100.0
    )
    await cluster.stop()
    await cluster.stop()
    assert cluster.kube_url == ""
    assert cluster.fleet.spec_replicas == 1
    assert not (tmp_path / "kubeconfig").exists()
