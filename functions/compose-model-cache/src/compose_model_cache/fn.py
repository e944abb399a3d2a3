"""compose-model-cache: the gRPC glue around ``cache_compose``."""

from __future__ import annotations

import time
from collections.abc import Callable

from modelplane_common import capacity_summary as cs
from modelplane_common.function import CompositionFunction, Outcome, Request, injected_now
from modelplane_common.plain import JSON, object_plain

from compose_model_cache import cache_inputs
from compose_model_cache.cache_compose import compose_cache

# Pipeline context key pinning this reconcile's existence shard (cache_inputs).
EXISTENCE_SHARD_CONTEXT_KEY = "modelplane.ai/cache-existence-shard"


class ModelCacheFunction(CompositionFunction):
    name = "compose-model-cache"
    # Everything it composes is an Object, of whose remote object it reads only the status.
    read_observed = staticmethod(object_plain)
    request_growth = (
        "It grows with the clusters the cache is staged on (about 3.6 KB each, as observed) "
        "and, with spec.clusterSelector, the clusters it matches: narrow the selector. "
    )
    # Staged clusters' existence is looked up one shard a minute (a cache reconciles about
    # once a minute, its TTL) unless every one is to be looked up every reconcile.
    check_all_staged: bool = False
    clock: Callable[[], float] = staticmethod(time.time)

    def compose(self, request: Request) -> Outcome:
        shard = None if self.check_all_staged else self._check_shard(request.context)
        outcome = compose_cache(
            request.composite, request.observed, _required(request), check_shard=shard
        )
        if shard is not None:
            # The same shard for every call of this reconcile: Crossplane passes the context
            # on while it resolves requirements, and a shard changing between calls would
            # change the requirements it waits to settle.
            outcome.context = request.context | {EXISTENCE_SHARD_CONTEXT_KEY: shard}
        return outcome

    def _check_shard(self, context: JSON) -> int:
        pinned = context.get(EXISTENCE_SHARD_CONTEXT_KEY)
        if isinstance(pinned, int | float) and 0 <= pinned < cache_inputs.EXISTENCE_CHECK_SHARDS:
            return int(pinned)
        injected = injected_now(context)  # simulate's and render's clock
        minute = int((injected.timestamp() if injected else self.clock()) // 60)
        return minute % cache_inputs.EXISTENCE_CHECK_SHARDS


def _required(request: Request) -> cache_inputs.Required:
    """``request.required``, but summaries read as ``cs.summary_item``: only their name and
    data, which is all the cache reads of them."""

    summaries: dict[str, list[JSON]] = {}  # read once: several readers look at a key

    def required(key: str) -> list[JSON] | None:
        if not cache_inputs.is_summary_key(key):
            return request.required(key)
        found = request.proto.required_resources
        if key not in found:
            return None
        if key not in summaries:
            summaries[key] = [cs.summary_item(item.resource) for item in found[key].items]
        return list(summaries[key])

    return required
