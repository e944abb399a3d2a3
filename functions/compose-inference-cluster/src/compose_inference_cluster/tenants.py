"""The tenants' namespaces on one workload cluster (decision D10).

Every tenant (control-plane namespace) with a ModelReplica, or any provider-kubernetes Object,
on this cluster gets a namespace of the same name there, composed by this InferenceCluster
alone: exactly one Object per (cluster, namespace), however many replicas and caches use it.

The Objects never delete the namespace (no ``Delete`` management policy): it may hold what
the tenant put there itself (a cache's token Secret), and an empty namespace costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from modelplane_common import tenancy, tolerant
from modelplane_common.function import Outcome
from modelplane_common.naming import child_name
from modelplane_common.observed import held
from modelplane_common.plain import JSON

KEY_PREFIX = "tenant-namespace-"
# Names the cluster on the namespace Objects. Not the cluster label the replicas' Objects
# carry: those keep the cluster from being deleted, and a namespace must not keep itself.
TENANT_OF_LABEL = "modelplane.ai/tenant-namespace-of"
MANAGEMENT_POLICIES = ["Observe", "Create", "Update", "LateInitialize"]


def key(tenant: str) -> str:
    return f"{KEY_PREFIX}{tenant}"


def tenants(users: Iterable[Mapping]) -> set[str]:
    """Namespaces needing a remote namespace: those of the cluster's replicas and Objects,
    less ``default`` (always there) and reserved names (refused by the replica and cache)."""
    found = {tolerant.text(u, "metadata", "namespace") or "" for u in users}
    return {t for t in found if t and t != "default" and not tenancy.reserved_reason(t)}


def namespace_object(cluster: str, tenant: str, provider_config: str, namespace: str) -> JSON:
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {
            "name": child_name(cluster, "ns", tenant),
            "namespace": namespace,
            "labels": {TENANT_OF_LABEL: cluster},
        },
        "spec": {
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": provider_config},
            "managementPolicies": list(MANAGEMENT_POLICIES),
            "readiness": {"policy": "SuccessfulCreate"},
            "forProvider": {
                "manifest": {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": tenant,
                        "labels": {"app.kubernetes.io/managed-by": "modelplane"},
                    },
                }
            },
        },
    }


def compose(
    outcome: Outcome,
    cluster: str,
    observed: Mapping[str, JSON],
    users: list[JSON] | None,
    *,
    provider_config: str,
    namespace: str,
) -> None:
    """One namespace Object per tenant; while the users are not resolved, keep what exists."""
    observed_keys = sorted(k for k in observed if k.startswith(KEY_PREFIX))
    if users is None:
        for k in observed_keys:
            outcome.compose(k, held(observed[k]), ready=True)
        return
    for tenant in sorted(tenants(users)):
        body = namespace_object(cluster, tenant, provider_config, namespace)
        outcome.compose(key(tenant), body, ready=True)
