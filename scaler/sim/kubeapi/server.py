"""The HTTP face of the store: routes, bearer-token auth, fault injection, Status rendering."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

import yaml
from aiohttp import web

from scaler.sim.kubeapi.errors import (
    JSON,
    ApiError,
    bad_request,
    invalid,
    unsupported_media_type,
)
from scaler.sim.kubeapi.patches import (
    APPLY_PATCH,
    apply_patch,
    patch_media_types,
)
from scaler.sim.kubeapi.selectors import SelectorError, field_filter
from scaler.sim.kubeapi.store import KubeStore

# The content types of a POST or PUT body (YAML is decoded for Scale PUTs only).
_WRITE_TYPES = ("application/json", "application/yaml")


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One HTTP request the server answered (``path`` without query; ``status`` is the answer)."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    status: int


def _json(body: JSON, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


def _media_type(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";")[0].strip().lower()


def _named_object(request: web.Request) -> tuple[str, str, str, str, str]:
    """(group, version, plural, namespace, name) of an ``/apis/...`` object path."""
    m = request.match_info
    return m["group"], m["version"], m["plural"], m["ns"], m["name"]


def _dry_run(request: web.Request) -> bool:
    value = request.query.get("dryRun")
    if value is None:
        return False
    if value != "All":
        raise bad_request(f"Invalid dryRun value {value!r}: only 'All' is supported")
    return True


class KubeApiServer:
    """Serves a :class:`KubeStore` over HTTP on loopback with bearer-token auth.

    Use as ``async with KubeApiServer(store, token="t") as server: server.url``. Every
    answered request is appended to :attr:`requests` (in order).

    Args:
        store: the objects to serve.
        token: the only accepted bearer token.
        host: bind address. port: 0 picks a free port (see :attr:`url` after start).
    """

    def __init__(
        self, store: KubeStore, *, token: str, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.store = store
        self.token = token
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._runner: web.AppRunner | None = None
        self._app = web.Application(middlewares=[self._middleware])
        r = self._app.router
        r.add_route("*", "/version", self._version)
        r.add_route("*", "/version/", self._version)  # the generated VersionApi uses this
        r.add_route("*", "/api/v1/namespaces/{ns}/pods", self._pods)
        r.add_route("*", "/api/v1/namespaces/{ns}/pods/{name}", self._pod)
        r.add_route("*", "/api/v1/namespaces/{ns}/events", self._events)
        r.add_route("*", "/apis/{group}/{version}/namespaces/{ns}/{plural}", self._collection)
        r.add_route("*", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}", self._object)
        r.add_route(
            "*", "/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}/scale", self._scale
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (valid after :meth:`start`)."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> str:
        """Bind and serve; returns :attr:`url`. Restarting reuses the first port."""
        runner = web.AppRunner(self._app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        return self.url

    async def stop(self) -> None:
        """Stop serving and close connections (clients then see connection refused)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> KubeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def methods(self) -> list[str]:
        """The HTTP methods of :attr:`requests`, in order."""
        return [r.method for r in self.requests]

    # -- plumbing

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                raise ApiError.generic(401)
            fault = self.store.take_fault(request.method, request.path)
            if fault is not None:
                raise fault
            response = await handler(request)
        except ApiError as err:
            response = _json(err.status_body(), err.code, err.headers)
        except SelectorError as err:
            response = _json(bad_request(str(err)).status_body(), 400)
        except web.HTTPNotFound:
            response = _json(ApiError.generic(404).status_body(), 404)
        except web.HTTPMethodNotAllowed:
            response = _json(ApiError.generic(405).status_body(), 405)
        # as the real server: its own clock in every answer's Date header (RFC 7231)
        response.headers["Date"] = formatdate(self.store.now(), usegmt=True)
        self.requests.append(
            RecordedRequest(
                request.method,
                request.path,
                dict(request.query),
                request.headers.get("Content-Type"),
                response.status,
            )
        )
        return response

    @staticmethod
    def _allow(request: web.Request, *methods: str) -> None:
        if request.method not in methods:
            raise ApiError.generic(405)

    @staticmethod
    async def _body(request: web.Request, *, yaml_ok: bool = False) -> Any:
        raw = await request.read()
        try:
            if yaml_ok:
                return yaml.safe_load(raw.decode("utf-8"))
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as err:
            raise bad_request(f"error decoding request body: {err}") from None

    # -- handlers

    async def _version(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET")
        return _json(
            {
                "major": "1",
                "minor": "31",
                "gitVersion": "v1.31.0-vllm-scaler-sim",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean",
                "buildDate": "2024-08-13T00:00:00Z",
                "goVersion": "go1.22.5",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        )

    def _list(self, kind: str, items: Iterable[JSON], request: web.Request) -> web.Response:
        if "fieldSelector" in request.query:
            keep = field_filter(request.query["fieldSelector"])
            items = [i for i in items if keep(i)]
        return _json(
            {
                "kind": kind,
                "apiVersion": "v1",
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": list(items),  # list items carry no kind/apiVersion, as upstream
            }
        )

    async def _pods(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET")
        ns = request.match_info["ns"]
        pods = self.store.list_pods(ns, request.query.get("labelSelector", ""))
        return self._list("PodList", pods, request)

    async def _pod(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "PATCH")
        ns, name = request.match_info["ns"], request.match_info["name"]
        pod = self.store.get_pod(ns, name)
        if request.method == "PATCH":
            dry_run = _dry_run(request)
            new = await self._patched(request, pod, builtin=True)
            pod = self.store.patch_pod(ns, name, new, dry_run=dry_run)
        return _json({"kind": "Pod", "apiVersion": "v1", **pod})

    async def _patched(self, request: web.Request, current: JSON, *, builtin: bool) -> JSON:
        """``current`` with the request's merge, strategic merge (built-in kinds only; for
        maps it is a merge patch) or JSON patch applied (400/415/422 as upstream)."""
        accepted = patch_media_types(builtin=builtin, apply=False)
        media = _media_type(request)
        if media not in accepted:
            raise unsupported_media_type(accepted)
        return apply_patch(current, media, await self._body(request))

    async def _collection(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        group, version, plural, ns = m["group"], m["version"], m["plural"], m["ns"]
        kind = self.store.object_kind(group, version, plural)
        if kind is None:
            if self.store.scale_kind(group, version, plural) is not None:
                raise ApiError.generic(405)  # listing workloads is not served
            raise ApiError.generic(404)
        self._allow(request, "GET", "POST")
        if request.method == "GET":
            return self._list(
                f"{kind.kind}List", self.store.list_objects(group, plural, ns), request
            )
        if _media_type(request) != "application/json":
            raise unsupported_media_type(_WRITE_TYPES)
        body = await self._body(request)
        created = self.store.create_object(
            group, version, plural, ns, body, dry_run=_dry_run(request)
        )
        return _json(created, 201)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "POST")
        ns = request.match_info["ns"]
        if request.method == "GET":
            return self._list("EventList", self.store.events(ns), request)
        if _media_type(request) != "application/json":
            raise unsupported_media_type(_WRITE_TYPES)
        body = await self._body(request)
        return _json(self.store.create_event(ns, body, dry_run=_dry_run(request)), 201)

    async def _object(self, request: web.Request) -> web.StreamResponse:
        group, version, plural, ns, name = _named_object(request)
        plain = self.store.object_kind(group, version, plural)
        if plain is not None:
            self._allow(request, "GET", "PUT", "PATCH")
            current = self.store.get_object(group, plural, ns, name)
            if request.method == "GET":
                return _json(current)
            dry_run = _dry_run(request)
            if request.method == "PUT":
                if _media_type(request) != "application/json":
                    raise unsupported_media_type(_WRITE_TYPES)
                body = await self._body(request)
                require_rv = True
            else:
                body = await self._patched(request, current, builtin=plain.builtin)
                require_rv = False
            return _json(
                self.store.update_object(
                    group, version, plural, ns, name, body, require_rv=require_rv, dry_run=dry_run
                )
            )
        self._allow(request, "GET")
        if self.store.scale_kind(group, version, plural) is None:
            raise ApiError.generic(404)
        return _json(self.store.get_workload(ns, name, group=group, plural=plural))

    async def _scale(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "PUT", "PATCH")
        group, version, plural, ns, name = _named_object(request)
        kind = self.store.scale_kind(group, version, plural)
        if kind is None:
            raise ApiError.generic(404)
        current = self.store.get_scale(group, version, plural, ns, name)
        if request.method == "GET":
            return _json(current)
        dry_run = _dry_run(request)
        media = _media_type(request)
        if request.method == "PUT":
            if media not in _WRITE_TYPES:
                raise unsupported_media_type(_WRITE_TYPES)
            body = await self._body(request, yaml_ok=media == "application/yaml")
            if not isinstance(body, dict):
                raise bad_request("the body of the request is not an object")
            if body.get("kind", "Scale") != "Scale" or body.get("apiVersion", "autoscaling/v1") != (
                "autoscaling/v1"
            ):
                raise bad_request(
                    f"expected kind Scale apiVersion autoscaling/v1, got kind "
                    f"{body.get('kind')!r} apiVersion {body.get('apiVersion')!r}"
                )
            new = body
            require_rv = True
        else:
            accepted = patch_media_types(builtin=kind.builtin, apply=True)
            if media not in accepted:
                raise unsupported_media_type(accepted)
            if media == APPLY_PATCH:
                if not request.query.get("fieldManager"):
                    raise invalid(
                        "PatchOptions",
                        "meta.k8s.io",
                        "",
                        [
                            (
                                "fieldManager",
                                "FieldValueRequired",
                                "Required value: is required for apply patch",
                            )
                        ],
                    )
                patch = await self._body(request, yaml_ok=True)
            else:
                patch = await self._body(request)
            new = apply_patch(current, media, patch)
            require_rv = False
        result = self.store.write_scale(
            group,
            version,
            plural,
            ns,
            name,
            new,
            require_rv=require_rv,
            dry_run=dry_run,
            # the real server names a client without fieldManager after its user agent
            manager=request.query.get("fieldManager")
            or request.headers.get("User-Agent", "unknown").split("/")[0],
        )
        return _json(result)
