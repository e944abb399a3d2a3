"""The Kubernetes DRA device-selector CEL environment (spec §3.4), on the project's one engine.

One variable, ``device``, of Kubernetes' object type ``kubernetes.DRADevice``: ``driver``
(string), ``attributes`` (domain -> attribute id -> any) and ``capacity`` (domain -> capacity
id -> Quantity), in the Kubernetes CEL environment of ``modelplane_common.cel`` (cel-cpp's
parser and checker, the quantity and semver libraries, heterogeneous numeric comparison) with
the bindings extension, as k8s.io/dynamic-resource-allocation/cel declares it at 1.34. A
misspelt field (``device.atributes``) is a compile error, as on a cluster. Selectors are
copied verbatim into DRA claims on the workload cluster, so what Kubernetes would not compile
is rejected here with cel-go's message rather than accepted and left to fail remotely.
``modelplane validate`` and the scheduler both compile through ``compile_selector``.

Each distinct expression is compiled once per process and each (expression, device) result is
memoised by the device's content. A device whose data cannot be read matches nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping
from typing import Any

from google.protobuf import descriptor_pb2, struct_pb2

from modelplane_common import cel, celast
from modelplane_common.quantity import Quantity, QuantityError

_MAX_CACHE = 100_000
_MAX_ERROR_LENGTH = 300
_DOMAIN_MAPS = ("attributes", "capacity")


class SelectorCompileError(ValueError):
    """A selector Kubernetes would not compile; the message is short and user-facing."""


DEVICE_TYPE = "kubernetes.DRADevice"


def _declare_device_type() -> None:
    """``kubernetes.DRADevice`` as a message in the engine's pool, for the checker only.

    cel-cpp knows object types only as protobuf messages, and a protobuf map cannot hold a map:
    each domain is a ``google.protobuf.Struct``, which the checker reads as map(string, dyn).
    So ``device.atributes`` and ``device.driver == 1`` are compile errors, as in Kubernetes;
    a capacity value is dyn here where Kubernetes types it Quantity (design/cel.md). The
    feature-gated ``allowMultipleAllocations`` (DRAConsumableCapacity, alpha and off by
    default at 1.34) is not declared.
    """
    try:
        cel.POOL.FindMessageTypeByName(DEVICE_TYPE)
        return
    except KeyError:
        pass
    try:
        cel.POOL.FindFileByName(struct_pb2.DESCRIPTOR.name)
    except KeyError:
        cel.POOL.Add(
            descriptor_pb2.FileDescriptorProto.FromString(struct_pb2.DESCRIPTOR.serialized_pb)
        )
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="modelplane_cel_dra.proto",
        package="kubernetes",
        syntax="proto3",
        dependency=[struct_pb2.DESCRIPTOR.name],
    )
    device = proto.message_type.add(name="DRADevice")
    device.field.add(name="driver", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    for number, name in ((2, "attributes"), (3, "capacity")):
        entry = device.nested_type.add(name=f"{name.title()}Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
        entry.field.add(
            name="value",
            number=2,
            type=field.TYPE_MESSAGE,
            type_name=".google.protobuf.Struct",
            label=field.LABEL_OPTIONAL,
        )
        device.field.add(
            name=name,
            number=number,
            type=field.TYPE_MESSAGE,
            type_name=f".{DEVICE_TYPE}.{name.title()}Entry",
            label=field.LABEL_REPEATED,
        )
    cel.POOL.Add(proto)


_declare_device_type()


@dataclasses.dataclass(frozen=True)
class CompiledSelector:
    expression: str
    program: cel.Program
    # Domains the selector indexes (device.attributes["d"]) without testing ("d" in ...):
    # Kubernetes reads a domain the device lacks as an empty map, so they are filled in.
    domains: tuple[tuple[str, str], ...]
    # What it reads with constant keys: ("attributes"|"capacity", domain, name), in order.
    reads: tuple[tuple[str, str, str], ...] = ()


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
        # Checked against the typed device; run with the device as a plain map (cel-cpp
        # cannot carry Semver or Quantity values inside a Struct), same source, same verdict.
        typed = cel.compile_expression(
            _typed_capacity(expression),
            typed_variables=(("device", DEVICE_TYPE), (_CAPACITY_ALIAS, "quantity_maps")),
            bindings=True,
        )
        program = cel.compile_expression(expression, map_variables=("device",), bindings=True)
    except cel.CelCompileError as err:
        text = err.one_line().replace("ERROR: ", "").replace(_CAPACITY_ALIAS, "device.capacity")
        return SelectorCompileError(text[:_MAX_ERROR_LENGTH])
    if typed.result_type not in ("bool", "dyn"):
        # Kubernetes' wording; its "unknown type" (an attribute's any) is dyn here.
        return SelectorCompileError(
            f"must evaluate to bool or the unknown type, not {typed.result_type}"
        )
    root = program.ast.expr
    return CompiledSelector(expression, program, _indexed_domains(root), _reads(root))


# Where each kind keeps its members' device requests: a ModelDeployment's nodeSelector, and the
# deviceRequests the scheduler resolved them to on a ModelReplica (copied into its claims).
REQUESTS = {
    "ModelDeployment": ("nodeSelector", "devices"),
    "ModelReplica": ("deviceRequests",),
}


# ``device.capacity[...]`` is checked through a variable typed as Kubernetes types capacity
# (domain -> id -> Quantity), which a protobuf field cannot be: same length, so every column
# in an error stays right. Other spellings (``cel.bind(c, device.capacity, ...)``) stay dyn.
_CAPACITY_ALIAS = "dra_capacity___"
_CAPACITY_INDEX = re.compile(r"(?<![\w.])device\.capacity(?=\s*\[)")


def _typed_capacity(expression: str) -> str:
    masked = cel._mask_literals(expression)  # literals and comments are never rewritten
    out = expression
    for match in _CAPACITY_INDEX.finditer(masked):
        out = out[: match.start()] + _CAPACITY_ALIAS + out[match.end() :]
    return out


def selector_issues(spec: Any, kind: str = "ModelDeployment") -> list[tuple[str, str, str]]:
    """(field path, expression, cel-go's error) for every selector of a ModelDeployment's (or a
    ModelReplica's) spec that does not compile, e.g. ``spec.engines[i].members[j].nodeSelector
    .devices[k].selectors[l].cel``. Shapes the schema refuses (a selector that is not a
    string) are left to it."""
    issues = []
    for path, expression in _selectors(spec, REQUESTS[kind]):
        if not isinstance(expression, str):
            continue
        try:
            compile_selector(expression)
        except SelectorCompileError as err:
            issues.append((path, expression, str(err)))
    return issues


def _items(value: Any, key: str) -> list[Any]:
    items = value.get(key) if isinstance(value, Mapping) else None
    return items if isinstance(items, list) else []


def _selectors(spec: Any, requests: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    *outer, key = requests
    for i, engine in enumerate(_items(spec, "engines")):
        for j, member in enumerate(_items(engine, "members")):
            holder = member
            for name in outer:
                holder = holder.get(name) if isinstance(holder, Mapping) else None
            for k, request in enumerate(_items(holder, key)):
                for m, selector in enumerate(_items(request, "selectors")):
                    if isinstance(selector, Mapping) and "cel" in selector:
                        yield selector_path(i, j, k, m, requests), selector["cel"]


def selector_path(
    engine: int,
    member: int,
    request: int,
    selector: int,
    requests: tuple[str, ...] = REQUESTS["ModelDeployment"],
) -> str:
    """The field path of one selector (a ModelDeployment's unless ``requests`` says)."""
    return (
        f"spec.engines[{engine}].members[{member}].{'.'.join(requests)}[{request}]"
        f".selectors[{selector}].cel"
    )


def _domain_map(node: celast.Expr | None) -> str | None:
    if (
        node is not None
        and node.kind == "select"
        and node.name in _DOMAIN_MAPS
        and node.target is not None
        and node.target.kind == "ident"
        and node.target.name == "device"
    ):
        return node.name
    return None


def _indexed_domains(root: celast.Expr) -> tuple[tuple[str, str], ...]:
    indexed, tested = set(), set()
    for node in celast.walk(root):
        if node.kind != "call" or len(node.args) != 2:
            continue
        left, right = node.args
        if node.name == "_[_]" and (field := _domain_map(left)) and right.kind == "const":
            indexed.add((field, str(right.value)))
        elif node.name == "@in" and (field := _domain_map(right)) and left.kind == "const":
            tested.add((field, str(left.value)))
    return tuple(sorted(indexed - tested))


def _reads(root: celast.Expr) -> tuple[tuple[str, str, str], ...]:
    """``device.attributes["d"].name`` and ``device.capacity["d"]["name"]``, as written."""
    found: list[tuple[str, str, str]] = []
    for node in celast.walk(root):
        inner, name = None, None
        if node.kind == "select" and node.target is not None:
            inner, name = node.target, node.name
        elif (
            node.kind == "call"
            and node.name == "_[_]"
            and len(node.args) == 2
            and node.args[1].kind == "const"
            and isinstance(node.args[1].value, str)
        ):
            inner, name = node.args[0], node.args[1].value
        if inner is None or name is None or inner.kind != "call" or inner.name != "_[_]":
            continue
        field = _domain_map(inner.args[0]) if len(inner.args) == 2 else None
        domain = inner.args[1] if field else None
        if field and domain is not None and domain.kind == "const":
            read = (field, str(domain.value), name)
            if read not in found:
                found.append(read)
    return tuple(found)


@dataclasses.dataclass(frozen=True)
class CelDevice:
    """A device as selectors see it. ``value`` is None when its data cannot be converted."""

    signature: Any
    value: dict[str, Any] | None
    error: str = ""  # why ``value`` is None, naming the attribute when one is at fault


def _domains(entries: dict[str, Any], driver: str, convert: Any) -> dict[str, dict[str, Any]]:
    grouped: dict[str, dict[str, Any]] = {}
    for key, raw in entries.items():
        domain, _, name = key.partition("/") if "/" in key else (driver, "", key)
        try:
            grouped.setdefault(domain, {})[name] = convert(raw)
        except (ValueError, TypeError, QuantityError) as err:
            raise ValueError(f"{key}: {err}") from err
    return grouped


def _attribute(raw: Any) -> Any:
    if not isinstance(raw, dict):
        raise ValueError("attribute value must be an object")
    kinds = [k for k in ("string", "version", "bool", "int") if raw.get(k) is not None]
    if len(kinds) != 1:
        raise ValueError("exactly one of string, version, bool, int must be set")
    value = raw[kinds[0]]
    if kinds[0] == "string" and isinstance(value, str):
        return value
    if kinds[0] == "version" and isinstance(value, str):
        return cel.semver_value(value)
    if kinds[0] == "bool" and isinstance(value, bool):
        return value
    if kinds[0] == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"attribute {kinds[0]} has the wrong type")


def _capacity(raw: Any) -> Any:
    if not isinstance(raw, dict) or not isinstance(raw.get("value"), str):
        raise ValueError("capacity must be an object with a string value")
    return cel.quantity_value(Quantity.parse(raw["value"]))


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
        if not isinstance(attributes or {}, dict) or not isinstance(capacity or {}, dict):
            raise ValueError("attributes and capacity must be maps")
        value = {
            "driver": driver,
            "attributes": _domains(attributes or {}, driver, _attribute),
            "capacity": _domains(capacity or {}, driver, _capacity),
        }
    except (ValueError, TypeError, AttributeError, QuantityError) as err:
        value, error = None, str(err)
    else:
        error = ""
    device = CelDevice(signature, value, error)
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
    value = device.value
    missing = [(f, d) for f, d in selector.domains if d not in value[f]]
    if missing:
        value = {**value, **{f: dict(value[f]) for f, _ in missing}}
        for field, domain in missing:
            value[field][domain] = {}
    try:
        result = selector.program.evaluate({"device": value})
    except cel.CelEvalError:
        result = None
    # A non-bool result is never coerced to truthy.
    verdict = result if isinstance(result, bool) else None
    if len(_results) >= _MAX_CACHE:
        _results.clear()
    _results[key] = verdict
    return verdict
