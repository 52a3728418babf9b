"""The Kubernetes API calls the controller makes, as RBAC sees them: a recorded request's
(API group, resource[/subresource], verb) and namespace, and whether a Role's or
ClusterRole's rules allow it."""

from __future__ import annotations

import re
from typing import Any

PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"/namespaces/(?P<ns>[^/]+)/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)
_VERB = {"GET": "get", "PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}

Call = tuple[str, str, str]


def call(method: str, path: str) -> Call:
    """``(group, resource, verb)`` of a request: ``("apps", "deployments/scale", "patch")``;
    a GET without a name is ``list``."""
    m = PATH.match(path)
    assert m, path
    group = "" if m["core"] else m["group"]
    resource = m["resource"] + (f"/{m['sub']}" if m["sub"] else "")
    verb = _VERB[method]
    if method == "GET" and not m["name"]:
        verb = "list"
    return group, resource, verb


def namespace(path: str) -> str:
    """The namespace of a namespaced request's path."""
    m = PATH.match(path)
    assert m, path
    return m["ns"]


def allowed(rules: list[dict[str, Any]], wanted: Call) -> bool:
    """Whether a rule grants ``(group, resource, verb)`` (no resourceNames, no wildcards: the
    chart writes neither for the targets)."""
    group, resource, verb = wanted
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )
