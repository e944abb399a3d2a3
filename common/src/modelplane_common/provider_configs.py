"""The provider-kubernetes and provider-helm ProviderConfig pair for a remote cluster.

Three functions point both providers at a cluster's kubeconfig Secret (GKECluster, EKSCluster
and ServingStack); they build the pair here so the two configs can never drift apart.
"""

from __future__ import annotations

import dataclasses

from modelplane_schemas.generated.helm_m_crossplane_io.v1beta1 import providerconfig as hpc
from modelplane_schemas.generated.kubernetes_m_crossplane_io.v1alpha1 import (
    providerconfig as kpc,
)

from modelplane_common.managed import validated
from modelplane_common.plain import JSON

# The provider identity each secret type of a cloud XR's status.secrets stands for: a GCP
# service-account key mints GKE tokens; Nebius service-account credentials mint mk8s tokens
# (Nebius publishes a kubeconfig with the endpoint and CA only).
IDENTITY_TYPES = {
    "GCPServiceAccountKey": "GoogleApplicationCredentials",
    "NebiusServiceAccountCredentials": "NebiusServiceAccountCredentials",
}


@dataclasses.dataclass(frozen=True)
class SecretKey:
    """One key of a Secret."""

    name: str
    namespace: str
    key: str

    def ref(self) -> JSON:
        return {"name": self.name, "namespace": self.namespace, "key": self.key}


def kubeconfig_provider_configs(
    name: str,
    kubeconfig: SecretKey,
    identity: SecretKey | None = None,
    namespace: str | None = None,
    identity_type: str = "GoogleApplicationCredentials",
) -> tuple[JSON, JSON]:
    """(kubernetes ProviderConfig, helm ProviderConfig) reading the same kubeconfig.

    ``identity`` is a service-account credential of ``identity_type`` (a GCP key by default):
    GKE and Nebius kubeconfigs carry no token, so the providers mint one from it.
    ``namespace`` goes on the metadata when given.
    """
    spec: JSON = {"credentials": {"source": "Secret", "secretRef": kubeconfig.ref()}}
    if identity is not None:
        spec["identity"] = {
            "type": identity_type,
            "source": "Secret",
            "secretRef": identity.ref(),
        }
    metadata: JSON = {"name": name} | ({"namespace": namespace} if namespace else {})
    kubernetes = validated(
        kpc.ProviderConfig,
        {
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": dict(metadata),
            "spec": spec,
        },
    )
    helm = validated(
        hpc.ProviderConfig,
        {
            "apiVersion": "helm.m.crossplane.io/v1beta1",
            "kind": "ProviderConfig",
            "metadata": dict(metadata),
            "spec": spec,
        },
    )
    return kubernetes, helm
