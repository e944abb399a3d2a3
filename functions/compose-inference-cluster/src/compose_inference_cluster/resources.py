"""Manifests compose-inference-cluster composes (platform spec §4.5-4.8), built on the models."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from modelplane_common.naming import CLUSTER_LABEL, child_name
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import akscluster as aks
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import ekscluster as eks
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import gkecluster as gke
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import (
    nebiuscluster as nebius,
)
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import servingstack as ss
from modelplane_schemas.generated.infrastructure_modelplane_ai.v1alpha1 import (
    vultrcluster as vultr,
)
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1 import (
    clusterproviderconfig as cpc,
)
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1 import object as kobj
from modelplane_schemas.generated.modelplane_ai.v1alpha1 import inferencecluster as ic
from modelplane_schemas.generated.protection_crossplane_io.v1beta1 import clusterusage as cu
from modelplane_schemas.generated.protection_crossplane_io.v1beta1 import usage

NAMESPACE = "modelplane-system"
INFRA_API = "infrastructure.modelplane.ai/v1alpha1"
GKE_DRIVER_ROOT = "/home/kubernetes/bin/nvidia"
GKE_RWX_CLASS = "modelplane-rwx"
# Nebius's mounted-filesystem CSI class: at this name the NebiusCluster composes the shared
# filesystem it serves (attached to every GPU node group).
NEBIUS_RWX_CLASS = "csi-mounted-fs-path-sc"

# Composed-resource keys (spec C2).
KEY_GKE = "gke-cluster"
KEY_EKS = "eks-cluster"
KEY_AKS = "aks-cluster"
KEY_NEBIUS = "nebius-cluster"
KEY_VULTR = "vultr-cluster"
KEY_PROVIDER_CONFIG = "cluster-provider-config-kubernetes"
KEY_SERVING_STACK = "serving-stack"
KEY_STORAGE_CLASS = "storage-class-rwx"
KEY_USAGE_REPLICAS = "usage-replicas"
REPLICAS_REASON = "ModelReplicas are scheduled to this InferenceCluster"
OBJECTS_REASON = "Objects of deleted ModelReplicas are still being deleted on this InferenceCluster"
NO_REPLICAS_REASON = (
    "No ModelReplica is known on this InferenceCluster; it is deleted once Modelplane has "
    "checked that none is left"
)
KEY_USAGE_GKE = "usage-gke-by-backend"
KEY_USAGE_EKS = "usage-eks-by-backend"
KEY_USAGE_AKS = "usage-aks-by-backend"
KEY_USAGE_NEBIUS = "usage-nebius-by-backend"
KEY_USAGE_VULTR = "usage-vultr-by-backend"
USAGE_KEYS = {
    "GKECluster": KEY_USAGE_GKE,
    "EKSCluster": KEY_USAGE_EKS,
    "AKSCluster": KEY_USAGE_AKS,
    "NebiusCluster": KEY_USAGE_NEBIUS,
    "VultrCluster": KEY_USAGE_VULTR,
}


@dataclasses.dataclass(frozen=True)
class SecretKey:
    """A key of a Secret in modelplane-system."""

    name: str
    key: str


def provider_config_name(ic_name: str) -> str:
    return child_name(ic_name, "cluster-kubeconfig")


def serving_stack_name(ic_name: str) -> str:
    return child_name(ic_name, "serving-stack")


def gke_cluster(ic_name: str, spec: ic.Gke, pools: Sequence[gke.NodePool]) -> gke.GKECluster:
    return gke.GKECluster(
        metadata={"name": ic_name, "namespace": NAMESPACE},
        spec=gke.Spec(
            project=spec.project,
            region=spec.region,
            kubernetesVersion=spec.kubernetesVersion or "1.35",
            nodePools=list(pools),
        ),
    )


def eks_cluster(ic_name: str, spec: ic.Eks, pools: Sequence[eks.NodePool]) -> eks.EKSCluster:
    return eks.EKSCluster(
        metadata={"name": ic_name, "namespace": NAMESPACE},
        spec=eks.Spec(
            region=spec.region,
            kubernetesVersion=spec.kubernetesVersion or "1.36",
            nodePools=list(pools),
        ),
    )


def aks_cluster(ic_name: str, spec: ic.Aks, pools: Sequence[aks.NodePool]) -> aks.AKSCluster:
    return aks.AKSCluster(
        metadata={"name": ic_name, "namespace": NAMESPACE},
        spec=aks.Spec(
            location=spec.location,
            kubernetesVersion=spec.kubernetesVersion or "1.35",
            nodePools=list(pools),
        ),
    )


def vultr_cluster(
    ic_name: str, spec: ic.Vultr, pools: Sequence[vultr.NodePool]
) -> vultr.VultrCluster:
    return vultr.VultrCluster(
        metadata={"name": ic_name, "namespace": NAMESPACE},
        spec=vultr.Spec(
            region=spec.region,
            kubernetesVersion=spec.kubernetesVersion or "v1.35.0+1",
            highAvailability=bool(spec.highAvailability),
            nodePools=list(pools),
        ),
    )


def nebius_cluster(
    ic_name: str, spec: ic.Nebius, pools: Sequence[nebius.NodePool]
) -> nebius.NebiusCluster:
    """The filesystem for caches only at the default cache class, which serves it."""
    cache = spec.cache
    ref = spec.credentialsSecretRef
    fields: dict = {
        "projectId": spec.projectId,
        "kubernetesVersion": spec.kubernetesVersion or "1.34",
        "credentialsSecretRef": nebius.CredentialsSecretRef(
            name=ref.name, key=ref.key or "kubeconfig"
        ),
        "nodePools": list(pools),
    }
    if ((cache.storageClassName if cache else None) or NEBIUS_RWX_CLASS) == NEBIUS_RWX_CLASS:
        fields["cache"] = nebius.Cache(
            sizeGibibytes=(cache.filesystemSizeGibibytes if cache else None) or 1024,
            type=(cache.filesystemType if cache else None) or "NETWORK_SSD",
        )
    return nebius.NebiusCluster(
        metadata={"name": ic_name, "namespace": NAMESPACE}, spec=nebius.Spec(**fields)
    )


def cluster_provider_config(
    ic_name: str,
    kubeconfig: SecretKey,
    identity: SecretKey | None,
    identity_type: str = "GoogleApplicationCredentials",
) -> cpc.ClusterProviderConfig:
    """The provider-kubernetes ClusterProviderConfig ModelReplicas and ModelCaches use (§4.7)."""
    spec = cpc.Spec(
        credentials=cpc.Credentials(
            source="Secret",
            secretRef=cpc.SecretRef(namespace=NAMESPACE, name=kubeconfig.name, key=kubeconfig.key),
        )
    )
    if identity is not None:
        spec.identity = cpc.Identity(
            type=identity_type,
            source="Secret",
            secretRef=cpc.SecretRef(namespace=NAMESPACE, name=identity.name, key=identity.key),
        )
    return cpc.ClusterProviderConfig(metadata={"name": provider_config_name(ic_name)}, spec=spec)


def serving_stack(
    ic_name: str,
    secrets: Sequence[ss.Secret],
    driver_root: str | None,
    installed: ic.Installed | None = None,
    *,
    dra_drivers: list[str] | None = None,
) -> ss.ServingStack:
    spec = ss.Spec(secrets=list(secrets))
    if dra_drivers is not None:
        # Set only with AMD pools: NVIDIA-only clusters keep the stack's default.
        spec.draDrivers = list(dra_drivers)
    if installed is not None:
        # Existing clusters: what the platform team runs already (the same names both sides).
        spec.installed = ss.Installed.model_validate(installed.model_dump(exclude_none=True))
    if driver_root is not None:
        spec.nvidiaDriverRoot = driver_root
    if driver_root == GKE_DRIVER_ROOT:
        # GKECluster's GPU pools leave the driver to the cluster (GKE's DRA guide).
        spec.nvidiaDriverInstaller = "GKE"
    return ss.ServingStack(
        metadata={
            "name": serving_stack_name(ic_name),
            "namespace": NAMESPACE,
            "labels": {CLUSTER_LABEL: ic_name},
        },
        spec=spec,
    )


def gke_storage_class(ic_name: str, network: str) -> kobj.Object:
    """The Filestore RWX StorageClass for model caches, pinned to the cluster's VPC (§4.6).

    Orphaned on delete (Observe/Create/Update): it goes with the cluster, and teardown never
    wedges trying to reach a cluster whose kubeconfig is already gone.
    """
    manifest = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": GKE_RWX_CLASS},
        "provisioner": "filestore.csi.storage.gke.io",
        "parameters": {"tier": "enterprise", "network": network},
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }
    return kobj.Object(
        metadata={"name": child_name(ic_name, "storage-class-rwx"), "namespace": NAMESPACE},
        spec=kobj.Spec(
            forProvider=kobj.ForProvider(manifest=manifest),
            managementPolicies=["Observe", "Create", "Update"],
            providerConfigRef=kobj.ProviderConfigRef(
                kind="ClusterProviderConfig", name=provider_config_name(ic_name)
            ),
            readiness=kobj.Readiness(policy="SuccessfulCreate"),
        ),
    )


def replicas_usage(ic_name: str, reason: str) -> cu.ClusterUsage:
    """Blocks deleting the cluster while ModelReplicas are scheduled to it (§4.8).

    The reason is what ``kubectl delete`` prints when the webhook refuses: with nothing on the
    cluster the deletion goes ahead by itself once this function has looked (plan.py).
    """
    return cu.ClusterUsage(
        metadata={"name": child_name(ic_name, "usage-replicas")},
        spec=cu.Spec(
            of=cu.Of(
                apiVersion="modelplane.ai/v1alpha1",
                kind="InferenceCluster",
                resourceRef=cu.ResourceRef(name=ic_name),
            ),
            reason=reason,
            replayDeletion=True,
        ),
    )


def backend_usage(ic_name: str, cloud_kind: str) -> usage.Usage:
    """The cloud XR outlives the ServingStack, so its releases uninstall first (§4.8)."""
    return usage.Usage(
        metadata={
            "name": child_name(ic_name, USAGE_KEYS[cloud_kind]),
            "namespace": NAMESPACE,
        },
        spec=usage.Spec(
            of=usage.Of(
                apiVersion=INFRA_API,
                kind=cloud_kind,
                resourceSelector=usage.ResourceSelector1(matchControllerRef=True),
            ),
            by=usage.By(
                apiVersion=INFRA_API,
                kind="ServingStack",
                resourceSelector=usage.ResourceSelector(matchControllerRef=True),
            ),
            replayDeletion=True,
        ),
    )
