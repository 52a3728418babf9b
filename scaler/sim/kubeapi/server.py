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
    DecodeError,
    RouteNotFound,
    bad_request,
    forbidden,
    options_invalid,
    patch_invalid,
    unknown_patch_type,
    unsupported_media_type,
)
from scaler.sim.kubeapi.patches import (
    APPLY_PATCH,
    PATCH_TYPES,
    apply_patch,
    patch_media_types,
)
from scaler.sim.kubeapi.requests import PUBLIC_PATHS, RequestInfo
from scaler.sim.kubeapi.selectors import (
    EVENT_FIELDS,
    META_FIELDS,
    POD_FIELDS,
    SelectableFields,
    SelectorError,
    field_filter,
)
from scaler.sim.kubeapi.store import KubeStore

# The content types of a POST or PUT body (YAML is decoded for Scale PUTs only).
_WRITE_TYPES = ("application/json", "application/yaml")
#: The API groups of the built-in kinds served here: a path of theirs that names nothing is a
#: Status 404; any other group's (a CRD's, installed or not) is the router's plain 404.
_BUILTIN_GROUPS = frozenset({"apps", "autoscaling", "coordination.k8s.io"})
#: The options kind of each write verb, as their validation errors name them.
_OPTIONS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
_NO_APPLY = (
    "server-side apply (application/apply-patch+yaml) is not served by the API stand-in: it "
    "keeps no managed fields; field ownership is checked on a real kube-apiserver (the "
    "cluster tier)"
)


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


def _write_options(request: web.Request) -> bool:
    """The options of a write (``dryRun``, ``fieldManager``), validated as the API does;
    True for a dry run.

    Raises:
        ApiError: 422 ``dryRun`` other than ``All``, ``fieldManager`` over 128 bytes.
    """
    options = _OPTIONS.get(request.method, "DeleteOptions")
    manager = request.query.get("fieldManager", "")
    if len(manager.encode()) > 128:
        raise options_invalid(options, "fieldManager", "FieldValueTooLong",
                              "Too long: may not be more than 128 bytes")  # fmt: skip
    values = request.query.getall("dryRun", [])
    if any(v != "All" for v in values):
        shown = json.dumps(values, separators=(",", ":"))
        raise options_invalid(options, "dryRun", "FieldValueNotSupported",
                              f'Unsupported value: {shown}: supported values: "All"')  # fmt: skip
    return bool(values)


def _missing_route(group: str) -> ApiError:
    """A path under ``/apis/{group}`` that names nothing served: a built-in group's Status
    404, else the router's plain one."""
    if group in _BUILTIN_GROUPS:
        return ApiError(404, "NotFound", "the server could not find the requested resource", {})
    return RouteNotFound()


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
        for health in ("/healthz", "/readyz", "/livez"):
            r.add_route("*", health, self._health)
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

    def _authorize(self, request: web.Request) -> None:
        """No token: an anonymous request, which only the public paths allow (403 naming
        what it asked, as RBAC refuses ``system:anonymous``); a token not ours is 401."""
        header = request.headers.get("Authorization")
        if header is None:
            if request.path in PUBLIC_PATHS:
                return
            info = RequestInfo.parse(request.method, request.path)
            if not info.resource:
                raise ApiError(
                    403, "Forbidden", f'forbidden: User "system:anonymous" cannot '
                    f'{info.verb} path "{request.path}"', {},
                )  # fmt: skip
            raise forbidden("system:anonymous", info.verb, info.group, info.resource,
                            info.namespace, info.name, info.subresource)  # fmt: skip
        if header != f"Bearer {self.token}":
            raise ApiError.generic(401)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        response: web.StreamResponse
        try:
            self._authorize(request)
            fault = self.store.take_fault(request.method, request.path)
            if fault is not None:
                raise fault
            response = await handler(request)
        except RouteNotFound:
            response = web.Response(status=404, text="404 page not found\n",
                                    content_type="text/plain")  # fmt: skip
        except ApiError as err:
            response = _json(err.status_body(), err.code, err.headers)
        except SelectorError as err:
            response = _json(bad_request(str(err)).status_body(), 400)
        except web.HTTPNotFound:
            response = web.Response(status=404, text="404 page not found\n",
                                    content_type="text/plain")  # fmt: skip
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
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                {},
            )

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
                "minor": "37",
                "gitVersion": "v1.37.2-vllm-scaler-stand-in",
                "gitCommit": "0000000000000000000000000000000000000000",
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.26.8",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        )

    async def _health(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET")
        return web.Response(text="ok")

    def _list(
        self,
        kind: str,
        items: Iterable[JSON],
        request: web.Request,
        *,
        api_version: str = "v1",
        fields: SelectableFields = META_FIELDS,
    ) -> web.Response:
        if "fieldSelector" in request.query:
            keep = field_filter(request.query["fieldSelector"], fields)
            items = [i for i in items if keep(i)]
        return _json(
            {
                "kind": kind,
                "apiVersion": api_version,
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": list(items),  # list items carry no kind/apiVersion, as upstream
            }
        )

    async def _pods(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET")
        ns = request.match_info["ns"]
        pods = self.store.list_pods(ns, request.query.get("labelSelector", ""))
        return self._list("PodList", pods, request, fields=POD_FIELDS)

    async def _pod(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "PATCH", "DELETE")
        ns, name = request.match_info["ns"], request.match_info["name"]
        dry_run = _write_options(request) if request.method != "GET" else False
        pod = self.store.get_pod(ns, name)
        if request.method == "PATCH":
            new = await self._patched(request, pod, builtin=True)
            try:
                pod = self.store.patch_pod(ns, name, new, dry_run=dry_run)
            except DecodeError as err:
                raise patch_invalid(new, err.why) from None
        elif request.method == "DELETE":
            raw = await request.read()
            options = json.loads(raw) if raw.strip() else {}
            grace = options.get("gracePeriodSeconds") if isinstance(options, dict) else None
            if not dry_run:
                pod = self.store.delete_pod_gracefully(ns, name, grace)
        return _json({"kind": "Pod", "apiVersion": "v1", **pod})

    async def _patched(self, request: web.Request, current: JSON, *, builtin: bool) -> JSON:
        """``current`` with the request's merge, strategic merge (built-in kinds only; for
        maps it is a merge patch) or JSON patch applied (400/415/422 as upstream)."""
        media = _media_type(request)
        if media not in PATCH_TYPES:
            raise unknown_patch_type()
        accepted = patch_media_types(builtin=builtin)
        if media not in accepted:
            raise unsupported_media_type(accepted)
        if media == APPLY_PATCH:
            raise ApiError(415, "UnsupportedMediaType", _NO_APPLY)
        return apply_patch(current, media, await self._body(request))

    async def _collection(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        group, version, plural, ns = m["group"], m["version"], m["plural"], m["ns"]
        kind = self.store.object_kind(group, version, plural)
        if kind is None:
            if self.store.scale_kind(group, version, plural) is not None:
                raise ApiError.generic(405)  # listing workloads is not served
            raise _missing_route(group)
        self._allow(request, "GET", "POST")
        if request.method == "GET":
            return self._list(
                f"{kind.kind}List",
                self.store.list_objects(group, plural, ns),
                request,
                api_version=f"{group}/{version}",
            )
        dry_run = _write_options(request)
        if _media_type(request) != "application/json":
            raise unsupported_media_type(_WRITE_TYPES)
        body = await self._body(request)
        created = self.store.create_object(group, version, plural, ns, body, dry_run=dry_run)
        return _json(created, 201)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        self._allow(request, "GET", "POST")
        ns = request.match_info["ns"]
        if request.method == "GET":
            return self._list("EventList", self.store.events(ns), request, fields=EVENT_FIELDS)
        dry_run = _write_options(request)
        if _media_type(request) != "application/json":
            raise unsupported_media_type(_WRITE_TYPES)
        body = await self._body(request)
        return _json(self.store.create_event(ns, body, dry_run=dry_run), 201)

    async def _object(self, request: web.Request) -> web.StreamResponse:
        group, version, plural, ns, name = _named_object(request)
        plain = self.store.object_kind(group, version, plural)
        if plain is not None:
            self._allow(request, "GET", "PUT", "PATCH")
            if request.method == "GET":
                return _json(self.store.get_object(group, plural, ns, name))
            dry_run = _write_options(request)
            if request.method == "PUT":
                if _media_type(request) != "application/json":
                    raise unsupported_media_type(_WRITE_TYPES)
                body = await self._body(request)
                obj, created = self.store.replace_object(
                    group, version, plural, ns, name, body, dry_run=dry_run
                )
                return _json(obj, 201 if created else 200)
            current = self.store.get_object(group, plural, ns, name)
            body = await self._patched(request, current, builtin=plain.builtin)
            try:
                updated = self.store.update_object(
                    group, version, plural, ns, name, body, require_rv=False, dry_run=dry_run
                )
            except DecodeError as err:
                raise patch_invalid(body, err.why) from None
            return _json(updated)
        if self.store.scale_kind(group, version, plural) is None:
            raise _missing_route(group)
        self._allow(request, "GET")
        return _json(self.store.get_workload(ns, name, group=group, plural=plural))

    async def _scale(self, request: web.Request) -> web.StreamResponse:
        group, version, plural, ns, name = _named_object(request)
        kind = self.store.scale_kind(group, version, plural)
        if kind is None:
            raise _missing_route(group)
        self._allow(request, "GET", "PUT", "PATCH")
        dry_run = _write_options(request) if request.method != "GET" else False
        current = self.store.get_scale(group, version, plural, ns, name)
        if request.method == "GET":
            return _json(current)
        media = _media_type(request)
        # the real server names a client without fieldManager after its user agent
        manager = (
            request.query.get("fieldManager")
            or request.headers.get("User-Agent", "unknown").split("/")[0]
        )
        if request.method == "PATCH":
            new = await self._patched(request, current, builtin=kind.builtin)
            try:
                result = self.store.write_scale(group, version, plural, ns, name, new,
                                                dry_run=dry_run, manager=manager)  # fmt: skip
            except DecodeError as err:
                raise patch_invalid(new, err.why) from None
            return _json(result)
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
        return _json(self.store.write_scale(group, version, plural, ns, name, body,
                                            dry_run=dry_run, manager=manager))  # fmt: skip
