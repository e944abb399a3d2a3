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
    if kind == "struct_value":
        return {k: plain_value(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [plain_value(v) for v in value.list_value.values]
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or no kind set


def to_plain(struct: struct_pb2.Struct) -> JSON:
    """A Struct as a dict, with whole-number floats turned back into ints (non-finite numbers
    read as json_format writes them). Walks the message directly: json_format's generic
    reflection took most of a function's time on large observed resources (CRD bundles)."""
    return {k: plain_value(v) for k, v in struct.fields.items()}


def to_struct(value: JSON) -> struct_pb2.Struct:
    """A dict as a Struct."""
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct
