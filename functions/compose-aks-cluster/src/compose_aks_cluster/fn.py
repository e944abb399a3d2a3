"""compose-aks-cluster: an AKS cluster, its network, GPU node pools and ProviderConfigs."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_aks_cluster.aks_compose import compose_aks_cluster


class AKSClusterFunction(CompositionFunction):
    name = "compose-aks-cluster"

    def compose(self, request: Request) -> Outcome:
        return compose_aks_cluster(request.composite, request.observed)
