"""compose-inference-cluster: one GPU cluster of the fleet (platform spec §4).

Thin glue: the pure decision lives in ``plan``; this reads the request's required resources.
"""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request
from modelplane_common.plain import replica_plain

from compose_inference_cluster import plan


class InferenceClusterFunction(CompositionFunction):
    name = "compose-inference-cluster"
    # Its replicas are most of its request; it reads neither their pod templates nor
    # Crossplane's references on them.
    read_required = {plan.REPLICAS_REQUIREMENT: replica_plain}

    def compose(self, request: Request) -> Outcome:
        replicas = request.required(plan.REPLICAS_REQUIREMENT)
        wanted = plan.requirements(request.composite, replicas)
        required = {key: request.required(key) for key in wanted}
        return plan.compose(request.composite, request.observed, required)
