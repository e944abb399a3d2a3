"""compose-inference-gateway: Traefik and the Gateway modelplane on the control plane.

Thin glue over ``plan`` (platform spec §2, decisions D1).
"""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_inference_gateway import plan


class InferenceGatewayFunction(CompositionFunction):
    name = "compose-inference-gateway"

    def compose(self, request: Request) -> Outcome:
        return plan.compose(request.composite, request.observed)
