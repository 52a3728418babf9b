"""The VLLMAutoscaler watch's cache, event by event (the reflector's rules): ADDED and
MODIFIED replace, DELETED drops, BOOKMARK only moves the version, a 410 ERROR lists again.
The list and watch themselves run against the real API server in the cluster tier
(tests/cluster/test_custom_resource.py)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from scaler.actuators.errors import KubeApiError
from scaler.actuators.resources import ResourceWatch, _Expired


def _obj(name: str, version: str, **spec: Any) -> dict[str, Any]:
    meta = {"namespace": "llm", "name": name, "resourceVersion": version}
    return {"metadata": meta, "spec": spec}


async def test_events_keep_the_cache_and_the_version_to_continue_from() -> None:
    api = ApiClient()
    try:
        watch = ResourceWatch(api, namespaces=["llm"], clock=lambda: 0.0)
        assert watch.snapshot().synced is False  # nothing listed: nothing taken as deleted
        version = watch._event("llm", {"type": "ADDED", "object": _obj("a", "5", x=1)}, "4")
        version = watch._event("llm", {"type": "MODIFIED", "object": _obj("a", "6", x=2)}, version)
        version = watch._event("llm", {"type": "ADDED", "object": _obj("b", "7")}, version)
        version = watch._event("llm", {"type": "DELETED", "object": _obj("b", "8")}, version)
        bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}
        version = watch._event("llm", bookmark, version)
        assert version == "12"
        assert [o["spec"] for o in watch.snapshot().items] == [{"x": 2}]
        with pytest.raises(_Expired):  # too old: list again
            watch._event("llm", {"type": "ERROR", "object": {"code": 410}}, version)
        with pytest.raises(KubeApiError) as err:
            watch._event("llm", {"type": "ERROR", "object": {"code": 500, "message": "x"}}, "1")
        assert err.value.http_status == 500
        assert watch.namespaces == ("llm",)
    finally:
        await api.close()
