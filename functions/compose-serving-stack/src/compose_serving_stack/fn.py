"""compose-serving-stack: the serving layer of one workload cluster (platform spec §7).

Thin glue over ``plan``.
"""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_serving_stack import plan


class ServingStackFunction(CompositionFunction):
    name = "compose-serving-stack"

    def compose(self, request: Request) -> Outcome:
        return plan.compose(request.composite, request.observed)
