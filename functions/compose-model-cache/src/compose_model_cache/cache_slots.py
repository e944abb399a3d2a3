"""Which observed cache objects a ModelCache keeps beyond its matched clusters' own (D10, D12).

Two kinds of object outlive the rule "one PVC per matched cluster, in the tenant's namespace":
- a PVC (and Job) made before D10 in the shared namespace, while replicas from before D10
  still mount it: the cache stages a new PVC in the tenant's namespace beside it (under the
  ``moved`` keys) and lets the old one go once no replica on that cluster needs it;
- the PVC on a cluster the cache's ``clusterSelector`` no longer matches, while replicas using
  the cache still run there: the ModelDeployment drains them make-before-break (D12), and
  the weights stay until they are gone;
- the PVC on a staged cluster whose cache summary (where the cache learns who mounts it)
  is missing or unreadable: the users there are unknown, so everything there is held.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from modelplane_common import observed as observed_state
from modelplane_common import tolerant
from modelplane_common.plain import JSON

from compose_model_cache import cache_objects as objects


@dataclasses.dataclass(frozen=True)
class CacheUsers:
    """The replicas mounting the cache, by cluster, as the clusters' cache summaries list
    them: (name, ``status.remoteNamespace`` or ""). A cluster in ``unknown`` has no readable
    list (its summary is missing or malformed): what is there is held, never dropped."""

    replicas: Mapping[str, Sequence[tuple[str, str]]]
    unknown: frozenset[str] = frozenset()

    def on(self, cluster: str) -> list[str]:
        return sorted(name or "?" for name, _ in self.replicas.get(cluster, ()))

    def known(self, cluster: str) -> bool:
        return cluster not in self.unknown

    def legacy_on(self, cluster: str, namespace: str) -> list[str]:
        """Replicas on ``cluster`` not (known to be) in the tenant's own remote namespace:
        a replica that does not say where it runs may still mount the shared PVC."""
        return sorted(
            name or "?" for name, remote in self.replicas.get(cluster, ()) if remote != namespace
        )


def manifest_namespace(observed_object: Mapping | None) -> str | None:
    """The namespace the Object's manifest puts its object in (None: unreadable)."""
    return tolerant.text(
        observed_object, "spec", "forProvider", "manifest", "metadata", "namespace"
    )


def is_legacy(observed_object: Mapping | None, namespace: str) -> bool:
    """Whether an observed cache Object puts its object outside the tenant's namespace."""
    found = manifest_namespace(observed_object)
    return observed_object is not None and found is not None and found != namespace


def legacy_clusters(observed: Mapping[str, JSON], clusters: set[str], namespace: str) -> set[str]:
    """Of ``clusters``, those whose PVC under the plain key is outside the tenant's namespace
    (made before D10)."""
    return {c for c in clusters if is_legacy(observed.get(objects.pvc_key(c)), namespace)}


def moved(observed: Mapping[str, JSON], cluster: str, legacy: set[str]) -> bool:
    """Whether the cluster's current PVC and Job use the ``moved`` keys: once a PVC in the
    tenant's namespace has been composed beside an old one (``legacy``: legacy_clusters), it
    keeps its key."""
    return cluster in legacy or objects.pvc_key(cluster, moved=True) in observed


def observed_clusters(observed: Mapping[str, JSON]) -> set[str]:
    """Clusters with any observed PVC, under either key."""
    found = set()
    moved, plain = objects.pvc_key("", moved=True), objects.pvc_key("")
    for key in observed:
        if key.startswith(moved):
            found.add(key[len(moved) :])
        elif key.startswith(plain):
            found.add(key[len(plain) :])
    return found


def provider_configs(observed: Mapping[str, JSON], clusters: Sequence[str]) -> dict[str, str]:
    """Of ``clusters``, those whose observed PVC Object (either key) names the
    ClusterProviderConfig it uses, with that name."""
    found = {}
    for cluster in clusters:
        for moved_key in (True, False):
            body = observed.get(objects.pvc_key(cluster, moved=moved_key))
            name = tolerant.text(body, "spec", "providerConfigRef", "name")
            if name:
                found[cluster] = name
                break
    return found


def current_pvc(observed: Mapping[str, JSON], cluster: str) -> JSON | None:
    """The cluster's observed PVC Object: under the ``moved`` key if there, else the plain."""
    moved_pvc = observed.get(objects.pvc_key(cluster, moved=True))
    return moved_pvc if moved_pvc is not None else observed.get(objects.pvc_key(cluster))


def healthy(observed: Mapping[str, JSON], cluster: str) -> bool:
    """Whether the cluster's observed PVC Object (either key) is Ready and not failing to
    sync: one that is not may have lost its cluster (a cloud cluster deleted, its kubeconfig
    gone), so its cluster's existence is looked up every reconcile, not in turn."""
    body = current_pvc(observed, cluster)
    if body is None:
        return False
    synced = observed_state.condition(body, "Synced") or {}
    return observed_state.is_ready(body) and synced.get("status") != "False"
