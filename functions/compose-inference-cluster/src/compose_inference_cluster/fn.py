"""compose-inference-cluster: one GPU cluster of the fleet (platform spec §4).

Thin glue: the pure decision lives in ``plan``; this reads the request's required resources.
"""

from __future__ import annotations

import functools

from modelplane_common.function import CompositionFunction, Outcome, Request
from modelplane_common.plain import replica_plain, resource_plain

from compose_inference_cluster import plan

_without_status = functools.partial(resource_plain, but="status")


class InferenceClusterFunction(CompositionFunction):
    name = "compose-inference-cluster"
    request_growth = (
        "It grows with the replicas placed on this cluster (about 4.5 KB each) and, once none "
        "is left, with their Objects still being deleted; place fewer replicas here. "
    )
    # Its replicas are most of its request; it reads neither their pod templates nor
    # Crossplane's references on them. Of the replicas' and caches' Objects placed on it, it
    # reads only what they deploy and where (their namespace, labels and deletion), not the
    # status that copies the remote object.
    read_required = {
        plan.REPLICAS_REQUIREMENT: replica_plain,
        plan.REPLICA_OBJECTS_REQUIREMENT: _without_status,
        plan.CACHE_OBJECTS_REQUIREMENT: _without_status,
    }

    def compose(self, request: Request) -> Outcome:
        replicas = request.required(plan.REPLICAS_REQUIREMENT)
        wanted = plan.requirements(request.composite, replicas)
        required = {key: request.required(key) for key in wanted}
        return plan.compose(request.composite, request.observed, required)
