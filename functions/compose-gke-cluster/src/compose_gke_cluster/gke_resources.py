"""Manifests of the GCP managed resources behind one GKECluster (platform spec §5.2).

Pure functions of the validated XR spec: each returns a manifest dict that has been checked
against the generated model of its provider CRD. No ``providerConfigRef`` is set, so every
managed resource uses the operator's default ``ClusterProviderConfig``.
"""

from __future__ import annotations

import hashlib
import re

from modelplane_common.managed import EXTERNAL_NAME, validated
from modelplane_common.naming import child_name
from modelplane_common.plain import JSON
from modelplane_common.provider_configs import SecretKey, kubeconfig_provider_configs
from modelplane_schemas.generated.cloudplatform_gcp_m_upbound_io.v1beta1 import (
    projectiammember,
    projectservice,
    serviceaccount,
    serviceaccountkey,
)
from modelplane_schemas.generated.compute_gcp_m_upbound_io.v1beta1 import network, subnetwork
from modelplane_schemas.generated.container_gcp_m_upbound_io.v1beta1 import cluster, nodepool
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1.gkecluster import (
    NodePool,
    Spec,
)

COMPUTE = "compute.gcp.m.upbound.io/v1beta1"
CONTAINER = "container.gcp.m.upbound.io/v1beta1"
CLOUDPLATFORM = "cloudplatform.gcp.m.upbound.io/v1beta1"

POOL_LABEL = "modelplane.ai/pool"
GPU_LABEL = "modelplane.ai/gpu"
# Lets GKE's cluster autoscaler model DRA ResourceSlices and scale a GPU pool up from zero
# for a pending claim (spec §5.2, P3).
DRA_AUTOSCALER_LABEL = "cloud.google.com/gke-nvidia-gpu-dra-driver"
# GKE's DRA guide: GKE's own device plugin must not advertise the GPUs the DRA driver does.
NO_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
# Lets the NVIDIA DRA driver's kubelet plugin onto the node before NFD has labelled it.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
# GKE's DRA guide: no automatic driver installation; the ServingStack installs the driver.
DRIVER_INSTALLATION_DISABLED = "INSTALLATION_DISABLED"
# What pools composed before Modelplane followed GKE's DRA guide were created with.
DRIVER_DEFAULT = "DEFAULT"

SYSTEM_POOL = "system"
IMAGE_TYPE = "COS_CONTAINERD"
OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
KUBECONFIG_KEY = "kubeconfig"
SA_KEY_KEY = "private_key"
MATCH_CONTROLLER = {"matchControllerRef": True}


def kubeconfig_secret(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def sa_key_secret(xr_name: str) -> str:
    return child_name(xr_name, "sa-key")


def provider_config_name(xr_name: str) -> str:
    return child_name(xr_name, "kubeconfig")


def _cloud_name(xr_name: str, max_length: int) -> str:
    """A GCP resource ID from the XR name: lowercase letters, digits and '-', starting with a
    letter, at most ``max_length`` characters, with a hash of the XR name appended.

    Crossplane's generated names (``<xr>-<random>``) can be too long or contain dots for GCP
    IDs with tight rules (service accounts: 6-30 characters; clusters: 40).
    """
    digest = hashlib.sha256(xr_name.encode()).hexdigest()[:5]
    body = re.sub(r"[^a-z0-9-]+", "-", xr_name.lower())
    prefix = f"mp-{body}"[: max_length - len(digest) - 1].rstrip("-")
    return f"{prefix}-{digest}"


def service_account_id(xr_name: str) -> str:
    return _cloud_name(xr_name, 30)


_GKE_CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


def cluster_name(xr_name: str) -> str:
    """The GKE cluster's name: the XR's own name when GKE accepts it (at most 40 characters,
    a letter first, no dots), else one derived from it."""
    if _GKE_CLUSTER_NAME.match(xr_name):
        return xr_name
    return _cloud_name(xr_name, 40)


def network_manifest(spec: Spec) -> JSON:
    return validated(
        network.Network,
        {
            "apiVersion": COMPUTE,
            "kind": "Network",
            "spec": {"forProvider": {"project": spec.project, "autoCreateSubnetworks": False}},
        },
    )


def filestore_service_manifest(spec: Spec) -> JSON:
    # disableOnDestroy false: tearing one cluster down must never disable Filestore for every
    # other user of the project.
    return validated(
        projectservice.ProjectService,
        {
            "apiVersion": CLOUDPLATFORM,
            "kind": "ProjectService",
            "spec": {
                "forProvider": {
                    "project": spec.project,
                    "service": "file.googleapis.com",
                    "disableOnDestroy": False,
                }
            },
        },
    )


def subnetwork_manifest(spec: Spec) -> JSON:
    networking = spec.networking
    assert networking is not None  # defaulted by the XRD and the model
    return validated(
        subnetwork.Subnetwork,
        {
            "apiVersion": COMPUTE,
            "kind": "Subnetwork",
            "spec": {
                "forProvider": {
                    "project": spec.project,
                    "region": spec.region,
                    "networkSelector": MATCH_CONTROLLER,
                    "ipCidrRange": networking.nodeCidr,
                    "secondaryIpRange": [
                        {"rangeName": "pods", "ipCidrRange": networking.podCidr},
                        {"rangeName": "services", "ipCidrRange": networking.serviceCidr},
                    ],
                }
            },
        },
    )


def cluster_manifest(xr_name: str, spec: Spec) -> JSON:
    return validated(
        cluster.Cluster,
        {
            "apiVersion": CONTAINER,
            "kind": "Cluster",
            "metadata": {"annotations": {EXTERNAL_NAME: cluster_name(xr_name)}},
            "spec": {
                "forProvider": {
                    "project": spec.project,
                    "location": spec.region,
                    "deletionProtection": False,
                    # Pools are separate NodePool resources; GKE insists on a default pool at
                    # creation, which removeDefaultNodePool deletes straight away.
                    "removeDefaultNodePool": True,
                    "initialNodeCount": 1,
                    "minMasterVersion": spec.kubernetesVersion,
                    "networkSelector": MATCH_CONTROLLER,
                    "subnetworkSelector": MATCH_CONTROLLER,
                    "ipAllocationPolicy": {
                        "clusterSecondaryRangeName": "pods",
                        "servicesSecondaryRangeName": "services",
                    },
                    "releaseChannel": {"channel": "REGULAR"},
                    "workloadIdentityConfig": {"workloadPool": f"{spec.project}.svc.id.goog"},
                    # The provisioner behind the modelplane-rwx StorageClass.
                    "addonsConfig": {"gcpFilestoreCsiDriverConfig": {"enabled": True}},
                },
                "writeConnectionSecretToRef": {"name": kubeconfig_secret(xr_name)},
            },
        },
    )


def _node_pool(
    spec: Spec,
    *,
    initial_nodes: int,
    min_nodes: int,
    max_nodes: int,
    node_config: JSON,
    zones: list[str] | None,
) -> JSON:
    for_provider: JSON = {
        "project": spec.project,
        "location": spec.region,
        "clusterSelector": MATCH_CONTROLLER,
        "initialNodeCount": initial_nodes,
        "autoscaling": {"minNodeCount": min_nodes, "maxNodeCount": max_nodes},
    }
    if zones:
        for_provider["nodeLocations"] = zones
    for_provider["nodeConfig"] = node_config
    return validated(
        nodepool.NodePool,
        {"apiVersion": CONTAINER, "kind": "NodePool", "spec": {"forProvider": for_provider}},
    )


def system_node_pool_manifest(spec: Spec) -> JSON:
    """The injected pool for the serving stack's controllers (Envoy Gateway, Prometheus...)."""
    return _node_pool(
        spec,
        initial_nodes=1,
        min_nodes=1,
        max_nodes=2,
        zones=None,
        node_config={
            "machineType": "e2-standard-4",
            "imageType": IMAGE_TYPE,
            "oauthScopes": OAUTH_SCOPES,
            "labels": {POOL_LABEL: SYSTEM_POOL},
        },
    )


def pool_labels(
    pool: NodePool, driver_version: str = DRIVER_INSTALLATION_DISABLED
) -> dict[str, str]:
    """The node labels of a spec pool: the modelplane.ai/pool contract, plus GPU labels, plus
    GKE's DRA labels on a pool whose driver GKE does not install."""
    labels = {POOL_LABEL: pool.name}
    if pool.role == "GPU" and pool.gpu is not None:
        labels[GPU_LABEL] = pool.gpu.acceleratorType
        labels[DRA_AUTOSCALER_LABEL] = "true"
        if driver_version == DRIVER_INSTALLATION_DISABLED:
            labels[NO_DEVICE_PLUGIN_LABEL] = "true"
            labels[GPU_PRESENT_LABEL] = "true"
    return labels


def node_pool_manifest(
    spec: Spec, pool: NodePool, driver_version: str = DRIVER_INSTALLATION_DISABLED
) -> JSON:
    """One spec pool. ``driver_version`` is INSTALLATION_DISABLED (GKE's DRA guide) unless the
    pool already runs with GKE's own driver, which GCP cannot change in place."""
    node_config: JSON = {
        "machineType": pool.machineType,
        "diskSizeGb": pool.diskSizeGb,
        "imageType": IMAGE_TYPE,
        "oauthScopes": OAUTH_SCOPES,
        "labels": pool_labels(pool, driver_version),
    }
    if pool.role == "GPU" and pool.gpu is not None:
        # GKE taints the nodes nvidia.com/gpu=present:NoSchedule by itself. The driver goes
        # under /home/kubernetes/bin/nvidia, installed by the ServingStack's DaemonSet.
        node_config["guestAccelerator"] = [
            {
                "type": pool.gpu.acceleratorType,
                "count": pool.gpu.acceleratorCount,
                "gpuDriverInstallationConfig": {"gpuDriverVersion": driver_version},
            }
        ]
    return _node_pool(
        spec,
        initial_nodes=_int(pool.nodeCount),
        min_nodes=_int(pool.minNodeCount),
        max_nodes=_int(pool.maxNodeCount),
        zones=[zone.root for zone in pool.zones or []],
        node_config=node_config,
    )


def _int(value: int | None) -> int:
    assert value is not None  # every count has an XRD default
    return value


def service_account_manifest(xr_name: str, spec: Spec) -> JSON:
    return validated(
        serviceaccount.ServiceAccount,
        {
            "apiVersion": CLOUDPLATFORM,
            "kind": "ServiceAccount",
            # The account ID is the external name: 6-30 characters, so it is derived here.
            "metadata": {"annotations": {EXTERNAL_NAME: service_account_id(xr_name)}},
            "spec": {
                "forProvider": {
                    "project": spec.project,
                    "displayName": f"Crossplane GKECluster {xr_name}",
                }
            },
        },
    )


def service_account_key_manifest(xr_name: str) -> JSON:
    return validated(
        serviceaccountkey.ServiceAccountKey,
        {
            "apiVersion": CLOUDPLATFORM,
            "kind": "ServiceAccountKey",
            "spec": {
                "forProvider": {"serviceAccountIdSelector": MATCH_CONTROLLER},
                "writeConnectionSecretToRef": {"name": sa_key_secret(xr_name)},
            },
        },
    )


def iam_binding_manifest(spec: Spec, email: str) -> JSON:
    return validated(
        projectiammember.ProjectIAMMember,
        {
            "apiVersion": CLOUDPLATFORM,
            "kind": "ProjectIAMMember",
            "spec": {
                "forProvider": {
                    "project": spec.project,
                    "role": "roles/container.admin",
                    "member": f"serviceAccount:{email}",
                }
            },
        },
    )


def provider_config_manifests(xr_name: str, namespace: str) -> tuple[JSON, JSON]:
    """The kubernetes and helm ProviderConfigs for this cluster (spec §8)."""
    # GKE's kubeconfig carries no token; the provider mints one from the SA key.
    return kubeconfig_provider_configs(
        provider_config_name(xr_name),
        SecretKey(kubeconfig_secret(xr_name), namespace, KUBECONFIG_KEY),
        SecretKey(sa_key_secret(xr_name), namespace, SA_KEY_KEY),
    )


def status_secrets(xr_name: str) -> list[JSON]:
    return [
        {"type": "Kubeconfig", "name": kubeconfig_secret(xr_name), "key": KUBECONFIG_KEY},
        {"type": "GCPServiceAccountKey", "name": sa_key_secret(xr_name), "key": SA_KEY_KEY},
    ]
