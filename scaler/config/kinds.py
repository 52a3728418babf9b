"""The workload kinds people scale: their plural resource names and the API each is served
at (a workload of another kind names its plural and apiVersion itself)."""

from __future__ import annotations

__all__ = ["KNOWN_API_VERSIONS", "KNOWN_PLURALS"]

# Plural resource names of the kinds people scale; anything else must name its plural.
KNOWN_PLURALS: dict[str, str] = {
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "ReplicaSet": "replicasets",
    "LeaderWorkerSet": "leaderworkersets",
    "Rollout": "rollouts",
}

#: The apiVersion each of those kinds is served at.
KNOWN_API_VERSIONS: dict[str, str] = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "ReplicaSet": "apps/v1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
    "Rollout": "argoproj.io/v1alpha1",
}
