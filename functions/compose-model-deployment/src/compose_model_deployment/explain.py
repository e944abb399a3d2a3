"""Why a member matches no pool, pool by pool (issue 22 item 5).

``devices.match_member`` answers yes or no; when every pool of a cluster says no, the
scheduler's reason names, for each pool, the first thing that failed, replaying the same
first-fit over the pool's devices:

* the device count: ``pool "a100" has 8 matching devices per node, request "gpu" needs 16``
  (with what the member's earlier requests already took from those devices);
* a selector no device satisfies, with what it reads from the devices (attribute or capacity
  values as published): ``pool "l4": request "gpu" selector 0 matches no device (attribute
  gpu.nvidia.com/architecture is "Ada Lovelace")``;
* selectors each satisfied by some device but never all by one;
* device data that cannot be read (such devices satisfy no selector).

Explanations are one ``; ``-separated part per pool, so the summary of many clusters can merge
them by pool (``merged``). Pure; selectors must have been compiled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from modelplane_common import dracel

from compose_model_deployment.devices import Pool, PoolDevice, Request

NO_POOL = "no pool matches"
MAX_POOLS = 4  # pool explanations shown per reason, then "K more pools"
_MAX_VALUES = 3  # distinct published values shown per attribute or capacity
_SEPARATOR = "; "


def member(requests: tuple[Request, ...] | None, pools: Iterable[Pool]) -> str:
    """``(pool "a": ...; pool "b": ...)`` for a member no pool matches; "" without pools."""
    parts = [pool_part(requests or (), pool) for pool in pools]
    return f" ({_bounded(parts)})" if parts else ""


def merged(kind: str, details: Iterable[str]) -> str:
    """The pool explanations of several clusters' no-pool reasons, each distinct one once;
    "" for other kinds of reason."""
    if not kind.startswith(NO_POOL):
        return ""
    parts: list[str] = []
    for detail in details:
        for part in detail.split(_SEPARATOR):
            if part.startswith("pool ") and part not in parts:
                parts.append(part)
    return _bounded(parts)


def _bounded(parts: list[str]) -> str:
    shown = parts[:MAX_POOLS]
    if len(parts) > MAX_POOLS:
        shown.append(f"{len(parts) - MAX_POOLS} more pools")
    return _SEPARATOR.join(shown)


_parts: dict[tuple[Any, ...], str] = {}
_MAX_CACHE = 100_000


def pool_part(requests: tuple[Request, ...], pool: Pool) -> str:
    """Why ``requests`` (one member's) do not fit one node of ``pool``; memoised, as a fleet
    publishes few distinct pools (``devices.match_member`` is memoised the same way)."""
    key = (requests, pool.name, pool.signature)
    part = _parts.get(key)
    if part is None:
        part = _pool_part(requests, pool)
        if len(_parts) >= _MAX_CACHE:
            _parts.clear()
        _parts[key] = part
    return part


def _pool_part(requests: tuple[Request, ...], pool: Pool) -> str:
    name = json.dumps(pool.name)
    if not pool.devices:
        return f"pool {name} publishes no devices"
    remaining = [device.count for device in pool.devices]
    for request in requests:
        selectors = [dracel.compile_selector(s) for s in request.selectors]
        matching = [
            i
            for i, device in enumerate(pool.devices)
            if all(dracel.matches(selector, device.cel) for selector in selectors)
        ]
        chosen = next((i for i in matching if remaining[i] >= request.count), None)
        if chosen is not None:
            remaining[chosen] -= request.count
            continue
        if matching:
            return _too_few(name, request, pool, matching, remaining)
        return _no_device(name, request, selectors, pool.devices)
    # Not reached for a pool match_member refused; say so rather than guess.
    return f"pool {name} matches"


def _too_few(
    name: str, request: Request, pool: Pool, matching: list[int], remaining: list[int]
) -> str:
    best = max(matching, key=lambda i: (remaining[i], pool.devices[i].count))
    published, left = pool.devices[best].count, remaining[best]
    taken = f", {left} left after the member's earlier requests" if left < published else ""
    return (
        f"pool {name} has {published} matching device{'' if published == 1 else 's'} per node"
        f"{taken}, "
        f"request {json.dumps(request.name)} needs {request.count}"
    )


def _no_device(
    name: str,
    request: Request,
    selectors: list[dracel.CompiledSelector],
    devices: tuple[PoolDevice, ...],
) -> str:
    readable = [device for device in devices if device.cel.value is not None]
    unreadable = sorted({d.cel.error for d in devices if d.cel.value is None and d.cel.error})
    note = f", device attributes cannot be read: {', '.join(unreadable)}" if unreadable else ""
    if not readable:
        if unreadable:
            return f"pool {name}: device attributes cannot be read: {', '.join(unreadable)}"
        return f"pool {name}: no device can be claimed (a DRA device without deviceClassName)"
    label = json.dumps(request.name)
    for position, selector in enumerate(selectors):
        if not any(dracel.matches(selector, device.cel) for device in readable):
            shown = _published(selector, readable)
            return (
                f"pool {name}: request {label} selector {position} matches no device"
                f"{f' ({shown})' if shown else ''}{note}"
            )
    return f"pool {name}: no one device satisfies every selector of request {label}{note}"


def _published(selector: dracel.CompiledSelector, devices: list[PoolDevice]) -> str:
    """What the selector reads, as the pool's devices publish it."""
    said = []
    if "device.driver" in selector.expression:
        said.append(f"driver is {_values([json.dumps(d.cel.value['driver']) for d in devices])}")
    for field, domain, attribute in selector.reads:
        kind = "attribute" if field == "attributes" else "capacity"
        values = [
            text
            for device in devices
            if (text := _as_published(device, field, domain, attribute)) is not None
        ]
        shown = f"is {_values(values)}" if values else "is not published"
        said.append(f"{kind} {domain}/{attribute} {shown}")
    return ", ".join(said[:_MAX_VALUES])


def _as_published(device: PoolDevice, field: str, domain: str, name: str) -> str | None:
    """The value as the pool entry spells it (``24Gi``, not the quantity's canonical form)."""
    driver, attributes, capacity = device.cel.signature
    entries = dict((attributes if field == "attributes" else capacity) or ())
    raw = entries.get(f"{domain}/{name}")
    if raw is None and domain == driver:
        raw = entries.get(name)
    if not isinstance(raw, tuple):
        return None
    for item in raw:
        key, value = item if isinstance(item, tuple) and len(item) == 2 else ("", None)
        if key in ("string", "version", "bool", "int", "value") and value is not None:
            return json.dumps(value) if key == "string" else _text(value)
    return None


def _values(values: list[str]) -> str:
    texts: list[str] = []
    for text in values:
        if text not in texts:
            texts.append(text)
    shown = " or ".join(texts[:_MAX_VALUES])
    return shown + (" or others" if len(texts) > _MAX_VALUES else "")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
