"""What a request asks for, read from its method and path as kube-apiserver's request info
does: the verb, the resource's group, name and namespace (the words of an RBAC refusal)."""

from __future__ import annotations

from dataclasses import dataclass

#: Paths anyone may read (kube-apiserver's ``system:public-info-viewer`` and health checks).
PUBLIC_PATHS = frozenset({"/version", "/version/", "/healthz", "/readyz", "/livez"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """A resource request's verb (``get``, ``list``, ``create``, ``update``, ``patch``,
    ``delete``...), group ('' for the core group), resource, subresource, namespace and name;
    ``resource`` '' for a path that names no resource."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @classmethod
    def parse(cls, method: str, path: str) -> RequestInfo:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, rest = parts[1], parts[3:]
        else:
            return cls("get" if method == "GET" else method.lower())
        namespace = ""
        if len(rest) >= 2 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        resource = rest[0] if rest else ""
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        verb = {
            "GET": "get" if name else "list",
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method, method.lower())
        return cls(verb, group, resource, subresource, namespace, name)
