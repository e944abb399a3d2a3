"""Validating a value against a Kubernetes structural OpenAPI v3 schema, as the API server does.

`check_value` walks the value and the schema together and returns (path, message) pairs: first
the OpenAPI ones (types, required, enum, bounds, formats, list types, unknown fields), then one
per failing `x-kubernetes-validations` rule. Paths use the API server's notation:
``spec.devices[0].attributes[model]``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import ipaddress
import json
import operator
import re
import uuid
from typing import Any

from modelplane_common import cel

from modelplane import celrules

JSON = dict[str, Any]
Issue = tuple[str, str]  # (field path, message)

INT64 = (-(2**63), 2**63 - 1)
INT32 = (-(2**31), 2**31 - 1)
CEL_REASONS = {
    "FieldValueInvalid": "",
    "FieldValueForbidden": "Forbidden: ",
    "FieldValueRequired": "Required value: ",
    "FieldValueDuplicate": "Duplicate value: ",
}


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _matches_type(kind: str, value: Any) -> bool:
    """Whether a decoded JSON value is of OpenAPI type ``kind`` (an integral float is an
    integer, any integer a number)."""
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, int):
        return kind in ("integer", "number")
    if isinstance(value, float):
        return kind == "number" or (kind == "integer" and value.is_integer())
    if isinstance(value, str):
        return kind == "string"
    if isinstance(value, list):
        return kind == "array"
    return kind == ("null" if value is None else "object")


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_format(fmt: str, value: Any) -> str | None:
    """An error for a value that does not match a format the API server checks."""
    if fmt in ("int32", "int64") and isinstance(value, int) and not isinstance(value, bool):
        low, high = INT32 if fmt == "int32" else INT64
        return None if low <= value <= high else f"must fit in {fmt}"
    if not isinstance(value, str):
        return None
    try:
        if fmt == "date-time":
            datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
            if "T" not in value.upper():
                raise ValueError
        elif fmt == "date":
            datetime.date.fromisoformat(value)
        elif fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "uuid":
            uuid.UUID(value)
        elif fmt == "ipv4":
            ipaddress.IPv4Address(value)
        elif fmt == "ipv6":
            ipaddress.IPv6Address(value)
        elif fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
        else:
            return None
    except ValueError:
        return f"must be of format {fmt}"
    return None


@dataclasses.dataclass
class _Walk:
    """State of one validation: the schema issues, then the rule issues."""

    issues: list[Issue] = dataclasses.field(default_factory=list)
    rule_issues: list[Issue] = dataclasses.field(default_factory=list)

    def add(self, path: str, message: str) -> None:
        self.issues.append((path, message))


# What the API server says instead of running any x-kubernetes-validations rule when the
# object already has a blocking schema error: a missing required field, a value outside its
# enum, too long, too many, or of the wrong type (the errors the rules' cost bounds and types
# rely on). Other errors (a bound like maximum, a pattern, a duplicate) let the rules run.
RULES_NOT_CHECKED = (
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation"
)
_BLOCKING = ("Required value", "Unsupported value", "Too long", "Too many")
_WRONG_TYPE = (": must be of type ", ": must be an integer or a string")


def check_value(schema: JSON, value: Any) -> list[Issue]:
    """Every problem with ``value`` under ``schema``."""
    schema_issues, rule_issues = check_parts(schema, value)
    return schema_issues + after_schema(schema, schema_issues, rule_issues)


def check_parts(schema: JSON, value: Any) -> tuple[list[Issue], list[Issue]]:
    """The schema's issues and, apart, its rules' issues."""
    walk = _Walk()
    _check(walk, schema, value, "")
    return walk.issues, walk.rule_issues


def after_schema(schema: JSON, schema_issues: list[Issue], rule_issues: list[Issue]) -> list[Issue]:
    """The rules' issues; or, for an object with a blocking schema error, the API server's note
    that its rules were not run. (An unknown field stops the request earlier, at strict
    decoding: no rule runs and there is no note.)"""
    messages = [message for _, message in schema_issues]
    if any(m.startswith("unknown field") for m in messages):
        return []
    if not any(m.startswith(_BLOCKING) or any(t in m for t in _WRONG_TYPE) for m in messages):
        return rule_issues
    return [("", RULES_NOT_CHECKED)] if _has_rules(schema) else []


def _has_rules(schema: Any) -> bool:
    if isinstance(schema, dict):
        return bool(schema.get("x-kubernetes-validations")) or any(
            _has_rules(sub) for key, sub in schema.items() if key != "x-kubernetes-validations"
        )
    return isinstance(schema, list) and any(_has_rules(sub) for sub in schema)


def _check(walk: _Walk, schema: JSON, value: Any, path: str) -> None:
    """Validate one node; a value of the wrong type gets no further checks (nor rules)."""
    if value is None:
        if not schema.get("nullable"):
            walk.add(path, f"Invalid value: null: must be of type {schema.get('type', 'any')}")
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _matches_type("integer", value)):
            walk.add(path, f"Invalid value: {_short(value)}: must be an integer or a string")
            return
    elif (kind := schema.get("type")) and not _matches_type(kind, value):
        walk.add(path, f"Invalid value: {_short(value)}: must be of type {kind}")
        return
    _check_values(walk, schema, value, path)
    _check_junctors(walk, schema, value, path)
    if isinstance(value, dict):
        _check_object(walk, schema, value, path)
    elif isinstance(value, list):
        _check_array(walk, schema, value, path)
    _check_rules(walk, schema, value, path)


def _branch_issues(schema: Any, value: Any, path: str) -> list[Issue]:
    branch = _Walk()
    if isinstance(schema, dict):
        _check_values(branch, schema, value, path)
    return branch.issues


def _check_junctors(walk: _Walk, schema: JSON, value: Any, path: str) -> None:
    """allOf, anyOf, oneOf and not: value validations only, as structural schemas allow."""
    for sub in schema.get("allOf") or []:
        walk.issues.extend(_branch_issues(sub, value, path))
    if branches := schema.get("anyOf"):
        results = [_branch_issues(sub, value, path) for sub in branches]
        if all(results):
            first = "; ".join(f"{p}: {m}" for issues in results for p, m in issues[:1])
            walk.add(path, f"Invalid value: must match at least one schema in anyOf: {first}")
    if branches := schema.get("oneOf"):
        passing = sum(not _branch_issues(sub, value, path) for sub in branches)
        if passing != 1:
            walk.add(
                path, f"Invalid value: must match exactly one schema in oneOf, matches {passing}"
            )
    if isinstance(schema.get("not"), dict) and not _branch_issues(schema["not"], value, path):
        walk.add(path, "Invalid value: must not match the schema in not")


# (bound, its exclusive flag, how a value lies beyond it, the wording of the wanted relation)
_BOUNDS = (
    ("minimum", "exclusiveMinimum", operator.lt, "greater than"),
    ("maximum", "exclusiveMaximum", operator.gt, "less than"),
)


def _check_values(walk: _Walk, schema: JSON, value: Any, path: str) -> None:
    """Value validations (no structure): enum, bounds, lengths, pattern, format."""
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_short(v) for v in schema["enum"])
        walk.add(path, f"Unsupported value: {_short(value)}: supported values: {supported}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        for bound, exclusive, beyond, relation in _BOUNDS:
            if bound in schema:
                limit, strict = schema[bound], schema.get(exclusive)
                if beyond(value, limit) or (strict and value == limit):
                    wanted = relation if strict else f"{relation} or equal to"
                    walk.add(path, f"Invalid value: {value}: should be {wanted} {limit}")
        if schema.get("multipleOf") and value % schema["multipleOf"]:
            walk.add(path, f"Invalid value: {value}: must be a multiple of {schema['multipleOf']}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            walk.add(path, f"Too long: may not be more than {schema['maxLength']} characters")
        if "minLength" in schema and len(value) < schema["minLength"]:
            walk.add(
                path,
                f"Invalid value: {_short(value)}: should be at least "
                f"{schema['minLength']} chars long",
            )
        if "pattern" in schema and not _search(schema["pattern"], value):
            walk.add(path, f"Invalid value: {_short(value)}: should match '{schema['pattern']}'")
    if (fmt := schema.get("format")) and (problem := _check_format(fmt, value)):
        walk.add(path, f"Invalid value: {_short(value)}: {problem}")
    if isinstance(value, list | dict):
        noun, most, least = (
            ("items", "maxItems", "minItems")
            if isinstance(value, list)
            else ("properties", "maxProperties", "minProperties")
        )
        if most in schema and len(value) > schema[most]:
            walk.add(path, f"Too many: {len(value)}: must have at most {schema[most]} {noun}")
        if least in schema and len(value) < schema[least]:
            walk.add(
                path, f"Invalid value: {len(value)}: must have at least {schema[least]} {noun}"
            )
    if isinstance(value, dict):
        for name in schema.get("required") or []:
            if name not in value:
                walk.add(join(path, name), "Required value")


def _search(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return True  # check_definition reports the bad pattern itself


def _check_object(walk: _Walk, schema: JSON, value: JSON, path: str) -> None:
    properties: JSON = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") or extra is True
    embedded = schema.get("x-kubernetes-embedded-resource")
    for name, item in value.items():
        child = f"{path}[{name}]" if isinstance(extra, dict) else join(path, name)
        if name in properties:
            _check(walk, properties[name], item, child)
        elif isinstance(extra, dict):
            _check(walk, extra, item, child)
        elif embedded and name in ("apiVersion", "kind", "metadata"):
            continue
        elif not keep_unknown:
            walk.add(child, f'unknown field "{name}" (not declared in the schema)')


def _check_array(walk: _Walk, schema: JSON, value: list[Any], path: str) -> None:
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _check(walk, items, item, f"{path}[{index}]")
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "set" or schema.get("uniqueItems"):
        seen: list[Any] = []
        for index, item in enumerate(value):
            if item in seen:
                walk.add(f"{path}[{index}]", f"Duplicate value: {_short(item)}")
            else:
                seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        defaults = {k: ((items or {}).get("properties") or {}).get(k, {}) for k in keys}
        seen_keys: set[str] = set()
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                continue
            key = {k: item.get(k, defaults[k].get("default")) for k in keys}
            encoded = json.dumps(key, sort_keys=True)
            if encoded in seen_keys:
                walk.add(f"{path}[{index}]", f"Duplicate value: {encoded}")
            seen_keys.add(encoded)


def _check_rules(walk: _Walk, schema: JSON, value: Any, path: str) -> None:
    rules = schema.get("x-kubernetes-validations") or []
    if not rules:
        return
    bound: Any = None
    for rule in rules:
        if not isinstance(rule, dict):
            continue  # check_definition reports malformed rules
        source = rule.get("rule")
        try:
            compiled = celrules.compile_rule(source)
        except celrules.RuleError as err:
            walk.rule_issues.append((path, f"Invalid value: rule {source!r}: {err}"))
            continue
        if compiled.uses_old_self:
            if rule.get("optionalOldSelf") is not True:
                continue  # transition rules run on update; validate models a create
            # optionalOldSelf rules also run on create, with oldSelf an empty optional.
            compiled = celrules.compile_rule(f"cel.bind(oldSelf, optional.none(), (\n{source}\n))")
        if bound is None:
            bound = celrules.to_cel(value, schema)
        issue = evaluate_rule(rule, celrules.for_schema(compiled, schema), bound, schema)
        if issue is not None:
            target = path
            if field_path := rule.get("fieldPath"):
                target = path + (
                    field_path if field_path.startswith((".", "[")) else "." + field_path
                )
            walk.rule_issues.append((target.lstrip("."), issue))


def evaluate_rule(rule: JSON, compiled: celrules.Compiled, bound: Any, schema: JSON) -> str | None:
    """The API server's message for a failing rule, or None when it holds."""
    try:
        result = compiled.evaluate({"self": bound})
    except cel.CelEvalError as err:
        return f"Invalid value: {celrules.describe_error(err)} evaluating rule: {rule['rule']}"
    if result is True:
        return None
    prefix = CEL_REASONS.get(rule.get("reason", "FieldValueInvalid"), "")
    message = rule.get("message") or f"failed rule: {rule['rule']}"
    if expression := rule.get("messageExpression"):
        try:
            custom_rule = celrules.for_schema(celrules.compile_rule(expression), schema)
            custom = custom_rule.evaluate({"self": bound})
            if isinstance(custom, str) and custom.strip() and "\n" not in custom:
                message = str(custom)
        except (celrules.RuleError, cel.CelEvalError):
            pass  # the API server falls back to message when messageExpression fails
    return prefix + message
