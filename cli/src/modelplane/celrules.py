"""CEL for `x-kubernetes-validations`: compile, estimate cost, evaluate.

Compilation and evaluation are the project's one CEL engine (``modelplane_common.cel``:
cel-cpp with the Kubernetes environment). What stays here is what the API server adds around
CEL for CRDs: the schema-typed static check (fields the schema does not declare), the static
cost estimate over the checked syntax tree, and JSON-to-CEL value conversion. See
design/validation.md and design/cel.md.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import math
import re
from functools import cache
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2
from modelplane_common import cel, celast
from modelplane_common.cel import escape_property

JSON = dict[str, Any]

# The API server's limits (k8s.io/apiextensions-apiserver validation and apiserver/pkg/apis/cel).
STATIC_COST_LIMIT = 10_000_000  # per expression, times how often it can be evaluated
STATIC_CRD_COST_LIMIT = 100_000_000  # sum over every expression of one schema
MAX_REQUEST_BYTES = 3 * 1024 * 1024  # bounds every list, map and string without a max*

STRING_TRAVERSAL_FACTOR = 0.1  # cost per character of scanning a string
REGEX_FACTOR = 0.25  # cost per character matched by a regular expression
LIST_CREATE_COST = 10
MAP_CREATE_COST = 30


class RuleError(Exception):
    """A rule that the API server would refuse to compile."""


# ---------------------------------------------------------------------------------------------
# The checked tree as the estimator reads it: one node per operator; macros are expanded
# into comprehensions (`loop`), as the API server's cost estimator sees them.


@dataclasses.dataclass(frozen=True)
class Node:
    op: str  # lit, ident, select, call, index, list, map, cond, loop, or a CEL operator
    args: tuple[Node, ...] = ()
    name: str = ""  # identifier, field, function name or literal text
    target: Node | None = None  # the receiver of a method call
    id: int = 0  # the checked tree's node id, for the operators list types redefine


_OPERATORS = {
    "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">=", "_==_": "==", "_!=_": "!=",
    "@in": "in", "_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%",
    "_&&_": "&&", "_||_": "||", "!_": "!", "-_": "neg", "_?_:_": "cond", "_[_]": "index",
    "_[?_]": "index",
}  # fmt: skip


def _literal_text(expr: celast.Expr) -> str:
    if expr.name in ("string", "bytes"):
        # Quoted as written, unescaped: the estimator sizes a literal by its content.
        return f"'{expr.value}'" if expr.name == "string" else f"'{expr.value!r}'"
    if expr.name == "bool":
        return "true" if expr.value else "false"
    if expr.name == "null":
        return "null"
    return repr(float(expr.value)) if expr.name == "double" else str(expr.value)


class _Converter:
    def __init__(self, ast: celast.CheckedAst) -> None:
        self.ast = ast

    def node(self, expr: celast.Expr) -> Node:
        kind = expr.kind
        if kind == "const":
            return Node("lit", name=_literal_text(expr))
        if kind == "ident":
            return Node("ident", name=expr.name)
        if kind == "select":
            assert expr.target is not None
            select = Node("select", (self.node(expr.target),), expr.name)
            return Node("call", (select,), "has") if expr.test_only else select
        if kind in ("list", "map"):
            return Node(kind, tuple(self.node(a) for a in expr.args))
        if kind == "comprehension":
            names = ",".join((expr.name, *expr.variables))  # accumulator, then iteration vars
            return Node("loop", tuple(self.node(p) for p in expr.parts), names)
        args = tuple(self.node(a) for a in expr.args)
        if expr.name == "_?._":  # self.?field
            return Node("select", (args[0],), str(expr.args[1].value))
        if expr.name in _OPERATORS:
            return Node(_OPERATORS[expr.name], args, id=expr.id)
        target = self.node(expr.target) if expr.target is not None else None
        return Node("call", args, expr.name, target)


# ---------------------------------------------------------------------------------------------
# Compilation (cached per distinct expression).

VARIABLES = ("self", "oldSelf")


@dataclasses.dataclass(frozen=True)
class Compiled:
    source: str
    program: cel.Program
    tree: Node
    uses_old_self: bool

    def evaluate(self, variables: dict[str, Any]) -> Any:
        """The result as plain Python; raises cel.CelEvalError."""
        return self.program.evaluate(variables)


def compile_rule(source: Any) -> Compiled:
    """Parse and type-check one expression; raises RuleError with cel-go's message."""
    if not isinstance(source, str):
        raise RuleError(f"must be a string, not {type(source).__name__}")
    return _compile(source)


@cache
def _compile(source: str) -> Compiled:
    try:
        program = cel.compile_expression(source, VARIABLES)
    except cel.CelCompileError as err:
        raise RuleError(f"compilation failed: {err.one_line()}") from err
    tree = _Converter(program.ast).node(program.ast.expr)
    return Compiled(source, program, tree, "oldSelf" in program.identifiers())


# ---------------------------------------------------------------------------------------------
# Shapes: what the static check and cost estimate know about a value from the schema.


@dataclasses.dataclass(frozen=True)
class Shape:
    kind: str  # object, map, list, string, int, double, bool, bytes, timestamp, duration, dyn
    schema: JSON | None = None
    size: int = 0  # max characters (string) or elements (list, map)
    element: Shape | None = None  # list items or map values
    mixed: bool = False  # from branches of different schemas (list-type semantics unknown)


DYN = Shape("dyn", size=MAX_REQUEST_BYTES)
_SCALARS = {"string", "int", "double", "bool", "bytes"}
# Kubernetes library functions that parse a string (global calls).
_PARSERS = (
    "quantity", "isQuantity", "semver", "isSemver", "url", "isURL", "ip", "isIP", "cidr",
    "isCIDR",
)  # fmt: skip
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
_OPTIONAL_METHODS = ("hasValue", "value", "orValue", "or", "optMap", "optFlatMap", "type", "dyn")
INT = Shape("int")


# The fewest JSON bytes of a few string formats, as apiextensions-apiserver sizes them.
_MIN_FORMAT_SIZE = {"date": 12, "date-time": 22, "duration": 4}


def min_serialized(schema: JSON) -> int:
    """The fewest bytes a value of this schema takes in JSON, as the API server estimates:
    an object is {} plus every required property without a default."""
    if schema.get("x-kubernetes-int-or-string"):
        return 1
    kind = schema.get("type")
    if kind == "string":
        return _MIN_FORMAT_SIZE.get(schema.get("format", ""), 2)
    if kind == "boolean":
        return 4
    if kind == "array":
        return 2
    if kind == "object":
        properties = schema.get("properties") or {}
        size = 2
        for name in schema.get("required") or []:
            prop = properties.get(name)
            if isinstance(prop, dict) and "default" not in prop:
                size += len(name) + min_serialized(prop) + 4
        return size
    return 1


def max_cardinality(schema: JSON) -> int:
    """How many values of this schema fit in one request (for a node under unbounded lists)."""
    return MAX_REQUEST_BYTES // (min_serialized(schema) + 1)


def is_bounded(schema: JSON) -> bool:
    """Whether a list or map declares its size bound."""
    return "maxItems" in schema if schema.get("type") == "array" else "maxProperties" in schema


def max_elements(schema: JSON) -> int:
    """How many items a list or map may hold: its bound, else what fits in a request."""
    if schema.get("type") == "array":
        if "maxItems" in schema:
            return int(schema["maxItems"])
        return (MAX_REQUEST_BYTES - 2) // (min_serialized(schema.get("items") or {}) + 1)
    if "maxProperties" in schema:
        return int(schema["maxProperties"])
    value = schema.get("additionalProperties")
    value = value if isinstance(value, dict) else {}
    # An entry takes at least a 2-byte key, its quotes, a colon and a comma besides the value.
    return (MAX_REQUEST_BYTES - 2) // (min_serialized(value) + 6)


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
        if fmt in ("date-time", "date"):
            return Shape("timestamp", schema)
        if fmt == "duration":
            return Shape("duration", schema)
        return Shape("bytes" if fmt == "byte" else "string", schema, max_string_length(schema))
    return Shape({"integer": "int", "number": "double", "boolean": "bool"}.get(kind, "dyn"), schema)


def with_object_meta(schema: JSON) -> JSON:
    """A root schema as rules see it: unless its metadata declares name and generateName as
    strings, the API server gives rules apiVersion, kind, metadata.name and
    metadata.generateName as plain (unbounded) strings, whatever the schema says of them."""
    properties = dict(schema.get("properties") or {})
    metadata = (properties.get("metadata") or {}).get("properties") or {}
    if all((metadata.get(n) or {}).get("type") == "string" for n in ("name", "generateName")):
        return schema
    text = {"type": "string"}
    properties["apiVersion"] = properties["kind"] = text
    properties["metadata"] = {"type": "object", "properties": {"name": text, "generateName": text}}
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
        # Operators whose left operand's schema gives them list-type semantics (node id ->
        # edit of the checked tree).
        self.list_type_edits: dict[int, celast.CallEdit] = {}

    def _note_list_type(self, node: Node, left: Shape) -> None:
        schema = left.schema
        if schema is None or left.mixed or node.op not in cel.LIST_TYPE_FUNCTIONS:
            return
        if node.op == "+" and schema.get("x-kubernetes-list-type") not in ("set", "map"):
            return
        if node.op != "+" and not _has_list_type(schema):
            return
        function, overload = cel.LIST_TYPE_FUNCTIONS[node.op]
        index = cel.schema_index(schema)
        self.list_type_edits[node.id] = celast.CallEdit(function, overload, extra=(index,))

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
            chosen = sa if sa.size >= sb.size else sb
            if sa.schema is not sb.schema:
                chosen = dataclasses.replace(chosen, mixed=True)
            return cc + max(ca, cb), chosen
        if op in ("&&", "||"):
            return sum(self.estimate(a)[0] for a in node.args), BOOL
        if op in ("!", "neg"):
            cost, shape = self.estimate(node.args[0])
            return cost + 1, shape if op == "neg" else BOOL
        if op == "call":
            return self._call(node)
        if op == "loop":
            return self._loop(node)
        if op == "index":
            return self._index(node)
        return self._binary(node)

    @staticmethod
    def _literal(text: str) -> Shape:
        if text[:1] == "'":
            return Shape("string", size=len(text) - 2)
        if text in ("true", "false"):
            return BOOL
        if text == "null":
            return Shape("null")
        return Shape("double") if any(c in text for c in ".eE") and "x" not in text else INT

    def _binary(self, node: Node) -> tuple[int, Shape]:
        (ca, sa), (cb, sb) = (self.estimate(a) for a in node.args)
        cost, op = ca + cb, node.op
        self._note_list_type(node, sa)
        if op == "in":
            return cost + (1 + sb.size if sb.kind == "list" else 1), BOOL
        if op in ("==", "!=", "<", "<=", ">", ">="):
            kinds = {sa.kind, sb.kind}
            # Orderings compare int and double; equality is declared per type (cel-go).
            numeric = kinds == {"int", "double"} and op not in ("==", "!=")
            if len(kinds) == 2 and kinds <= _SCALARS and not numeric:
                raise RuleError(
                    f"compilation failed: found no matching overload for '_{op}_' applied to "
                    f"'({sa.kind}, {sb.kind})'"
                )
            if "string" in (sa.kind, sb.kind) or "bytes" in (sa.kind, sb.kind):
                return cost + _scan(min(sa.size, sb.size) or max(sa.size, sb.size)), BOOL
            if sa.kind in ("list", "map") or sb.kind in ("list", "map"):
                return cost + 1 + max(sa.size, sb.size), BOOL
            return cost + 1, BOOL
        kinds = {sa.kind, sb.kind}
        if len(kinds) == 2 and kinds <= _SCALARS and kinds != {"timestamp", "duration"}:
            # CEL has no arithmetic across types (not even int with double).
            raise RuleError(
                f"compilation failed: found no matching overload for '_{op}_' applied to "
                f"'({sa.kind}, {sb.kind})'"
            )
        if op == "+" and sa.kind in ("string", "bytes"):
            return cost + _scan(sa.size + sb.size), Shape(sa.kind, None, sa.size + sb.size)
        if op == "+" and sa.kind == "list":
            # cel-go concatenates lists lazily: constant cost. A set or map list's union or
            # merge is still one (Kubernetes keeps the left operand's type).
            size = sa.size + sb.size
            element = _join_shapes([e for e in (sa.element, sb.element) if e is not None])
            kept = sa.schema if sa.schema and sa.schema.get("x-kubernetes-list-type") in (
                "set", "map") else None  # fmt: skip
            return cost + 1, Shape("list", kept, size, element)
        return cost + 1, sa if sa.kind in ("int", "double", "duration", "timestamp") else DYN

    def _call(self, node: Node) -> tuple[int, Shape]:
        name, target = node.name, node.target
        if name == "has":
            if len(node.args) != 1 or node.args[0].op != "select":
                raise RuleError("compilation failed: invalid argument to has() macro")
            cost, _ = self.estimate(node.args[0])
            return cost, BOOL
        if target is None and name in ("size", "int", "uint", "double", "string", "bool",
                                       "dyn", "duration", "timestamp", "bytes", "type",
                                       *_PARSERS) and node.args:  # fmt: skip
            target, args = node.args[0], node.args[1:]
        else:
            args = node.args
        cost, shape = self.estimate(target) if target is not None else (0, DYN)
        arg_results = [self.estimate(a) for a in args]
        cost += sum(c for c, _ in arg_results)
        length = shape.size
        if shape.kind == "optional" and name not in _OPTIONAL_METHODS:
            # The format library's results are declared dyn to the engine; typed here.
            raise RuleError(
                f"compilation failed: found no matching overload for '{name}' applied to "
                "'(optional_type)'"
            )
        if name in ("size", "type", "dyn"):
            return cost + 1, INT if name == "size" else shape
        if name in ("contains", "startsWith", "endsWith", "indexOf", "lastIndexOf"):
            if shape.kind == "list":
                return cost + 1 + length, INT if "ndex" in name else BOOL
            return cost + _scan(length), INT if "ndex" in name else BOOL
        if name in ("matches", "find", "findAll"):
            # cel-go: scanning the string times the regex's size (a guess at its states).
            regex = arg_results[0][1].size if arg_results else length
            found = BOOL if name == "matches" else Shape("list", None, length, shape)
            return cost + _scan(length) * math.ceil(regex * REGEX_FACTOR), found
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
            # cel-go: only string<->bytes conversions scan their input; the rest cost 1.
            copies = (name, shape.kind) in (("string", "bytes"), ("bytes", "string"))
            return cost + (_scan(length) if copies else 1), Shape(kind, None, length)
        if name in ("validate", "format.named"):  # the format library returns optionals
            checked = arg_results[-1][1].size if arg_results else 0
            return cost + _scan(checked), Shape("optional")
        if name in _PARSERS:
            # The Kubernetes libraries parse their string argument: one scan.
            return cost + _scan(length), BOOL if name.startswith("is") else Shape("dyn")
        return cost + 1, DYN

    def _index(self, node: Node) -> tuple[int, Shape]:
        (ca, sa), (ck, _) = self.estimate(node.args[0]), self.estimate(node.args[1])
        element = sa.element if sa.kind in ("list", "map") and sa.element else DYN
        return ca + ck + 1, element

    def _loop(self, node: Node) -> tuple[int, Shape]:
        """A comprehension (every macro expands to one), costed as cel-go does: the range,
        the accumulator's initial value, then per element the loop condition and step, then
        the result. An accumulator that starts as a list (map, filter) holds at most one
        item per element, so nested iteration over its result multiplies."""
        iter_range, init, condition, step, result = node.args
        accumulator, *variables = node.name.split(",")
        range_cost, range_shape = self.estimate(iter_range)
        if range_shape.kind not in ("list", "map", "dyn"):
            raise RuleError(
                f"compilation failed: expression of type '{range_shape.kind}' cannot be range "
                "of a comprehension (must be list, map, or dynamic)"
            )
        init_cost, init_shape = self.estimate(init)
        count = range_shape.size
        element = range_shape.element or DYN
        if range_shape.kind == "map":
            # The API server sizes map keys as plain strings with no bound it knows: 0.
            bound = [Shape("string", None, 0), element]
        else:
            bound = [INT, element] if len(variables) == 2 else [element]
        scope = dict(zip(variables, bound, strict=False))
        last = scope.get(variables[-1], DYN) if variables else DYN
        binding = iter_range.op == "list" and not iter_range.args  # cel.bind(x, value, ...)
        scope[accumulator] = (
            Shape("list", None, count, last)
            if init_shape.kind == "list" and not binding
            else init_shape
        )
        self.scopes.append(scope)
        try:
            per_item = self.estimate(condition)[0] + self.estimate(step)[0]
            result_cost, result_shape = self.estimate(result)
        finally:
            self.scopes.pop()
        return range_cost + init_cost + count * per_item + result_cost, result_shape


def _has_list_type(schema: JSON) -> bool:
    """Whether a value of ``schema`` holds a set or map list anywhere (its equality differs)."""
    if schema.get("x-kubernetes-list-type") in ("set", "map"):
        return True
    subs = [schema.get("items"), schema.get("additionalProperties")]
    subs += list((schema.get("properties") or {}).values())
    return any(isinstance(sub, dict) and _has_list_type(sub) for sub in subs)


def for_schema(compiled: Compiled, schema: JSON) -> Compiled:
    """``compiled`` as it runs against values of ``schema``: set and map lists get their
    Kubernetes equality and concatenation (see cel.typed_equal)."""
    key = (compiled.source, id(schema))
    found = _FOR_SCHEMA.get(key)
    if found is not None and found[0] is schema:
        _FOR_SCHEMA.move_to_end(key)
        return found[1]
    estimator = Estimator(shape_of(schema))
    with contextlib.suppress(RuleError):  # reported where the definition is checked
        estimator.estimate(compiled.tree)
    program = compiled.program.edited(estimator.list_type_edits)
    result = dataclasses.replace(compiled, program=program)
    _FOR_SCHEMA[key] = (schema, result)  # the schema is held, so its id is not reused
    if len(_FOR_SCHEMA) > 4096:  # definitions reloaded by a long simulate stay bounded
        _FOR_SCHEMA.popitem(last=False)
    return result


_FOR_SCHEMA: collections.OrderedDict[tuple[str, int], tuple[JSON, Compiled]] = (
    collections.OrderedDict()
)


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
    """A JSON value as the API server hands it to CEL, typed from its schema."""
    schema = schema or {}
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if schema.get("type") == "number" or not -(2**63) <= value < 2**63:
            return float(value)  # JSON decoding turns out-of-range integers into floats
        return value
    if isinstance(value, str):
        return _string_to_cel(value, schema.get("format"))
    if isinstance(value, list):
        items = schema.get("items")
        return [to_cel(item, items) for item in value]
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in properties:
                name = escape_property(key)
                if name is not None:
                    out[name] = to_cel(item, properties[key])
            else:
                out[key] = to_cel(item, extra if isinstance(extra, dict) else None)
        return out
    return value


_DURATION = re.compile(r"^(-?)((?:[0-9]+(?:\.[0-9]*)?(?:ns|us|µs|ms|s|m|h))+)$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def _string_to_cel(value: str, fmt: str | None) -> Any:
    """Strings of the date, date-time and duration formats are timestamps and durations in
    CEL (as protobuf messages, the form cel-expr-python takes them in)."""
    if fmt in ("date-time", "date"):
        stamp = timestamp_pb2.Timestamp()
        try:  # RFC 3339 with nanoseconds; a date is its midnight UTC
            stamp.FromJsonString(value + "T00:00:00Z" if fmt == "date" else value)
        except (ValueError, OverflowError):
            return value  # not a valid instant: the schema's format check reports it
        return stamp
    if fmt == "duration" and (match := _DURATION.match(value)):
        seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(match.group(2)))
        span = duration_pb2.Duration()
        span.FromTimedelta(datetime.timedelta(seconds=-seconds if match.group(1) else seconds))
        return span
    return value


def describe_error(err: BaseException) -> str:
    """A one-line message for an evaluation error."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__
