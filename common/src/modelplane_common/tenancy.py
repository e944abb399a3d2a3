"""Where a tenant's objects live on a workload cluster (decision D10).

Every object Modelplane puts on a workload cluster for a ModelReplica or a ModelCache lives in
the workload cluster's namespace of the same name as the replica's (or cache's) control-plane
namespace, so two teams using the same names never share, fight over or delete each other's
remote objects. The InferenceCluster composes each such namespace, exactly one Object per
(cluster, namespace).
"""

from __future__ import annotations

# Before D10 every tenant's remote objects shared this namespace; replicas still found there
# are replaced make-before-break (design/tenancy.md).
LEGACY_SHARED_NAMESPACE = "default"

# Namespaces the serving stack (and the gateway) install into on a cluster, and the control
# plane's own: a tenant of one of these names would mix its pods with the platform's and be
# deleted with it.
PLATFORM_NAMESPACES = frozenset(
    {
        "modelplane-system",
        "crossplane-system",
        "cert-manager",
        "envoy-gateway-system",
        "envoy-ai-gateway-system",
        "monitoring",
        "lws-system",
        "node-feature-discovery",
        "dra-driver-nvidia-gpu",
        "metallb-system",
        "traefik-system",
    }
)
RESERVED_PREFIX = "kube-"


def remote_namespace(namespace: str) -> str:
    """The workload-cluster namespace of a tenant's objects: its own control-plane namespace."""
    return namespace or "default"


def reserved_reason(namespace: str) -> str:
    """Why a tenant may not use ``namespace`` on workload clusters, or "" when it may."""
    if namespace.startswith(RESERVED_PREFIX):
        return f"namespace {namespace!r} is reserved on workload clusters (kube-*)"
    if namespace in PLATFORM_NAMESPACES:
        return (
            f"namespace {namespace!r} is reserved on workload clusters: the serving stack "
            "installs there"
        )
    return ""
