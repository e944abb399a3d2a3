"""compose-eks-cluster: an EKS cluster, its VPC, IAM, node groups and ProviderConfigs (spec §6)."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_eks_cluster.eks_compose import compose_eks_cluster


class EKSClusterFunction(CompositionFunction):
    name = "compose-eks-cluster"

    def compose(self, request: Request) -> Outcome:
        return compose_eks_cluster(request.composite, request.observed)
