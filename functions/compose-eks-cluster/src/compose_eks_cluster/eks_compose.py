"""What one EKSCluster composes, given the XR and its observed composed resources.

Keys (spec C2): vpc, subnet-<i>, internet-gateway, route-table, route-default,
route-table-association-<i>, iam-role-cluster, iam-attach-cluster-policy, iam-role-node,
iam-attach-node-{worker,cni,ecr}, cluster, cluster-auth, nodegroup-system, nodegroup-<pool>,
addon-{vpc-cni,kube-proxy,coredns}, provider-config-kubernetes, provider-config-helm.
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
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.ekscluster import (
    EKSCluster,
)

from compose_eks_cluster import eks_resources as res

# Ready once composed: a ProviderConfig has no Ready condition.
ALWAYS_READY = ("provider-config-kubernetes", "provider-config-helm")


def compose_eks_cluster(xr: JSON, observed: Mapping[str, JSON]) -> Outcome:
    name = (xr.get("metadata") or {}).get("name", "")
    namespace = (xr.get("metadata") or {}).get("namespace") or "default"
    try:
        model = EKSCluster.model_validate(without_status(xr))
    except pydantic.ValidationError as err:
        return hold_outcome(xr, observed, f"invalid EKSCluster: {validation_summary(err)}")
    spec = model.spec
    zones = res.availability_zones(spec)
    problems = pool_problems(
        spec.nodePools,
        zone_allowed=lambda zone: zone in zones,
        zone_rule=f"one of the subnets' AZs ({', '.join(zones)})",
    )
    if problems:
        return hold_outcome(xr, observed, f"invalid EKSCluster: {'; '.join(problems)}")

    desired: dict[str, JSON] = {"vpc": res.vpc_manifest(spec)}
    desired |= res.subnet_manifests(name, spec)
    desired["internet-gateway"] = res.internet_gateway_manifest(spec)
    desired["route-table"] = res.route_table_manifest(spec)
    desired["route-default"] = res.default_route_manifest(spec)
    desired |= res.route_table_association_manifests(spec)
    desired |= res.iam_manifests()
    desired["cluster"] = res.cluster_manifest(spec)
    desired["cluster-auth"] = res.cluster_auth_manifest(name, spec)
    desired["nodegroup-system"] = res.system_node_group_manifest(spec)
    for pool in spec.nodePools:
        desired[f"nodegroup-{pool.name}"] = res.node_group_manifest(name, spec, pool)
    desired |= res.addon_manifests(spec)
    kubernetes_config, helm_config = res.provider_config_manifests(name, namespace)
    desired["provider-config-kubernetes"] = kubernetes_config
    desired["provider-config-helm"] = helm_config
    return cluster_outcome(desired, observed, status(name, observed), ALWAYS_READY)


def status(name: str, observed: Mapping[str, JSON]) -> JSON:
    """status.secrets always (serialised with its single-valued type); endpoint once observed."""
    result: JSON = {"secrets": res.status_secrets(name)}
    endpoint = at_provider(observed.get("cluster"), "endpoint")
    if endpoint:
        result["endpoint"] = endpoint
    return result
