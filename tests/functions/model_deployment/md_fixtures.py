"""The example devices of spec model-deployment §3.5, as published in status.gpuPools."""

from __future__ import annotations

import copy
from typing import Any

H200: dict[str, Any] = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 8,
    "attributes": {
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "nvlinkDomainSize": {"int": 8},
        "migCapable": {"bool": True},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
    "capacity": {"memory": {"value": "141Gi"}},
}
L4: dict[str, Any] = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 1,
    "attributes": {
        "architecture": {"string": "Ada Lovelace"},
        "cudaComputeCapability": {"version": "8.9.0"},
        "migCapable": {"bool": False},
    },
    "capacity": {"memory": {"value": "23034Mi"}},
}
IB: dict[str, Any] = {
    "name": "ib",
    "claim": "Synthetic",
    "driver": "nic.nvidia.com",
    "count": 8,
    "attributes": {"linkType": {"string": "infiniband"}},
    "capacity": {"bandwidth": {"value": "400G"}},
}
BAD: dict[str, Any] = {
    "name": "gpu",
    "claim": "DRA",
    "driver": "gpu.nvidia.com",
    "deviceClassName": "gpu.nvidia.com",
    "count": 1,
    "attributes": {"cudaComputeCapability": {"version": "9.0"}},
    "capacity": {"memory": {"value": "80Gi"}},
}

MEMORY_80 = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) >= 0'
INFINIBAND = 'device.attributes["nic.nvidia.com"].linkType == "infiniband"'
ANY_GPU = 'device.driver == "gpu.nvidia.com"'


def with_count(device: dict[str, Any], count: int) -> dict[str, Any]:
    changed = copy.deepcopy(device)
    changed["count"] = count
    return changed


def pool(name: str, nodes: int, *devices: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "nodes": nodes, "devices": [copy.deepcopy(d) for d in devices]}


def request(name: str, *cel: str, count: int = 1) -> dict[str, Any]:
    return {"name": name, "count": count, "selectors": [{"cel": c} for c in cel]}
