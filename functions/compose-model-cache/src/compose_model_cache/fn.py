"""compose-model-cache: the gRPC glue around ``cache_compose``."""

from __future__ import annotations

from modelplane_common.function import CompositionFunction, Outcome, Request

from compose_model_cache.cache_compose import compose_cache


class ModelCacheFunction(CompositionFunction):
    name = "compose-model-cache"

    def compose(self, request: Request) -> Outcome:
        return compose_cache(request.composite, request.observed, request.required)
