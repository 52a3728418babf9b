"""prometheus.cloudAuth: the values that turn on a managed Prometheus' authentication with
the pod's workload identity (docs/managed-prometheus.md): the controller's settings, the
ServiceAccount's annotation of each cloud (IRSA, GKE, Azure), Azure's pod label, and the image
with the cloud extras."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.render import Doc, helm_refusal, helm_render, one, validate

ROLE = "arn:aws:iam::123456789012:role/vllm-scaler"
GSA = "vllm-scaler@my-project.iam.gserviceaccount.com"


def _env(docs: list[Doc]) -> dict[str, Any]:
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


def _render(cloud: dict[str, Any], **prometheus: Any) -> list[Doc]:
    docs = helm_render({"prometheus": {"cloudAuth": cloud, **prometheus}})
    validate(docs)
    return docs


def test_aws_sigv4_with_irsa() -> None:
    docs = _render(
        {"provider": "aws-sigv4", "aws": {"roleArn": ROLE}},
        url="https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1",
    )
    env = _env(docs)
    assert env["VLLM_SCALER_PROMETHEUS_CLOUD_AUTH"] == "aws-sigv4"
    assert "VLLM_SCALER_PROMETHEUS_AWS_REGION" not in env  # read from the URL
    assert "VLLM_SCALER_PROMETHEUS_AWS_SERVICE" not in env  # aps, the default
    sa = one(docs, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": ROLE}
    image = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "ghcr.io/vllm-scaler/vllm-scaler:0.1.0-cloud"
    explicit = _env(
        _render({"provider": "aws-sigv4", "aws": {"region": "us-east-2", "service": "execute-api"}})
    )
    assert explicit["VLLM_SCALER_PROMETHEUS_AWS_REGION"] == "us-east-2"
    assert explicit["VLLM_SCALER_PROMETHEUS_AWS_SERVICE"] == "execute-api"


def test_google_workload_identity() -> None:
    docs = _render({"provider": "google", "google": {"serviceAccount": GSA}})
    assert _env(docs)["VLLM_SCALER_PROMETHEUS_CLOUD_AUTH"] == "google"
    sa = one(docs, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": GSA}
    # direct workload identity federation: no annotation at all
    plain = one(_render({"provider": "google"}), "ServiceAccount")
    assert "annotations" not in plain["metadata"]


def test_azure_workload_identity() -> None:
    docs = _render(
        {
            "provider": "azure",
            "azure": {"clientId": "0000-client", "tenantId": "1111-tenant"},
            "scope": "api://prometheus/.default",
        }
    )
    env = _env(docs)
    assert env["VLLM_SCALER_PROMETHEUS_CLOUD_AUTH"] == "azure"
    assert env["VLLM_SCALER_PROMETHEUS_CLOUD_AUTH_SCOPE"] == "api://prometheus/.default"
    sa = one(docs, "ServiceAccount")
    assert sa["metadata"]["annotations"] == {
        "azure.workload.identity/client-id": "0000-client",
        "azure.workload.identity/tenant-id": "1111-tenant",
    }
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert labels["azure.workload.identity/use"] == "true"
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert "azure.workload.identity/use" not in selector


def test_without_cloud_auth_nothing_changes() -> None:
    docs = helm_render({"serviceAccount": {"annotations": {"team": "ml"}}})
    env = _env(docs)
    assert not [n for n in env if "CLOUD" in n or "AWS" in n]
    assert one(docs, "ServiceAccount")["metadata"]["annotations"] == {"team": "ml"}
    image = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":0.1.0")
    pinned = helm_render(
        {"image": {"tag": "0.2.0"}, "prometheus": {"cloudAuth": {"provider": "google"}}}
    )
    assert one(pinned, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"].endswith(
        ":0.2.0"
    )  # a tag given is used as given


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {
                "prometheus": {
                    "cloudAuth": {"provider": "google"},
                    "bearerTokenSecret": {"name": "t"},
                }
            },
            "prometheus.cloudAuth.provider google with prometheus.bearerTokenSecret: requests "
            "carry one authentication",
            id="two-authentications",
        ),
        pytest.param(
            {"prometheus": {"cloudAuth": {"provider": "google", "aws": {"roleArn": ROLE}}}},
            'prometheus.cloudAuth.aws: set with provider "google"; expected provider aws-sigv4',
            id="aws-values-with-google",
        ),
        pytest.param(
            {
                "prometheus": {"cloudAuth": {"provider": "aws-sigv4", "aws": {"roleArn": ROLE}}},
                "serviceAccount": {"create": False, "name": "mine"},
            },
            "prometheus.cloudAuth: annotations eks.amazonaws.com/role-arn go on the "
            "ServiceAccount, which the chart does not create (serviceAccount.create false): "
            "annotate mine yourself",
            id="no-service-account",
        ),
        pytest.param(
            {
                "prometheus": {
                    "cloudAuth": {"provider": "google", "google": {"serviceAccount": GSA}}
                },
                "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "x@y"}},
            },
            "serviceAccount.annotations.iam.gke.io/gcp-service-account: set by "
            "prometheus.cloudAuth too, to another value",
            id="two-annotations",
        ),
    ],
)
def test_cloud_auth_values_that_contradict_are_refused(
    values: dict[str, Any], message: str
) -> None:
    assert message in helm_refusal(values)


def test_cloud_auth_values_out_of_the_schema_fail_before_rendering() -> None:
    assert "value must be one of" in helm_refusal(
        {"prometheus": {"cloudAuth": {"provider": "aws"}}}, by_schema=True
    )
    assert "does not match pattern" in helm_refusal(
        {"prometheus": {"cloudAuth": {"provider": "aws-sigv4", "aws": {"roleArn": "scaler"}}}},
        by_schema=True,
    )
