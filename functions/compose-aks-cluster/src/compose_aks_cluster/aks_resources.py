"""Manifests of the Azure managed resources behind one AKSCluster (design/cloud-clusters.md).

Pure functions of the validated XR spec: each returns a manifest dict that has been checked
against the generated model of its provider CRD. No ``providerConfigRef`` is set, so every
managed resource uses the operator's default ``ClusterProviderConfig``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re

from modelplane_common.managed import EXTERNAL_NAME, validated
from modelplane_common.naming import child_name
from modelplane_common.node_pools import zone_names
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import SecretKey, kubeconfig_provider_configs
from modelplane_schemas.generated.azure_m_upbound_io.v1beta1 import resourcegroup
from modelplane_schemas.generated.containerservice_azure_m_upbound_io.v1beta1 import (
    kubernetescluster,
    kubernetesclusternodepool,
)
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.akscluster import (
    NodePool,
    Spec,
)
from modelplane_schemas.generated.network_azure_m_upbound_io.v1beta1 import (
    subnet,
    virtualnetwork,
)

AZURE = "azure.m.upbound.io/v1beta1"
NETWORK = "network.azure.m.upbound.io/v1beta1"
CONTAINER = "containerservice.azure.m.upbound.io/v1beta1"

POOL_LABEL = "modelplane.ai/pool"
GPU_LABEL = "modelplane.ai/gpu"
# The NVIDIA DRA driver's kubelet plugin runs on nodes with this label (its chart's node
# affinity); set here so it does not wait for Node Feature Discovery.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
# Not Microsoft's `sku=gpu` example: the engines and the DRA kubelet plugin tolerate
# nvidia.com/gpu (as on GKE and EKS), and a GPU node must repel everything else.
GPU_TAINT = "nvidia.com/gpu=true:NoSchedule"
# AMD pools: the engines claiming gpu.amd.com and AMD's DRA kubelet plugin tolerate this key.
AMD_GPU_TAINT = "amd.com/gpu=true:NoSchedule"
# AKS installs the NVIDIA driver on the node image (at /) and no device plugin: what the DRA
# driver the ServingStack installs needs. "None" would leave the node without a driver.
GPU_DRIVER = "Install"
# AKS's Install is NVIDIA's driver, wrong on an MI300X node: the amdgpu kernel driver comes
# from AMD's GPU Operator, the platform team's (design/amd-gpus.md).
AMD_GPU_DRIVER = "None"
SYSTEM_POOL = "system"
SYSTEM_VM_SIZE = "Standard_D4s_v5"
KUBECONFIG_KEY = "kubeconfig"
MATCH_CONTROLLER = {"matchControllerRef": True}
# AKS: a Linux node pool name is 1-12 lowercase letters and digits, starting with a letter.
AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
# The XRD's vmSize rule: Standard_NC24ads_A100_v4, Standard_ND96isr_H100_v5...
VM_SIZE = re.compile(r"^Standard_[A-Za-z0-9]+(_[A-Za-z0-9]+)*$")


def kubeconfig_secret(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def provider_config_name(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def agent_pool_name(pool_name: str) -> str:
    """The AKS name of a pool: ``g`` + up to 6 of its letters and digits + a 5-hex hash, so
    pools whose names differ only in hyphens or length still get distinct AKS names."""
    letters = re.sub(r"[^a-z0-9]", "", pool_name)[:6]
    digest = hashlib.sha256(pool_name.encode()).hexdigest()[:5]
    name = f"g{letters}{digest}"
    assert AGENT_POOL_NAME.match(name)  # 12 characters at most, a letter first
    return name


def dns_prefix(xr_name: str) -> str:
    """1-54 letters, digits and hyphens, starting and ending with a letter or digit."""
    digest = hashlib.sha256(xr_name.encode()).hexdigest()[:5]
    cleaned = re.sub(r"[^a-z0-9-]", "-", xr_name.lower())[:40].strip("-")
    return f"{cleaned}-{digest}" if cleaned else f"mp-{digest}"


def dns_service_ip(service_cidr: str) -> str:
    """The cluster DNS service address: the 10th of the service range, as AKS defaults it."""
    return str(ipaddress.ip_network(service_cidr, strict=False)[10])


def _networking(spec: Spec) -> tuple[str, str, str, str]:
    net = spec.networking
    assert net is not None  # XRD default
    return (
        net.vnetCidr or "10.0.0.0/16",
        net.subnetCidr or "10.0.0.0/20",
        net.podCidr or "10.244.0.0/16",
        net.serviceCidr or "10.2.0.0/16",
    )


def network_problems(spec: Spec) -> list[str]:
    """CIDR rules Azure would refuse later, each naming the field."""
    problems: list[str] = []
    fields = ("vnetCidr", "subnetCidr", "podCidr", "serviceCidr")
    parsed: dict[str, ipaddress.IPv4Network | ipaddress.IPv6Network] = {}
    for field, value in zip(fields, _networking(spec), strict=True):
        try:
            parsed[field] = ipaddress.ip_network(value, strict=False)
        except ValueError:
            problems.append(f"spec.networking.{field}: {value!r} is not a CIDR block")
    if problems:
        return problems
    vnet, node_subnet = parsed["vnetCidr"], parsed["subnetCidr"]
    if node_subnet.version != vnet.version or not node_subnet.subnet_of(vnet):  # type: ignore[arg-type]
        problems.append(f"spec.networking.subnetCidr: {node_subnet} is not inside vnetCidr {vnet}")
    service = parsed["serviceCidr"]
    if service.version == vnet.version and service.overlaps(vnet):  # type: ignore[arg-type]
        problems.append(f"spec.networking.serviceCidr: {service} overlaps vnetCidr {vnet}")
    if service.num_addresses < 16:
        problems.append(f"spec.networking.serviceCidr: {service} is too small for the DNS address")
    return problems


def resource_group_manifest(spec: Spec) -> JSON:
    return validated(
        resourcegroup.ResourceGroup,
        {
            "apiVersion": AZURE,
            "kind": "ResourceGroup",
            "spec": {"forProvider": {"location": spec.location}},
        },
    )


def virtual_network_manifest(spec: Spec) -> JSON:
    vnet_cidr = _networking(spec)[0]
    return validated(
        virtualnetwork.VirtualNetwork,
        {
            "apiVersion": NETWORK,
            "kind": "VirtualNetwork",
            "spec": {
                "forProvider": {
                    "location": spec.location,
                    "addressSpace": [vnet_cidr],
                    "resourceGroupNameSelector": MATCH_CONTROLLER,
                }
            },
        },
    )


def subnet_manifest(spec: Spec) -> JSON:
    subnet_cidr = _networking(spec)[1]
    return validated(
        subnet.Subnet,
        {
            "apiVersion": NETWORK,
            "kind": "Subnet",
            "spec": {
                "forProvider": {
                    "addressPrefixes": [subnet_cidr],
                    "resourceGroupNameSelector": MATCH_CONTROLLER,
                    "virtualNetworkNameSelector": MATCH_CONTROLLER,
                }
            },
        },
    )


def cluster_manifest(xr_name: str, spec: Spec) -> JSON:
    _, _, pod_cidr, service_cidr = _networking(spec)
    return validated(
        kubernetescluster.KubernetesCluster,
        {
            "apiVersion": CONTAINER,
            "kind": "KubernetesCluster",
            "spec": {
                "forProvider": {
                    "location": spec.location,
                    "resourceGroupNameSelector": MATCH_CONTROLLER,
                    "kubernetesVersion": spec.kubernetesVersion,
                    "dnsPrefix": dns_prefix(xr_name),
                    "identity": {"type": "SystemAssigned"},
                    # The published kubeconfig authenticates with the local account's client
                    # certificate: with local accounts disabled it would need Entra ID login.
                    "localAccountDisabled": False,
                    "roleBasedAccessControlEnabled": True,
                    "networkProfile": {
                        "networkPlugin": "azure",
                        "networkPluginMode": "overlay",
                        "podCidr": pod_cidr,
                        "serviceCidr": service_cidr,
                        "dnsServiceIp": dns_service_ip(service_cidr),
                        "loadBalancerSku": "standard",
                    },
                    "defaultNodePool": {
                        "name": SYSTEM_POOL,
                        "vmSize": SYSTEM_VM_SIZE,
                        "nodeCount": 1,
                        "autoScalingEnabled": True,
                        "minCount": 1,
                        "maxCount": 3,
                        "nodeLabels": {POOL_LABEL: SYSTEM_POOL},
                        "vnetSubnetIdSelector": MATCH_CONTROLLER,
                        # Lets Azure resize the system pool through a temporary pool.
                        "temporaryNameForRotation": "systemtmp",
                    },
                },
                "writeConnectionSecretToRef": {"name": kubeconfig_secret(xr_name)},
            },
        },
    )


def pool_labels(pool: NodePool) -> dict[str, str]:
    labels = {POOL_LABEL: pool.name}
    if pool.role == "GPU" and pool.gpu is not None:
        labels[GPU_LABEL] = pool.gpu.acceleratorType
        if not _amd(pool):
            labels[GPU_PRESENT_LABEL] = "true"
    return labels


def _amd(pool: NodePool) -> bool:
    return pool.gpu is not None and pool.gpu.vendor == "AMD"


def node_pool_manifest(pool: NodePool) -> JSON:
    gpu = pool.role == "GPU"
    for_provider: JSON = {
        "kubernetesClusterIdSelector": MATCH_CONTROLLER,
        "vnetSubnetIdSelector": MATCH_CONTROLLER,
        "mode": "User",
        "vmSize": pool.vmSize,
        "osDiskSizeGb": pool.diskSizeGb,
        "osSku": "Ubuntu",
        "autoScalingEnabled": True,
        "nodeCount": pool.nodeCount,
        "minCount": pool.minNodeCount,
        "maxCount": pool.maxNodeCount,
        "nodeLabels": pool_labels(pool),
    }
    if gpu:
        for_provider["gpuDriver"] = AMD_GPU_DRIVER if _amd(pool) else GPU_DRIVER
        for_provider["nodeTaints"] = [AMD_GPU_TAINT if _amd(pool) else GPU_TAINT]
    zones = zone_names(pool)
    if zones:
        for_provider["zones"] = zones
    return validated(
        kubernetesclusternodepool.KubernetesClusterNodePool,
        {
            "apiVersion": CONTAINER,
            "kind": "KubernetesClusterNodePool",
            # The external name is the AKS pool name, which has rules a generated name breaks.
            "metadata": {"annotations": {EXTERNAL_NAME: agent_pool_name(pool.name)}},
            "spec": {"forProvider": for_provider},
        },
    )


def provider_config_manifests(xr_name: str, namespace: str) -> tuple[JSON, JSON]:
    """The kubernetes and helm ProviderConfigs for this cluster."""
    # The local-account kubeconfig carries a client certificate: no identity is needed.
    return kubeconfig_provider_configs(
        provider_config_name(xr_name),
        SecretKey(kubeconfig_secret(xr_name), namespace, KUBECONFIG_KEY),
    )


def status_secrets(xr_name: str) -> list[JSON]:
    return [{"type": "Kubeconfig", "name": kubeconfig_secret(xr_name), "key": KUBECONFIG_KEY}]
