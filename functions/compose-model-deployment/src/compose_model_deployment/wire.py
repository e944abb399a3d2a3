"""Reading InferenceClusters straight from protobuf.

``Request.required`` turns every object into a dict with ``json_format``; the scheduler needs
little of a cluster: its metadata and status, and of its spec the pools, taints and grace
period. So this module converts Struct values directly and skips what is never read.
"""

from __future__ import annotations

from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import struct_pb2
from modelplane_common.plain import plain_value as plain

from compose_model_deployment import devices


def _struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    return {k: plain(v) for k, v in struct.fields.items()}


def _field(struct: struct_pb2.Struct, name: str) -> Any:
    value = struct.fields.get(name)
    return plain(value) if value is not None else None


def _items(request: fnv1.RunFunctionRequest, key: str) -> list[struct_pb2.Struct] | None:
    if key not in request.required_resources:
        return None  # not resolved yet, never "nothing exists"
    return [item.resource for item in request.required_resources[key].items]


_MAX_CACHE = 100_000
_pool_entries: dict[bytes, Any] = {}


def _pool_entry(value: struct_pb2.Value) -> Any:
    """A ``gpuPools[]`` entry, decoded once per distinct content and shared afterwards.

    A fleet publishes few distinct pools, and sharing the decoded entry lets
    ``devices.parse_pool`` recognise it without looking inside.
    """
    key = value.SerializeToString(deterministic=True)
    entry = _pool_entries.get(key)
    if entry is None:
        if len(_pool_entries) >= _MAX_CACHE:
            _pool_entries.clear()
        decoded = plain(value)
        entry = devices.SharedPoolEntry(decoded) if isinstance(decoded, dict) else decoded
        _pool_entries[key] = entry
    return entry


def _status(struct: struct_pb2.Struct) -> dict[str, Any]:
    out = {}
    for name, value in struct.fields.items():
        if name == "gpuPools" and value.WhichOneof("kind") == "list_value":
            out[name] = [_pool_entry(v) for v in value.list_value.values]
        else:
            out[name] = plain(value)
    return out


_CLUSTER_SPEC = ("taints", "failoverGracePeriod")


def clusters(request: fnv1.RunFunctionRequest, key: str) -> list[dict[str, Any]] | None:
    """InferenceClusters as {metadata, status} and of their spec only ``nodePools``, taints
    and the failover grace period (read straight from the spec: no status copy to lag)."""
    items = _items(request, key)
    if items is None:
        return None
    out = []
    for item in items:
        status = item.fields.get("status")
        cluster = {
            "metadata": _field(item, "metadata") or {},
            "status": _status(status.struct_value)
            if status is not None and status.WhichOneof("kind") == "struct_value"
            else plain(status)
            if status is not None
            else {},
        }
        spec = item.fields.get("spec")
        if spec is not None and spec.WhichOneof("kind") == "struct_value":
            fields = spec.struct_value.fields
            read = {k: plain(fields[k]) for k in ("nodePools", *_CLUSTER_SPEC) if k in fields}
            if read:
                cluster["spec"] = read
        elif spec is not None:
            cluster["spec"] = plain(spec)
        out.append(cluster)
    return out
