"""compose-model-endpoint: the gRPC glue around ``endpoint_compose``."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_model_endpoint.endpoint_compose import compose_endpoint


class ModelEndpointFunction(CompositionFunction):
    name = "compose-model-endpoint"

    def compose(self, request: Request) -> Outcome:
        return compose_endpoint(request.composite, request.observed)
