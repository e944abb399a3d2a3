"""Modelplane's one CEL engine: cel-expr-python (Google's cel-cpp) with the Kubernetes libraries.

Every CEL expression in the project compiles and runs here: XRD and CRD
``x-kubernetes-validations`` (cli ``validate``) and the scheduler's DRA device selectors. The
environment mirrors what the Kubernetes 1.34 API server gives CRD rules (design/cel.md):

* cel-cpp's parser, type checker and runtime, with the strings (v2), optional types, lists,
  sets, two-variable comprehensions and bindings extensions;
* heterogeneous numeric comparison (``1 < 2.5``): the runtime has it, the checker is told;
* homogeneous aggregate literals (``[1, 'a']`` is a compile error, as in Kubernetes);
* the runtime half of ``transformMap``/``transformMapEntry`` (``cel.@mapInsert``);
* the Kubernetes libraries: lists (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``,
  ``lastIndexOf`` beside the strings extension's), regex (``find``, ``findAll``), URL,
  IP/CIDR, quantity, semver and format (whose optional results are planted into the checked
  tree, as are set and map lists' ``==`` and ``+``; design/cel.md).

Kubernetes' opaque types (Quantity, Semver, URL, IP, CIDR) are small protobuf messages holding
one canonical string, so equality is by value and ``type()`` names them as Kubernetes does.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import functools
import ipaddress
import itertools
import json
import math
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import semver as semverlib
from cel_expr_python import cel
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    message_factory,
    timestamp_pb2,
    wrappers_pb2,
)

from modelplane_common import celast, celformat
from modelplane_common.quantity import Quantity, QuantityError

T = cel.Type


class CelCompileError(ValueError):
    """An expression the API server would refuse to compile; the message is cel-go's."""

    def one_line(self) -> str:
        """The error lines without the source excerpt, on one line."""
        text = str(self)
        lines = [line for line in text.splitlines() if line.startswith("ERROR: ")]
        return "; ".join(lines) or text


class CelEvalError(Exception):
    """An evaluation error (no such key, no matching overload, a library function's error)."""


# ---------------------------------------------------------------------------------------------
# Opaque Kubernetes types as one-field protobuf messages.


def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for package, names in (
        ("kubernetes", ("Quantity", "Semver", "URL", "NamedFormat")),
        ("net", ("IP", "CIDR")),
    ):
        proto = descriptor_pb2.FileDescriptorProto(
            name=f"modelplane_cel_{package}.proto", package=package, syntax="proto3"
        )
        for name in names:
            message = proto.message_type.add(name=name)
            message.field.add(
                name="value",
                number=1,
                type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            )
        pool.Add(proto)
    return pool


POOL = _pool()
_MESSAGES = {
    name: message_factory.GetMessageClass(POOL.FindMessageTypeByName(name))
    for name in (
        "kubernetes.Quantity",
        "kubernetes.Semver",
        "kubernetes.URL",
        "net.IP",
        "net.CIDR",
        "kubernetes.NamedFormat",
    )
}
QUANTITY, SEMVER, URL, IP, CIDR, FORMAT = (T(name) for name in _MESSAGES)


def _wrap(type_name: str, value: str) -> Any:
    return _MESSAGES[type_name](value=value)


# --- quantity ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _quantity_of(text: str) -> Quantity:
    return Quantity.parse(text)


def quantity_value(quantity: Quantity) -> Any:
    """The CEL value of a parsed quantity (its canonical decimal, so equality is by value)."""
    return _wrap("kubernetes.Quantity", str(quantity))


# apimachinery's resource.ErrFormatWrong, the error quantity() reports for a malformed string.
_QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def _quantity(text: str) -> Any:
    try:
        return quantity_value(_quantity_of(text))
    except QuantityError as err:
        if str(err).startswith("quantities must match"):
            raise ValueError(_QUANTITY_FORMAT) from err
        raise ValueError(str(err)) from err


def _q(message: Any) -> Quantity:
    return Quantity(decimal.Decimal(message.value))


def _quantity_as_integer(message: Any) -> int:
    quantity = _q(message)
    if not quantity.is_integer():
        raise ValueError("cannot convert value to integer")  # Kubernetes' words
    return quantity.as_integer()


def _q_operand(other: Any) -> Quantity | int:
    return other if isinstance(other, int) else _q(other)


# --- semver -----------------------------------------------------------------------------------


def _semver_text(text: str, normalize: bool) -> str:
    """A version as Kubernetes' semver library parses it; ``normalize`` is the lenient form."""
    if normalize:
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
        text = ".".join(parts)
    version = semverlib.Version.parse(text)
    # Build metadata takes no part in precedence, so it is not part of the value either.
    return str(version.replace(build=None))


def semver_value(text: str, normalize: bool = False) -> Any:
    """The CEL value of a version string; ValueError when it is not a semantic version."""
    try:
        return _wrap("kubernetes.Semver", _semver_text(text, normalize))
    except (ValueError, TypeError) as err:
        raise ValueError(f"invalid semantic version {text!r}") from err


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver_text(text, normalize)
    except (ValueError, TypeError):
        return False
    return True


@functools.lru_cache(maxsize=4096)
def _version(text: str) -> semverlib.Version:
    return semverlib.Version.parse(text)


def _compare(left: Any, right: Any) -> int:
    if left.DESCRIPTOR.full_name != right.DESCRIPTOR.full_name:
        raise TypeError("no such overload")
    if left.DESCRIPTOR.full_name == "kubernetes.Semver":
        return _version(left.value).compare(_version(right.value))
    return _q(left).compare(_q(right))


# --- URL --------------------------------------------------------------------------------------


def _url(text: str) -> Any:
    celformat.parse_request_uri(text)
    return _wrap("kubernetes.URL", text)


def _url_parts(url: Any) -> celformat.RequestURI:
    """The parts of a URL value as its accessors read them: Kubernetes checks url() with
    ParseRequestURI but reads the parts with url.Parse, which drops a #fragment."""
    return celformat.parse_request_uri(url.value.partition("#")[0])


def _url_part(part: str) -> Callable[[Any], str]:
    def get(url: Any) -> str:
        parts = _url_parts(url)
        port = parts.host.rpartition("]")[2] if parts.host.startswith("[") else parts.host
        port = port.rpartition(":")[2] if ":" in port else ""
        if part == "host":
            return parts.host
        if part == "hostname":
            name = parts.host.removesuffix(f":{port}") if port else parts.host.rstrip(":")
            return name.removeprefix("[").removesuffix("]")
        if part == "port":
            return port
        if part == "path":
            return celformat.escaped_path(parts.path)
        return parts.scheme

    return get


def _url_query(url: Any) -> dict[str, list[str]]:
    query = _url_parts(url).query
    return urllib.parse.parse_qs(query, keep_blank_values=True)


# --- IP and CIDR ------------------------------------------------------------------------------


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if "%" in text:
        raise ValueError(f"IP address with zone value is not allowed: {text}")
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address is not allowed: {text}")
    return address


def _ip(text: str) -> Any:
    return _wrap("net.IP", str(_parse_ip(text)))


def _ip_is_canonical(text: str) -> bool:
    return str(_parse_ip(text)) == text


def _ip_obj(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(value.value)


def _is_global_unicast(value: Any) -> bool:
    # Go's definition: private ranges count; unspecified, loopback, multicast, link-local and
    # the IPv4 broadcast address do not.
    address = _ip_obj(value)
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or address.is_link_local
        or str(address) == "255.255.255.255"
    )


def _is_link_local_multicast(value: Any) -> bool:
    address = _ip_obj(value)
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.ip_network("224.0.0.0/24")
    return address.is_multicast and (address.packed[1] & 0x0F) == 2


def _parse_cidr(text: str) -> tuple[Any, Any]:
    address, slash, prefix = text.partition("/")
    if not slash or not prefix.isdigit():
        raise ValueError(f"network address parse error during conversion from string: {text}")
    ip = _parse_ip(address)
    network = ipaddress.ip_network(f"{ip}/{int(prefix)}", strict=False)
    return ip, network


def _cidr(text: str) -> Any:
    ip, network = _parse_cidr(text)
    return _wrap("net.CIDR", f"{ip}/{network.prefixlen}")


def _network(value: Any) -> Any:
    return _parse_cidr(value.value)[1]


def _contains_ip(cidr: Any, ip: Any) -> bool:
    address = _parse_ip(ip) if isinstance(ip, str) else _ip_obj(ip)
    network = _network(cidr)
    return address.version == network.version and address in network


def _contains_cidr(cidr: Any, other: Any) -> bool:
    inner = _parse_cidr(other)[1] if isinstance(other, str) else _network(other)
    outer = _network(cidr)
    return inner.version == outer.version and inner.subnet_of(outer)


# --- lists and regex --------------------------------------------------------------------------


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _sum(items: list[Any]) -> Any:
    total: Any = 0
    for item in items:
        total = total + item
    return total


def _extreme(pick: Callable[[Iterable[Any]], Any]) -> Callable[[list[Any]], Any]:
    def choose(items: list[Any]) -> Any:
        if not items:
            raise ValueError("min/max of an empty list")
        return pick(items)

    return choose


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


# --- list and string indexOf / lastIndexOf -----------------------------------------------------
# The strings extension owns the names indexOf and lastIndexOf, and cel-expr-python refuses a
# second declaration of a function. Member calls of those names are renamed (same length, so
# positions hold) to internal functions declaring both the string and the Kubernetes list
# overloads; the string ones keep cel-cpp's strings-v2 results (code point offsets, an error
# for an offset outside 0..size).
_INDEX_FUNCTIONS = {"indexOf": "mpIdxOf", "lastIndexOf": "mpLastIdxOf"}
# charAt and substring are renamed the same way, to run with cel-go's error texts ("index out
# of range: 7") where cel-cpp's would name no index.
_STRING_FUNCTIONS = {"charAt": "mpChAt", "substring": "mpSubstrg"}
_RENAMED = {**_INDEX_FUNCTIONS, **_STRING_FUNCTIONS}
_INTERNAL_NAMES = {internal: name for name, internal in _RENAMED.items()}


def _char_at(text: str, index: int) -> str:
    """cel-go's strings extension charAt: the code point at index, "" at the end."""
    if not 0 <= index <= len(text):
        raise ValueError(f"index out of range: {index}")
    return text[index] if index < len(text) else ""


def _substring(text: str, start: int, end: int | None = None) -> str:
    """cel-go's strings extension substring, over code points."""
    if end is not None and start > end:
        raise ValueError(f"invalid substring range. start: {start}, end: {end}")
    if not 0 <= start <= len(text):
        raise ValueError(f"index out of range: {start}")
    if end is not None and not 0 <= end <= len(text):
        raise ValueError(f"index out of range: {end}")
    return text[start:end]


def _string_function_decls() -> list[Any]:
    return [
        _fn("mpChAt", _overload("mp_string_char_at", T.STRING, [T.STRING, T.INT], _char_at, True)),
        _fn(
            "mpSubstrg",
            _overload("mp_string_substring", T.STRING, [T.STRING, T.INT], _substring, True),
            _overload(
                "mp_string_substring_range", T.STRING, [T.STRING, T.INT, T.INT], _substring, True
            ),
        ),
    ]


def _string_index_of(text: str, sub: str, offset: int = 0) -> int:
    if not 0 <= offset <= len(text):
        raise ValueError(f"index out of range: {offset}")
    return offset if not sub else text.find(sub, offset)


def _string_last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    offset = len(text) if offset is None else offset
    if not 0 <= offset <= len(text):
        raise ValueError(f"index out of range: {offset}")
    return offset if not sub else text.rfind(sub, 0, offset + len(sub))


def _cel_equal(left: Any, right: Any) -> bool:
    """CEL's heterogeneous equality on plain scalars: numbers across types, never bool to int
    (lists and maps: typed_equal)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    return type(left) is type(right) and left == right


def _list_index_of(items: list[Any], item: Any) -> int:
    return next((i for i, element in enumerate(items) if typed_equal(element, item, {})), -1)


def _list_last_index_of(items: list[Any], item: Any) -> int:
    found = [i for i, element in enumerate(items) if typed_equal(element, item, {})]
    return found[-1] if found else -1


# --- two-variable comprehensions ---------------------------------------------------------------
# transformMap and transformMapEntry expand to calls of cel.@mapInsert, which cel-expr-python's
# checker declares but its runtime lacks; it is supplied here, with cel-go's error on a
# duplicate key.


_INT64_MAX = 2**63 - 1


def _returnable(value: Any) -> Any:
    """A plain value as a Python function may return it: cel-expr-python hands timestamps and
    durations in as datetime/timedelta but takes them back only as the protobuf messages."""
    if isinstance(value, datetime.datetime):
        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(value)
        return stamp
    if isinstance(value, datetime.timedelta):
        span = duration_pb2.Duration()
        span.FromTimedelta(value)
        return span
    if isinstance(value, int) and value > _INT64_MAX:  # a uint only int64 cannot hold
        return wrappers_pb2.UInt64Value(value=value)
    if isinstance(value, dict):
        return {k: _returnable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_returnable(v) for v in value]
    return value


def _map_merge(accumulator: dict[Any, Any], entries: dict[Any, Any]) -> dict[Any, Any]:
    for key, value in entries.items():
        if key in accumulator:
            raise ValueError(f"insert failed: key {key} already exists")
        accumulator[key] = value
    return _returnable(accumulator)


def _map_insert(accumulator: dict[Any, Any], key: Any, value: Any) -> dict[Any, Any]:
    return _map_merge(accumulator, {key: value})


# --- list types -------------------------------------------------------------------------------
# Kubernetes gives a list with x-kubernetes-list-type set or map its own `==` and `+`: order is
# ignored by equality, `+` is a union or a merge by key. The left operand's schema decides, as
# in the API server. The checked tree sends such operators to the functions below
# (celrules finds them from the schema); the schema travels as an index into SCHEMAS.

SCHEMAS: list[Mapping[str, Any]] = []
_SCHEMA_INDEX: dict[str, int] = {}


def schema_index(schema: Mapping[str, Any]) -> int:
    """The index of ``schema`` in SCHEMAS; one entry per distinct content, so reloading the
    same definitions does not grow it."""
    key = json.dumps(schema, sort_keys=True, default=str)
    if key not in _SCHEMA_INDEX:
        _SCHEMA_INDEX[key] = len(SCHEMAS)
        SCHEMAS.append(schema)
    return _SCHEMA_INDEX[key]


def _property(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    for name, sub in (schema.get("properties") or {}).items():
        if escape_property(name) == key:
            return sub
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else {}


def _map_key(item: Any, keys: list[str]) -> tuple[Any, ...]:
    item = item if isinstance(item, dict) else {}
    return tuple(repr(item.get(escape_property(k) or k)) for k in keys)


def typed_equal(left: Any, right: Any, schema: Mapping[str, Any]) -> bool:
    """CEL equality with ``left`` typed by ``schema``: set and map lists ignore order."""
    if isinstance(left, list):
        if not isinstance(right, list) or len(left) != len(right):
            return False
        items = schema.get("items") or {}
        kind = schema.get("x-kubernetes-list-type")
        if kind == "set":
            return all(any(typed_equal(a, b, items) for a in left) for b in right)
        if kind == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            by_key = {_map_key(a, keys): a for a in left}
            return all(
                _map_key(b, keys) in by_key and typed_equal(by_key[_map_key(b, keys)], b, items)
                for b in right
            )
        return all(typed_equal(a, b, items) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        if not isinstance(right, dict) or left.keys() != right.keys():
            return False
        return all(typed_equal(left[k], right[k], _property(schema, k)) for k in left)
    return _cel_equal(left, right)


def typed_add(left: list[Any], right: list[Any], schema: Mapping[str, Any]) -> list[Any]:
    """``left + right`` for a set (union) or map (merge by key) list ``left``."""
    out = list(left)
    items = schema.get("items") or {}
    if schema.get("x-kubernetes-list-type") == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        position = {_map_key(item, keys): i for i, item in enumerate(out)}
        for item in right:
            key = _map_key(item, keys)
            if key in position:
                out[position[key]] = item
            else:  # Kubernetes does not index appended items: a later same key appends too
                out.append(item)
        return out
    for item in right:
        if not any(typed_equal(have, item, items) for have in out):
            out.append(item)
    return out


def _list_type_decls() -> list[Any]:
    # google.protobuf.Any is the runtime's wildcard: a null or any other value on either side
    # reaches the implementation, which falls back to CEL's own equality.
    anything = T("google.protobuf.Any")

    def equal(a: Any, b: Any, index: int) -> bool:
        return typed_equal(a, b, SCHEMAS[index])

    def add(a: Any, b: Any, index: int) -> list[Any]:
        if not (isinstance(a, list) and isinstance(b, list)):
            raise ValueError("no such overload")
        return _returnable(typed_add(a, b, SCHEMAS[index]))

    (equals, equals_id), (differs, differs_id), (plus, plus_id) = LIST_TYPE_FUNCTIONS.values()
    return [
        _fn(equals, _overload(equals_id, T.BOOL, [anything, anything, T.INT], equal)),
        _fn(
            differs,
            _overload(differs_id, T.BOOL, [anything, anything, T.INT], lambda *a: not equal(*a)),
        ),
        _fn(plus, _overload(plus_id, T.DYN, [anything, anything, T.INT], add)),
    ]


# Operator -> (function, overload of its list form). '@' names cannot be written in a rule.
LIST_TYPE_FUNCTIONS = {
    "==": ("@listTypeEquals", "list_type_equals"),
    "!=": ("@listTypeNotEquals", "list_type_not_equals"),
    "+": ("@listTypeAdd", "list_type_add"),
}


# ---------------------------------------------------------------------------------------------
# Declarations.


def _overload(
    name: str, result: Any, params: list[Any], impl: Callable[..., Any], member: bool = False
) -> Any:
    return cel.Overload(name, result, params, is_member=member, impl=impl)


def _fn(name: str, *overloads: Any) -> Any:
    return cel.FunctionDecl(name, list(overloads))


_COMPARABLE = {
    "bool": T.BOOL, "int64": T.INT, "uint64": T.UINT, "double": T.DOUBLE, "string": T.STRING,
    "bytes": T.BYTES, "timestamp": T.TIMESTAMP, "duration": T.DURATION,
}  # fmt: skip
_NUMERIC = {"int64": T.INT, "uint64": T.UINT, "double": T.DOUBLE}
_ORDERINGS = {"_<_": "less", "_<=_": "less_equals", "_>_": "greater", "_>=_": "greater_equals"}
# Standard string() conversions, redeclared so IP and CIDR can join them.
_TO_STRING = {
    "string_to_string": T.STRING, "int64_to_string": T.INT, "uint64_to_string": T.UINT,
    "double_to_string": T.DOUBLE, "bytes_to_string": T.BYTES, "bool_to_string": T.BOOL,
    "timestamp_to_string": T.TIMESTAMP, "duration_to_string": T.DURATION,
}  # fmt: skip


def _ordering_decls() -> list[Any]:
    """The standard ordering overloads plus the cross-type numeric ones Kubernetes enables.

    cel-cpp's runtime already implements int/uint/double comparisons across types; only the
    checker's declarations lack them, so these overloads carry no Python implementation.
    """
    decls = []
    for function, prefix in _ORDERINGS.items():
        overloads = [cel.Overload(f"{prefix}_{n}", T.BOOL, [t, t]) for n, t in _COMPARABLE.items()]
        overloads += [
            cel.Overload(f"{prefix}_{a}_{b}", T.BOOL, [ta, tb])
            for a, ta in _NUMERIC.items()
            for b, tb in _NUMERIC.items()
            if a != b
        ]
        decls.append(cel.FunctionDecl(function, overloads))
    conversions = [cel.Overload(name, T.STRING, [t]) for name, t in _TO_STRING.items()]
    # IP and CIDR are both messages to the runtime: one implementation serves both.
    conversions.append(cel.Overload("ip_to_string", T.STRING, [IP], impl=lambda v: v.value))
    conversions.append(cel.Overload("cidr_to_string", T.STRING, [CIDR]))
    decls.append(cel.FunctionDecl("string", conversions))
    return decls


def _quantity_arithmetic(name: str) -> Any:
    """``q.add(r)``/``q.sub(r)`` for a quantity or an int ``r``."""

    def apply(a: Any, b: Any) -> Any:
        return quantity_value(getattr(_q(a), name)(_q_operand(b)))

    return _fn(
        name,
        _overload(f"quantity_{name}", QUANTITY, [QUANTITY, QUANTITY], apply, True),
        _overload(f"quantity_{name}_int", QUANTITY, [QUANTITY, T.INT], apply, True),
    )


def _library() -> list[Any]:
    q, s, u, ip, cidr = QUANTITY, SEMVER, URL, IP, CIDR
    any_list = T.List(T.DYN)
    decls = [
        # quantity
        _fn("quantity", _overload("string_to_quantity", q, [T.STRING], _quantity)),
        _fn(
            "isQuantity",
            _overload("is_quantity_string", T.BOOL, [T.STRING], lambda t: _try(_quantity_of, t)),
        ),
        _fn("sign", _overload("quantity_sign", T.INT, [q], lambda a: _q(a).sign())),
        _fn(
            "isInteger",
            _overload("quantity_is_integer", T.BOOL, [q], lambda a: _q(a).is_integer(), True),
        ),
        _fn(
            "asInteger",
            _overload("quantity_as_integer", T.INT, [q], _quantity_as_integer, True),
        ),
        _fn(
            "asApproximateFloat",
            _overload("quantity_as_float", T.DOUBLE, [q], lambda a: _q(a).as_float(), True),
        ),
        *(_quantity_arithmetic(name) for name in ("add", "sub")),
        # semver
        _fn(
            "semver",
            _overload("string_to_semver", s, [T.STRING], semver_value),
            _overload("string_bool_to_semver", s, [T.STRING, T.BOOL], semver_value),
        ),
        _fn(
            "isSemver",
            _overload("is_semver_string", T.BOOL, [T.STRING], _is_semver),
            _overload("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL], _is_semver),
        ),
        *(
            _fn(
                part,
                _overload(
                    f"semver_{part}",
                    T.INT,
                    [s],
                    lambda v, p=part: getattr(_version(v.value), p),
                    True,
                ),
            )
            for part in ("major", "minor", "patch")
        ),
        # Shared by quantity and semver. cel-cpp's runtime dispatches on argument kinds (both
        # are messages), so one implementation serves both and the semver overloads only
        # declare the signature for the checker.
        _fn(
            "isGreaterThan",
            _overload(
                "quantity_is_greater_than", T.BOOL, [q, q], lambda a, b: _compare(a, b) > 0, True
            ),
            cel.Overload("semver_is_greater_than", T.BOOL, [s, s], is_member=True),
        ),
        _fn(
            "isLessThan",
            _overload(
                "quantity_is_less_than", T.BOOL, [q, q], lambda a, b: _compare(a, b) < 0, True
            ),
            cel.Overload("semver_is_less_than", T.BOOL, [s, s], is_member=True),
        ),
        _fn(
            "compareTo",
            _overload("quantity_compare_to", T.INT, [q, q], _compare, True),
            cel.Overload("semver_compare_to", T.INT, [s, s], is_member=True),
        ),
        # lists
        _fn("isSorted", _overload("list_is_sorted", T.BOOL, [any_list], _is_sorted, True)),
        _fn("sum", _overload("list_sum", T.DYN, [any_list], _sum, True)),
        _fn("min", _overload("list_min", T.DYN, [any_list], _extreme(min), True)),
        _fn("max", _overload("list_max", T.DYN, [any_list], _extreme(max), True)),
        # regex
        _fn("find", _overload("string_find", T.STRING, [T.STRING, T.STRING], _find, True)),
        _fn(
            "findAll",
            _overload("string_find_all", T.List(T.STRING), [T.STRING, T.STRING], _find_all, True),
            _overload(
                "string_find_all_n", T.List(T.STRING), [T.STRING, T.STRING, T.INT], _find_all, True
            ),
        ),
        # URL
        _fn("url", _overload("string_to_url", u, [T.STRING], _url)),
        _fn("isURL", _overload("is_url_string", T.BOOL, [T.STRING], lambda t: _try(_url, t))),
        *(
            _fn(name, _overload(f"url_{name}", T.STRING, [u], _url_part(part), True))
            for name, part in (
                ("getScheme", "scheme"),
                ("getHost", "host"),
                ("getHostname", "hostname"),
                ("getPort", "port"),
                ("getEscapedPath", "path"),
            )
        ),
        _fn(
            "getQuery",
            _overload("url_get_query", T.Map(T.STRING, T.List(T.STRING)), [u], _url_query, True),
        ),
        # IP
        _fn(
            "ip",
            _overload("string_to_ip", ip, [T.STRING], _ip),
            _overload(
                "cidr_ip", ip, [cidr], lambda c: _wrap("net.IP", c.value.partition("/")[0]), True
            ),
        ),
        _fn("isIP", _overload("is_ip", T.BOOL, [T.STRING], lambda t: _try(_parse_ip, t))),
        _fn("ip.isCanonical", _overload("ip_is_canonical", T.BOOL, [T.STRING], _ip_is_canonical)),
        _fn("family", _overload("ip_family", T.INT, [ip], lambda a: _ip_obj(a).version, True)),
        _fn(
            "isUnspecified",
            _overload("ip_is_unspecified", T.BOOL, [ip], lambda a: _ip_obj(a).is_unspecified, True),
        ),
        _fn(
            "isLoopback",
            _overload("ip_is_loopback", T.BOOL, [ip], lambda a: _ip_obj(a).is_loopback, True),
        ),
        _fn(
            "isLinkLocalMulticast",
            _overload("ip_is_link_local_multicast", T.BOOL, [ip], _is_link_local_multicast, True),
        ),
        _fn(
            "isLinkLocalUnicast",
            _overload(
                "ip_is_link_local_unicast",
                T.BOOL,
                [ip],
                lambda a: _ip_obj(a).is_link_local and not _ip_obj(a).is_multicast,
                True,
            ),
        ),
        _fn(
            "isGlobalUnicast",
            _overload("ip_is_global_unicast", T.BOOL, [ip], _is_global_unicast, True),
        ),
        # CIDR
        _fn("cidr", _overload("string_to_cidr", cidr, [T.STRING], _cidr)),
        _fn("isCIDR", _overload("is_cidr", T.BOOL, [T.STRING], lambda t: _try(_parse_cidr, t))),
        _fn(
            "containsIP",
            _overload("cidr_contains_ip_string", T.BOOL, [cidr, T.STRING], _contains_ip, True),
            _overload("cidr_contains_ip_ip", T.BOOL, [cidr, ip], _contains_ip, True),
        ),
        _fn(
            "containsCIDR",
            _overload("cidr_contains_cidr_string", T.BOOL, [cidr, T.STRING], _contains_cidr, True),
            _overload("cidr_contains_cidr", T.BOOL, [cidr, cidr], _contains_cidr, True),
        ),
        _fn(
            "prefixLength",
            _overload("cidr_prefix_length", T.INT, [cidr], lambda c: _network(c).prefixlen, True),
        ),
        _fn(
            "masked",
            _overload(
                "cidr_masked", cidr, [cidr], lambda c: _wrap("net.CIDR", str(_network(c))), True
            ),
        ),
        # format: `validate` and `format.named` return optionals, which a Python function
        # cannot; they are declared dyn and their results wrapped in optional.ofNonZeroValue
        # in the checked tree (_optional_results).
        *(
            _fn(
                f"format.{name}",
                _overload(f"format_{name}", FORMAT, [], lambda n=name: _wrap(_FORMAT, n)),
            )
            for name in celformat.FORMATS
        ),
        _fn("format.named", _overload("format_named", T.DYN, [T.STRING], _named_format)),
        _fn(
            "validate",
            _overload(
                "format_validate",
                T.DYN,
                [FORMAT, T.STRING],
                lambda f, text: celformat.FORMATS[f.value](text),
                True,
            ),
        ),
    ]
    return decls


_FORMAT = "kubernetes.NamedFormat"


def _named_format(name: str) -> Any:
    # An empty message is a zero value: optional.ofNonZeroValue makes it optional.none().
    return _wrap(_FORMAT, name) if name in celformat.FORMATS else _MESSAGES[_FORMAT]()


def _index_config() -> str:
    """The checker's declarations of the internal indexOf/lastIndexOf functions (YAML, because
    only the config can declare a type parameter: list(T).indexOf(T), as Kubernetes does)."""
    string, integer = "{type_name: string}", "{type_name: int}"
    param = "{type_name: T, is_type_param: true}"
    shapes = {
        "mp_string_{}": (string, [string]),
        "mp_string_{}_offset": (string, [string, integer]),
        "mp_list_{}": (f"{{type_name: list, params: [{param}]}}", [param]),
    }
    text = "functions:\n"
    for internal in _INDEX_FUNCTIONS.values():
        text += f"  - name: {internal}\n    overloads:\n"
        for oid, (target, args) in shapes.items():
            text += (
                f"      - {{id: {oid.format(internal)}, target: {target},"
                f" args: [{', '.join(args)}], return: {integer}}}\n"
            )
    return text


def _index_decls() -> list[Any]:
    """The runtime's internal indexOf/lastIndexOf: it dispatches on kinds, a type parameter
    matches none, and ``google.protobuf.Any`` is its wildcard."""
    element = T("google.protobuf.Any")
    string_impls = {"indexOf": _string_index_of, "lastIndexOf": _string_last_index_of}
    list_impls = {"indexOf": _list_index_of, "lastIndexOf": _list_last_index_of}
    return [
        _fn(
            internal,
            _overload(
                f"mp_string_{internal}", T.INT, [T.STRING, T.STRING], string_impls[name], True
            ),
            _overload(
                f"mp_string_{internal}_offset",
                T.INT,
                [T.STRING, T.STRING, T.INT],
                string_impls[name],
                True,
            ),
            _overload(
                f"mp_list_{internal}", T.INT, [T.List(element), element], list_impls[name], True
            ),
        )
        for name, internal in _INDEX_FUNCTIONS.items()
    ]


def _map_insert_decl() -> Any:
    """cel.@mapInsert for the runtime environment only (the checker already declares it)."""
    any_map, wildcard = T.Map(T.DYN, T.DYN), T("google.protobuf.Any")
    return _fn(
        "cel.@mapInsert",
        _overload("mp_map_insert", any_map, [any_map, wildcard, wildcard], _map_insert),
        _overload("mp_map_merge", any_map, [any_map, any_map], _map_merge),
    )


def _try(parse: Callable[[str], Any], text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


_CONFIG = """
extensions:
  - name: strings
    version: 2
  - name: optional
  - name: sets
  - name: two-var-comprehensions
  - name: bindings
stdlib:
  exclude_functions:
""" + "".join(f'    - name: "{op}"\n' for op in (*_ORDERINGS, "string"))


@functools.cache
def environment(variables: tuple[tuple[str, str], ...], runtime: bool = False) -> Any:
    """A cel-expr-python environment declaring ``variables`` ((name, kind), ...): a kind is
    "dyn", "map", "quantity_maps" or the full name of a message type in ``POOL`` (e.g.
    ``kubernetes.DRADevice``).

    ``runtime``: the environment programs are planned in when they call a function whose
    implementation the checker's environment cannot carry (list indexOf, cel.@mapInsert); it
    never compiles, so its declarations need not suit the checker.
    """
    types = {
        "dyn": T.DYN,
        "map": T.Map(T.STRING, T.DYN),
        # A DRA device's capacity: domain -> capacity id -> Quantity (modelplane_common.dracel).
        "quantity_maps": T.Map(T.STRING, T.Map(T.STRING, QUANTITY)),
    }
    runtime_only = [*_index_decls(), _map_insert_decl()] if runtime else []
    return cel.NewEnv(
        descriptor_pool=POOL,
        config=cel.NewEnvConfigFromYaml(_CONFIG if runtime else _CONFIG + _index_config()),
        variables={name: types.get(kind) or T(kind) for name, kind in variables},
        functions=[
            *_ordering_decls(),
            *_library(),
            *_list_type_decls(),
            *_string_function_decls(),
            *runtime_only,
        ],
    )


# ---------------------------------------------------------------------------------------------
# Compile and evaluate.


@dataclasses.dataclass(frozen=True)
class Program:
    source: str
    expression: Any
    ast: celast.CheckedAst
    env: Any = dataclasses.field(repr=False, compare=False, default=None)

    @property
    def result_type(self) -> str:
        return self.ast.types.get(self.ast.expr.id, "dyn")

    def edited(self, edits: dict[int, celast.CallEdit]) -> Program:
        """This program with ``edits`` planted into its checked tree (same source and tree)."""
        if not edits:
            return self
        serialized = celast.edit(self.expression.serialize(), edits)
        return dataclasses.replace(self, expression=self.env.deserialize(serialized))

    def identifiers(self) -> set[str]:
        return {n.name for n in celast.walk(self.ast.expr) if n.kind == "ident"}

    def evaluate(self, variables: Mapping[str, Any]) -> Any:
        """The result as plain Python (dicts, lists, scalars, messages); CelEvalError on error."""
        try:
            value = self.expression.eval(data=variables)
        except (RuntimeError, TypeError, ValueError) as err:
            # RuntimeError: cel-cpp's status; TypeError/ValueError: data it cannot convert.
            raise CelEvalError(_strip_status(str(err))) from err
        try:
            if value.type() == T.ERROR:
                raise CelEvalError(_strip_status(str(value.value())))
            return value.plain_value()
        except (TypeError, SystemError) as err:  # an optional has no plain Python form
            raise CelEvalError("the result is an optional value, not a plain one") from err


def _strip_status(text: str) -> str:
    """cel-cpp's ``CODE: message [CODE]`` status text as just the message."""
    text = re.sub(r"\s*\[[A-Z_]+\]\s*$", "", text.strip())
    text = re.sub(r"^[A-Z_]+: ", "", text)
    # cel-go's wording, which the API server reports.
    text = re.sub(r'^Key not found in map : "(.*)"$', r"no such key: \1", text)
    text = re.sub(r"^Index error: index=(-?[0-9]+) size=[0-9]+$", r"index out of bounds: \1", text)
    text = "division by zero" if text == "divide by zero" else text
    text = re.sub(
        r"^cannot convert (\w+) to (\w+)$", r"type conversion error from '\1' to '\2'", text
    )
    for internal, name in _INTERNAL_NAMES.items():
        text = text.replace(f"'{internal}'", f"'{name}'").replace(f"{internal}(", f"{name}(")
    for operator, (internal, _) in LIST_TYPE_FUNCTIONS.items():
        text = text.replace(f"{internal}(", f"_{operator}_(").replace(", int64)", ")")
    return text


def _location(source: str, offset: int) -> str:
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return f"<input>:{line}:{column}"


# Python-implemented functions whose arguments may hold any value (so, an optional).
_TAKES_ANY_VALUE = {"isSorted", "sum", "min", "max", "indexOf", "lastIndexOf", "cel.@mapInsert"}


def _post_check(source: str, ast: celast.CheckedAst) -> None:
    """What Kubernetes' environment rejects beyond cel-cpp's checker: mixed-type aggregate
    literals (HomogeneousAggregateLiterals; anything inside a format() call is exempt, as the
    strings extension asks) and message construction (only the protobuf well-known types)."""
    exempt = {
        inner.id
        for node in celast.walk(ast.expr)
        if node.kind == "call" and node.name == "format"
        for inner in celast.walk(node)
        if inner is not node
    }
    for node in celast.walk(ast.expr):
        if node.kind == "call" and node.name in _TAKES_ANY_VALUE:
            operands = [*node.args, *([node.target] if node.target else [])]
            if any("optional_type" in ast.types.get(o.id, "") for o in operands):
                # cel-expr-python crashes converting an optional for a Python function.
                where = _location(source, ast.positions.get(node.id, 0))
                shown = "transformMap" if node.name == "cel.@mapInsert" else node.name
                raise CelCompileError(
                    f"ERROR: {where}: optional values cannot be passed to '{shown}' here "
                    "(a limit of Modelplane's CEL engine; the API server accepts this)"
                )
        if node.kind == "struct" and not node.name.startswith("google.protobuf."):
            where = _location(source, ast.positions.get(node.id, 0))
            raise CelCompileError(f"ERROR: {where}: undeclared reference to '{node.name}'")
        groups: list[list[celast.Expr]] = []
        if node.id in exempt:
            continue
        if node.kind == "list":
            groups = [list(node.args)]
        elif node.kind == "map":
            groups = [list(node.args[0::2]), list(node.args[1::2])]
        for group in groups:
            first: str | None = None
            for element in group:
                found = ast.types.get(element.id, "dyn")
                if found == "dyn" or found.startswith("optional_type"):
                    continue
                if first is None:
                    first = found
                elif found != first:
                    where = _location(source, ast.positions.get(element.id, 0))
                    raise CelCompileError(
                        f"ERROR: {where}: expected type '{first}' but found '{found}'"
                    )


# --- what cel-go rejects before a program runs -----------------------------------------------
# The Kubernetes environment validates duration, timestamp and regex literals when it compiles
# (cel.ValidateDurationLiterals, ValidateTimestampLiterals, ValidateRegexLiterals), and plans
# programs with cel-go's optimizer, which evaluates a type conversion of a constant and
# compiles the constant pattern of the regex library's find/findAll: an error there refuses
# the rule too ("program instantiation failed").

_GO_DURATION = re.compile(
    r"^[-+]?(?:0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)$"
)
_RFC3339 = re.compile(
    r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(Z|[+-]([0-9]{2}):([0-9]{2}))$"
)
# Conversions whose constant form can fail (duration and timestamp literals are validated).
_FOLDED_CHECKS = {"bool", "bytes", "double", "int", "string", "uint"}
_CONVERSIONS = {"bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp",
                "type", "uint"}  # fmt: skip


def _valid_timestamp(text: str) -> bool:
    """Go's time.Parse(time.RFC3339, text), within CEL's years 1 to 9999."""
    match = _RFC3339.match(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(match[i]) for i in range(1, 7))
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    zone_ok = match[9] is None or (int(match[9]) < 24 and int(match[10]) < 60)
    return year >= 1 and hour < 24 and minute < 60 and second < 60 and zone_ok


@functools.lru_cache(maxsize=1024)
def regex_error(pattern: str) -> str | None:
    """Why RE2 (cel-cpp's, as Go's regexp) refuses ``pattern``, or None."""
    probe = compile_expression("''.matches(p)", ("p",))
    try:
        probe.evaluate({"p": pattern})
    except CelEvalError as err:
        return str(err).removeprefix("invalid regular expression: ")
    return None


def _literal_text(node: celast.Expr) -> str | None:
    """CEL source for a constant subtree (literals, and lists, maps and type conversions of
    them: what cel-go's optimizer folds), or None when it is not constant."""
    if node.kind == "const":
        value = node.value
        if node.name == "string":
            return json.dumps(value, ensure_ascii=False)
        if node.name == "bytes":
            return "b" + json.dumps(value.decode("latin-1"), ensure_ascii=True).replace(
                "\\u00", "\\x"
            )
        if node.name == "double":
            return repr(value) if math.isfinite(value) else None
        if node.name == "uint":
            return f"{value}u"
        return {"bool": "true" if value else "false", "null": "null"}.get(node.name, str(value))
    if node.kind in ("list", "map"):
        parts = [_literal_text(a) for a in node.args]
        if any(part is None for part in parts):
            return None
        if node.kind == "list":
            return "[" + ", ".join(str(p) for p in parts) + "]"
        pairs = zip(parts[0::2], parts[1::2], strict=True)
        return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
    convertible = node.kind == "call" and node.target is None and len(node.args) == 1
    if convertible and node.name in _CONVERSIONS:
        inner = _literal_text(node.args[0])
        return None if inner is None else f"{node.name}({inner})"
    return None


def _check_literals(source: str, ast: celast.CheckedAst) -> None:
    for node in celast.walk(ast.expr):
        if node.kind != "call":
            continue
        args = [*([node.target] if node.target is not None else []), *node.args]
        literal = args[-1] if args and args[-1].kind == "const" else None
        text = literal.value if literal is not None and literal.name == "string" else None
        where = _location(source, ast.positions.get(literal.id if literal else node.id, 0))
        if (
            node.name == "duration"
            and node.target is None
            and len(args) == 1
            and literal is not None
            and (text is None or not _GO_DURATION.match(text))
        ):  # a literal that is no duration string, an int included, does not convert
            raise CelCompileError(f"ERROR: {where}: invalid duration argument")
        one_text = text is not None and len(args) == 1 and node.target is None
        if one_text and node.name == "timestamp" and not _valid_timestamp(str(text)):
            raise CelCompileError(f"ERROR: {where}: invalid timestamp argument")
        if (
            text is not None
            and len(args) == 2
            and node.name == "matches"
            and regex_error(text) is not None
        ):
            raise CelCompileError(f"ERROR: {where}: invalid matches argument")
        pattern = node.args[0] if node.args else None
        if (
            node.name in ("find", "findAll")
            and node.target is not None
            and pattern is not None
            and pattern.kind == "const"
            and pattern.name == "string"
            and (problem := regex_error(pattern.value)) is not None
        ):
            raise CelCompileError(f"program instantiation failed: error parsing regexp: {problem}")
        folded = _literal_text(node) if node.name in _FOLDED_CHECKS else None
        if folded is not None and (problem := _constant_error(folded)) is not None:
            raise CelCompileError(f"program instantiation failed: {problem}")


@functools.lru_cache(maxsize=1024)
def _constant_error(text: str) -> str | None:
    """The error evaluating a constant expression, or None (also when it does not compile)."""
    try:
        expression = environment(()).compile(text)
    except RuntimeError:
        return None
    try:
        value = expression.eval(data={})
        if value.type() == T.ERROR:
            return _strip_status(str(value.value()))
    except (RuntimeError, TypeError, ValueError) as err:
        return _strip_status(str(err))
    return None


def _mask_literals(source: str) -> str:
    """``source`` with string and bytes literals and ``//`` comments blanked (same length)."""
    out, i, n = list(source), 0, len(source)
    while i < n:
        char = source[i]
        if char == "/" and source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
        elif char in "'\"":
            start = i
            while start > 0 and i - start < 2 and source[start - 1] in "rRbB":
                start -= 1
            raw = "r" in source[start:i].lower()
            quote = source[i : i + 3] if source.startswith(char * 3, i) else char
            end = i + len(quote)
            while end < n and not source.startswith(quote, end):
                if len(quote) == 1 and source[end] == "\n":
                    break
                end += 2 if source[end] == "\\" and not raw else 1
            end = min(n, end + len(quote))
        else:
            i += 1
            continue
        for j in range(i, end):
            if out[j] != "\n":
                out[j] = " "
        i = end
    return "".join(out)


_INDEX_CALL = re.compile(r"(?<=\.)(\s*)(indexOf|lastIndexOf|charAt|substring)(?=\s*\()")
_INTERNAL_CALL = re.compile(r"(?<![\w])(mpIdxOf|mpLastIdxOf|mpChAt|mpSubstrg)(?=\s*\()")


def _rename_index_calls(source: str) -> str:
    """Member calls of indexOf/lastIndexOf renamed to the internal functions (same length);
    CelCompileError, as cel-go reports it, where the source itself calls an internal name."""
    if not any(name in source for name in (*_RENAMED, *_INTERNAL_NAMES)):
        return source
    masked = _mask_literals(source)
    for match in _INTERNAL_CALL.finditer(masked):
        # cel-go places the error at the call's opening parenthesis.
        where = _location(source, masked.index("(", match.end()))
        raise CelCompileError(
            f"ERROR: {where}: undeclared reference to '{match.group(1)}' (in container '')"
        )
    renamed = list(source)
    for match in _INDEX_CALL.finditer(masked):
        start = match.start(2)
        renamed[start : match.end(2)] = _RENAMED[match.group(2)]
    return "".join(renamed)


def _restore_names(text: str, source: str, renamed: str) -> str:
    """An error about the renamed source, told about the source as written."""
    if renamed == source:
        return text
    for written, compiled in zip(source.splitlines(), renamed.splitlines(), strict=True):
        if written != compiled:
            text = text.replace(f" | {compiled}", f" | {written}")
    return text


def _public_calls(ast: celast.CheckedAst) -> celast.CheckedAst:
    """The checked tree with the internal function names back to indexOf/lastIndexOf."""

    def public(node: celast.Expr) -> celast.Expr:
        return dataclasses.replace(
            node,
            name=_INTERNAL_NAMES.get(node.name, node.name) if node.kind == "call" else node.name,
            target=public(node.target) if node.target is not None else None,
            args=tuple(map(public, node.args)),
            parts=tuple(map(public, node.parts)),
        )

    return dataclasses.replace(ast, expr=public(ast.expr))


# Functions the checker's environment declares but cannot run (see environment()).
_RUNTIME_ONLY = {*_INDEX_FUNCTIONS.values(), "cel.@mapInsert"}


@functools.lru_cache(maxsize=8192)
def _compile(source: str, variables: tuple[tuple[str, str], ...]) -> Program | CelCompileError:
    try:
        renamed = _rename_index_calls(source)
        env = environment(variables)
        expression = env.compile(renamed)
    except CelCompileError as err:
        return err
    except RuntimeError as err:
        text = _restore_names(_strip_status(str(err)), source, renamed)
        # cel-go's wording where cel-cpp's differs, as the API server reports it.
        text = text.replace(
            "has() argument must be a field selection", "invalid argument to has() macro"
        )
        # cel-cpp adds the struct's name to cel-go's "undefined field 'x'".
        text = re.sub(r"(undefined field '[^']*') not found in struct '[\w.]*'", r"\1", text)
        text = re.sub(
            r"\w+\(\) (?:first |second )?variable name must be a simple identifier",
            "argument must be a simple name",
            text,
        )
        return CelCompileError(text)
    serialized = expression.serialize()
    ast = celast.decode(serialized)
    if any(n.kind == "call" and n.name in _RUNTIME_ONLY for n in celast.walk(ast.expr)):
        env = environment(variables, runtime=True)
        expression = env.deserialize(serialized)
    ast = _public_calls(ast) if renamed != source else ast
    try:
        _post_check(source, ast)
        _check_literals(source, ast)
    except CelCompileError as err:
        return err
    return Program(source, expression, ast, env).edited(_optional_results(ast))


# Library functions whose Kubernetes result is an optional (see the format declarations).
_OPTIONAL_RESULTS = ("validate", "format.named")


def _optional_results(ast: celast.CheckedAst) -> dict[int, celast.CallEdit]:
    wrap = celast.CallEdit("optional.ofNonZeroValue", "optional_ofNonZeroValue", wrap=True)
    return {
        node.id: wrap
        for node in celast.walk(ast.expr)
        if node.kind == "call" and node.name in _OPTIONAL_RESULTS
    }


def compile_expression(
    source: str,
    variables: Iterable[str] = ("self",),
    map_variables: Iterable[str] = (),
    bindings: bool = False,
    typed_variables: Iterable[tuple[str, str]] = (),
) -> Program:
    """Parse and type-check once per (source, variables); CelCompileError with cel-go's text.

    ``typed_variables``: (name, message type in ``POOL``), so a misspelt field is a compile
    error. ``bindings``: allow ``cel.bind``, which the engine has (Modelplane uses it inside)
    and DRA selectors have, but Kubernetes does not give CRD rules."""
    if not isinstance(source, str):
        raise CelCompileError(f"must be a string, not {type(source).__name__}")
    declared = tuple(
        sorted(
            [(v, "dyn") for v in variables]
            + [(v, "map") for v in map_variables]
            + list(typed_variables)
        )
    )
    compiled = _compile(source, declared)
    if isinstance(compiled, CelCompileError):
        raise compiled
    if not bindings:
        _refuse_bindings(compiled)
    return compiled


_BIND_CALL = re.compile(r"(?<![\w.])cel\s*\.\s*bind\s*\(")


def _refuse_bindings(program: Program) -> None:
    """cel-go's errors for ``cel.bind`` where the bindings extension is not loaded (the
    Kubernetes environment): the macro's receiver and function are undeclared references."""
    # The macro expands into a comprehension over no elements with this iteration variable
    # (as optMap and optFlatMap do too: the call as written tells them apart).
    if not any(
        node.kind == "comprehension" and node.variables == ("#unused",)
        for node in celast.walk(program.ast.expr)
    ):
        return
    match = _BIND_CALL.search(_mask_literals(program.source))
    if match is None:
        return
    offset = match.start()
    raise CelCompileError(
        f"ERROR: {_location(program.source, offset)}: undeclared reference to 'cel' "
        "(in container '')"
    )


# ---------------------------------------------------------------------------------------------
# Names: the API server exposes property `my-field` to CEL as `my__dash__field`.

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
