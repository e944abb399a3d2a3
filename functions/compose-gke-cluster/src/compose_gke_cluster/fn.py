"""compose-gke-cluster: a GKE cluster, its VPC, node pools, IAM and ProviderConfigs (spec §5)."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_gke_cluster.gke_compose import compose_gke_cluster


class GKEClusterFunction(CompositionFunction):
    name = "compose-gke-cluster"

    def compose(self, request: Request) -> Outcome:
        return compose_gke_cluster(request.composite, request.observed)
