"""h08: an outside write names its writer (the stand-in keeps managedFields as the API
server does: the field manager of each scale write owns spec.replicas)."""

from __future__ import annotations

import pytest

from tests.cases.hunt import busy
from tests.support.controller_harness import (
    NAME,
    NS,
    HarnessFactory,
    captured_logs,
    make_harness,
)
from tests.support.fakeprom import case_file

__all__ = ["make_harness"]

THREE = ["pod-0", "pod-1", "pod-2"]
SIX = [f"pod-{i}" for i in range(6)]


@pytest.mark.parametrize(
    ("manager", "says"),
    [
        pytest.param(
            "aibrix-controller-manager",
            "spec.replicas was last written by field manager 'aibrix-controller-manager' "
            "(an Update through the scale subresource at 2024-06-10T06:13:40Z)",
            id="another autoscaler",
        ),
        pytest.param(
            "vllm-scaler",
            "this controller's own name: another installation of vllm-scaler",
            id="a second installation",
        ),
    ],
)
async def test_h08_an_outside_write_names_its_field_manager(
    make_harness: HarnessFactory, manager: str, says: str
) -> None:
    """h08: the decision and the warning name the field manager that owns spec.replicas."""
    case_file("h08-who-wrote-the-replicas.md")
    h = await make_harness(replicas=3, ready=THREE, answers=busy(dict.fromkeys(THREE, "20")))
    first = await h.cycle()
    assert first.action == "scaled" and h.replicas() == 6
    h.add_ready(SIX[3:])
    h.fake.set(**busy(dict.fromkeys(SIX, "10")))
    h.clock.advance(20)
    h.store.external_scale(NS, NAME, 2, manager=manager)
    with captured_logs() as logs:
        report = await h.next_cycle(10)
    d = report.decision
    assert d is not None and d.outside_write and d.current_replicas == 2
    assert says in d.message, d.message
    [warning] = [e for e in logs if e["event"] == "outside_write"]
    assert warning["field_manager"] == manager
    assert f"(field manager {manager!r})" in warning["message"]


async def test_h08_our_own_writes_are_not_named(make_harness: HarnessFactory) -> None:
    """h08: without an outside write nothing is added to the message."""
    case_file("h08-who-wrote-the-replicas.md")
    h = await make_harness(replicas=3, ready=THREE, answers=busy(dict.fromkeys(THREE, "20")))
    await h.cycle()
    h.add_ready(SIX[3:])
    h.fake.set(**busy(dict.fromkeys(SIX, "10")))
    report = await h.next_cycle()
    assert report.decision is not None and not report.decision.outside_write
    assert "last written by" not in report.decision.message
    meta = h.store.get_workload(NS, NAME)["metadata"]
    [entry] = meta["managedFields"]
    assert (entry["manager"], entry["subresource"]) == ("vllm-scaler", "scale")
