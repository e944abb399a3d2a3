"""CEL for `x-kubernetes-validations`: compile once, check statically, estimate cost, evaluate.

Evaluation uses the real CEL library celpy. What celpy lacks is added here: the Kubernetes
extension functions rules are likely to use, a static check that mirrors the API server's
compile step (unknown functions, fields the schema does not declare), and a conservative static
cost estimate modelled on the API server's (celpy has none). See design/validation.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import logging
import math
import re
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any

import celpy
import celpy.celtypes as ct
import lark

JSON = dict[str, Any]

# The API server's limits (k8s.io/apiextensions-apiserver validation and apiserver/pkg/apis/cel).
STATIC_COST_LIMIT = 10_000_000  # per expression, times how often it can be evaluated
STATIC_CRD_COST_LIMIT = 100_000_000  # sum over every expression of one schema
MAX_REQUEST_BYTES = 3 * 1024 * 1024  # bounds every list, map and string without a max*

STRING_TRAVERSAL_FACTOR = 0.1  # cost per character of scanning a string
REGEX_FACTOR = 0.25  # cost per character matched by a regular expression
LIST_CREATE_COST = 10
MAP_CREATE_COST = 30

# celpy logs every evaluation error; the validator reports them itself.
logging.getLogger("celpy").setLevel(logging.CRITICAL)


class RuleError(Exception):
    """A rule that the API server would refuse to compile."""


# ---------------------------------------------------------------------------------------------
# Property-name escaping: the API server exposes `my-field` to CEL as `my__dash__field`.

CEL_RESERVED = {
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while",
}  # fmt: skip
_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")


def escape_property(name: str) -> str | None:
    """The CEL name of a schema property, or None if it cannot be accessed from CEL."""
    if name in CEL_RESERVED:
        return f"__{name}__"
    escaped = (
        name.replace("__", "__underscores__")
        .replace(".", "__dot__")
        .replace("-", "__dash__")
        .replace("/", "__slash__")
    )
    return escaped if _IDENT.match(escaped) else None


# ---------------------------------------------------------------------------------------------
# Kubernetes CEL library functions celpy does not have.


def _string_list(values: Iterable[str]) -> ct.ListType:
    return ct.ListType([ct.StringType(v) for v in values])


def _split(text: str, separator: str, limit: int = -1) -> ct.ListType:
    if limit == 0:
        return ct.ListType([])
    return _string_list(text.split(separator, int(limit) - 1 if limit > 0 else -1))


def _join(items: list[Any], separator: str = "") -> ct.StringType:
    return ct.StringType(str(separator).join(str(item) for item in items))


def _replace(text: str, old: str, new: str, limit: int = -1) -> ct.StringType:
    return ct.StringType(text.replace(old, new, int(limit)))


def _index_of(target: Any, item: Any, offset: int = 0) -> ct.IntType:
    if isinstance(target, str):
        return ct.IntType(target.find(item, int(offset)))
    return ct.IntType(next((i for i, v in enumerate(target) if v == item), -1))


def _last_index_of(target: Any, item: Any) -> ct.IntType:
    if isinstance(target, str):
        return ct.IntType(target.rfind(item))
    matches = [i for i, v in enumerate(target) if v == item]
    return ct.IntType(matches[-1] if matches else -1)


def _substring(text: str, start: int, end: int | None = None) -> ct.StringType:
    start, stop = int(start), len(text) if end is None else int(end)
    if not 0 <= start <= stop <= len(text):
        raise ValueError(f"substring({start}, {stop}) out of range for length {len(text)}")
    return ct.StringType(text[start:stop])


def _is_sorted(items: list[Any]) -> ct.BoolType:
    return ct.BoolType(all(a <= b for a, b in itertools.pairwise(items)))


def _list_sum(items: list[Any]) -> Any:
    total: Any = ct.IntType(0)
    for item in items:
        total = item if total == 0 and not isinstance(item, ct.IntType) else total + item
    return total


def _list_min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min() of an empty list")
    return min(items)


def _list_max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max() of an empty list")
    return max(items)


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_SUFFIX = {
    "": Decimal(1), "m": Decimal("0.001"), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}  # fmt: skip


@dataclasses.dataclass(frozen=True, order=True)
class Quantity:
    """A Kubernetes resource quantity (`quantity('1Gi')`), compared by value."""

    value: Decimal


def _parse_quantity(text: str) -> Decimal | None:
    match = _QUANTITY.match(str(text))
    if not match:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * _SUFFIX[suffix]
    except InvalidOperation:
        return None


def _quantity(text: str) -> Quantity:
    parsed = _parse_quantity(text)
    if parsed is None:
        raise ValueError(f"invalid quantity {text!r}")
    return Quantity(parsed)


def _as_quantity(value: Any) -> Decimal:
    return value.value if isinstance(value, Quantity) else Decimal(int(value))


def _quantity_method(op: Callable[[Decimal, Decimal], Any]) -> Callable[[Any, Any], Any]:
    return lambda a, b: op(_as_quantity(a), _as_quantity(b))


def _add(a: Any, b: Any) -> Quantity:
    return Quantity(_as_quantity(a) + _as_quantity(b))


def _sub(a: Any, b: Any) -> Quantity:
    return Quantity(_as_quantity(a) - _as_quantity(b))


_NUMBERS = (ct.IntType, ct.UintType, ct.DoubleType)


def _cross_numeric(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    """The API server's CEL compares int, uint and double with each other (celpy refuses)."""
    fallback = celpy.evaluation.base_functions[name]

    def operator(a: Any, b: Any) -> Any:
        if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS) and type(a) is not type(b):
            return ct.BoolType(compare(float(a), float(b)))
        return fallback(a, b)

    return operator


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "_<_": _cross_numeric("_<_", lambda a, b: a < b),
    "_<=_": _cross_numeric("_<=_", lambda a, b: a <= b),
    "_>_": _cross_numeric("_>_", lambda a, b: a > b),
    "_>=_": _cross_numeric("_>=_", lambda a, b: a >= b),
    "_==_": _cross_numeric("_==_", lambda a, b: a == b),
    "_!=_": _cross_numeric("_!=_", lambda a, b: a != b),
    "lowerAscii": lambda s: ct.StringType(s.lower()),
    "upperAscii": lambda s: ct.StringType(s.upper()),
    "trim": lambda s: ct.StringType(s.strip()),
    "split": _split,
    "join": _join,
    "replace": _replace,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "substring": _substring,
    "charAt": lambda s, i: ct.StringType(s[int(i)] if int(i) < len(s) else ""),
    "isSorted": _is_sorted,
    "sum": _list_sum,
    "min": _list_min,
    "max": _list_max,
    "quantity": _quantity,
    "isQuantity": lambda s: ct.BoolType(_parse_quantity(s) is not None),
    "isGreaterThan": _quantity_method(lambda a, b: ct.BoolType(a > b)),
    "isLessThan": _quantity_method(lambda a, b: ct.BoolType(a < b)),
    "compareTo": _quantity_method(lambda a, b: ct.IntType((a > b) - (a < b))),
    "add": _add,
    "sub": _sub,
    "sign": lambda q: ct.IntType((q.value > 0) - (q.value < 0)),
    "asInteger": lambda q: ct.IntType(int(q.value)),
    "asApproximateFloat": lambda q: ct.DoubleType(float(q.value)),
    "isInteger": lambda q: ct.BoolType(q.value == q.value.to_integral_value()),
}

MACROS = {"has", "all", "exists", "exists_one", "filter", "map"}
# Functions and conversions celpy provides itself.
BUILTINS = {
    "size", "contains", "startsWith", "endsWith", "matches", "type", "int", "uint", "double",
    "string", "bytes", "bool", "duration", "timestamp", "dyn", "list", "map",
    "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth",
    "getHours", "getMilliseconds", "getMinutes", "getSeconds",
}  # fmt: skip
KNOWN_FUNCTIONS = MACROS | BUILTINS | set(FUNCTIONS)


# ---------------------------------------------------------------------------------------------
# A small expression tree over celpy's parse tree (which has one node per grammar level).


@dataclasses.dataclass(frozen=True)
class Node:
    op: str  # lit, ident, select, call, index, list, map, object, cond, or a CEL operator
    args: tuple[Node, ...] = ()
    name: str = ""  # identifier, field, function name or literal text
    target: Node | None = None  # the receiver of a method call


_BINARY = {
    "relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=",
    "relation_eq": "==", "relation_ne": "!=", "relation_in": "in",
    "addition_add": "+", "addition_sub": "-",
    "multiplication_mul": "*", "multiplication_div": "/", "multiplication_mod": "%",
}  # fmt: skip


def _exprs(tree: lark.Tree | None) -> tuple[Node, ...]:
    if tree is None:
        return ()
    return tuple(_node(child) for child in tree.children if isinstance(child, lark.Tree))


def _node(tree: lark.Tree) -> Node:
    kind, children = tree.data, tree.children
    if kind in ("expr", "conditionalor", "conditionaland", "relation", "addition",
                "multiplication", "unary"):  # fmt: skip
        if len(children) == 1:
            return _node(children[0])
        first = children[0]
        if kind == "expr":
            return Node("cond", tuple(_node(c) for c in children))
        if kind == "conditionalor":
            return Node("||", (_node(first), _node(children[1])))
        if kind == "conditionaland":
            return Node("&&", (_node(first), _node(children[1])))
        if kind == "unary":
            return Node("!" if first.data == "unary_not" else "neg", (_node(children[1]),))
        return Node(_BINARY[first.data], (_node(first.children[0]), _node(children[1])))
    if kind in ("member", "primary", "paren_expr"):
        return _node(children[0])
    if kind == "member_dot":
        return Node("select", (_node(children[0]),), name=str(children[1]))
    if kind == "member_dot_arg":
        args = _exprs(children[2]) if len(children) > 2 else ()
        return Node("call", args, name=str(children[1]), target=_node(children[0]))
    if kind == "member_index":
        return Node("index", (_node(children[0]), _node(children[1])))
    if kind == "member_object":
        return Node("object", (_node(children[0]),))
    if kind in ("ident_arg", "dot_ident_arg"):
        args = _exprs(children[1]) if len(children) > 1 else ()
        return Node("call", args, name=str(children[0]))
    if kind in ("ident", "dot_ident"):
        return Node("ident", name=str(children[0]))
    if kind == "literal":
        return Node("lit", name=str(children[0]))
    if kind == "list_lit":
        return Node("list", _exprs(children[0]) if children else ())
    if kind == "map_lit":
        return Node("map", _exprs(children[0]) if children else ())
    raise RuleError(f"unsupported syntax {kind}")


# ---------------------------------------------------------------------------------------------
# Compilation (cached per distinct expression).


@dataclasses.dataclass(frozen=True)
class Compiled:
    source: str
    tree: Node
    program: celpy.Runner
    uses_old_self: bool

    def evaluate(self, variables: dict[str, Any]) -> Any:
        return self.program.evaluate(variables)


_ENV = celpy.Environment()


def compile_rule(source: Any) -> Compiled:
    """Parse and prepare one expression; raises RuleError with the parser's message."""
    if not isinstance(source, str):
        raise RuleError(f"must be a string, not {type(source).__name__}")
    return _compile(source)


@cache
def _compile(source: str) -> Compiled:
    try:
        # celpy's parser runs in lark debug mode, which prints parser state on odd errors.
        with contextlib.redirect_stdout(io.StringIO()):
            ast = _ENV.compile(source)
    except celpy.CELParseError as err:
        raise RuleError(f"compilation failed: {str(err).strip()}") from err
    except Exception as err:  # lark raises a few others on odd input
        raise RuleError(f"compilation failed: {err}") from err
    tree = _node(ast)
    for name in sorted(_calls(tree)):
        if name not in KNOWN_FUNCTIONS:
            raise RuleError(f"compilation failed: undeclared reference to '{name}'")
    program = _ENV.program(ast, functions=FUNCTIONS)
    return Compiled(source, tree, program, "oldSelf" in _identifiers(tree))


def _walk(node: Node) -> Iterable[Node]:
    yield node
    for child in (*node.args, *([node.target] if node.target else [])):
        yield from _walk(child)


def _calls(tree: Node) -> set[str]:
    return {n.name for n in _walk(tree) if n.op == "call"}


def _identifiers(tree: Node) -> set[str]:
    return {n.name for n in _walk(tree) if n.op == "ident"}


# ---------------------------------------------------------------------------------------------
# Shapes: what the static check and cost estimate know about a value from the schema.


@dataclasses.dataclass(frozen=True)
class Shape:
    kind: str  # object, map, list, string, int, double, bool, bytes, timestamp, duration, dyn
    schema: JSON | None = None
    size: int = 0  # max characters (string) or elements (list, map)
    element: Shape | None = None  # list items or map values


DYN = Shape("dyn", size=MAX_REQUEST_BYTES)
_SCALARS = {"string", "int", "double", "bool", "bytes"}
# Type names are values in CEL: `type(self.x) == string`.
_TYPE_NAMES = (
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
)
BOOL = Shape("bool")
INT = Shape("int")


def _min_serialized(schema: JSON) -> int:
    """The fewest bytes a value of this schema takes in JSON (as the API server estimates)."""
    kind = schema.get("type")
    if kind == "string":
        return 2
    if kind == "boolean":
        return 4
    if kind in ("object", "array"):
        return 2
    return 1


def max_elements(schema: JSON) -> int:
    """How many items a list or map may hold: its bound, else what fits in a request."""
    if schema.get("type") == "array":
        if "maxItems" in schema:
            return int(schema["maxItems"])
        return (MAX_REQUEST_BYTES - 2) // (_min_serialized(schema.get("items") or {}) + 1)
    if "maxProperties" in schema:
        return int(schema["maxProperties"])
    value = schema.get("additionalProperties")
    value = value if isinstance(value, dict) else {}
    # An entry takes at least a 2-byte key, its quotes, a colon and a comma besides the value.
    return (MAX_REQUEST_BYTES - 2) // (_min_serialized(value) + 6)


def max_string_length(schema: JSON) -> int:
    """A string's size bound in bytes: maxLength counts code points of up to 4 bytes each."""
    if "maxLength" in schema:
        return max(int(schema["maxLength"]), 0) * 4
    if schema.get("enum"):
        return max(len(str(v)) for v in schema["enum"])
    return MAX_REQUEST_BYTES - 2


def shape_of(schema: JSON | None) -> Shape:
    if not schema:
        return DYN
    if schema.get("x-kubernetes-int-or-string"):
        return Shape("dyn", schema, max_string_length(schema))
    kind = schema.get("type")
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return Shape("map", schema, max_elements(schema), shape_of(extra))
        if schema.get("properties") or not schema.get("x-kubernetes-preserve-unknown-fields"):
            return Shape("object", schema, len(schema.get("properties") or {}))
        return Shape("dyn", schema, MAX_REQUEST_BYTES)
    if kind == "array":
        return Shape("list", schema, max_elements(schema), shape_of(schema.get("items")))
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return Shape("timestamp", schema)
        if fmt == "duration":
            return Shape("duration", schema)
        return Shape("bytes" if fmt == "byte" else "string", schema, max_string_length(schema))
    return Shape({"integer": "int", "number": "double", "boolean": "bool"}.get(kind, "dyn"), schema)


def with_object_meta(schema: JSON) -> JSON:
    """A root schema as rules see it: the API server adds apiVersion, kind, metadata.name and
    metadata.generateName for CEL even when the schema does not declare them."""
    name = {"type": "string", "maxLength": 253}
    properties = dict(schema.get("properties") or {})
    properties.setdefault("apiVersion", {"type": "string", "maxLength": 253})
    properties.setdefault("kind", {"type": "string", "maxLength": 63})
    properties.setdefault(
        "metadata",
        {"type": "object", "properties": {"name": name, "generateName": name}},
    )
    return {**schema, "properties": properties}


def _field(shape: Shape, name: str) -> Shape:
    """The shape of `shape.name`; RuleError when the schema does not declare it."""
    if shape.kind == "object" and shape.schema is not None:
        properties = shape.schema.get("properties") or {}
        for prop, sub in properties.items():
            if escape_property(prop) == name:
                return shape_of(sub)
        if shape.schema.get("x-kubernetes-embedded-resource") and name in (
            "apiVersion",
            "kind",
            "metadata",
        ):
            return DYN
        raise RuleError(f"compilation failed: undefined field '{name}'")
    if shape.kind == "map" and shape.element is not None:
        return shape.element
    if shape.kind == "dyn":
        return DYN
    raise RuleError(f"compilation failed: type '{shape.kind}' does not support field selection")


# ---------------------------------------------------------------------------------------------
# Static estimate: (max cost, shape of the result), in the API server's cost units.


def _scan(length: int, factor: float = STRING_TRAVERSAL_FACTOR) -> int:
    return 1 + math.ceil(length * factor)


class Estimator:
    def __init__(self, self_shape: Shape) -> None:
        types = {name: Shape("type") for name in _TYPE_NAMES}
        self.scopes: list[dict[str, Shape]] = [{**types, "self": self_shape, "oldSelf": self_shape}]

    def lookup(self, name: str) -> Shape:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise RuleError(f"compilation failed: undeclared reference to '{name}'")

    def estimate(self, node: Node) -> tuple[int, Shape]:
        op = node.op
        if op == "lit":
            return 0, self._literal(node.name)
        if op == "ident":
            return 1, self.lookup(node.name)
        if op == "select":
            cost, shape = self.estimate(node.args[0])
            return cost + 1, _field(shape, node.name)
        if op == "index":
            (ca, sa), (ck, _) = self.estimate(node.args[0]), self.estimate(node.args[1])
            element = sa.element if sa.kind in ("list", "map") and sa.element else DYN
            return ca + ck + 1, element
        if op in ("list", "map"):
            parts = [self.estimate(arg) for arg in node.args]
            cost = sum(c for c, _ in parts) + (
                LIST_CREATE_COST if op == "list" else MAP_CREATE_COST
            )
            if op == "map":
                values = [s for _, s in parts[1::2]]
                return cost, Shape("map", None, len(values), _join_shapes(values))
            return cost, Shape("list", None, len(parts), _join_shapes([s for _, s in parts]))
        if op == "object":
            raise RuleError("compilation failed: message construction is not supported")
        if op == "cond":
            (cc, _), (ca, sa), (cb, sb) = (self.estimate(a) for a in node.args)
            return cc + max(ca, cb), sa if sa.size >= sb.size else sb
        if op in ("&&", "||"):
            return sum(self.estimate(a)[0] for a in node.args), BOOL
        if op in ("!", "neg"):
            cost, shape = self.estimate(node.args[0])
            return cost + 1, shape if op == "neg" else BOOL
        if op == "call":
            return self._call(node)
        return self._binary(node)

    @staticmethod
    def _literal(text: str) -> Shape:
        if text[:1] in ("'", '"') or text[:2].lower() in ("r'", 'r"'):
            return Shape("string", size=len(text))
        if text in ("true", "false"):
            return BOOL
        if text == "null":
            return Shape("null")
        return Shape("double") if any(c in text for c in ".eE") and "x" not in text else INT

    def _binary(self, node: Node) -> tuple[int, Shape]:
        (ca, sa), (cb, sb) = (self.estimate(a) for a in node.args)
        cost, op = ca + cb, node.op
        if op == "in":
            return cost + (1 + sb.size if sb.kind == "list" else 1), BOOL
        if op in ("==", "!=", "<", "<=", ">", ">="):
            kinds = {sa.kind, sb.kind}
            if len(kinds) == 2 and kinds <= _SCALARS and kinds != {"int", "double"}:
                raise RuleError(
                    f"compilation failed: found no matching overload for '{op}' applied to "
                    f"'({sa.kind}, {sb.kind})'"
                )
            if "string" in (sa.kind, sb.kind) or "bytes" in (sa.kind, sb.kind):
                return cost + _scan(min(sa.size, sb.size) or max(sa.size, sb.size)), BOOL
            if sa.kind in ("list", "map") or sb.kind in ("list", "map"):
                return cost + 1 + max(sa.size, sb.size), BOOL
            return cost + 1, BOOL
        if op == "+" and sa.kind in ("string", "bytes"):
            return cost + _scan(sa.size + sb.size), Shape(sa.kind, None, sa.size + sb.size)
        if op == "+" and sa.kind == "list":
            size = sa.size + sb.size
            return cost + 1 + size, Shape("list", None, size, _join_shapes([sa, sb]))
        return cost + 1, sa if sa.kind in ("int", "double", "duration", "timestamp") else DYN

    def _call(self, node: Node) -> tuple[int, Shape]:
        name, target = node.name, node.target
        if name == "has":
            if len(node.args) != 1 or node.args[0].op != "select":
                raise RuleError("compilation failed: invalid argument to has() macro")
            cost, _ = self.estimate(node.args[0])
            return cost, BOOL
        if name in ("all", "exists", "exists_one", "filter", "map") and target is not None:
            return self._comprehension(node)
        if target is None and name in ("size", "int", "uint", "double", "string", "bool",
                                       "dyn", "duration", "timestamp", "bytes", "type",
                                       "quantity", "isQuantity") and node.args:  # fmt: skip
            target, args = node.args[0], node.args[1:]
        else:
            args = node.args
        cost, shape = self.estimate(target) if target is not None else (0, DYN)
        arg_results = [self.estimate(a) for a in args]
        cost += sum(c for c, _ in arg_results)
        length = shape.size
        if name in ("size", "type", "dyn"):
            return cost + 1, INT if name == "size" else shape
        if name in ("contains", "startsWith", "endsWith", "indexOf", "lastIndexOf"):
            if shape.kind == "list":
                return cost + 1 + length, INT if "ndex" in name else BOOL
            return cost + _scan(length), INT if "ndex" in name else BOOL
        if name == "matches":
            return cost + _scan(length, REGEX_FACTOR), BOOL
        if name in ("lowerAscii", "upperAscii", "trim", "replace", "substring", "charAt"):
            return cost + _scan(length), Shape("string", None, length)
        if name == "split":
            return cost + _scan(length), Shape("list", None, length, Shape("string", None, length))
        if name == "join":
            element = shape.element.size if shape.element else 0
            total = length * (element + 1)
            return cost + _scan(total), Shape("string", None, total)
        if name == "isSorted":
            return cost + 1 + length, BOOL
        if name in ("sum", "min", "max"):
            return cost + 1 + length, shape.element or DYN
        if name in ("string", "int", "uint", "double", "bool", "bytes", "duration", "timestamp"):
            kind = {"uint": "int", "bool": "bool"}.get(name, name)
            return cost + _scan(length), Shape(kind, None, length)
        if name in ("quantity", "isQuantity"):
            return cost + _scan(length), Shape("dyn", None, length) if name == "quantity" else BOOL
        return cost + 1, DYN

    def _comprehension(self, node: Node) -> tuple[int, Shape]:
        assert node.target is not None
        range_cost, range_shape = self.estimate(node.target)
        if not node.args or node.args[0].op != "ident":
            raise RuleError(f"compilation failed: {node.name}() needs a variable name first")
        if len(node.args) not in (2, 3) or (len(node.args) == 3 and node.name != "map"):
            raise RuleError(f"compilation failed: wrong number of arguments to {node.name}()")
        if range_shape.kind not in ("list", "map", "dyn"):
            raise RuleError(f"compilation failed: cannot iterate over {range_shape.kind}")
        count = range_shape.size
        if range_shape.kind == "map":
            key_limit = MAX_REQUEST_BYTES
            variable = Shape("string", None, key_limit)
        else:
            variable = range_shape.element or DYN
        self.scopes.append({node.args[0].name: variable})
        try:
            bodies = [self.estimate(a) for a in node.args[1:]]
        finally:
            self.scopes.pop()
        # Each iteration evaluates the body plus the loop's own condition and step.
        per_item = sum(c for c, _ in bodies) + 2
        cost = range_cost + count * per_item
        if node.name == "filter":
            return cost + count, Shape("list", None, count, variable)
        if node.name == "map":
            return cost + count, Shape("list", None, count, bodies[-1][1])
        return cost, BOOL


def _join_shapes(shapes: list[Shape]) -> Shape | None:
    if not shapes:
        return None
    return max(shapes, key=lambda s: s.size)


def estimate_cost(source: str, schema: JSON, result: str | None = None) -> int:
    """The static max cost of one evaluation of `source` with `self` typed by `schema`.

    Raises RuleError for what the API server's compile step would reject, including (with
    ``result``, e.g. "bool") an expression whose type is known to be something else.
    """
    cost, shape = Estimator(shape_of(schema)).estimate(compile_rule(source).tree)
    if result is not None and shape.kind not in (result, "dyn"):
        raise RuleError(f"compilation failed: must evaluate to {result}, not {shape.kind}")
    return cost


# ---------------------------------------------------------------------------------------------
# Runtime values: JSON to CEL as the API server types them from the schema.


def to_cel(value: Any, schema: JSON | None) -> Any:
    schema = schema or {}
    if value is None:
        return None
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        if schema.get("type") == "number" or not -(2**63) <= value < 2**63:
            return ct.DoubleType(value)  # JSON decoding turns out-of-range integers into floats
        return ct.IntType(value)
    if isinstance(value, float):
        return ct.DoubleType(value)
    if isinstance(value, str):
        return _string_to_cel(value, schema.get("format"))
    if isinstance(value, list):
        items = schema.get("items")
        return ct.ListType([to_cel(item, items) for item in value])
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = ct.MapType()
        for key, item in value.items():
            if key in properties:
                name = escape_property(key)
                if name is not None:
                    out[ct.StringType(name)] = to_cel(item, properties[key])
            else:
                out[ct.StringType(key)] = to_cel(item, extra if isinstance(extra, dict) else None)
        return out
    return celpy.json_to_cel(value)


def _string_to_cel(value: str, fmt: str | None) -> Any:
    try:
        if fmt == "date-time":
            return ct.TimestampType(value)
        if fmt == "duration":
            return ct.DurationType(value)
    except (ValueError, TypeError):
        pass
    return ct.StringType(value)


def is_true(result: Any) -> bool:
    return isinstance(result, ct.BoolType | bool) and bool(result)


def is_error(result: Any) -> bool:
    return isinstance(result, celpy.CELEvalError)


def describe_error(err: BaseException | Any) -> str:
    """A one-line message for a celpy evaluation error."""
    args = getattr(err, "args", ())
    text = str(args[0]) if args else str(err)
    return text.replace("no such member in mapping", "no such key")
