"""Which clusters a ModelCache stages to and how far each has got (model-cache.md §5, §6.3, §7).

Observed objects come from other controllers and may be incomplete or malformed; every read
here tolerates that and falls back to "not there yet" rather than failing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal

from modelplane_common import observed, tolerant

Phase = Literal["Pending", "Hydrating", "Ready", "Failed"]

DEFAULT_STORAGE_CLASS = "modelplane-rwx"
SOURCE_STORAGE_CLASS = {
    "GKE": ("gke", DEFAULT_STORAGE_CLASS),
    "EKS": ("eks", "modelplane-rwx-efs"),
    "AKS": ("aks", "azurefile-csi"),
    # Nebius: the mounted-filesystem CSI class over the NebiusCluster's shared filesystem.
    "Nebius": ("nebius", "csi-mounted-fs-path-sc"),
    # Vultr File System through VKE's CSI driver: the RWX class VKE ships.
    "Vultr": ("vultr", "vultr-vfs-storage"),
    "Existing": ("existing", DEFAULT_STORAGE_CLASS),
}


@dataclasses.dataclass(frozen=True)
class MatchedCluster:
    name: str
    provider_config: str  # "" while the cluster's status.providerConfigRef.name is unknown
    storage_class: str


def matched_clusters(
    clusters: Sequence[Mapping], match_labels: Mapping[str, str]
) -> list[MatchedCluster]:
    """Clusters with all ``match_labels``, in the order given.

    Only stable facts decide, never readiness: a cluster that stops matching loses its PVC and
    the weights on it. A matching cluster whose provider config cannot be read (status
    missing or malformed, as after a restore) is still matched, with ``provider_config`` "":
    unknown is not "unreachable", and what exists there is kept (compose_cache).
    """
    matched = []
    for cluster in clusters:
        name = tolerant.name_of(cluster)
        labels = tolerant.mapping(cluster, "metadata", "labels") or {}
        if not name or any(labels.get(k) != v for k, v in match_labels.items()):
            continue
        provider_config = tolerant.text(cluster, "status", "providerConfigRef", "name") or ""
        matched.append(MatchedCluster(name, provider_config, storage_class(cluster)))
    return matched


def storage_class(cluster: Mapping) -> str:
    """The cluster's per-source cache storage class, else that source's default.

    Applied here because a schema default on ``cache.storageClassName`` does not materialise
    when the whole ``cache`` block is omitted.
    """
    source = tolerant.text(cluster, "spec", "cluster", "source")
    block, default = SOURCE_STORAGE_CLASS.get(source, (None, DEFAULT_STORAGE_CLASS))
    if block is None:
        return default
    chosen = tolerant.at(cluster, "spec", "cluster", block, "cache", "storageClassName")
    return chosen if isinstance(chosen, str) and chosen else default


def remote_status(observed_object: Mapping | None) -> Mapping:
    """The wrapped object's own status, as provider-kubernetes last observed it."""
    found = tolerant.at(observed_object, "status", "atProvider", "manifest", "status")
    return found if isinstance(found, Mapping) else {}


def _condition(status: Mapping, type_: str) -> Mapping | None:
    for condition in tolerant.maps(status.get("conditions")):
        if condition.get("type") == type_ and condition.get("status") == "True":
            return condition
    return None


@dataclasses.dataclass(frozen=True)
class ClusterPhase:
    phase: Phase
    message: str = ""


def derive_phase(
    observed_pvc: Mapping | None, observed_job: Mapping | None, was_ready: bool
) -> ClusterPhase:
    """The cluster's phase, first matching rule wins (model-cache.md §7).

    ``was_ready`` latches Ready through the cache's own status, because the finished Job is
    dropped and garbage-collected; the PVC must still be Bound for the latch to hold.
    """
    job = remote_status(observed_job)
    failed = _condition(job, "Failed")
    if failed is not None:
        reason = failed.get("reason") or "Failed"
        detail = failed.get("message") or "the hydration Job exhausted its retries"
        return ClusterPhase("Failed", f"hydration Job failed ({reason}): {detail}")
    bound = remote_status(observed_pvc).get("phase") == "Bound"
    if bound and (_condition(job, "Complete") is not None or was_ready):
        return ClusterPhase("Ready")
    if bound:
        return ClusterPhase("Hydrating")
    return ClusterPhase("Pending")


def previously_ready(status: Mapping) -> set[str]:
    """Cluster names the cache's last written status reported Ready."""
    return {
        str(entry.get("name"))
        for entry in tolerant.maps(status.get("clusters"))
        if entry.get("phase") == "Ready"
    }


def object_ready(observed_object: Mapping | None) -> bool:
    """The Object's own Ready condition, which its CEL readiness policy drives."""
    return observed.is_ready(observed_object)


def composite_ready(composite: Mapping) -> bool:
    return observed.is_ready(composite)


def applied_storage_class(observed_pvc_object: Mapping | None) -> str | None:
    """The storage class an existing PVC was created with (immutable on a PVC)."""
    found = tolerant.at(
        observed_pvc_object, "spec", "forProvider", "manifest", "spec", "storageClassName"
    )
    return found if isinstance(found, str) and found else None
