"""kwok's Stages for the test nodes and pods (scaler.sim.controlplane.stages): the delay to
Ready that plays a model load, its per-pod annotation, and the deletion delay."""

from __future__ import annotations

from scaler.sim.controlplane.stages import (
    DELETE_DELAY_ANNOTATION,
    READY_DELAY_ANNOTATION,
    stages,
)


def test_the_pod_stages_carry_the_delays_and_their_annotations() -> None:
    docs = {
        d["metadata"]["name"]: d for d in stages(ready_delay_seconds=20, delete_delay_seconds=0.5)
    }
    assert sorted(docs) == ["node-heartbeat", "node-ready", "pod-delete", "pod-ready"]
    assert {d["kind"] for d in docs.values()} == {"Stage"}
    ready = docs["pod-ready"]["spec"]
    assert ready["resourceRef"] == {"apiGroup": "v1", "kind": "Pod"}
    assert ready["delay"]["durationMilliseconds"] == 20_000
    assert ready["delay"]["durationFrom"] == {
        "expressionFrom": f'.metadata.annotations["{READY_DELAY_ANNOTATION}"]'
    }
    # only scheduled, pending, live pods become ready
    keys = {e["key"]: e["operator"] for e in ready["selector"]["matchExpressions"]}
    assert keys == {
        ".metadata.deletionTimestamp": "DoesNotExist",
        ".spec.nodeName": "Exists",
        ".status.phase": "In",
    }
    assert "type: Ready" in ready["next"]["statusTemplate"]
    delete = docs["pod-delete"]["spec"]
    assert delete["delay"]["durationMilliseconds"] == 500
    assert DELETE_DELAY_ANNOTATION in delete["delay"]["durationFrom"]["expressionFrom"]
    assert delete["next"] == {"delete": True}
