"""Matching a member's ``nodeSelector`` against the pools a cluster publishes (spec §3.2-3.3).

A member's requests describe what one of its pods needs from one node. Each request takes the
first device of the pool (published order) with enough remaining count that satisfies all of
the request's selectors; devices are shared across the member's requests. A request satisfied
by a ``DRA`` device resolves to a ``deviceRequests`` entry; one satisfied by a ``Synthetic``
device resolves to nothing (pool pinning is its only enforcement).

Results are memoised by (requests, pool content): a fleet publishes few distinct pool shapes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from modelplane_common import dracel

_MAX_CACHE = 100_000
_MAX_DEVICE_COUNT = 64  # the schema's maximum devices[].count


class MalformedPoolError(ValueError):
    """A ``status.gpuPools`` entry that cannot be read."""


@dataclasses.dataclass(frozen=True)
class Request:
    """One ``nodeSelector.devices[]`` entry."""

    name: str
    count: int
    selectors: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A request resolved against a ``DRA`` device: one ``deviceRequests`` entry."""

    name: str
    device_class: str
    count: int
    selectors: tuple[str, ...]

    def manifest(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "deviceClassName": self.device_class,
            "count": self.count,
            "selectors": [{"cel": cel} for cel in self.selectors],
        }


@dataclasses.dataclass(frozen=True)
class PoolDevice:
    name: str  # as published (``gpu``): what explanations count
    claim: str  # "DRA" or "Synthetic"
    device_class: str
    count: int
    cel: dracel.CelDevice
    # count, attributes or capacity missing, null or of the wrong type: for new placements
    # they read as published (0, none), but they cannot prove a pinned replica must move.
    incomplete: bool = False
    count_unknown: bool = False


@dataclasses.dataclass(frozen=True)
class Pool:
    name: str
    nodes: int
    max_nodes: int | None
    devices: tuple[PoolDevice, ...]
    signature: Any

    def unreadable(self) -> list[str]:
        """Why devices of this pool can match no selector (e.g. a version that is not semver)."""
        return [d.cel.error for d in self.devices if d.cel.value is None and d.cel.error]

    @property
    def per_node(self) -> tuple[int, ...]:
        """What one node offers, per device (published order): claimable devices only, as a
        Synthetic device is matched for scheduling but never claimed (D11)."""
        return tuple(d.count if d.claim != "Synthetic" else 0 for d in self.devices)


# What one pod of a member takes on its node: (device index in the pool, count) pairs, by
# index, each index once. Empty: the pod claims nothing and costs nothing.
Demand = tuple[tuple[int, int], ...]


def _count(value: Any) -> int:
    """Published counts are floored: missing, negative or non-integer reads as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(int(value), 0)


_pools: dict[str, Pool] = {}
_pools_by_identity: dict[int, tuple[Any, Pool]] = {}


class SharedPoolEntry(dict):
    """A decoded ``gpuPools[]`` entry shared between requests and never modified (wire.py
    decodes each distinct entry once), so it is recognised by identity, without a repr."""


def parse_pool(raw: Any) -> Pool:
    """One ``status.gpuPools[]`` entry; raises MalformedPoolError naming what is wrong.

    A fleet republishes the same pools on every reconcile, so parsed pools are cached by the
    entry's text (``repr`` is C-fast; equal text means equal content).
    """
    if isinstance(raw, SharedPoolEntry):
        seen = _pools_by_identity.get(id(raw))
        if seen is not None and seen[0] is raw:
            return seen[1]
    key = repr(raw)
    cached = _pools.get(key)
    if cached is None:
        cached = _parse_pool(raw, key)
        if len(_pools) >= _MAX_CACHE:
            _pools.clear()
            _pools_by_identity.clear()
        _pools[key] = cached
    if isinstance(raw, SharedPoolEntry):
        # Holding ``raw`` keeps its id from being reused, so an identity hit is genuine.
        _pools_by_identity[id(raw)] = (raw, cached)
    return cached


def _parse_pool(raw: Any, key: str) -> Pool:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise MalformedPoolError("entry has no name")
    devices_raw = raw.get("devices")
    if not isinstance(devices_raw, list):
        # Missing or null too: a pool is published only with its devices (spec §3.2).
        raise MalformedPoolError(f"pool {raw['name']!r}: devices is missing or not a list")
    devices = []
    for device in devices_raw:
        if not isinstance(device, dict):
            raise MalformedPoolError(f"pool {raw['name']!r}: a device is not an object")
        cel = dracel.cel_device(
            device.get("driver"), device.get("attributes"), device.get("capacity")
        )
        claim = device.get("claim") or "DRA"
        device_class = device.get("deviceClassName")
        if claim not in ("DRA", "Synthetic") or (
            claim == "DRA" and not isinstance(device_class, str)
        ):
            # A DRA device without a class cannot be claimed: it satisfies nothing.
            cel = dracel.CelDevice(cel.signature, None)
        count_unknown = not isinstance(device.get("count"), int)
        incomplete = count_unknown or not (
            isinstance(device.get("attributes"), dict) and isinstance(device.get("capacity"), dict)
        )
        count = _count(device.get("count"))
        name = device.get("name") if isinstance(device.get("name"), str) else ""
        devices.append(
            PoolDevice(name, claim, device_class or "", count, cel, incomplete, count_unknown)
        )
    max_nodes = raw.get("maxNodes")
    return Pool(
        name=raw["name"],
        nodes=_count(raw.get("nodes")),
        max_nodes=_count(max_nodes) if max_nodes is not None else None,
        devices=tuple(devices),
        # Matching depends on the devices only, never on the pool's name or size.
        signature=repr(devices_raw),
    )


def requests_of(node_selector: Any) -> tuple[Request, ...] | None:
    """The member's requests; None for a member without nodeSelector (it matches anything)."""
    if not node_selector:
        return None
    requests = []
    for device in node_selector.get("devices") or []:
        count = device.get("count")
        requests.append(
            Request(
                name=device.get("name", ""),
                count=count if isinstance(count, int) and count > 0 else 1,
                selectors=tuple((s or {}).get("cel", "") for s in device.get("selectors") or []),
            )
        )
    return tuple(requests)


def compile_requests(requests: tuple[Request, ...] | None) -> list[tuple[int, int, str]]:
    """Compile every selector; returns (request index, selector index, error) for each that
    fails."""
    failures = []
    for index, request in enumerate(requests or ()):
        for position, expression in enumerate(request.selectors):
            try:
                dracel.compile_selector(expression)
            except dracel.SelectorCompileError as err:
                failures.append((index, position, str(err)))
    return failures


_matches: dict[tuple[Any, Any, bool], tuple[tuple[Resolved, ...], Demand] | None] = {}


def match_member(
    requests: tuple[Request, ...] | None, pool: Pool, *, unreadable_matches: bool = False
) -> tuple[Resolved, ...] | None:
    """The member's resolved ``DRA`` requests on the pool, or None when the pool does not match.

    An empty tuple is a match that claims nothing (no nodeSelector, or only Synthetic devices).
    ``unreadable_matches`` lets devices whose data cannot be read satisfy every selector (to
    tell "does not fit" from "cannot be judged"). Selectors must have been compiled
    (compile_requests) first.
    """
    found = _matched(requests, pool, unreadable_matches)
    return None if found is None else found[0]


def member_demand(requests: tuple[Request, ...] | None, pool: Pool) -> Demand | None:
    """What each pod of the member takes on its node of ``pool`` (the devices ``match_member``
    resolved its DRA requests to), or None when the pool does not match."""
    found = _matched(requests, pool, False)
    return None if found is None else found[1]


def _matched(
    requests: tuple[Request, ...] | None, pool: Pool, unreadable_matches: bool
) -> tuple[tuple[Resolved, ...], Demand] | None:
    if requests is None:
        return (), ()
    key = (requests, pool.signature, unreadable_matches)
    if key in _matches:
        return _matches[key]
    result = _match(requests, pool, unreadable_matches)
    if len(_matches) >= _MAX_CACHE:
        _matches.clear()
    _matches[key] = result
    return result


def _demand(taken: dict[int, int]) -> Demand:
    return tuple(sorted((i, n) for i, n in taken.items() if n > 0))


def _match(
    requests: tuple[Request, ...], pool: Pool, unreadable_matches: bool
) -> tuple[tuple[Resolved, ...], Demand] | None:
    # Optimistically (``unreadable_matches``) an incomplete device may have any count.
    remaining = [
        _MAX_DEVICE_COUNT if unreadable_matches and device.count_unknown else device.count
        for device in pool.devices
    ]
    resolved = []
    taken: dict[int, int] = {}
    for request in requests:
        selectors = [dracel.compile_selector(s) for s in request.selectors]
        for i, device in enumerate(pool.devices):
            if remaining[i] < request.count:
                continue
            if unreadable_matches:
                # Optimistic: only a selector that evaluates to false rules a device out.
                fits = device.incomplete or all(
                    dracel.evaluate(selector, device.cel) is not False for selector in selectors
                )
            else:
                fits = all(dracel.matches(selector, device.cel) for selector in selectors)
            if fits:
                remaining[i] -= request.count
                if device.claim != "Synthetic":
                    taken[i] = taken.get(i, 0) + request.count
                    resolved.append(
                        Resolved(
                            request.name, device.device_class, request.count, request.selectors
                        )
                    )
                break
        else:
            return None
    return tuple(resolved), _demand(taken)


_claims: dict[tuple[Any, Any], Demand] = {}


def claimed_demand(device_requests: tuple[Resolved, ...], pool: Pool) -> Demand:
    """What a pod of an existing replica's member takes on its node, from the
    ``deviceRequests`` it was composed with: each takes the first claimable device of its
    ``deviceClassName`` with enough left that satisfies its selectors (as when it was placed),
    or, when none does now (selectors that no longer compile or match), the first of that
    class with enough left. A request no device of the pool can take is not charged: the pool
    no longer offers that device (the retain phase judges our own replicas for that)."""
    key = (device_requests, pool.signature)
    found = _claims.get(key)
    if found is None:
        found = _claim(device_requests, pool)
        if len(_claims) >= _MAX_CACHE:
            _claims.clear()
        _claims[key] = found
    return found


def _claim(device_requests: tuple[Resolved, ...], pool: Pool) -> Demand:
    remaining = [device.count for device in pool.devices]
    taken: dict[int, int] = {}
    for request in device_requests:
        same_class = [
            i
            for i, device in enumerate(pool.devices)
            if device.claim != "Synthetic" and device.device_class == request.device_class
        ]
        chosen = next(
            (
                i
                for i in same_class
                if remaining[i] >= request.count and _satisfies(request.selectors, pool.devices[i])
            ),
            None,
        )
        if chosen is None:
            chosen = next((i for i in same_class if remaining[i] >= request.count), None)
        if chosen is not None:
            remaining[chosen] -= request.count
            taken[chosen] = taken.get(chosen, 0) + request.count
    return _demand(taken)


def _satisfies(selectors: tuple[str, ...], device: PoolDevice) -> bool:
    try:
        compiled = [dracel.compile_selector(s) for s in selectors]
    except dracel.SelectorCompileError:
        return False
    return all(dracel.matches(selector, device.cel) for selector in compiled)


def parse_claims(raw: Any) -> tuple[Resolved, ...]:
    """A composed member's ``deviceRequests``, tolerantly: what cannot be read is skipped, a
    missing or unreadable count reads as 1 (the schema's default)."""
    if not isinstance(raw, list):
        return ()
    out = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        count = item.get("count")
        valid = isinstance(count, int) and not isinstance(count, bool) and count > 0
        selectors = item.get("selectors")
        out.append(
            Resolved(
                name=str(item.get("name") or ""),
                device_class=str(item.get("deviceClassName") or ""),
                count=count if valid else 1,
                selectors=tuple(
                    s["cel"]
                    for s in (selectors if isinstance(selectors, list) else [])
                    if isinstance(s, dict) and isinstance(s.get("cel"), str)
                ),
            )
        )
    return tuple(out)
