"""What one AKSCluster composes, given the XR and its observed composed resources.

Keys (as GKE and EKS, spec C2): resource-group, virtual-network, subnet, cluster,
nodepool-<pool>, provider-config-kubernetes, provider-config-helm. The system pool is the
cluster's own ``defaultNodePool``, so it has no key of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

import pydantic
from modelplane_common.function import Outcome, validation_summary
from modelplane_common.managed import (
    at_provider,
    cluster_outcome,
    hold_outcome,
    without_status,
)
from modelplane_common.node_pools import pool_problems
from modelplane_common.plain import JSON
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.akscluster import (
    AKSCluster,
    Spec,
)

from compose_aks_cluster import aks_resources as res

# Ready once composed: a ProviderConfig has no Ready condition.
ALWAYS_READY = ("provider-config-kubernetes", "provider-config-helm")
NODE_POOL_PREFIX = "nodepool-"
AZURE_ZONES = ("1", "2", "3")


def compose_aks_cluster(xr: JSON, observed: Mapping[str, JSON]) -> Outcome:
    name = (xr.get("metadata") or {}).get("name", "")
    namespace = (xr.get("metadata") or {}).get("namespace") or "default"
    # Node pools carry the AKS pool name this function chose as their external name.
    own_names = tuple(key for key in observed if key.startswith(NODE_POOL_PREFIX))
    try:
        model = AKSCluster.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        message = f"invalid AKSCluster: {validation_summary(err)}"
        return hold_outcome(xr, observed, message, own_names)
    spec = model.spec
    problems = pool_problems(
        spec.nodePools,
        zone_allowed=lambda zone: zone in AZURE_ZONES,
        zone_rule="an Azure availability zone (1, 2 or 3)",
    )
    problems += _vm_size_problems(spec)
    problems += res.network_problems(spec)
    if problems:
        return hold_outcome(xr, observed, f"invalid AKSCluster: {'; '.join(problems)}", own_names)

    desired: dict[str, JSON] = {
        "resource-group": res.resource_group_manifest(spec),
        "virtual-network": res.virtual_network_manifest(spec),
        "subnet": res.subnet_manifest(spec),
        "cluster": res.cluster_manifest(name, spec),
    }
    for pool in spec.nodePools:
        desired[f"{NODE_POOL_PREFIX}{pool.name}"] = res.node_pool_manifest(pool)
    kubernetes_config, helm_config = res.provider_config_manifests(name, namespace)
    desired["provider-config-kubernetes"] = kubernetes_config
    desired["provider-config-helm"] = helm_config
    return cluster_outcome(desired, observed, status(name, observed), ALWAYS_READY)


def _vm_size_problems(spec: Spec) -> list[str]:
    """The XRD's VM size rules, checked again for input that bypassed it (render, old XRDs)."""
    problems = []
    for index, pool in enumerate(spec.nodePools):
        size = pool.vmSize
        if not res.VM_SIZE.match(size):
            problems.append(
                f"spec.nodePools[{index}].vmSize: {size!r} is not an Azure VM size "
                "(Standard_ followed by '_'-separated letters and digits)"
            )
        elif pool.role == "GPU" and not size.startswith("Standard_N"):
            problems.append(
                f"spec.nodePools[{index}].vmSize: {size!r} is not a GPU (N-series) VM size"
            )
    return problems


def status(name: str, observed: Mapping[str, JSON]) -> JSON:
    """status.secrets always; the API server FQDN once observed."""
    result: JSON = {"secrets": res.status_secrets(name)}
    endpoint = at_provider(observed.get("cluster"), "fqdn")
    if endpoint:
        result["endpoint"] = endpoint
    return result
