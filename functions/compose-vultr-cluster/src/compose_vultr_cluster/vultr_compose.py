"""What one VultrCluster composes, given the XR and its observed composed resources.

Keys (as GKE, EKS and AKS, spec C2): cluster, nodepool-<pool>, provider-config-kubernetes,
provider-config-helm. The system pool is the cluster's own default node pool (VKE requires
one), so it has no key of its own; VKE makes the cluster's VPC itself.
"""

from __future__ import annotations

from collections.abc import Mapping

import pydantic
from modelplane_common.function import Outcome, validation_summary
from modelplane_common.managed import at_provider, cluster_outcome, hold_outcome, without_status
from modelplane_common.node_pools import RESERVED_POOL
from modelplane_common.plain import JSON
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.vultrcluster import (
    Spec,
    VultrCluster,
)

from compose_vultr_cluster import vultr_resources as res

# Ready once composed: a ProviderConfig has no Ready condition.
ALWAYS_READY = ("provider-config-kubernetes", "provider-config-helm")
NODE_POOL_PREFIX = "nodepool-"


def compose_vultr_cluster(xr: JSON, observed: Mapping[str, JSON]) -> Outcome:
    name = (xr.get("metadata") or {}).get("name", "")
    namespace = (xr.get("metadata") or {}).get("namespace") or "default"
    try:
        model = VultrCluster.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        return hold_outcome(xr, observed, f"invalid VultrCluster: {validation_summary(err)}")
    spec = model.spec
    problems = spec_problems(spec)
    if problems:
        return hold_outcome(xr, observed, f"invalid VultrCluster: {'; '.join(problems)}")

    desired: dict[str, JSON] = {"cluster": res.cluster_manifest(name, spec)}
    for pool in spec.nodePools:
        desired[f"{NODE_POOL_PREFIX}{pool.name}"] = res.node_pool_manifest(pool)
    kubernetes_config, helm_config = res.provider_config_manifests(name, namespace)
    desired["provider-config-kubernetes"] = kubernetes_config
    desired["provider-config-helm"] = helm_config
    return cluster_outcome(desired, observed, status(name, observed), ALWAYS_READY)


def spec_problems(spec: Spec) -> list[str]:
    """The XRD's rules, checked again for input that bypassed it (render, old XRDs); each
    names the field. VKE has no zones, so the shared zone checks do not apply."""
    problems: list[str] = []
    if not res.REGION.match(spec.region):
        problems.append(f"spec.region: {spec.region!r} is not a Vultr region ID (ewr, ams...)")
    version = spec.kubernetesVersion or ""
    if not res.VERSION.match(version):
        problems.append(f"spec.kubernetesVersion: {version!r} is not a VKE version (v1.35.0+1)")
    seen: set[str] = set()
    for index, pool in enumerate(spec.nodePools):
        at = f"spec.nodePools[{index}]"
        if pool.name in seen:
            problems.append(f"{at}.name: duplicate pool name {pool.name!r}")
        seen.add(pool.name)
        if pool.name == RESERVED_POOL:
            problems.append(f"{at}.name: 'system' is reserved for the injected system pool")
        if not res.PLAN.match(pool.plan):
            problems.append(
                f"{at}.plan: {pool.plan!r} is not a Vultr plan ID "
                "('-'-separated lowercase letters and digits)"
            )
        elif pool.role == "GPU" and not pool.plan.startswith(res.GPU_PLAN_PREFIX):
            problems.append(f"{at}.plan: {pool.plan!r} is not a Vultr Cloud GPU plan (vcg-...)")
        if pool.role == "GPU" and pool.gpu is None:
            problems.append(f"{at}.gpu: required when role is GPU")
        low, size, high = pool.minNodeCount, pool.nodeCount, pool.maxNodeCount
        if low is not None and size is not None and low > size:
            problems.append(f"{at}.minNodeCount: {low} exceeds nodeCount {size}")
        if high is not None and size is not None and size > high:
            problems.append(f"{at}.nodeCount: {size} exceeds maxNodeCount {high}")
    return problems


def status(name: str, observed: Mapping[str, JSON]) -> JSON:
    """status.secrets always; the control-plane domain once observed."""
    result: JSON = {"secrets": res.status_secrets(name)}
    endpoint = at_provider(observed.get("cluster"), "endpoint")
    if endpoint:
        result["endpoint"] = endpoint
    return result
