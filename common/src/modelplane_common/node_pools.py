"""Checks on the node pools of a cloud-cluster XR (GKECluster, EKSCluster).

The XRDs carry the same rules as CEL; the functions check again so that input that reached
them another way (``modelplane render``, an older XRD) is held, never half-composed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

RESERVED_POOL = "system"


class PoolLike(Protocol):
    name: str
    role: str
    gpu: Any
    zones: Any
    nodeCount: int | None  # noqa: N815 - the XRD field names
    minNodeCount: int | None  # noqa: N815
    maxNodeCount: int | None  # noqa: N815


def zone_names(pool: PoolLike) -> list[str]:
    """A pool's zones as plain strings (generated models wrap each in a RootModel)."""
    return [getattr(zone, "root", zone) for zone in pool.zones or []]


def pool_problems(
    pools: Sequence[PoolLike], zone_allowed: Callable[[str], bool], zone_rule: str
) -> list[str]:
    """Every rule a list of pools breaks, each naming the field (``spec.nodePools[i].x``)."""
    problems: list[str] = []
    seen: set[str] = set()
    for index, pool in enumerate(pools):
        at = f"spec.nodePools[{index}]"
        if pool.name in seen:
            problems.append(f"{at}.name: duplicate pool name {pool.name!r}")
        seen.add(pool.name)
        if pool.name == RESERVED_POOL:
            problems.append(f"{at}.name: 'system' is reserved for the injected system pool")
        if pool.role == "GPU" and pool.gpu is None:
            problems.append(f"{at}.gpu: required when role is GPU")
        if pool.role == "GPU" and not pool.zones:
            problems.append(f"{at}.zones: required when role is GPU")
        low, size, high = pool.minNodeCount, pool.nodeCount, pool.maxNodeCount
        if low is not None and size is not None and low > size:
            problems.append(f"{at}.minNodeCount: {low} exceeds nodeCount {size}")
        if high is not None and size is not None and size > high:
            problems.append(f"{at}.nodeCount: {size} exceeds maxNodeCount {high}")
        for zone in zone_names(pool):
            if not zone_allowed(zone):
                problems.append(f"{at}.zones: {zone!r} is not {zone_rule}")
    return problems
