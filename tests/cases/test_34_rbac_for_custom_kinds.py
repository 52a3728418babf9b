"""Case 34 (tests/cases/34-rbac-for-custom-kinds.md): every kind the policy accepts is granted
by the RBAC the chart renders for that policy, for rbac.scope=cluster and =namespaces."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.config.policy import KNOWN_API_VERSIONS, KNOWN_PLURALS, WorkloadRef, parse_policy
from tests.deploy.rbac_calls import Call, allowed, call, namespace
from tests.deploy.render import CHART, Doc, helm_render
from tests.support.controller_harness import open_harness

CASE_TARGET = {
    "apiVersion": "grove.io/v1alpha1",
    "kind": "PodCliqueScalingGroup",
    "namespace": "llm",
    "name": "dsr1-decode",
    "plural": "podcliquescalinggroups",
}
READ_ONLY = {"get", "list", "watch"}


def _policy(*workloads: dict[str, str]) -> dict[str, Any]:
    return {"targets": [{"workload": w, "min_replicas": 1, "max_replicas": 4} for w in workloads]}


def _rules(docs: list[Doc], ns: str) -> list[dict[str, Any]]:
    """The rules that apply to ``ns``: the ClusterRole's, or the workload Role's there."""
    rules: list[dict[str, Any]] = []
    for d in docs:
        if d["kind"] == "ClusterRole" or (
            d["kind"] == "Role"
            and d["metadata"]["namespace"] == ns
            and not d["metadata"]["name"].endswith("-leader-election")
        ):
            rules += d["rules"]
    return rules


SCOPES = [
    pytest.param({"rbac": {"scope": "cluster"}}, id="cluster"),
    pytest.param({"rbac": {"scope": "namespaces"}}, id="namespaces"),
]


async def test_the_case_target_is_granted_what_the_controller_calls(tmp_path: Path) -> None:
    """The real actuator against the API stand-in: read (scale, pods), the annotations, a
    scale patch and an Event on the case's PodCliqueScalingGroup; every call is allowed by the
    chart's rules for that policy, with either scope, and recommend-only allows the reads."""
    ref = WorkloadRef.model_validate(CASE_TARGET)
    async with open_harness(tmp_path, replicas=1) as h:
        h.store.register_kind("grove.io", "v1alpha1", "PodCliqueScalingGroup", ref.resource)
        h.store.add_workload(
            "grove.io", ref.resource, "llm", "dsr1-decode", replicas=2, labels={"app": "dsr1"}
        )
        before = len(h.kube.requests)
        snap = await h.actuator.read(ref)
        await h.actuator.read_annotations(ref)
        assert (await h.actuator.scale(ref, 3, current=snap)).ok
        assert await h.actuator.emit_event(ref, reason="SuccessfulRescale", message="test")
        recorded = [r for r in h.kube.requests[before:] if r.path.startswith("/api")]
    calls: set[Call] = {call(r.method, r.path) for r in recorded}
    assert {namespace(r.path) for r in recorded} == {"llm"}
    assert ("grove.io", "podcliquescalinggroups/scale", "patch") in calls
    assert ("grove.io", "podcliquescalinggroups", "get") in calls
    policy = _policy(CASE_TARGET)
    for scope in ("cluster", "namespaces"):
        docs = helm_render({"rbac": {"scope": scope}, "policy": policy})
        rules = _rules(docs, "llm")
        for c in calls:
            assert allowed(rules, c), (scope, c)
        # nothing of the kind beyond what is called
        kind_grants = {
            (g, res, v)
            for r in rules
            for g in r["apiGroups"]
            for res in r["resources"]
            for v in r["verbs"]
            if g == "grove.io"
        }
        assert kind_grants == {c for c in calls if c[0] == "grove.io"}, scope
        read_only = _rules(
            helm_render({"rbac": {"scope": scope}, "policy": policy, "recommendOnly": True}), "llm"
        )
        for c in calls:
            assert allowed(read_only, c) == (c[2] in READ_ONLY), (scope, c)


_GROUP = st.sampled_from(["grove.io", "serving.kserve.io", "ray.io", "example.com", "apps"])
_NAME = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)


@st.composite
def _workload(draw: st.DrawFn) -> dict[str, str]:
    ns = draw(st.sampled_from(["llm", "team-a", "team-b"]))
    name = draw(_NAME)
    if draw(st.booleans()):  # a known kind, with its plural or without
        kind = draw(st.sampled_from(sorted(KNOWN_PLURALS)))
        w = {"apiVersion": KNOWN_API_VERSIONS[kind], "kind": kind, "namespace": ns, "name": name}
        if draw(st.booleans()):
            w["plural"] = KNOWN_PLURALS[kind]
        return w
    plural = draw(_NAME) + "s"
    kind = plural[0].upper() + plural[1:-1]
    group = draw(_GROUP)
    return {"apiVersion": f"{group}/v1", "kind": kind, "namespace": ns, "name": name,
            "plural": plural}  # fmt: skip


@pytest.mark.parametrize("scope", SCOPES)
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(workloads=st.lists(_workload(), min_size=1, max_size=5))
def test_every_kind_the_policy_accepts_is_granted(
    scope: dict[str, Any], workloads: list[dict[str, str]]
) -> None:
    """Any policy the controller accepts: each target's resource (get) and scale subresource
    (get, patch) are granted in the target's namespace, and the Roles of rbac.scope=namespaces
    grant a custom kind only where a target of it lives."""
    policy = _policy(*workloads)
    refs = [t.workload for t in parse_policy(policy).targets]  # the policy accepts it
    docs = helm_render({**scope, "policy": policy})
    for ref in refs:
        rules = _rules(docs, ref.namespace)
        for wanted in (
            (ref.group, f"{ref.resource}/scale", "get"),
            (ref.group, f"{ref.resource}/scale", "patch"),
            (ref.group, ref.resource, "get"),
        ):
            assert allowed(rules, wanted), (ref.key(), wanted)
    if scope["rbac"]["scope"] == "namespaces":
        known = {(KNOWN_API_VERSIONS[k].split("/")[0], p) for k, p in KNOWN_PLURALS.items()}
        for ns in {ref.namespace for ref in refs}:
            here = {(r.group, r.resource) for r in refs if r.namespace == ns}
            granted = {
                (g, res)
                for rule in _rules(docs, ns)
                for g in rule["apiGroups"]
                for res in rule["resources"]
                if not res.endswith("/scale")
            }
            # beside the autoscalers read and the VLLMAutoscaler resources (not a target kind)
            others = ("", "autoscaling", "keda.sh", "autoscaling.vllm-scaler.io")
            custom = {gr for gr in granted if gr[0] not in others}
            assert custom - known == here - known, ns


def test_the_chart_knows_the_kinds_the_policy_knows() -> None:
    """The chart's table of the kinds that need no plural is the policy's (a kind added to
    one and not the other would be accepted and not granted, or the reverse)."""
    helpers = (CHART / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    block = re.search(
        r'define "vllm-scaler.knownKinds" -}}\n(.*?)\{\{- end }}', helpers, flags=re.S
    )
    assert block is not None
    chart = yaml.safe_load(block.group(1))
    assert set(chart) == set(KNOWN_PLURALS)
    for kind, entry in chart.items():
        assert entry["plural"] == KNOWN_PLURALS[kind]
        assert entry["group"] == KNOWN_API_VERSIONS[kind].rpartition("/")[0]


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        pytest.param(
            {**CASE_TARGET, "plural": None},
            "policy.targets[0].workload: kind PodCliqueScalingGroup of grove.io/v1alpha1 names no "
            "plural, so the chart cannot grant the controller access to it: set "
            "policy.targets[0].workload.plural to its resource name (kubectl api-resources "
            "--api-group=grove.io)",
            id="no-plural",
        ),
        pytest.param(
            {
                **CASE_TARGET,
                "apiVersion": "v1",
                "kind": "ReplicationController",
                "plural": "replicationcontrollers",
            },
            'policy.targets[0].workload: kind ReplicationController of apiVersion "v1" is in '
            "Kubernetes' core group, which vllm-scaler does not scale",
            id="core-group",
        ),
    ],
)
@pytest.mark.parametrize("scope", SCOPES)
def test_a_kind_without_a_resource_or_of_the_core_group_is_refused(
    scope: dict[str, Any], workload: dict[str, Any], message: str
) -> None:
    helm = pytest.importorskip("helm_python")
    w = {k: v for k, v in workload.items() if v is not None}
    with pytest.raises(helm.HelmError) as err:
        helm_render({**scope, "policy": _policy(w)})
    assert message in str(err.value)
