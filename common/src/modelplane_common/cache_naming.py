"""Names shared by compose-model-cache and compose-model-replica (model-cache.md §3, §6).

The cache function creates the PVC on each workload cluster; the replica function mounts it.
Both must compute the name identically, so it lives here and nowhere else.
"""

from __future__ import annotations

from modelplane_common.naming import child_name

# Where serving containers see the cache (fixed, not configurable).
CACHE_MOUNT_PATH = "/mnt/models"
# The pod volume name serving pods use for the cache PVC.
CACHE_VOLUME_NAME = "model-cache"
# Label on the PVC, the Job and the Job's pods naming the ModelCache.
CACHE_LABEL = "modelplane.ai/modelcache"


def cache_pvc_name(namespace: str, cache_name: str) -> str:
    """The PVC name of ModelCache ``namespace/cache_name`` on every workload cluster.

    The PVC lives in the tenant's remote namespace (tenancy.py) next to the pods that mount
    it; the namespace stays part of the hashed input, so the name a cache had in the shared
    namespace before D10 is still its name, and no two tenants' PVCs ever share a name.
    Example: cache ``qwen`` in ``ml-team`` -> ``modelcache-ml-team-qwen-17db2``.
    """
    return child_name("modelcache", namespace, cache_name)


def cache_hydration_job_name(namespace: str, cache_name: str) -> str:
    """The hydration Job name of ModelCache ``namespace/cache_name`` on a workload cluster."""
    return child_name("modelcache", namespace, cache_name, "hydrate")
