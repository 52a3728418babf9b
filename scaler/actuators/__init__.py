"""The Kubernetes side: reading targets and writing replicas, through kubernetes-asyncio.

- :mod:`.kubernetes`: the actuator (scale subresources, pods, workload annotations, other
  autoscalers, pod-deletion costs, Events).
- :mod:`.ownership`: which workload owns a listed pod (its controller ownerReferences).
- :mod:`.lease`: coordination.k8s.io Leases for leader election.
- :mod:`.errors`: every API failure classified in one place.
- :mod:`.api_client`: the client from the in-cluster service account or a kubeconfig.

Only this package (and the simulator) imports kubernetes-asyncio. Above :mod:`scaler.core`,
beside :mod:`scaler.sources`.
"""
