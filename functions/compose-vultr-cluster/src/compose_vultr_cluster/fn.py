"""compose-vultr-cluster: a VKE cluster, its GPU node pools and ProviderConfigs."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_vultr_cluster.vultr_compose import compose_vultr_cluster


class VultrClusterFunction(CompositionFunction):
    name = "compose-vultr-cluster"

    def compose(self, request: Request) -> Outcome:
        return compose_vultr_cluster(request.composite, request.observed)
