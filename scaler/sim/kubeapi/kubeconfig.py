"""A kubeconfig that points the real kubernetes-asyncio client at the stand-in."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_kubeconfig(
    path: Path, *, server_url: str, token: str, namespace: str = "default"
) -> Path:
    """Write a kubeconfig with one cluster/user/context ``sim`` (bearer token auth).

    Loadable by ``kubernetes_asyncio.config.load_kube_config(config_file=...)``.
    Returns ``path``; the file is created with mode 0600 as kubectl does.
    """
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": server_url}}],
        "users": [{"name": "sim", "user": {"token": token}}],
        "contexts": [
            {"name": "sim", "context": {"cluster": "sim", "user": "sim", "namespace": namespace}}
        ],
        "current-context": "sim",
        "preferences": {},
    }
    path = Path(path)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)
    return path
