"""compose-model-service: the gRPC glue around ``service_compose``."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_model_service.service_compose import (
    GATEWAY_REQUIREMENT,
    compose_service,
    endpoints_requirement,
)


class ModelServiceFunction(CompositionFunction):
    name = "compose-model-service"

    def compose(self, request: Request) -> Outcome:
        entries = request.spec.get("endpoints") if isinstance(request.spec, dict) else None
        count = len(entries) if isinstance(entries, list) else 0
        keys = [GATEWAY_REQUIREMENT, *(endpoints_requirement(i) for i in range(count))]
        required = {key: request.required(key) for key in keys}
        return compose_service(request.composite, request.observed, required)
