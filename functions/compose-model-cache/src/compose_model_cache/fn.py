"""compose-model-cache: the gRPC glue around ``cache_compose``."""

from __future__ import annotations

import time
from collections.abc import Callable

from modelplane_common import capacity_summary as cs
from modelplane_common.function import CompositionFunction, Outcome, Request, injected_now
from modelplane_common.plain import JSON

from compose_model_cache import cache_inputs
from compose_model_cache.cache_compose import compose_cache


class ModelCacheFunction(CompositionFunction):
    name = "compose-model-cache"
    # Staged clusters' existence is looked up one shard a minute (a cache reconciles about
    # once a minute, its TTL) unless every one is to be looked up every reconcile.
    check_all_staged: bool = False
    clock: Callable[[], float] = staticmethod(time.time)

    def compose(self, request: Request) -> Outcome:
        injected = injected_now(request.context)  # simulate's and render's clock
        minute = int((injected.timestamp() if injected else self.clock()) // 60)
        shard = None if self.check_all_staged else minute % cache_inputs.EXISTENCE_CHECK_SHARDS
        return compose_cache(
            request.composite, request.observed, _required(request), check_shard=shard
        )


def _required(request: Request) -> cache_inputs.Required:
    """``request.required``, but summaries read as ``cs.summary_item``: only their name and
    data, which is all the cache reads of them."""

    def required(key: str) -> list[JSON] | None:
        if not cache_inputs.is_summary_key(key):
            return request.required(key)
        found = request.proto.required_resources
        if key not in found:
            return None
        return [cs.summary_item(item.resource) for item in found[key].items]

    return required
