"""Who may ask, and what an unknown path answers: the server's version is public; an
anonymous request is RBAC's to refuse (403, naming ``system:anonymous``), a token the server
does not know is 401; a kind whose CRD is not installed is the router's plain-text 404 (no
Status: the controller reads "KEDA is not installed" from the 404 alone), a known group's
unknown resource and a missing object are Status 404s."""

from __future__ import annotations

from tests.cluster.contract.servers import PODCLIQUE, Server


async def test_the_version_is_public(api: Server) -> None:
    for auth in ("anonymous", "admin"):
        answer = await api.request("GET", "/version", auth=auth)
        assert answer.status == 200, answer
        assert {"major", "minor", "gitVersion", "platform"} <= set(answer.body)


async def test_an_anonymous_request_is_forbidden_naming_what_it_asked(api: Server) -> None:
    ns = api.namespace
    pods = await api.request("GET", f"/api/v1/namespaces/{ns}/pods", auth="anonymous")
    assert pods.summary() == (403, "Forbidden", [])
    assert pods.message == (
        f'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API '
        f'group "" in the namespace "{ns}"'
    )
    assert pods.body["details"] == {"kind": "pods"}
    scale = await api.request(
        "PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/vllm/scale", {"spec": {}},
        content_type="application/merge-patch+json", auth="anonymous",
    )  # fmt: skip
    assert scale.summary() == (403, "Forbidden", [])
    assert scale.message == (
        'deployments.apps "vllm" is forbidden: User "system:anonymous" cannot patch resource '
        f'"deployments/scale" in API group "apps" in the namespace "{ns}"'
    )
    assert scale.body["details"] == {"name": "vllm", "group": "apps", "kind": "deployments"}
    # even a kind the server does not serve: authorization comes before routing
    keda = await api.request(
        "GET", f"/apis/keda.sh/v1alpha1/namespaces/{ns}/scaledobjects", auth="anonymous"
    )
    assert keda.summary() == (403, "Forbidden", [])


async def test_a_token_the_server_does_not_know_is_unauthorized(api: Server) -> None:
    answer = await api.request("GET", f"/api/v1/namespaces/{api.namespace}/pods", auth="wrong")
    assert answer.summary() == (401, "Unauthorized", [])
    assert answer.message == "Unauthorized"


async def test_a_kind_without_its_crd_is_the_routers_plain_404(api: Server) -> None:
    ns = api.namespace
    await api.install(PODCLIQUE)
    for path in (
        f"/apis/keda.sh/v1alpha1/namespaces/{ns}/scaledobjects",
        f"/apis/keda.sh/v1alpha1/namespaces/{ns}/scaledobjects/vllm",
        # a served group, a resource or version it does not have
        f"/apis/grove.io/v1alpha1/namespaces/{ns}/nothings",
        f"/apis/grove.io/v9/namespaces/{ns}/podcliques",
    ):
        answer = await api.get(path)
        assert (answer.status, answer.content_type, answer.body) == (
            404,
            "text/plain",
            "404 page not found\n",
        ), path


async def test_a_built_in_groups_unknown_resource_and_a_missing_object_are_status_404s(
    api: Server,
) -> None:
    ns = api.namespace
    await api.install(PODCLIQUE)
    unknown = await api.get(f"/apis/apps/v1/namespaces/{ns}/nothings")
    assert unknown.summary() == (404, "NotFound", [])
    assert unknown.message == "the server could not find the requested resource"
    for path, message, details in (
        (f"/apis/apps/v1/namespaces/{ns}/deployments/nope/scale",
         'deployments.apps "nope" not found',
         {"name": "nope", "group": "apps", "kind": "deployments"}),
        (f"/apis/apps/v1/namespaces/{ns}/replicasets/nope", 'replicasets.apps "nope" not found',
         {"name": "nope", "group": "apps", "kind": "replicasets"}),
        (f"/apis/apps/v1/namespaces/{ns}/statefulsets/nope", 'statefulsets.apps "nope" not found',
         {"name": "nope", "group": "apps", "kind": "statefulsets"}),
        (f"/api/v1/namespaces/{ns}/pods/nope", 'pods "nope" not found',
         {"name": "nope", "kind": "pods"}),
        (f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/nope",
         'leases.coordination.k8s.io "nope" not found',
         {"name": "nope", "group": "coordination.k8s.io", "kind": "leases"}),
        (f"/apis/grove.io/v1alpha1/namespaces/{ns}/podcliques/nope/scale",
         'podcliques.grove.io "nope" not found',
         {"name": "nope", "group": "grove.io", "kind": "podcliques"}),
    ):  # fmt: skip
        answer = await api.get(path)
        assert answer.summary() == (404, "NotFound", []), path
        assert (answer.message, answer.body["details"]) == (message, details), path


async def test_a_verb_a_resource_does_not_serve_is_405(api: Server) -> None:
    answer = await api.request(
        "DELETE", f"/apis/apps/v1/namespaces/{api.namespace}/deployments/vllm/scale"
    )
    assert answer.summary() == (405, "MethodNotAllowed", [])
