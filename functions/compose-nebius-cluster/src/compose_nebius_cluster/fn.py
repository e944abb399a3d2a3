"""compose-nebius-cluster: an mk8s cluster, its network, node groups and ProviderConfigs."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_nebius_cluster.nebius_compose import CREDENTIALS_REQUIREMENT, compose_nebius_cluster


class NebiusClusterFunction(CompositionFunction):
    name = "compose-nebius-cluster"

    def compose(self, request: Request) -> Outcome:
        return compose_nebius_cluster(
            request.composite, request.observed, request.required(CREDENTIALS_REQUIREMENT)
        )
