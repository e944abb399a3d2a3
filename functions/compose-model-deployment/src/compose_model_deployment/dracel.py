"""The Kubernetes DRA device-selector CEL dialect on top of ``celpy`` (spec §3.4).

One variable, ``device`` (``driver``, ``attributes[domain].name``, ``capacity[domain].name``),
the CEL standard library, and the Kubernetes ``quantity()`` and ``semver()`` libraries with
their member functions. Selectors are copied verbatim into DRA claims on the workload cluster,
so spellings Kubernetes would not compile (a member-only function called globally, ``has()``
on an index, a function the API server does not know) are rejected here at compile time
rather than accepted and left to fail on the remote cluster.

celpy costs about a millisecond per evaluation, so each distinct expression is compiled once
per process and each (expression, device) result is memoised by the device's content.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import celpy
import lark
import semver as semverlib
from celpy import celtypes

from compose_model_deployment.quantity import Quantity, QuantityError

_MAX_CACHE = 100_000
_MAX_ERROR_LENGTH = 300


class SelectorCompileError(ValueError):
    """A selector Kubernetes would not compile; the message is short and user-facing."""


class SemVer:
    """A semantic version as DRA CEL sees it: compared by precedence, build metadata ignored."""

    __slots__ = ("version",)

    def __init__(self, version: semverlib.Version) -> None:
        self.version = version

    @classmethod
    def parse(cls, text: str, lenient: bool = False) -> SemVer:
        if not isinstance(text, str):
            raise TypeError("semver() takes a string")
        source = _tolerant(text) if lenient else text
        try:
            return cls(semverlib.Version.parse(source))
        except (ValueError, TypeError) as err:
            raise ValueError(f"invalid semantic version {text!r}") from err

    @classmethod
    def is_valid(cls, text: str, lenient: bool = False) -> bool:
        try:
            cls.parse(text, lenient)
        except (ValueError, TypeError):
            return False
        return True

    def compare(self, other: SemVer) -> int:
        return self.version.compare(other.version)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SemVer):
            # A version never equals a string: comparing them is an error, never a match.
            raise TypeError(f"no such overload: semver == {type(other).__name__}")
        return self.compare(other) == 0

    def __hash__(self) -> int:
        return hash(self.version.finalize_version()) ^ hash(self.version.prerelease)

    def __repr__(self) -> str:
        return f"SemVer({self.version})"


def _tolerant(text: str) -> str:
    """The lenient form Kubernetes accepts with ``semver(s, true)``.

    Strips surrounding space and a leading ``v``, strips leading zeros of each part, and fills
    a missing minor or patch with 0; a shortened version may not carry pre-release or build.
    """
    text = text.strip().removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            trimmed = part.lstrip("0")
            parts[i] = trimmed if trimmed[:1].isdigit() else "0" + trimmed
    if len(parts) < 3:
        if any(mark in parts[-1] for mark in "+-"):
            raise ValueError("a shortened version cannot carry pre-release or build metadata")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


# --- functions -------------------------------------------------------------------------


def _quantity(text: Any) -> Quantity:
    if not isinstance(text, str):
        raise TypeError("quantity() takes a string")
    try:
        return Quantity.parse(text)
    except QuantityError as err:
        raise ValueError(str(err)) from err


def _is_quantity(text: Any) -> celtypes.BoolType:
    if not isinstance(text, str):
        raise TypeError("isQuantity() takes a string")
    return celtypes.BoolType(Quantity.is_valid(text))


def _semver(text: Any, lenient: Any = False) -> SemVer:
    return SemVer.parse(text, bool(_bool_arg(lenient)))


def _is_semver(text: Any, lenient: Any = False) -> celtypes.BoolType:
    if not isinstance(text, str):
        raise TypeError("isSemver() takes a string")
    return celtypes.BoolType(SemVer.is_valid(text, bool(_bool_arg(lenient))))


def _bool_arg(value: Any) -> bool:
    if not isinstance(value, bool | celtypes.BoolType):
        raise TypeError("expected a bool")
    return bool(value)


def _same_kind(left: Any, right: Any) -> Quantity | SemVer:
    if isinstance(left, Quantity) and isinstance(right, Quantity):
        return left
    if isinstance(left, SemVer) and isinstance(right, SemVer):
        return left
    raise TypeError(f"no such overload for {type(left).__name__}, {type(right).__name__}")


def _compare_to(left: Any, right: Any) -> celtypes.IntType:
    return celtypes.IntType(_same_kind(left, right).compare(right))


def _is_greater_than(left: Any, right: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_same_kind(left, right).compare(right) > 0)


def _is_less_than(left: Any, right: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_same_kind(left, right).compare(right) < 0)


def _quantity_target(value: Any) -> Quantity:
    if not isinstance(value, Quantity):
        raise TypeError(f"no such overload for {type(value).__name__}")
    return value


def _operand(value: Any) -> Quantity | int:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, int) and not isinstance(value, bool | celtypes.BoolType):
        return int(value)
    raise TypeError(f"no such overload for {type(value).__name__}")


def _add(left: Any, right: Any) -> Quantity:
    return _quantity_target(left).add(_operand(right))


def _sub(left: Any, right: Any) -> Quantity:
    return _quantity_target(left).sub(_operand(right))


def _sign(value: Any) -> celtypes.IntType:
    return celtypes.IntType(_quantity_target(value).sign())


def _is_integer(value: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_quantity_target(value).is_integer())


def _as_integer(value: Any) -> celtypes.IntType:
    return celtypes.IntType(_quantity_target(value).as_integer())


def _as_approximate_float(value: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(_quantity_target(value).as_float())


def _version_part(name: str) -> Callable[[Any], celtypes.IntType]:
    def part(value: Any) -> celtypes.IntType:
        if not isinstance(value, SemVer):
            raise TypeError(f"no such overload for {type(value).__name__}")
        return celtypes.IntType(getattr(value.version, name))

    return part


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": _sign,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "add": _add,
    "sub": _sub,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
}

# Call styles Kubernetes compiles: name -> allowed argument counts (macros handled apart).
_GLOBAL_CALLS: dict[str, set[int]] = {
    "size": {1},
    "int": {1},
    "uint": {1},
    "double": {1},
    "string": {1},
    "bytes": {1},
    "bool": {1},
    "type": {1},
    "duration": {1},
    "timestamp": {1},
    "matches": {2},
    "quantity": {1},
    "isQuantity": {1},
    "sign": {1},
    "semver": {1, 2},
    "isSemver": {1, 2},
}
_MEMBER_CALLS: dict[str, set[int]] = {
    "size": {0},
    "contains": {1},
    "startsWith": {1},
    "endsWith": {1},
    "matches": {1},
    "compareTo": {1},
    "isGreaterThan": {1},
    "isLessThan": {1},
    "add": {1},
    "sub": {1},
    "isInteger": {0},
    "asInteger": {0},
    "asApproximateFloat": {0},
    "major": {0},
    "minor": {0},
    "patch": {0},
    **{
        name: {0, 1}
        for name in (
            "getDate",
            "getDayOfMonth",
            "getDayOfWeek",
            "getDayOfYear",
            "getFullYear",
            "getMonth",
            "getHours",
            "getMilliseconds",
            "getMinutes",
            "getSeconds",
        )
    },
}
_MACROS = {"all": {2}, "exists": {2}, "exists_one": {2}, "map": {2, 3}, "filter": {2}}
_TYPE_NAMES = {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "type"}


def _arguments(node: lark.Tree | None) -> list[lark.Tree]:
    return [c for c in node.children if isinstance(c, lark.Tree)] if node is not None else []


def _innermost(node: lark.Tree) -> lark.Tree:
    """Descend through single-child wrapper rules (expr -> ... -> member) to the real node."""
    while (
        len(node.children) == 1
        and isinstance(node.children[0], lark.Tree)
        and node.data not in ("member_dot", "member_index", "paren_expr")
    ):
        node = node.children[0]
    return node


def _macro_variable(argument: lark.Tree) -> str | None:
    inner = _innermost(argument)
    if inner.data == "ident" and isinstance(inner.children[0], lark.Token):
        return str(inner.children[0])
    return None


def _check(ast: lark.Tree) -> None:
    """Reject what Kubernetes would not compile: wrong call styles, unknown names."""
    bound: set[str] = set()
    nodes: list[lark.Tree] = list(ast.iter_subtrees_topdown())
    for node in nodes:
        if node.data == "member_dot_arg" and str(node.children[1]) in _MACROS:
            args = _arguments(node.children[2] if len(node.children) > 2 else None)
            name = str(node.children[1])
            variable = _macro_variable(args[0]) if args else None
            if len(args) not in _MACROS[name] or variable is None:
                raise SelectorCompileError(f"{name}() takes a variable name and an expression")
            bound.add(variable)
    for node in nodes:
        if node.data == "ident_arg":
            name = str(node.children[0])
            args = _arguments(node.children[1] if len(node.children) > 1 else None)
            if name == "has":
                target = _innermost(args[0]) if len(args) == 1 else None
                if target is None or target.data != "member_dot":
                    raise SelectorCompileError(
                        "has() takes a field selection such as has(device.driver); test a "
                        'domain with "<domain>" in device.attributes'
                    )
                continue
            if name not in _GLOBAL_CALLS:
                hint = " (it is a member function: x.{name}(...))" if name in _MEMBER_CALLS else ""
                raise_unknown(name, hint.format(name=name))
            if len(args) not in _GLOBAL_CALLS[name]:
                raise SelectorCompileError(f"{name}() takes {_arity(_GLOBAL_CALLS[name])}")
        elif node.data == "member_dot_arg":
            name = str(node.children[1])
            if name in _MACROS:
                continue
            args = _arguments(node.children[2] if len(node.children) > 2 else None)
            if name not in _MEMBER_CALLS:
                hint = " (it is a global function: {name}(x))" if name in _GLOBAL_CALLS else ""
                raise_unknown(name, hint.format(name=name), member=True)
            if len(args) not in _MEMBER_CALLS[name]:
                raise SelectorCompileError(f".{name}() takes {_arity(_MEMBER_CALLS[name])}")
        elif node.data in ("dot_ident_arg", "dot_ident", "member_object"):
            raise SelectorCompileError("message and package-qualified names are not supported")
        elif node.data == "ident":
            name = str(node.children[0])
            if name != "device" and name not in bound and name not in _TYPE_NAMES:
                raise SelectorCompileError(
                    f"undeclared reference to {name!r} (the only variable is 'device')"
                )


def raise_unknown(name: str, hint: str, member: bool = False) -> None:
    spelled = f".{name}()" if member else f"{name}()"
    raise SelectorCompileError(f"found no matching overload for {spelled}{hint}")


def _arity(counts: set[int]) -> str:
    return " or ".join(str(c) for c in sorted(counts)) + " argument(s)"


@dataclasses.dataclass(frozen=True)
class CompiledSelector:
    expression: str
    program: celpy.Runner


_ENVIRONMENT = celpy.Environment()
_compiled: dict[str, CompiledSelector | SelectorCompileError] = {}
_results: dict[tuple[str, Any], bool | None] = {}


def compile_selector(expression: str) -> CompiledSelector:
    """Compile once per process; raises SelectorCompileError with a short message."""
    cached = _compiled.get(expression)
    if cached is None:
        cached = _compile(expression)
        if len(_compiled) >= _MAX_CACHE:
            _compiled.clear()
        _compiled[expression] = cached
    if isinstance(cached, SelectorCompileError):
        raise cached
    return cached


def _compile(expression: str) -> CompiledSelector | SelectorCompileError:
    if not isinstance(expression, str) or not expression.strip():
        return SelectorCompileError("empty expression")
    try:
        ast = _ENVIRONMENT.compile(expression)
        _check(ast)
        program = _ENVIRONMENT.program(ast, functions=FUNCTIONS)
    except SelectorCompileError as err:
        return err
    except celpy.CELParseError as err:
        return SelectorCompileError(_syntax_error(expression, err))
    except Exception as err:  # celpy raises other errors for a few malformed inputs
        return SelectorCompileError(_short(err))
    return CompiledSelector(expression, program)


def _syntax_error(expression: str, err: Exception) -> str:
    lines = str(err).splitlines()
    caret = next((line.index("^") for line in lines if line.strip() == "^"), None)
    snippet = expression if len(expression) <= 80 else expression[:77] + "..."
    where = f" at column {caret + 1}" if caret is not None else ""
    return f"syntax error{where} in {snippet!r}"


def _short(err: Exception) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = " ".join(lines[:3]) or type(err).__name__
    return text[:_MAX_ERROR_LENGTH]


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


@dataclasses.dataclass(frozen=True)
class CelDevice:
    """A device as selectors see it. ``value`` is None when its data cannot be converted."""

    signature: Any
    value: celtypes.MapType | None


def _domains(entries: dict[str, Any], driver: str, convert: Callable[[Any], Any]) -> _Domains:
    grouped: dict[str, dict[str, Any]] = {}
    for key, raw in entries.items():
        domain, _, name = key.partition("/") if "/" in key else (driver, "", key)
        grouped.setdefault(domain, {})[name] = convert(raw)
    return _Domains(
        {
            celtypes.StringType(domain): celtypes.MapType(
                {celtypes.StringType(n): v for n, v in names.items()}
            )
            for domain, names in grouped.items()
        }
    )


def _attribute(raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise ValueError("attribute value must be an object")
    kinds = [k for k in ("string", "version", "bool", "int") if raw.get(k) is not None]
    if len(kinds) != 1:
        raise ValueError("exactly one of string, version, bool, int must be set")
    value = raw[kinds[0]]
    if kinds[0] == "string" and isinstance(value, str):
        return celtypes.StringType(value)
    if kinds[0] == "version" and isinstance(value, str):
        return SemVer.parse(value)
    if kinds[0] == "bool" and isinstance(value, bool):
        return celtypes.BoolType(value)
    if kinds[0] == "int" and isinstance(value, int) and not isinstance(value, bool):
        return celtypes.IntType(value)
    raise ValueError(f"attribute {kinds[0]} has the wrong type")


def _capacity(raw: Any) -> Quantity:
    if not isinstance(raw, dict) or not isinstance(raw.get("value"), str):
        raise ValueError("capacity must be an object with a string value")
    return Quantity.parse(raw["value"])


def freeze(value: Any) -> Any:
    """A hashable, order-insensitive (for maps) copy of plain JSON data."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


_devices: dict[Any, CelDevice] = {}


def cel_device(driver: Any, attributes: Any, capacity: Any) -> CelDevice:
    """The CEL view of one device, built once per distinct content."""
    signature = (freeze(driver), freeze(attributes), freeze(capacity))
    cached = _devices.get(signature)
    if cached is not None:
        return cached
    try:
        if not isinstance(driver, str):
            raise ValueError("driver must be a string")
        value = celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(driver),
                celtypes.StringType("attributes"): _domains(attributes or {}, driver, _attribute),
                celtypes.StringType("capacity"): _domains(capacity or {}, driver, _capacity),
            }
        )
    except (ValueError, TypeError, AttributeError, QuantityError):
        value = None
    device = CelDevice(signature, value)
    if len(_devices) >= _MAX_CACHE:
        _devices.clear()
    _devices[signature] = device
    return device


def matches(selector: CompiledSelector, device: CelDevice) -> bool:
    """Whether the device satisfies the selector; any evaluation error is a non-match."""
    return evaluate(selector, device) is True


def evaluate(selector: CompiledSelector, device: CelDevice) -> bool | None:
    """The selector's verdict on the device, or None when it cannot be judged: the device's
    data cannot be converted, or evaluation fails (e.g. an attribute the device lacks)."""
    if device.value is None:
        return None
    key = (selector.expression, device.signature)
    if key in _results:
        return _results[key]
    try:
        result = selector.program.evaluate({"device": device.value})
    except Exception:  # celpy signals evaluation errors by raising CELEvalError and others
        result = None
    # A non-bool result is never coerced to truthy.
    verdict = bool(result) if isinstance(result, celtypes.BoolType) else None
    if len(_results) >= _MAX_CACHE:
        _results.clear()
    _results[key] = verdict
    return verdict


def iter_expressions(node_selector: Any) -> Iterator[tuple[str, int, str]]:
    """(request name, selector position, expression) of every CEL selector in a nodeSelector."""
    for request in (node_selector or {}).get("devices") or []:
        for position, selector in enumerate(request.get("selectors") or []):
            yield request.get("name", ""), position, (selector or {}).get("cel", "")
