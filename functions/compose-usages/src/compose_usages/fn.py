"""compose-usages: the generic last pipeline step protecting namespaced ProviderConfigs.

Thin glue over ``protection``: relabelled consumers keep the readiness earlier steps gave them.
"""

from __future__ import annotations

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_usages import protection

_READY = {fnv1.READY_TRUE: True, fnv1.READY_FALSE: False}


class UsagesFunction(CompositionFunction):
    name = "compose-usages"

    def compose(self, request: Request) -> Outcome:
        outcome = Outcome()
        found = protection.protect(
            request.name, request.namespace, request.desired, request.observed
        )
        for key, body in found.consumers.items():
            ready = _READY.get(request.proto.desired.resources[key].ready)
            outcome.compose(key, body, ready=ready)
        for key, body in found.usages.items():
            outcome.compose(key, body, ready=True)
        for warning in found.warnings:
            outcome.event("Warning", warning)
        return outcome
