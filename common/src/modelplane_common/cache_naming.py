"""Names shared by compose-model-cache and compose-model-replica (model-cache.md §3, §6).

The cache function creates the PVC on each workload cluster; the replica function mounts it.
Both must compute the name identically, so it lives here and nowhere else.
"""

from __future__ import annotations

from modelplane_common.naming import child_name

# Namespace on every workload cluster holding the PVC, the hydration Job and all serving pods:
# a PVC can only be mounted by pods in its own namespace.
CACHE_REMOTE_NAMESPACE = "default"
# Where serving containers see the cache (fixed, not configurable).
CACHE_MOUNT_PATH = "/mnt/models"
# The pod volume name serving pods use for the cache PVC.
CACHE_VOLUME_NAME = "model-cache"
# Label on the PVC, the Job and the Job's pods naming the ModelCache.
CACHE_LABEL = "modelplane.ai/modelcache"


def cache_pvc_name(namespace: str, cache_name: str) -> str:
    """The PVC name of ModelCache ``namespace/cache_name`` on every workload cluster.

    The namespace is part of the hashed input, so two caches of the same name in different
    namespaces always get different PVCs in the shared remote namespace.
    Example: cache ``qwen`` in ``ml-team`` -> ``modelcache-ml-team-qwen-17db2``.
    """
    return child_name("modelcache", namespace, cache_name)


def cache_hydration_job_name(namespace: str, cache_name: str) -> str:
    """The hydration Job name of ModelCache ``namespace/cache_name`` on a workload cluster."""
    return child_name("modelcache", namespace, cache_name, "hydrate")
