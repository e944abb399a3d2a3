"""The checked syntax tree of a compiled CEL expression, read from its serialized form.

cel-expr-python exposes no syntax tree, but ``Expression.serialize()`` returns the checked
expression as a ``google.protobuf.Any`` holding a ``cel.expr.CheckedExpr``. Its wire format is
small and stable (field numbers from the published cel-spec protos), so a few lines of decoding
give the static checks and the cost estimate the real, type-checked tree without pulling in the
cel-spec protos as another dependency.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

_Fields = dict[int, list[Any]]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _wire_fields(data: bytes) -> list[tuple[int, int, Any]]:
    """Every field of one message in order: (number, wire type, int or bytes)."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((number, wire, value))
    return out


def _fields(data: bytes) -> _Fields:
    """Every field of one message: number -> values (varints as int, the rest as bytes)."""
    out: _Fields = {}
    for number, _, value in _wire_fields(data):
        out.setdefault(number, []).append(value)
    return out


def _one(fields: _Fields, number: int, default: Any = None) -> Any:
    values = fields.get(number)
    return values[-1] if values else default


def _text(fields: _Fields, number: int) -> str:
    raw = _one(fields, number, b"")
    return raw.decode() if isinstance(raw, bytes) else ""


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclasses.dataclass(frozen=True)
class Expr:
    """One node. ``kind``: const, ident, select, call, list, map, struct, comprehension."""

    id: int
    kind: str
    name: str = ""  # identifier, selected field, function, message, or literal kind
    value: Any = None  # a literal's value
    target: Expr | None = None  # select operand, method receiver
    args: tuple[Expr, ...] = ()  # call arguments, list elements, map keys and values (k, v, ...)
    test_only: bool = False  # select from has()
    variables: tuple[str, ...] = ()  # comprehension iteration variables
    parts: tuple[Expr, ...] = ()  # comprehension: range, init, condition, step, result


_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}


def type_name(data: bytes) -> str:
    """A checked type as cel-go spells it in messages: int, list(string), map(string, dyn)."""
    fields = _fields(data)
    if 1 in fields:
        return "dyn"
    if 2 in fields:
        return "null_type"
    if 3 in fields:
        return _PRIMITIVES.get(fields[3][-1], "dyn")
    if 4 in fields:
        return f"wrapper({_PRIMITIVES.get(fields[4][-1], 'dyn')})"
    if 5 in fields:
        return _WELL_KNOWN.get(fields[5][-1], "dyn")
    if 6 in fields:
        return f"list({type_name(_one(_fields(fields[6][-1]), 1, b''))})"
    if 7 in fields:
        inner = _fields(fields[7][-1])
        return f"map({type_name(_one(inner, 1, b''))}, {type_name(_one(inner, 2, b''))})"
    if 9 in fields:
        return fields[9][-1].decode()
    if 10 in fields:
        return fields[10][-1].decode()
    if 11 in fields:
        return "type"
    if 12 in fields:
        return "*error*"
    if 14 in fields:
        abstract = _fields(fields[14][-1])
        params = [type_name(p) for p in abstract.get(2, [])]
        name = _text(abstract, 1)
        return f"{name}({', '.join(params)})" if params else name
    return "dyn"


def _constant(data: bytes) -> tuple[str, Any]:
    fields = _fields(data)
    if 1 in fields:
        return "null", None
    if 2 in fields:
        return "bool", bool(fields[2][-1])
    if 3 in fields:
        return "int", _signed(fields[3][-1])
    if 4 in fields:
        return "uint", fields[4][-1]
    if 5 in fields:
        return "double", struct.unpack("<d", fields[5][-1])[0]
    if 6 in fields:
        return "string", fields[6][-1].decode()
    if 7 in fields:
        return "bytes", fields[7][-1]
    return "null", None


def _maybe(fields: _Fields) -> Expr | None:
    """Field 1 (a select's operand, a call's receiver) when present."""
    raw = _one(fields, 1)
    return _expr(raw) if raw is not None else None


def _expr(data: bytes) -> Expr:
    fields = _fields(data)
    ident = _one(fields, 2, 0)
    if 3 in fields:
        kind, value = _constant(fields[3][-1])
        return Expr(ident, "const", kind, value)
    if 4 in fields:
        return Expr(ident, "ident", _text(_fields(fields[4][-1]), 1))
    if 5 in fields:
        select = _fields(fields[5][-1])
        test_only = bool(_one(select, 3, 0))
        return Expr(ident, "select", _text(select, 2), target=_maybe(select), test_only=test_only)
    if 6 in fields:
        call = _fields(fields[6][-1])
        args = tuple(_expr(a) for a in call.get(3, []))
        return Expr(ident, "call", _text(call, 2), target=_maybe(call), args=args)
    if 7 in fields:
        return Expr(ident, "list", args=tuple(_expr(e) for e in _fields(fields[7][-1]).get(1, [])))
    if 8 in fields:
        create = _fields(fields[8][-1])
        items: list[Expr] = []
        for entry in create.get(2, []):
            entry_fields = _fields(entry)
            key = _one(entry_fields, 3)
            items.append(
                _expr(key)
                if key is not None
                else Expr(0, "const", "string", _text(entry_fields, 2))
            )
            items.append(_expr(_one(entry_fields, 4, b"")))
        message = _text(create, 1)
        return Expr(ident, "struct" if message else "map", message, args=tuple(items))
    if 9 in fields:
        loop = _fields(fields[9][-1])
        variables = tuple(v for v in (_text(loop, 1), _text(loop, 8)) if v)
        parts = tuple(_expr(_one(loop, n, b"")) for n in (2, 4, 5, 6, 7))
        return Expr(ident, "comprehension", _text(loop, 3), variables=variables, parts=parts)
    return Expr(ident, "unset")


@dataclasses.dataclass(frozen=True)
class CheckedAst:
    expr: Expr
    types: dict[int, str]  # node id -> checked type name
    positions: dict[int, int]  # node id -> code point offset in the source


def _int_map(entries: list[bytes], decode: Any) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for entry in entries:
        fields = _fields(entry)
        out[_signed(_one(fields, 1, 0))] = decode(_one(fields, 2, b""))
    return out


def decode(serialized: bytes) -> CheckedAst:
    """The tree of ``Expression.serialize()`` (an Any wrapping a CheckedExpr)."""
    checked = _fields(_one(_fields(serialized), 2, b""))
    source_info = _fields(_one(checked, 5, b""))
    return CheckedAst(
        expr=_expr(_one(checked, 4, b"")),
        types=_int_map(checked.get(3, []), type_name),
        positions=_int_map(source_info.get(4, []), lambda v: v if isinstance(v, int) else 0),
    )


def walk(expr: Expr) -> list[Expr]:
    """Every node below and including ``expr``, parents first."""
    out, stack = [], [expr]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.parts))
        stack.extend(reversed(node.args))
        if node.target is not None:
            stack.append(node.target)
    return out


# ---------------------------------------------------------------------------------------------
# Edits. A few Kubernetes semantics cel-cpp cannot express through declarations (an optional
# returned by a library function, list-type-aware equality) are planted into the checked tree
# before it is planned: a call is wrapped in another call, or sent to another function.


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are ten-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _encode(fields: list[tuple[int, int, Any]]) -> bytes:
    out = bytearray()
    for number, wire, value in fields:
        out += _encode_varint(number << 3 | wire)
        if wire == 0:
            out += _encode_varint(value)
        elif wire == 2:
            out += _encode_varint(len(value)) + value
        else:
            out += value
    return bytes(out)


def _message(*fields: tuple[int, Any]) -> bytes:
    """A message from (number, value) pairs: ints as varints, bytes and str as length-delimited."""
    return _encode(
        [
            (n, 0, v) if isinstance(v, int) else (n, 2, v.encode() if isinstance(v, str) else v)
            for n, v in fields
        ]
    )


@dataclasses.dataclass(frozen=True)
class CallEdit:
    """Send a call to ``function`` (overload ``overload``) with ``extra`` int literals appended
    to its arguments, or, with ``wrap``, keep the call and pass its result to ``function``."""

    function: str
    overload: str
    extra: tuple[int, ...] = ()
    wrap: bool = False


# Where sub-expressions live, by Expr field: Select.operand; Call.target and args;
# CreateList.elements; Comprehension range, init, condition, step, result. (CreateStruct, 8,
# nests one more level: its entries' key and value.)
_EXPR_FIELDS = {5: (1,), 6: (1, 3), 7: (1,), 8: (2,), 9: (2, 4, 5, 6, 7)}


def _map_fields(data: bytes, numbers: tuple[int, ...], change: Any) -> bytes:
    """``data`` with each length-delimited field in ``numbers`` passed through ``change``."""
    return _encode(
        [(n, w, change(v) if n in numbers and w == 2 else v) for n, w, v in _wire_fields(data)]
    )


def _edit_children(data: bytes, visit: Any) -> bytes:
    """``data`` (an Expr) with every Expr below it passed through ``visit``."""

    def kind(number: int) -> Any:
        if number == 8:
            return lambda value: _map_fields(
                value, (2,), lambda entry: _map_fields(entry, (3, 4), visit)
            )
        return lambda value: _map_fields(value, _EXPR_FIELDS[number], visit)

    return _encode(
        [
            (n, w, kind(n)(v) if n in _EXPR_FIELDS and w == 2 else v)
            for n, w, v in _wire_fields(data)
        ]
    )


def edit(serialized: bytes, edits: dict[int, CallEdit]) -> bytes:
    """``Expression.serialize()`` output with ``edits`` (by call node id) applied."""
    outer = _wire_fields(serialized)
    checked = _wire_fields(next(v for n, _, v in outer if n == 2))
    expr = next(v for n, _, v in checked if n == 4)
    next_id = max([n.id for n in walk(_expr(expr))] + list(edits)) + 1
    references: list[tuple[int, int, Any]] = []
    moved: dict[int, int] = {}  # wrapped call id -> its new id

    def visit(data: bytes) -> bytes:
        nonlocal next_id
        data = _edit_children(data, visit)
        fields = _fields(data)
        node_id = _signed(_one(fields, 2, 0))
        change = edits.get(node_id)
        if change is None:
            return data
        reference = _message((1, change.function), (3, change.overload))
        references.append((2, 2, _message((1, node_id), (2, reference))))
        if change.wrap:
            moved[node_id] = next_id
            inner = _encode([(n, w, next_id if n == 2 else v) for n, w, v in _wire_fields(data)])
            next_id += 1
            call = _message((2, change.function), (3, inner))
        else:
            old = _wire_fields(_one(fields, 6))
            kept = [(n, w, v) for n, w, v in old if n != 2]
            call = _encode([(2, 2, change.function.encode()), *kept])
            for value in change.extra:  # an int literal node per extra argument
                call += _message((3, _message((2, next_id), (3, _message((3, value))))))
                next_id += 1
        return _message((2, node_id), (6, call))

    new_expr = visit(expr)
    rebuilt = []
    for number, wire, value in checked:
        if number == 4:
            rebuilt.append((4, wire, new_expr))
            continue
        if number in (2, 3):  # reference_map and type_map entries: (node id, value)
            entry = _fields(value)
            node_id = _signed(_one(entry, 1, 0))
            if node_id in moved:  # the wrapped call keeps its reference and type, new id
                rebuilt.append((number, 2, _message((1, moved[node_id]), (2, _one(entry, 2)))))
                if number == 2:
                    continue  # the wrapper's reference is added below
            elif number == 2 and node_id in edits:
                continue
        rebuilt.append((number, wire, value))
    rebuilt += references
    return _encode([(n, w, _encode(rebuilt) if n == 2 else v) for n, w, v in outer])
