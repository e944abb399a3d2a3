"""Convert between protobuf Structs and plain Python values.

Crossplane encodes every number as an IEEE double, so ``replicas: 3`` arrives as ``3.0``.
Pure logic wants the integer back; ``to_plain`` restores whole numbers to ``int``.
"""

from __future__ import annotations

import math
from typing import Any

from google.protobuf import struct_pb2

JSON = dict[str, Any]


def plain_value(value: struct_pb2.Value) -> Any:
    """A protobuf Value as plain Python (see ``to_plain``)."""
    kind = value.WhichOneof("kind")
    # Most frequent first; maps iterate their keys (a map's items() view is pure Python).
    if kind == "string_value":
        return value.string_value
    if kind == "struct_value":
        fields = value.struct_value.fields
        return {k: plain_value(fields[k]) for k in fields}
    if kind == "list_value":
        return list(map(plain_value, value.list_value.values))
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or no kind set


def to_plain(struct: struct_pb2.Struct) -> JSON:
    """A Struct as a dict, with whole-number floats turned back into ints (non-finite numbers
    read as json_format writes them). Walks the message directly: json_format's generic
    reflection took most of a function's time on large observed resources (CRD bundles)."""
    fields = struct.fields
    return {k: plain_value(fields[k]) for k in fields}


def resource_plain(struct: struct_pb2.Struct, but: str | None = None) -> JSON:
    """A Kubernetes object as a dict (see ``to_plain``) without ``metadata.managedFields``:
    the API server's record of who set which field, often the object's largest part, which
    no function reads and none may return (Crossplane refuses a composed resource carrying
    it). ``but``: a top-level field left out."""
    fields = struct.fields
    out = {}
    for key in fields:
        value = fields[key]
        if key == but:
            continue
        if key == "metadata" and value.WhichOneof("kind") == "struct_value":
            meta = value.struct_value.fields
            out[key] = {k: plain_value(meta[k]) for k in meta if k != "managedFields"}
        else:
            out[key] = plain_value(value)
    return out


def object_plain(struct: struct_pb2.Struct) -> JSON:
    """An observed provider-kubernetes Object as a dict (see ``resource_plain``) that keeps,
    of the remote object the provider reports (``status.atProvider.manifest``), only that
    object's status: the remote copy's metadata and spec are a fifth of the Object, and a
    reader that looks only at the remote status need not convert them."""
    status = struct.fields.get("status")
    at_provider = _struct_field(status, "atProvider")
    manifest = _struct_field(at_provider, "manifest")
    if manifest is None:  # (nor then a map at status or atProvider)
        return resource_plain(struct)
    out = resource_plain(struct, but="status")
    out["status"] = _fields_plain(status.struct_value.fields, but="atProvider")
    out["status"]["atProvider"] = _fields_plain(at_provider.struct_value.fields, but="manifest")
    remote = manifest.struct_value.fields
    kept = {"status": plain_value(remote["status"])} if "status" in remote else {}
    out["status"]["atProvider"]["manifest"] = kept
    return out


def replica_plain(struct: struct_pb2.Struct) -> JSON:
    """A ModelReplica as its cluster reads it (see ``resource_plain``) without what no
    cluster decision reads and is about half its values: Crossplane's references
    (``spec.crossplane``) and each engine member's pod ``template``, whatever their shape. A
    spec, engine or member the schema would not admit is otherwise kept as sent, for the
    readers to judge."""
    spec = struct.fields.get("spec")
    if spec is None or spec.WhichOneof("kind") != "struct_value":
        return resource_plain(struct)
    out = resource_plain(struct, but="spec")
    fields = spec.struct_value.fields
    out["spec"] = {
        key: _engines_plain(fields[key]) if key == "engines" else plain_value(fields[key])
        for key in fields
        if key != "crossplane"
    }
    return out


def _engines_plain(engines: struct_pb2.Value) -> Any:
    if engines.WhichOneof("kind") != "list_value":
        return plain_value(engines)
    out = []
    for engine in engines.list_value.values:
        if engine.WhichOneof("kind") != "struct_value":
            out.append(plain_value(engine))
            continue
        fields = engine.struct_value.fields
        read = {k: plain_value(fields[k]) for k in fields if k != "members"}
        if "members" in fields:  # (its place among the keys is of no consequence)
            read["members"] = _members_plain(fields["members"])
        out.append(read)
    return out


def _members_plain(members: struct_pb2.Value) -> Any:
    if members.WhichOneof("kind") != "list_value":
        return plain_value(members)
    return [
        _fields_plain(member.struct_value.fields, but="template")
        if member.WhichOneof("kind") == "struct_value"
        else plain_value(member)
        for member in members.list_value.values
    ]


def _fields_plain(fields: Any, but: str) -> JSON:
    return {k: plain_value(fields[k]) for k in fields if k != but}


def _struct_field(value: struct_pb2.Value | None, key: str) -> struct_pb2.Value | None:
    """``value[key]`` when ``value`` is a map holding a map there."""
    if value is None or value.WhichOneof("kind") != "struct_value":
        return None
    found = value.struct_value.fields.get(key)
    return found if found is not None and found.WhichOneof("kind") == "struct_value" else None


def to_struct(value: JSON) -> struct_pb2.Struct:
    """A dict as a Struct."""
    struct = struct_pb2.Struct()
    fill_struct(struct, value)
    return struct


Leaf = tuple[tuple[str, ...], str]  # a path of map keys, and the string found there


class Variant(dict):
    """A map equal to ``base`` but for a few string ``leaves``. Encoded with ``shared`` (see
    fill_struct), it is a copy of base's encoding with those strings set: many composed
    resources that differ only in names cost one encoding. Neither it nor ``base`` may
    change once it is made (its encoding would not follow)."""

    def __init__(self, base: JSON, leaves: tuple[Leaf, ...]) -> None:
        super().__init__(_with_leaves(base, leaves))
        self.base = base
        self.leaves = leaves


def _with_leaves(base: JSON, leaves: tuple[Leaf, ...]) -> JSON:
    """``base`` with ``leaves`` set, the maps along their paths copied, the rest shared."""
    out = dict(base)
    for path, text in leaves:
        at = out
        for key in path[:-1]:
            at[key] = dict(at[key])
            at = at[key]
        at[path[-1]] = text
    return out


def fill_struct(
    struct: struct_pb2.Struct, value: JSON, shared: dict[int, Any] | None = None
) -> None:
    """Set ``value``'s entries in ``struct``: ``Struct.update`` without its per-value
    dispatch through generic helpers (a third of the time on large composed resources).

    ``shared`` (id of a map -> where it was written) lets a map that several composed
    resources share (the same hydration Job in every cluster's Object), or a Variant's base,
    be encoded once and copied (in C) after that. The maps must stay alive and unchanged
    while it is in use."""
    if shared is not None and isinstance(value, Variant):
        base = shared.get(id(value.base))
        if base is None:
            base = shared[id(value.base)] = struct_pb2.Struct()
            fill_struct(base, value.base, shared)
        struct.CopyFrom(base)
        for path, text in value.leaves:
            fields = struct.fields
            for key in path[:-1]:
                fields = fields[key].struct_value.fields
            fields[path[-1]].string_value = text
        return
    fields = struct.fields
    for key, item in value.items():
        _set_value(fields[key], item, shared)


def _set_value(
    target: struct_pb2.Value, value: Any, shared: dict[int, struct_pb2.Value] | None
) -> None:
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, dict):
        if shared is not None:
            written = shared.get(id(value))
            if written is not None:
                target.CopyFrom(written)
                return
        inner = target.struct_value
        inner.Clear()  # also marks an empty map as set
        fields = inner.fields
        for key, item in value.items():
            _set_value(fields[key], item, shared)
        if shared is not None:
            shared[id(value)] = target
    elif isinstance(value, (list, tuple)):
        listed = target.list_value
        listed.Clear()
        add = listed.values.add
        for item in value:
            _set_value(add(), item, shared)
    elif value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, (int, float)):
        target.number_value = value
    else:
        # What Struct.update accepts besides (a Struct or ListValue message), or its error.
        struct = struct_pb2.Struct()
        struct.update({"v": value})
        target.CopyFrom(struct.fields["v"])
