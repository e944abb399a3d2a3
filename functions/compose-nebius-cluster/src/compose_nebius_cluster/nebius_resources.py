"""Manifests of the Nebius managed resources behind one NebiusCluster (design/cloud-clusters.md).

Pure functions of the validated XR spec: each returns a manifest dict that has been checked
against the generated model of its provider CRD (which forbids unknown fields). No
``providerConfigRef`` is set, so every managed resource uses the operator's default
``ClusterProviderConfig``.
"""

from __future__ import annotations

import re

from modelplane_common.managed import validated
from modelplane_common.naming import child_name
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import (
    IDENTITY_TYPES,
    SecretKey,
    kubeconfig_provider_configs,
)
from modelplane_schemas.generated.compute_nebius_m_upbound_io.v1beta1 import (
    filesystem,
    gpucluster,
)
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.nebiuscluster import (
    NodePool,
    Spec,
)
from modelplane_schemas.generated.mk8s_nebius_m_upbound_io.v1beta1 import cluster, nodegroup
from modelplane_schemas.generated.vpc_nebius_m_upbound_io.v1beta1 import network, subnet

VPC = "vpc.nebius.m.upbound.io/v1beta1"
MK8S = "mk8s.nebius.m.upbound.io/v1beta1"
COMPUTE = "compute.nebius.m.upbound.io/v1beta1"

POOL_LABEL = "modelplane.ai/pool"
GPU_LABEL = "modelplane.ai/gpu"
# The NVIDIA DRA driver's kubelet plugin runs on nodes with this label (its chart's node
# affinity); set here so it does not wait for Node Feature Discovery.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
# On the GpuCluster, so a node group selects the one of its fabric among several.
FABRIC_LABEL = "modelplane.ai/infiniband-fabric"
# The engines and the DRA kubelet plugin tolerate nvidia.com/gpu (as on GKE, EKS and AKS).
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
SYSTEM_POOL = "system"
SYSTEM_PLATFORM = "cpu-d3"
SYSTEM_PRESET = "4vcpu-16gb"
SYSTEM_DISK_GIB = 128
# The cache filesystem's mount tag on every GPU node (virtiofs).
CACHE_MOUNT_TAG = "modelplane-cache"
KUBECONFIG_KEY = "kubeconfig"
# The secret type (and provider identity type) of the platform team's credentials.
CREDENTIALS_TYPE = "NebiusServiceAccountCredentials"
CREDENTIALS_KEY = "credentials.json"
MATCH_CONTROLLER = {"matchControllerRef": True}
# The XRD's rules, checked again in the function (render, an older XRD).
PROJECT_ID = re.compile(r"^project-[a-z0-9]+$")
MINOR_VERSION = re.compile(r"^[0-9]+[.][0-9]+$")
PLATFORM = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
PRESET = re.compile(r"^([0-9]+gpu-)?[0-9]+vcpu-[0-9]+gb$")
DRIVERS_PRESET = re.compile(r"^cuda[0-9]+([.][0-9]+)?$")
FABRIC = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def published_kubeconfig_secret(xr_name: str) -> str:
    """The Secret the provider writes: the cluster's endpoint and CA, no user."""
    return child_name(xr_name, "kubeconfig")


def provider_config_name(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def resource_name(xr_name: str, part: str) -> str:
    """The Nebius name of a project-level resource: unique per XR in the project."""
    return child_name(xr_name, part)


def fabrics(spec: Spec) -> list[str]:
    """The InfiniBand fabrics the GPU node groups name, each once, in first-use order."""
    seen: dict[str, None] = {}
    for pool in spec.nodePools:
        if pool.role == "GPU" and pool.infinibandFabric:
            seen.setdefault(pool.infinibandFabric, None)
    return list(seen)


def network_manifest(xr_name: str, spec: Spec) -> JSON:
    return validated(
        network.Network,
        {
            "apiVersion": VPC,
            "kind": "Network",
            "spec": {
                "forProvider": {
                    "parentId": spec.projectId,
                    "name": resource_name(xr_name, "network"),
                }
            },
        },
    )


def subnet_manifest(xr_name: str, spec: Spec) -> JSON:
    return validated(
        subnet.Subnet,
        {
            "apiVersion": VPC,
            "kind": "Subnet",
            "spec": {
                "forProvider": {
                    "parentId": spec.projectId,
                    "name": resource_name(xr_name, "subnet"),
                    "networkIdSelector": dict(MATCH_CONTROLLER),
                    # The network's default private pool: nodes and control plane share it.
                    "ipv4PrivatePools": {"useNetworkPools": True},
                }
            },
        },
    )


def cluster_manifest(xr_name: str, spec: Spec) -> JSON:
    return validated(
        cluster.Cluster,
        {
            "apiVersion": MK8S,
            "kind": "Cluster",
            "spec": {
                "forProvider": {
                    "parentId": spec.projectId,
                    "name": resource_name(xr_name, "mk8s"),
                    "controlPlane": {
                        "version": spec.kubernetesVersion,
                        "subnetIdSelector": dict(MATCH_CONTROLLER),
                        # Crossplane reaches the API server from outside the VPC.
                        "endpoints": {"publicEndpoint": {}},
                        "etcdClusterSize": 3,
                    },
                },
                "writeConnectionSecretToRef": {"name": published_kubeconfig_secret(xr_name)},
            },
        },
    )


def gpu_cluster_manifest(xr_name: str, spec: Spec, fabric: str) -> JSON:
    return validated(
        gpucluster.GpuCluster,
        {
            "apiVersion": COMPUTE,
            "kind": "GpuCluster",
            "metadata": {"labels": {FABRIC_LABEL: fabric}},
            "spec": {
                "forProvider": {
                    "parentId": spec.projectId,
                    "name": resource_name(xr_name, fabric),
                    "infinibandFabric": fabric,
                }
            },
        },
    )


def filesystem_manifest(xr_name: str, spec: Spec) -> JSON:
    cache = spec.cache
    assert cache is not None  # composed only with a cache block
    return validated(
        filesystem.Filesystem,
        {
            "apiVersion": COMPUTE,
            "kind": "Filesystem",
            "spec": {
                "forProvider": {
                    "parentId": spec.projectId,
                    "name": resource_name(xr_name, "cache"),
                    "type": cache.type or "NETWORK_SSD",
                    "sizeGibibytes": cache.sizeGibibytes or 1024,
                }
            },
        },
    )


def pool_labels(pool: NodePool) -> dict[str, str]:
    labels = {POOL_LABEL: pool.name}
    if pool.role == "GPU" and pool.gpu is not None:
        labels[GPU_LABEL] = pool.gpu.acceleratorType
        labels[GPU_PRESENT_LABEL] = "true"
    return labels


def _node_group(spec: Spec, name: str, template: JSON, low: int, high: int) -> JSON:
    return validated(
        nodegroup.NodeGroup,
        {
            "apiVersion": MK8S,
            "kind": "NodeGroup",
            "spec": {
                "forProvider": {
                    "parentIdSelector": dict(MATCH_CONTROLLER),
                    "name": name,
                    "version": spec.kubernetesVersion,
                    "autoscaling": {"minNodeCount": low, "maxNodeCount": high},
                    "template": template,
                }
            },
        },
    )


def _template(platform: str, preset: str, disk_gib: int, labels: dict[str, str]) -> JSON:
    return {
        "resources": {"platform": platform, "preset": preset},
        "bootDisk": {"type": "NETWORK_SSD", "sizeGibibytes": disk_gib},
        "metadata": {"labels": labels},
        # A public address: nodes pull images and weights from the internet.
        "networkInterfaces": [{"subnetIdSelector": dict(MATCH_CONTROLLER), "publicIpAddress": {}}],
    }


def system_node_group_manifest(spec: Spec) -> JSON:
    template = _template(SYSTEM_PLATFORM, SYSTEM_PRESET, SYSTEM_DISK_GIB, {POOL_LABEL: SYSTEM_POOL})
    return _node_group(spec, SYSTEM_POOL, template, 1, 3)


def node_group_manifest(spec: Spec, pool: NodePool) -> JSON:
    template = _template(pool.platform, pool.preset, pool.diskSizeGb or 256, pool_labels(pool))
    if pool.role == "GPU":
        template["taints"] = [dict(GPU_TAINT)]
        # The node image carries the NVIDIA driver (at /), which the DRA driver needs.
        template["gpuSettings"] = {"driversPreset": pool.driversPreset or "cuda12"}
        if pool.infinibandFabric:
            template["gpuCluster"] = {
                "idSelector": {
                    **MATCH_CONTROLLER,
                    "matchLabels": {FABRIC_LABEL: pool.infinibandFabric},
                }
            }
        if spec.cache is not None:
            template["filesystems"] = [
                {
                    "attachMode": "READ_WRITE",
                    "mountTag": CACHE_MOUNT_TAG,
                    "existingFilesystem": {"idSelector": dict(MATCH_CONTROLLER)},
                }
            ]
    low = pool.minNodeCount if pool.minNodeCount is not None else 0
    high = pool.maxNodeCount if pool.maxNodeCount is not None else 8
    return _node_group(spec, pool.name, template, low, high)


def provider_config_manifests(
    xr_name: str, namespace: str, credentials: SecretKey
) -> tuple[JSON, JSON]:
    """The kubernetes and helm ProviderConfigs: the kubeconfig Nebius publishes (endpoint and
    CA) plus the platform team's service-account credentials as their identity."""
    return kubeconfig_provider_configs(
        provider_config_name(xr_name),
        SecretKey(published_kubeconfig_secret(xr_name), namespace, KUBECONFIG_KEY),
        credentials,
        identity_type=IDENTITY_TYPES[CREDENTIALS_TYPE],
    )


def status_secrets(xr_name: str, credentials: SecretKey) -> list[JSON]:
    return [
        {"type": "Kubeconfig", "name": published_kubeconfig_secret(xr_name), "key": KUBECONFIG_KEY},
        {"type": CREDENTIALS_TYPE, "name": credentials.name, "key": credentials.key},
    ]
