"""Patch semantics: the PATCH content types and how each changes an object.

JSON merge patch (RFC 7386; strategic merge patches of the maps we serve behave the same),
JSON patch (RFC 6902: add, remove, replace, test). Errors are the API's: 400 for a
malformed patch, 422 for an operation that does not apply.
"""

from __future__ import annotations

import copy
from typing import Any

from scaler.sim.kubeapi.errors import JSON, ApiError, bad_request

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


#: Every PATCH content type the API knows (any other is "415: Unsupported Media Type").
PATCH_TYPES = frozenset({JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH})


def patch_media_types(*, builtin: bool) -> list[str]:
    """The PATCH content types a resource accepts, in the order a 415 answer lists them.

    JSON patch and merge patch always; strategic merge for built-in kinds only (custom
    resources answer 415, as for CRDs); server-side apply (which the API accepts for every
    kind, and the stand-in does not serve: see the package docstring).
    """
    accepted = [JSON_PATCH, MERGE_PATCH]
    if builtin:
        accepted.append(STRATEGIC_PATCH)
    accepted.append(APPLY_PATCH)
    return accepted


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (null deletes)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge_patch(out.get(k), v)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch: add, remove, replace, test (enough for objects; lists by index).

    Raises:
        ValueError: a malformed operation list (400). LookupError: an operation failed (422).
    """
    if not isinstance(ops, list):
        raise ValueError("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ValueError(f"invalid json patch operation {op!r}")
        parts = _pointer(op["path"])
        if not parts:
            raise LookupError("operations on the document root are not supported")
        parent: Any = doc
        for p in parts[:-1]:
            try:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
            except (KeyError, IndexError, ValueError, TypeError):
                raise LookupError(f"doc is missing path: {op['path']!r}") from None
        last = parts[-1]
        kind = op["op"]
        if not isinstance(parent, dict):
            raise LookupError(f"unsupported path for {kind}: {op['path']!r}")
        if kind == "test":
            if parent.get(last) != op.get("value"):
                raise LookupError(f"testing value {op['path']} failed: test failed")
        elif kind in ("add", "replace"):
            if "value" not in op:
                raise ValueError(f"{kind} operation has no value")
            if kind == "replace" and last not in parent:
                raise LookupError(
                    f"replace operation does not apply: doc is missing key: {op['path']}"
                )
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if last not in parent:
                raise LookupError(
                    f"remove operation does not apply: doc is missing key: {op['path']}"
                )
            del parent[last]
        else:
            raise ValueError(f"unsupported json patch operation {kind!r}")
    return doc


def apply_patch(current: JSON, media: str, patch: Any) -> JSON:
    """``current`` with a JSON patch or a merge-style patch (merge, strategic merge on maps,
    apply) applied; 400 for a malformed patch, 422 for a JSON patch path that does not exist."""
    if media == JSON_PATCH:
        try:
            new = _json_patch(current, patch)
        except ValueError as err:
            raise bad_request(str(err)) from None
        except LookupError as err:
            raise ApiError(422, "Invalid", str(err)) from None
    else:
        if not isinstance(patch, dict):
            raise bad_request("the patch must be a JSON object")
        new = _merge_patch(current, patch)
    if not isinstance(new, dict):
        raise bad_request("the patched object is not an object")
    return new
