"""Convert between protobuf Structs and plain Python values.

Crossplane encodes every number as an IEEE double, so ``replicas: 3`` arrives as ``3.0``.
Pure logic wants the integer back; ``to_plain`` restores whole numbers to ``int``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, struct_pb2

JSON = dict[str, Any]


def _restore_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _restore_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore_ints(v) for v in value]
    return value


def to_plain(struct: struct_pb2.Struct) -> JSON:
    """A Struct as a dict, with whole-number floats turned back into ints."""
    return _restore_ints(json_format.MessageToDict(struct, preserving_proto_field_name=True))


def to_struct(value: JSON) -> struct_pb2.Struct:
    """A dict as a Struct."""
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct
