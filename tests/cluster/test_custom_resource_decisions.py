"""The policy file and the VLLMAutoscaler give the same decisions on the same inputs.

deploy/base/policy.yaml's target (the policy file, in the snake_case ``workload`` form of the
first releases) and deploy/examples/vllmautoscaler.yaml (the same target as a resource) are
each run through the real decision path, the Prometheus source reading the emulated
Prometheus and the decision core, on the same simulated fleet and trace in virtual time (a
fake clock: :mod:`scaler.bench.simulate`). The resource is the one the real API server gives
back after ``kubectl apply``, with the defaults its schema filled in, so a default of the CRD
that differs from the policy's would show here as a different decision.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.bench import controllers
from scaler.bench.controllers import VllmScalerController
from scaler.bench.simulate import simulate
from scaler.config.policy import Policy, TargetPolicy, load_policy
from scaler.config.resource import target_of
from scaler.core.decide import decide
from scaler.sim.controlplane import Cluster
from scaler.sim.engine import ReplicaModel
from scaler.sim.synthetic import synthetic_trace
from tests.cluster.test_custom_resource import CRD_FILE, resource_path
from tests.cluster.workloads import crd_installed

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "deploy" / "base" / "policy.yaml"
EXAMPLE = ROOT / "deploy" / "examples" / "vllmautoscaler.yaml"

Doc = dict[str, Any]
#: (virtual seconds, current replicas, desired replicas, reason) of each decision
Decisions = list[tuple[float, int, int, str]]


@pytest.fixture(scope="module")
def vllm_crd(kube: Cluster) -> Iterator[None]:
    (crd,) = [d for d in yaml.safe_load_all(CRD_FILE.read_text(encoding="utf-8")) if d]
    with crd_installed(kube, crd):
        yield


def _served(kube: Cluster, namespace: str, doc: Doc) -> TargetPolicy:
    """``doc`` applied in ``namespace`` and read back from the API server (its defaults
    filled in by the schema), as the controller's watch reads it: its target."""
    doc = copy.deepcopy(doc)
    doc["metadata"]["namespace"] = namespace
    kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    served = kube.get(resource_path(namespace, doc["metadata"]["name"]))
    assert served["spec"] != doc["spec"], "the schema filled in no default"
    return target_of(served)


def _decisions(target: TargetPolicy, rate_window_seconds: float, monkeypatch: Any) -> Decisions:
    """Every decision of the real decision path for ``target`` on the flash trace (30
    minutes: 0.5 requests/s, 5 from minute 10 to 20, 0.5 again): one fleet, one seed."""
    seen: Decisions = []

    def recording(policy: Any, observation: Any, state: Any, now: float, **kw: Any) -> Any:
        d = decide(policy, observation, state, now, **kw)
        seen.append((now, d.current_replicas, d.desired_replicas, str(d.reason)))
        return d

    monkeypatch.setattr(controllers, "decide", recording)
    controller = VllmScalerController(
        target, rate_window_seconds=rate_window_seconds, interval_seconds=15
    )
    # (the loop closes the controller at the end)
    simulate(
        synthetic_trace("flash"),
        controller,
        model=ReplicaModel(),
        initial_replicas=1,
        seed=0,
    )
    return seen


def test_the_policy_file_and_the_resource_decide_the_same(
    kube: Cluster, vllm_crd: None, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = load_policy(POLICY_FILE)
    (from_file,) = policy.targets
    example = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    from_resource = _served(kube, namespace, example)
    # one controller, one rate window: the resource has none of its own (the file's, or
    # the default when the controller runs without a file)
    assert policy.rate_window_seconds == Policy.without_targets().rate_window_seconds
    window = policy.rate_window_seconds

    file_run = _decisions(from_file, window, monkeypatch)
    resource_run = _decisions(from_resource, window, monkeypatch)
    assert resource_run == file_run
    # the run is one that could tell them apart: it scales up and down and holds
    ups = [d for d in file_run if d[2] > d[1]]
    downs = [d for d in file_run if d[2] < d[1]]
    assert ups and downs, file_run
    assert len({reason for *_, reason in file_run}) >= 3, file_run
    assert max(desired for _, _, desired, _ in file_run) == 8  # the example's maxReplicas
    # one decision every 15 virtual seconds over the 30 minutes of the trace, and its tail
    assert len(file_run) >= 120
    assert {b[0] - a[0] for a, b in itertools.pairwise(file_run)} == {15.0}

    # and a resource that differs in one field decides differently on the same inputs
    narrower = copy.deepcopy(example)
    narrower["metadata"]["name"] = "narrower"
    narrower["spec"]["maxReplicas"] = 2
    other = _decisions(_served(kube, namespace, narrower), window, monkeypatch)
    assert other != file_run
    assert max(desired for _, _, desired, _ in other) == 2
