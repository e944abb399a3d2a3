"""Manifests of the Vultr managed resources behind one VultrCluster (design/cloud-clusters.md).

Pure functions of the validated XR spec: each returns a manifest dict checked against the
generated model of its provider CRD. No ``providerConfigRef`` is set, so every managed resource
uses the operator's default ``ClusterProviderConfig`` (a Vultr API key).
"""

from __future__ import annotations

import re

from modelplane_common.managed import validated
from modelplane_common.naming import child_name
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import SecretKey, kubeconfig_provider_configs
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.vultrcluster import (
    NodePool,
    Spec,
)
from modelplane_schemas.generated.vke_vultr_m_upbound_io.v1beta1 import (
    kubernetes,
    kubernetesnodepool,
)

VKE = "vke.vultr.m.upbound.io/v1beta1"

POOL_LABEL = "modelplane.ai/pool"
GPU_LABEL = "modelplane.ai/gpu"
# The NVIDIA DRA driver's kubelet plugin runs on nodes with this label (its chart's node
# affinity); set here so it does not wait for Node Feature Discovery.
NVIDIA_PRESENT_LABEL = "nvidia.com/gpu.present"
# The engines and the DRA kubelet plugins tolerate these (design/amd-gpus.md): a GPU node
# repels every other pod.
TAINT_KEYS = {"NVIDIA": "nvidia.com/gpu", "AMD": "amd.com/gpu"}
SYSTEM_POOL = "system"
# The default node pool VKE requires: a fixed size, so no autoscaler moves nodeQuantity under
# the provider (which would then set it back).
SYSTEM_PLAN = "vc2-4c-8gb"
SYSTEM_NODES = 2
KUBECONFIG_KEY = "kubeconfig"
MATCH_CONTROLLER = {"matchControllerRef": True}
# The XRD's plan rule: vcg-a100-12c-120g-80vram, vc2-4c-8gb...
PLAN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)+$")
GPU_PLAN_PREFIX = "vcg-"
REGION = re.compile(r"^[a-z]{3}$")
VERSION = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+\+[0-9]+$")


def kubeconfig_secret(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def provider_config_name(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def _labels(pairs: dict[str, str]) -> list[JSON]:
    """VKE takes node labels as a list of key/value pairs."""
    return [{"key": key, "value": value} for key, value in pairs.items()]


def cluster_manifest(xr_name: str, spec: Spec) -> JSON:
    return validated(
        kubernetes.Kubernetes,
        {
            "apiVersion": VKE,
            "kind": "Kubernetes",
            "spec": {
                "forProvider": {
                    "label": xr_name,
                    "region": spec.region,
                    "version": spec.kubernetesVersion,
                    "haControlplanes": bool(spec.highAvailability),
                    # No vpcId: VKE creates the cluster's own VPC.
                    "nodePools": {
                        "label": SYSTEM_POOL,
                        "plan": SYSTEM_PLAN,
                        "nodeQuantity": SYSTEM_NODES,
                        "autoScaler": False,
                        "labels": _labels({POOL_LABEL: SYSTEM_POOL}),
                    },
                },
                # provider-vultr publishes the decoded kubeconfig (client certificate) here.
                "writeConnectionSecretToRef": {"name": kubeconfig_secret(xr_name)},
            },
        },
    )


def pool_labels(pool: NodePool) -> dict[str, str]:
    labels = {POOL_LABEL: pool.name}
    if pool.role == "GPU" and pool.gpu is not None:
        labels[GPU_LABEL] = pool.gpu.acceleratorType
        if (pool.gpu.vendor or "NVIDIA") == "NVIDIA":
            labels[NVIDIA_PRESENT_LABEL] = "true"
    return labels


def pool_taints(pool: NodePool) -> list[JSON]:
    if pool.role != "GPU" or pool.gpu is None:
        return []
    key = TAINT_KEYS[pool.gpu.vendor or "NVIDIA"]
    return [{"key": key, "value": "true", "effect": "NoSchedule"}]


def node_pool_manifest(pool: NodePool) -> JSON:
    for_provider: JSON = {
        "clusterIdSelector": MATCH_CONTROLLER,
        "label": pool.name,
        "plan": pool.plan,
        "autoScaler": True,
        "minNodes": pool.minNodeCount,
        "maxNodes": pool.maxNodeCount,
        "labels": _labels(pool_labels(pool)),
    }
    taints = pool_taints(pool)
    if taints:
        for_provider["taints"] = taints
    return validated(
        kubernetesnodepool.KubernetesNodePool,
        {
            "apiVersion": VKE,
            "kind": "KubernetesNodePool",
            "spec": {
                "forProvider": for_provider,
                # The size at creation only: afterwards VKE's autoscaler owns nodeQuantity
                # between minNodes and maxNodes, and the provider must not set it back.
                "initProvider": {"nodeQuantity": pool.nodeCount},
            },
        },
    )


def provider_config_manifests(xr_name: str, namespace: str) -> tuple[JSON, JSON]:
    """The kubernetes and helm ProviderConfigs for this cluster."""
    # VKE's kubeconfig carries a client certificate and key: no identity is needed.
    return kubeconfig_provider_configs(
        provider_config_name(xr_name),
        SecretKey(kubeconfig_secret(xr_name), namespace, KUBECONFIG_KEY),
    )


def status_secrets(xr_name: str) -> list[JSON]:
    return [{"type": "Kubeconfig", "name": kubeconfig_secret(xr_name), "key": KUBECONFIG_KEY}]
