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


class RuleError(Exception):
    """A rule that the API server would refuse to compile."""


# ---------------------------------------------------------------------------------------------
# Compilation (cached per distinct expression).

VARIABLES = ("self", "oldSelf")


@dataclasses.dataclass(frozen=True)
class Compiled:
    source: str
    program: cel.Program
    uses_old_self: bool

    @property
    def ast(self) -> celast.CheckedAst:
        return self.program.ast

    def evaluate(self, variables: dict[str, Any]) -> Any:
        """The result as plain Python; raises cel.CelEvalError."""
        return self.program.evaluate(variables)


def compile_rule(source: Any) -> Compiled:
    """Parse and type-check one expression; raises RuleError with cel-go's message."""
    if not isinstance(source, str):
        raise RuleError(f"must be a string, not {type(source).__name__}")
    return _compile(source)


@cache
def _compile(source: str, internal: bool = False) -> Compiled:
    try:
        program = cel.compile_expression(source, VARIABLES, bindings=internal)
    except cel.CelCompileError as err:
        text = err.one_line()
        if not text.startswith("program instantiation failed"):
            text = f"compilation failed: {text}"
        raise RuleError(text) from err
    return Compiled(source, program, "oldSelf" in program.identifiers())


def with_optional_old_self(source: str, present: bool) -> Compiled:
    """An ``optionalOldSelf`` rule as it runs: ``oldSelf`` is an optional, of the stored value
    (the variable ``oldSelf``) on an update where there is one, else empty."""
    value = "optional.of(oldSelf)" if present else "optional.none()"
    return _compile(f"cel.bind(oldSelf, {value}, (\n{source}\n))", internal=True)


# ---------------------------------------------------------------------------------------------
# Types: what the API server declares for self from the schema (apiserver's SchemaDeclType),
# the part of type checking cel-expr-python cannot do (it sees self as dyn).


@dataclasses.dataclass(frozen=True)
class KType:
    """A CEL type as the API server's checker sees it. Objects are nominal: their ``name`` is
    the path of their schema node (two objects of equal schemas at two places differ)."""

    kind: str  # object map list string bytes int uint double bool duration timestamp null type
    #            dyn optional opaque
    name: str = ""  # object: its type name; opaque: the library type (kubernetes.Quantity, ...)
    params: tuple[KType, ...] = ()  # list: (item,); map: (key, value); optional: (inner,)
    schema: JSON | None = dataclasses.field(default=None, compare=False, hash=False)
    mixed: bool = dataclasses.field(default=False, compare=False, hash=False)

    def __str__(self) -> str:
        if self.kind in ("list", "map"):
            return f"{self.kind}({', '.join(str(p) for p in self.params)})"
        if self.kind == "optional":
            return f"optional_type({self.params[0]})"
        if self.kind in ("object", "opaque"):
            return self.name
        return _TYPE_TEXT.get(self.kind, self.kind)


_TYPE_TEXT = {"null": "null", "duration": "google.protobuf.Duration",
              "timestamp": "google.protobuf.Timestamp"}  # fmt: skip
DYN = KType("dyn")
BOOL, INT, UINT, DOUBLE = KType("bool"), KType("int"), KType("uint"), KType("double")
STRING, BYTES, NULL, TYPE = KType("string"), KType("bytes"), KType("null"), KType("type")
DURATION, TIMESTAMP = KType("duration"), KType("timestamp")
NAMED_FORMAT = KType("opaque", name="kubernetes.NamedFormat")
EXACT_DYN = KType("dyn", name="dyn")  # dyn(x): dyn as a type of its own
_SCALAR_KINDS = ("bool", "double", "duration", "int", "timestamp", "uint")
_NUMBERS = ("int", "uint", "double")
# Type names are values in CEL: `type(self.x) == string`.
_TYPE_IDENTS = ("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type",
                "type", "dyn")  # fmt: skip


def list_of(item: KType) -> KType:
    return KType("list", params=(item,))


def map_of(key: KType, value: KType) -> KType:
    return KType("map", params=(key, value))


def optional_of(inner: KType) -> KType:
    return KType("optional", params=(inner,))


def ktype_of(schema: JSON | None, name: str = "self", resource_root: bool = False) -> KType:
    """The type the API server gives a value of ``schema`` (a schema node named ``name``)."""
    if not schema:
        return DYN
    if schema.get("x-kubernetes-int-or-string"):
        return KType("dyn", schema=schema)
    if resource_root or schema.get("x-kubernetes-embedded-resource"):
        schema = with_object_meta(schema)
    kind = schema.get("type")
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            value = ktype_of(extra, f"{name}.@elem")
            return KType("map", params=(STRING, value), schema=schema)
        return KType("object", name=name, schema=schema)
    if kind == "array":
        items = schema.get("items")
        item = ktype_of(items, f"{name}.@idx") if isinstance(items, dict) else DYN
        return KType("list", params=(item,), schema=schema)
    if kind == "string":
        fmt = schema.get("format")
        if fmt in ("date", "date-time"):
            return KType("timestamp", schema=schema)
        if fmt == "duration":
            return KType("duration", schema=schema)
        return KType("bytes" if fmt == "byte" else "string", schema=schema)
    simple = {"integer": "int", "number": "double", "boolean": "bool"}.get(str(kind))
    return KType(simple, schema=schema) if simple else DYN


def _declared(schema: JSON) -> bool:
    """Whether a property has a CEL type at all (one with no type, neither int-or-string, has
    none and is not a field)."""
    return bool(schema.get("type")) or bool(schema.get("x-kubernetes-int-or-string"))


def field_type(owner: KType, name: str) -> KType | None:
    """The type of the field ``name`` (CEL-escaped) of an object type, or None."""
    properties = (owner.schema or {}).get("properties") or {}
    for prop, sub in properties.items():
        if isinstance(sub, dict) and escape_property(prop) == name and _declared(sub):
            return ktype_of(sub, f"{owner.name}.{name}")
    return None


def _checked_type(text: str) -> KType:
    """A type as cel-expr-python's checker names it (celast.type_name)."""
    text = text.strip()
    simple = {"int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING,
              "bytes": BYTES, "null_type": NULL, "type": TYPE, "dyn": DYN,
              "google.protobuf.Timestamp": TIMESTAMP,
              "google.protobuf.Duration": DURATION}  # fmt: skip
    if text in simple:
        return simple[text]
    name, _, rest = text.partition("(")
    if rest.endswith(")"):
        params = [_checked_type(p) for p in _split_params(rest[:-1])]
        if name == "list" and len(params) == 1:
            return list_of(params[0])
        if name == "map" and len(params) == 2:
            return map_of(*params)
        if name == "optional_type" and len(params) == 1:
            return optional_of(params[0])
        if name == "type":
            return TYPE
        return DYN
    if text.startswith(("kubernetes.", "net.")):
        return KType("opaque", name=text)
    return DYN


def _split_params(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(text[start:index])
            start = index + 1
    out.append(text[start:])
    return [p for p in (part.strip() for part in out) if p]


def unify(a: KType, b: KType) -> KType | None:
    """The type both ``a`` and ``b`` are (dyn is anything), or None."""
    if a.kind == "dyn":
        return b if b.kind != "dyn" else a
    if b.kind == "dyn":
        return a
    if a.kind != b.kind or a.name != b.name or len(a.params) != len(b.params):
        return None
    params = [unify(x, y) for x, y in zip(a.params, b.params, strict=True)]
    if any(p is None for p in params):
        return None
    return dataclasses.replace(a, params=tuple(p for p in params if p is not None))


_NULLABLE = ("null", "object", "timestamp", "duration", "dyn", "optional", "opaque")


def comparable(a: KType, b: KType) -> bool:
    """Whether ``a == b`` type-checks."""
    if a.kind == "null" or b.kind == "null":
        return a.kind in _NULLABLE and b.kind in _NULLABLE
    return unify(a, b) is not None


def _overload_error(function: str, args: list[KType], target: KType | None = None) -> RuleError:
    shown = ", ".join(str(a) for a in args)
    applied = f"{target}.({shown})" if target is not None else f"({shown})"
    return RuleError(
        f"compilation failed: found no matching overload for '{function}' applied to '{applied}'"
    )


# ---------------------------------------------------------------------------------------------
# Sizes: how the API server bounds a value of a schema (its DeclType's MaxElements and
# MinSerializedSize), for the static cost estimate.

U64 = 2**64 - 1
# The fewest JSON bytes of the string formats (apiserver/pkg/cel limits).
_MIN_FORMAT_SIZE = {"date": 12, "date-time": 21, "duration": 3}
_MAX_FORMAT_SIZE = {"date": 12, "date-time": 32, "duration": 32}


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
        if isinstance(schema.get("additionalProperties"), dict):
            return 2
        properties = schema.get("properties") or {}
        size = 2
        for name in schema.get("required") or []:
            prop = properties.get(name)
            if isinstance(prop, dict) and _declared(prop) and "default" not in prop:
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
            return max(int(schema["maxItems"]), 0)
        return (MAX_REQUEST_BYTES - 2) // (min_serialized(schema.get("items") or {}) + 1)
    if "maxProperties" in schema:
        return max(int(schema["maxProperties"]), 0)
    value = schema.get("additionalProperties")
    value = value if isinstance(value, dict) else {}
    # An entry takes at least a 2-byte key, its quotes, a colon and a comma besides the value.
    return (MAX_REQUEST_BYTES - 2) // (min_serialized(value) + 6)


def declared_size(kind: KType) -> int:
    """The MaxElements the API server declares for a value of this type: characters times 4
    for a string with maxLength, items or properties for lists and maps, 0 for the rest."""
    schema = kind.schema
    if schema is None:
        return 0
    if kind.kind in ("list", "map"):
        return max_elements(schema)
    if schema.get("x-kubernetes-int-or-string") or kind.kind in ("string", "bytes"):
        if "maxLength" in schema:
            length = max(int(schema["maxLength"]), 0)
            return length if kind.kind == "bytes" else length * 4
        if kind.kind == "string" and schema.get("enum"):
            return max((len(v.encode()) for v in schema["enum"] if isinstance(v, str)), default=0)
        return MAX_REQUEST_BYTES - 2
    if kind.kind in ("timestamp", "duration"):
        return _MAX_FORMAT_SIZE.get(str(schema.get("format")), 0)
    return 0


def with_object_meta(schema: JSON) -> JSON:
    """A root schema as rules see it: unless it declares apiVersion and kind as strings and
    metadata's name and generateName as strings, the API server gives rules apiVersion, kind,
    metadata.name and metadata.generateName as plain (unbounded) strings."""
    properties = dict(schema.get("properties") or {})
    metadata = properties.get("metadata") or {}
    names = metadata.get("properties") or {}
    declared = (
        all((properties.get(n) or {}).get("type") == "string" for n in ("apiVersion", "kind"))
        and metadata.get("type") == "object"
        and all((names.get(n) or {}).get("type") == "string" for n in ("name", "generateName"))
    )
    if declared:
        return schema
    text = {"type": "string"}
    properties["apiVersion"] = properties["kind"] = text
    properties["metadata"] = {"type": "object", "properties": {"name": text, "generateName": text}}
    return {**schema, "properties": properties}


@dataclasses.dataclass(frozen=True)
class Size:
    lo: int
    hi: int

    def add(self, other: Size) -> Size:
        return Size(min(self.lo + other.lo, U64), min(self.hi + other.hi, U64))

    def mul(self, other: Size) -> Size:
        return Size(min(self.lo * other.lo, U64), min(self.hi * other.hi, U64))

    def union(self, other: Size) -> Size:
        return Size(min(self.lo, other.lo), max(self.hi, other.hi))


UNKNOWN = Size(0, U64)
ONE = Size(1, 1)


def factor(value: int, per_unit: float) -> int:
    """cel-go's multiplyByCostFactor: value times per_unit rounded up, saturating at 2^64 - 1."""
    number = float(value)
    if number > 0 and per_unit > 0 and number > float(U64) / per_unit:
        return U64
    result = math.ceil(number * per_unit)
    return U64 if result >= 2.0**64 else int(result)


def _sat_add(*values: int) -> int:
    return min(sum(values), U64)


def _sat_mul(a: int, b: int) -> int:
    return min(a * b, U64)


@dataclasses.dataclass(frozen=True)
class Entry:
    """The sizes of a list's items or a map's keys and values (cel-go's entry size)."""

    container: str
    key: Size
    value: Size

    def union(self, other: Entry | None) -> Entry | None:
        if other is None:
            return None
        return Entry(self.container, self.key.union(other.key), self.value.union(other.value))


@dataclasses.dataclass
class _Local:
    path: tuple[str, ...] | None
    size: Size | None
    entry: Entry | None
    kind: KType


# ---------------------------------------------------------------------------------------------
# The static check and cost estimate: the API server's checker (for what depends on self's
# type) and cel-go's cost estimator with Kubernetes' library costs, over the checked tree.

STRING_FACTOR = 0.1  # cost per character of scanning a string
REGEX_FACTOR = 0.25  # cost per character of a regular expression
LIST_CREATE_COST = 10
MAP_CREATE_COST = 30
MESSAGE_CREATE_COST = 40
MAX_FORMAT_SIZE = 64
MAX_NAME_FORMAT_REGEX_SIZE = 128
_ACCUMULATORS = ("@result", "__result__")

# Methods by receiver kind (dyn receivers take any): a call on another kind fails to check.
_RECEIVERS: dict[str, tuple[str, ...]] = {
    **{name: ("string",) for name in (
        "startsWith", "endsWith", "contains", "matches", "lowerAscii", "upperAscii", "trim",
        "replace", "split", "substring", "charAt", "find", "findAll", "format")},
    **{name: ("list",) for name in ("isSorted", "sum", "min", "max", "join")},
    "indexOf": ("string", "list"), "lastIndexOf": ("string", "list"),
    "size": ("string", "bytes", "list", "map"),
    **{name: ("timestamp",) for name in (
        "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek")},
    **{name: ("timestamp", "duration") for name in (
        "getHours", "getMinutes", "getSeconds", "getMilliseconds")},
    **{name: ("optional",) for name in ("hasValue", "value", "orValue", "or")},
}  # fmt: skip
# The Kubernetes lists library's aggregates and the item kinds each is declared for.
_COMPARABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
_LIST_AGGREGATES = {"sum": ("int", "uint", "double", "duration"), "min": _COMPARABLE,
                    "max": _COMPARABLE, "isSorted": _COMPARABLE}  # fmt: skip
_STRING_RESULTS = {"lowerAscii", "upperAscii", "trim", "replace", "substring", "charAt",
                   "format", "join", "find"}  # fmt: skip
_K8S_UNIT_COST = {
    "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "format.named", "sign", "asInteger", "isInteger",
    "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "major",
    "minor", "patch", "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath",
    "getQuery",
}  # fmt: skip


class Checker:
    """One rule (or messageExpression) against ``root``, the type of self."""

    def __init__(
        self, root: KType, ast: celast.CheckedAst, optional_old_self: bool = False
    ) -> None:
        self.root = root
        self.ast = ast
        old = optional_of(root) if optional_old_self else root
        self.variables: dict[str, KType] = {"self": root, "oldSelf": old}
        self.sizes: dict[int, Size] = {}
        self.entries: dict[int, Entry] = {}
        self.paths: dict[int, tuple[str, ...]] = {}
        self.kinds: dict[int, KType] = {}
        self.locals: dict[str, list[_Local]] = {}
        self.format_depth = 0  # inside a format() call, literals need not be homogeneous
        # Operators whose left operand's schema gives them list-type semantics (node id ->
        # edit of the checked tree).
        self.list_type_edits: dict[int, celast.CallEdit] = {}

    # --- bookkeeping ------------------------------------------------------------------------

    def kind(self, node: celast.Expr) -> KType:
        return self.kinds.get(node.id) or _checked_type(self.ast.types.get(node.id, "dyn"))

    def _local(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def path(self, node: celast.Expr) -> tuple[str, ...] | None:
        if node.kind == "ident" and (local := self._local(node.name)) is not None:
            return local.path
        return self.paths.get(node.id)

    def lookup_size(self, path: tuple[str, ...] | None) -> Size | None:
        """The API server's size estimate for a path below self (its first element is taken
        for self whatever it names, as the server does)."""
        if not path:
            return None
        current = self.root
        for name in path[1:]:
            if name in ("@items", "@values"):
                if current.kind not in ("list", "map"):
                    return None
                current = current.params[-1]
            elif name == "@keys":
                if current.kind != "map":
                    return None
                return Size(0, 0)
            else:
                found = field_type(current, name) if current.kind == "object" else None
                if found is None:
                    return None
                current = found
        return Size(0, declared_size(current))

    def size(self, node: celast.Expr) -> Size | None:
        """cel-go's computeSize."""
        if node.id in self.sizes:
            return self.sizes[node.id]
        if node.kind == "const":
            if node.name == "string":
                return Size(len(node.value), len(node.value))
            if node.name == "bytes":
                return Size(len(node.value), len(node.value))
            return ONE
        if node.kind in ("list", "map"):
            count = len(node.args) if node.kind == "list" else len(node.args) // 2
            return Size(count, count)
        if (found := self.lookup_size(self.path(node))) is not None:
            self.sizes[node.id] = found
            return found
        if _is_scalar(self.kind(node)):
            return ONE
        if node.kind == "ident" and (local := self._local(node.name)) is not None:
            return local.size
        return None

    def size_or_unknown(self, node: celast.Expr) -> Size:
        found = self.size(node)
        return found if found is not None else UNKNOWN

    def entry(self, node: celast.Expr) -> Entry | None:
        if node.id in self.entries:
            return self.entries[node.id]
        if node.kind == "ident" and (local := self._local(node.name)) is not None:
            return local.entry
        return None

    def element_size(self, container: celast.Expr) -> Size:
        """The size of a list's items as Kubernetes' library estimates it (by path only)."""
        path = self.path(container)
        found = self.lookup_size((*path, "@items")) if path is not None else None
        return found if found is not None else UNKNOWN

    # --- the walk -----------------------------------------------------------------------------

    def cost(self, node: celast.Expr) -> int:
        kind = node.kind
        if kind == "const":
            self.kinds[node.id] = _checked_type(self.ast.types.get(node.id, "dyn"))
            return 0
        if kind == "ident":
            return self._ident(node)
        if kind == "select":
            return self._select(node)
        if kind == "list":
            return self._list(node)
        if kind == "map":
            return self._map(node)
        if kind == "struct":  # only the protobuf well-known types (cel.py refuses the rest)
            values = [self.cost(value) for value in node.args[1::2]]
            return _sat_add(MESSAGE_CREATE_COST, *values)
        if kind == "comprehension":
            return self._comprehension(node)
        if kind == "call":
            return self._call(node)
        return 0

    def _ident(self, node: celast.Expr) -> int:
        local = self._local(node.name)
        if local is not None:
            self.kinds[node.id] = local.kind
            if local.path is not None:
                self.paths[node.id] = local.path
            return 1
        self.paths[node.id] = (node.name,)
        if node.name in self.variables:
            self.kinds[node.id] = self.variables[node.name]
        elif node.name in _TYPE_IDENTS:
            self.kinds[node.id] = TYPE
        return 1

    def _select(self, node: celast.Expr) -> int:
        assert node.target is not None
        operand = node.target
        cost = self.cost(operand)
        owner = self.kind(operand)
        field = self._field(owner, node.name)
        self.kinds[node.id] = BOOL if node.test_only else field
        if node.test_only:
            return cost  # a presence test costs nothing in Kubernetes' environment
        if owner.kind in ("map", "object"):
            cost += 1
        # cel-go appends to the operand's path even when it has none (the size estimator then
        # reads the path as if it started at self).
        self.paths[node.id] = (*(self.path(operand) or ()), node.name)
        return cost

    @classmethod
    def _field(cls, owner: KType, name: str) -> KType:
        if owner.kind == "optional":  # selecting on an optional is an optional selection
            return optional_of(cls._field(owner.params[0], name))
        if owner.kind == "object":
            found = field_type(owner, name)
            if found is None:
                raise RuleError(f"compilation failed: undefined field '{name}'")
            return found
        if owner.kind == "map":
            return owner.params[1]
        if owner.kind == "dyn":
            return DYN
        raise RuleError(f"compilation failed: type '{owner}' does not support field selection")

    def _list(self, node: celast.Expr) -> int:
        cost = LIST_CREATE_COST
        item = Size(U64, 0) if node.args else Size(0, 0)
        element: KType | None = None
        for arg in node.args:
            cost = _sat_add(cost, self.cost(arg))
            item = item.union(self.size_or_unknown(arg))
            element = self._join(element, self.kind(arg), arg)
        self.entries[node.id] = Entry("list", ONE, item)
        # An empty literal's item type is free: no type of its own ("[][0]" is not a string).
        kind = list_of(element if element is not None else EXACT_DYN)
        # Items that are set or map lists (of one schema) keep comparing as such inside it, as
        # the API server's values carry their list type.
        schemas = [self.kind(arg).schema for arg in node.args]
        if schemas and schemas[0] is not None and all(_same_lists(schemas[0], x) for x in schemas):
            kind = dataclasses.replace(kind, schema={"type": "array", "items": schemas[0]})
        self.kinds[node.id] = kind
        return cost

    def _join(self, seen: KType | None, found: KType, node: celast.Expr) -> KType:
        """Homogeneous aggregate literals: every element of one type, dyn included (only a
        type this checker does not know is let through), except inside format()."""
        if found.kind == "optional" or seen is None:
            return found if seen is None else seen
        if self.format_depth == 0 and not equivalent(seen, found):
            raise RuleError(f"compilation failed: expected type '{seen}' but found '{found}'")
        return seen if not _unknown(seen) else found

    def _map(self, node: celast.Expr) -> int:
        cost = MAP_CREATE_COST
        empty = not node.args
        keys = Size(0 if empty else U64, 0)
        values = Size(0 if empty else U64, 0)
        key_type: KType | None = None
        value_type: KType | None = None
        for key, value in zip(node.args[0::2], node.args[1::2], strict=True):
            cost = _sat_add(cost, self.cost(key), self.cost(value))
            keys = keys.union(self.size_or_unknown(key))
            values = values.union(self.size_or_unknown(value))
            key_type = self._join(key_type, self.kind(key), key)
            value_type = self._join(value_type, self.kind(value), value)
        self.entries[node.id] = Entry("map", keys, values)
        self.kinds[node.id] = map_of(key_type or EXACT_DYN, value_type or EXACT_DYN)
        return cost

    def _push(self, name: str, local: _Local) -> None:
        self.locals.setdefault(name, []).append(local)

    def _pop(self, name: str) -> None:
        self.locals[name].pop()

    def _comprehension(self, node: celast.Expr) -> int:
        iter_range, init, condition, step, result = node.parts
        accumulator = node.name
        binding = (
            iter_range.kind == "list"
            and not iter_range.args
            and condition.kind == "const"
            and condition.value is False
            and accumulator not in _ACCUMULATORS
        )
        cost = _sat_add(self.cost(iter_range), self.cost(init))
        if binding:  # cel.bind
            self._push(accumulator, self._as_local(init))
            cost = _sat_add(cost, self.cost(result))
            self._pop(accumulator)
            self._copy_sizes(node, result)
            self.kinds[node.id] = self.kind(result)
            return cost
        range_kind = self.kind(iter_range)
        if range_kind.kind not in ("list", "map", "dyn"):
            raise RuleError(
                f"compilation failed: expression of type '{range_kind}' cannot be range of a "
                "comprehension (must be list, map, or dynamic)"
            )
        accumulated = self._as_local(init)
        if init.kind == "list" and not init.args:
            accumulated.kind = list_of(DYN)
        self._push(accumulator, accumulated)
        variables = node.variables
        for name, local in zip(variables, self._iteration(iter_range, len(variables)),
                               strict=True):  # fmt: skip
            self._push(name, local)
        per_item = _sat_add(self.cost(condition), self.cost(step))
        stepped = self.kind(step)
        if init.kind in ("list", "map") and stepped.kind == init.kind:
            accumulated.kind = stepped  # map() and filter() build a list of the step's items
        for name in variables:
            self._pop(name)
        cost = _sat_add(cost, self.cost(result))
        self._pop(accumulator)
        count = self.size_or_unknown(iter_range)
        cost = _sat_add(cost, _sat_mul(count.hi, per_item))
        if init.kind == "const":
            found = self.size(init)
            if found is not None:
                self.sizes[node.id] = found
        elif init.kind in ("list", "map"):
            self.sizes[node.id] = count
            if (step_entry := self.entry(step)) is not None:
                self.entries[node.id] = step_entry
        self.kinds[node.id] = self.kind(result)
        return cost

    def _as_local(self, value: celast.Expr) -> _Local:
        return _Local(self.path(value), self.size(value), self.entry(value), self.kind(value))

    def _iteration(self, iter_range: celast.Expr, count: int) -> list[_Local]:
        """The iteration variables' paths, sizes and types (one: a list's items or a map's
        keys; two: index or key, then item or value)."""
        entry = self.entry(iter_range)
        container = entry.container if entry is not None else self.kind(iter_range).kind
        path = self.path(iter_range)
        kind = self.kind(iter_range)
        key_type = INT if container == "list" else (kind.params[0] if kind.kind == "map" else DYN)
        value_type = kind.params[-1] if kind.kind in ("list", "map") else DYN

        def extend(part: str) -> tuple[str, ...]:
            return (*(path or ()), part)

        keys = _Local(extend("@indices" if container == "list" else "@keys"),
                      entry.key if entry else None, None, key_type)  # fmt: skip
        values = _Local(extend("@items" if container == "list" else "@values"),
                        entry.value if entry else None, None, value_type)  # fmt: skip
        if count == 2:
            return [keys, values]
        if container == "list":
            return [_Local(extend("@items"), entry.value if entry else None, None, value_type)]
        return [_Local(extend("@keys"), entry.key if entry else None, None, key_type)]

    def _copy_sizes(self, to: celast.Expr, source: celast.Expr) -> None:
        if (found := self.size(source)) is not None:
            self.sizes[to.id] = found
        if (entry := self.entry(source)) is not None:
            self.entries[to.id] = entry

    # --- calls --------------------------------------------------------------------------------

    def _call(self, node: celast.Expr) -> int:
        name = node.name
        if name == "dyn" and node.target is None and len(node.args) == 1:
            cost = _sat_add(1, self.cost(node.args[0]))
            self._copy_sizes(node, node.args[0])
            self.kinds[node.id] = EXACT_DYN
            return cost
        cost = 0
        formatting = name == "format" and node.target is not None
        self.format_depth += formatting
        arg_costs = [self.cost(arg) for arg in node.args]
        if node.target is not None:
            cost = self.cost(node.target)
        self.format_depth -= formatting
        if formatting:
            self._check_format(node)
        kind, call_cost, result_size = self._function(node, arg_costs)
        self.kinds[node.id] = kind
        if name in ("_[_]",) and node.args:
            container = self.kind(node.args[0])
            entry = self.entry(node.args[0])
            if container.kind in ("list", "map"):
                result_size = entry.value if entry is not None else None
                part = "@items" if container.kind == "list" else "@values"
                self.paths[node.id] = (*(self.path(node.args[0]) or ()), part)
        if result_size is None:
            result_size = self.size(node)
        if result_size is not None:
            self.sizes[node.id] = result_size
        return _sat_add(cost, call_cost)

    def _function(self, node: celast.Expr, arg_costs: list[int]) -> tuple[KType, int, Size | None]:
        """(result type, cost of the call with its arguments but not its receiver, result
        size), after checking the argument types cel-expr-python's checker could not."""
        name, args = node.name, node.args
        target = node.target
        kinds = [self.kind(a) for a in args]
        receiver = self.kind(target) if target is not None else None
        checked = _checked_type(self.ast.types.get(node.id, "dyn"))
        args_cost = _sat_add(*arg_costs) if arg_costs else 0
        result = self._result_type(node, name, receiver, kinds, checked)

        # Kubernetes' library costs (apiserver/pkg/cel/library), then cel-go's.
        special = self._library_cost(node, name, receiver, kinds)
        if special is not None:
            call_cost, size = special
            return result, _sat_add(call_cost, args_cost), size
        call_cost, size = self._builtin_cost(node, name, kinds, arg_costs)
        if name not in ("_&&_", "_||_", "_?_:_"):
            call_cost = _sat_add(call_cost, args_cost)
        return result, call_cost, size

    def _library_cost(self, node: celast.Expr, name: str, receiver: KType | None,
                      kinds: list[KType]) -> tuple[int, Size | None] | None:  # fmt: skip
        args, target = node.args, node.target
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target:
            listing = self.size_or_unknown(target)
            if receiver is not None and receiver.kind == "list":
                per_item = 1
                item = receiver.params[0]
                if item.kind in ("string", "bytes"):
                    per_item = _sat_add(1, factor(self.element_size(target).hi, STRING_FACTOR))
                return _sat_mul(listing.hi, per_item), None
            if receiver is not None and receiver.kind == "map":
                return _sat_mul(listing.hi, 1), None
            return factor(listing.hi, STRING_FACTOR), None
        if name == "url" and target is None and len(args) == 1:
            found = self.size_or_unknown(args[0])
            return factor(found.hi, STRING_FACTOR), found
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            found = self.size_or_unknown(target)
            return factor(found.hi, STRING_FACTOR), found
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace_cost(target, args[0], args[1])
        if name == "split" and target is not None:
            found = self.size_or_unknown(target)
            most = found.hi
            if len(args) > 1 and args[1].kind == "const" and args[1].name == "int":
                most = args[1].value % 2**64
            return factor(found.hi, 2 * STRING_FACTOR), Size(0, most)
        if name == "join" and target is not None:
            listing = self.size_or_unknown(target)
            joined = Size(0, 0)
            if receiver is not None and receiver.kind in ("list", "map", "dyn"):
                joined = listing.mul(self.element_size(target))
            if args:
                separators = Size(max(listing.lo - 1, 0), max(listing.hi - 1, 0))
                joined = joined.add(self.size_or_unknown(args[0]).mul(separators))
            return factor(joined.hi, STRING_FACTOR), joined
        if name in ("find", "findAll") and target is not None and args:
            found = self.size_or_unknown(target)
            scan = factor(found.add(ONE).hi, STRING_FACTOR)
            regex = factor(self.size_or_unknown(args[0]).hi, REGEX_FACTOR)
            return _sat_mul(scan, regex), Size(0, found.hi)
        if name in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver",
                    "isSemver") and args:  # fmt: skip
            return factor(self.size_or_unknown(args[0]).hi, STRING_FACTOR), None
        if name == "ip":
            if target is not None:  # cidr.ip(): a field
                return 1, None
            if args:
                return factor(self.size_or_unknown(args[0]).hi, STRING_FACTOR), None
        if name == "ip.isCanonical" and args:
            return factor(self.size_or_unknown(args[0]).hi, 2 * STRING_FACTOR), None
        if name in ("containsIP", "containsCIDR") and args:
            base = 4 if name == "containsIP" else 7
            if kinds and kinds[0].kind == "string":
                base = _sat_add(base, factor(self.size_or_unknown(args[0]).hi, STRING_FACTOR))
            return base, None
        if name == "validate" and args:
            scan = factor(self.size_or_unknown(args[-1]).hi, STRING_FACTOR)
            return factor(scan, MAX_NAME_FORMAT_REGEX_SIZE * REGEX_FACTOR), None
        if name in _K8S_UNIT_COST:
            return 1, None
        if name == "_==_" and len(kinds) == 2 and kinds[0] == kinds[1]:
            shared = kinds[0]
            if shared.kind == "opaque":
                if shared.name in ("net.IP", "net.CIDR", "kubernetes.Quantity",
                                   "kubernetes.Semver"):  # fmt: skip
                    return 1, None
                if shared.name == "kubernetes.NamedFormat":
                    return factor(MAX_FORMAT_SIZE, STRING_FACTOR), None
                if shared.name == "kubernetes.URL":
                    right = self.size(args[1])
                    most = right.hi if right is not None else 1
                    return factor(most, STRING_FACTOR), None
        return None

    def _replace_cost(self, target: celast.Expr, old: celast.Expr,
                      new: celast.Expr) -> tuple[int, Size]:  # fmt: skip
        text = self.size_or_unknown(target)
        replaced = self.size_or_unknown(old)
        inserted = self.size_or_unknown(new)
        if replaced.lo == 0:
            count_hi = text.hi + 1 if text.hi < U64 else text.hi
            kept_hi = text.hi
        elif inserted.hi <= replaced.lo:
            count_hi, kept_hi = 0, text.hi
        else:
            count_hi, kept_hi = math.ceil(text.hi / replaced.lo), 0
        if replaced.hi == 0:
            count_lo = text.lo + 1 if text.lo < U64 else text.lo
            kept_lo = text.lo
        elif replaced.hi <= inserted.lo:
            count_lo, kept_lo = 0, text.lo
        else:
            count_lo, kept_lo = math.ceil(text.lo / replaced.hi), 0
        size = Size(count_lo, count_hi).mul(inserted).add(Size(kept_lo, kept_hi))
        return factor(text.hi, 2 * STRING_FACTOR), size

    def _builtin_cost(
        self, node: celast.Expr, name: str, kinds: list[KType], arg_costs: list[int]
    ) -> tuple[int, Size | None]:
        args, target = node.args, node.target
        if name in ("_&&_", "_||_"):
            return _sat_add(*arg_costs), None
        if name == "_?_:_":
            size = self.size_or_unknown(args[1]).union(self.size_or_unknown(args[2]))
            entries = self.entry(args[1])
            if entries is not None and (merged := entries.union(self.entry(args[2]))):
                self.entries[node.id] = merged
            return _sat_add(arg_costs[0], max(arg_costs[1], arg_costs[2])), size
        if name == "format" and target is not None:
            return factor(self.size_or_unknown(target).hi, STRING_FACTOR), None
        # Of a dyn, every conversion overload is priced and the dearest kept: the scan.
        if name == "bytes" and target is None and kinds and kinds[0].kind in ("string", "dyn"):
            found = self.size_or_unknown(args[0])
            return factor(found.hi, STRING_FACTOR), Size(found.lo, _sat_mul(found.hi, 4))
        if name == "string" and target is None and kinds and kinds[0].kind in ("bytes", "dyn"):
            found = self.size_or_unknown(args[0])
            return factor(found.hi, STRING_FACTOR), Size(found.lo // 4, found.hi)
        if name == "strings.quote" and args:
            found = self.size_or_unknown(args[0])
            return factor(found.hi, STRING_FACTOR), Size(found.lo + 2, _sat_add(
                _sat_mul(found.hi, 2), 2))  # fmt: skip
        if name in ("startsWith", "endsWith") and target is not None and len(args) == 1:
            return factor(self.size_or_unknown(args[0]).hi, STRING_FACTOR), None
        if name == "@in" and len(args) == 2 and kinds[1].kind in ("list", "dyn"):
            return self.size_or_unknown(args[1]).hi, None
        if name == "matches" and target is not None and len(args) == 1:
            scan = factor(self.size_or_unknown(target).add(ONE).hi, STRING_FACTOR)
            regex = factor(self.size_or_unknown(args[0]).hi, REGEX_FACTOR)
            return _sat_mul(scan, regex), None
        if name == "contains" and target is not None and len(args) == 1:
            scan = factor(self.size_or_unknown(target).hi, STRING_FACTOR)
            part = factor(self.size_or_unknown(args[0]).hi, STRING_FACTOR)
            return _sat_mul(scan, part), None
        if name == "_+_" and len(args) == 2:
            # cel-go prices every overload the operands allow and keeps the dearest: a list
            # concatenation costs 1, a string or bytes one scans both.
            left, right = (self.size_or_unknown(a) for a in args)
            total = left.add(right)
            sides = {kinds[0].kind, kinds[1].kind}
            if "list" in sides:
                first = self.entry(args[0])
                if first is not None and (merged := first.union(self.entry(args[1]))):
                    self.entries[node.id] = merged
                return 1, total
            if sides & {"string", "bytes"} or sides == {"dyn"}:
                return factor(total.hi, STRING_FACTOR), total
            return 1, None
        if name in ("_==_", "_!=_") or (
            name in ("_<_", "_<=_", "_>_", "_>=_")
            and {k.kind for k in kinds} & {"string", "bytes", "dyn"}
        ):
            left, right = (self.size_or_unknown(a) for a in args)
            return factor(min(left.hi, right.hi), STRING_FACTOR), None
        return 1, None

    def _check_format(self, node: celast.Expr) -> None:
        """The strings extension's check of a literal format string against a list literal
        of arguments: each clause's argument of a kind it accepts, none left over."""
        target = node.target
        if target is None or target.kind != "const" or target.name != "string":
            return
        if len(node.args) != 1 or node.args[0].kind != "list":
            return
        text, items = str(target.value), node.args[0].args
        position, used = 0, 0
        while position < len(text):
            if text[position] != "%":
                position += 1
                continue
            if text.startswith("%%", position):
                position += 2
                continue
            used += 1
            if position + 1 >= len(text):
                raise _format_error("unexpected end of string")
            if used > len(items):
                raise _format_error(f"index {used - 1} out of range")
            position += 1
            if text[position] == ".":
                digits = re.match(r"\.([0-9]*)", text[position:])
                assert digits is not None
                position += len(digits.group(0))
                problem = (
                    "could not find end of precision specifier" if position >= len(text)
                    else "error while converting precision to integer" if not digits.group(1)
                    else ""
                )  # fmt: skip
                if problem:
                    raise _format_error("could not parse formatting clause: error while parsing "
                                        f"precision: {problem}")  # fmt: skip
            clause = text[position]
            position += 1
            argument = self.kind(items[used - 1])
            if clause == "s":
                if not self._stringable(items[used - 1]):
                    raise _format_error(
                        "error during formatting: string clause can only be used on strings, "
                        "bools, bytes, ints, doubles, maps, lists, types, durations, and "
                        f"timestamps, was given {argument}"
                    )
                continue
            if clause not in _FORMAT_CLAUSES:
                raise _format_error(
                    f'could not parse formatting clause: unrecognized formatting clause "{clause}"'
                )
            label, accepted = _FORMAT_CLAUSES[clause]
            if argument.kind not in (*accepted, "dyn"):
                raise _format_error(f"error during formatting: {label} clause can only be used "
                                    f"on {'/'.join(accepted)}, was given {argument}")  # fmt: skip
        if len(items) > used:
            raise _format_error(f"too many arguments supplied to string.format (expected {used}, "
                                f"got {len(items)})")  # fmt: skip

    def _stringable(self, item: celast.Expr) -> bool:
        if self.kind(item).kind not in _STRINGABLE:
            return False
        if item.kind in ("list", "map"):
            return all(self._stringable(inner) for inner in item.args)
        return True

    # --- result types and the checks behind them ----------------------------------------------

    def _result_type(self, node: celast.Expr, name: str, receiver: KType | None,
                     kinds: list[KType], checked: KType) -> KType:  # fmt: skip
        args = node.args
        if (
            receiver is not None
            and receiver.kind == "optional"
            and name not in (*_RECEIVERS, "optMap", "optFlatMap")
        ):
            raise _overload_error(name, kinds, receiver)
        if name in _RECEIVERS and receiver is not None:
            allowed = _RECEIVERS[name]
            if receiver.kind not in (*allowed, "dyn"):
                raise _overload_error(name, kinds, receiver)
        signatures = (
            _STRING_METHODS.get(name) if receiver is not None and receiver.kind == "string"
            else _GLOBALS.get(name) if receiver is None
            else ((_S,),) if name == "validate" and receiver.kind == "opaque"
            else None
        )  # fmt: skip
        if signatures is not None and not any(_fits(kinds, wanted) for wanted in signatures):
            raise _overload_error(name, kinds, receiver)
        if name == "size" and receiver is None and len(kinds) == 1:
            if kinds[0].kind not in ("string", "bytes", "list", "map", "dyn"):
                raise _overload_error("size", kinds)
            return INT
        if name in ("_==_", "_!=_") and len(kinds) == 2:
            if not comparable(kinds[0], kinds[1]):
                raise _overload_error(name, kinds)
            self._note_list_type(node, name, kinds[0])
            return BOOL
        if name in ("_<_", "_<=_", "_>_", "_>=_") and len(kinds) == 2:
            self._check_ordering(name, kinds)
            return BOOL
        if name == "@in" and len(kinds) == 2:
            container = kinds[1]
            if container.kind in ("list", "map"):
                wanted = container.params[0]
                if not comparable(kinds[0], wanted) or kinds[0].kind == "null":
                    raise _overload_error(name, kinds)
            elif container.kind not in ("dyn",):
                raise _overload_error(name, kinds)
            return BOOL
        if name in ("_+_", "_-_", "_*_", "_/_", "_%_") and len(kinds) == 2:
            return self._arithmetic(node, name, kinds, checked)
        if name in ("indexOf", "lastIndexOf") and receiver is not None:
            if receiver.kind == "list" and kinds and not comparable(kinds[0], receiver.params[0]):
                raise _overload_error(name, kinds, receiver)
            return INT
        if name == "_[_]" and len(kinds) == 2:
            return self._index(name, kinds)
        if name == "_[?_]" and len(kinds) == 2:
            return optional_of(self._index("_[_]", [_optional_inner(kinds[0]), kinds[1]]))
        if name == "_?._" and len(args) == 2 and args[1].kind == "const":
            return optional_of(self._field(_optional_inner(kinds[0]), str(args[1].value)))
        if name == "_?_:_" and len(kinds) == 3:
            joined = unify(kinds[1], kinds[2])
            if joined is None or kinds[0].kind not in ("bool", "dyn"):
                raise _overload_error(name, kinds)
            if not _same_lists(kinds[1].schema, kinds[2].schema):
                return dataclasses.replace(joined, mixed=True)
            return kinds[1] if kinds[1].kind != "dyn" else joined
        if name in ("!_",) and kinds and kinds[0].kind not in ("bool", "dyn"):
            raise _overload_error(name, kinds)
        if name in ("_&&_", "_||_"):
            for operand in kinds:
                if operand.kind not in ("bool", "dyn"):
                    raise RuleError(
                        f"compilation failed: expected type 'bool' but found '{operand}'"
                    )
            return BOOL
        if name == "-_" and kinds and kinds[0].kind not in (*_NUMBERS, "duration", "dyn"):
            raise _overload_error(name, kinds)
        if name == "-_" and kinds:
            return kinds[0]
        if receiver is not None and receiver.kind == "optional":
            inner = receiver.params[0]
            if name == "value":
                return inner
            if name == "orValue" and kinds:
                joined = unify(inner, kinds[0])
                if joined is None:
                    raise _overload_error(name, kinds, receiver)
                return joined
            if name == "hasValue":
                return BOOL
            if name == "or":
                return receiver
        if name == "optional.of" and kinds:
            return optional_of(kinds[0])
        # The format library: declared dyn to the engine, optionals in Kubernetes.
        if name == "validate":
            return optional_of(list_of(STRING))
        if name == "format.named":
            return optional_of(NAMED_FORMAT)
        if name.startswith("format.") and receiver is None:
            return NAMED_FORMAT
        if name in _STRING_RESULTS and receiver is not None:
            return STRING
        if name in _LIST_AGGREGATES and receiver is not None and receiver.kind == "list":
            item = receiver.params[0]
            if item.kind not in (*_LIST_AGGREGATES[name], "dyn"):
                raise _overload_error(name, kinds, receiver)
            return BOOL if name == "isSorted" else item
        if name == "split":
            return list_of(STRING)
        if name == "findAll":
            return list_of(STRING)
        return checked

    @staticmethod
    def _check_ordering(name: str, kinds: list[KType]) -> None:
        left, right = kinds
        if "dyn" in (left.kind, right.kind):
            return
        if left.kind in _NUMBERS and right.kind in _NUMBERS:
            return
        orderable = ("string", "bytes", "bool", "timestamp", "duration")
        if left.kind == right.kind and left.kind in orderable:
            return
        raise _overload_error(name, kinds)

    def _arithmetic(self, node: celast.Expr, name: str, kinds: list[KType],
                    checked: KType) -> KType:  # fmt: skip
        left, right = kinds
        if "dyn" in (left.kind, right.kind):
            known = right if left.kind == "dyn" else left
            if name == "_+_" and known.kind == "list":
                self._note_list_type(node, name, left)
            return checked if checked.kind != "dyn" else DYN
        pair = (left.kind, right.kind)
        if left.kind == right.kind and left.kind in _NUMBERS:
            return left
        if name == "_+_" and left.kind == right.kind and left.kind in ("string", "bytes"):
            return left
        if name == "_+_" and left.kind == right.kind == "list":
            item = unify(left.params[0], right.params[0])
            if item is None:
                raise _overload_error(name, kinds)
            self._note_list_type(node, name, left)
            kept = left.schema if left.schema and left.schema.get(
                "x-kubernetes-list-type") in ("set", "map") else None  # fmt: skip
            return KType("list", params=(item,), schema=kept, mixed=left.mixed)
        if name in ("_+_", "_-_") and pair in (("timestamp", "duration"),
                                                ("duration", "duration")):  # fmt: skip
            return left
        if name == "_+_" and pair == ("duration", "timestamp"):
            return right
        if name == "_-_" and pair == ("timestamp", "timestamp"):
            return DURATION
        raise _overload_error(name, kinds)

    @staticmethod
    def _index(name: str, kinds: list[KType]) -> KType:
        container, key = kinds
        if container.kind == "list":
            if key.kind not in ("int", "uint", "dyn"):
                raise _overload_error(name, kinds)
            return container.params[0]
        if container.kind == "map":
            if not comparable(key, container.params[0]):
                raise _overload_error(name, kinds)
            return container.params[1]
        if container.kind == "dyn":
            return DYN
        raise _overload_error(name, kinds)

    def _note_list_type(self, node: celast.Expr, name: str, left: KType) -> None:
        schema = left.schema
        operator = {"_==_": "==", "_!=_": "!=", "_+_": "+"}.get(name)
        if schema is None or left.mixed or operator not in cel.LIST_TYPE_FUNCTIONS:
            return
        if operator == "+" and schema.get("x-kubernetes-list-type") not in ("set", "map"):
            return
        if operator != "+" and not _has_list_type(schema):
            return
        function, overload = cel.LIST_TYPE_FUNCTIONS[operator]
        index = cel.schema_index(schema)
        self.list_type_edits[node.id] = celast.CallEdit(function, overload, extra=(index,))


# Argument kinds of the string methods and global functions (each tuple one overload) whose
# arguments cel-expr-python's checker sees as dyn when they come from self.
_S, _I, _B = "string", "int", "bool"
_STRING_METHODS: dict[str, tuple[tuple[str, ...], ...]] = {
    **{name: ((_S,),) for name in ("startsWith", "endsWith", "contains", "matches", "find")},
    "findAll": ((_S,), (_S, _I)), "indexOf": ((_S,), (_S, _I)), "lastIndexOf": ((_S,), (_S, _I)),
    "split": ((_S,), (_S, _I)), "replace": ((_S, _S), (_S, _S, _I)),
    "substring": ((_I,), (_I, _I)), "charAt": ((_I,),),
    **{name: ((),) for name in ("lowerAscii", "upperAscii", "trim")},
}  # fmt: skip
_GLOBALS: dict[str, tuple[tuple[str, ...], ...]] = {
    **{name: ((_S,),) for name in ("isURL", "url", "isIP", "ip", "isCIDR", "cidr", "isQuantity",
                                   "quantity", "ip.isCanonical")},
    "isSemver": ((_S,), (_S, _B)), "semver": ((_S,), (_S, _B)),
    "int": tuple((k,) for k in ("int", "uint", "double", "string", "timestamp", "duration")),
    "uint": tuple((k,) for k in ("int", "uint", "double", "string")),
    "double": tuple((k,) for k in ("int", "uint", "double", "string")),
    "bool": ((_B,), (_S,)), "bytes": (("bytes",), (_S,)),
    "duration": (("duration",), (_S,), (_I,)), "timestamp": (("timestamp",), (_S,), (_I,)),
    "string": tuple((k,) for k in ("int", "uint", "double", "bool", "bytes", "string",
                                   "timestamp", "duration", "opaque")),
}  # fmt: skip


def _fits(kinds: list[KType], wanted: tuple[str, ...]) -> bool:
    """Whether arguments of ``kinds`` fit one overload (a dyn fits anything)."""
    return len(kinds) == len(wanted) and all(
        k.kind in (w, "dyn") for k, w in zip(kinds, wanted, strict=True)
    )


def _unknown(kind: KType) -> bool:
    """A dyn this checker knows nothing about (cel-expr-python sees self as dyn), as opposed
    to a declared one (int-or-string, dyn())."""
    return kind.kind == "dyn" and kind.schema is None and kind.name != "dyn"


def equivalent(a: KType, b: KType) -> bool:
    """cel-go's IsEquivalentType, where an unknown type matches anything."""
    if _unknown(a) or _unknown(b):
        return True
    if a.kind != b.kind or a.name != b.name or len(a.params) != len(b.params):
        return False
    return all(equivalent(x, y) for x, y in zip(a.params, b.params, strict=True))


# The format clauses of the strings extension and the kinds each accepts (dyn: any).
_FORMAT_CLAUSES = {
    "d": ("decimal", ("int", "uint")),
    "f": ("fixed-point", ("double", "string")),
    "e": ("scientific", ("double", "string")),
    "b": ("binary", ("int", "uint", "bool")),
    "x": ("hex", ("int", "uint", "string", "bytes")),
    "X": ("hex", ("int", "uint", "string", "bytes")),
    "o": ("octal", ("int", "uint")),
}
_STRINGABLE = ("list", "map", "int", "uint", "double", "bool", "string", "timestamp", "bytes",
               "duration", "type", "null", "dyn")  # fmt: skip


def _format_error(text: str) -> RuleError:
    return RuleError(f"compilation failed: {text}")


def _optional_inner(kind: KType) -> KType:
    return kind.params[0] if kind.kind == "optional" else kind


def _is_scalar(kind: KType) -> bool:
    if kind.kind == "optional":
        return _is_scalar(kind.params[0])
    return kind.kind in _SCALAR_KINDS


def _list_semantics(schema: Any) -> Any:
    """What decides how a value of ``schema`` compares and concatenates: its list types."""
    if not isinstance(schema, dict):
        return None
    return (
        schema.get("type"),
        schema.get("x-kubernetes-list-type"),
        tuple(schema.get("x-kubernetes-list-map-keys") or ()),
        _list_semantics(schema.get("items")),
        _list_semantics(schema.get("additionalProperties")),
        tuple(sorted((k, _list_semantics(v)) for k, v in (schema.get("properties") or {}).items())),
    )


def _same_lists(a: JSON | None, b: JSON | None) -> bool:
    """Whether values of the two schemas compare alike (same list types, same places)."""
    return a is b or (a is not None and b is not None and _list_semantics(a) == _list_semantics(b))


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
    checker = Checker(ktype_of(schema), compiled.ast)
    with contextlib.suppress(RuleError):  # reported where the definition is checked
        checker.cost(compiled.ast.expr)
    program = compiled.program.edited(checker.list_type_edits)
    result = dataclasses.replace(compiled, program=program)
    _FOR_SCHEMA[key] = (schema, result)  # the schema is held, so its id is not reused
    if len(_FOR_SCHEMA) > 4096:  # definitions reloaded by a long simulate stay bounded
        _FOR_SCHEMA.popitem(last=False)
    return result


_FOR_SCHEMA: collections.OrderedDict[tuple[str, int], tuple[JSON, Compiled]] = (
    collections.OrderedDict()
)


def estimate_cost(
    source: str, schema: JSON, result: str | None = None, optional_old_self: bool = False
) -> int:
    """The static max cost of one evaluation of `source` with `self` typed by `schema`.

    Raises RuleError for what the API server's compile step would reject, including (with
    ``result``, e.g. "bool") an expression of another type.
    """
    compiled = compile_rule(source)
    checker = Checker(ktype_of(schema), compiled.ast, optional_old_self)
    cost = checker.cost(compiled.ast.expr)
    kind = checker.kind(compiled.ast.expr)
    # A declared dyn (int-or-string, dyn(), an empty literal's item) is not a bool or a string
    # to the API server; a type this checker does not know is given the benefit of the doubt.
    if result is not None and kind.kind != result and not _unknown(kind):
        if result == "bool":
            raise RuleError("cel expression must evaluate to a bool")
        raise RuleError(f"messageExpression must evaluate to a {result}")
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


# Go's time.ParseDuration: a sign, then numbers each with a unit.
_GO_DURATION = re.compile(r"^[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_GO_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_NANOS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9,
          "m": 60 * 10**9, "h": 3600 * 10**9}  # fmt: skip
# strfmt's lenient form, tried when Go's fails: "<digits> <unit>" anywhere, unit by name.
_LENIENT_PART = re.compile(r"([0-9]+)\s*([A-Za-zµ]+)")
_LENIENT_UNITS = (
    (("ns", "nano"), 1), (("us", "µs", "micro"), 10**3), (("ms", "milli"), 10**6),
    (("s", "sec"), 10**9), (("m", "min"), 60 * 10**9), (("h", "hr", "hour"), 3600 * 10**9),
    (("d", "day"), 86400 * 10**9), (("w", "wk", "week"), 7 * 86400 * 10**9),
)  # fmt: skip


def parse_duration(text: str) -> int | None:
    """Nanoseconds of a ``format: duration`` string as the API server reads it (kube-openapi
    strfmt.ParseDuration: Go's time.ParseDuration, else "<n> <unit>" parts with days and
    weeks); None when it is not a duration."""
    if text in ("0", "+0", "-0"):
        return 0
    if _GO_DURATION.match(text):
        total = 0
        for number, unit in _GO_DURATION_PART.findall(text):
            whole, _, fraction = number.partition(".")
            nanos = int(whole or 0) * _NANOS[unit]
            if fraction:
                nanos += int(fraction) * _NANOS[unit] // 10 ** len(fraction)
            total += nanos
        return -total if text.startswith("-") else total
    total, found = 0, False
    for number, written in _LENIENT_PART.findall(text):
        unit = written.strip().lower()
        for variants, nanos in _LENIENT_UNITS:
            for index, variant in enumerate(variants):
                last = index == len(variants) - 1
                if (last and unit.startswith(variant)) or variant == unit:
                    found = True
                    total += int(number) * nanos
    return total if found else None


_GO_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_RFC3339 = re.compile(
    r"^([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?$"
)


def parse_date(text: str) -> datetime.date | None:
    """A ``format: date`` string (Go's "2006-01-02"), or None."""
    if not _GO_DATE.match(text):
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        return None


def _string_to_cel(value: str, fmt: str | None) -> Any:
    """Strings of the date, date-time and duration formats are timestamps and durations in
    CEL (as protobuf messages, the form cel-expr-python takes them in)."""
    if fmt == "date":
        day = parse_date(value)
        if day is None:
            return value  # not a valid date: the schema's format check reports it
        stamp = timestamp_pb2.Timestamp()
        stamp.FromJsonString(f"{day.isoformat()}T00:00:00Z")
        return stamp
    if fmt == "date-time":
        # strfmt.ParseDateTime: RFC 3339, or a local time without a zone (UTC).
        match = _RFC3339.match(value)
        if match is None or parse_date(match.group(1)) is None:
            return value
        stamp = timestamp_pb2.Timestamp()
        try:
            fraction = (match.group(5) or "")[:10]
            stamp.FromJsonString(value[: match.start(5) if match.group(5) else match.end(4)]
                                 + fraction + (match.group(6) or "Z"))  # fmt: skip
        except (ValueError, OverflowError):
            return value
        return stamp
    if fmt == "duration":
        nanos = parse_duration(value)
        if nanos is None:
            return value
        span = duration_pb2.Duration()
        span.FromNanoseconds(nanos)
        return span
    return value


def describe_error(err: BaseException) -> str:
    """A one-line message for an evaluation error."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__
